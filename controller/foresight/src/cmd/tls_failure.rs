//! TLS failures between the CLI and the controller, named for what they
//! are: the controller refused this client's certificate, this client
//! refused the controller's, or one side speaks TLS and the other does
//! not. None of them gets better by retrying, so the CLI reports them at
//! once instead of trying other replicas or resending.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use rustls::{AlertDescription, CertificateError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Why a TLS session with the controller did not come about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsFailure {
    /// The controller ended the handshake over this client's certificate
    /// (or its absence).
    ClientCertificateRefused(String),
    /// This client did not accept the controller's certificate.
    ServerCertificateRefused(String),
    /// The handshake failed otherwise (no protocol or cipher in common).
    Handshake(String),
    /// The controller speaks TLS on this port and this client did not.
    ServerSpeaksTls,
    /// This client spoke TLS and the controller did not answer in TLS.
    ServerSpeaksPlainText,
}

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsFailure::ClientCertificateRefused(why) => write!(
                f,
                "the controller refused this client's certificate: {why}"
            ),
            TlsFailure::ServerCertificateRefused(why) => {
                write!(f, "the controller's certificate is not accepted: {why}")
            }
            TlsFailure::Handshake(why) => write!(f, "the TLS handshake failed: {why}"),
            TlsFailure::ServerSpeaksTls => f.write_str(
                "the controller speaks TLS on this port and this client did not: pass --tls-ca (and --tls-cert/--tls-key), or set FORESIGHT_TLS_CA, FORESIGHT_TLS_CERT, FORESIGHT_TLS_KEY",
            ),
            TlsFailure::ServerSpeaksPlainText => f.write_str(
                "this client spoke TLS and the controller did not answer in TLS: it serves plain text on this port (drop --tls-ca / unset FORESIGHT_TLS_CA, or start the controller with --tls-cert)",
            ),
        }
    }
}

impl Error for TlsFailure {}

/// The TLS failure somewhere in an error's chain of causes, if any.
pub fn classify(error: &(dyn Error + 'static)) -> Option<TlsFailure> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(failure) = of_one(e) {
            return Some(failure);
        }
        // An `io::Error` wrapping another error does not list it as its
        // source: look inside.
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            if let Some(failure) = classify(inner) {
                return Some(failure);
            }
        }
        next = e.source();
    }
    None
}

/// The TLS failure in an anyhow error's chain, if any.
pub fn classify_anyhow(error: &anyhow::Error) -> Option<TlsFailure> {
    error.chain().find_map(classify)
}

fn of_one(e: &(dyn Error + 'static)) -> Option<TlsFailure> {
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        // tokio-rustls: the peer closed the connection mid-handshake,
        // which a TLS server does not do without an alert.
        if io.kind() == std::io::ErrorKind::UnexpectedEof && io.to_string().contains("handshake") {
            return Some(TlsFailure::ServerSpeaksPlainText);
        }
        return None;
    }
    let tls = e.downcast_ref::<rustls::Error>()?;
    Some(match tls {
        rustls::Error::AlertReceived(alert) => alert_failure(*alert),
        rustls::Error::InvalidCertificate(c) => {
            TlsFailure::ServerCertificateRefused(server_certificate(c))
        }
        rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => TlsFailure::ServerSpeaksPlainText,
        rustls::Error::NoCertificatesPresented => {
            TlsFailure::ServerCertificateRefused("the controller presented no certificate".into())
        }
        other => TlsFailure::Handshake(other.to_string()),
    })
}

/// What the controller's alert says about this client's certificate.
fn alert_failure(alert: AlertDescription) -> TlsFailure {
    let refused = |why: &str| TlsFailure::ClientCertificateRefused(why.to_string());
    match alert {
        AlertDescription::CertificateRequired => refused(
            "the controller requires a client certificate: pass --tls-cert and --tls-key (or set FORESIGHT_TLS_CERT, FORESIGHT_TLS_KEY)",
        ),
        AlertDescription::UnknownCA => refused(
            "it is not signed by a CA the controller trusts (its --tls-client-ca)",
        ),
        AlertDescription::CertificateExpired => refused("it has expired"),
        AlertDescription::CertificateRevoked => refused("it has been revoked"),
        AlertDescription::BadCertificate
        | AlertDescription::UnsupportedCertificate
        | AlertDescription::CertificateUnknown
        | AlertDescription::DecryptError
        | AlertDescription::AccessDenied => refused(&format!(
            "the controller did not accept it ({alert:?}); it must be signed by the controller's --tls-client-ca"
        )),
        AlertDescription::ProtocolVersion | AlertDescription::HandshakeFailure => {
            TlsFailure::Handshake(format!(
                "no TLS version or cipher suite in common with the controller ({alert:?})"
            ))
        }
        other => TlsFailure::Handshake(format!("the controller ended the handshake ({other:?})")),
    }
}

/// Why this client refused the controller's certificate.
fn server_certificate(e: &CertificateError) -> String {
    match e {
        CertificateError::UnknownIssuer => {
            "it is not signed by the CA of --tls-ca (FORESIGHT_TLS_CA)".into()
        }
        // An issuer of the CA's name, but not its key.
        CertificateError::BadSignature => {
            "it is not signed by the CA of --tls-ca (FORESIGHT_TLS_CA): another key signed it"
                .into()
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "it has expired".into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "it is not valid yet (are the clocks right?)".into()
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("it does not name the address this client connected to ({e}); connect by a name or IP address the certificate holds")
        }
        CertificateError::Revoked => "it has been revoked".into(),
        other => format!("{other}"),
    }
}

/// `host:port` of an address that may carry a scheme.
fn host_port(addr: &str) -> &str {
    addr.strip_prefix("http://")
        .or_else(|| addr.strip_prefix("https://"))
        .unwrap_or(addr)
}

/// What goes wrong when this client (`config`) opens an HTTP/2 session
/// with the controller at `addr`: the handshake, then the first read,
/// where TLS 1.3 delivers the controller's verdict on this client's
/// certificate. `None` when the session comes about (or `addr` is out of
/// reach): the failure was something else.
pub async fn diagnose(addr: &str, config: &Arc<rustls::ClientConfig>) -> Option<TlsFailure> {
    let name = super::client_tls::server_name(addr).ok()?;
    let addr = host_port(addr);
    let mut config = rustls::ClientConfig::clone(config);
    config.alpn_protocols = vec![b"h2".to_vec()];
    let probe = async {
        let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let mut tls = match connector.connect(name, tcp).await {
            Ok(tls) => tls,
            Err(e) => return classify(&e),
        };
        if let Err(e) = tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await {
            return classify(&e);
        }
        let mut first = [0u8; 1];
        match tls.read(&mut first).await {
            Err(e) => classify(&e),
            Ok(_) => None,
        }
    };
    tokio::time::timeout(Duration::from_secs(2), probe)
        .await
        .ok()
        .flatten()
}

/// Whether `addr` answers a TLS ClientHello as a TLS server does (its
/// first record is a handshake or an alert): asked when a plain-text
/// exchange failed, to tell the operator TLS is what is missing.
pub async fn speaks_tls(addr: &str) -> bool {
    let addr = host_port(addr);
    let probe = async {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("foresight.invalid").ok()?;
        let mut hello = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
        let mut bytes = Vec::new();
        hello.write_tls(&mut bytes).ok()?;
        tcp.write_all(&bytes).await.ok()?;
        let mut head = [0u8; 3];
        tcp.read_exact(&mut head).await.ok()?;
        // Content type handshake (22) or alert (21), then version 3.x.
        Some(matches!(head, [22 | 21, 3, 1..=4]))
    };
    tokio::time::timeout(Duration::from_secs(2), probe)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alerts_and_certificate_errors_name_their_cause() {
        let alert = |a| {
            classify(&rustls::Error::AlertReceived(a))
                .unwrap()
                .to_string()
        };
        assert!(
            alert(AlertDescription::CertificateRequired).contains("requires a client certificate")
        );
        assert!(alert(AlertDescription::UnknownCA).contains("--tls-client-ca"));
        assert!(alert(AlertDescription::CertificateExpired).contains("expired"));
        assert!(
            alert(AlertDescription::BadCertificate).contains("refused this client's certificate")
        );
        let server = |c| {
            classify(&rustls::Error::InvalidCertificate(c))
                .unwrap()
                .to_string()
        };
        assert!(server(CertificateError::UnknownIssuer).contains("--tls-ca"));
        assert!(server(CertificateError::BadSignature).contains("--tls-ca"));
        assert!(server(CertificateError::Expired).contains("expired"));
        assert!(server(CertificateError::NotValidForName).contains("does not name"));
        let plain = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert_eq!(classify(&plain), Some(TlsFailure::ServerSpeaksPlainText));
        // Wrapped as tokio-rustls wraps it, and under an anyhow context.
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(AlertDescription::UnknownCA),
        );
        let wrapped = anyhow::Error::new(io).context("cannot reach the controller");
        assert!(matches!(
            classify_anyhow(&wrapped),
            Some(TlsFailure::ClientCertificateRefused(_))
        ));
        let unrelated = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(classify(&unrelated), None);
    }

    /// A real handshake, in memory: a server that requires a client
    /// certificate refuses a client without one, and a client refuses a
    /// server whose certificate another CA signed.
    #[tokio::test]
    async fn real_handshakes_are_classified() {
        use rcgen::{CertificateParams, KeyPair};
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let self_signed = |name: &str, cn: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            let cert = params.self_signed(&key).unwrap();
            (
                CertificateDer::from(cert.der().to_vec()),
                PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
        };
        let (server_cert, server_key) = self_signed("localhost", "controller");
        let (other_cert, _) = self_signed("localhost", "another");
        let server_config = |client_ca: &CertificateDer<'static>| {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(client_ca.clone()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.into(),
                provider.clone(),
            )
            .build()
            .unwrap();
            Arc::new(
                rustls::ServerConfig::builder_with_provider(provider.clone())
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_client_cert_verifier(verifier)
                    .with_single_cert(vec![server_cert.clone()], server_key.clone_key())
                    .unwrap(),
            )
        };
        let client_config = |trusted: &CertificateDer<'static>| {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(trusted.clone()).unwrap();
            Arc::new(
                rustls::ClientConfig::builder_with_provider(provider.clone())
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        };
        // The client's view of a session: the handshake, then a read
        // (TLS 1.3 reports a refused client certificate after it).
        let session = |server: Arc<rustls::ServerConfig>, client: Arc<rustls::ClientConfig>| async move {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let accept = tokio::spawn(async move {
                let _ = tokio_rustls::TlsAcceptor::from(server).accept(b).await;
            });
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let outcome = match tokio_rustls::TlsConnector::from(client)
                .connect(name, a)
                .await
            {
                Err(e) => Err(e),
                Ok(mut tls) => {
                    let mut byte = [0u8; 1];
                    tls.read(&mut byte).await.map(|_| ())
                }
            };
            let _ = accept.await;
            outcome.unwrap_err()
        };
        let no_certificate = session(server_config(&other_cert), client_config(&server_cert)).await;
        assert!(
            matches!(classify(&no_certificate), Some(TlsFailure::ClientCertificateRefused(ref why)) if why.contains("requires a client certificate")),
            "{no_certificate:?}"
        );
        let wrong_ca = session(server_config(&other_cert), client_config(&other_cert)).await;
        assert!(
            matches!(classify(&wrong_ca), Some(TlsFailure::ServerCertificateRefused(ref why)) if why.contains("--tls-ca")),
            "{wrong_ca:?}"
        );
    }
}
