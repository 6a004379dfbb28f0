//! The fences that keep a replaced leader harmless. Every commit is one
//! etcd transaction that only succeeds while this replica's leader key
//! exists with its revision (etcd's STM pattern: compare, then write);
//! a replica whose lease is lost, or whose switches report a newer
//! primary, steps down and exits.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};

use super::session::{lease_lost, CALL_TIMEOUT};
use crate::daemon::monitoring::switch_status::SwitchStatus;
use crate::daemon::persistence::state::State;
use crate::daemon::persistence::state_keys;

/// Exit status of a replica that stepped down.
pub const STEP_DOWN_EXIT: i32 = 75;

/// Won leadership: the fence every commit goes through.
pub struct Leadership {
    client: Client,
    leader_key: Vec<u8>,
    revision: i64,
    /// `<prefix>/state/`: one key per job and reservation, and `meta`.
    state_prefix: String,
    /// What etcd holds under `state_prefix`, as last committed: a commit
    /// writes only the records that differ from it.
    committed: tokio::sync::Mutex<state_keys::Committed>,
    pub lost: tokio::sync::watch::Receiver<bool>,
}

impl Leadership {
    /// Won leadership of the key `leader_key` created at `revision`.
    pub(super) fn new(
        client: Client,
        leader_key: Vec<u8>,
        revision: i64,
        state_prefix: String,
        lost: tokio::sync::watch::Receiver<bool>,
    ) -> Leadership {
        Leadership {
            client,
            leader_key,
            revision,
            state_prefix,
            committed: Default::default(),
            lost,
        }
    }

    /// The P4Runtime election id: the leader key's create revision, which
    /// only grows from one leader to the next.
    pub fn election_id(&self) -> u128 {
        self.revision as u128
    }

    /// The state the previous leaders committed, if any.
    /// A member that is down refuses the read; it is retried, as commits
    /// are, for 2 s (the client spreads calls over the members).
    pub async fn load(&self, fabric: &str) -> anyhow::Result<Option<State>> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let answer = loop {
            let mut kv = self.client.kv_client();
            let read = kv.get(
                self.state_prefix.clone(),
                Some(GetOptions::new().with_prefix()),
            );
            match tokio::time::timeout(CALL_TIMEOUT, read).await {
                Ok(Ok(answer)) => break answer,
                Ok(Err(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(%e, "etcd: state read failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(Err(e)) => return Err(e).context("etcd: cannot read the state"),
                Err(_) => anyhow::bail!("etcd: no answer to the state read in {CALL_TIMEOUT:?}"),
            }
        };
        let mut keys = BTreeMap::new();
        for kv in answer.kvs() {
            let key = kv.key_str().context("etcd: a state key is not UTF-8")?;
            let name = key.strip_prefix(&self.state_prefix).unwrap_or(key);
            keys.insert(name.to_string(), kv.value().to_vec());
        }
        if keys.is_empty() {
            return Ok(None);
        }
        let state = state_keys::assemble(&keys, fabric)
            .with_context(|| format!("etcd keys {}*", self.state_prefix))?;
        *self.committed.lock().await = state_keys::Committed::of(&state, &keys);
        Ok(Some(state))
    }

    /// Commit the state, fenced by this leadership: one transaction that
    /// writes the keys that changed, and only while this replica's leader
    /// key exists with its revision (so never once another replica leads).
    /// Retries etcd errors for up to two seconds; the caller must stop when
    /// this fails.
    pub async fn save(&self, state: &State) -> anyhow::Result<()> {
        let mut committed = self.committed.lock().await;
        let changes = committed.changes(state)?;
        if changes.is_empty() {
            return Ok(());
        }
        let key = |name: String| format!("{}{name}", self.state_prefix);
        let ops: Vec<TxnOp> = changes
            .puts()
            .map(|(name, value)| TxnOp::put(key(name), value, None))
            .chain(changes.deletes().map(|name| TxnOp::delete(key(name), None)))
            .collect();
        let count = ops.len();
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                self.leader_key.clone(),
                CompareOp::Equal,
                self.revision,
            )])
            .and_then(ops);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let mut kv = self.client.kv_client();
            let attempt = tokio::time::timeout(CALL_TIMEOUT, kv.txn(txn.clone()));
            let outcome = match attempt.await {
                Ok(outcome) => outcome,
                Err(_) => Err(etcd_client::Error::InvalidArgs(format!(
                    "no answer in {CALL_TIMEOUT:?}"
                ))),
            };
            match outcome {
                Ok(answer) if answer.succeeded() => {
                    committed.apply(changes);
                    return Ok(());
                }
                Ok(_) => anyhow::bail!(
                    "etcd: this replica is no longer the leader (its key {} is gone)",
                    String::from_utf8_lossy(&self.leader_key)
                ),
                Err(e @ etcd_client::Error::GRpcStatus(_))
                    if e.to_string().contains("too many operations") =>
                {
                    return Err(e).context(format!(
                        "etcd: one commit changes {count} keys; start etcd with --max-txn-ops {count} or more"
                    ));
                }
                Err(e) if tokio::time::Instant::now() < deadline && !*self.lost.borrow() => {
                    tracing::warn!(%e, "etcd: commit failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e).context("etcd: cannot commit the state"),
            }
        }
    }
}

/// Leave now: nothing more is answered or installed by this process.
pub fn step_down(why: &str) -> ! {
    tracing::error!(why, "stepping down");
    eprintln!("foresight controller: stepping down: {why}");
    std::process::exit(STEP_DOWN_EXIT)
}

/// Step down as soon as the lease is lost or any switch reports a primary
/// with a higher election id than ours (a newer leader).
pub fn watch_fences(
    lost: tokio::sync::watch::Receiver<bool>,
    switches: Vec<(String, tokio::sync::watch::Receiver<SwitchStatus>)>,
    election_id: u128,
) {
    tokio::spawn(async move {
        if lease_lost(lost).await {
            step_down("the etcd lease expired, or etcd was out of reach for 5 lease TTLs (another replica may lead now)");
        }
    });
    for (name, mut status) in switches {
        tokio::spawn(async move {
            loop {
                let newer = status
                    .borrow()
                    .primary_election_id
                    .as_deref()
                    .and_then(|e| e.parse::<u128>().ok())
                    .filter(|e| *e > election_id);
                if let Some(e) = newer {
                    step_down(&format!(
                        "switch {name} has a newer primary (election id {e} > ours {election_id})"
                    ));
                }
                if status.changed().await.is_err() {
                    return;
                }
            }
        });
    }
}
