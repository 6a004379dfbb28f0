//! Plain Rust domain types that validated NDSP messages turn into.
//!
//! Nothing here refers to a generated protobuf type: the daemon maps these
//! onto the planner's own types. Every value in them has passed the checks
//! in [`crate::validate`]: identifiers have the identifier syntax, host
//! addresses are IPv4 unicast, enums are known and specified, sizes and
//! rates are positive, labels are 20-bit and unreserved, and so on.
//!
//! Units follow the wire protocol: times in nanoseconds (`_ns`, and
//! `_unix_ns` for absolute times on the controller's clock), rates in bit/s,
//! sizes in bytes.

use std::net::Ipv4Addr;

use crate::limits::NS_PER_SEC;

/// A protocol version (major.minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Major version; peers interoperate only when these are equal.
    pub major: u32,
    /// Minor version; additive changes only.
    pub minor: u32,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What every validated request carries from its `RequestHeader`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestContext {
    /// The tenant the request acts for.
    pub tenant: String,
    /// The protocol version the client speaks (major equals ours).
    pub client_version: Version,
}

/// A point in time as a client gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimePoint {
    /// Nanoseconds after the request's reference time (its
    /// `reference_unix_ns`, or the moment the controller received it).
    OffsetNs(u64),
    /// Absolute time in Unix nanoseconds on the controller's clock.
    UnixNs(u64),
}

impl TimePoint {
    /// The absolute time, given the request's reference in Unix ns
    /// (saturating; offsets are bounded by the protocol's horizon).
    pub fn resolve(self, reference_unix_ns: u64) -> u64 {
        match self {
            TimePoint::OffsetNs(offset) => reference_unix_ns.saturating_add(offset),
            TimePoint::UnixNs(t) => t,
        }
    }

    /// The raw nanosecond value, whichever the base.
    pub fn raw_ns(self) -> u64 {
        match self {
            TimePoint::OffsetNs(t) | TimePoint::UnixNs(t) => t,
        }
    }

    /// Whether two points use the same base (both offsets or both absolute).
    pub fn same_base(self, other: TimePoint) -> bool {
        matches!(
            (self, other),
            (TimePoint::OffsetNs(_), TimePoint::OffsetNs(_))
                | (TimePoint::UnixNs(_), TimePoint::UnixNs(_))
        )
    }
}

/// One end of a point-to-point demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A rank of the demand's job.
    Rank(u32),
    /// A host address.
    Host(Ipv4Addr),
}

/// How fast a demand flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pacing {
    /// Expected duration in nanoseconds (> 0).
    DurationNs(u64),
    /// Expected rate in bit/s (> 0).
    RateBps(u64),
}

/// How fast a collective flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectivePacing {
    /// Expected duration of the whole collective in nanoseconds (> 0).
    DurationNs(u64),
    /// Rate of each expanded flow in bit/s (> 0).
    FlowRateBps(u64),
}

/// Priority class of a demand or collective, lowest first (so `Ord` ranks
/// them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Yields to everything.
    Background,
    /// Ordinary traffic.
    Standard,
    /// The next training step waits for it.
    IterationBlocking,
    /// User-facing latency depends on it.
    LatencyCritical,
}

/// Whether the controller may defer or stretch a demand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elasticity {
    /// Reserve as forecast or report that it cannot be.
    Inelastic,
    /// May be deferred or slowed, within the deadline if any.
    Elastic,
}

/// A periodic repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Recurrence {
    /// Time between consecutive starts (> 0, at least one occurrence's
    /// duration when that is known).
    pub period_ns: u64,
    /// Occurrences including the first (1 to 1 000 000).
    pub occurrences: u32,
}

/// Bytes × 8 / duration, in bit/s, rounded up.
pub fn rate_for(size_bytes: u64, duration_ns: u64) -> u64 {
    debug_assert!(duration_ns > 0);
    let bits = size_bytes as u128 * 8 * NS_PER_SEC as u128;
    bits.div_ceil(duration_ns.max(1) as u128)
        .min(u64::MAX as u128) as u64
}

/// Time to move `size_bytes` at `rate_bps`, in nanoseconds, rounded up.
pub fn transfer_ns(size_bytes: u64, rate_bps: u64) -> u64 {
    debug_assert!(rate_bps > 0);
    let bits = size_bytes as u128 * 8 * NS_PER_SEC as u128;
    bits.div_ceil(rate_bps.max(1) as u128).min(u64::MAX as u128) as u64
}

// ---------------------------------------------------------------------------
// Requests (workload -> controller)
// ---------------------------------------------------------------------------

/// A validated `HandshakeRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedHandshake {
    /// Header.
    pub ctx: RequestContext,
    /// Client software name, if given.
    pub client_name: Option<String>,
}

/// Training or inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// A training job.
    Training,
    /// An inference deployment.
    Inference,
}

/// The collective library of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectiveLibrary {
    /// NVIDIA NCCL.
    Nccl,
    /// AMD RCCL.
    Rccl,
    /// PyTorch Gloo.
    Gloo,
    /// MPI.
    Mpi,
    /// Intel oneCCL.
    OneCcl,
    /// XLA runtime collectives.
    Xla,
    /// Something else.
    Other,
}

impl CollectiveLibrary {
    /// Whether the library's connections are RDMA queue pairs the fabric
    /// can tell apart. Gloo, MPI, XLA's CPU collectives and the rest may run
    /// over TCP, where a host pair's connections share no QP to match on.
    pub fn uses_queue_pairs(self) -> bool {
        matches!(self, CollectiveLibrary::Nccl | CollectiveLibrary::Rccl)
    }
}

/// A configured collective algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CollectiveAlgorithm {
    /// Ring.
    Ring,
    /// Tree.
    Tree,
    /// In-network reduction.
    CollNet,
    /// NVLink SHARP.
    Nvls,
    /// Parallel aggregated trees.
    Pat,
    /// Direct pairwise.
    Direct,
}

/// A contiguous range of RoCE queue pairs (within 24 bits, not 0 or 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QpRange {
    /// First queue pair.
    pub first_qp: u32,
    /// Number of queue pairs (>= 1).
    pub count: u32,
}

impl QpRange {
    /// Last queue pair of the range (inclusive).
    pub fn last_qp(&self) -> u32 {
        self.first_qp + (self.count - 1)
    }

    /// Whether two ranges share a queue pair.
    pub fn overlaps(&self, other: &QpRange) -> bool {
        self.first_qp <= other.last_qp() && other.first_qp <= self.last_qp()
    }

    /// Whether `qp` is in the range.
    pub fn contains(&self, qp: u32) -> bool {
        (self.first_qp..=self.last_qp()).contains(&qp)
    }
}

/// Where one rank sits on the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEndpoint {
    /// The rank (< world size).
    pub rank: u32,
    /// The accelerator, if given.
    pub device_id: Option<String>,
    /// The host NIC's IPv4 unicast address.
    pub host_address: Ipv4Addr,
    /// The NIC name, if given.
    pub nic: Option<String>,
    /// Queue pairs of the rank, if given.
    pub qp_range: Option<QpRange>,
}

/// A validated `RegisterTopologyRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedTopology {
    /// Header.
    pub ctx: RequestContext,
    /// The job.
    pub job_id: String,
    /// Training or inference.
    pub workload_kind: WorkloadKind,
    /// Ranks are `0..world_size`.
    pub world_size: u32,
    /// The registered ranks, sorted by rank, each once (non-empty).
    pub ranks: Vec<RankEndpoint>,
    /// The collective library.
    pub library: CollectiveLibrary,
    /// Library version, if given.
    pub library_version: Option<String>,
    /// Configured algorithms, in the order given, each once.
    pub algorithms: Vec<CollectiveAlgorithm>,
}

impl ValidatedTopology {
    /// The endpoint of `rank`, if registered.
    pub fn endpoint(&self, rank: u32) -> Option<&RankEndpoint> {
        self.index_of(rank).map(|i| &self.ranks[i])
    }

    /// Where `rank` is in [`Self::ranks`], if registered.
    pub fn index_of(&self, rank: u32) -> Option<usize> {
        // Jobs register ranks 0..n as a rule: then a rank is its own index,
        // which saves a 32k-rank collective its binary searches.
        if self
            .ranks
            .get(rank as usize)
            .is_some_and(|e| e.rank == rank)
        {
            return Some(rank as usize);
        }
        self.ranks.binary_search_by_key(&rank, |r| r.rank).ok()
    }
}

/// One validated demand of a `SubmitDemandRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedDemand {
    /// The tenant (from the request header).
    pub tenant: String,
    /// The demand's id, unique within its request.
    pub demand_id: String,
    /// The job; always present when an endpoint is a rank.
    pub job_id: Option<String>,
    /// Where the traffic leaves from.
    pub source: Endpoint,
    /// Where it goes (differs from `source`).
    pub destination: Endpoint,
    /// When it starts.
    pub start: TimePoint,
    /// Volume (> 0).
    pub size_bytes: u64,
    /// Duration or rate.
    pub pacing: Pacing,
    /// Priority class.
    pub priority: Priority,
    /// Elastic or not.
    pub elasticity: Elasticity,
    /// Latest completion, same base as `start`, at or after the end.
    pub deadline: Option<TimePoint>,
    /// RoCE destination queue pair, if given.
    pub dest_qp: Option<u32>,
    /// Repetition, if any.
    pub recurrence: Option<Recurrence>,
    /// Destination queue pairs the controller may choose among (never with
    /// `dest_qp`).
    pub dest_qp_choices: Option<QpRange>,
}

impl ValidatedDemand {
    /// Expected duration of one occurrence, in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        match self.pacing {
            Pacing::DurationNs(d) => d,
            Pacing::RateBps(r) => transfer_ns(self.size_bytes, r),
        }
    }

    /// Expected rate, in bit/s.
    pub fn rate_bps(&self) -> u64 {
        match self.pacing {
            Pacing::DurationNs(d) => rate_for(self.size_bytes, d),
            Pacing::RateBps(r) => r,
        }
    }

    /// Expected end of the first occurrence, in the base of `start`.
    pub fn end(&self) -> TimePoint {
        let end = self.start.raw_ns().saturating_add(self.duration_ns());
        match self.start {
            TimePoint::OffsetNs(_) => TimePoint::OffsetNs(end),
            TimePoint::UnixNs(_) => TimePoint::UnixNs(end),
        }
    }
}

/// A validated `SubmitDemandRequest`: all demands or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedDemandBatch {
    /// Header.
    pub ctx: RequestContext,
    /// What offsets count from; `None` means the receipt time.
    pub reference_unix_ns: Option<u64>,
    /// The demands, in request order (non-empty, distinct ids).
    pub demands: Vec<ValidatedDemand>,
}

/// The pattern of a collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectiveKind {
    /// Ring all-reduce (ranks in ring order).
    RingAllReduce,
    /// Tree all-reduce (`ranks[0]` is the root).
    TreeAllReduce,
    /// All-gather.
    AllGather,
    /// Reduce-scatter.
    ReduceScatter,
    /// All-to-all.
    AllToAll,
    /// Pipeline-parallel sends (ranks in stage order).
    PipelineSend,
    /// Prefill -> decode KV-cache transfer (`ranks[i]` -> `peer_ranks[i]`).
    KvCacheTransfer,
}

/// A validated `SubmitCollectiveRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedCollective {
    /// Header.
    pub ctx: RequestContext,
    /// What offsets count from; `None` means the receipt time.
    pub reference_unix_ns: Option<u64>,
    /// The collective's id.
    pub collective_id: String,
    /// The job whose topology maps the ranks.
    pub job_id: String,
    /// The pattern.
    pub kind: CollectiveKind,
    /// Participants, in the order given, distinct.
    pub ranks: Vec<u32>,
    /// Decode ranks for `KvCacheTransfer` (same length as `ranks`,
    /// disjoint from it); empty for every other kind.
    pub peer_ranks: Vec<u32>,
    /// Buffer size as defined per kind (> 0).
    pub size_bytes: u64,
    /// Parallel channels (1 to 64; a wire value of 0 becomes 1).
    pub channels: u32,
    /// When it starts.
    pub start: TimePoint,
    /// Duration or per-flow rate.
    pub pacing: CollectivePacing,
    /// Priority class.
    pub priority: Priority,
    /// Elastic or not.
    pub elasticity: Elasticity,
    /// Latest completion, same base as `start`.
    pub deadline: Option<TimePoint>,
    /// Repetition, if any.
    pub recurrence: Option<Recurrence>,
}

/// What a `CancelRequest` cancels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CancelTarget {
    /// A demand.
    Demand(String),
    /// A collective.
    Collective(String),
    /// One reservation.
    Reservation(String),
    /// Everything of a job, and its topology.
    Job(String),
}

/// A validated `CancelRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedCancel {
    /// Header.
    pub ctx: RequestContext,
    /// What to cancel.
    pub target: CancelTarget,
}

/// What a workload deviation is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeviationTarget {
    /// A demand.
    Demand(String),
    /// A collective.
    Collective(String),
}

/// How the workload's traffic deviates from its forecast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadChange {
    /// Starts earlier, at this time.
    EarlyStart(TimePoint),
    /// Starts later, at this time.
    LateStart(TimePoint),
    /// New total size (> 0).
    SizeChange {
        /// The new size.
        new_size_bytes: u64,
    },
    /// Already finished.
    Completed {
        /// When, if known.
        completed_unix_ns: Option<u64>,
    },
    /// Will not happen.
    Aborted {
        /// Why, if given.
        reason: Option<String>,
    },
}

/// A validated `ReportDeviationRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedDeviation {
    /// Header.
    pub ctx: RequestContext,
    /// What offsets count from; `None` means the receipt time.
    pub reference_unix_ns: Option<u64>,
    /// The demand or collective.
    pub target: DeviationTarget,
    /// The change.
    pub change: WorkloadChange,
    /// When the workload noticed, if given.
    pub observed_unix_ns: Option<u64>,
}

/// A validated `WatchEventsRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedWatch {
    /// Header.
    pub ctx: RequestContext,
    /// Jobs to watch, distinct; empty means all of the tenant's.
    pub job_ids: Vec<String>,
    /// Telemetry interval; `None` means no telemetry snapshots.
    pub telemetry_interval_ns: Option<u64>,
}

/// A validated `GetReservationRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedGetReservation {
    /// Header.
    pub ctx: RequestContext,
    /// The reservation.
    pub reservation_id: String,
}

/// A validated `ListReservationsRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedListReservations {
    /// Header.
    pub ctx: RequestContext,
    /// Only this job, if given.
    pub job_id: Option<String>,
    /// Page size (1 to 1000; a wire value of 0 becomes 100).
    pub page_size: u32,
    /// Continuation token, if given.
    pub page_token: Option<String>,
}

// ---------------------------------------------------------------------------
// Responses and events (controller -> workload)
// ---------------------------------------------------------------------------

/// A validated `HandshakeResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHello {
    /// The controller's version (major equals ours).
    pub server_version: Version,
    /// The controller's clock when it answered.
    pub server_time_unix_ns: u64,
    /// Collective kinds it expands, each once.
    pub supported_collective_kinds: Vec<CollectiveKind>,
    /// Largest SubmitDemand batch.
    pub max_demands_per_request: u32,
    /// Deepest label stack the fabric pushes.
    pub max_label_stack_depth: u32,
}

/// A validated `RegisterTopologyResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyRegistration {
    /// The job.
    pub job_id: String,
    /// Ranks registered.
    pub registered_ranks: u32,
    /// Registration count of this job id (>= 1).
    pub generation: u64,
    /// Non-fatal remarks.
    pub warnings: Vec<String>,
}

/// Outcome of a reservation or of one of its flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReservationStatus {
    /// Full rate, requested window.
    Admitted,
    /// Less than the requested rate.
    Partial,
    /// Full rate, later start.
    Deferred,
    /// No pinned path; ECMP and reactive control.
    FallbackEcmp,
    /// Declined.
    Rejected,
    /// Cancelled by the client.
    Cancelled,
}

impl ReservationStatus {
    /// Whether bandwidth is reserved (a window and a rate are granted).
    pub fn reserves(self) -> bool {
        matches!(
            self,
            ReservationStatus::Admitted | ReservationStatus::Partial | ReservationStatus::Deferred
        )
    }

    /// Whether the protocol requires an advisory and a reason.
    pub fn needs_explanation(self) -> bool {
        matches!(
            self,
            ReservationStatus::Partial
                | ReservationStatus::Deferred
                | ReservationStatus::FallbackEcmp
                | ReservationStatus::Rejected
        )
    }
}

/// Why a reservation is not simply admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasonCode {
    /// No particular reason.
    None,
    /// Not enough capacity on any candidate path.
    InsufficientCapacity,
    /// The deadline cannot be met.
    DeadlineUnmeetable,
    /// No (steerable) path.
    NoPath,
    /// A link of the path went down.
    LinkDown,
    /// The path needs a deeper label stack than the fabric pushes.
    LabelStackTooDeep,
    /// Higher-priority traffic took the capacity.
    Preempted,
    /// Tenant quota exhausted.
    TenantQuota,
    /// An endpoint is not attached to the fabric.
    UnknownEndpoint,
    /// Re-planned after a workload deviation.
    WorkloadDeviation,
    /// The controller cannot program the path's switches.
    ControllerDegraded,
}

/// One switch on a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathHop {
    /// Switch name.
    pub node: String,
    /// Egress port.
    pub egress_port: u32,
}

/// The reservation of one point-to-point flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowReservation {
    /// Demand id, or `<collective_id>/<n>`.
    pub flow_id: String,
    /// Source host address.
    pub source_address: Ipv4Addr,
    /// Destination host address (differs from the source).
    pub destination_address: Ipv4Addr,
    /// Source rank, if specified by rank.
    pub source_rank: Option<u32>,
    /// Destination rank, if specified by rank.
    pub destination_rank: Option<u32>,
    /// Steered queue pair, if only one.
    pub dest_qp: Option<u32>,
    /// Outcome.
    pub status: ReservationStatus,
    /// Reason for a non-admitted outcome.
    pub reason: ReasonCode,
    /// Requested rate (> 0).
    pub requested_bps: u64,
    /// Reserved rate (consistent with `status`).
    pub accepted_bps: u64,
    /// Window start.
    pub start_unix_ns: u64,
    /// Window end (after the start when bandwidth is reserved).
    pub end_unix_ns: u64,
    /// SR-MPLS labels, top first (20-bit, >= 16); empty without a path.
    pub sr_label_stack: Vec<u32>,
    /// Switches crossed, ingress first; empty without a path.
    pub hops: Vec<PathHop>,
    /// Explanation, if given.
    pub advisory: Option<String>,
    /// The UDP source port to send on (entropy steering), if the flow is
    /// steered by the fabric's hash rather than by labels.
    pub udp_src_port: Option<u16>,
}

/// What a reservation answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReservationSubject {
    /// A demand.
    Demand(String),
    /// A collective.
    Collective(String),
}

/// A validated `Reservation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedReservation {
    /// Controller-assigned id.
    pub reservation_id: String,
    /// The demand or collective answered.
    pub subject: ReservationSubject,
    /// The job, if any.
    pub job_id: Option<String>,
    /// Overall outcome.
    pub status: ReservationStatus,
    /// Reason for a non-admitted outcome.
    pub reason: ReasonCode,
    /// Explanation (present whenever the status needs one).
    pub advisory: Option<String>,
    /// Earliest flow start.
    pub start_unix_ns: u64,
    /// Latest flow end.
    pub end_unix_ns: u64,
    /// The flows, distinct ids.
    pub flows: Vec<FlowReservation>,
    /// Revision (>= 1).
    pub revision: u64,
    /// Made by the controller from the job's learned iterations (T+5),
    /// not announced by the workload.
    pub predicted: bool,
}

/// A validated `ListReservationsResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationPage {
    /// This page.
    pub reservations: Vec<ValidatedReservation>,
    /// Token for the next page, if any.
    pub next_page_token: Option<String>,
}

/// A directed link.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LinkId {
    /// Sending node.
    pub from_node: String,
    /// Its port.
    pub from_port: u32,
    /// Receiving node (differs from `from_node`).
    pub to_node: String,
    /// Its port.
    pub to_port: u32,
}

/// Load of one directed link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkUtilization {
    /// The link.
    pub link: LinkId,
    /// Capacity (> 0).
    pub capacity_bps: u64,
    /// Mean measured rate.
    pub measured_bps: u64,
    /// Reserved rate (<= capacity).
    pub reserved_bps: u64,
    /// Peak queue depth.
    pub peak_queue_bytes: u64,
}

/// Kind of a congestion episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CongestionKind {
    /// ECN marks.
    EcnMarking,
    /// PFC pauses.
    PfcPause,
    /// Queue growth.
    QueueBuildup,
    /// Drops.
    Drop,
}

/// A congestion episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CongestionEvent {
    /// The link.
    pub link: LinkId,
    /// What happened.
    pub kind: CongestionKind,
    /// When it started (> 0).
    pub start_unix_ns: u64,
    /// How long (0 if ongoing).
    pub duration_ns: u64,
    /// Peak queue depth.
    pub peak_queue_bytes: u64,
    /// Packets marked, paused or dropped.
    pub affected_packets: u64,
}

/// Path availability between two hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAvailability {
    /// One end.
    pub source_address: Ipv4Addr,
    /// The other end (differs).
    pub destination_address: Ipv4Addr,
    /// Equal-cost paths.
    pub equal_cost_paths: u32,
    /// Usable paths (<= equal-cost paths).
    pub available_paths: u32,
    /// Largest reservable rate now.
    pub max_reservable_bps: u64,
}

/// A telemetry snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySnapshot {
    /// End of the interval (> 0).
    pub as_of_unix_ns: u64,
    /// Interval length (> 0).
    pub interval_ns: u64,
    /// Link loads.
    pub links: Vec<LinkUtilization>,
    /// Congestion episodes.
    pub congestion_events: Vec<CongestionEvent>,
    /// Path availability.
    pub paths: Vec<PathAvailability>,
}

/// Traffic that differs from its forecast, as the network saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForecastMismatch {
    /// The reservation.
    pub reservation_id: String,
    /// The flow.
    pub flow_id: String,
    /// Forecast start (> 0).
    pub expected_start_unix_ns: u64,
    /// Observed start, if seen.
    pub observed_start_unix_ns: Option<u64>,
    /// Forecast rate.
    pub expected_bps: u64,
    /// Measured rate.
    pub observed_bps: u64,
}

/// What a network deviation signal says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkChange {
    /// A link went down.
    LinkDown(LinkId),
    /// A link came back.
    LinkUp(LinkId),
    /// A reservation changed; its new version.
    ReservationChanged(Box<ValidatedReservation>),
    /// Traffic differs from the forecast.
    ForecastMismatch(ForecastMismatch),
    /// A job's predicted reservations were withdrawn.
    PredictionWithdrawn {
        /// The job.
        job_id: String,
        /// What its traffic did instead (1 to 1024 characters).
        reason: String,
    },
}

/// A network-to-workload deviation signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkDeviation {
    /// When observed (> 0).
    pub observed_unix_ns: u64,
    /// Affected reservations, distinct.
    pub affected_reservation_ids: Vec<String>,
    /// What happened.
    pub change: NetworkChange,
}

/// The body of a watch event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEventBody {
    /// Telemetry.
    Telemetry(TelemetrySnapshot),
    /// Deviation signal.
    Deviation(NetworkDeviation),
}

/// A validated `WatchEvent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedWatchEvent {
    /// Stream position (>= 1).
    pub sequence: u64,
    /// When sent (> 0).
    pub emitted_unix_ns: u64,
    /// The event.
    pub body: WatchEventBody,
}
