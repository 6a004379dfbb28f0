//! The switches: what every switch should hold at a given moment, derived
//! from the reservation records (`desired`, the compiler of the intended
//! state), and one task per switch that holds its P4Runtime session and
//! brings the switch to that state (`switches`: connect, become primary,
//! pipeline, reconcile, writes). What a switch task publishes about its
//! switch is `monitoring::switch_status`.
//!
//! Calls `persistence` (the records it compiles) and `monitoring`.

pub mod desired;
pub mod switches;
