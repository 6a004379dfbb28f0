//! What happens to a live reservation after its answer: a cancellation, a
//! workload deviation (re-planned) and expiry (`changes`), a link that goes
//! down or comes back (`links`), and traffic that runs on or stops
//! (`follow`). Each is an `impl Engine` block; the engine's root owns the
//! records, the ledger and the requests that create reservations, and
//! these call them, never the other way but through the engine's methods.

pub(super) mod changes;
pub(super) mod follow;
pub(super) mod links;
