//! Where the controller's intended state survives it: nowhere (tests,
//! `--state-file none`), a local file (one controller: a snapshot and a
//! journal of commits, see `journal`), or etcd (replicas, fenced by the
//! leadership, see `ha`). Both write only the records a change touched.

use std::path::Path;
use std::sync::Mutex;

use super::ha::{self, Leadership};
use super::journal::StateFile;
use super::state::State;
use crate::daemon::monitoring::metrics::Metrics;

pub enum Store {
    Memory,
    File(Mutex<StateFile>),
    Etcd(Box<Leadership>),
}

impl Store {
    /// The state file at `path` (fabric `fabric`), and the state it holds.
    pub fn file(path: &Path, fabric: &str) -> anyhow::Result<(Store, Option<State>)> {
        let (file, state) = StateFile::open(path, fabric)?;
        Ok((Store::File(Mutex::new(file)), state))
    }

    /// Persist before anything is answered (the switches write meanwhile,
    /// [`crate::daemon::control::controller::Controller::commit`]). A file that cannot
    /// be written is counted and logged (the controller goes on); a leader
    /// that cannot commit to etcd steps down, since another replica may
    /// already lead. Whether the store now holds `state` (what it did not
    /// take is written with the next commit).
    pub async fn save(&self, state: &State, metrics: &Metrics) -> bool {
        match self {
            Store::Memory => true,
            Store::File(file) => {
                let committed = blocking(|| {
                    file.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .commit(state)
                });
                if let Err(e) = &committed {
                    metrics.state_write_errors.inc();
                    tracing::error!(error = %format!("{e:#}"), "cannot write the state file; a restart would lose the latest changes");
                }
                committed.is_ok()
            }
            Store::Etcd(leadership) => match leadership.save(state).await {
                Ok(()) => true,
                Err(e) => {
                    metrics.state_write_errors.inc();
                    ha::step_down(&format!("{e:#}"))
                }
            },
        }
    }

    /// How the admin view names it.
    pub fn describe(&self) -> Option<String> {
        match self {
            Store::Memory => None,
            Store::File(file) => Some(
                file.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .path()
                    .display()
                    .to_string(),
            ),
            Store::Etcd(l) => Some(format!("etcd (election id {})", l.election_id())),
        }
    }
}

/// `f`, which waits on the disk (an fsync), where waiting blocks no other
/// task: on the daemon's multi-threaded runtime the worker's other tasks
/// (the switches' writes of the same commit) move to another thread
/// meanwhile; elsewhere (a single-threaded test runtime) it runs in place.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
