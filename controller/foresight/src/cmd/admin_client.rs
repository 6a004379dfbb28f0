//! The CLI's client of the controller's admin endpoint (`daemon/http.rs`):
//! one HTTP/1.1 request per connection, spoken by hyper, over TLS when
//! the controller's admin port is (`--tls-ca`, see `client_tls.rs`).

use std::time::Duration;

use anyhow::Context;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{header, Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::client_tls::ClientTls;
use super::tls_failure::{self, TlsFailure};
use crate::daemon::northbound::admin_token::AdminToken;

/// Time to reach the controller (and finish a TLS handshake).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for the whole answer (a link change waits for the switches).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the admin endpoint is and how to talk to it.
pub struct Admin<'a> {
    pub addr: &'a str,
    pub tls: &'a ClientTls,
}

impl Admin<'_> {
    /// `GET path`; the body if the status is 2xx, else an error that
    /// carries the server's message.
    pub async fn get(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        self.request(Method::GET, path, None).await
    }

    /// `POST path` (no body), with the operator's token when given,
    /// answered like [`Admin::get`].
    pub async fn post(&self, path: &str, token: Option<&AdminToken>) -> anyhow::Result<Vec<u8>> {
        self.request(Method::POST, path, token).await
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&AdminToken>,
    ) -> anyhow::Result<Vec<u8>> {
        let addr = self.addr;
        let tls = self.tls.rustls()?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow::anyhow!("connecting to the controller at {addr} timed out"))?
            .with_context(|| format!("cannot reach the controller's HTTP endpoint at {addr} (is `foresight controller` running? pass --http ADDR)"))?;
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, addr);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, token.bearer());
        }
        let request = request.body(Empty::<Bytes>::new())?;
        let outcome = match tls {
            None => exchange(stream, request).await,
            Some(config) => {
                let name = super::client_tls::server_name(addr).context("--http")?;
                let handshake = tokio_rustls::TlsConnector::from(config).connect(name, stream);
                let tls = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
                    .await
                    .map_err(|_| anyhow::anyhow!("the TLS handshake with {addr} timed out"))?
                    .map_err(|e| match tls_failure::classify(&e) {
                        Some(failure) => anyhow::Error::new(failure),
                        None => anyhow::Error::new(e).context("the TLS handshake failed"),
                    })
                    .with_context(|| format!("controller {addr}"))?;
                exchange(tls, request).await
            }
        };
        let (status, body) = match outcome {
            Ok(answer) => answer,
            Err(e) => return Err(self.explain(e, path).await),
        };
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).to_string());
            anyhow::bail!("{message}");
        }
        Ok(body.to_vec())
    }

    /// A failed exchange: a TLS failure named as such (found in the
    /// error, or a TLS server answering a plain-text client), else the
    /// error as it is.
    async fn explain(&self, e: anyhow::Error, path: &str) -> anyhow::Error {
        let addr = self.addr;
        let failure = match tls_failure::classify_anyhow(&e) {
            Some(failure) => Some(failure),
            None if !self.tls.enabled() && tls_failure::speaks_tls(addr).await => {
                Some(TlsFailure::ServerSpeaksTls)
            }
            None => None,
        };
        match failure {
            Some(failure) => anyhow::Error::new(failure).context(format!("controller {addr}")),
            None => e.context(format!("{addr} did not answer {path} with HTTP")),
        }
    }
}

/// One request on a connection (plain or TLS), within `ANSWER_TIMEOUT`.
async fn exchange<S>(
    stream: S,
    request: Request<Empty<Bytes>>,
) -> anyhow::Result<(StatusCode, Bytes)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let exchange = async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let connection = tokio::spawn(connection);
        let answer = async {
            let response = sender.send_request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, body))
        }
        .await;
        if answer.is_err() {
            // The request only learns the connection is gone; the
            // connection knows why (a TLS alert, say).
            if let Ok(Ok(Err(why))) = tokio::time::timeout(Duration::from_secs(1), connection).await
            {
                return Err(anyhow::Error::new(why));
            }
        }
        answer
    };
    tokio::time::timeout(ANSWER_TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {} s", ANSWER_TIMEOUT.as_secs()))?
}
