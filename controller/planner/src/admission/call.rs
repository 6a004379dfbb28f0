//! The working state of one planning call, shared by its phases: each
//! demand's paths and reservations so far ([`Work`]), a batch of its flows
//! ([`Batch`]) and the joint search's budget and findings ([`JointRun`]).

use std::collections::HashMap;
use std::time::Instant;

use crate::assign::Method;
use crate::ledger::Window;
use crate::paths::Path;

use super::answer::{JointSummary, MoveCause, Outcome, Reason};

/// A demand's state while a set is planned.
pub(super) struct Work {
    pub(super) paths: Vec<Path>,
    pub(super) reserved: Vec<u64>,
    pub(super) shift: u64,
    pub(super) method: Option<Method>,
    pub(super) outcome: Option<Outcome>,
    /// Why it was not admitted in full (settled after admission).
    pub(super) blocked: Option<Reason>,
}

impl Work {
    pub(super) fn new(flows: usize) -> Work {
        Work {
            paths: vec![Path::EMPTY; flows],
            reserved: vec![0; flows],
            shift: 0,
            method: None,
            outcome: None,
            blocked: None,
        }
    }
}

pub(super) struct Batch {
    pub(super) window: Window,
    pub(super) flows: Vec<u32>,
}

/// The joint work of one planning call.
pub(super) struct JointRun {
    pub(super) deadline: Instant,
    pub(super) summary: JointSummary,
    pub(super) causes: HashMap<String, Vec<MoveCause>>,
}
