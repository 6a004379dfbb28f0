//! What the controller shows of itself: the admin views' JSON (`api`:
//! `GET /v1/status`, `GET /v1/entries/<switch>`, the link command's answer,
//! shared with the CLI that prints them), what each switch task publishes
//! about its switch (`switch_status`), and the Prometheus metrics
//! (`metrics`, whose gauges are built from a status view at scrape time).
//!
//! Calls no other folder of the daemon: every other folder may call it
//! (the store and the switch tasks count into the metrics, the HA fence
//! watches the switches' status).

pub mod api;
pub mod metrics;
pub mod switch_status;
