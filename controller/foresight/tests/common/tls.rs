//! Clients of a controller with mutual TLS, for the tests: an NDSP client
//! with a given certificate (or none), and one admin request over TLS.

use ndsp::proto::demand_signaling_client::DemandSignalingClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A certificate and its key, PEM.
pub type Pem = (String, String);

/// An NDSP client over TLS trusting `ca_pem`, with `id` as its certificate.
pub async fn ndsp(
    addr: &str,
    ca_pem: &str,
    id: Option<&Pem>,
) -> Result<DemandSignalingClient<Channel>, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("127.0.0.1");
    if let Some((cert, key)) = id {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await?;
    Ok(DemandSignalingClient::new(channel))
}

/// `method path` on the admin port over TLS, with `Authorization:
/// <bearer>` when given: (status, whole answer), or why there was none.
pub async fn https(
    addr: &str,
    ca_pem: &str,
    id: Option<&Pem>,
    method: &str,
    path: &str,
    bearer: Option<&str>,
) -> Result<(u16, String), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match id {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    exchange(tls, addr, method, path, bearer).await
}

/// The same request in plain text (to a TLS port, it gets no answer).
pub async fn http(addr: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    exchange(tcp, addr, method, path, None).await
}

async fn exchange<S>(
    mut stream: S,
    addr: &str,
    method: &str,
    path: &str,
    bearer: Option<&str>,
) -> Result<(u16, String), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authorization = bearer.map_or(String::new(), |b| format!("Authorization: {b}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Connection: close\r\nContent-Length: 0\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        stream.read_to_end(&mut raw),
    )
    .await
    .map_err(|_| "no answer in 30 s".to_string())?;
    let text = String::from_utf8_lossy(&raw).to_string();
    // A closed connection after a whole answer is an answer.
    if let (Err(e), false) = (read, text.starts_with("HTTP/")) {
        return Err(e.to_string());
    }
    let code = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.split_whitespace().next())
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    Ok((code, text))
}
