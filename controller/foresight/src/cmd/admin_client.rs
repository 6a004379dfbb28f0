//! The CLI's client of the controller's admin endpoint (`daemon/http.rs`):
//! one HTTP/1.1 request per connection, spoken by hyper.

use std::time::Duration;

use anyhow::Context;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{header, Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::daemon::admin_token::AdminToken;

/// Time to reach the controller.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for the whole answer (a link change waits for the switches).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// `GET path` on `addr`; the body if the status is 2xx, else an error that
/// carries the server's message.
pub async fn get(addr: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    request(addr, Method::GET, path, None).await
}

/// `POST path` (no body) on `addr`, with the operator's token when given,
/// answered like [`get`].
pub async fn post(addr: &str, path: &str, token: Option<&AdminToken>) -> anyhow::Result<Vec<u8>> {
    request(addr, Method::POST, path, token).await
}

async fn request(
    addr: &str,
    method: Method,
    path: &str,
    token: Option<&AdminToken>,
) -> anyhow::Result<Vec<u8>> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow::anyhow!("connecting to the controller at {addr} timed out"))?
        .with_context(|| format!("cannot reach the controller's HTTP endpoint at {addr} (is `foresight controller` running? pass --http ADDR)"))?;
    let exchange = async {
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%e, "admin connection");
            }
        });
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, addr);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, token.bearer());
        }
        let request = request.body(Empty::<Bytes>::new())?;
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    };
    let (status, body) = tokio::time::timeout(ANSWER_TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("the controller at {addr} did not answer {path} within 30 s"))?
        .with_context(|| format!("{addr} did not answer {path} with HTTP"))?;
    if !status.is_success() {
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).to_string());
        anyhow::bail!("{message}");
    }
    Ok(body.to_vec())
}
