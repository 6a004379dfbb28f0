//! What every switch of a fabric should hold, and how to get it there.
//!
//! * [`names`] — the P4Runtime names of the Foresight program (one place);
//! * [`addressing`] — switch port MACs and leaf subnets;
//! * [`object`] — one thing a switch should hold, by P4Info names;
//! * [`intent`] — a switch's intended state as P4Runtime entities, keyed so
//!   that two states can be compared;
//! * [`static_state`] — routes, ECMP groups, SR adjacencies, priorities, INT
//!   and ECN configuration derived from the topology;
//! * [`reservations`] — the ingress SR push and INT watch entries of
//!   reserved flows; [`reserved_entries`] builds the same from P4Info ids
//!   resolved once, for the controller's commits;
//! * [`ecn`] — DCQCN port profiles (static and lowered around a reserved
//!   burst) and pre-drain entries for competing flows;
//! * [`policing`] — a reserved flow's grant as its entry's meter, beyond
//!   which the data plane demotes its packets;
//! * [`pipeline`] — push a pipeline, deleting the clone sessions BMv2
//!   would otherwise keep;
//! * [`reconcile`] — read a switch, diff against intent, apply the minimal
//!   changes (no duplicates, nothing lost); diff two intended states;
//! * [`device`] — what differs between BMv2 and Tofino (device config,
//!   port numbering, queues, report sessions), applied when intents are
//!   resolved.

pub mod addressing;
pub mod device;
pub mod ecn;
pub mod intent;
pub mod layered;
pub mod names;
pub mod object;
pub mod pipeline;
pub mod policing;
pub mod reconcile;
pub mod reservations;
pub mod reserved_entries;
pub mod static_state;

pub use device::{Devices, Target};
pub use intent::{Intent, IntentError};
pub use object::Object;
pub use reconcile::{reconcile, Diff};
pub use reservations::ReservedFlow;
