//! Certificates made by `openssl` (the command, as an operator would make
//! them): a CA and the leaves it signs, each written to files.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the `openssl` command runs here.
pub fn available() -> bool {
    Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate's files and their text.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// (certificate, key) PEM.
    pub pem: (String, String),
}

impl Issued {
    fn read(cert: PathBuf, key: PathBuf) -> Issued {
        let pem = (
            std::fs::read_to_string(&cert).unwrap(),
            std::fs::read_to_string(&key).unwrap(),
        );
        Issued { cert, key, pem }
    }

    pub fn cert_arg(&self) -> String {
        self.cert.display().to_string()
    }

    pub fn key_arg(&self) -> String {
        self.key.display().to_string()
    }
}

/// A CA in `dir`, named `name` (its files are `<name>.pem`, `<name>.key`).
pub struct Ca {
    dir: PathBuf,
    name: String,
    pub issued: Issued,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        let (cert, key) = (format!("{name}.pem"), format!("{name}.key"));
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &cert,
                "-days",
                "2",
                "-subj",
                &format!("/CN={name}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        Ca {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            issued: Issued::read(dir.join(cert), dir.join(key)),
        }
    }

    /// A client certificate whose common name is `cn`.
    pub fn client(&self, cn: &str) -> Issued {
        self.leaf(cn, "extendedKeyUsage=clientAuth")
    }

    /// A server certificate for 127.0.0.1 and localhost.
    pub fn server(&self, cn: &str) -> Issued {
        self.leaf(
            cn,
            "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost",
        )
    }

    fn leaf(&self, cn: &str, extensions: &str) -> Issued {
        let file = format!("{}-{cn}", self.name);
        let (cert, key, csr, ext) = (
            format!("{file}.pem"),
            format!("{file}.key"),
            format!("{file}.csr"),
            format!("{file}.ext"),
        );
        std::fs::write(
            self.dir.join(&ext),
            format!(
                "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{extensions}\n"
            ),
        )
        .unwrap();
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN={cn}"),
            ],
        );
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &format!("{}.pem", self.name),
                "-CAkey",
                &format!("{}.key", self.name),
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "1",
                "-extfile",
                &ext,
            ],
        );
        Issued::read(self.dir.join(cert), self.dir.join(key))
    }
}
