//! The controller's intended state and where it survives a restart: the
//! records it is made of (`state_records`: jobs, links down, reservations
//! with their flows and outcome), the state that holds them (`state`, and
//! its snapshot), the finished reservations it remembers (`history`), the
//! live ones indexed by id, subject and time (`live_reservations`), the
//! state as keyed records and what a commit writes and deletes
//! (`state_keys`), and the stores: the state file's snapshot and journal
//! (`journal`), etcd for replicas that elect a leader (`ha`), and the one
//! a commit goes to (`store`).
//!
//! Calls `monitoring` only (the store counts failed writes, the HA fence
//! watches the switches' status): nothing here calls the controller, the
//! switch tasks, the northbound or the feedback loops.

pub mod ha;
pub mod history;
pub mod journal;
pub mod live_reservations;
pub mod state;
pub mod state_keys;
pub mod state_records;
pub mod store;
