//! What the controller decides from, besides its own state: the time
//! (`clock`, Unix ns, read the same way everywhere), the clients' NDSP
//! requests as the engine takes them (`requests`: idempotency keys,
//! recorded registrations, predicted batches), the fabric's INT reports
//! and link loads (`telemetry`), and the iterations learned from the
//! traffic (`learning`). None of them holds the controller or a switch
//! session: the engine, the controller and its loops read them.
//!
//! Calls `persistence` (the records and the state) and `monitoring`.

pub mod clock;
pub mod learning;
pub mod requests;
pub mod telemetry;
