//! The operator's bearer token for the admin endpoint's writes
//! (`POST /v1/links/...`): read from a file only the controller's user may
//! read, so it never shows in a process list or a shell history, and
//! compared in constant time.

use std::path::Path;

/// Shortest token accepted: guessing must not be an option.
pub const MIN_TOKEN_BYTES: usize = 16;

#[derive(Clone)]
pub struct AdminToken {
    token: Vec<u8>,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

impl AdminToken {
    /// The token in `path`: one line of at least [`MIN_TOKEN_BYTES`]
    /// printable ASCII characters (a trailing newline is dropped), in a
    /// file that neither its group nor others may read or write.
    pub fn from_file(path: &Path) -> anyhow::Result<AdminToken> {
        use std::os::unix::fs::PermissionsExt;
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| anyhow::anyhow!("admin token file {shown}: {e}"))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            anyhow::bail!(
                "admin token file {shown}: mode {mode:o} lets other users read or change it; chmod 600 it"
            );
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("admin token file {shown}: {e}"))?;
        AdminToken::parse(&text).map_err(|why| anyhow::anyhow!("admin token file {shown}: {why}"))
    }

    /// The token in a file's text (see [`AdminToken::from_file`]).
    pub fn parse(text: &str) -> Result<AdminToken, String> {
        let token = text.strip_suffix('\n').unwrap_or(text);
        let token = token.strip_suffix('\r').unwrap_or(token);
        if token.len() < MIN_TOKEN_BYTES {
            return Err(format!(
                "the token has {} characters; at least {MIN_TOKEN_BYTES} are needed",
                token.len()
            ));
        }
        if let Some(c) = token.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(format!(
                "the token holds {c:?}; use printable ASCII without spaces, on one line"
            ));
        }
        Ok(AdminToken {
            token: token.as_bytes().to_vec(),
        })
    }

    /// The token as an `Authorization` header value sends it.
    pub fn bearer(&self) -> String {
        format!("Bearer {}", String::from_utf8_lossy(&self.token))
    }

    /// Whether an `Authorization` header value carries this token. The
    /// time taken does not depend on where a wrong token differs.
    pub fn admits(&self, authorization: &[u8]) -> bool {
        let Some(offered) = authorization.strip_prefix(b"Bearer ") else {
            return false;
        };
        let mut differ = offered.len() ^ self.token.len();
        for (i, &b) in self.token.iter().enumerate() {
            differ |= usize::from(b ^ offered.get(i).copied().unwrap_or(!b));
        }
        differ == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_exactly_its_own_bearer_token() {
        let t = AdminToken::parse("0123456789abcdef-operator\n").unwrap();
        assert!(t.admits(t.bearer().as_bytes()));
        assert!(t.admits(b"Bearer 0123456789abcdef-operator"));
        for wrong in [
            &b"Bearer 0123456789abcdef-operatoR"[..],
            b"Bearer 0123456789abcdef-operato",
            b"Bearer 0123456789abcdef-operatorX",
            b"bearer 0123456789abcdef-operator",
            b"0123456789abcdef-operator",
            b"Bearer ",
            b"",
        ] {
            assert!(!t.admits(wrong), "{}", String::from_utf8_lossy(wrong));
        }
    }

    #[test]
    fn short_or_unprintable_tokens_are_refused_naming_why() {
        assert!(AdminToken::parse("short\n")
            .unwrap_err()
            .contains("at least 16"));
        assert!(AdminToken::parse("0123456789 abcdef\n")
            .unwrap_err()
            .contains("' '"));
        assert!(AdminToken::parse("0123456789abcdef\nsecond line\n").is_err());
        assert!(AdminToken::parse("0123456789abcdef\r\n").is_ok());
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "0123456789abcdef-operator\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = AdminToken::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(AdminToken::from_file(&path).is_ok());
        let missing = AdminToken::from_file(&dir.path().join("nope")).unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
    }
}
