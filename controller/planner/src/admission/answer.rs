//! What a planning call answers: per demand an [`Outcome`] and, when it
//! is not admitted as asked, the [`Reason`]; the flows' paths ([`Plan`]);
//! and the earlier reservations that moved for it ([`Moved`]). The phases
//! that produce them (plan.rs, admit.rs, moving.rs, settle.rs) all build
//! on this file.

use serde::Serialize;

use crate::assign::Method;
use crate::paths::Path;

/// Why a demand was not admitted as asked.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// A link has too little free capacity in the window.
    Bottleneck {
        /// The link.
        link: String,
        /// Window start, ns.
        start_ns: u64,
        /// Window end, ns.
        end_ns: u64,
        /// Free under the headroom, Gbit/s.
        free_gbps: f64,
        /// What the demand needs on it, Gbit/s.
        needed_gbps: f64,
    },
    /// A flow's rate exceeds what its NIC may carry at all.
    ExceedsNic {
        /// The NIC link.
        link: String,
        /// Flow rate, Gbit/s.
        rate_gbps: f64,
        /// Capacity × headroom, Gbit/s.
        limit_gbps: f64,
    },
    /// Even at the requested start it would finish after its deadline.
    DeadlineBeforeCompletion {
        /// Deadline, ns.
        deadline_ns: u64,
        /// Completion at the requested start, ns.
        completion_ns: u64,
    },
    /// Elastic, but no start time tried fits before the deadline.
    NoStartBeforeDeadline {
        /// Deadline, ns (none = unbounded).
        deadline_ns: Option<u64>,
        /// Start times tried.
        tried: usize,
        /// What blocked it at the requested start.
        blocked_by: Box<Reason>,
    },
    /// Partial reservations are disabled and it does not fit.
    DoesNotFit {
        /// What blocked it.
        blocked_by: Box<Reason>,
    },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Bottleneck { link, start_ns, end_ns, free_gbps, needed_gbps } => write!(
                f,
                "link {link} has {free_gbps:.3} Gbit/s free under the headroom in [{start_ns}, {end_ns}) ns but {needed_gbps:.3} Gbit/s are needed"
            ),
            Reason::ExceedsNic { link, rate_gbps, limit_gbps } => write!(
                f,
                "flow rate {rate_gbps:.3} Gbit/s exceeds the {limit_gbps:.3} Gbit/s NIC link {link} may carry under the headroom"
            ),
            Reason::DeadlineBeforeCompletion { deadline_ns, completion_ns } => write!(
                f,
                "would complete at {completion_ns} ns, after its deadline {deadline_ns} ns"
            ),
            Reason::NoStartBeforeDeadline { deadline_ns, tried, blocked_by } => match deadline_ns {
                Some(d) => write!(f, "no start time before the deadline {d} ns fits ({tried} tried); at the requested start: {blocked_by}"),
                None => write!(f, "no start time fits ({tried} tried); at the requested start: {blocked_by}"),
            },
            Reason::DoesNotFit { blocked_by } => write!(f, "does not fit and partial reservations are off: {blocked_by}"),
        }
    }
}

/// What happened to a demand.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Reserved in full at the requested start.
    Admitted,
    /// Reserved in full, starting later.
    Deferred {
        /// Asked-for start, ns.
        requested_start_ns: u64,
        /// Granted start, ns.
        start_ns: u64,
    },
    /// Some flows (or some rate) reserved; the rest on ECMP.
    Partial {
        /// Flows with any reservation.
        reserved_flows: usize,
        /// Flows in the demand.
        flows: usize,
        /// Reserved rate / requested rate, summed over flows.
        reserved_fraction: f64,
        /// Why not in full.
        reason: Reason,
    },
    /// Nothing reserved; ECMP fallback.
    Rejected {
        /// Why.
        reason: Reason,
    },
}

/// One flow's plan.
#[derive(Clone, Copy, Debug)]
pub struct FlowPlan {
    /// Path (reserved, or the ECMP path for a fallback flow).
    pub path: Path,
    /// Reserved rate, bit/s (0 = ECMP fallback).
    pub reserved_bps: u64,
    /// Start after any deferral, ns.
    pub start_ns: u64,
    /// Predicted completion, ns (`None`: unbounded — its ECMP path is fully reserved).
    pub completion_ns: Option<u64>,
}

/// One demand's plan.
#[derive(Clone, Debug)]
pub struct DemandPlan {
    /// Index into the demands given to [`Planner::plan`].
    pub demand: usize,
    /// What happened.
    pub outcome: Outcome,
    /// How much later than asked it starts, ns.
    pub shift_ns: u64,
    /// Per flow, in the demand's flow order.
    pub flows: Vec<FlowPlan>,
    /// Predicted completion of the whole demand (`None`: unbounded).
    pub completion_ns: Option<u64>,
    /// How paths were chosen (the method of its largest batch).
    pub method: Option<Method>,
}

/// The result of planning a set of demands.
#[derive(Clone, Debug)]
pub struct Plan {
    /// One per demand, in input order.
    pub demands: Vec<DemandPlan>,
    /// Demand indices in the order they were planned.
    pub order: Vec<usize>,
    /// Earlier reservations that were allowed to move and did.
    pub moved: Vec<Moved>,
    /// What the joint placement did for the set.
    pub joint: JointSummary,
}

/// What joint placement did in one planning call.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JointSummary {
    /// Demands admitted only because already placed flows moved for them.
    pub admitted_by_moving: Vec<String>,
    /// Peak utilisation of the admitted set before and after the final
    /// re-placement (`None`: it did not run).
    pub peak_before: Option<f64>,
    /// See `peak_before`.
    pub peak_after: Option<f64>,
    /// Joint searches run and move evaluations spent.
    pub searches: u32,
    /// See `searches`.
    pub evaluations: u64,
    /// The wall-clock cap stopped a search early.
    pub cut_short: bool,
}

/// One flow of an earlier reservation that moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MovedFlow {
    /// The flow's index: in its demand's flows, or in the list given to
    /// [`Planner::restore`].
    pub index: usize,
    /// Its path before.
    pub from: Path,
    /// Its path now.
    pub to: Path,
}

/// Why an earlier reservation moved.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MoveCause {
    /// To make room for a demand that did not fit otherwise.
    Admit {
        /// The demand's id.
        demand: String,
    },
    /// To lower the peak utilisation of the reservations that may move.
    LowerPeak {
        /// Peak before.
        from: f64,
        /// Peak after.
        to: f64,
    },
}

impl std::fmt::Display for MoveCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MoveCause::Admit { demand } => write!(f, "moved to admit {demand}"),
            MoveCause::LowerPeak { from, to } => {
                write!(
                    f,
                    "moved to lower the peak utilisation from {from:.4} to {to:.4}"
                )
            }
        }
    }
}

/// An earlier reservation whose paths changed.
#[derive(Clone, Debug, PartialEq)]
pub struct Moved {
    /// Its id.
    pub id: String,
    /// The flows that changed path.
    pub flows: Vec<MovedFlow>,
    /// Why, in order.
    pub causes: Vec<MoveCause>,
}

/// What [`Planner::reoptimize`] did.
#[derive(Clone, Debug, Default)]
pub struct Reoptimized {
    /// Reservations that moved.
    pub moved: Vec<Moved>,
    /// Peak utilisation of the movable reservations' links before and after
    /// (`None`: nothing to re-place).
    pub peak_before: Option<f64>,
    /// See `peak_before`.
    pub peak_after: Option<f64>,
    /// Move evaluations spent.
    pub evaluations: u64,
    /// The wall-clock cap stopped the search early.
    pub cut_short: bool,
}
