//! The records the controller's state is made of: registered jobs, links
//! taken down, and reservations with their flows, hops and outcome. `State`
//! (state.rs) holds them and `LiveReservations` indexes the live ones; both
//! build on this file, which needs neither.

use std::net::Ipv4Addr;
use std::sync::Arc;

use ndsp::types::{ReasonCode, ReservationStatus};
use serde::{Deserialize, Serialize};

/// One fabric link between two switches, named by both ends; `a` is the
/// end whose (switch, port) sorts first, so each link has one name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinkRef {
    pub a: String,
    pub a_port: u16,
    pub b: String,
    pub b_port: u16,
}

impl std::fmt::Display for LinkRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} <-> {}:{}",
            self.a, self.a_port, self.b, self.b_port
        )
    }
}

/// A registered job topology (the `RegisterTopologyRequest`, kept encoded
/// so it re-validates into exactly what was registered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub tenant: String,
    pub job_id: String,
    pub generation: u64,
    /// Hex of the encoded `RegisterTopologyRequest`.
    pub request: String,
    /// The job's standing patterns: its repeated collectives, installed
    /// once (see [`Pattern`]); absent in files written before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<Arc<Pattern>>,
}

/// A job's repeated collective, installed once: the QPs and paths its
/// first step was planned on. Its entries stay on the switches for the
/// job's life, so that a later step of the same shape costs only its
/// admission (its window booked on these paths) and writes nothing. It
/// goes when the job is registered again or cancelled, or when a link on
/// its paths goes down (the next step then plans afresh).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    /// What makes two steps the same traffic (kind, ranks, channels,
    /// priority; not size or timing): see `engine::patterns::shape_of`.
    pub shape: String,
    /// The sequence number of the step it was taken from: its entries rank
    /// with reservations' by it (an earlier one keeps a shared key).
    pub seq: u64,
    /// Planner priority of the job's steps (background traffic yields).
    pub priority: u8,
    pub flows: Vec<PinnedFlow>,
}

/// One flow of a pattern: who talks to whom, on which QP, on which path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinnedFlow {
    pub src: String,
    pub dst: String,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub qp: u32,
    pub steer_qp: bool,
    pub labels: Arc<[u32]>,
    pub hops: Arc<[Hop]>,
    /// The largest rate (bits/s) a step of the pattern was granted: the
    /// standing entry's meter (0, as in state written before policing:
    /// unmetered).
    #[serde(default)]
    pub grant_bps: u64,
}

impl PinnedFlow {
    pub fn dst_qp(&self) -> Option<u32> {
        self.steer_qp.then_some(self.qp)
    }
}

/// What a reservation answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Demand(String),
    Collective(String),
}

impl Subject {
    pub fn id(&self) -> &str {
        match self {
            Subject::Demand(id) | Subject::Collective(id) => id,
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            Subject::Demand(_) => "demand",
            Subject::Collective(_) => "collective",
        }
    }
}

/// Outcome of a reservation or flow (NDSP `ReservationStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Admitted,
    Partial,
    Deferred,
    FallbackEcmp,
    Rejected,
    Cancelled,
}

impl Status {
    pub fn reserves(self) -> bool {
        matches!(self, Status::Admitted | Status::Partial | Status::Deferred)
    }
    pub fn name(self) -> &'static str {
        match self {
            Status::Admitted => "admitted",
            Status::Partial => "partial",
            Status::Deferred => "deferred",
            Status::FallbackEcmp => "fallback_ecmp",
            Status::Rejected => "rejected",
            Status::Cancelled => "cancelled",
        }
    }
}

impl From<Status> for ReservationStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Admitted => ReservationStatus::Admitted,
            Status::Partial => ReservationStatus::Partial,
            Status::Deferred => ReservationStatus::Deferred,
            Status::FallbackEcmp => ReservationStatus::FallbackEcmp,
            Status::Rejected => ReservationStatus::Rejected,
            Status::Cancelled => ReservationStatus::Cancelled,
        }
    }
}

/// Why a reservation is not simply admitted (NDSP `ReasonCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    None,
    InsufficientCapacity,
    DeadlineUnmeetable,
    NoPath,
    LabelStackTooDeep,
    UnknownEndpoint,
    WorkloadDeviation,
    LinkDown,
}

impl From<Reason> for ReasonCode {
    fn from(r: Reason) -> Self {
        match r {
            Reason::None => ReasonCode::None,
            Reason::InsufficientCapacity => ReasonCode::InsufficientCapacity,
            Reason::DeadlineUnmeetable => ReasonCode::DeadlineUnmeetable,
            Reason::NoPath => ReasonCode::NoPath,
            Reason::LabelStackTooDeep => ReasonCode::LabelStackTooDeep,
            Reason::UnknownEndpoint => ReasonCode::UnknownEndpoint,
            Reason::WorkloadDeviation => ReasonCode::WorkloadDeviation,
            Reason::LinkDown => ReasonCode::LinkDown,
        }
    }
}

/// Where a reservation is in its life (for status and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// Nothing installed yet: the first install is in the future.
    Scheduled,
    /// Some flow's entries are (to be) on the switches.
    Installed,
    /// Every flow window is over; entries removed.
    Expired,
    /// Cancelled by the client (or finished early / aborted).
    Cancelled,
    /// Nothing to install (ECMP fallback or rejected), not yet over.
    Fallback,
}

impl Lifecycle {
    pub const ALL: [Lifecycle; 5] = [
        Lifecycle::Scheduled,
        Lifecycle::Installed,
        Lifecycle::Fallback,
        Lifecycle::Expired,
        Lifecycle::Cancelled,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Lifecycle::Scheduled => "scheduled",
            Lifecycle::Installed => "installed",
            Lifecycle::Expired => "expired",
            Lifecycle::Cancelled => "cancelled",
            Lifecycle::Fallback => "fallback",
        }
    }
}

/// One reservation: the answer to a demand or a collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub id: String,
    pub seq: u64,
    pub tenant: String,
    pub subject: Subject,
    pub job_id: Option<String>,
    /// Hex of the encoded `DemandSignal` or `Collective` as submitted: an
    /// identical resubmission returns this reservation, another is refused.
    pub request: String,
    /// Planning inputs.
    pub priority: u8,
    pub elastic: bool,
    pub deadline_unix_ns: Option<u64>,
    /// Outcome.
    pub status: Status,
    pub reason: Reason,
    pub advisory: Option<String>,
    pub revision: u64,
    pub flows: Vec<FlowRecord>,
    /// Set when the reservation was cancelled (or finished early).
    pub cancelled: bool,
    /// Made by the controller from the job's learned iterations (T+5);
    /// absent in files written before learning.
    #[serde(default)]
    pub predicted: bool,
}

impl Reservation {
    pub fn start_unix_ns(&self) -> u64 {
        self.flows
            .iter()
            .map(|f| f.start_unix_ns)
            .min()
            .unwrap_or(0)
    }
    pub fn end_unix_ns(&self) -> u64 {
        self.flows.iter().map(|f| f.end_unix_ns).max().unwrap_or(0)
    }
    /// Flows that put entries on switches.
    pub fn installing(&self) -> impl Iterator<Item = &FlowRecord> {
        self.flows.iter().filter(|f| f.installs())
    }
    /// When the first entry goes in, given the lead time.
    pub fn install_unix_ns(&self, lead_ns: u64) -> Option<u64> {
        self.installing().map(|f| f.install_unix_ns(lead_ns)).min()
    }
    pub fn lifecycle(&self, now: u64, lead_ns: u64) -> Lifecycle {
        if self.cancelled {
            return Lifecycle::Cancelled;
        }
        if now >= self.end_unix_ns() {
            return Lifecycle::Expired;
        }
        match self.install_unix_ns(lead_ns) {
            None => Lifecycle::Fallback,
            Some(t) if now < t => Lifecycle::Scheduled,
            Some(_) => Lifecycle::Installed,
        }
    }
}

/// One hop of a path: a switch and the port the flow leaves it through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    pub switch: String,
    pub port: u16,
}

/// One flow of a reservation: what was asked and what was granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRecord {
    pub flow_id: String,
    pub src: String,
    pub dst: String,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_rank: Option<u32>,
    pub dst_rank: Option<u32>,
    /// Destination QP used for planning (and the ECMP hash).
    pub qp: u32,
    /// Whether the entries match only that QP (else every QP of the pair).
    pub steer_qp: bool,
    pub bytes: u64,
    pub rate_bps: u64,
    pub duration_ns: u64,
    /// Start as asked (before any deferral).
    pub requested_start_unix_ns: u64,
    /// Granted.
    pub status: Status,
    pub reason: Reason,
    pub accepted_bps: u64,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// SR-MPLS labels the ingress leaf pushes, top first (empty: none).
    /// Shared: a pinned step's flows hold their pattern's.
    pub labels: Arc<[u32]>,
    /// The reserved path, or the ECMP path of a fallback flow. Shared: a
    /// pinned step's flows hold their pattern's.
    pub hops: Arc<[Hop]>,
    /// The UDP source port the sender was told to use, when the fabric's
    /// own ECMP hash carries the flow along `hops` (entropy steering;
    /// `labels` is then empty and nothing is installed for the flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_src_port: Option<u16>,
    /// The destination QPs the client let the controller choose among;
    /// `qp` is the one chosen (entropy steering may choose again when a
    /// link changes the hash's groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_choices: Option<QpChoices>,
    /// Held by its job's standing [`Pattern`]: the pattern's entries carry
    /// it, and the flow puts none of its own on the switches.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
}

/// A client's destination QP choices, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpChoices {
    pub first: u32,
    pub last: u32,
}

impl QpChoices {
    pub fn range(self) -> std::ops::RangeInclusive<u32> {
        self.first..=self.last
    }
}

impl From<ndsp::types::QpRange> for QpChoices {
    fn from(q: ndsp::types::QpRange) -> QpChoices {
        QpChoices {
            first: q.first_qp,
            last: q.last_qp(),
        }
    }
}

impl FlowRecord {
    /// Whether the flow holds a reserved path on the switches (its own
    /// entries, or its job's pattern's when `pinned`).
    pub fn installs(&self) -> bool {
        self.status.reserves() && !self.labels.is_empty() && !self.hops.is_empty()
    }
    pub fn install_unix_ns(&self, lead_ns: u64) -> u64 {
        self.start_unix_ns.saturating_sub(lead_ns)
    }
    /// Whether its entries belong on the switches at `now`.
    pub fn active(&self, now: u64, lead_ns: u64) -> bool {
        self.installs() && self.install_unix_ns(lead_ns) <= now && now < self.end_unix_ns
    }
    pub fn dst_qp(&self) -> Option<u32> {
        self.steer_qp.then_some(self.qp)
    }
}
