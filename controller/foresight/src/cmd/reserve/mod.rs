//! `foresight reserve demand|collective` and `foresight cancel`: operator
//! requests to a running controller over NDSP.

use std::net::Ipv4Addr;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use ndsp::proto::demand_signaling_client::DemandSignalingClient;
use ndsp::proto::{self, cancel_request, collective, demand_signal, endpoint};
use ndsp::types::ValidatedReservation;
use ndsp::Validate;
use serde::Serialize;
use tonic::transport::{Channel, ClientTlsConfig};

use super::client_tls::ClientTls;
use super::controller::DEFAULT_NDSP;
use super::millis::{ms_to_ns, MAX_MS};
use super::text_table;
use super::tls_failure::{self, TlsFailure};
use crate::daemon::northbound::service::INSTALL_US_METADATA;
use crate::daemon::now_unix_ns;

/// How to reach the controller.
#[derive(Args, Clone)]
pub struct Target {
    /// The controller's NDSP address, or its replicas' (comma-separated):
    /// requests follow the replicas to their leader.
    #[arg(long, default_value = DEFAULT_NDSP)]
    controller: String,
    /// Tenant the request acts for.
    #[arg(long, default_value = "operator")]
    tenant: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tls: ClientTls,
}

#[derive(Args)]
pub struct ReserveCmd {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// A point-to-point transfer between two host addresses.
    Demand(DemandArgs),
    /// A collective over whole hosts (each host's GPUs are consecutive ranks).
    Collective(CollectiveArgs),
    /// Many point-to-point demands from a file, in one request: all are
    /// planned or none is (a job scheduler's forecast).
    Batch(BatchArgs),
}

#[derive(Args)]
struct BatchArgs {
    /// YAML or JSON list of demands: {id, src, dst, bytes, qp? | qp_choices?,
    /// start_unix_ns | start_in_ms, rate_gbps | duration_ms, priority?, elastic?}.
    #[arg(long)]
    file: std::path::PathBuf,
    #[command(flatten)]
    target: Target,
}

/// One demand of a batch file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchDemand {
    id: String,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    #[serde(deserialize_with = "bytes_field")]
    bytes: u64,
    qp: Option<u32>,
    /// "FIRST-LAST": destination QPs the controller may choose among.
    qp_choices: Option<String>,
    start_unix_ns: Option<u64>,
    start_in_ms: Option<f64>,
    rate_gbps: Option<f64>,
    duration_ms: Option<f64>,
    #[serde(default = "default_batch_priority")]
    priority: String,
    #[serde(default)]
    elastic: bool,
}

fn default_batch_priority() -> String {
    "iteration-blocking".into()
}

/// Bytes as an integer or a string with a unit ("64KiB").
fn bytes_field<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum B {
        N(u64),
        S(String),
    }
    match <B as serde::Deserialize>::deserialize(d)? {
        B::N(n) => Ok(n),
        B::S(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

impl BatchDemand {
    /// The NDSP demand; `at` names the entry in errors.
    fn signal(&self, at: &str) -> anyhow::Result<proto::DemandSignal> {
        let start = match (self.start_unix_ns, self.start_in_ms) {
            (Some(t), None) => demand_signal::Start::StartUnixNs(t),
            (None, Some(ms)) => demand_signal::Start::StartOffsetNs(
                ms_to_ns("--start-in-ms", ms, MAX_MS)
                    .with_context(|| format!("{at}.start_in_ms"))?,
            ),
            _ => bail!("{at}: give exactly one of start_unix_ns and start_in_ms"),
        };
        let pacing = match (self.rate_gbps, self.duration_ms) {
            (Some(r), None) if r.is_finite() && r > 0.0 => {
                demand_signal::Pacing::RateBps((r * 1e9).round() as u64)
            }
            (Some(_), None) => bail!("{at}.rate_gbps: must be a positive number"),
            (None, Some(d)) => demand_signal::Pacing::DurationNs(
                ms_to_ns("--duration-ms", d, MAX_MS)
                    .with_context(|| format!("{at}.duration_ms"))?,
            ),
            _ => bail!("{at}: give exactly one of rate_gbps and duration_ms"),
        };
        if self.qp.is_some() && self.qp_choices.is_some() {
            bail!("{at}: give qp or qp_choices, not both");
        }
        let qp_choices = self
            .qp_choices
            .as_deref()
            .map(parse_qp_choices)
            .transpose()
            .map_err(|e| anyhow::anyhow!("{at}.qp_choices: {e}"))?;
        let priority = <Priority as ValueEnum>::from_str(&self.priority, true).map_err(|_| {
            anyhow::anyhow!(
                "{at}.priority: {:?} is not one of background, standard, iteration-blocking, latency-critical",
                self.priority
            )
        })?;
        let host = |ip: Ipv4Addr| {
            Some(proto::Endpoint {
                address: Some(endpoint::Address::HostAddress(ip.to_string())),
            })
        };
        Ok(proto::DemandSignal {
            demand_id: self.id.clone(),
            job_id: String::new(),
            source: host(self.src),
            destination: host(self.dst),
            start: Some(start),
            size_bytes: self.bytes,
            pacing: Some(pacing),
            priority: priority.wire(),
            elasticity: if self.elastic {
                proto::Elasticity::Elastic
            } else {
                proto::Elasticity::Inelastic
            } as i32,
            deadline: None,
            dest_qp: self.qp,
            recurrence: None,
            dest_qp_choices: qp_choices,
        })
    }
}

/// Read a batch file and build its request (nothing is sent on any error).
fn batch_request(
    path: &std::path::Path,
    tenant: &str,
) -> anyhow::Result<proto::SubmitDemandRequest> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--file {}: cannot read", path.display()))?;
    batch_from_text(&text, &path.display().to_string(), tenant)
}

/// A batch file's text as one request; `name` names the file in errors.
fn batch_from_text(
    text: &str,
    name: &str,
    tenant: &str,
) -> anyhow::Result<proto::SubmitDemandRequest> {
    let demands: Vec<BatchDemand> = planner::topology::yaml::from_str_located(
        text,
        &format!("--file {name}: not a list of demands"),
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    if demands.is_empty() {
        bail!("--file {name}: no demands");
    }
    let demands = demands
        .iter()
        .enumerate()
        .map(|(i, d)| d.signal(&format!("{name}: demands[{i}] ({})", d.id)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let request = proto::SubmitDemandRequest {
        header: header(tenant),
        reference_unix_ns: 0,
        demands,
    };
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("{name}: invalid request: {e}"))?;
    Ok(request)
}

#[derive(Clone, Copy, ValueEnum)]
enum Priority {
    Background,
    Standard,
    IterationBlocking,
    LatencyCritical,
}

impl Priority {
    fn wire(self) -> i32 {
        (match self {
            Priority::Background => proto::PriorityClass::Background,
            Priority::Standard => proto::PriorityClass::Standard,
            Priority::IterationBlocking => proto::PriorityClass::IterationBlocking,
            Priority::LatencyCritical => proto::PriorityClass::LatencyCritical,
        }) as i32
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    RingAllreduce,
    TreeAllreduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Pipeline,
}

#[derive(Args)]
struct Timing {
    /// Start this many milliseconds from now.
    #[arg(long, default_value_t = 100.0)]
    start_in_ms: f64,
    /// Expected duration in milliseconds.
    #[arg(long, conflicts_with = "rate_gbps")]
    duration_ms: Option<f64>,
    /// Expected rate in Gbit/s (per flow for a collective).
    #[arg(long)]
    rate_gbps: Option<f64>,
    /// Priority class.
    #[arg(long, value_enum, default_value = "iteration-blocking")]
    priority: Priority,
    /// The controller may defer or slow it.
    #[arg(long)]
    elastic: bool,
    /// Must complete within this many milliseconds from now.
    #[arg(long)]
    deadline_ms: Option<f64>,
    /// Repeat every this many milliseconds ...
    #[arg(long, requires = "occurrences")]
    period_ms: Option<f64>,
    /// ... this many times in all.
    #[arg(long, requires = "period_ms")]
    occurrences: Option<u32>,
}

#[derive(Args)]
struct DemandArgs {
    /// Demand id (default: demand-<unix ms>).
    #[arg(long)]
    id: Option<String>,
    /// Source host IPv4 address.
    #[arg(long)]
    src: Ipv4Addr,
    /// Destination host IPv4 address.
    #[arg(long)]
    dst: Ipv4Addr,
    /// Bytes (suffixes K, M, G, KiB, MiB, GiB...).
    #[arg(long, value_parser = parse_size)]
    bytes: u64,
    /// Steer only this RoCE destination QP (default: every QP between the hosts).
    #[arg(long)]
    qp: Option<u32>,
    /// Destination QPs the sender can use, FIRST-LAST (decimal or 0x hex):
    /// the controller answers with the one to send to (under entropy
    /// steering, the one the switches' hash carries along the path).
    #[arg(long, value_parser = parse_qp_choices, conflicts_with = "qp")]
    qp_choices: Option<proto::QpRange>,
    #[command(flatten)]
    timing: Timing,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
struct CollectiveArgs {
    /// Collective id (default: collective-<unix ms>).
    #[arg(long)]
    id: Option<String>,
    /// Pattern.
    #[arg(long, value_enum, default_value = "ring-allreduce")]
    kind: Kind,
    /// Hosts taking part, IPv4 addresses in ring order (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    hosts: Vec<Ipv4Addr>,
    /// Ranks (GPUs) per host.
    #[arg(long, default_value_t = 8)]
    gpus_per_host: u32,
    /// Buffer size (suffixes K, M, G, KiB, MiB, GiB...).
    #[arg(long, value_parser = parse_size)]
    bytes: u64,
    /// Parallel channels (QPs per neighbour pair).
    #[arg(long, default_value_t = 1)]
    channels: u32,
    /// Job to register the hosts' ranks under (default: the collective id).
    #[arg(long)]
    job: Option<String>,
    #[command(flatten)]
    timing: Timing,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
pub struct CancelCmd {
    /// Cancel this demand.
    #[arg(long, group = "what")]
    demand: Option<String>,
    /// Cancel this collective.
    #[arg(long, group = "what")]
    collective: Option<String>,
    /// Cancel this reservation (id as `foresight status` shows it).
    #[arg(long, group = "what")]
    reservation: Option<String>,
    /// Cancel everything of this job and unregister it.
    #[arg(long, group = "what")]
    job: Option<String>,
    #[command(flatten)]
    target: Target,
}

#[derive(Args)]
pub struct RegisterCmd {
    /// Job id.
    #[arg(long)]
    job: String,
    /// The job's hosts, IPv4 addresses in rank order (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    hosts: Vec<Ipv4Addr>,
    /// Ranks (GPUs) per host.
    #[arg(long, default_value_t = 1)]
    gpus_per_host: u32,
    /// The job's collective library: NCCL/RCCL traffic is matched on its
    /// queue pairs, any other on its host pairs.
    #[arg(long, value_enum, default_value = "nccl")]
    library: Library,
    #[command(flatten)]
    target: Target,
}

#[derive(Clone, Copy, ValueEnum)]
enum Library {
    Nccl,
    Rccl,
    Gloo,
    Mpi,
    Oneccl,
    Xla,
}

/// A job's ranks: each host's GPUs are consecutive ranks.
fn registration(
    tenant: &str,
    job: &str,
    hosts: &[Ipv4Addr],
    gpus_per_host: u32,
    library: proto::CollectiveLibrary,
) -> proto::RegisterTopologyRequest {
    let world = hosts.len() as u32 * gpus_per_host;
    proto::RegisterTopologyRequest {
        header: header(tenant),
        topology: Some(proto::Topology {
            job_id: job.to_string(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: world,
            ranks: (0..world)
                .map(|r| proto::RankEndpoint {
                    rank: r,
                    device_id: format!("GPU-{}", r % gpus_per_host),
                    host_address: hosts[(r / gpus_per_host) as usize].to_string(),
                    nic: String::new(),
                    qp_range: None,
                })
                .collect(),
            library: library as i32,
            library_version: String::new(),
            algorithms: Vec::new(),
        }),
    }
}

/// `foresight register`: a job's hosts, announcing nothing yet (a
/// controller that learns iterations, T+5, watches them from now on).
pub fn register(cmd: RegisterCmd) -> anyhow::Result<()> {
    if cmd.gpus_per_host == 0 {
        bail!("--gpus-per-host must be at least 1");
    }
    let library = match cmd.library {
        Library::Nccl => proto::CollectiveLibrary::Nccl,
        Library::Rccl => proto::CollectiveLibrary::Rccl,
        Library::Gloo => proto::CollectiveLibrary::Gloo,
        Library::Mpi => proto::CollectiveLibrary::Mpi,
        Library::Oneccl => proto::CollectiveLibrary::Oneccl,
        Library::Xla => proto::CollectiveLibrary::Xla,
    };
    let request = registration(
        &cmd.target.tenant,
        &cmd.job,
        &cmd.hosts,
        cmd.gpus_per_host,
        library,
    );
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid job registration: {e}"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        call(&cmd.target, request, |mut c, r| {
            Box::pin(async move { c.register_topology(r).await })
        })
        .await?;
        if cmd.target.json {
            println!("{}", serde_json::json!({ "registered": cmd.job }));
        } else {
            println!("registered job {} ({} hosts)", cmd.job, cmd.hosts.len());
        }
        Ok(())
    })
}

fn parse_size(s: &str) -> Result<u64, String> {
    planner::demand::parse_bytes(s)
}

/// "FIRST-LAST", inclusive, each decimal or 0x hex, as a QP range (the
/// controller checks the QPs themselves).
fn parse_qp_choices(s: &str) -> Result<proto::QpRange, String> {
    let bad =
        |why: String| format!("QP choices '{s}': {why} (want FIRST-LAST, for example 0x100-0x1ff)");
    let (a, b) = s.split_once('-').ok_or_else(|| bad("no '-'".into()))?;
    let qp = |t: &str| {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => t.parse::<u32>(),
        }
        .map_err(|_| bad(format!("'{t}' is not a number")))
    };
    let (first, last) = (qp(a)?, qp(b)?);
    if last < first {
        return Err(bad("the last QP is below the first".into()));
    }
    Ok(proto::QpRange {
        first_qp: first,
        count: last - first + 1,
    })
}

fn header(tenant: &str) -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ndsp::PROTOCOL_VERSION.into()),
        tenant: tenant.into(),
    })
}

fn default_id(prefix: &str) -> String {
    format!("{prefix}-{}", now_unix_ns() / 1_000_000)
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

#[derive(Serialize)]
struct FlowOut {
    flow_id: String,
    src: String,
    dst: String,
    dest_qp: Option<u32>,
    status: String,
    requested_bps: u64,
    accepted_bps: u64,
    start_unix_ns: u64,
    end_unix_ns: u64,
    labels: Vec<u32>,
    /// The UDP source port to send on (entropy steering).
    #[serde(skip_serializing_if = "Option::is_none")]
    udp_src_port: Option<u16>,
    path: Vec<String>,
}

#[derive(Serialize)]
struct ReservationOut {
    reservation_id: String,
    subject: String,
    job_id: Option<String>,
    status: String,
    reason: String,
    advisory: Option<String>,
    revision: u64,
    start_unix_ns: u64,
    end_unix_ns: u64,
    flows: Vec<FlowOut>,
    /// From the request received to its due entries acknowledged, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    install_us: Option<u64>,
}

fn status_name(s: ndsp::types::ReservationStatus) -> String {
    proto::ReservationStatus::from(s)
        .as_str_name()
        .trim_start_matches("RESERVATION_STATUS_")
        .to_string()
}

fn out(r: &ValidatedReservation, install_us: Option<u64>) -> ReservationOut {
    use ndsp::types::ReservationSubject as S;
    ReservationOut {
        reservation_id: r.reservation_id.clone(),
        subject: match &r.subject {
            S::Demand(d) => format!("demand:{d}"),
            S::Collective(c) => format!("collective:{c}"),
        },
        job_id: r.job_id.clone(),
        status: status_name(r.status),
        reason: proto::ReasonCode::from(r.reason)
            .as_str_name()
            .trim_start_matches("REASON_CODE_")
            .to_string(),
        advisory: r.advisory.clone(),
        revision: r.revision,
        start_unix_ns: r.start_unix_ns,
        end_unix_ns: r.end_unix_ns,
        flows: r
            .flows
            .iter()
            .map(|f| FlowOut {
                flow_id: f.flow_id.clone(),
                src: f.source_address.to_string(),
                dst: f.destination_address.to_string(),
                dest_qp: f.dest_qp,
                status: status_name(f.status),
                requested_bps: f.requested_bps,
                accepted_bps: f.accepted_bps,
                start_unix_ns: f.start_unix_ns,
                end_unix_ns: f.end_unix_ns,
                labels: f.sr_label_stack.clone(),
                udp_src_port: f.udp_src_port,
                path: f
                    .hops
                    .iter()
                    .map(|h| format!("{}:{}", h.node, h.egress_port))
                    .collect(),
            })
            .collect(),
        install_us,
    }
}

fn rel_ms(t: u64, now: u64) -> String {
    let d = t as i128 - now as i128;
    format!("{:+.1} ms", d as f64 / 1e6)
}

fn print_reservation(r: &ReservationOut) {
    let now = now_unix_ns();
    println!(
        "reservation {} ({}): {} (revision {})",
        r.reservation_id, r.subject, r.status, r.revision
    );
    if let Some(a) = &r.advisory {
        println!("  why: {} — {a}", r.reason);
    }
    println!(
        "  window: {} .. {} from now",
        rel_ms(r.start_unix_ns, now),
        rel_ms(r.end_unix_ns, now)
    );
    if let Some(us) = r.install_us {
        println!(
            "  answered after {:.2} ms (entries due now acknowledged by every switch)",
            us as f64 / 1e3
        );
    }
    let reserved = r.flows.iter().filter(|f| f.accepted_bps > 0).count();
    println!(
        "  flows: {} ({reserved} reserved, {} on ECMP)",
        r.flows.len(),
        r.flows.len() - reserved
    );
    if r.flows.is_empty() {
        return;
    }
    let mut flows = text_table::new(
        &[
            "FLOW",
            "SRC -> DST",
            "QP",
            "STATUS",
            "GOT / ASKED",
            "HELD BY",
            "PATH",
        ],
        &[2, 4],
    );
    for f in r.flows.iter().take(64) {
        let held_by = match f.udp_src_port {
            Some(port) => format!("source port {port}"),
            None => f
                .labels
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        };
        flows.add_row(vec![
            f.flow_id.clone(),
            format!("{} -> {}", f.src, f.dst),
            f.dest_qp.map_or("any".into(), |q| q.to_string()),
            f.status.to_string(),
            format!(
                "{} / {}",
                text_table::rate(f.accepted_bps),
                text_table::rate(f.requested_bps)
            ),
            held_by,
            f.path.join(" "),
        ]);
    }
    print!("{}", text_table::indented(&flows));
    if r.flows.len() > 64 {
        println!("  ... {} more flows (--json lists all)", r.flows.len() - 64);
    }
}

fn install_us<T>(r: &tonic::Response<T>) -> Option<u64> {
    r.metadata()
        .get(INSTALL_US_METADATA)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Start offset, duration, rate and recurrence from the timing flags.
type TimingFields = (u64, Option<u64>, Option<u64>, Option<proto::Recurrence>);

fn timing_fields(t: &Timing) -> anyhow::Result<TimingFields> {
    let start = ms_to_ns("--start-in-ms", t.start_in_ms, MAX_MS)?;
    let duration = t
        .duration_ms
        .map(|d| ms_to_ns("--duration-ms", d, MAX_MS))
        .transpose()?;
    let rate = match t.rate_gbps {
        Some(r) if r.is_finite() && r > 0.0 => Some((r * 1e9).round() as u64),
        Some(_) => bail!("--rate-gbps must be a positive number"),
        None => None,
    };
    if duration.is_none() && rate.is_none() {
        bail!("give --duration-ms or --rate-gbps");
    }
    let recurrence = match (t.period_ms, t.occurrences) {
        (Some(p), Some(n)) => Some(proto::Recurrence {
            period_ns: ms_to_ns("--period-ms", p, MAX_MS)?,
            occurrences: n,
        }),
        _ => None,
    };
    Ok((start, duration, rate, recurrence))
}

pub fn run(cmd: ReserveCmd) -> anyhow::Result<()> {
    let what = match cmd.what {
        What::Batch(a) => return run_batch(a),
        other => other,
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let (target, reservation, us) =
            match what {
                What::Batch(_) => unreachable!("handled above"),
                What::Demand(a) => {
                    let (start, duration, rate, recurrence) = timing_fields(&a.timing)?;
                    let host = |ip: Ipv4Addr| {
                        Some(proto::Endpoint {
                            address: Some(endpoint::Address::HostAddress(ip.to_string())),
                        })
                    };
                    let demand = proto::DemandSignal {
                        demand_id: a.id.clone().unwrap_or_else(|| default_id("demand")),
                        job_id: String::new(),
                        source: host(a.src),
                        destination: host(a.dst),
                        start: Some(demand_signal::Start::StartOffsetNs(start)),
                        size_bytes: a.bytes,
                        pacing: Some(match (duration, rate) {
                            (Some(d), _) => demand_signal::Pacing::DurationNs(d),
                            (None, Some(r)) => demand_signal::Pacing::RateBps(r),
                            _ => unreachable!("checked"),
                        }),
                        priority: a.timing.priority.wire(),
                        elasticity: if a.timing.elastic {
                            proto::Elasticity::Elastic
                        } else {
                            proto::Elasticity::Inelastic
                        } as i32,
                        deadline: a
                            .timing
                            .deadline_ms
                            .map(|d| {
                                ms_to_ns("--deadline-ms", d, MAX_MS)
                                    .map(demand_signal::Deadline::DeadlineOffsetNs)
                            })
                            .transpose()?,
                        dest_qp: a.qp,
                        recurrence,
                        dest_qp_choices: a.qp_choices,
                    };
                    let request = proto::SubmitDemandRequest {
                        header: header(&a.target.tenant),
                        reference_unix_ns: 0,
                        demands: vec![demand],
                    };
                    request
                        .validate()
                        .map_err(|e| anyhow::anyhow!("invalid request: {e}"))?;
                    let response = call(&a.target, request, |mut c, r| {
                        Box::pin(async move { c.submit_demand(r).await })
                    })
                    .await?;
                    let us = install_us(&response);
                    let mut body = response.into_inner().validate().map_err(|e| {
                        anyhow::anyhow!("the controller's answer is malformed: {e}")
                    })?;
                    (a.target, body.remove(0), us)
                }
                What::Collective(a) => {
                    let (start, duration, rate, recurrence) = timing_fields(&a.timing)?;
                    let id = a.id.clone().unwrap_or_else(|| default_id("collective"));
                    let job = a.job.clone().unwrap_or_else(|| id.clone());
                    if a.gpus_per_host == 0 {
                        bail!("--gpus-per-host must be at least 1");
                    }
                    let world = a.hosts.len() as u32 * a.gpus_per_host;
                    let register = registration(
                        &a.target.tenant,
                        &job,
                        &a.hosts,
                        a.gpus_per_host,
                        proto::CollectiveLibrary::Nccl,
                    );
                    let kind = match a.kind {
                        Kind::RingAllreduce => proto::CollectiveKind::RingAllReduce,
                        Kind::TreeAllreduce => proto::CollectiveKind::TreeAllReduce,
                        Kind::AllGather => proto::CollectiveKind::AllGather,
                        Kind::ReduceScatter => proto::CollectiveKind::ReduceScatter,
                        Kind::AllToAll => proto::CollectiveKind::AllToAll,
                        Kind::Pipeline => proto::CollectiveKind::PipelineSend,
                    };
                    let submit = proto::SubmitCollectiveRequest {
                        header: header(&a.target.tenant),
                        reference_unix_ns: 0,
                        collective: Some(proto::Collective {
                            collective_id: id,
                            job_id: job,
                            kind: kind as i32,
                            ranks: (0..world).collect(),
                            peer_ranks: Vec::new(),
                            size_bytes: a.bytes,
                            channels: a.channels,
                            start: Some(collective::Start::StartOffsetNs(start)),
                            pacing: Some(match (duration, rate) {
                                (Some(d), _) => collective::Pacing::DurationNs(d),
                                (None, Some(r)) => collective::Pacing::FlowRateBps(r),
                                _ => unreachable!("checked"),
                            }),
                            priority: a.timing.priority.wire(),
                            elasticity: if a.timing.elastic {
                                proto::Elasticity::Elastic
                            } else {
                                proto::Elasticity::Inelastic
                            } as i32,
                            deadline: a
                                .timing
                                .deadline_ms
                                .map(|d| {
                                    ms_to_ns("--deadline-ms", d, MAX_MS)
                                        .map(collective::Deadline::DeadlineOffsetNs)
                                })
                                .transpose()?,
                            recurrence,
                        }),
                    };
                    register
                        .validate()
                        .map_err(|e| anyhow::anyhow!("invalid job registration: {e}"))?;
                    submit
                        .validate()
                        .map_err(|e| anyhow::anyhow!("invalid request: {e}"))?;
                    call(&a.target, register, |mut c, r| {
                        Box::pin(async move { c.register_topology(r).await })
                    })
                    .await?;
                    let response = call(&a.target, submit, |mut c, r| {
                        Box::pin(async move { c.submit_collective(r).await })
                    })
                    .await?;
                    let us = install_us(&response);
                    let body = response.into_inner().validate().map_err(|e| {
                        anyhow::anyhow!("the controller's answer is malformed: {e}")
                    })?;
                    (a.target, body, us)
                }
            };
        let view = out(&reservation, us);
        if target.json {
            println!("{}", serde_json::to_string_pretty(&view)?);
        } else {
            print_reservation(&view);
        }
        Ok(())
    })
}

/// `reserve batch`: one request, one reservation per demand.
fn run_batch(a: BatchArgs) -> anyhow::Result<()> {
    let request = batch_request(&a.file, &a.target.tenant)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let response = call(&a.target, request, |mut c, r| {
            Box::pin(async move { c.submit_demand(r).await })
        })
        .await?;
        let us = install_us(&response);
        let body = response
            .into_inner()
            .validate()
            .map_err(|e| anyhow::anyhow!("the controller's answer is malformed: {e}"))?;
        let views: Vec<ReservationOut> = body.iter().map(|r| out(r, us)).collect();
        if a.target.json {
            println!("{}", serde_json::to_string_pretty(&views)?);
        } else {
            for v in &views {
                print_reservation(v);
            }
        }
        Ok(())
    })
}

pub fn cancel(cmd: CancelCmd) -> anyhow::Result<()> {
    let target = match (&cmd.demand, &cmd.collective, &cmd.reservation, &cmd.job) {
        (Some(d), None, None, None) => cancel_request::Target::DemandId(d.clone()),
        (None, Some(c), None, None) => cancel_request::Target::CollectiveId(c.clone()),
        (None, None, Some(r), None) => cancel_request::Target::ReservationId(r.clone()),
        (None, None, None, Some(j)) => cancel_request::Target::JobId(j.clone()),
        _ => bail!("say what to cancel: one of --demand, --collective, --reservation or --job"),
    };
    let request = proto::CancelRequest {
        header: header(&cmd.target.tenant),
        target: Some(target),
    };
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid request: {e}"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let answer = call(&cmd.target, request, |mut c, r| {
            Box::pin(async move { c.cancel(r).await })
        })
        .await;
        // Resent after a lost answer and nothing is live any more: the
        // first attempt cancelled it.
        let already = answer.as_ref().err().and_then(|e| e.downcast_ref::<AfterLostAnswer>());
        if already.is_some_and(|a| a.0.code() == tonic::Code::NotFound) {
            if cmd.target.json {
                println!("{}", serde_json::json!({ "cancelled": [], "already_cancelled": true }));
            } else {
                println!("already cancelled: the first attempt's answer was lost, and nothing of it is live now");
            }
            return Ok(());
        }
        let response = answer?;
        let us = install_us(&response);
        let ids = response.into_inner().cancelled_reservation_ids;
        if cmd.target.json {
            println!(
                "{}",
                serde_json::json!({ "cancelled": ids, "removed_us": us })
            );
        } else if ids.is_empty() {
            println!("nothing to cancel (the job is unregistered)");
        } else {
            for id in &ids {
                println!("cancelled {id}");
            }
            if let Some(us) = us {
                println!(
                    "entries removed from every switch in {:.2} ms",
                    us as f64 / 1e3
                );
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    fn request(text: &str) -> anyhow::Result<proto::SubmitDemandRequest> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demands.yaml");
        std::fs::write(&path, text).unwrap();
        batch_request(&path, "lab")
    }

    #[test]
    fn a_batch_becomes_one_request_in_file_order() {
        let r = request(
            "- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 64KiB, qp: 256, start_in_ms: 5, rate_gbps: 50}\n\
             - {id: b, src: 10.0.1.2, dst: 10.0.2.2, bytes: 1000, start_unix_ns: 7, duration_ms: 2, priority: background}\n",
        )
        .unwrap();
        assert_eq!(r.demands.len(), 2);
        assert_eq!(r.demands[0].size_bytes, 65536);
        assert_eq!(r.demands[0].dest_qp, Some(256));
        assert_eq!(
            r.demands[1].priority,
            proto::PriorityClass::Background as i32
        );
    }

    /// A batch entry may let the controller choose the destination QP; a
    /// malformed or doubled choice names the entry and the field.
    #[test]
    fn qp_choices_are_a_range_or_an_error_that_says_where() {
        let entry = |extra: &str| {
            request(&format!(
                "- {{id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 1000, start_in_ms: 1, rate_gbps: 1, {extra}}}\n"
            ))
        };
        let r = entry("qp_choices: 0x400-0x4ff").unwrap();
        assert_eq!(
            r.demands[0].dest_qp_choices,
            Some(proto::QpRange {
                first_qp: 0x400,
                count: 256
            })
        );
        for (extra, want) in [
            (
                "qp_choices: 9-3",
                "demands[0] (a).qp_choices: QP choices '9-3': the last QP is below the first",
            ),
            (
                "qp_choices: abc",
                "demands[0] (a).qp_choices: QP choices 'abc': no '-'",
            ),
            (
                "qp: 5, qp_choices: 2-9",
                "demands[0] (a): give qp or qp_choices, not both",
            ),
            ("qp_choices: 0-1", "dest_qp_choices.first_qp"),
        ] {
            let e = format!("{:#}", entry(extra).unwrap_err());
            assert!(e.contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn errors_name_the_entry_and_field() {
        let e = request("- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 1, rate_gbps: 1}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("demands[0] (a): give exactly one of start_unix_ns and start_in_ms"),
            "{e}"
        );
        let e = request(
            "- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 1, start_in_ms: 1, rate_gbps: 1, priority: urgent}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("demands[0] (a).priority"), "{e}");
        let e = format!(
            "{:#}",
            request("- {id: a, src: nowhere, dst: 10.0.2.1, bytes: 1}\n").unwrap_err()
        );
        assert!(e.contains("not a list of demands"), "{e}");
        let e = request("[]").unwrap_err().to_string();
        assert!(e.contains("no demands"), "{e}");
    }

    /// Mutated batch files (seeded; `FORESIGHT_FUZZ_INPUTS`, default
    /// 5,000) never panic, and every rejection says where: an entry and
    /// field, a line and column, or the request field.
    #[test]
    fn mutated_batch_files_never_panic_and_every_rejection_says_where() {
        let corpus = [
            "- {id: a, src: 10.0.1.1, dst: 10.0.2.1, bytes: 64KiB, qp: 256, start_in_ms: 5, rate_gbps: 50}\n\
             - {id: b, src: 10.0.1.2, dst: 10.0.2.2, bytes: 1000, start_unix_ns: 7, duration_ms: 2, priority: background}\n",
            "- id: ring-h1-h2\n  src: 10.0.1.1\n  dst: 10.0.1.2\n  qp: 4096\n  bytes: 1250000\n  rate_gbps: 50.0\n  start_unix_ns: 1795479704019968386\n  priority: iteration-blocking\n\
             - id: bg-h3-h1\n  src: 10.0.2.1\n  dst: 10.0.1.1\n  bytes: 1GB\n  duration_ms: 1500\n  start_in_ms: 0\n  priority: background\n  elastic: true\n",
        ];
        for text in corpus {
            batch_from_text(text, "f.yaml", "lab").expect("the corpus is valid");
        }
        let inputs: u64 = std::env::var("FORESIGHT_FUZZ_INPUTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5_000);
        let mut m = testkit::mutate::Mutator::new(1);
        let (mut ok, mut rejected) = (0u64, 0u64);
        for _ in 0..inputs {
            let (a, b) = (m.below(2), m.below(2));
            let input = m.text(corpus[a], corpus[b]);
            let r = std::panic::catch_unwind(|| batch_from_text(&input, "f.yaml", "lab"))
                .unwrap_or_else(|_| panic!("the batch parser panicked on:\n{input}"));
            match r {
                Ok(_) => ok += 1,
                Err(e) => {
                    rejected += 1;
                    let e = format!("{e:#}");
                    assert!(
                        e.contains("demands[")
                            || e.contains(" line ")
                            || e.contains("the document as a whole")
                            || e.contains("no demands")
                            || e.contains("invalid request: "),
                        "a rejection without its place: {e}\n--- input ---\n{input}"
                    );
                }
            }
        }
        println!("{inputs} mutated batch files: no panic, {ok} accepted, {rejected} rejected with their place");
        assert!(rejected > inputs / 2);
    }
}
