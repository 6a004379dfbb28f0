//! `foresight controller`: the controller daemon (see `daemon/`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use installer::device::{Artifacts, PortMap, Target};
use installer::ecn::{EcnProfile, PREDRAIN_ALWAYS};
use installer::static_state::{Collector, EcmpMode};
use installer::Devices;
use planner::ecmp::{HashMode, SeedPolicy};
use planner::topology::{yaml, Topology};
use planner::PlannerConfig;
use serde::Deserialize;

use super::millis::{ms_to_ns, MAX_MS};
use super::target_args::TargetArgs;
use crate::daemon::control::limits::Limits;
use crate::daemon::feedback::follow::{FollowConfig, FollowFrom};
use crate::daemon::inputs::learning::{LearnFrom, LearningConfig};
use crate::daemon::inputs::telemetry::{MismatchTolerance, TelemetryConfig};
use crate::daemon::southbound::desired::Policy;
use crate::daemon::{self, Switches};
use crate::fabric::{Endpoint, Pipeline};
use planner::periodic::LearnerConfig;

/// Default NDSP address (loopback: expose it deliberately).
pub const DEFAULT_NDSP: &str = "127.0.0.1:50051";
/// Default metrics and admin HTTP address.
pub const DEFAULT_HTTP: &str = "127.0.0.1:9090";

/// The most a millisecond setting of the controller may be: an hour.
const MAX_SETTING_MS: f64 = 3_600_000.0;

#[derive(Args)]
pub struct ControllerCmd {
    /// Fabric topology (YAML, see `foresight topo`).
    #[arg(long)]
    topology: PathBuf,
    /// Switch endpoints: YAML map of switch name to {addr: host:port,
    /// device_id: N, ports: {topology port: device port, ...}} (device_id
    /// defaults to the topology's switch id, ports to topology numbering).
    #[arg(long, conflicts_with = "bmv2", required_unless_present = "bmv2")]
    switches: Option<PathBuf>,
    /// Start one BMv2 simple_switch_grpc per topology switch (stopped on exit).
    #[arg(long)]
    bmv2: bool,
    #[command(flatten)]
    target: TargetArgs,
    /// BMv2: compiled pipeline `<prefix>.p4info.binpb` + `<prefix>.json` (default: the embedded one).
    #[arg(long)]
    pipeline: Option<String>,
    /// Tofino: the TNA program's P4Info [default: p4src/build/tna/foresight.p4info.binpb of this checkout].
    #[arg(long, value_name = "FILE")]
    p4info: Option<PathBuf>,
    /// NDSP gRPC listen address.
    #[arg(long, default_value = DEFAULT_NDSP)]
    ndsp: SocketAddr,
    /// Prometheus metrics and admin (status, entries) HTTP listen address.
    #[arg(long, default_value = DEFAULT_HTTP)]
    http: SocketAddr,
    /// File with the operator's bearer token (one line, at least 16
    /// printable characters, mode 600): the admin write (`foresight link`)
    /// then needs it. Required when --http is not a loopback address and
    /// the admin port is not mutual TLS (--tls-cert).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// Intended state, reloaded and reconciled on restart: a snapshot, and
    /// the journal of commits since it beside it (FILE.journal); "none" to
    /// keep it in memory only.
    #[arg(long, default_value = "foresight-state.json")]
    state_file: PathBuf,
    /// Install reservation entries this long before their start (the seed's T+1 horizon is 50 ms).
    #[arg(long, default_value_t = 50.0)]
    lead_time_ms: f64,
    /// P4Runtime election id (the highest connected controller is primary).
    /// With --etcd it comes from the leadership instead.
    #[arg(long, default_value_t = 1)]
    election_id: u128,
    /// Serve NDSP over TLS with this certificate (PEM); with --tls-key and
    /// --tls-client-ca, clients must present a certificate, and the tenant
    /// is its subject common name (not the request header's).
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_client_ca"])]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The CA (PEM) that signs client certificates.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Client certificate identities (common names) with the operator
    /// role: they may act for any tenant (comma-separated).
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        requires = "tls_cert"
    )]
    operators: Vec<String>,
    /// Client certificate identities with the scrape role: they read the
    /// admin port's /metrics and nothing else (Prometheus; comma-separated).
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        requires = "tls_cert"
    )]
    scrapers: Vec<String>,
    /// P4Runtime to the switches over TLS: the CA (PEM) that signed their
    /// certificates (which must name the address in the switches file).
    #[arg(long, value_name = "FILE", requires = "switches")]
    p4rt_tls_ca: Option<PathBuf>,
    /// The controller's certificate (PEM), for switches that require one.
    #[arg(long, value_name = "FILE", requires_all = ["p4rt_tls_key", "p4rt_tls_ca"])]
    p4rt_tls_cert: Option<PathBuf>,
    /// The private key of --p4rt-tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "p4rt_tls_cert")]
    p4rt_tls_key: Option<PathBuf>,
    /// Run as one replica of a highly available controller: etcd client
    /// endpoints (host:port, comma-separated). The replicas elect a leader,
    /// which alone plans and writes to the switches; the state lives in
    /// etcd (not in --state-file). Needs --switches.
    #[arg(long, value_name = "ENDPOINTS", value_delimiter = ',')]
    etcd: Vec<String>,
    /// etcd key prefix of this controller cluster (one per fabric).
    #[arg(long, default_value = "/foresight", requires = "etcd")]
    etcd_prefix: String,
    /// This replica's name (unique among the replicas; default: host name and pid).
    #[arg(long, requires = "etcd")]
    replica: Option<String>,
    /// Seconds a dead leader keeps the leadership (the etcd lease TTL):
    /// shorter fails over sooner, longer rides out longer pauses.
    #[arg(long, default_value_t = 1, requires = "etcd")]
    lease_ttl_s: i64,
    /// Fraction of each link's capacity that may be reserved.
    #[arg(long, default_value_t = 0.9)]
    headroom: f64,
    /// Which reservations planning may move to other paths (windows and
    /// rates never) to admit a demand or lower the peak: off, pending (none
    /// of their entries installed yet) or not-started (also installed but
    /// not started). Only those whose windows overlap what is being
    /// planned (or what a cancellation freed) move.
    #[arg(long, value_enum, default_value_t = daemon::ReoptimizeMode::Pending)]
    reoptimize: daemon::ReoptimizeMode,
    /// How reserved flows are held on their paths: sr (the ingress leaf
    /// pushes SR-MPLS labels: switches run Foresight's program), entropy
    /// (each flow is told the UDP source port whose ECMP hash takes its
    /// path, nothing is installed for it; a flow no port steers gets SR
    /// labels) or entropy-only (the same on switches that cannot run
    /// Foresight's program: a flow no port steers falls back to ECMP).
    /// Entropy steering needs --ecmp-hash qp-aware or five-tuple, and the
    /// switches hashing as --hash-seed says.
    #[arg(long, value_enum, default_value_t = daemon::SteeringMode::Sr)]
    steering: daemon::SteeringMode,
    /// Install a job's repeated collective once: the first step of a shape
    /// (kind, ranks, channels, priority) is planned and its entries stay
    /// for the job's life; each later step is admitted on the same paths
    /// and QPs (its window booked), writing nothing. A pattern goes when
    /// the job registers other ranks or is cancelled, or a link on its
    /// paths goes down. Each flow's entry is metered at the largest rate a
    /// step was granted (see --no-policing), so the standing entries lend
    /// the reserved queue for that rate only (docs/operations.md).
    #[arg(long)]
    standing_patterns: bool,
    /// Do not meter reserved flows: by default each SR push entry carries
    /// a meter at the flow's grant, and what a flow sends beyond it leaves
    /// in the lowest queue, on the same path (docs/operations.md).
    #[arg(long)]
    no_policing: bool,
    /// With --steering entropy[-only]: the UDP source ports flows may be
    /// told to use, FIRST-LAST.
    #[arg(long, default_value_t = planner::entropy::PortRange::default())]
    entropy_ports: planner::entropy::PortRange,
    /// With --steering entropy-only: a YAML file describing how the
    /// switches (which do not run Foresight's program) hash RoCEv2 packets
    /// (docs/entropy-steering.md). Without it they are taken to hash as
    /// Foresight's program does with --ecmp-hash and --hash-seed.
    #[arg(long, value_name = "FILE")]
    switch_hash: Option<PathBuf>,
    /// Wall-clock cap on the joint placement of one planning call, µs.
    #[arg(long, default_value_t = 5000)]
    joint_budget_us: u64,
    /// Pre-drain marking probability for competing flows, in 1/65536.
    #[arg(long, default_value_t = PREDRAIN_ALWAYS)]
    predrain_probability: u16,
    /// Lowered DCQCN profile of ports about to carry a reservation: kmin,kmax,pmax.
    #[arg(long, default_value = "2,12,32768", value_parser = parse_profile)]
    lowered_ecn: EcnProfile,
    /// DCQCN profile of every port at rest: kmin,kmax,pmax.
    #[arg(long, default_value = "10,50,13107", value_parser = parse_profile)]
    ecn: EcnProfile,
    /// Topology host that collects INT reports (sinks send Telemetry Reports to it).
    #[arg(long)]
    int_collector: Option<String>,
    /// UDP port of INT reports.
    #[arg(long, default_value_t = 32766)]
    int_port: u16,
    /// Receive INT reports on this UDP address (link utilisation in metrics and status).
    #[arg(long)]
    int_listen: Option<SocketAddr>,
    /// INT sinks report 1 in this many packets of each watched flow, so
    /// they stop cloning every packet (1: all). What the controller counts
    /// from reports (congestion packets, flow packets, T+5 bytes) is scaled
    /// back by it; port rates come from byte counters and need no scaling.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    int_report_every: u16,
    /// MTU of every switch port, in bytes of IPv4 packet plus MPLS labels:
    /// an INT hop whose metadata would pass it sets the M bit instead, and
    /// a source whose INT headers would not fit leaves the packet alone.
    /// Unset: ports are unchecked (the fabric leaves room for INT).
    #[arg(long, value_parser = clap::value_parser!(u16).range(i64::from(installer::static_state::MIN_MTU)..))]
    int_mtu: Option<u16>,
    /// How every switch picks an ECMP member (routing.hash_mode): hashing
    /// RoCEv2 by QP (qp-aware) or on the 5-tuple like a fabric without
    /// QP-aware hashing (five-tuple); flowlet switching (a random member
    /// per flowlet, --flowlet-timeout-us); spray (a random member per
    /// packet; needs NICs that accept reordering). The lab compares them.
    /// flowlet and spray are not in the TNA program yet.
    #[arg(long, value_enum, default_value = "qp-aware")]
    ecmp_hash: EcmpHash,
    /// With --ecmp-hash flowlet: a pause longer than this (µs, BMv2's
    /// timestamp unit) ends a flowlet, and the flow's next packet draws a
    /// new member. The default is a few round trips of a hardware fabric;
    /// the lab's packet times are milliseconds and it passes its own
    /// (bmv2-lab/README.md).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    flowlet_timeout_us: u32,
    /// ECMP hash seed and offset of every switch (routing.hash_seed,
    /// routing.hash_offset): per-switch (CRC-32 of the switch's name, and
    /// its tier's hash offset so that tiers decide independently),
    /// seeds-only (the seeds, no offsets) or same:N (every switch seed N,
    /// no offsets: the polarised fabric). The planner predicts ECMP
    /// fallback paths with it. [default: per-switch; seeds-only with
    /// --target tofino, whose program has no hash offset yet]
    #[arg(long)]
    hash_seed: Option<SeedPolicy>,
    /// Priority queue (MPLS traffic class) of reserved traffic, 0-7. It
    /// keeps its own DCQCN profile while the lowered one applies to the
    /// port's other queues. The port's scheduler must cap it at what is
    /// reserved (BMv2 rate-limits each queue alone: bmv2-lab/shaper.py).
    #[arg(long, default_value_t = installer::reservations::RESERVED_TC,
          value_parser = clap::value_parser!(u8).range(0..=7))]
    reserved_tc: u8,
    /// Priority queue of reserved background traffic (NDSP's BACKGROUND
    /// class, 0-7): below --reserved-tc, so that it yields to the traffic
    /// a training step waits for while keeping its reserved path (and
    /// clears the way for nothing); equal to --reserved-tc, it is reserved
    /// traffic like any other.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=7))]
    background_tc: u8,
    /// A port is congested (CongestionEvent on WatchEvents) while INT
    /// reports see its queue above this many packets.
    #[arg(long, default_value_t = 20)]
    congestion_queue_packets: u32,
    /// Reports above the threshold closer than this form one congestion
    /// episode; none for this long ends it.
    #[arg(long, default_value_t = 10.0)]
    congestion_gap_ms: f64,
    /// Forecast mismatch (WatchEvents) when a reserved flow is first seen
    /// more than this before or after its forecast start, or not at all by then.
    #[arg(long, default_value_t = 20.0)]
    mismatch_start_ms: f64,
    /// Forecast mismatch when a reserved flow's measured rate differs from
    /// its forecast rate by more than this fraction.
    #[arg(long, default_value_t = 0.25)]
    mismatch_rate_fraction: f64,
    /// T+5: learn every registered job's iterations from the traffic of
    /// its host pairs (watched while learning is on) and reserve the next
    /// ones before the job announces them (predicted reservations,
    /// withdrawn when the traffic stops matching).
    #[arg(long)]
    learn_iterations: bool,
    /// Where learning sees a job's traffic: `counters` (the watch entries'
    /// counters, polled every --learn-poll-ms: UDP and TCP) or `int` (INT
    /// reports, per packet, RoCEv2 only; needs --int-listen).
    #[arg(long, value_enum, default_value_t = LearnSource::Counters)]
    learn_from: LearnSource,
    /// How often the watch counters are read (with --learn-from counters).
    #[arg(long, default_value_t = 20.0)]
    learn_poll_ms: f64,
    /// Transfers under this fraction of an iteration's largest are left
    /// out of its pattern (a TCP job's acknowledgements).
    #[arg(long, default_value_t = 0.1)]
    learn_min_transfer: f64,
    /// A burst of a job's traffic carrying fewer bytes is no iteration
    /// (a keep-alive between iterations) and is not learned from.
    #[arg(long, default_value_t = 16_384)]
    learn_min_iteration_bytes: u64,
    /// What becomes of a predicted transfer's return traffic (the
    /// acknowledgements its destination sent back when seen): `reserve`
    /// (its reverse pair reserved with it, at the share of its rate the
    /// return traffic had) or `ecmp` (left to ECMP, in its own queue).
    #[arg(long, value_enum, default_value_t = LearnReturns::Reserve)]
    learn_returns: LearnReturns,
    /// Consecutive agreeing iterations before predicting (at least 2).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=1000))]
    learn_lock_after: u32,
    /// Allowed deviation of an iteration's start, as a fraction of its period.
    #[arg(long, default_value_t = 0.05)]
    learn_jitter: f64,
    /// Allowed deviation of a transfer's bytes, as a fraction of them.
    #[arg(long, default_value_t = 0.05)]
    learn_bytes_tolerance: f64,
    /// Iterations reserved ahead once learned.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    learn_horizon: u32,
    /// Silence (none of the job's flows seen) that ends an iteration's
    /// communication: longer than the pauses within it, shorter than the
    /// compute between iterations.
    #[arg(long, default_value_t = 50.0)]
    learn_idle_ms: f64,
    /// Reservations follow their traffic: one whose flows still send near
    /// its end is extended in steps (as far as every link of its paths has
    /// room; never into what another reservation holds), one whose flows
    /// stopped is released early. Where the traffic is seen: --follow-from.
    #[arg(long)]
    follow_traffic: bool,
    /// Where --follow-traffic sees a reserved flow's traffic: `int` (its
    /// INT reports, RoCEv2 only; needs --int-listen) or `counters` (the
    /// watch counters of its host pair at its ingress leaf, read every
    /// 20 ms: UDP and TCP).
    #[arg(long, value_enum, default_value_t = FollowSource::Int)]
    follow_from: FollowSource,
    /// An extension step, as a share of a flow's granted duration.
    #[arg(long, default_value_t = 0.25)]
    follow_step: f64,
    /// The most a flow is extended in all, as a share of its granted duration.
    #[arg(long, default_value_t = 1.0)]
    follow_max: f64,
    /// Flows quiet this long after they sent: the reservation is released
    /// (until then they count as sending). Set it above the transport's
    /// retransmission timeout, or a stalled flow loses its reservation.
    #[arg(long, default_value_t = 200.0)]
    release_idle_ms: f64,
    /// Keep a share of every link's reservable capacity for tenants:
    /// `alice=0.5,bob=0.3` (`*=F` for every other tenant together; by
    /// default what the named ones leave). Each share group is planned in
    /// its own slice; a slice left idle is not lent to others.
    #[arg(long, value_name = "TENANT=FRACTION,...")]
    tenant_shares: Option<planner::shares::TenantShares>,
    /// Live reservations one tenant may hold (0: no limit).
    #[arg(long, default_value_t = Limits::default().live_per_tenant)]
    max_live_reservations: usize,
    /// Reservations one request may create (0: the protocol's 4096).
    #[arg(long, default_value_t = Limits::default().new_per_request)]
    max_new_reservations_per_request: usize,
    /// Sustained NDSP requests per second per tenant (0: no limit).
    #[arg(long, default_value_t = Limits::default().requests_per_s)]
    max_requests_per_s: f64,
    /// Requests a tenant may send at once above the sustained rate.
    #[arg(long, default_value_t = Limits::default().burst)]
    request_burst: f64,
    /// Largest NDSP request the server decodes, in bytes (larger:
    /// OUT_OF_RANGE before anything is read).
    #[arg(long, default_value_t = 4 << 20)]
    max_request_bytes: usize,
    /// Write a JSON file (pid, addresses) once every switch is reconciled.
    #[arg(long)]
    ready_file: Option<PathBuf>,
    /// At start-up, wait this long for every switch to be reconciled before
    /// declaring readiness anyway (unreachable switches keep being retried).
    #[arg(long, default_value_t = 120.0)]
    switch_wait_s: f64,
    /// Structured logs as JSON lines (FORESIGHT_LOG sets the filter, default info).
    #[arg(long)]
    log_json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum EcmpHash {
    QpAware,
    FiveTuple,
    Flowlet,
    Spray,
}

impl ControllerCmd {
    /// `--ecmp-hash` with its timeout.
    fn ecmp_mode(&self) -> EcmpMode {
        match self.ecmp_hash {
            EcmpHash::QpAware => HashMode::QpAware.into(),
            EcmpHash::FiveTuple => HashMode::FiveTuple.into(),
            EcmpHash::Flowlet => EcmpMode::Flowlet {
                timeout_us: self.flowlet_timeout_us,
            },
            EcmpHash::Spray => EcmpMode::Spray,
        }
    }

    /// `--steering` with its ports; entropy steering needs a hash the
    /// planner can predict.
    fn steering(&self) -> anyhow::Result<Option<daemon::EntropyConfig>> {
        let fallback_sr = match self.steering {
            daemon::SteeringMode::Sr => return Ok(None),
            daemon::SteeringMode::Entropy => true,
            daemon::SteeringMode::EntropyOnly => false,
        };
        if matches!(self.ecmp_hash, EcmpHash::Flowlet | EcmpHash::Spray) {
            bail!(
                "--steering entropy: the switches must hash each flow to one path \
                 (--ecmp-hash qp-aware or five-tuple), not pick members at random"
            );
        }
        Ok(Some(daemon::EntropyConfig {
            ports: self.entropy_ports,
            fallback_sr,
        }))
    }

    /// `--switch-hash`: how switches that do not run Foresight's program
    /// hash. Only they are steered by a description (`entropy-only`): a
    /// switch that falls back to SR labels runs Foresight's program, whose
    /// hash the controller sets itself.
    fn switch_hash(
        &self,
        topo: &Topology,
    ) -> anyhow::Result<Option<std::sync::Arc<planner::hash_profile::FabricHash>>> {
        let Some(path) = &self.switch_hash else {
            return Ok(None);
        };
        if self.steering != daemon::SteeringMode::EntropyOnly {
            bail!(
                "--switch-hash describes switches that cannot run Foresight's program: it needs \
                 --steering entropy-only (with sr or entropy the switches run the program and \
                 hash as the controller sets them)"
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--switch-hash {}", path.display()))?;
        planner::hash_profile::FabricHash::from_yaml(topo, &text, &path.display().to_string())
            .map(|f| Some(std::sync::Arc::new(f)))
            .map_err(|e| anyhow::anyhow!("--switch-hash {e}"))
    }

    /// `--hash-seed`, or the target's default; what the target's program
    /// cannot do is refused here, before any switch is contacted.
    fn seed_policy(&self) -> anyhow::Result<SeedPolicy> {
        let tofino = self.target.target == Target::Tofino;
        let random = match self.ecmp_hash {
            EcmpHash::Flowlet => Some("flowlet"),
            EcmpHash::Spray => Some("spray"),
            EcmpHash::QpAware | EcmpHash::FiveTuple => None,
        };
        if let (true, Some(mode)) = (tofino, random) {
            bail!(
                "--ecmp-hash {mode}: the TNA program has no flowlet or spray mode yet \
                 (p4src/README.md); use qp-aware or five-tuple with --target tofino"
            );
        }
        match self.hash_seed {
            Some(SeedPolicy::PerSwitch) if tofino => bail!(
                "--hash-seed per-switch sets per-tier hash offsets, which the TNA program does \
                 not have yet (p4src/README.md); use seeds-only or same:N with --target tofino"
            ),
            Some(policy) => Ok(policy),
            None if tofino => Ok(SeedPolicy::SeedsOnly),
            None => Ok(SeedPolicy::PerSwitch),
        }
    }
}

/// `--learn-from`: see [`LearnFrom`].
#[derive(Clone, Copy, clap::ValueEnum)]
enum LearnSource {
    Counters,
    Int,
}

/// `--follow-from`: see [`FollowFrom`].
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum FollowSource {
    Int,
    Counters,
}

/// `--learn-returns`: see [`LearningConfig::reserve_returns`].
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum LearnReturns {
    Reserve,
    Ecmp,
}

impl ControllerCmd {
    /// The TLS settings of the P4Runtime sessions, if any.
    fn p4rt_tls(&self) -> anyhow::Result<Option<tonic::transport::ClientTlsConfig>> {
        crate::fabric::client_tls(
            "--p4rt-tls",
            self.p4rt_tls_ca.as_deref(),
            self.p4rt_tls_cert.as_deref(),
            self.p4rt_tls_key.as_deref(),
        )
    }

    pub fn json_logs(&self) -> bool {
        self.log_json
    }
}

/// Milliseconds (finite, 0 to 1 hour) as ns.
fn parse_profile(s: &str) -> Result<EcnProfile, String> {
    let v: Vec<u32> = s
        .split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| format!("{x:?} is not a number"))
        })
        .collect::<Result<_, _>>()?;
    let [kmin, kmax, pmax] = v[..] else {
        return Err("want kmin,kmax,pmax (packets, packets, 1/65536)".into());
    };
    if kmin > kmax || pmax > 65535 {
        return Err("want kmin <= kmax and pmax <= 65535".into());
    }
    Ok(EcnProfile { kmin, kmax, pmax })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchEntry {
    addr: String,
    device_id: Option<u64>,
    /// Topology port -> device port (e.g. Tofino `D_P`).
    ports: Option<BTreeMap<u16, u16>>,
}

/// The endpoints of a switches file, and the port maps it gives.
type SwitchesFile = (BTreeMap<String, Endpoint>, BTreeMap<String, PortMap>);

fn load_switches(
    path: &PathBuf,
    topo: &planner::Topology,
    tls: Option<tonic::transport::ClientTlsConfig>,
) -> anyhow::Result<SwitchesFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading switches file {}", path.display()))?;
    let (mut endpoints, port_maps) =
        parse_switches(&text, topo).with_context(|| format!("switches file {}", path.display()))?;
    for e in endpoints.values_mut() {
        e.tls = tls.clone();
    }
    Ok((endpoints, port_maps))
}

fn parse_switches(text: &str, topo: &planner::Topology) -> anyhow::Result<SwitchesFile> {
    let map: BTreeMap<String, SwitchEntry> = serde_yaml::from_str(text).context(
        "want a map of switch name to {addr: host:port, device_id: N, \
         ports: {topology port: device port, ...}}",
    )?;
    let mut endpoints = BTreeMap::new();
    let mut port_maps = BTreeMap::new();
    for (name, e) in map {
        let Some(s) = topo.switch_by_name(&name) else {
            bail!("{name} is not a switch of fabric {}", topo.name());
        };
        if let Some(ports) = e.ports {
            let own: Vec<u16> = (0..topo.edge_count() as u32)
                .map(|e| topo.edge(e))
                .filter(|l| l.from == planner::topology::NodeRef::Switch(s))
                .map(|l| l.from_port)
                .collect();
            port_maps.insert(name.clone(), PortMap::new(&name, ports, &own)?);
        }
        let device_id = e
            .device_id
            .unwrap_or(u64::from(topo.switches()[s as usize].id));
        endpoints.insert(
            name,
            Endpoint {
                addr: e.addr,
                device_id,
                tls: None,
            },
        );
    }
    Ok((endpoints, port_maps))
}

impl ControllerCmd {
    /// The pipeline for the target: BMv2's embedded or `--pipeline` one,
    /// or the TNA P4Info with the Tofino compiler's output.
    fn pipeline(&self) -> anyhow::Result<Pipeline> {
        match self.target.tofino()? {
            None => {
                if self.p4info.is_some() {
                    bail!("--p4info is for --target tofino; BMv2 takes --pipeline PREFIX");
                }
                match &self.pipeline {
                    Some(prefix) => Pipeline::load(prefix),
                    None => Pipeline::embedded(),
                }
            }
            Some(out) => {
                if self.bmv2 {
                    bail!("--bmv2 starts BMv2 switches; --target tofino drives the switches of --switches");
                }
                if self.pipeline.is_some() {
                    bail!(
                        "--pipeline names BMv2 artifacts; with --target tofino the pipeline \
                         is --tofino-out (and --p4info)"
                    );
                }
                let p4info = match &self.p4info {
                    Some(p) => p.clone(),
                    None => {
                        let p = Target::Tofino.committed_p4info();
                        if !p.exists() {
                            bail!(
                                "the TNA P4Info {} is not there (the TNA build commits it); \
                                 pass --p4info FILE",
                                p.display()
                            );
                        }
                        p
                    }
                };
                Pipeline::from_artifacts(&p4info, &Artifacts::Tofino(out))
            }
        }
    }
}

/// How long the daemon's allocator keeps memory nobody uses before it
/// returns it to the OS: longer than the gaps between commits, so that
/// their buffers are reused, not faulted in afresh.
pub const KEEP_FREED_MEMORY: std::time::Duration = std::time::Duration::from_secs(10);

pub fn run(cmd: ControllerCmd) -> anyhow::Result<()> {
    let topology = yaml::load_file(&cmd.topology)
        .with_context(|| format!("topology {}", cmd.topology.display()))?;
    let pipeline = cmd.pipeline()?;
    let (switches, port_maps) = match &cmd.switches {
        Some(path) => {
            let (endpoints, port_maps) = load_switches(path, &topology, cmd.p4rt_tls()?)?;
            (Switches::Endpoints(endpoints), port_maps)
        }
        None => (Switches::Bmv2, BTreeMap::new()),
    };
    let devices = Devices::new(cmd.target.target, port_maps);
    let seeds = cmd.seed_policy()?;
    if !(cmd.headroom > 0.0 && cmd.headroom <= 1.0) {
        bail!("--headroom {} must be in (0, 1]", cmd.headroom);
    }
    let lead_ns = ms_to_ns("--lead-time-ms", cmd.lead_time_ms, MAX_MS)?;
    let collector = match &cmd.int_collector {
        None => None,
        Some(name) => Some(Collector {
            host: topology.host_by_name(name).ok_or_else(|| {
                anyhow::anyhow!(
                    "--int-collector {name}: not a host of fabric {}",
                    topology.name()
                )
            })?,
            udp_port: cmd.int_port,
            report_every: cmd.int_report_every,
        }),
    };
    let state_file = (cmd.state_file.as_os_str() != "none").then(|| cmd.state_file.clone());
    let steering = cmd.steering()?;
    let switch_hash = cmd.switch_hash(&topology)?;
    let mut config = daemon::Config {
        topology,
        pipeline,
        devices,
        switches,
        ndsp_listen: cmd.ndsp,
        http_listen: cmd.http,
        admin_token: cmd
            .admin_token_file
            .as_deref()
            .map(daemon::northbound::admin_token::AdminToken::from_file)
            .transpose()?,
        int_listen: cmd.int_listen,
        state_file,
        election_id: cmd.election_id,
        ha: ha_config(&cmd)?,
        mtls: match (&cmd.tls_cert, &cmd.tls_key, &cmd.tls_client_ca) {
            (Some(cert), Some(key), Some(ca)) => {
                Some(daemon::northbound::identity::Mtls::from_files(
                    cert,
                    key,
                    ca,
                    cmd.operators.iter().cloned().collect(),
                    cmd.scrapers.iter().cloned().collect(),
                )?)
            }
            _ => None,
        },
        planner: PlannerConfig {
            headroom: cmd.headroom,
            ecmp_hash: cmd.ecmp_mode().hash_key(),
            ecmp_seeds: seeds,
            switch_hash,
            joint_budget_us: cmd.joint_budget_us,
            ..PlannerConfig::default()
        },
        reoptimize: cmd.reoptimize,
        steering,
        standing_patterns: cmd.standing_patterns,
        policy: Policy {
            lead_ns,
            ecn: cmd.ecn,
            lowered: cmd.lowered_ecn,
            predrain_probability: cmd.predrain_probability,
            collector,
            ecmp_hash: cmd.ecmp_mode(),
            ecmp_seeds: seeds,
            reserved_tc: cmd.reserved_tc,
            background_tc: cmd.background_tc,
            int_mtu: cmd.int_mtu,
            // Set below, once the readers of the watch entries are known.
            watch_reserved: false,
            police_reserved: !cmd.no_policing,
        },
        telemetry: TelemetryConfig {
            congestion_queue_packets: cmd.congestion_queue_packets,
            congestion_gap_ns: ms_to_ns(
                "--congestion-gap-ms",
                cmd.congestion_gap_ms,
                MAX_SETTING_MS,
            )?,
            report_every: cmd.int_report_every,
        },
        mismatch: MismatchTolerance {
            start_ns: ms_to_ns("--mismatch-start-ms", cmd.mismatch_start_ms, MAX_SETTING_MS)?,
            rate_fraction: if cmd.mismatch_rate_fraction.is_finite()
                && cmd.mismatch_rate_fraction >= 0.0
            {
                cmd.mismatch_rate_fraction
            } else {
                bail!("--mismatch-rate-fraction: want a fraction >= 0, e.g. 0.25");
            },
            ..MismatchTolerance::default()
        },
        follow: if cmd.follow_traffic {
            let share = |name: &str, v: f64| {
                if v.is_finite() && v > 0.0 && v <= 10.0 {
                    Ok(v)
                } else {
                    bail!("{name}: want a share of the granted duration in (0, 10], e.g. 0.25, got {v}")
                }
            };
            if cmd.follow_from == FollowSource::Int && cmd.int_listen.is_none() {
                bail!("--follow-traffic --follow-from int needs the INT collector (--int-listen); or see the traffic with --follow-from counters");
            }
            Some(FollowConfig {
                from: match cmd.follow_from {
                    FollowSource::Int => FollowFrom::Int,
                    FollowSource::Counters => FollowFrom::Counters,
                },
                step_fraction: share("--follow-step", cmd.follow_step)?,
                max_fraction: share("--follow-max", cmd.follow_max)?,
                idle_ns: ms_to_ns("--release-idle-ms", cmd.release_idle_ms, MAX_SETTING_MS)?,
                ..Default::default()
            })
        } else {
            None
        },
        learning: if cmd.learn_iterations {
            let fraction = |name: &str, v: f64| {
                if v.is_finite() && (0.0..1.0).contains(&v) {
                    Ok(v)
                } else {
                    bail!("{name}: want a fraction in [0, 1), e.g. 0.05, got {v}")
                }
            };
            Some(LearningConfig {
                learner: LearnerConfig {
                    lock_after: cmd.learn_lock_after as usize,
                    jitter: fraction("--learn-jitter", cmd.learn_jitter)?,
                    bytes_tolerance: fraction(
                        "--learn-bytes-tolerance",
                        cmd.learn_bytes_tolerance,
                    )?,
                    horizon: cmd.learn_horizon as usize,
                },
                idle_ns: ms_to_ns("--learn-idle-ms", cmd.learn_idle_ms, MAX_SETTING_MS)?,
                from: match cmd.learn_from {
                    LearnSource::Counters => {
                        let poll_ns =
                            ms_to_ns("--learn-poll-ms", cmd.learn_poll_ms, MAX_SETTING_MS)?;
                        if poll_ns < 1_000_000 {
                            bail!("--learn-poll-ms: at least 1 ms, got {}", cmd.learn_poll_ms);
                        }
                        LearnFrom::Counters { poll_ns }
                    }
                    LearnSource::Int => LearnFrom::Int,
                },
                min_transfer_fraction: fraction("--learn-min-transfer", cmd.learn_min_transfer)?,
                min_iteration_bytes: cmd.learn_min_iteration_bytes,
                reserve_returns: cmd.learn_returns == LearnReturns::Reserve,
            })
        } else {
            None
        },
        limits: {
            let rate = |name: &str, v: f64| {
                if v.is_finite() && v >= 0.0 {
                    Ok(v)
                } else {
                    bail!("{name}: want a number >= 0, got {v}")
                }
            };
            Limits {
                live_per_tenant: cmd.max_live_reservations,
                new_per_request: cmd.max_new_reservations_per_request,
                requests_per_s: rate("--max-requests-per-s", cmd.max_requests_per_s)?,
                burst: rate("--request-burst", cmd.request_burst)?,
            }
        },
        max_request_bytes: cmd.max_request_bytes.max(1024),
        tenant_shares: cmd.tenant_shares.unwrap_or_default(),
        ready_file: cmd.ready_file,
        switch_wait: std::time::Duration::from_secs_f64(cmd.switch_wait_s.clamp(0.0, 86_400.0)),
    };
    config.policy.watch_reserved = config.reads_reserved_watch();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(daemon::running::startup::run(config))
}

/// The replica settings, when --etcd is given.
fn ha_config(cmd: &ControllerCmd) -> anyhow::Result<Option<daemon::persistence::ha::HaConfig>> {
    if cmd.etcd.is_empty() {
        return Ok(None);
    }
    if cmd.etcd.iter().any(|e| e.trim().is_empty()) {
        bail!("--etcd: an empty endpoint (want host:port,host:port,...)");
    }
    if !(1..=60).contains(&cmd.lease_ttl_s) {
        bail!("--lease-ttl-s {} must be 1 to 60 seconds", cmd.lease_ttl_s);
    }
    if !cmd.etcd_prefix.starts_with('/') || cmd.etcd_prefix.ends_with('/') {
        bail!(
            "--etcd-prefix {:?} must start with '/' and not end with it",
            cmd.etcd_prefix
        );
    }
    let replica = match &cmd.replica {
        Some(r) if r.trim().is_empty() => bail!("--replica must not be empty"),
        Some(r) => r.clone(),
        None => format!(
            "{}-{}",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "replica".into()),
            std::process::id()
        ),
    };
    Ok(Some(daemon::persistence::ha::HaConfig {
        endpoints: cmd.etcd.clone(),
        prefix: cmd.etcd_prefix.clone(),
        replica,
        lease_ttl_s: cmd.lease_ttl_s,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn topo() -> planner::Topology {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
        );
        yaml::load_file(path).unwrap()
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse_switches(text, &topo()).unwrap_err())
    }

    #[test]
    fn switches_file_gives_endpoints_and_port_maps() {
        let (endpoints, ports) = parse_switches(
            "leaf1: {addr: \"10.0.0.1:9559\", device_id: 0, ports: {1: 128, 2: 136, 3: 144, 4: 152}}\n\
             spine1: {addr: \"10.0.0.3:9559\"}\n",
            &topo(),
        )
        .unwrap();
        assert_eq!(endpoints["leaf1"].device_id, 0);
        assert_eq!(endpoints["spine1"].device_id, 3, "topology id by default");
        assert_eq!(ports["leaf1"].device_port(3), 144);
        assert!(!ports.contains_key("spine1"), "topology numbering");
    }

    #[test]
    fn bad_port_maps_are_refused_with_what_is_wrong() {
        let e = err("leaf1: {addr: a, ports: [128, 136]}\n");
        assert!(e.contains("ports: {topology port: device port"), "{e}");
        assert!(e.contains("invalid type: sequence"), "{e}");
        let e = err("leaf1: {addr: a, ports: {one: 128}}\n");
        assert!(e.contains("want a map of switch name"), "{e}");
        let e = err("leaf1: {addr: a, ports: {1: 128, 2: 136, 3: 144, 4: 152, 5: 160}}\n");
        assert!(
            e.contains(
                "leaf1: port 5 is not a port of leaf1 in the topology (its ports: 1, 2, 3, 4)"
            ),
            "{e}"
        );
        let e = err("leaf1: {addr: a, ports: {1: 128}}\n");
        assert!(
            e.contains("no device port for topology port(s) 2, 3, 4"),
            "{e}"
        );
        let e = err("leaf1: {addr: a, ports: {1: 128, 2: 128, 3: 144, 4: 152}}\n");
        assert!(
            e.contains("ports 1 and 2 both map to device port 128"),
            "{e}"
        );
        let e = err("leaf1: {addr: a, port_map: {1: 128}}\n");
        assert!(e.contains("unknown field `port_map`"), "{e}");
        let e = err("leaf9: {addr: a}\n");
        assert!(e.contains("leaf9 is not a switch of fabric"), "{e}");
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cmd: ControllerCmd,
    }

    fn pipeline(args: &[&str]) -> anyhow::Result<Pipeline> {
        let base = ["t", "--topology", "t.yaml"];
        Cli::try_parse_from(base.iter().chain(args))
            .map_err(anyhow::Error::from)?
            .cmd
            .pipeline()
    }

    fn pipeline_err(args: &[&str]) -> String {
        match pipeline(args) {
            Ok(_) => panic!("{args:?} was accepted"),
            Err(e) => format!("{e:#}"),
        }
    }

    fn parsed(args: &[&str]) -> ControllerCmd {
        let base = ["t", "--topology", "t.yaml", "--switches", "s.yaml"];
        Cli::try_parse_from(base.iter().chain(args)).unwrap().cmd
    }

    #[test]
    fn ecmp_modes_and_seed_defaults_follow_the_target() {
        assert_eq!(parsed(&[]).seed_policy().unwrap(), SeedPolicy::PerSwitch);
        assert_eq!(
            parsed(&["--target", "tofino"]).seed_policy().unwrap(),
            SeedPolicy::SeedsOnly
        );
        let e = parsed(&["--target", "tofino", "--hash-seed", "per-switch"])
            .seed_policy()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("hash offsets") && e.contains("seeds-only"),
            "{e}"
        );
        let e = parsed(&["--target", "tofino", "--ecmp-hash", "spray"])
            .seed_policy()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--ecmp-hash spray: the TNA program"), "{e}");
        assert_eq!(
            parsed(&["--ecmp-hash", "flowlet", "--flowlet-timeout-us", "40000"]).ecmp_mode(),
            EcmpMode::Flowlet { timeout_us: 40_000 }
        );
        assert_eq!(
            parsed(&["--ecmp-hash", "spray"]).ecmp_mode(),
            EcmpMode::Spray
        );
        assert_eq!(
            parsed(&["--ecmp-hash", "five-tuple"]).ecmp_mode(),
            EcmpMode::Hash(HashMode::FiveTuple)
        );
        let base = ["t", "--topology", "t.yaml", "--switches", "s.yaml"];
        assert!(Cli::try_parse_from(base).is_ok());
        let zero = base.iter().chain(&["--flowlet-timeout-us", "0"]);
        let e = Cli::try_parse_from(zero).err().expect("timeout 0 refused");
        assert!(e.to_string().contains("--flowlet-timeout-us"), "{e}");
    }

    /// A hash description is read only for switches steered by port that
    /// cannot run Foresight's program, and a bad one is refused naming it.
    #[test]
    fn a_switch_hash_file_needs_entropy_only_and_must_load() {
        let dir = std::env::temp_dir().join(format!("fs-switch-hash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("asic.yaml");
        std::fs::write(
            &file,
            "version: 1\ndefault: {function: crc16-arc, fields: [src_ip, dst_ip, l4_src_port]}\n",
        )
        .unwrap();
        let f = file.to_str().unwrap();
        for steering in ["sr", "entropy"] {
            let e = parsed(&["--steering", steering, "--switch-hash", f])
                .switch_hash(&topo())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("needs --steering entropy-only"),
                "{steering}: {e}"
            );
        }
        let ok = parsed(&["--steering", "entropy-only", "--switch-hash", f])
            .switch_hash(&topo())
            .unwrap()
            .unwrap();
        assert_eq!(ok.switches[0].crc.width, 16);
        std::fs::write(&file, "version: 1\ndefault: {function: crc16-arc}\n").unwrap();
        let e = parsed(&["--steering", "entropy-only", "--switch-hash", f])
            .switch_hash(&topo())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("asic.yaml: switch") && e.contains("no fields"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn target_flags_that_do_not_go_together_are_refused() {
        let e = pipeline_err(&["--bmv2", "--target", "tofino", "--tofino-out", "/x"]);
        assert!(e.starts_with("--bmv2 starts BMv2 switches"), "{e}");
        let e = pipeline_err(&[
            "--switches",
            "s.yaml",
            "--target",
            "tofino",
            "--tofino-out",
            "/x",
            "--pipeline",
            "p",
        ]);
        assert!(e.starts_with("--pipeline names BMv2 artifacts"), "{e}");
        let e = pipeline_err(&["--switches", "s.yaml", "--p4info", "x.binpb"]);
        assert!(e.starts_with("--p4info is for --target tofino"), "{e}");
        let e = pipeline_err(&["--switches", "s.yaml", "--target", "tofino"]);
        assert!(e.contains("needs --tofino-out DIR"), "{e}");
        let e = pipeline_err(&["--switches", "s.yaml", "--tofino-pipe", "pipe"]);
        assert!(e.starts_with("--tofino-pipe is for --target tofino"), "{e}");
        // The BMv2 default is untouched.
        assert!(pipeline(&["--bmv2"]).is_ok());
    }

    #[test]
    fn tofino_pipeline_is_the_p4info_and_the_packed_compiler_output() {
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir(out.path().join("pipe")).unwrap();
        std::fs::write(out.path().join("pipe/tofino.bin"), [1, 2]).unwrap();
        std::fs::write(out.path().join("bfrt.json"), b"{}").unwrap();
        // The v1model P4Info stands in for the TNA one.
        let p4info = Target::Bmv2.committed_p4info().display().to_string();
        let dir = out.path().display().to_string();
        let a = [
            "--switches",
            "s.yaml",
            "--target",
            "tofino",
            "--tofino-out",
            &dir,
            "--p4info",
            &p4info,
        ];
        let e = pipeline_err(&a);
        assert!(e.contains("pipe/context.json is missing"), "{e}");
        std::fs::write(out.path().join("pipe/context.json"), b"[]").unwrap();
        let p = pipeline(&a).unwrap();
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[9, 0, 0, 0][..], b"foresight",
            &[2, 0, 0, 0], &[1, 2],
            &[2, 0, 0, 0], b"[]",
            &[4, 0, 0, 0], b"pipe",
            &[2, 0, 0, 0], b"{}",
        ]
        .concat();
        assert_eq!(*p.device_config, expected);
        assert!(p.info.table(installer::names::IPV4_LPM).is_ok());
    }
}
