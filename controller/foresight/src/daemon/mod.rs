//! The controller daemon (`foresight controller`). This file is only its
//! map: the modules, and the names the rest of the crate uses.
//!
//! Running it:
//! * [`config`] — what the command line becomes;
//! * [`startup`] — start-up and shutdown, step by step;
//! * [`control::controller`] — the controller and `transact`, the one way a change
//!   reaches the switches (lock, mutate, commit, reschedule, acknowledge,
//!   publish);
//! * [`inputs::clock`] — Unix time in ns;
//! * [`control::events`] — what `WatchEvents` streams relay.
//!
//! Deciding:
//! * [`engine`] — NDSP requests → planner → reservation records (no I/O);
//! * [`inputs::requests`] — what the engine is handed beside a validated request
//!   (idempotency keys, recorded registrations, predicted batches);
//! * [`persistence::state_records`] — the records it is made of: jobs, links down,
//!   reservations with their flows and outcome;
//! * [`persistence::state`] — the intended state that holds them, and its file;
//! * [`persistence::history`] — the finished reservations it remembers (bounded);
//! * [`persistence::live_reservations`] — the live reservations, indexed (by id,
//!   subject, time) and with what changed since the last commit;
//! * [`persistence::state_keys`] — the state as keyed records, and what a commit of it
//!   writes and deletes;
//! * [`persistence::store`], [`persistence::journal`], [`persistence::ha`] — where it survives: a state file (a
//!   snapshot and a journal of commits), or etcd for replicas that elect
//!   a leader;
//! * [`control::limits`] — what one tenant may ask (reservations, requests/s).
//!
//! Loops and commands that change the state through `transact`:
//! * [`northbound::service`] — the NDSP gRPC service ([`northbound::leader_gate`] in front of it);
//! * [`control::scheduler`] — installs and expiries at their moments;
//! * [`feedback::predictions`] — reserving what learning predicts ([`inputs::learning`],
//!   fed by [`inputs::telemetry`] or [`feedback::watch_counters`]);
//! * [`feedback::follow`] — reservations that follow their traffic: extended while
//!   it runs, released when it stops;
//! * [`control::link_state`] — the operator's link down/up.
//!
//! The switches:
//! * [`southbound::desired`] — what every switch should hold at a given moment;
//! * [`southbound::switches`] — one task per switch: session, pipeline, reconcile, writes;
//! * [`monitoring::switch_status`] — what each switch task publishes about its switch.
//!
//! Watching and reading:
//! * [`inputs::telemetry`] — INT report collector and link loads;
//! * [`feedback::forecast_mismatches`] — traffic that differs from its forecast;
//! * [`northbound::views`] — read-only views (status, a switch's entries, paths);
//! * [`northbound::live_view`] — what the operator's web page reads (the fabric's
//!   layout, reservations over time with their links, jobs);
//! * [`monitoring::metrics`], [`northbound::http`], [`monitoring::api`], [`northbound::admin_token`], [`northbound::identity`] —
//!   Prometheus, the admin endpoint, and who may call what.

pub mod config;
pub mod control;
pub mod engine;
pub mod feedback;
pub mod inputs;
pub mod monitoring;
pub mod northbound;
pub mod persistence;
pub mod southbound;
pub mod startup;

pub use config::{Config, EntropyConfig, ReoptimizeMode, SteeringMode, Switches};
pub use inputs::clock::now_unix_ns;
