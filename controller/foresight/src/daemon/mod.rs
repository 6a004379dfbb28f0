//! The controller daemon (`foresight controller`). This file is only its
//! map: the folders, and the names the rest of the crate uses.
//!
//! Each folder calls only folders listed below it (its `mod.rs` says
//! which), so no two call each other:
//! * [`running`] — what the command line becomes ([`running::config`]),
//!   start-up and shutdown step by step ([`running::startup`]);
//! * [`northbound`] — what clients and operators reach: the NDSP gRPC
//!   service ([`northbound::service`], [`northbound::leader_gate`] in front
//!   of it), the admin endpoint ([`northbound::http`]), the read-only views
//!   it answers with ([`northbound::views`], [`northbound::live_view`]),
//!   and who may call what ([`northbound::identity`],
//!   [`northbound::admin_token`]);
//! * [`feedback`] — loops acting on what the traffic shows:
//!   [`feedback::watch_counters`] polled, reservations that
//!   [`feedback::follow`] their traffic, [`feedback::predictions`]
//!   reserved, [`feedback::forecast_mismatches`] told;
//! * [`control`] — the controller and `transact`, the one way a change
//!   reaches the switches (lock, mutate, commit, reschedule, acknowledge,
//!   publish: [`control::controller`]), what `WatchEvents` streams relay
//!   ([`control::events`]), what one tenant may ask ([`control::limits`]),
//!   installs and expiries at their moments ([`control::scheduler`]), the
//!   operator's link down/up ([`control::link_state`]);
//! * [`engine`] — NDSP requests → planner → reservation records (no I/O);
//! * [`inputs`] — what it decides from besides the state: the clock
//!   ([`inputs::clock`]), requests as the engine takes them
//!   ([`inputs::requests`]), INT reports and link loads
//!   ([`inputs::telemetry`]), learned iterations ([`inputs::learning`]);
//! * [`southbound`] — what every switch should hold at a given moment
//!   ([`southbound::desired`]) and one task per switch
//!   ([`southbound::switches`]);
//! * [`persistence`] — the records ([`persistence::state_records`]), the
//!   state that holds them ([`persistence::state`],
//!   [`persistence::history`], [`persistence::live_reservations`]), the
//!   state as keyed records ([`persistence::state_keys`]), and where it
//!   survives ([`persistence::store`]: the state file's
//!   [`persistence::journal`], or etcd for replicas, [`persistence::ha`]);
//! * [`monitoring`] — the admin views' JSON ([`monitoring::api`]), what
//!   each switch task publishes ([`monitoring::switch_status`]), and the
//!   Prometheus [`monitoring::metrics`].
//!
//! `inputs` and `southbound` do not call each other.

pub mod control;
pub mod engine;
pub mod feedback;
pub mod inputs;
pub mod monitoring;
pub mod northbound;
pub mod persistence;
pub mod running;
pub mod southbound;

pub use inputs::clock::now_unix_ns;
pub use running::config::{Config, EntropyConfig, ReoptimizeMode, SteeringMode, Switches};
