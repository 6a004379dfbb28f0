//! Checks of single fields — scalars, enums and the small messages that
//! requests and responses share (header, version, endpoints, times, pacing,
//! recurrence) — each naming the field it rejects.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::limits::*;
use crate::proto;
use crate::types::*;
use crate::PROTOCOL_VERSION;

use super::path::{show, Path};
use super::Result;

pub(super) fn required<'m, T>(p: Path<'_>, value: &'m Option<T>) -> Result<&'m T> {
    value.as_ref().ok_or_else(|| p.error("is required"))
}

pub(super) fn positive(p: Path<'_>, value: u64) -> Result<u64> {
    if value == 0 {
        p.err("must be greater than 0")
    } else {
        Ok(value)
    }
}

pub(super) fn nonzero(value: u64) -> Option<u64> {
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
pub(super) fn client_id(p: Path<'_>, s: &str) -> Result<String> {
    id_syntax(p, s, MAX_ID_LEN, false)
}

pub(super) fn optional_client_id(p: Path<'_>, s: &str) -> Result<Option<String>> {
    if s.is_empty() {
        Ok(None)
    } else {
        client_id(p, s).map(Some)
    }
}

/// A controller-assigned identifier (reservation, flow); may contain `/`.
pub(super) fn controller_id(p: Path<'_>, s: &str) -> Result<String> {
    id_syntax(p, s, MAX_CONTROLLER_ID_LEN, true)
}

/// Optional free-form text: bounded length, no control characters.
pub(super) fn text(p: Path<'_>, s: &str, max: usize) -> Result<Option<String>> {
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
pub(super) fn name(p: Path<'_>, s: &str, max: usize) -> Result<Option<String>> {
    let Some(s) = text(p, s, max)? else {
        return Ok(None);
    };
    if let Some(c) = s.chars().find(|&c| c.is_whitespace() || c == '/') {
        return p.err(format!("{} contains {c:?}", show(&s)));
    }
    Ok(Some(s))
}

pub(super) fn required_name(p: Path<'_>, s: &str, max: usize) -> Result<String> {
    name(p, s, max)?.ok_or_else(|| p.error("is required"))
}

/// An IPv4 unicast host address in dotted-quad form.
pub(super) fn ipv4_unicast(p: Path<'_>, s: &str) -> Result<Ipv4Addr> {
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
pub(super) fn queue_pair(p: Path<'_>, qp: u32) -> Result<u32> {
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

pub(super) fn rank_number(p: Path<'_>, rank: u32) -> Result<u32> {
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

pub(super) trait FromWire: Sized {
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

pub(super) fn protocol_version(p: Path<'_>, v: &Option<proto::ProtocolVersion>) -> Result<Version> {
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

pub(super) fn header(p: Path<'_>, h: &Option<proto::RequestHeader>) -> Result<RequestContext> {
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

pub(super) fn endpoint(p: Path<'_>, e: &Option<proto::Endpoint>) -> Result<Endpoint> {
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
pub(super) fn start_point(msg: Path<'_>, start: Option<TimePoint>) -> Result<TimePoint> {
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
pub(super) fn deadline_point(
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

pub(super) fn duration_ns(p: Path<'_>, d: u64) -> Result<u64> {
    positive(p, d)?;
    if d > MAX_HORIZON_NS {
        return p.err(format!(
            "{d} ns is longer than the protocol's 24 h limit ({MAX_HORIZON_NS} ns)"
        ));
    }
    Ok(d)
}

pub(super) fn rate_bps(p: Path<'_>, r: u64) -> Result<u64> {
    positive(p, r)?;
    if r > MAX_RATE_BPS {
        return p.err(format!(
            "{r} bit/s is above the protocol's limit of {MAX_RATE_BPS} bit/s (10 Tbit/s)"
        ));
    }
    Ok(r)
}

/// Demand pacing, checked for consistency with the size.
pub(super) fn pacing(msg: Path<'_>, size_bytes: u64, pacing: Option<Pacing>) -> Result<Pacing> {
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

pub(super) fn recurrence(
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
pub(super) fn check_unique<K: std::hash::Hash + Eq + std::fmt::Display>(
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
pub(super) struct Quoted<'a>(pub(super) &'a str);

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
