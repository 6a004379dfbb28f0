//! Admission control and the planner entry point.
//!
//! # The admission objective
//!
//! Everything handed to one [`Planner::plan`] call (a demand file, a
//! `reserve batch`, an NDSP batch, the flows of one collective) is planned
//! as one set, against what is already reserved:
//!
//! 1. **Primary — admitted demand by priority.** Demands are taken in
//!    priority classes, highest first; a demand of a class is never given up
//!    for any number of demands of a lower class. Within a class, larger
//!    demands (bytes) are tried first, which admits more bytes when not
//!    everything fits.
//! 2. **Secondary — lowest peak utilisation.** Among assignments that admit
//!    the same demands, the one with the lowest highest link utilisation
//!    (reserved / capacity, over every link and moment) is kept; then the
//!    fewest links at that peak; then the lowest sum of squared
//!    utilisations (load spread below the peak).
//! 3. **Tie-breaks** (the order demands are tried in): priority, higher
//!    first; then bytes, larger first; then earlier start; then id. Input
//!    order does not matter.
//!
//! A demand is **admitted** when it fits in full at its requested start:
//! first on top of what the set placed so far (its batches — flows sharing
//! a window and a rate — placed by [`crate::assign`]); if that fails, by a
//! joint re-placement ([`crate::joint`]) of its flows together with every
//! flow admitted so far in the call and the earlier reservations the caller
//! lets move ([`Planner::plan_moving`]). After admission the admitted set
//! is re-placed jointly once more to lower its peak. No link is ever
//! committed beyond `headroom × capacity`.
//!
//! Demands that do not fit in full are then settled in the same order,
//! from what the admitted ones leave (so a partial reservation never costs
//! another demand its full admission):
//! 1. if elastic, the earliest start (up to its deadline) at which it fits →
//!    **deferred**; candidates are the moments reservations end;
//! 2. else, if partial reservations are allowed, each flow gets what is free
//!    on its best path (at least `min_partial_fraction` of its rate) →
//!    **partial**, the rest falls back to ECMP;
//! 3. else → **rejected** (ECMP fallback).
//!
//! Either way the [`Reason`] names the constraint that bound it: the link
//! and the time window where the best assignment found is over the
//! headroom, the NIC its rate exceeds, or the deadline.
//!
//! Sets of more than `joint_max_flows` flows (a 32k-GPU ring) are placed
//! batch by batch only: there the batch methods already reach the lower
//! bound, and a joint search would cost more than it could gain.
//!
//! # Files
//!
//! * `planner.rs` — the [`Planner`]: its settings, its ledger and what each
//!   demand holds in it;
//! * `answer.rs` — what a call returns: the [`Plan`], each demand's
//!   [`Outcome`] and [`Reason`], what [`Moved`];
//! * `call.rs` — the working state of one call, shared by its phases;
//! * `plan.rs` — one planning call in its phases;
//! * `admit.rs` — admission in full, and exchanges within a priority class;
//! * `moving.rs` — moving reservations jointly to admit a demand or lower the
//!   peak;
//! * `settle.rs` — deferral, partial reservations, rejection and the ECMP
//!   fallback of what is left.

mod admit;
mod answer;
mod call;
#[cfg(test)]
mod fixtures;
mod moving;
mod plan;
mod planner;
mod settle;

pub use answer::{
    DemandPlan, FlowPlan, JointSummary, MoveCause, Moved, MovedFlow, Outcome, Plan, Reason,
    Reoptimized,
};
pub use planner::{Planner, PlannerConfig};
