//! Where the controller is (`Target`: its NDSP address or its replicas',
//! the tenant, TLS) and sending one request to it: connect, follow the
//! replicas to their leader, tell a TLS failure apart, and explain a gRPC
//! error to the operator.

use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use ndsp::proto::demand_signaling_client::DemandSignalingClient;
use tonic::transport::{Channel, ClientTlsConfig};

use crate::cmd::client_tls::ClientTls;
use crate::cmd::controller::DEFAULT_NDSP;
use crate::cmd::tls_failure::{self, TlsFailure};

/// How to reach the controller.
#[derive(Args, Clone)]
pub struct Target {
    /// The controller's NDSP address, or its replicas' (comma-separated):
    /// requests follow the replicas to their leader.
    #[arg(long, default_value = DEFAULT_NDSP)]
    controller: String,
    /// Tenant the request acts for.
    #[arg(long, default_value = "operator")]
    pub(super) tenant: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    tls: ClientTls,
}

/// Connect to the controller's NDSP endpoint (over TLS when `tls` is
/// given), with a hint when it is not there.
pub async fn connect(
    addr: &str,
    tls: Option<ClientTlsConfig>,
) -> anyhow::Result<DemandSignalingClient<Channel>> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = if addr.starts_with("http") {
        addr.to_string()
    } else {
        format!("{scheme}://{addr}")
    };
    let mut endpoint = Channel::from_shared(url)
        .with_context(|| format!("--controller {addr}: not an address (want host:port)"))?;
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config(tls)
            .context("--tls-ca/--tls-cert/--tls-key: not usable")?;
    }
    let channel = endpoint
        .connect_timeout(std::time::Duration::from_secs(5))
        .connect()
        .await
        .with_context(|| format!("cannot reach the controller's NDSP endpoint at {addr} (is `foresight controller` running? pass --controller ADDR)"))?;
    Ok(DemandSignalingClient::new(channel))
}

/// How long a request waits for a leader among the controller replicas.
const LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(15);
/// How long one replica may take to answer before the next is tried.
const REPLICA_ANSWER: std::time::Duration = std::time::Duration::from_secs(10);

/// Send one request, following controller replicas to their leader.
/// `controllers` is one NDSP address or several (comma-separated: the
/// replicas). A follower answers `UNAVAILABLE` naming the leader, which is
/// tried next; an address that does not answer, or a leader that dies
/// mid-request, gives way to the next address. Retrying is safe: demand
/// and collective ids make a submission idempotent. Gives up after
/// `LEADER_WAIT` with the last error. A TLS failure (a certificate
/// refused, TLS on one side only) ends it at once: no replica would
/// answer otherwise, and no request reached the controller.
pub async fn call<Req: Clone, Resp>(
    target: &Target,
    request: Req,
    rpc: impl Fn(
        DemandSignalingClient<Channel>,
        Req,
    )
        -> futures::future::BoxFuture<'static, Result<tonic::Response<Resp>, tonic::Status>>,
) -> anyhow::Result<tonic::Response<Resp>> {
    let controllers = target.controller.as_str();
    let tls = target.tls.grpc()?;
    // The same settings, for asking a failed connection what went wrong.
    let probe = target.tls.rustls()?;
    let addrs: Vec<&str> = controllers
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    if addrs.is_empty() {
        bail!("--controller {controllers:?}: no address (want host:port[,host:port...])");
    }
    let deadline = std::time::Instant::now() + LEADER_WAIT;
    let mut next = 0;
    let mut leader: Option<String> = None;
    // An attempt ended without its answer (no answer, a broken connection):
    // a leader may have carried it out.
    let mut answer_lost = false;
    loop {
        let addr = leader.take().unwrap_or_else(|| {
            next += 1;
            addrs[(next - 1) % addrs.len()].to_string()
        });
        let attempt = connect(&addr, tls.clone()).await;
        if let Some(failure) = tls_failed(&addr, probe.as_ref(), &attempt).await {
            return Err(anyhow::Error::new(failure).context(format!("controller {addr}")));
        }
        let error = match attempt {
            // A replica that is paused accepts the connection but never
            // answers: give another one a chance.
            Ok(client) => {
                match answer(&addr, probe.as_ref(), rpc(client, request.clone())).await? {
                    Ok(response) => return Ok(response),
                    Err(status) if retryable(&status) => {
                        answer_lost |= status.code() != tonic::Code::Unavailable;
                        leader = status
                            .metadata()
                            .get(crate::daemon::northbound::leader_gate::LEADER_METADATA)
                            .and_then(|v| v.to_str().ok())
                            .map(String::from);
                        explain(status)
                    }
                    Err(status) if answer_lost => return Err(AfterLostAnswer(status).into()),
                    Err(status) => return Err(explain(status)),
                }
            }
            Err(e) => e,
        };
        if std::time::Instant::now() >= deadline {
            return Err(error.context(format!(
                "no controller replica answered as leader within {} s",
                LEADER_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// One replica's answer to an attempt, within `REPLICA_ANSWER`; a TLS
/// failure is the error of the whole call.
async fn answer<Resp>(
    addr: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    attempt: futures::future::BoxFuture<'static, Result<tonic::Response<Resp>, tonic::Status>>,
) -> anyhow::Result<Result<tonic::Response<Resp>, tonic::Status>> {
    let answer = tokio::time::timeout(REPLICA_ANSWER, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(tonic::Status::deadline_exceeded(format!(
                "{addr}: no answer in {} s",
                REPLICA_ANSWER.as_secs()
            )))
        });
    if let Some(failure) = tls_failed(addr, tls, &answer).await {
        return Err(anyhow::Error::new(failure).context(format!("controller {addr}")));
    }
    Ok(answer)
}

/// An error of the connection rather than of the request?
trait Transport {
    /// The TLS failure among its causes.
    fn tls_failure(&self) -> Option<TlsFailure>;
    /// Whether the exchange itself broke (no answer from the controller's
    /// application): then a plain-text client asks whether TLS was missing.
    fn broke(&self) -> bool;
}

impl<T> Transport for anyhow::Result<T> {
    fn tls_failure(&self) -> Option<TlsFailure> {
        self.as_ref().err().and_then(tls_failure::classify_anyhow)
    }
    fn broke(&self) -> bool {
        self.is_err()
    }
}

impl<T> Transport for Result<T, tonic::Status> {
    fn tls_failure(&self) -> Option<TlsFailure> {
        self.as_ref().err().and_then(|s| tls_failure::classify(s))
    }
    fn broke(&self) -> bool {
        use std::error::Error;
        self.as_ref().err().is_some_and(|s| {
            s.source().is_some()
                || matches!(s.code(), tonic::Code::Unknown | tonic::Code::Internal)
                    && s.message().contains("protocol error")
        })
    }
}

/// The TLS failure of an attempt on `addr`: found in its error, or, when
/// its connection broke, asked of the controller: over TLS (`tls`, this
/// client's settings), what a handshake and a first read say (HTTP/2
/// reports a refused client certificate as a closed stream only); in
/// plain text, whether it speaks TLS.
async fn tls_failed(
    addr: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    attempt: &impl Transport,
) -> Option<TlsFailure> {
    if let Some(failure) = attempt.tls_failure() {
        return Some(failure);
    }
    if !attempt.broke() {
        return None;
    }
    match tls {
        Some(config) => tls_failure::diagnose(addr, config).await,
        None if tls_failure::speaks_tls(addr).await => Some(TlsFailure::ServerSpeaksTls),
        None => None,
    }
}

/// A resent request's refusal, after an earlier attempt's answer was lost:
/// that attempt may have done what was asked (a cancel resent after it
/// took effect finds nothing live).
#[derive(Debug)]
pub struct AfterLostAnswer(pub tonic::Status);

impl std::fmt::Display for AfterLostAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (resent after an earlier attempt's answer was lost, which may have done it)",
            explain(self.0.clone())
        )
    }
}

impl std::error::Error for AfterLostAnswer {}

/// A follower's answer, or a connection that broke: another replica may
/// answer.
fn retryable(status: &tonic::Status) -> bool {
    use std::error::Error;
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::DeadlineExceeded => true,
        tonic::Code::Unknown => status.source().is_some(),
        _ => false,
    }
}

/// A gRPC error as something an operator can act on.
pub fn explain(status: tonic::Status) -> anyhow::Error {
    let hint = match status.code() {
        tonic::Code::InvalidArgument => "the controller rejected the request (nothing was changed)",
        tonic::Code::AlreadyExists => "already exists (cancel it first, or use another --id)",
        tonic::Code::NotFound => "not found (see `foresight status` for live reservations)",
        tonic::Code::Unavailable => "the controller is unavailable",
        _ => "the controller answered with an error",
    };
    anyhow::anyhow!("{hint}: {}", status.message())
}
