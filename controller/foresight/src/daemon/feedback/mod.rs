//! Loops that act on what the traffic shows, each changing the state
//! through `transact`: the watch entries' counters, polled where INT is
//! not used (`watch_counters`), reservations that follow their traffic
//! (`follow`: extended while it runs, released when it stops), reserving
//! what learning predicts (`predictions`), and telling watchers of traffic
//! that differs from its forecast (`forecast_mismatches`). What they read
//! is in `inputs` (`telemetry`, `learning`).
//!
//! Calls `control`, `engine`, `inputs` and `persistence`; only the
//! start-up and the configuration (`running`) call it.

pub mod follow;
pub mod forecast_mismatches;
pub mod predictions;
pub mod watch_counters;
