//! High availability: controller replicas elect one leader through etcd,
//! and only the leader plans and writes to the switches.
//!
//! - Election: each replica holds an etcd lease (kept alive in the
//!   background) and campaigns on `<prefix>/leader` with its addresses as
//!   the value. The winner's leader key has an etcd create revision that
//!   grows with every new leader; it is the leader's P4Runtime election id,
//!   so a new leader is primary on every switch and an old one that wakes
//!   up (SIGSTOP → SIGCONT) is refused by them.
//! - State: the controller's intended state (`State`) lives under
//!   `<prefix>/state/`, a key per job and per reservation (see
//!   `state_keys`),
//!   and each commit is one transaction of the keys that changed, which
//!   only succeeds while this replica's leader key still exists with its
//!   revision. A new leader starts from exactly what the old one
//!   committed, and an old leader cannot commit anything.
//! - Stepping down: a replica that loses its lease, sees a switch primary
//!   with a higher election id, or cannot commit, exits (status 75) without
//!   answering or installing anything more; a supervisor (systemd
//!   `Restart=always`) starts it again as a follower.
//! - Fast takeover: a crashed leader's lease would hold the leadership for
//!   up to a TTL (whole seconds in etcd). Campaigning replicas probe the
//!   leader's NDSP port and revoke its lease once connections are refused,
//!   i.e. no process listens there any more. A paused or unreachable
//!   leader still waits for its TTL. A wrong revoke is harmless: that
//!   leader steps down and its commits are fenced.
//!
//! The parts follow etcd's own concurrency client: `session` (the lease),
//! `election` (campaign, leader, takeover), `fence` (the fenced
//! commits and the step-down); the state as keys is the daemon's
//! `state_keys`, which the state file's journal shares.

mod election;
mod fence;
mod session;

pub use election::LeaderInfo;
pub use fence::{step_down, watch_fences, Leadership};
pub use session::{join, HaConfig, Replica};
