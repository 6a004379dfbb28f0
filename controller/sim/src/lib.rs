//! Foresight's flow-level simulator: max-min fair (fluid) rates for the
//! flows of AI collectives on a fabric, under eight load-balancing policies.
//!
//! * [`maxmin`] — progressive filling over the links each flow uses.
//! * [`engine`] — event-driven simulation (rates recomputed at every
//!   start, finish and link failure); iterations chain (iteration n+1
//!   starts when the slowest flow of iteration n finishes).
//! * [`routing`] — the switch ECMP walk (the planner's hash with each
//!   switch's seed, group order and `hash % |group|`), fluid spraying,
//!   per-hop least-loaded.
//! * [`qps`] — the K QPs of a connection under `qp-hash-K`.
//! * [`workload`] — the planner's collectives (ring all-reduce,
//!   all-to-all, KV transfer) plus background flows.
//! * [`ecmp_collisions`] — Monte-Carlo ECMP collisions vs `S!/((S−N)!·S^N)`.
//! * [`output`] — table, CSV and SVG plots.
//! * [`learned`] — a job that announces nothing, its periodic schedule
//!   learned and reserved ahead by the controller (T+5).
//! * [`lab`] — one BMv2 lab run (its topology, rocegen spec and
//!   reservations) as a scenario, to check the simulator against the lab.
//! * [`reorder`] — what reordering costs sprayed and flowlet traffic on
//!   go-back-N and out-of-order-tolerant NICs.
//!
//! Policies ([`Policy`]): ECMP on the 5-tuple; QP-aware hashing with `k`
//! QPs per connection (each connection split into `k` equal sub-flows on
//! consecutive QPs, see [`qps`], each hashed on its own QP and source
//! port); adaptive (per hop, the next hop with the fewest active flows at
//! flow start, ties broken by the switch hash); spraying (fluid, split
//! equally over next hops) and flowlets (a random member per hop, drawn
//! afresh for every flow), each on go-back-N or out-of-order-tolerant NICs
//! ([`reorder`]); Foresight (the planner's paths; a flow whose
//! path fails is re-placed least-loaded, as a re-plan would). Unannounced
//! background traffic uses ECMP under Foresight. Every hashing switch uses
//! its seed under a [`SeedPolicy`] (per-switch by default, or one seed
//! everywhere: the polarised fabric).
//! The ideal is the same traffic on one non-blocking switch (only the NIC
//! links constrain).
//!
//! The policies' comparison lives in `policies` (the policies, each
//! policy's flows and routing, entropy steering, failures, results, and
//! the runs); its API is re-exported here.

pub mod ecmp_collisions;
pub mod engine;
pub mod fabrics;
pub mod lab;
pub mod learned;
pub mod maxmin;
pub mod output;
pub mod parts;
mod policies;
pub mod qps;
pub mod radix;
#[cfg(test)]
mod reference;
pub mod reorder;
pub mod routing;
pub mod suite;
pub mod workload;

pub use policies::failures::{link_edges, random_links, FailSpec};
pub use policies::policy::Policy;
pub use policies::results::{JobResult, PolicyResult, UtilStats};
pub use policies::run::{peak_rss_kib, progress_bar, run_all, run_policy};
pub use policies::steering::SteeringStats;
