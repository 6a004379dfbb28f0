//! How the daemon is configured: what `foresight controller`'s command
//! line becomes (the fabric, the switches, the listeners, HA, planning,
//! telemetry, learning and limits), in one value handed to `startup`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use installer::Devices;
use planner::{PlannerConfig, Topology};

use crate::daemon::control::limits::Limits;
use crate::daemon::inputs::learning::{LearnFrom, LearningConfig};
use crate::daemon::inputs::telemetry::{MismatchTolerance, TelemetryConfig};
use crate::daemon::northbound::admin_token::AdminToken;
use crate::daemon::northbound::identity::Mtls;
use crate::daemon::persistence::ha::HaConfig;
use crate::daemon::southbound::desired::Policy;
use crate::fabric::{Endpoint, Pipeline};

/// Where the switches are.
pub enum Switches {
    /// Given endpoints, by switch name.
    Endpoints(BTreeMap<String, Endpoint>),
    /// Start one BMv2 per topology switch (stopped when the daemon exits).
    Bmv2,
}

/// Which earlier reservations a new demand, a failed link or a
/// cancellation may move to other paths (windows and rates never change;
/// every move is a `WatchEvents` reservation change saying what and why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReoptimizeMode {
    /// None: each reservation keeps the paths it was given.
    Off,
    /// Those none of whose entries are on the switches yet.
    Pending,
    /// Also those installed but not started.
    NotStarted,
}

/// How reserved flows are held on their paths (`--steering`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SteeringMode {
    /// SR-MPLS labels pushed by the ingress leaf.
    Sr,
    /// The flow's UDP source port; SR labels where no port steers.
    Entropy,
    /// The flow's UDP source port; ECMP where no port steers.
    EntropyOnly,
}

/// Entropy steering's settings (how the switches hash is the planner's:
/// `PlannerConfig::switch_hash`, else Foresight's program).
#[derive(Debug, Clone, Copy)]
pub struct EntropyConfig {
    /// The ports a flow may be told to use.
    pub ports: planner::entropy::PortRange,
    /// Pin flows no port steers by SR (the switches run Foresight's program).
    pub fallback_sr: bool,
}

pub struct Config {
    pub topology: Topology,
    pub pipeline: Pipeline,
    /// The switches' target and port numbering.
    pub devices: Devices,
    pub switches: Switches,
    pub ndsp_listen: SocketAddr,
    pub http_listen: SocketAddr,
    /// The operator's token for the admin endpoint's writes; required when
    /// `http_listen` is not a loopback address.
    pub admin_token: Option<AdminToken>,
    pub int_listen: Option<SocketAddr>,
    pub state_file: Option<PathBuf>,
    pub election_id: u128,
    /// Mutual TLS on NDSP (the tenant is the client certificate's).
    pub mtls: Option<Mtls>,
    /// Replicas on etcd (the state lives there, not in `state_file`, and
    /// the election id comes from the leadership).
    pub ha: Option<HaConfig>,
    pub planner: PlannerConfig,
    pub policy: Policy,
    /// Which reservations planning may move before they are installed.
    pub reoptimize: ReoptimizeMode,
    /// Hold reserved flows by their UDP source port (`None`: SR labels).
    pub steering: Option<EntropyConfig>,
    /// Install a job's repeated collective once and admit its later steps
    /// on the same paths (`--standing-patterns`).
    pub standing_patterns: bool,
    /// Congestion episodes from INT reports.
    pub telemetry: TelemetryConfig,
    /// When observed traffic is a forecast mismatch.
    pub mismatch: MismatchTolerance,
    /// Written (JSON: addresses, pid) once every switch is reconciled,
    /// or `switch_wait` has passed.
    pub ready_file: Option<PathBuf>,
    pub switch_wait: Duration,
    /// Learn registered jobs' iterations and reserve them ahead (T+5);
    /// learning from INT needs the INT collector.
    pub learning: Option<LearningConfig>,
    /// Extend reservations whose flows still send, release those whose
    /// flows stopped (`--follow-traffic`).
    pub follow: Option<crate::daemon::feedback::follow::FollowConfig>,
    /// Per-tenant limits.
    pub limits: Limits,
    /// Largest NDSP request the server decodes, bytes.
    pub max_request_bytes: usize,
    /// Each tenant's share of every link (planner admission).
    pub tenant_shares: planner::shares::TenantShares,
}

impl Config {
    /// Whether anything reads reserved flows' INT watch entries: INT
    /// reports (a collector) or the counter polls of learning and following
    /// ([`Policy::watch_reserved`]).
    pub fn reads_reserved_watch(&self) -> bool {
        let learns_from_counters = self
            .learning
            .is_some_and(|l| matches!(l.from, LearnFrom::Counters { .. }));
        let follows_counters = self
            .follow
            .is_some_and(|f| f.from == crate::daemon::feedback::follow::FollowFrom::Counters);
        self.policy.collector.is_some() || learns_from_counters || follows_counters
    }
}
