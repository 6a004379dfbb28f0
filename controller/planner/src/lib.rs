//! Foresight's fabric model and reservation planner.
//!
//! * [`topology`] — fabrics as a petgraph graph: generators (leaf-spine,
//!   multi-pod with super-spines, rail-optimized), YAML load/save,
//!   validation that names the bad element.
//! * [`flow`] — flows with RoCE QPs (below demands and collectives).
//! * [`demand`] — demand signals and demand files.
//! * [`collectives`] — ring/tree all-reduce, all-gather, reduce-scatter,
//!   all-to-all, pipeline sends, prefill→decode KV transfer → flows.
//! * [`ledger`] — reserved bandwidth per link over time.
//! * [`assign`] (with [`colouring`] and [`clos`]) — path choice minimising
//!   the peak link load; König-optimal on a Clos.
//! * [`joint`] — one path assignment for a whole set of flows with their
//!   own windows (local search), used for joint planning and re-optimization.
//! * [`admission`] — priority order, deferral, partial reservations, ECMP
//!   fallback; [`Planner`] is the entry point.
//! * [`moe`] — mixture-of-experts EP all-to-all as one pattern: groups,
//!   uneven bytes per step, structured routing to the fabric's bound, and
//!   per-step evaluation on pinned paths.
//! * [`periodic`] — learning a job's iteration period to reserve its next
//!   iterations unannounced (T+5).
//! * [`shares`] — per-tenant shares of every link (one planner per share group).
//! * [`paths`] — paths and SR-MPLS adjacency label stacks.
//! * [`ecmp`] — the switch hash (shared with the data plane) and the ECMP baseline.
//! * [`hash_profile`] — how other switches hash, as described in a file.
//! * [`entropy`] — the UDP source port that steers a flow onto its path.
//! * [`bounds`] — lower bounds on the peak load.
//! * [`report`] — per-demand / per-link report, text and JSON.
//! * [`conventions`] — numbers shared with the data plane and the lab.
//!
//! No I/O beyond reading and writing YAML files.

pub mod admission;
pub mod assign;
pub mod bounds;
pub mod clos;
pub mod collectives;
pub mod colouring;
pub mod conventions;
pub mod demand;
pub mod ecmp;
pub mod entropy;
pub mod flow;
pub mod hash_profile;
pub mod joint;
pub mod ledger;
pub mod moe;
pub mod paths;
pub mod periodic;
pub mod report;
pub mod rng;
pub mod shares;
pub mod topology;

pub use admission::{Outcome, Plan, Planner, PlannerConfig, Reason};
pub use collectives::{Collective, CollectiveKind};
pub use demand::{Demand, DemandSignal};
pub use flow::Flow;
pub use ledger::{Ledger, Window};
pub use paths::{Hop, Path};
pub use report::{PlanReport, ReportOptions};
pub use topology::{Topology, TopologyError, TopologySpec};

/// Plans `demands` on an empty ledger of `topo` and returns the plan with
/// the planner (whose ledger holds the reservations).
pub fn plan<'t>(
    topo: &'t Topology,
    demands: &[Demand],
    config: PlannerConfig,
) -> (Plan, Planner<'t>) {
    let mut p = Planner::new(topo, config);
    let plan = p.plan(demands);
    (plan, p)
}
