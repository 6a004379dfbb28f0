//! Who is asking, with mutual TLS on NDSP: the tenant is the client
//! certificate's identity (its subject common name, else its first DNS
//! name), not what the request header says. A request whose header names
//! another tenant is `PERMISSION_DENIED` and changes nothing, unless the
//! certificate is an operator's (`--operators`): operators may act for any
//! tenant. Without TLS configured the header is trusted, as before (the
//! NDSP port listens on loopback by default).

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use ndsp::proto;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic::{Request, Status};

/// The NDSP server's TLS settings and the operator identities.
#[derive(Clone)]
pub struct Mtls {
    pub server: ServerTlsConfig,
    pub operators: BTreeSet<String>,
}

impl Mtls {
    /// Server certificate and key, and the CA that signs client certificates.
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: &Path,
        operators: BTreeSet<String>,
    ) -> anyhow::Result<Mtls> {
        let read = |p: &Path, what: &str| {
            std::fs::read(p).with_context(|| format!("{what} {}", p.display()))
        };
        let server = ServerTlsConfig::new()
            .identity(Identity::from_pem(
                read(cert, "--tls-cert")?,
                read(key, "--tls-key")?,
            ))
            .client_ca_root(Certificate::from_pem(read(client_ca, "--tls-client-ca")?));
        Ok(Mtls { server, operators })
    }
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
    let tenant = request.get_ref().header_tenant();
    if tenant != identity {
        return Err(Status::permission_denied(format!(
            "header.tenant: {tenant:?} is not the client certificate's tenant {identity:?} (only operators act for other tenants)"
        )));
    }
    Ok(())
}
