//! Running the daemon: what `foresight controller`'s command line becomes
//! (`config`: the fabric, the switches, the listeners, HA, planning,
//! telemetry, learning and limits, in one value), and start-up and
//! shutdown step by step (`startup`).
//!
//! Calls every other folder; none calls it.

pub mod config;
pub mod startup;
