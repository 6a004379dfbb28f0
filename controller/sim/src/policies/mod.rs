//! Simulating a workload under every load-balancing policy and comparing
//! it with the ideal (the crate's root re-exports what callers use):
//!
//! * `policy` — the policies (`Policy`) and their names;
//! * `flows` — one policy's flows and how each is routed;
//! * `router` — the engine's router under a policy (hashing, spraying,
//!   flowlets, planned paths) and what reordering costs;
//! * `moe_paths` — Foresight's MoE paths from the controller's MoE planner,
//!   pinned or re-planned per step;
//! * `steering` — entropy steering's source ports (`SteeringStats`);
//! * `failures` — links to fail (`FailSpec`);
//! * `results` — what a run gives (`PolicyResult`, `JobResult`,
//!   `UtilStats`);
//! * `run` — one policy's run (`run_policy`), all of them side by side
//!   (`run_all`), progress bars and the peak memory figure.

pub(crate) mod failures;
pub(crate) mod flows;
pub(crate) mod moe_paths;
pub(crate) mod policy;
pub(crate) mod results;
pub(crate) mod router;
pub(crate) mod run;
pub(crate) mod steering;
