//! `rocegen run`: one host's sender + receiver as a single-threaded event
//! loop (no locks; sleeps in ppoll until the next deadline or packet).
//!
//! Flows sharing a QP pair are messages of one RC connection: one PSN space
//! starting at 0, sent in spec order, one DCQCN rate limiter.
//!
//! * `opts` — what a run is told (`RunOpts`, the kind of `Nic`) and what it
//!   achieved (`Outcome`);
//! * `host` — the host and its event loop (`run`): drain the socket and
//!   dispatch each packet, run the timers, pace the sends, sleep until the
//!   next thing to do;
//! * `sender` — the send connections: release, pacing, data packets,
//!   retransmission timeouts and tail-loss probes, ACKs, NAKs and CNPs
//!   received;
//! * `receiver` — the receive connections: data placed (go-back-N or
//!   out of order), ACKs, NAKs and CNPs sent;
//! * `report` — the rate samples, progress lines, the per-flow CSV and the
//!   summary.

mod host;
mod opts;
mod receiver;
mod report;
mod sender;

pub use host::run;
pub use opts::{Nic, Outcome, RunOpts};
