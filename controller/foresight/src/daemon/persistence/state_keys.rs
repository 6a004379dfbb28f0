//! The state as keyed records: `meta` (fabric, epoch, counters, links
//! down), `job/<tenant>/<job>` and `reservation/<seq>` (zero-padded, so
//! that key order is sequence order). Both stores commit in these terms:
//! etcd holds one key per record (`ha`), the state file's journal one line
//! per commit (`journal`).
//!
//! Its own file because it is pure data: what a commit writes and deletes
//! is computed here, without etcd or a file, and tested without them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::daemon::persistence::state::State;
use crate::daemon::persistence::state_records::{Job, LinkRef, Reservation};

#[derive(Serialize, Deserialize)]
struct Meta {
    version: u32,
    fabric: String,
    epoch_unix_ns: u64,
    next_seq: u64,
    next_qp: BTreeMap<String, u32>,
    links_down: Vec<LinkRef>,
}

fn meta(state: &State) -> anyhow::Result<Vec<u8>> {
    let meta = Meta {
        version: state.version,
        fabric: state.fabric.clone(),
        epoch_unix_ns: state.epoch_unix_ns,
        next_seq: state.next_seq,
        next_qp: state.next_qp.clone(),
        links_down: state.links_down.clone(),
    };
    Ok(serde_json::to_vec(&meta)?)
}

/// A reservation record's JSON, written into a buffer sized for it up
/// front: a large collective's record is hundreds of kilobytes, and
/// growing the buffer by doubling copied it again and again.
fn reservation_json(r: &Reservation) -> anyhow::Result<Vec<u8>> {
    // About 700 bytes a flow (field names included); a miss only grows.
    let mut out = Vec::with_capacity(1024 + 768 * r.flows.len());
    serde_json::to_writer(&mut out, r)?;
    Ok(out)
}

fn job_key(j: &Job) -> String {
    format!("job/{}/{}", j.tenant, j.job_id)
}

fn reservation_key(seq: u64) -> String {
    format!("reservation/{seq:020}")
}

/// The records a store holds, as last committed. A commit compares only
/// the reservations the state says were touched since the last commit
/// (`LiveReservations::touched`) with their committed copies, and
/// serializes those that differ: its cost follows the change, not what
/// is held. Whoever commits clears the touched set once the store holds
/// the change (`LiveReservations::committed`). The committed copies are the
/// live records themselves until they change (shared, so a record that did
/// not change is told apart without comparing its flows).
#[derive(Default)]
pub struct Committed {
    meta: Vec<u8>,
    jobs: BTreeMap<String, Job>,
    reservations: BTreeMap<u64, Arc<Reservation>>,
}

/// What one commit writes (records with their bytes) and deletes.
#[derive(Default)]
pub struct Changes {
    meta: Option<Vec<u8>>,
    jobs: Vec<(String, Job, Vec<u8>)>,
    reservations: Vec<(Arc<Reservation>, Vec<u8>)>,
    deleted_jobs: Vec<String>,
    deleted_reservations: Vec<u64>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.meta.is_none()
            && self.jobs.is_empty()
            && self.reservations.is_empty()
            && self.deleted_jobs.is_empty()
            && self.deleted_reservations.is_empty()
    }

    /// The keys to write, with their values.
    pub fn puts(&self) -> impl Iterator<Item = (String, &[u8])> {
        let meta = self.meta.iter().map(|m| ("meta".to_string(), m.as_slice()));
        let jobs = self.jobs.iter().map(|(k, _, v)| (k.clone(), v.as_slice()));
        let reservations = self
            .reservations
            .iter()
            .map(|(r, v)| (reservation_key(r.seq), v.as_slice()));
        meta.chain(jobs).chain(reservations)
    }

    /// The keys to delete.
    pub fn deletes(&self) -> impl Iterator<Item = String> + '_ {
        let reservations = self
            .deleted_reservations
            .iter()
            .map(|s| reservation_key(*s));
        self.deleted_jobs.iter().cloned().chain(reservations)
    }
}

impl Committed {
    /// What was loaded: `state`, assembled from `keys`.
    pub fn of(state: &State, keys: &BTreeMap<String, Vec<u8>>) -> Committed {
        Committed {
            meta: keys.get("meta").cloned().unwrap_or_default(),
            jobs: state.jobs.iter().map(|j| (job_key(j), j.clone())).collect(),
            reservations: state
                .reservations
                .iter_shared()
                .map(|r| (r.seq, r.clone()))
                .collect(),
        }
    }

    /// What to write and delete so that the store holds `state`.
    pub fn changes(&self, state: &State) -> anyhow::Result<Changes> {
        let mut out = Changes::default();
        let meta = meta(state)?;
        if meta != self.meta {
            out.meta = Some(meta);
        }
        let mut jobs = HashSet::new();
        for j in &state.jobs {
            let key = job_key(j);
            if self.jobs.get(&key) != Some(j) {
                out.jobs
                    .push((key.clone(), j.clone(), serde_json::to_vec(j)?));
            }
            jobs.insert(key);
        }
        out.deleted_jobs = self
            .jobs
            .keys()
            .filter(|k| !jobs.contains(*k))
            .cloned()
            .collect();
        // Only what changed since the last commit is looked at, not every
        // live reservation.
        for seq in state.reservations.touched() {
            match state.reservations.shared(seq) {
                Some(r)
                    if !self
                        .reservations
                        .get(&seq)
                        .is_some_and(|c| Arc::ptr_eq(c, r) || c == r) =>
                {
                    out.reservations.push((r.clone(), reservation_json(r)?));
                }
                Some(_) => {}
                None if self.reservations.contains_key(&seq) => {
                    out.deleted_reservations.push(seq);
                }
                None => {}
            }
        }
        Ok(out)
    }

    /// `changes` were committed.
    pub fn apply(&mut self, changes: Changes) {
        if let Some(meta) = changes.meta {
            self.meta = meta;
        }
        for key in &changes.deleted_jobs {
            self.jobs.remove(key);
        }
        for seq in &changes.deleted_reservations {
            self.reservations.remove(seq);
        }
        self.jobs
            .extend(changes.jobs.into_iter().map(|(k, j, _)| (k, j)));
        self.reservations
            .extend(changes.reservations.into_iter().map(|(r, _)| (r.seq, r)));
    }
}

/// Every record of `state`, as keys and their bytes.
pub fn keys_of(state: &State) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut keys = BTreeMap::new();
    keys.insert("meta".to_string(), meta(state)?);
    for j in &state.jobs {
        keys.insert(job_key(j), serde_json::to_vec(j)?);
    }
    for r in &state.reservations {
        keys.insert(reservation_key(r.seq), reservation_json(r)?);
    }
    Ok(keys)
}

/// The state the records `keys` hold, checked as a state file is.
pub fn assemble(keys: &BTreeMap<String, Vec<u8>>, fabric: &str) -> anyhow::Result<State> {
    let meta = keys.get("meta").context("no meta key")?;
    let meta: Meta = serde_json::from_slice(meta).context("meta: not Foresight state")?;
    let mut state = State::new(&meta.fabric, meta.epoch_unix_ns);
    state.version = meta.version;
    state.next_seq = meta.next_seq;
    state.next_qp = meta.next_qp;
    state.links_down = meta.links_down;
    for (name, value) in keys {
        if name.starts_with("job/") {
            let job: Job = serde_json::from_slice(value).with_context(|| name.clone())?;
            state.jobs.push(job);
        } else if name.starts_with("reservation/") {
            let r: Reservation = serde_json::from_slice(value).with_context(|| name.clone())?;
            state.reservations.insert(r);
        } else if name != "meta" {
            anyhow::bail!("{name}: not a key of Foresight state");
        }
    }
    // The same checks as a state file's.
    let bytes = serde_json::to_vec(&state)?;
    State::from_json(&bytes, fabric)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::Committed;
    use crate::daemon::persistence::state::State;
    use crate::daemon::persistence::state_records::{Job, Reason, Reservation, Status, Subject};

    /// An admitted reservation of no flows, sequence `seq`.
    pub(crate) fn reservation(seq: u64) -> Reservation {
        Reservation {
            id: format!("r{seq}"),
            seq,
            tenant: "t".into(),
            subject: Subject::Demand(format!("d{seq}")),
            job_id: None,
            request: String::new(),
            priority: 0,
            elastic: false,
            deadline_unix_ns: None,
            status: Status::Admitted,
            reason: Reason::None,
            advisory: None,
            revision: 1,
            flows: Vec::new(),
            cancelled: false,
            predicted: false,
        }
    }

    /// The keys a commit writes, sorted.
    fn written(c: &Committed, s: &State) -> (Vec<String>, Vec<String>) {
        let changes = c.changes(s).unwrap();
        let mut puts: Vec<String> = changes.puts().map(|(k, _)| k).collect();
        let mut deletes: Vec<String> = changes.deletes().collect();
        puts.sort();
        deletes.sort();
        (puts, deletes)
    }

    #[test]
    fn a_commit_writes_only_what_changed() {
        let mut c = Committed::default();
        let mut s = State::new("f", 1);
        s.reservations = (1..=3).map(reservation).collect();
        s.jobs.push(Job {
            tenant: "t".into(),
            job_id: "j".into(),
            generation: 1,
            request: String::new(),
            patterns: Vec::new(),
        });
        let (puts, deletes) = written(&c, &s);
        assert_eq!(puts.len(), 5, "meta, one job, three reservations: {puts:?}");
        assert!(deletes.is_empty());
        c.apply(c.changes(&s).unwrap());
        assert!(c.changes(&s).unwrap().is_empty(), "nothing changed since");

        // One record changes, one goes, one comes, the job goes.
        s.reservations.nth_mut(0).revision += 1;
        s.reservations.remove_nth(1);
        s.reservations.insert(reservation(4));
        s.jobs.clear();
        let (puts, deletes) = written(&c, &s);
        assert_eq!(
            puts,
            vec![
                "reservation/00000000000000000001",
                "reservation/00000000000000000004"
            ]
        );
        assert_eq!(deletes, vec!["job/t/j", "reservation/00000000000000000002"]);
        c.apply(c.changes(&s).unwrap());
        assert!(c.changes(&s).unwrap().is_empty());

        // A copy put back unchanged is compared, and not written.
        let copy = s.reservations.nth(1).clone();
        s.reservations.insert(copy);
        assert!(c.changes(&s).unwrap().is_empty());

        // The counters are in meta.
        s.next_seq += 1;
        assert_eq!(written(&c, &s).0, vec!["meta"]);
    }
}
