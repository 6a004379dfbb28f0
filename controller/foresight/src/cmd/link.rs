//! `foresight link down|up <switch>:<port>`: tell a running controller a
//! fabric link failed or is back (BMv2 reports no port status over
//! P4Runtime, so the operator does). Through the admin HTTP endpoint.

use clap::{Args, ValueEnum};

use super::admin_client::Admin;
use super::client_tls::ClientTls;
use super::controller::DEFAULT_HTTP;
use crate::daemon::monitoring::api::LinkChangeView;
use crate::daemon::northbound::admin_token::AdminToken;

#[derive(Clone, Copy, ValueEnum)]
pub enum LinkState {
    /// The link failed: re-plan the reservations on it, drop it from routes
    /// and ECMP groups.
    Down,
    /// The link is back: restore routes and ECMP groups, re-plan the
    /// reservations that lost their path to a down link.
    Up,
}

#[derive(Args)]
pub struct LinkCmd {
    /// What happened to the link.
    state: LinkState,
    /// One end of the link, `<switch>:<port>` (either end names the link).
    link: String,
    /// The controller's metrics/admin HTTP address.
    #[arg(long, default_value = DEFAULT_HTTP)]
    http: String,
    #[command(flatten)]
    tls: ClientTls,
    /// File with the operator's bearer token, when the controller has one
    /// (its --admin-token-file).
    #[arg(long, value_name = "FILE", env = "FORESIGHT_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<std::path::PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `<switch>:<port>`, checked before anything is sent.
fn parse_end(text: &str) -> anyhow::Result<(&str, u32)> {
    let (node, port) = text
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("{text:?}: want <switch>:<port>, e.g. leaf1:3"))?;
    let valid = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if node.is_empty() || !node.chars().all(valid) {
        anyhow::bail!("{text:?}: {node:?} is not a switch name");
    }
    let port = port
        .parse()
        .map_err(|_| anyhow::anyhow!("{text:?}: port {port:?} is not a number"))?;
    Ok((node, port))
}

pub fn run(cmd: LinkCmd) -> anyhow::Result<()> {
    let (node, port) = parse_end(&cmd.link)?;
    let verb = match cmd.state {
        LinkState::Down => "down",
        LinkState::Up => "up",
    };
    let token = cmd
        .admin_token_file
        .as_deref()
        .map(AdminToken::from_file)
        .transpose()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let admin = Admin {
        addr: &cmd.http,
        tls: &cmd.tls,
    };
    let body =
        runtime.block_on(admin.post(&format!("/v1/links/{node}:{port}/{verb}"), token.as_ref()))?;
    if cmd.json {
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(());
    }
    let v: LinkChangeView = serde_json::from_slice(&body).map_err(|e| {
        anyhow::anyhow!(
            "{} did not answer with a Foresight link change ({e}); is --http the controller's admin address?",
            cmd.http
        )
    })?;
    if !v.changed {
        println!("link {} already {}; nothing changed", v.link, v.state);
        return Ok(());
    }
    println!(
        "link {} is {}: {} reservations re-planned, {} switch entities changed",
        v.link,
        v.state,
        v.replanned.len(),
        v.switch_changes
    );
    for r in &v.replanned {
        println!(
            "  {} -> {} (revision {}){}",
            r.id,
            r.status,
            r.revision,
            r.advisory
                .as_deref()
                .map(|a| format!(": {a}"))
                .unwrap_or_default()
        );
    }
    for e in &v.switch_errors {
        println!("  warning: {e} (reconciled when the switch is back)");
    }
    if !v.links_down.is_empty() {
        println!("links down: {}", v.links_down.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_end;

    #[test]
    fn link_ends_are_checked_before_anything_is_sent() {
        assert_eq!(parse_end("leaf1:3").unwrap(), ("leaf1", 3));
        assert!(parse_end("leaf1")
            .unwrap_err()
            .to_string()
            .contains("<switch>:<port>"));
        assert!(parse_end("leaf1:x")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
        assert!(parse_end(":3")
            .unwrap_err()
            .to_string()
            .contains("not a switch name"));
        assert!(parse_end("a/b:3").is_err());
    }
}
