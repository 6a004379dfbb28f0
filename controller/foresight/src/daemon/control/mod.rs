//! The controller and what changes its state: `controller` (the engine
//! and the switch compiler behind one lock, the switch tasks, and
//! `transact`, the one way a change reaches the switches: lock, mutate,
//! commit, reschedule, acknowledge, publish), what it publishes (`events`,
//! relayed by `WatchEvents` streams), what one tenant may ask (`limits`),
//! the install and expiry `scheduler`, and the operator's link down/up
//! (`link_state`).
//!
//! Calls `engine`, `southbound`, `inputs`, `persistence` and
//! `monitoring`; the feedback loops, the northbound and the start-up call
//! it.

pub mod controller;
pub mod events;
pub mod limits;
pub mod link_state;
pub mod scheduler;
