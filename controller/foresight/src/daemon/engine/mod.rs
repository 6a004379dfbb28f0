//! The controller's decisions, without I/O: NDSP requests (already
//! validated by `ndsp::validate`) become planner demands, the planner
//! reserves them, and the outcome becomes reservation records in the
//! state. Cancels, deviations (re-planning) and expiry change records;
//! the desired switch state is derived from the records elsewhere.
//!
//! Errors are gRPC statuses: `INVALID_ARGUMENT` naming the field (checks
//! that need controller state: registered jobs, whole servers), and
//! `ALREADY_EXISTS` / `NOT_FOUND` as NDSP defines them. A rejected request
//! changes nothing.
//!
//! One file per request kind: [`demands`], [`collectives`], [`changes`]
//! (cancel, deviation, expiry), [`links`] (link state); [`jobs`] for
//! registrations; [`outcome`] turns a plan into records; [`records`] is
//! the engine itself, records and ledger kept in step.

mod changes;
mod collectives;
mod demands;
mod jobs;
mod links;
mod outcome;
mod records;
#[cfg(test)]
mod testing;

pub use outcome::{PlanTiming, Superseded};
pub use records::{to_ndsp, Engine, Reoptimization, Restored};
