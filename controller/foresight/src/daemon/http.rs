//! A tiny HTTP/1.1 server for Prometheus and operators:
//! `GET /metrics` (text exposition), `GET /v1/status` and
//! `GET /v1/entries/<switch>` (JSON, see `api.rs`), `GET /healthz`, and
//! the one write: `POST /v1/links/<switch>:<port>/down` (or `/up`), the
//! operator's link state (`foresight link`). One request per connection
//! (`Connection: close`); a request body is ignored.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Controller;

pub async fn serve(listener: TcpListener, controller: Arc<Controller>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let controller = controller.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(stream, &controller).await {
                tracing::debug!(%e, "http connection");
            }
        });
    }
}

async fn handle(mut stream: TcpStream, controller: &Controller) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head = loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request timeout"))??;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break String::from_utf8_lossy(&buf[..end]).to_string();
        }
        if buf.len() > 16 * 1024 {
            return respond(
                &mut stream,
                431,
                "text/plain",
                b"request header too large\n",
            )
            .await;
        }
    };
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or(path);
    if method == "POST" {
        return match link_command(path) {
            Some((node, port, down)) => match port.parse::<u32>() {
                Ok(port) => match controller.set_link(node, port, down).await {
                    Ok(view) => {
                        let body = serde_json::to_vec_pretty(&view).unwrap_or_default();
                        respond(&mut stream, 200, "application/json", &body).await
                    }
                    Err((code, message)) => error(&mut stream, code, &message).await,
                },
                Err(_) => {
                    let message = format!("{node}:{port}: the port must be a number");
                    error(&mut stream, 400, &message).await
                }
            },
            None => {
                let message =
                    format!("no such command {path}; POST /v1/links/<switch>:<port>/down or /up");
                error(&mut stream, 404, &message).await
            }
        };
    }
    if method != "GET" {
        return respond(&mut stream, 405, "text/plain", b"only GET and POST\n").await;
    }
    match path {
        "/metrics" => {
            let status = controller.status().await;
            let body = controller.metrics.render(&status);
            respond(
                &mut stream,
                200,
                "text/plain; version=0.0.4",
                body.as_bytes(),
            )
            .await
        }
        "/healthz" => respond(&mut stream, 200, "text/plain", b"ok\n").await,
        "/v1/status" => {
            let status = controller.status().await;
            let body = serde_json::to_vec_pretty(&status).unwrap_or_default();
            respond(&mut stream, 200, "application/json", &body).await
        }
        p if p.starts_with("/v1/entries/") => {
            let switch = &p["/v1/entries/".len()..];
            match controller.entries(switch).await {
                Ok(view) => {
                    let body = serde_json::to_vec_pretty(&view).unwrap_or_default();
                    respond(&mut stream, 200, "application/json", &body).await
                }
                Err((code, message)) => {
                    let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
                        .unwrap_or_default();
                    respond(&mut stream, code, "application/json", &body).await
                }
            }
        }
        _ => {
            let body = serde_json::to_vec(&serde_json::json!({
                "error": format!("no such path {path}; try /metrics, /v1/status, /v1/entries/<switch>")
            }))
            .unwrap_or_default();
            respond(&mut stream, 404, "application/json", &body).await
        }
    }
}

/// `/v1/links/<node>:<port>/<down|up>` as (node, port, down).
fn link_command(path: &str) -> Option<(&str, &str, bool)> {
    let rest = path.strip_prefix("/v1/links/")?;
    let (link, verb) = rest.rsplit_once('/')?;
    let down = match verb {
        "down" => true,
        "up" => false,
        _ => return None,
    };
    let (node, port) = link.rsplit_once(':')?;
    Some((node, port, down))
}

async fn error(stream: &mut TcpStream, code: u16, message: &str) -> std::io::Result<()> {
    let body = serde_json::to_vec(&serde_json::json!({ "error": message })).unwrap_or_default();
    respond(stream, code, "application/json", &body).await
}

async fn respond(
    stream: &mut TcpStream,
    code: u16,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}

/// `GET path` on `addr`; the body if the status is 2xx, else an error that
/// carries the server's message.
pub async fn get(addr: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    request(addr, "GET", path).await
}

/// `POST path` (no body) on `addr`, answered like [`get`].
pub async fn post(addr: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    request(addr, "POST", path).await
}

async fn request(addr: &str, method: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context;
    let mut stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow::anyhow!("connecting to the controller at {addr} timed out"))?
        .with_context(|| format!("cannot reach the controller's HTTP endpoint at {addr} (is `foresight controller` running? pass --http ADDR)"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut response))
        .await
        .map_err(|_| {
            anyhow::anyhow!("the controller at {addr} did not answer {path} within 30 s")
        })??;
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("{addr} did not answer with HTTP"))?;
    let head = String::from_utf8_lossy(&response[..end]).to_string();
    let body = response[end + 4..].to_vec();
    let code: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    if !(200..300).contains(&code) {
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).to_string());
        anyhow::bail!("{message}");
    }
    Ok(body)
}
