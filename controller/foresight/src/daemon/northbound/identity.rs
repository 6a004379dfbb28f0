//! Who is asking, with mutual TLS on NDSP: the tenant is the client
//! certificate's identity (its subject common name, else its first DNS
//! name), not what the request header says. A request whose header names
//! another tenant is `PERMISSION_DENIED` and changes nothing, unless the
//! certificate is an operator's (`--operators`): operators may act for any
//! tenant. Without TLS configured the header is trusted, as before (the
//! NDSP port listens on loopback by default). The admin/metrics port takes
//! the same certificates: every connection needs a client certificate, and
//! what it may read or write depends on the certificate's role
//! (`http/access.rs`). A certificate of the scrape role (`--scrapers`)
//! reads `/metrics` and nothing else: it gets no NDSP answer at all.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use ndsp::proto;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Status};

/// The NDSP server's TLS settings, the admin port's TLS acceptor (the same
/// certificate and client CA), the operator identities and those of the
/// scrape role.
#[derive(Clone)]
pub struct Mtls {
    pub server: ServerTlsConfig,
    pub http: tokio_rustls::TlsAcceptor,
    pub operators: BTreeSet<String>,
    pub scrapers: BTreeSet<String>,
}

impl Mtls {
    /// Server certificate and key, the CA that signs client certificates,
    /// and the identities of the two roles (an identity has one role).
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: &Path,
        operators: BTreeSet<String>,
        scrapers: BTreeSet<String>,
    ) -> anyhow::Result<Mtls> {
        if let Some(both) = operators.intersection(&scrapers).next() {
            anyhow::bail!(
                "{both:?} is in both --operators and --scrapers; the scrape role is for a certificate that only reads /metrics"
            );
        }
        let read = |p: &Path, what: &str| {
            std::fs::read(p).with_context(|| format!("{what} {}", p.display()))
        };
        let (cert_pem, key_pem, ca_pem) = (
            read(cert, "--tls-cert")?,
            read(key, "--tls-key")?,
            read(client_ca, "--tls-client-ca")?,
        );
        let http = http_acceptor(&cert_pem, &key_pem, &ca_pem)?;
        let server = ServerTlsConfig::new()
            .identity(Identity::from_pem(cert_pem, key_pem))
            .client_ca_root(Certificate::from_pem(ca_pem));
        Ok(Mtls {
            server,
            http,
            operators,
            scrapers,
        })
    }

    /// The identity of a client certificate, and its role.
    pub fn caller(&self, cert_der: &[u8]) -> Result<Caller, Status> {
        let identity = identity_of(cert_der)?;
        Ok(Caller {
            operator: self.operators.contains(&identity),
            scraper: self.scrapers.contains(&identity),
            identity,
        })
    }
}

/// Who is on an admin (HTTP) connection with mutual TLS.
#[derive(Clone, Debug)]
pub struct Caller {
    pub identity: String,
    pub operator: bool,
    /// The scrape role: `/metrics` only.
    pub scraper: bool,
}

/// rustls for the admin port: our certificate, and client certificates
/// required and verified against the client CA.
fn http_acceptor(
    cert_pem: &[u8],
    key_pem: &[u8],
    ca_pem: &[u8],
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("--tls-cert: not PEM certificates")?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).context("--tls-key: not a PEM private key")?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(ca.context("--tls-client-ca: not PEM certificates")?)
            .context("--tls-client-ca: not a CA certificate")?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider.clone())
            .build()
            .context("--tls-client-ca: no usable CA")?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .context("--tls-cert/--tls-key: not a certificate and its key")?;
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

/// The identity a client certificate proves.
pub fn identity_of(cert_der: &[u8]) -> Result<String, Status> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert_der)
        .map_err(|e| Status::unauthenticated(format!("client certificate: not X.509 ({e})")))?;
    if let Some(cn) = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
    {
        return Ok(cn.to_string());
    }
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = name {
                return Ok(d.to_string());
            }
        }
    }
    Err(Status::unauthenticated(
        "client certificate: no subject common name or DNS name to take the tenant from",
    ))
}

/// NDSP requests name their tenant in the header.
pub trait Headed {
    fn header_tenant(&self) -> &str;
}

macro_rules! headed {
    ($($t:ty),*) => {$(
        impl Headed for $t {
            fn header_tenant(&self) -> &str {
                self.header.as_ref().map_or("", |h| h.tenant.as_str())
            }
        }
    )*};
}

headed!(
    proto::HandshakeRequest,
    proto::RegisterTopologyRequest,
    proto::SubmitDemandRequest,
    proto::SubmitCollectiveRequest,
    proto::CancelRequest,
    proto::ReportDeviationRequest,
    proto::WatchEventsRequest,
    proto::GetReservationRequest,
    proto::ListReservationsRequest
);

/// With mTLS: the request acts for the certificate's tenant, or the
/// certificate is an operator's.
pub fn authorize<T: Headed>(mtls: Option<&Mtls>, request: &Request<T>) -> Result<(), Status> {
    let Some(mtls) = mtls else {
        return Ok(());
    };
    let certs = request
        .peer_certs()
        .ok_or_else(|| Status::unauthenticated("a client certificate is required"))?;
    let leaf = certs
        .first()
        .ok_or_else(|| Status::unauthenticated("a client certificate is required"))?;
    let identity = identity_of(leaf.as_ref())?;
    if mtls.operators.contains(&identity) {
        return Ok(());
    }
    if mtls.scrapers.contains(&identity) {
        return Err(Status::permission_denied(format!(
            "{identity:?} has the scrape role (--scrapers): it reads the admin port's /metrics, not NDSP"
        )));
    }
    let tenant = request.get_ref().header_tenant();
    if tenant != identity {
        return Err(Status::permission_denied(format!(
            "header.tenant: {tenant:?} is not the client certificate's tenant {identity:?} (only operators act for other tenants)"
        )));
    }
    Ok(())
}
