//! The CLI's TLS to the controller, one set of flags for both of its
//! ports (NDSP and admin): `--tls-ca` (the CA that signed the
//! controller's certificate) turns TLS on; `--tls-cert`/`--tls-key` are
//! this client's certificate, which a controller with `--tls-client-ca`
//! requires. Each flag has an environment variable, so an operator sets
//! them once for every command.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

#[derive(Args, Clone, Debug, Default)]
pub struct ClientTls {
    /// Talk TLS to the controller: the CA (PEM) that signed its certificate.
    #[arg(long, value_name = "FILE", env = "FORESIGHT_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a controller that requires one
    /// (its common name is the tenant, or an operator's; with --tls-key).
    #[arg(long, value_name = "FILE", env = "FORESIGHT_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", env = "FORESIGHT_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
}

/// The PEM files read, checked to go together.
struct Pems {
    ca: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl ClientTls {
    /// Whether TLS is on.
    pub fn enabled(&self) -> bool {
        self.tls_ca.is_some()
    }

    fn pems(&self) -> anyhow::Result<Option<Pems>> {
        let read = |p: &Path, flag: &str| {
            std::fs::read(p).with_context(|| format!("{flag} {}", p.display()))
        };
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                read(cert, "--tls-cert (FORESIGHT_TLS_CERT)")?,
                read(key, "--tls-key (FORESIGHT_TLS_KEY)")?,
            )),
            (Some(_), None) => bail!("--tls-cert needs --tls-key (or FORESIGHT_TLS_KEY): the certificate's private key"),
            (None, Some(_)) => bail!("--tls-key needs --tls-cert (or FORESIGHT_TLS_CERT): the certificate it is the key of"),
            (None, None) => None,
        };
        let Some(ca) = &self.tls_ca else {
            if identity.is_some() {
                bail!("--tls-cert/--tls-key need --tls-ca (or FORESIGHT_TLS_CA): the CA that signed the controller's certificate");
            }
            return Ok(None);
        };
        Ok(Some(Pems {
            ca: read(ca, "--tls-ca (FORESIGHT_TLS_CA)")?,
            identity,
        }))
    }

    /// The NDSP (gRPC) client's TLS settings; `None` for plain text.
    pub fn grpc(&self) -> anyhow::Result<Option<ClientTlsConfig>> {
        let Some(pems) = self.pems()? else {
            return Ok(None);
        };
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pems.ca));
        if let Some((cert, key)) = pems.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        Ok(Some(tls))
    }

    /// The admin (HTTP) client's TLS settings; `None` for plain text.
    pub fn rustls(&self) -> anyhow::Result<Option<Arc<rustls::ClientConfig>>> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let Some(pems) = self.pems()? else {
            return Ok(None);
        };
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(&pems.ca) {
            roots
                .add(ca.context("--tls-ca: not PEM certificates")?)
                .context("--tls-ca: not a CA certificate")?;
        }
        if roots.is_empty() {
            bail!("--tls-ca: no certificate in the file");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots);
        let config = match pems.identity {
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(&cert)
                    .collect::<Result<Vec<_>, _>>()
                    .context("--tls-cert: not PEM certificates")?;
                let key = PrivateKeyDer::from_pem_slice(&key)
                    .context("--tls-key: not a PEM private key")?;
                builder
                    .with_client_auth_cert(chain, key)
                    .context("--tls-cert/--tls-key: not a certificate and its key")?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(Some(Arc::new(config)))
    }
}

/// The name a controller's certificate must hold for `addr` (`host:port`,
/// perhaps with a scheme): its host, a DNS name or an IP address.
pub fn server_name(addr: &str) -> anyhow::Result<rustls::pki_types::ServerName<'static>> {
    let bare = addr
        .strip_prefix("http://")
        .or_else(|| addr.strip_prefix("https://"))
        .unwrap_or(addr);
    let host = bare.rsplit_once(':').map_or(bare, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string())
        .with_context(|| format!("{addr}: {host:?} is not a host name or address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_without_its_key_or_ca_is_refused_naming_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.pem");
        std::fs::write(&file, "not PEM").unwrap();
        let tls = |ca: bool, cert: bool, key: bool| ClientTls {
            tls_ca: ca.then(|| file.clone()),
            tls_cert: cert.then(|| file.clone()),
            tls_key: key.then(|| file.clone()),
        };
        assert!(tls(false, false, false).grpc().unwrap().is_none());
        assert!(tls(false, false, false).rustls().unwrap().is_none());
        let e = tls(true, true, false).grpc().unwrap_err().to_string();
        assert!(e.contains("--tls-cert needs --tls-key"), "{e}");
        let e = tls(true, false, true).rustls().unwrap_err().to_string();
        assert!(e.contains("--tls-key needs --tls-cert"), "{e}");
        let e = tls(false, true, true).grpc().unwrap_err().to_string();
        assert!(e.contains("need --tls-ca"), "{e}");
        let e = tls(true, false, false).rustls().unwrap_err().to_string();
        assert!(e.contains("--tls-ca: no certificate"), "{e}");
        let missing = ClientTls {
            tls_ca: Some(dir.path().join("nope.pem")),
            ..ClientTls::default()
        };
        let e = format!("{:#}", missing.grpc().unwrap_err());
        assert!(e.contains("--tls-ca") && e.contains("nope.pem"), "{e}");
    }

    #[test]
    fn the_server_name_is_the_addresss_host() {
        let name = |a: &str| server_name(a).map(|n| n.to_str().to_string());
        assert_eq!(name("127.0.0.1:9090").unwrap(), "127.0.0.1");
        assert_eq!(
            name("https://foresight.example:50051").unwrap(),
            "foresight.example"
        );
        assert_eq!(name("[::1]:9090").unwrap(), "::1");
        assert!(name("bad name:1").is_err());
    }
}
