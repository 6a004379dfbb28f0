//! What clients and operators reach: the NDSP gRPC service (`service`)
//! behind `leader_gate` (a follower answers where the leader is), the
//! admin endpoint (`http`, with who reads what in `http/access.rs` and the
//! operator's page in `http/ui.rs`), the read-only views they answer with
//! (`views`: status, a switch's entries, paths; `live_view`: the fabric and
//! the timeline the page draws), and who asks (`identity`: mutual TLS;
//! `admin_token`: the operator's bearer token).
//!
//! Calls `control`, `engine`, `southbound`, `inputs`, `persistence` and
//! `monitoring`, never the feedback loops; only the start-up and the
//! configuration (`running`) call it.

pub mod admin_token;
pub mod http;
pub mod identity;
pub mod leader_gate;
pub mod live_view;
pub mod service;
pub mod views;
