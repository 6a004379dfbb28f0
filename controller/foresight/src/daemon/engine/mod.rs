//! The controller's decisions, without I/O: NDSP requests (validated by
//! `ndsp::validate`, handed over with their idempotency keys) become
//! planner demands, the planner reserves them, and the outcome becomes
//! reservation records in the state. Cancels, deviations (re-planning)
//! and expiry change records; the desired switch state is derived from
//! the records elsewhere.
//!
//! The engine takes and returns domain types only: no protobuf message
//! and no gRPC status. A refusal is a [`Refusal`] (a field that is wrong
//! given the controller's state, an id live with other contents, nothing
//! by that id), which the NDSP service maps to its status code. A refused
//! request changes nothing. What a request did comes back in one
//! [`Planned`] value: its records, the reservations moved for it, the
//! predictions it took over.
//!
//! One file per request kind that creates reservations: `demands`,
//! `collectives`, `jobs` (registrations); `patterns` installs a job's
//! repeated collective once and admits its later steps on the same paths;
//! `outcome` opens records and turns a plan into them; `records` is the
//! engine itself, records and ledger kept in step; `refusal` says why a
//! request is refused; `steering` how a reserved flow is held on its path
//! (SR labels or its UDP source port). What changes a live reservation
//! afterwards is in `lifecycle/`: `changes` (cancel, deviation, expiry),
//! `links` (link state), `follow` (extended or released as its traffic
//! runs on or stops).

mod collectives;
mod demands;
mod jobs;
mod lifecycle;
mod outcome;
mod patterns;
mod records;
mod refusal;
mod steering;
#[cfg(test)]
pub(crate) mod testing;

pub use lifecycle::follow::{Extended, NoExtension, Released};
pub use lifecycle::links::LinkChange;
pub use outcome::{PlanTiming, Planned};
pub use records::{to_ndsp, Engine, Reoptimization, Restored};
pub use refusal::Refusal;
pub use steering::EntropySteering;
