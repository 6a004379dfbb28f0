//! Where the controller's intended state survives it: nowhere (tests,
//! `--state-file none`), a local file (one controller), or etcd (replicas,
//! fenced by the leadership, see `ha`).

use std::path::PathBuf;

use super::ha::{self, Leadership};
use super::metrics::Metrics;
use super::state::State;

pub enum Store {
    Memory,
    File(PathBuf),
    Etcd(Box<Leadership>),
}

impl Store {
    /// Persist before anything is installed or answered. A file that cannot
    /// be written is counted and logged (the controller goes on); a leader
    /// that cannot commit to etcd steps down, since another replica may
    /// already lead.
    pub async fn save(&self, state: &State, metrics: &Metrics) {
        match self {
            Store::Memory => {}
            Store::File(path) => {
                if let Err(e) = state.save(path) {
                    metrics.state_write_errors.inc();
                    tracing::error!(%e, "cannot write the state file; a restart would lose the latest changes");
                }
            }
            Store::Etcd(leadership) => {
                if let Err(e) = leadership.save(state).await {
                    metrics.state_write_errors.inc();
                    ha::step_down(&format!("{e:#}"));
                }
            }
        }
    }

    /// How the admin view names it.
    pub fn describe(&self) -> Option<String> {
        match self {
            Store::Memory => None,
            Store::File(path) => Some(path.display().to_string()),
            Store::Etcd(l) => Some(format!("etcd (election id {})", l.election_id())),
        }
    }
}
