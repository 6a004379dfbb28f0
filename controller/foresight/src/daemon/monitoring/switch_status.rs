//! What a switch task publishes about its switch: session, mastership,
//! sync and the last reconciliation. The admin view shows it, the metrics
//! count it and the switch task writes it, so it sits below all three.

use serde::{Deserialize, Serialize};

/// What reconciliation changed on a switch.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReconcileReport {
    pub inserted: usize,
    pub modified: usize,
    pub deleted: usize,
    pub millis: f64,
    /// "pushed" when the pipeline had to be (re)installed, "kept" otherwise.
    pub pipeline: String,
}

/// A switch as its task sees it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SwitchStatus {
    pub connected: bool,
    pub primary: bool,
    /// Election id of the primary client, when the switch said.
    pub primary_election_id: Option<String>,
    /// True once the switch holds the intended state it was last sent.
    pub in_sync: bool,
    pub reconciles: u64,
    pub last_reconcile: Option<ReconcileReport>,
    /// Entities the switch holds by our account.
    pub entities: usize,
    pub last_error: Option<String>,
}
