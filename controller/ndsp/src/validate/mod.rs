//! Validation of inbound NDSP messages into the domain types of
//! [`crate::types`].
//!
//! Every message a peer can send implements [`Validate`]: the requests (on
//! the controller) and the responses and watch events (on a client). A
//! message either becomes a domain value as a whole or yields a
//! [`ValidationError`] whose `field` is the path of the offending field,
//! relative to the message (for example `demands[2].size_bytes` or
//! `topology.ranks[3].host_address`). Validation has no side effects, so a
//! rejected request has changed nothing; on the server, `?` turns the error
//! into gRPC `INVALID_ARGUMENT` (see the `From` impl for `tonic::Status`).
//!
//! Checks that need controller state (does this job have a registered
//! topology, is this rank in it) are separate:
//! [`ValidatedDemandBatch::check_ranks`] and
//! [`ValidatedCollective::check_ranks`].

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::limits::*;
use crate::proto;
use crate::types::*;
use crate::PROTOCOL_VERSION;

#[cfg(test)]
mod tests;

/// A message that failed validation: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    /// Path of the offending field relative to the validated message,
    /// e.g. `topology.ranks[3].host_address`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ValidationError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ValidationError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// gRPC metadata key under which a rejected request's field path is also
/// returned (the status message starts with it too).
pub const FIELD_METADATA_KEY: &str = "ndsp-field";

impl From<ValidationError> for tonic::Status {
    fn from(e: ValidationError) -> Self {
        let mut status = tonic::Status::invalid_argument(e.to_string());
        if let Ok(value) = e.field.parse() {
            status.metadata_mut().insert(FIELD_METADATA_KEY, value);
        }
        status
    }
}

/// Result of a validation.
pub type Result<T> = std::result::Result<T, ValidationError>;

/// A message that can be validated into a domain value.
pub trait Validate {
    /// The domain value.
    type Output;
    /// Validates the whole message; on error nothing of it is usable.
    fn validate(&self) -> Result<Self::Output>;
}

// ---------------------------------------------------------------------------
// Field paths, built without allocating and rendered only on error
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    name: &'static str,
    index: Option<usize>,
}

const ROOT: Path<'static> = Path {
    parent: None,
    name: "",
    index: None,
};

impl<'a> Path<'a> {
    fn field(&'a self, name: &'static str) -> Path<'a> {
        Path {
            parent: Some(self),
            name,
            index: None,
        }
    }

    fn index(&'a self, name: &'static str, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            name,
            index: Some(index),
        }
    }

    fn render(&self) -> String {
        let mut segments = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            if !p.name.is_empty() {
                segments.push(match p.index {
                    Some(i) => format!("{}[{i}]", p.name),
                    None => p.name.to_owned(),
                });
            }
            at = p.parent;
        }
        segments.reverse();
        segments.join(".")
    }

    fn error(&self, reason: impl Into<String>) -> ValidationError {
        ValidationError::new(self.render(), reason)
    }

    fn err<T>(&self, reason: impl Into<String>) -> Result<T> {
        Err(self.error(reason))
    }
}

/// A value as shown in an error: quoted, and cut short if long.
fn show(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head:?}...")
    }
}

// ---------------------------------------------------------------------------
// Scalars
// ---------------------------------------------------------------------------

fn required<'m, T>(p: Path<'_>, value: &'m Option<T>) -> Result<&'m T> {
    value.as_ref().ok_or_else(|| p.error("is required"))
}

fn positive(p: Path<'_>, value: u64) -> Result<u64> {
    if value == 0 {
        p.err("must be greater than 0")
    } else {
        Ok(value)
    }
}

fn nonzero(value: u64) -> Option<u64> {
    (value != 0).then_some(value)
}

fn id_syntax(p: Path<'_>, s: &str, max: usize, allow_slash: bool) -> Result<String> {
    if s.is_empty() {
        return p.err("is required");
    }
    if let Some(c) = s.chars().find(|&c| {
        !(c.is_ascii_alphanumeric()
            || matches!(c, '.' | '_' | ':' | '-')
            || (allow_slash && c == '/'))
    }) {
        let allowed = if allow_slash {
            "A-Z a-z 0-9 . _ : - /"
        } else {
            "A-Z a-z 0-9 . _ : -"
        };
        return p.err(format!(
            "{} contains {c:?}; identifiers use only {allowed}",
            show(s)
        ));
    }
    if s.len() > max {
        return p.err(format!(
            "is {} characters long; at most {max} allowed",
            s.len()
        ));
    }
    Ok(s.to_owned())
}

/// A client-chosen identifier (tenant, job, demand, collective).
fn client_id(p: Path<'_>, s: &str) -> Result<String> {
    id_syntax(p, s, MAX_ID_LEN, false)
}

fn optional_client_id(p: Path<'_>, s: &str) -> Result<Option<String>> {
    if s.is_empty() {
        Ok(None)
    } else {
        client_id(p, s).map(Some)
    }
}

/// A controller-assigned identifier (reservation, flow); may contain `/`.
fn controller_id(p: Path<'_>, s: &str) -> Result<String> {
    id_syntax(p, s, MAX_CONTROLLER_ID_LEN, true)
}

/// Optional free-form text: bounded length, no control characters.
fn text(p: Path<'_>, s: &str, max: usize) -> Result<Option<String>> {
    if s.is_empty() {
        return Ok(None);
    }
    let len = s.chars().count();
    if len > max {
        return p.err(format!("is {len} characters long; at most {max} allowed"));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return p.err(format!("contains the control character {c:?}"));
    }
    Ok(Some(s.to_owned()))
}

/// A name that must not contain whitespace or `/` (NIC, node names).
fn name(p: Path<'_>, s: &str, max: usize) -> Result<Option<String>> {
    let Some(s) = text(p, s, max)? else {
        return Ok(None);
    };
    if let Some(c) = s.chars().find(|&c| c.is_whitespace() || c == '/') {
        return p.err(format!("{} contains {c:?}", show(&s)));
    }
    Ok(Some(s))
}

fn required_name(p: Path<'_>, s: &str, max: usize) -> Result<String> {
    name(p, s, max)?.ok_or_else(|| p.error("is required"))
}

/// An IPv4 unicast host address in dotted-quad form.
fn ipv4_unicast(p: Path<'_>, s: &str) -> Result<Ipv4Addr> {
    if s.is_empty() {
        return p.err("is required");
    }
    let addr: Ipv4Addr = s
        .parse()
        .map_err(|_| p.error(format!("{} is not an IPv4 address", show(s))))?;
    let what = if addr.is_unspecified() {
        "the unspecified address"
    } else if addr.is_broadcast() {
        "the broadcast address"
    } else if addr.is_multicast() {
        "a multicast address"
    } else if addr.is_loopback() {
        "a loopback address"
    } else {
        return Ok(addr);
    };
    p.err(format!("{addr} is {what}, not a host's unicast address"))
}

/// A RoCE queue pair number usable by a flow.
fn queue_pair(p: Path<'_>, qp: u32) -> Result<u32> {
    if qp < QP_MIN {
        p.err(format!(
            "queue pair {qp} is special (0 and 1 are reserved); use {QP_MIN} to {QP_MAX}"
        ))
    } else if qp > QP_MAX {
        p.err(format!(
            "queue pair {qp} does not fit in 24 bits (at most {QP_MAX})"
        ))
    } else {
        Ok(qp)
    }
}

fn rank_number(p: Path<'_>, rank: u32) -> Result<u32> {
    if rank >= MAX_WORLD_SIZE {
        p.err(format!(
            "rank {rank} is beyond the protocol's largest world size {MAX_WORLD_SIZE}"
        ))
    } else {
        Ok(rank)
    }
}

// ---------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------

trait FromWire: Sized {
    fn from_wire(p: Path<'_>, value: i32) -> Result<Self>;
}

/// Maps a required proto enum onto a domain enum, both ways. The match on
/// the proto enum is exhaustive, so a new wire value fails to compile until
/// it is mapped here.
macro_rules! enum_bridge {
    ($dom:ident, $proto:ident, { $($dv:ident => $pv:ident),+ $(,)? }) => {
        impl FromWire for $dom {
            fn from_wire(p: Path<'_>, value: i32) -> Result<Self> {
                match proto::$proto::try_from(value) {
                    $(Ok(proto::$proto::$pv) => Ok($dom::$dv),)+
                    Ok(proto::$proto::Unspecified) => p.err(format!(
                        "is required ({} is not allowed)",
                        proto::$proto::Unspecified.as_str_name()
                    )),
                    Err(_) => p.err(format!(
                        "unknown {} value {value}",
                        stringify!($proto)
                    )),
                }
            }
        }

        impl From<$dom> for proto::$proto {
            fn from(value: $dom) -> Self {
                match value {
                    $($dom::$dv => proto::$proto::$pv,)+
                }
            }
        }
    };
}

enum_bridge!(Priority, PriorityClass, {
    Background => Background,
    Standard => Standard,
    IterationBlocking => IterationBlocking,
    LatencyCritical => LatencyCritical,
});
enum_bridge!(Elasticity, Elasticity, {
    Inelastic => Inelastic,
    Elastic => Elastic,
});
enum_bridge!(WorkloadKind, WorkloadKind, {
    Training => Training,
    Inference => Inference,
});
enum_bridge!(CollectiveLibrary, CollectiveLibrary, {
    Nccl => Nccl,
    Rccl => Rccl,
    Gloo => Gloo,
    Mpi => Mpi,
    OneCcl => Oneccl,
    Xla => Xla,
    Other => Other,
});
enum_bridge!(CollectiveAlgorithm, CollectiveAlgorithm, {
    Ring => Ring,
    Tree => Tree,
    CollNet => Collnet,
    Nvls => Nvls,
    Pat => Pat,
    Direct => Direct,
});
enum_bridge!(CollectiveKind, CollectiveKind, {
    RingAllReduce => RingAllReduce,
    TreeAllReduce => TreeAllReduce,
    AllGather => AllGather,
    ReduceScatter => ReduceScatter,
    AllToAll => AllToAll,
    PipelineSend => PipelineSend,
    KvCacheTransfer => KvCacheTransfer,
});
enum_bridge!(ReservationStatus, ReservationStatus, {
    Admitted => Admitted,
    Partial => Partial,
    Deferred => Deferred,
    FallbackEcmp => FallbackEcmp,
    Rejected => Rejected,
    Cancelled => Cancelled,
});
enum_bridge!(CongestionKind, CongestionKind, {
    EcnMarking => EcnMarking,
    PfcPause => PfcPause,
    QueueBuildup => QueueBuildup,
    Drop => Drop,
});

/// `REASON_CODE_UNSPECIFIED` is a valid value ("no particular reason").
impl FromWire for ReasonCode {
    fn from_wire(p: Path<'_>, value: i32) -> Result<Self> {
        use proto::ReasonCode as W;
        Ok(match W::try_from(value) {
            Ok(W::Unspecified) => ReasonCode::None,
            Ok(W::InsufficientCapacity) => ReasonCode::InsufficientCapacity,
            Ok(W::DeadlineUnmeetable) => ReasonCode::DeadlineUnmeetable,
            Ok(W::NoPath) => ReasonCode::NoPath,
            Ok(W::LinkDown) => ReasonCode::LinkDown,
            Ok(W::LabelStackTooDeep) => ReasonCode::LabelStackTooDeep,
            Ok(W::Preempted) => ReasonCode::Preempted,
            Ok(W::TenantQuota) => ReasonCode::TenantQuota,
            Ok(W::UnknownEndpoint) => ReasonCode::UnknownEndpoint,
            Ok(W::WorkloadDeviation) => ReasonCode::WorkloadDeviation,
            Ok(W::ControllerDegraded) => ReasonCode::ControllerDegraded,
            Err(_) => return p.err(format!("unknown ReasonCode value {value}")),
        })
    }
}

impl From<ReasonCode> for proto::ReasonCode {
    fn from(value: ReasonCode) -> Self {
        use proto::ReasonCode as W;
        match value {
            ReasonCode::None => W::Unspecified,
            ReasonCode::InsufficientCapacity => W::InsufficientCapacity,
            ReasonCode::DeadlineUnmeetable => W::DeadlineUnmeetable,
            ReasonCode::NoPath => W::NoPath,
            ReasonCode::LinkDown => W::LinkDown,
            ReasonCode::LabelStackTooDeep => W::LabelStackTooDeep,
            ReasonCode::Preempted => W::Preempted,
            ReasonCode::TenantQuota => W::TenantQuota,
            ReasonCode::UnknownEndpoint => W::UnknownEndpoint,
            ReasonCode::WorkloadDeviation => W::WorkloadDeviation,
            ReasonCode::ControllerDegraded => W::ControllerDegraded,
        }
    }
}

// ---------------------------------------------------------------------------
// Common messages
// ---------------------------------------------------------------------------

fn protocol_version(p: Path<'_>, v: &Option<proto::ProtocolVersion>) -> Result<Version> {
    let v = required(p, v)?;
    let version = Version {
        major: v.major,
        minor: v.minor,
    };
    if version.major != PROTOCOL_VERSION.major {
        return p.field("major").err(format!(
            "unsupported protocol version {version}; this side speaks {PROTOCOL_VERSION} and major versions must match"
        ));
    }
    Ok(version)
}

fn header(p: Path<'_>, h: &Option<proto::RequestHeader>) -> Result<RequestContext> {
    let h = required(p, h)?;
    // The version first: a peer of another major may mean something else
    // by every other field.
    let client_version = protocol_version(p.field("protocol_version"), &h.protocol_version)?;
    let tenant = client_id(p.field("tenant"), &h.tenant)?;
    Ok(RequestContext {
        tenant,
        client_version,
    })
}

fn endpoint(p: Path<'_>, e: &Option<proto::Endpoint>) -> Result<Endpoint> {
    use proto::endpoint::Address;
    match &required(p, e)?.address {
        None => p.err("is required: set rank or host_address"),
        Some(Address::Rank(r)) => Ok(Endpoint::Rank(rank_number(p.field("rank"), *r)?)),
        Some(Address::HostAddress(a)) => {
            Ok(Endpoint::Host(ipv4_unicast(p.field("host_address"), a)?))
        }
    }
}

/// The wire name of a time point's field, for messages.
fn time_field(point: TimePoint, offset: &'static str, unix: &'static str) -> &'static str {
    match point {
        TimePoint::OffsetNs(_) => offset,
        TimePoint::UnixNs(_) => unix,
    }
}

/// A start time: `msg.start_offset_ns` or `msg.start_unix_ns`.
fn start_point(msg: Path<'_>, start: Option<TimePoint>) -> Result<TimePoint> {
    match start {
        None => msg
            .field("start")
            .err("is required: set start_offset_ns or start_unix_ns"),
        Some(TimePoint::OffsetNs(o)) if o > MAX_HORIZON_NS => msg.field("start_offset_ns").err(
            format!("{o} ns is beyond the protocol's 24 h horizon ({MAX_HORIZON_NS} ns)"),
        ),
        Some(TimePoint::UnixNs(0)) => msg.field("start_unix_ns").err("must be greater than 0"),
        Some(t) => Ok(t),
    }
}

/// A deadline: same base as the start, after it, and at or after `end`
/// (the start plus the duration, in the same base) when that is known.
fn deadline_point(
    msg: Path<'_>,
    start: TimePoint,
    end_ns: Option<u64>,
    deadline: Option<TimePoint>,
) -> Result<Option<TimePoint>> {
    let Some(deadline) = deadline else {
        return Ok(None);
    };
    let field = msg.field(time_field(
        deadline,
        "deadline_offset_ns",
        "deadline_unix_ns",
    ));
    if !deadline.same_base(start) {
        return field.err(format!(
            "the start is given as {}; give the deadline as {} too",
            time_field(start, "start_offset_ns", "start_unix_ns"),
            time_field(start, "deadline_offset_ns", "deadline_unix_ns"),
        ));
    }
    let (d, s) = (deadline.raw_ns(), start.raw_ns());
    if d <= s {
        return field.err(format!("deadline {d} ns is not after the start {s} ns"));
    }
    if let Some(end) = end_ns {
        if d < end {
            return field.err(format!(
                "deadline {d} ns is before the end {end} ns (start + duration)"
            ));
        }
    }
    Ok(Some(deadline))
}

fn duration_ns(p: Path<'_>, d: u64) -> Result<u64> {
    positive(p, d)?;
    if d > MAX_HORIZON_NS {
        return p.err(format!(
            "{d} ns is longer than the protocol's 24 h limit ({MAX_HORIZON_NS} ns)"
        ));
    }
    Ok(d)
}

fn rate_bps(p: Path<'_>, r: u64) -> Result<u64> {
    positive(p, r)?;
    if r > MAX_RATE_BPS {
        return p.err(format!(
            "{r} bit/s is above the protocol's limit of {MAX_RATE_BPS} bit/s (10 Tbit/s)"
        ));
    }
    Ok(r)
}

/// Demand pacing, checked for consistency with the size.
fn pacing(msg: Path<'_>, size_bytes: u64, pacing: Option<Pacing>) -> Result<Pacing> {
    match pacing {
        None => msg
            .field("pacing")
            .err("is required: set duration_ns or rate_bps"),
        Some(Pacing::DurationNs(d)) => {
            let p = msg.field("duration_ns");
            duration_ns(p, d)?;
            let implied = rate_for(size_bytes, d);
            if implied > MAX_RATE_BPS {
                return p.err(format!(
                    "{size_bytes} bytes in {d} ns implies {implied} bit/s, above the protocol's limit of {MAX_RATE_BPS} bit/s"
                ));
            }
            Ok(Pacing::DurationNs(d))
        }
        Some(Pacing::RateBps(r)) => {
            let p = msg.field("rate_bps");
            rate_bps(p, r)?;
            let implied = transfer_ns(size_bytes, r);
            if implied > MAX_HORIZON_NS {
                return p.err(format!(
                    "{size_bytes} bytes at {r} bit/s takes {implied} ns, longer than the protocol's 24 h limit"
                ));
            }
            Ok(Pacing::RateBps(r))
        }
    }
}

fn recurrence(
    p: Path<'_>,
    r: &Option<proto::Recurrence>,
    start: TimePoint,
    one_duration_ns: Option<u64>,
) -> Result<Option<Recurrence>> {
    let Some(r) = r else {
        return Ok(None);
    };
    let period_ns = positive(p.field("period_ns"), r.period_ns)?;
    if r.occurrences == 0 || r.occurrences > MAX_OCCURRENCES {
        return p.field("occurrences").err(format!(
            "{} is outside 1 to {MAX_OCCURRENCES}",
            r.occurrences
        ));
    }
    if let Some(d) = one_duration_ns {
        if period_ns < d {
            return p.field("period_ns").err(format!(
                "period {period_ns} ns is shorter than one occurrence ({d} ns); occurrences would overlap"
            ));
        }
    }
    let last_start = period_ns
        .checked_mul(u64::from(r.occurrences - 1))
        .and_then(|span| span.checked_add(start.raw_ns()));
    if last_start.is_none() {
        return p.field("occurrences").err(format!(
            "{} occurrences every {period_ns} ns run past the largest representable time",
            r.occurrences
        ));
    }
    Ok(Some(Recurrence {
        period_ns,
        occurrences: r.occurrences,
    }))
}

/// Reports a duplicate in a list: `list[i]: duplicate <what> (also list[j])`.
fn check_unique<K: std::hash::Hash + Eq + std::fmt::Display>(
    seen: &mut HashMap<K, usize>,
    key: K,
    i: usize,
    p: Path<'_>,
    list: &str,
    what: &str,
) -> Result<()> {
    match seen.entry(key) {
        Entry::Occupied(e) => p.err(format!(
            "duplicate {what} {} (also at {list}[{}])",
            e.key(),
            e.get()
        )),
        Entry::Vacant(v) => {
            v.insert(i);
            Ok(())
        }
    }
}

/// Displays a string key quoted in duplicate messages.
struct Quoted<'a>(&'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::hash::Hash for Quoted<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl PartialEq for Quoted<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for Quoted<'_> {}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

impl Validate for proto::HandshakeRequest {
    type Output = ValidatedHandshake;

    fn validate(&self) -> Result<ValidatedHandshake> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let client_name = text(ROOT.field("client_name"), &self.client_name, MAX_NAME_LEN)?;
        Ok(ValidatedHandshake { ctx, client_name })
    }
}

impl Validate for proto::RegisterTopologyRequest {
    type Output = ValidatedTopology;

    fn validate(&self) -> Result<ValidatedTopology> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let tp = ROOT.field("topology");
        let t = required(tp, &self.topology)?;
        let job_id = client_id(tp.field("job_id"), &t.job_id)?;
        let workload_kind = WorkloadKind::from_wire(tp.field("workload_kind"), t.workload_kind)?;
        let world_size = t.world_size;
        if world_size == 0 || world_size > MAX_WORLD_SIZE {
            return tp
                .field("world_size")
                .err(format!("{world_size} is outside 1 to {MAX_WORLD_SIZE}"));
        }
        let library = CollectiveLibrary::from_wire(tp.field("library"), t.library)?;
        let library_version = text(
            tp.field("library_version"),
            &t.library_version,
            MAX_LIBRARY_VERSION_LEN,
        )?;

        let mut algorithms = Vec::with_capacity(t.algorithms.len());
        let mut seen_algorithms = HashMap::new();
        for (i, &a) in t.algorithms.iter().enumerate() {
            let ap = tp.index("algorithms", i);
            let algorithm = CollectiveAlgorithm::from_wire(ap, a)?;
            let wire_name = proto::CollectiveAlgorithm::from(algorithm).as_str_name();
            check_unique(
                &mut seen_algorithms,
                wire_name,
                i,
                ap,
                "algorithms",
                "algorithm",
            )?;
            algorithms.push(algorithm);
        }

        if t.ranks.is_empty() {
            return tp.field("ranks").err("at least one rank is required");
        }
        let mut ranks = Vec::with_capacity(t.ranks.len());
        let mut seen_ranks = HashMap::with_capacity(t.ranks.len());
        // Queue-pair ranges per (address, NIC): (range, rank, index).
        let mut qp_owners: QpOwners<'_> = HashMap::new();
        for (i, r) in t.ranks.iter().enumerate() {
            let rp = tp.index("ranks", i);
            if r.rank >= world_size {
                return rp.field("rank").err(format!(
                    "rank {} is not below world_size {world_size}",
                    r.rank
                ));
            }
            check_unique(
                &mut seen_ranks,
                r.rank,
                i,
                rp.field("rank"),
                "ranks",
                "rank",
            )?;
            let device_id = text(rp.field("device_id"), &r.device_id, MAX_DEVICE_ID_LEN)?;
            let host_address = ipv4_unicast(rp.field("host_address"), &r.host_address)?;
            let nic = name(rp.field("nic"), &r.nic, MAX_NIC_LEN)?;
            let qp_range = match &r.qp_range {
                None => None,
                Some(q) => {
                    let qp = rp.field("qp_range");
                    let range = qp_range(qp, q)?;
                    let owners = qp_owners
                        .entry((host_address, (!r.nic.is_empty()).then_some(r.nic.as_str())))
                        .or_default();
                    if let Some((_, other, j)) = owners.iter().find(|(o, _, _)| o.overlaps(&range))
                    {
                        return qp.err(format!(
                            "queue pairs {}..={} overlap those of rank {other} (ranks[{j}]) on the same address and NIC",
                            range.first_qp,
                            range.last_qp()
                        ));
                    }
                    owners.push((range, r.rank, i));
                    Some(range)
                }
            };
            ranks.push(RankEndpoint {
                rank: r.rank,
                device_id,
                host_address,
                nic,
                qp_range,
            });
        }
        ranks.sort_by_key(|r| r.rank);

        Ok(ValidatedTopology {
            ctx,
            job_id,
            workload_kind,
            world_size,
            ranks,
            library,
            library_version,
            algorithms,
        })
    }
}

/// Queue-pair ranges claimed per (host address, NIC): (range, rank, index).
type QpOwners<'a> = HashMap<(Ipv4Addr, Option<&'a str>), Vec<(QpRange, u32, usize)>>;

fn qp_range(p: Path<'_>, q: &proto::QpRange) -> Result<QpRange> {
    queue_pair(p.field("first_qp"), q.first_qp)?;
    if q.count == 0 {
        return p.field("count").err("must be at least 1");
    }
    let last = u64::from(q.first_qp) + u64::from(q.count) - 1;
    if last > u64::from(QP_MAX) {
        return p.field("count").err(format!(
            "{} queue pairs from {} end at {last}, beyond 24 bits (at most {QP_MAX})",
            q.count, q.first_qp
        ));
    }
    Ok(QpRange {
        first_qp: q.first_qp,
        count: q.count,
    })
}

impl Validate for proto::SubmitDemandRequest {
    type Output = ValidatedDemandBatch;

    fn validate(&self) -> Result<ValidatedDemandBatch> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        if self.demands.is_empty() {
            return ROOT.field("demands").err("at least one demand is required");
        }
        if self.demands.len() > MAX_DEMANDS_PER_REQUEST {
            return ROOT.field("demands").err(format!(
                "{} demands; at most {MAX_DEMANDS_PER_REQUEST} per request",
                self.demands.len()
            ));
        }
        let mut demands = Vec::with_capacity(self.demands.len());
        let mut seen = HashMap::with_capacity(self.demands.len());
        for (i, d) in self.demands.iter().enumerate() {
            let dp = ROOT.index("demands", i);
            let demand = demand(dp, d, &ctx.tenant)?;
            check_unique(
                &mut seen,
                Quoted(&d.demand_id),
                i,
                dp.field("demand_id"),
                "demands",
                "demand id",
            )?;
            demands.push(demand);
        }
        Ok(ValidatedDemandBatch {
            ctx,
            reference_unix_ns: nonzero(self.reference_unix_ns),
            demands,
        })
    }
}

fn demand(p: Path<'_>, d: &proto::DemandSignal, tenant: &str) -> Result<ValidatedDemand> {
    use proto::demand_signal::{Deadline, Pacing as WirePacing, Start};

    let demand_id = client_id(p.field("demand_id"), &d.demand_id)?;
    let job_id = optional_client_id(p.field("job_id"), &d.job_id)?;
    let source = endpoint(p.field("source"), &d.source)?;
    let destination = endpoint(p.field("destination"), &d.destination)?;
    if job_id.is_none()
        && (matches!(source, Endpoint::Rank(_)) || matches!(destination, Endpoint::Rank(_)))
    {
        return p
            .field("job_id")
            .err("is required when an endpoint is a rank");
    }
    if source == destination {
        return p.field("destination").err("is the same as the source");
    }
    let start = start_point(
        p,
        d.start.map(|s| match s {
            Start::StartOffsetNs(t) => TimePoint::OffsetNs(t),
            Start::StartUnixNs(t) => TimePoint::UnixNs(t),
        }),
    )?;
    let size_bytes = positive(p.field("size_bytes"), d.size_bytes)?;
    let pacing = pacing(
        p,
        size_bytes,
        d.pacing.map(|x| match x {
            WirePacing::DurationNs(t) => Pacing::DurationNs(t),
            WirePacing::RateBps(r) => Pacing::RateBps(r),
        }),
    )?;
    let priority = Priority::from_wire(p.field("priority"), d.priority)?;
    let elasticity = Elasticity::from_wire(p.field("elasticity"), d.elasticity)?;
    let one_duration = match pacing {
        Pacing::DurationNs(t) => t,
        Pacing::RateBps(r) => transfer_ns(size_bytes, r),
    };
    let end = start.raw_ns().checked_add(one_duration);
    let deadline = deadline_point(
        p,
        start,
        end,
        d.deadline.map(|x| match x {
            Deadline::DeadlineOffsetNs(t) => TimePoint::OffsetNs(t),
            Deadline::DeadlineUnixNs(t) => TimePoint::UnixNs(t),
        }),
    )?;
    let dest_qp = d
        .dest_qp
        .map(|q| queue_pair(p.field("dest_qp"), q))
        .transpose()?;
    let recurrence = recurrence(
        p.field("recurrence"),
        &d.recurrence,
        start,
        Some(one_duration),
    )?;
    Ok(ValidatedDemand {
        tenant: tenant.to_owned(),
        demand_id,
        job_id,
        source,
        destination,
        start,
        size_bytes,
        pacing,
        priority,
        elasticity,
        deadline,
        dest_qp,
        recurrence,
    })
}

fn kind_name(kind: CollectiveKind) -> &'static str {
    proto::CollectiveKind::from(kind).as_str_name()
}

impl Validate for proto::SubmitCollectiveRequest {
    type Output = ValidatedCollective;

    fn validate(&self) -> Result<ValidatedCollective> {
        use proto::collective::{Deadline, Pacing as WirePacing, Start};

        let ctx = header(ROOT.field("header"), &self.header)?;
        let cp = ROOT.field("collective");
        let c = required(cp, &self.collective)?;
        let collective_id = client_id(cp.field("collective_id"), &c.collective_id)?;
        let job_id = client_id(cp.field("job_id"), &c.job_id)?;
        let kind = CollectiveKind::from_wire(cp.field("kind"), c.kind)?;

        let min_ranks = if kind == CollectiveKind::KvCacheTransfer {
            1
        } else {
            2
        };
        if c.ranks.len() < min_ranks {
            return cp.field("ranks").err(format!(
                "{} needs at least {min_ranks} ranks, got {}",
                kind_name(kind),
                c.ranks.len()
            ));
        }
        let mut seen = HashMap::with_capacity(c.ranks.len() + c.peer_ranks.len());
        for (i, &r) in c.ranks.iter().enumerate() {
            let rp = cp.index("ranks", i);
            rank_number(rp, r)?;
            check_unique(&mut seen, r, i, rp, "ranks", "rank")?;
        }
        if kind == CollectiveKind::KvCacheTransfer {
            if c.peer_ranks.len() != c.ranks.len() {
                return cp.field("peer_ranks").err(format!(
                    "has {} entries but ranks has {}; each prefill rank needs one decode rank",
                    c.peer_ranks.len(),
                    c.ranks.len()
                ));
            }
            let mut seen_peers = HashMap::with_capacity(c.peer_ranks.len());
            for (i, &r) in c.peer_ranks.iter().enumerate() {
                let rp = cp.index("peer_ranks", i);
                rank_number(rp, r)?;
                if let Some(j) = seen.get(&r) {
                    return rp.err(format!(
                        "rank {r} is also a prefill rank (ranks[{j}]); a rank cannot send its KV cache to itself"
                    ));
                }
                check_unique(&mut seen_peers, r, i, rp, "peer_ranks", "rank")?;
            }
        } else if !c.peer_ranks.is_empty() {
            return cp.field("peer_ranks").err(format!(
                "must be empty for {}; only COLLECTIVE_KIND_KV_CACHE_TRANSFER takes peer ranks",
                kind_name(kind)
            ));
        }

        let sp = cp.field("size_bytes");
        let size_bytes = positive(sp, c.size_bytes)?;
        let n = c.ranks.len() as u64;
        let (min_bytes, per) = match kind {
            CollectiveKind::PipelineSend => (1, "stage"),
            CollectiveKind::KvCacheTransfer => (n, "prefill/decode pair"),
            CollectiveKind::AllToAll => (n - 1, "peer"),
            _ => (n, "rank"),
        };
        if size_bytes < min_bytes {
            return sp.err(format!(
                "{size_bytes} bytes is less than one byte per {per} ({min_bytes} needed)"
            ));
        }
        let channels = match c.channels {
            0 => 1,
            ch if ch > MAX_CHANNELS => {
                return cp
                    .field("channels")
                    .err(format!("{ch} channels; at most {MAX_CHANNELS}"))
            }
            ch => ch,
        };

        let start = start_point(
            cp,
            c.start.map(|s| match s {
                Start::StartOffsetNs(t) => TimePoint::OffsetNs(t),
                Start::StartUnixNs(t) => TimePoint::UnixNs(t),
            }),
        )?;
        let pacing = match c.pacing {
            None => {
                return cp
                    .field("pacing")
                    .err("is required: set duration_ns or flow_rate_bps")
            }
            Some(WirePacing::DurationNs(d)) => {
                CollectivePacing::DurationNs(duration_ns(cp.field("duration_ns"), d)?)
            }
            Some(WirePacing::FlowRateBps(r)) => {
                CollectivePacing::FlowRateBps(rate_bps(cp.field("flow_rate_bps"), r)?)
            }
        };
        let priority = Priority::from_wire(cp.field("priority"), c.priority)?;
        let elasticity = Elasticity::from_wire(cp.field("elasticity"), c.elasticity)?;
        // The duration of a rate-paced collective depends on its expansion,
        // which is the controller's; only an explicit one is checked here.
        let one_duration = match pacing {
            CollectivePacing::DurationNs(d) => Some(d),
            CollectivePacing::FlowRateBps(_) => None,
        };
        let end = one_duration.and_then(|d| start.raw_ns().checked_add(d));
        let deadline = deadline_point(
            cp,
            start,
            end,
            c.deadline.map(|x| match x {
                Deadline::DeadlineOffsetNs(t) => TimePoint::OffsetNs(t),
                Deadline::DeadlineUnixNs(t) => TimePoint::UnixNs(t),
            }),
        )?;
        let recurrence = recurrence(cp.field("recurrence"), &c.recurrence, start, one_duration)?;

        Ok(ValidatedCollective {
            ctx,
            reference_unix_ns: nonzero(self.reference_unix_ns),
            collective_id,
            job_id,
            kind,
            ranks: c.ranks.clone(),
            peer_ranks: c.peer_ranks.clone(),
            size_bytes,
            channels,
            start,
            pacing,
            priority,
            elasticity,
            deadline,
            recurrence,
        })
    }
}

impl Validate for proto::CancelRequest {
    type Output = ValidatedCancel;

    fn validate(&self) -> Result<ValidatedCancel> {
        use proto::cancel_request::Target;

        let ctx = header(ROOT.field("header"), &self.header)?;
        let target = match &self.target {
            None => {
                return ROOT
                    .field("target")
                    .err("is required: set demand_id, collective_id, reservation_id or job_id")
            }
            Some(Target::DemandId(id)) => {
                CancelTarget::Demand(client_id(ROOT.field("demand_id"), id)?)
            }
            Some(Target::CollectiveId(id)) => {
                CancelTarget::Collective(client_id(ROOT.field("collective_id"), id)?)
            }
            Some(Target::ReservationId(id)) => {
                CancelTarget::Reservation(controller_id(ROOT.field("reservation_id"), id)?)
            }
            Some(Target::JobId(id)) => CancelTarget::Job(client_id(ROOT.field("job_id"), id)?),
        };
        Ok(ValidatedCancel { ctx, target })
    }
}

impl Validate for proto::ReportDeviationRequest {
    type Output = ValidatedDeviation;

    fn validate(&self) -> Result<ValidatedDeviation> {
        use proto::workload_deviation::{Change, Target};

        let ctx = header(ROOT.field("header"), &self.header)?;
        let dp = ROOT.field("deviation");
        let d = required(dp, &self.deviation)?;
        let target = match &d.target {
            None => {
                return dp
                    .field("target")
                    .err("is required: set demand_id or collective_id")
            }
            Some(Target::DemandId(id)) => {
                DeviationTarget::Demand(client_id(dp.field("demand_id"), id)?)
            }
            Some(Target::CollectiveId(id)) => {
                DeviationTarget::Collective(client_id(dp.field("collective_id"), id)?)
            }
        };
        let change =
            match &d.change {
                None => return dp.field("change").err(
                    "is required: set early_start, late_start, size_change, completed or aborted",
                ),
                Some(Change::EarlyStart(s)) => {
                    WorkloadChange::EarlyStart(start_change(dp.field("early_start"), s)?)
                }
                Some(Change::LateStart(s)) => {
                    WorkloadChange::LateStart(start_change(dp.field("late_start"), s)?)
                }
                Some(Change::SizeChange(s)) => WorkloadChange::SizeChange {
                    new_size_bytes: positive(
                        dp.field("size_change").field("new_size_bytes"),
                        s.new_size_bytes,
                    )?,
                },
                Some(Change::Completed(c)) => WorkloadChange::Completed {
                    completed_unix_ns: nonzero(c.completed_unix_ns),
                },
                Some(Change::Aborted(a)) => WorkloadChange::Aborted {
                    reason: text(dp.field("aborted").field("reason"), &a.reason, MAX_TEXT_LEN)?,
                },
            };
        Ok(ValidatedDeviation {
            ctx,
            reference_unix_ns: nonzero(self.reference_unix_ns),
            target,
            change,
            observed_unix_ns: nonzero(d.observed_unix_ns),
        })
    }
}

fn start_change(p: Path<'_>, s: &proto::StartChange) -> Result<TimePoint> {
    use proto::start_change::Start;
    start_point(
        p,
        s.start.map(|s| match s {
            Start::StartOffsetNs(t) => TimePoint::OffsetNs(t),
            Start::StartUnixNs(t) => TimePoint::UnixNs(t),
        }),
    )
}

impl Validate for proto::WatchEventsRequest {
    type Output = ValidatedWatch;

    fn validate(&self) -> Result<ValidatedWatch> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let mut job_ids = Vec::with_capacity(self.job_ids.len());
        let mut seen = HashMap::new();
        for (i, id) in self.job_ids.iter().enumerate() {
            let jp = ROOT.index("job_ids", i);
            job_ids.push(client_id(jp, id)?);
            check_unique(&mut seen, Quoted(id), i, jp, "job_ids", "job id")?;
        }
        let interval = self.telemetry_interval_ns;
        let telemetry_interval_ns = match interval {
            0 => None,
            t if !(MIN_TELEMETRY_INTERVAL_NS..=MAX_TELEMETRY_INTERVAL_NS).contains(&t) => {
                return ROOT.field("telemetry_interval_ns").err(format!(
                    "{t} ns is outside {MIN_TELEMETRY_INTERVAL_NS} ns (10 ms) to {MAX_TELEMETRY_INTERVAL_NS} ns (1 h); 0 turns telemetry off"
                ))
            }
            t => Some(t),
        };
        Ok(ValidatedWatch {
            ctx,
            job_ids,
            telemetry_interval_ns,
        })
    }
}

impl Validate for proto::GetReservationRequest {
    type Output = ValidatedGetReservation;

    fn validate(&self) -> Result<ValidatedGetReservation> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let reservation_id = controller_id(ROOT.field("reservation_id"), &self.reservation_id)?;
        Ok(ValidatedGetReservation {
            ctx,
            reservation_id,
        })
    }
}

impl Validate for proto::ListReservationsRequest {
    type Output = ValidatedListReservations;

    fn validate(&self) -> Result<ValidatedListReservations> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let job_id = optional_client_id(ROOT.field("job_id"), &self.job_id)?;
        let page_size = match self.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n if n > MAX_PAGE_SIZE => {
                return ROOT
                    .field("page_size")
                    .err(format!("{n} is above the largest page of {MAX_PAGE_SIZE}"))
            }
            n => n,
        };
        let page_token = text(
            ROOT.field("page_token"),
            &self.page_token,
            MAX_PAGE_TOKEN_LEN,
        )?;
        Ok(ValidatedListReservations {
            ctx,
            job_id,
            page_size,
            page_token,
        })
    }
}

// ---------------------------------------------------------------------------
// Checks against registered topologies (state supplied by the caller)
// ---------------------------------------------------------------------------

fn registered<'t>(
    p: Path<'_>,
    topology: &'t ValidatedTopology,
    rank: u32,
) -> Result<&'t RankEndpoint> {
    topology.endpoint(rank).ok_or_else(|| {
        p.error(format!(
            "rank {rank} is not registered in job {:?}",
            topology.job_id
        ))
    })
}

impl ValidatedDemandBatch {
    /// Checks every rank endpoint against its job's registered topology
    /// (`topology_of(job_id)`): the job must be registered, the rank must
    /// be in it, and the two ends of a demand must resolve to different
    /// host addresses (traffic within a host does not cross the fabric).
    /// The error names the field as in the request.
    pub fn check_ranks<'t>(
        &self,
        topology_of: impl Fn(&str) -> Option<&'t ValidatedTopology>,
    ) -> Result<()> {
        for (i, d) in self.demands.iter().enumerate() {
            let dp = ROOT.index("demands", i);
            let Some(job_id) = &d.job_id else { continue };
            if !matches!(d.source, Endpoint::Rank(_)) && !matches!(d.destination, Endpoint::Rank(_))
            {
                continue;
            }
            let topology = topology_of(job_id).ok_or_else(|| {
                dp.field("job_id")
                    .error(format!("job {job_id:?} has no registered topology"))
            })?;
            let resolve = |p: Path<'_>, e: Endpoint| -> Result<Ipv4Addr> {
                match e {
                    Endpoint::Rank(r) => Ok(registered(p.field("rank"), topology, r)?.host_address),
                    Endpoint::Host(a) => Ok(a),
                }
            };
            let src = resolve(dp.field("source"), d.source)?;
            let dst = resolve(dp.field("destination"), d.destination)?;
            if src == dst {
                return dp.field("destination").err(format!(
                    "resolves to {dst}, the source's host address; traffic within a host does not cross the fabric"
                ));
            }
        }
        Ok(())
    }
}

impl ValidatedCollective {
    /// Checks that `topology` is the collective's job and that every rank
    /// and peer rank is registered in it.
    pub fn check_ranks(&self, topology: &ValidatedTopology) -> Result<()> {
        let cp = ROOT.field("collective");
        if topology.job_id != self.job_id {
            return cp.field("job_id").err(format!(
                "is {:?} but the topology given is job {:?}",
                self.job_id, topology.job_id
            ));
        }
        for (i, &r) in self.ranks.iter().enumerate() {
            registered(cp.index("ranks", i), topology, r)?;
        }
        for (i, &r) in self.peer_ranks.iter().enumerate() {
            registered(cp.index("peer_ranks", i), topology, r)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Responses and events (validated on the client)
// ---------------------------------------------------------------------------

impl Validate for proto::HandshakeResponse {
    type Output = ServerHello;

    fn validate(&self) -> Result<ServerHello> {
        let server_version = protocol_version(ROOT.field("server_version"), &self.server_version)?;
        let server_time_unix_ns =
            positive(ROOT.field("server_time_unix_ns"), self.server_time_unix_ns)?;
        let mut kinds = Vec::with_capacity(self.supported_collective_kinds.len());
        let mut seen = HashMap::new();
        for (i, &k) in self.supported_collective_kinds.iter().enumerate() {
            let kp = ROOT.index("supported_collective_kinds", i);
            let kind = CollectiveKind::from_wire(kp, k)?;
            check_unique(
                &mut seen,
                kind_name(kind),
                i,
                kp,
                "supported_collective_kinds",
                "kind",
            )?;
            kinds.push(kind);
        }
        if self.max_demands_per_request == 0 {
            return ROOT
                .field("max_demands_per_request")
                .err("must be greater than 0");
        }
        if self.max_label_stack_depth as usize > MAX_LABEL_STACK_DEPTH {
            return ROOT.field("max_label_stack_depth").err(format!(
                "{} is deeper than the protocol's {MAX_LABEL_STACK_DEPTH}",
                self.max_label_stack_depth
            ));
        }
        Ok(ServerHello {
            server_version,
            server_time_unix_ns,
            supported_collective_kinds: kinds,
            max_demands_per_request: self.max_demands_per_request,
            max_label_stack_depth: self.max_label_stack_depth,
        })
    }
}

impl Validate for proto::RegisterTopologyResponse {
    type Output = TopologyRegistration;

    fn validate(&self) -> Result<TopologyRegistration> {
        let job_id = client_id(ROOT.field("job_id"), &self.job_id)?;
        let generation = positive(ROOT.field("generation"), self.generation)?;
        let mut warnings = Vec::with_capacity(self.warnings.len());
        for (i, w) in self.warnings.iter().enumerate() {
            let wp = ROOT.index("warnings", i);
            warnings.push(text(wp, w, MAX_TEXT_LEN)?.ok_or_else(|| wp.error("is empty"))?);
        }
        Ok(TopologyRegistration {
            job_id,
            registered_ranks: self.registered_ranks,
            generation,
            warnings,
        })
    }
}

impl Validate for proto::CancelResponse {
    type Output = Vec<String>;

    fn validate(&self) -> Result<Vec<String>> {
        id_list(
            ROOT,
            &self.cancelled_reservation_ids,
            "cancelled_reservation_ids",
        )
    }
}

fn id_list(parent: Path<'_>, ids: &[String], list: &'static str) -> Result<Vec<String>> {
    let mut out = Vec::with_capacity(ids.len());
    let mut seen = HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let p = parent.index(list, i);
        out.push(controller_id(p, id)?);
        check_unique(&mut seen, Quoted(id), i, p, list, "id")?;
    }
    Ok(out)
}

fn reservation_list(
    list: &'static str,
    rs: &[proto::Reservation],
) -> Result<Vec<ValidatedReservation>> {
    rs.iter()
        .enumerate()
        .map(|(i, r)| reservation(ROOT.index(list, i), r))
        .collect()
}

impl Validate for proto::SubmitDemandResponse {
    type Output = Vec<ValidatedReservation>;

    fn validate(&self) -> Result<Vec<ValidatedReservation>> {
        reservation_list("reservations", &self.reservations)
    }
}

impl Validate for proto::SubmitCollectiveResponse {
    type Output = ValidatedReservation;

    fn validate(&self) -> Result<ValidatedReservation> {
        let p = ROOT.field("reservation");
        reservation(p, required(p, &self.reservation)?)
    }
}

impl Validate for proto::ReportDeviationResponse {
    type Output = Vec<ValidatedReservation>;

    fn validate(&self) -> Result<Vec<ValidatedReservation>> {
        reservation_list("updated_reservations", &self.updated_reservations)
    }
}

impl Validate for proto::GetReservationResponse {
    type Output = ValidatedReservation;

    fn validate(&self) -> Result<ValidatedReservation> {
        let p = ROOT.field("reservation");
        reservation(p, required(p, &self.reservation)?)
    }
}

impl Validate for proto::ListReservationsResponse {
    type Output = ReservationPage;

    fn validate(&self) -> Result<ReservationPage> {
        Ok(ReservationPage {
            reservations: reservation_list("reservations", &self.reservations)?,
            next_page_token: text(
                ROOT.field("next_page_token"),
                &self.next_page_token,
                MAX_PAGE_TOKEN_LEN,
            )?,
        })
    }
}

impl Validate for proto::Reservation {
    type Output = ValidatedReservation;

    fn validate(&self) -> Result<ValidatedReservation> {
        reservation(ROOT, self)
    }
}

fn reservation(p: Path<'_>, r: &proto::Reservation) -> Result<ValidatedReservation> {
    use proto::reservation::Subject;

    let reservation_id = controller_id(p.field("reservation_id"), &r.reservation_id)?;
    let subject = match &r.subject {
        None => {
            return p
                .field("subject")
                .err("is required: set demand_id or collective_id")
        }
        // A predicted reservation answers a demand the controller made
        // itself, whose id carries the controller's "/".
        Some(Subject::DemandId(id)) if r.predicted => {
            ReservationSubject::Demand(controller_id(p.field("demand_id"), id)?)
        }
        Some(Subject::DemandId(id)) => {
            ReservationSubject::Demand(client_id(p.field("demand_id"), id)?)
        }
        Some(Subject::CollectiveId(id)) => {
            ReservationSubject::Collective(client_id(p.field("collective_id"), id)?)
        }
    };
    let job_id = optional_client_id(p.field("job_id"), &r.job_id)?;
    let status = ReservationStatus::from_wire(p.field("status"), r.status)?;
    let reason = ReasonCode::from_wire(p.field("reason"), r.reason)?;
    if status.needs_explanation() && reason == ReasonCode::None {
        return p.field("reason").err(format!(
            "is required when the status is {}",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }
    let advisory = text(p.field("advisory"), &r.advisory, MAX_TEXT_LEN)?;
    if status.needs_explanation() && advisory.is_none() {
        return p.field("advisory").err(format!(
            "is required when the status is {}",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }
    let revision = positive(p.field("revision"), r.revision)?;

    let quiet = matches!(
        status,
        ReservationStatus::Rejected | ReservationStatus::Cancelled
    );
    if r.flows.is_empty() && !quiet {
        return p.field("flows").err(format!(
            "at least one flow is required when the status is {}",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }
    if status.reserves() && r.end_unix_ns <= r.start_unix_ns {
        return p.field("end_unix_ns").err(format!(
            "end {} ns is not after the start {} ns",
            r.end_unix_ns, r.start_unix_ns
        ));
    }

    let mut flows = Vec::with_capacity(r.flows.len());
    let mut seen = HashMap::with_capacity(r.flows.len());
    for (i, f) in r.flows.iter().enumerate() {
        let fp = p.index("flows", i);
        let flow = flow_reservation(fp, f)?;
        check_unique(
            &mut seen,
            Quoted(&f.flow_id),
            i,
            fp.field("flow_id"),
            "flows",
            "flow id",
        )?;
        if flow.status.reserves()
            && (flow.start_unix_ns < r.start_unix_ns || flow.end_unix_ns > r.end_unix_ns)
        {
            return fp.err(format!(
                "window {}..{} ns lies outside the reservation's {}..{} ns",
                flow.start_unix_ns, flow.end_unix_ns, r.start_unix_ns, r.end_unix_ns
            ));
        }
        let consistent = match status {
            ReservationStatus::Admitted => flow.status == ReservationStatus::Admitted,
            ReservationStatus::Cancelled => flow.status == ReservationStatus::Cancelled,
            _ => true,
        };
        if !consistent {
            return fp.field("status").err(format!(
                "is {} but the reservation is {}",
                proto::ReservationStatus::from(flow.status).as_str_name(),
                proto::ReservationStatus::from(status).as_str_name()
            ));
        }
        flows.push(flow);
    }
    if !matches!(
        status,
        ReservationStatus::Admitted | ReservationStatus::Cancelled
    ) && !flows.is_empty()
        && flows
            .iter()
            .all(|f| f.status == ReservationStatus::Admitted)
    {
        return p.field("status").err(format!(
            "is {} but every flow is ADMITTED",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }

    Ok(ValidatedReservation {
        reservation_id,
        subject,
        job_id,
        status,
        reason,
        advisory,
        start_unix_ns: r.start_unix_ns,
        end_unix_ns: r.end_unix_ns,
        flows,
        revision,
        predicted: r.predicted,
    })
}

fn flow_reservation(p: Path<'_>, f: &proto::FlowReservation) -> Result<FlowReservation> {
    let flow_id = controller_id(p.field("flow_id"), &f.flow_id)?;
    let source_address = ipv4_unicast(p.field("source_address"), &f.source_address)?;
    let destination_address = ipv4_unicast(p.field("destination_address"), &f.destination_address)?;
    if source_address == destination_address {
        return p
            .field("destination_address")
            .err("is the same as source_address");
    }
    let source_rank = f
        .source_rank
        .map(|r| rank_number(p.field("source_rank"), r))
        .transpose()?;
    let destination_rank = f
        .destination_rank
        .map(|r| rank_number(p.field("destination_rank"), r))
        .transpose()?;
    let dest_qp = f
        .dest_qp
        .map(|q| queue_pair(p.field("dest_qp"), q))
        .transpose()?;
    let status = ReservationStatus::from_wire(p.field("status"), f.status)?;
    let reason = ReasonCode::from_wire(p.field("reason"), f.reason)?;
    let requested_bps = rate_bps(p.field("requested_bps"), f.requested_bps)?;
    let accepted = f.accepted_bps;
    let ap = p.field("accepted_bps");
    let status_name = proto::ReservationStatus::from(status).as_str_name();
    match status {
        ReservationStatus::Admitted | ReservationStatus::Deferred if accepted != requested_bps => {
            return ap.err(format!(
                "{accepted} bit/s but {status_name} means the requested {requested_bps} bit/s is reserved"
            ))
        }
        ReservationStatus::Partial if accepted == 0 || accepted >= requested_bps => {
            return ap.err(format!(
                "{accepted} bit/s but {status_name} means between 0 and the requested {requested_bps} bit/s, exclusive"
            ))
        }
        ReservationStatus::FallbackEcmp | ReservationStatus::Rejected | ReservationStatus::Cancelled
            if accepted != 0 =>
        {
            return ap.err(format!(
                "{accepted} bit/s but {status_name} reserves nothing"
            ))
        }
        _ => {}
    }
    if status.needs_explanation() && reason == ReasonCode::None {
        return p
            .field("reason")
            .err(format!("is required when the status is {status_name}"));
    }
    if status.reserves() {
        positive(p.field("start_unix_ns"), f.start_unix_ns)?;
        if f.end_unix_ns <= f.start_unix_ns {
            return p.field("end_unix_ns").err(format!(
                "end {} ns is not after the start {} ns",
                f.end_unix_ns, f.start_unix_ns
            ));
        }
    } else if !f.sr_label_stack.is_empty() || !f.hops.is_empty() {
        let field = if f.sr_label_stack.is_empty() {
            "hops"
        } else {
            "sr_label_stack"
        };
        return p
            .field(field)
            .err(format!("must be empty when the status is {status_name}"));
    }

    if f.sr_label_stack.len() > MAX_LABEL_STACK_DEPTH {
        return p.field("sr_label_stack").err(format!(
            "{} labels; the protocol carries at most {MAX_LABEL_STACK_DEPTH}",
            f.sr_label_stack.len()
        ));
    }
    for (i, &label) in f.sr_label_stack.iter().enumerate() {
        let lp = p.index("sr_label_stack", i);
        if label > MPLS_LABEL_MAX {
            return lp.err(format!(
                "label {label} does not fit in 20 bits (at most {MPLS_LABEL_MAX})"
            ));
        }
        if label < MPLS_FIRST_UNRESERVED_LABEL {
            return lp.err(format!(
                "label {label} is a special-purpose label (0 to 15)"
            ));
        }
    }
    let mut hops = Vec::with_capacity(f.hops.len());
    for (i, h) in f.hops.iter().enumerate() {
        let hp = p.index("hops", i);
        hops.push(PathHop {
            node: required_name(hp.field("node"), &h.node, MAX_NODE_NAME_LEN)?,
            egress_port: h.egress_port,
        });
    }
    let advisory = text(p.field("advisory"), &f.advisory, MAX_TEXT_LEN)?;
    Ok(FlowReservation {
        flow_id,
        source_address,
        destination_address,
        source_rank,
        destination_rank,
        dest_qp,
        status,
        reason,
        requested_bps,
        accepted_bps: accepted,
        start_unix_ns: f.start_unix_ns,
        end_unix_ns: f.end_unix_ns,
        sr_label_stack: f.sr_label_stack.clone(),
        hops,
        advisory,
    })
}

impl Validate for proto::WatchEvent {
    type Output = ValidatedWatchEvent;

    fn validate(&self) -> Result<ValidatedWatchEvent> {
        use proto::watch_event::Event;

        let sequence = positive(ROOT.field("sequence"), self.sequence)?;
        let emitted_unix_ns = positive(ROOT.field("emitted_unix_ns"), self.emitted_unix_ns)?;
        let body = match &self.event {
            None => {
                return ROOT
                    .field("event")
                    .err("is required: set telemetry or deviation")
            }
            Some(Event::Telemetry(t)) => {
                WatchEventBody::Telemetry(telemetry(ROOT.field("telemetry"), t)?)
            }
            Some(Event::Deviation(d)) => {
                WatchEventBody::Deviation(network_deviation(ROOT.field("deviation"), d)?)
            }
        };
        Ok(ValidatedWatchEvent {
            sequence,
            emitted_unix_ns,
            body,
        })
    }
}

fn link_id(p: Path<'_>, l: &Option<proto::LinkId>) -> Result<LinkId> {
    let l = required(p, l)?;
    let from_node = required_name(p.field("from_node"), &l.from_node, MAX_NODE_NAME_LEN)?;
    let to_node = required_name(p.field("to_node"), &l.to_node, MAX_NODE_NAME_LEN)?;
    if from_node == to_node {
        return p.field("to_node").err("is the same as from_node");
    }
    Ok(LinkId {
        from_node,
        from_port: l.from_port,
        to_node,
        to_port: l.to_port,
    })
}

fn telemetry(p: Path<'_>, t: &proto::TelemetrySnapshot) -> Result<TelemetrySnapshot> {
    let as_of_unix_ns = positive(p.field("as_of_unix_ns"), t.as_of_unix_ns)?;
    let interval_ns = positive(p.field("interval_ns"), t.interval_ns)?;
    let mut links = Vec::with_capacity(t.links.len());
    for (i, l) in t.links.iter().enumerate() {
        let lp = p.index("links", i);
        let link = link_id(lp.field("link"), &l.link)?;
        let capacity_bps = positive(lp.field("capacity_bps"), l.capacity_bps)?;
        if l.reserved_bps > capacity_bps {
            return lp.field("reserved_bps").err(format!(
                "{} bit/s exceeds the capacity {capacity_bps} bit/s",
                l.reserved_bps
            ));
        }
        links.push(LinkUtilization {
            link,
            capacity_bps,
            measured_bps: l.measured_bps,
            reserved_bps: l.reserved_bps,
            peak_queue_bytes: l.peak_queue_bytes,
        });
    }
    let mut congestion_events = Vec::with_capacity(t.congestion_events.len());
    for (i, c) in t.congestion_events.iter().enumerate() {
        let cp = p.index("congestion_events", i);
        congestion_events.push(CongestionEvent {
            link: link_id(cp.field("link"), &c.link)?,
            kind: CongestionKind::from_wire(cp.field("kind"), c.kind)?,
            start_unix_ns: positive(cp.field("start_unix_ns"), c.start_unix_ns)?,
            duration_ns: c.duration_ns,
            peak_queue_bytes: c.peak_queue_bytes,
            affected_packets: c.affected_packets,
        });
    }
    let mut paths = Vec::with_capacity(t.paths.len());
    for (i, a) in t.paths.iter().enumerate() {
        let ap = p.index("paths", i);
        let source_address = ipv4_unicast(ap.field("source_address"), &a.source_address)?;
        let destination_address =
            ipv4_unicast(ap.field("destination_address"), &a.destination_address)?;
        if source_address == destination_address {
            return ap
                .field("destination_address")
                .err("is the same as source_address");
        }
        if a.available_paths > a.equal_cost_paths {
            return ap.field("available_paths").err(format!(
                "{} is more than the {} equal-cost paths",
                a.available_paths, a.equal_cost_paths
            ));
        }
        paths.push(PathAvailability {
            source_address,
            destination_address,
            equal_cost_paths: a.equal_cost_paths,
            available_paths: a.available_paths,
            max_reservable_bps: a.max_reservable_bps,
        });
    }
    Ok(TelemetrySnapshot {
        as_of_unix_ns,
        interval_ns,
        links,
        congestion_events,
        paths,
    })
}

fn network_deviation(p: Path<'_>, d: &proto::NetworkDeviation) -> Result<NetworkDeviation> {
    use proto::network_deviation::Kind;

    let observed_unix_ns = positive(p.field("observed_unix_ns"), d.observed_unix_ns)?;
    let affected_reservation_ids =
        id_list(p, &d.affected_reservation_ids, "affected_reservation_ids")?;
    let change = match &d.kind {
        None => {
            return p.field("kind").err(
"is required: set link_down, link_up, reservation_changed, forecast_mismatch or prediction_withdrawn",
            )
        }
        Some(Kind::LinkDown(l)) => {
            let lp = p.field("link_down");
            NetworkChange::LinkDown(link_id(lp.field("link"), &l.link)?)
        }
        Some(Kind::LinkUp(l)) => {
            let lp = p.field("link_up");
            NetworkChange::LinkUp(link_id(lp.field("link"), &l.link)?)
        }
        Some(Kind::ReservationChanged(r)) => NetworkChange::ReservationChanged(Box::new(
            reservation(p.field("reservation_changed"), r)?,
        )),
        Some(Kind::ForecastMismatch(m)) => {
            let mp = p.field("forecast_mismatch");
            NetworkChange::ForecastMismatch(ForecastMismatch {
                reservation_id: controller_id(mp.field("reservation_id"), &m.reservation_id)?,
                flow_id: controller_id(mp.field("flow_id"), &m.flow_id)?,
                expected_start_unix_ns: positive(
                    mp.field("expected_start_unix_ns"),
                    m.expected_start_unix_ns,
                )?,
                observed_start_unix_ns: nonzero(m.observed_start_unix_ns),
                expected_bps: m.expected_bps,
                observed_bps: m.observed_bps,
            })
        }
        Some(Kind::PredictionWithdrawn(w)) => {
            let wp = p.field("prediction_withdrawn");
            let job_id = client_id(wp.field("job_id"), &w.job_id)?;
            let reason = text(wp.field("reason"), &w.reason, 1024)?
                .ok_or_else(|| wp.field("reason").error("is required"))?;
            NetworkChange::PredictionWithdrawn { job_id, reason }
        }
    };
    Ok(NetworkDeviation {
        observed_unix_ns,
        affected_reservation_ids,
        change,
    })
}
