//! The live reservations, indexed the ways the controller asks for them,
//! so that no request, commit or scheduler tick walks everything held: by
//! sequence number (their order), by id, by (tenant, subject), by
//! (tenant, job), by the moments they start and end, and by the moments
//! the switches' intended state changes for them. It also remembers which
//! records changed since the last commit, so a commit writes those without
//! comparing the rest.
//!
//! Records are changed through [`RecordMut`], which re-indexes the record
//! when it is dropped; there is no other way to reach one mutably, so the
//! indexes cannot drift from the records.
//!
//! Records are shared ([`Arc`]): the committed copy, the history and the
//! answers to clients hold the same record instead of copies of it (a
//! 1,024-rank collective's record is thousands of allocations). A change
//! copies a record only while someone else still holds it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::state_records::{Reservation, Subject};

/// Live reservations in sequence order, with their indexes.
#[derive(Debug, Clone, Default)]
pub struct LiveReservations {
    records: BTreeMap<u64, Arc<Reservation>>,
    by_id: HashMap<String, u64>,
    /// Per tenant, the live reservations answering each subject (one,
    /// unless a subject was answered again before its record retired).
    by_subject: PerTenant<Subject>,
    /// Per tenant, the live reservations of each job.
    by_job: PerTenant<String>,
    per_tenant: HashMap<String, usize>,
    /// (first flow start, seq).
    starts: BTreeSet<(u64, u64)>,
    /// (last flow end, seq).
    ends: BTreeSet<(u64, u64)>,
    /// (flow start, seq) of the flows whose entries go in at a moment
    /// (pinned flows, and steered ones for their INT watch).
    event_starts: BTreeSet<(u64, u64)>,
    /// (moment, seq): those flows' ends and every record's end.
    event_ends: BTreeSet<(u64, u64)>,
    /// Records put, changed or removed since the last commit.
    touched: BTreeSet<u64>,
}

/// Per tenant, per key (a subject, a job), sequence numbers.
type PerTenant<K> = HashMap<String, HashMap<K, BTreeSet<u64>>>;

fn add<K: std::hash::Hash + Eq + Clone>(index: &mut PerTenant<K>, tenant: &str, key: &K, seq: u64) {
    index
        .entry(tenant.to_string())
        .or_default()
        .entry(key.clone())
        .or_default()
        .insert(seq);
}

/// Removes `seq`, and the key and tenant once they hold nothing.
fn take<K: std::hash::Hash + Eq>(index: &mut PerTenant<K>, tenant: &str, key: &K, seq: u64) {
    if let Some(keys) = index.get_mut(tenant) {
        if let Some(seqs) = keys.get_mut(key) {
            seqs.remove(&seq);
            if seqs.is_empty() {
                keys.remove(key);
            }
        }
        if keys.is_empty() {
            index.remove(tenant);
        }
    }
}

/// What a record is indexed by; compared before and after a change.
#[derive(PartialEq, Eq)]
struct IndexKeys {
    id: String,
    tenant: String,
    subject: Subject,
    job: Option<String>,
    start: u64,
    end: u64,
    event_starts: BTreeSet<u64>,
    event_ends: BTreeSet<u64>,
}

impl IndexKeys {
    fn of(r: &Reservation) -> IndexKeys {
        let end = r.end_unix_ns();
        let timed = r
            .flows
            .iter()
            .filter(|f| f.installs() || f.udp_src_port.is_some());
        let mut event_ends: BTreeSet<u64> = timed.clone().map(|f| f.end_unix_ns).collect();
        event_ends.insert(end);
        IndexKeys {
            id: r.id.clone(),
            tenant: r.tenant.clone(),
            subject: r.subject.clone(),
            job: r.job_id.clone(),
            start: r.start_unix_ns(),
            end,
            event_starts: timed.map(|f| f.start_unix_ns).collect(),
            event_ends,
        }
    }
}

impl LiveReservations {
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Every live reservation, in sequence order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Reservation> + Clone {
        self.records.values().map(|r| &**r)
    }

    pub fn get(&self, seq: u64) -> Option<&Reservation> {
        self.records.get(&seq).map(|r| &**r)
    }

    /// [`Self::iter`], the records themselves.
    pub fn iter_shared(&self) -> impl Iterator<Item = &Arc<Reservation>> {
        self.records.values()
    }

    /// The record `seq` itself, to hold on to without copying it.
    pub fn shared(&self, seq: u64) -> Option<&Arc<Reservation>> {
        self.records.get(&seq)
    }

    /// The record `seq`, which the caller knows is live.
    pub fn record(&self, seq: u64) -> &Reservation {
        self.records
            .get(&seq)
            .unwrap_or_else(|| panic!("reservation seq {seq} is not live"))
    }

    /// The record `seq` to change; re-indexed when the guard drops.
    pub fn get_mut(&mut self, seq: u64) -> Option<RecordMut<'_>> {
        let before = IndexKeys::of(self.records.get(&seq)?);
        Some(RecordMut {
            set: self,
            seq,
            before: Some(before),
        })
    }

    /// [`Self::get_mut`] of a record the caller knows is live.
    pub fn record_mut(&mut self, seq: u64) -> RecordMut<'_> {
        self.get_mut(seq)
            .unwrap_or_else(|| panic!("reservation seq {seq} is not live"))
    }

    /// The sequence number of the live reservation `id`.
    pub fn seq_of(&self, id: &str) -> Option<u64> {
        self.by_id.get(id).copied()
    }

    /// The live reservation `id`.
    pub fn find(&self, id: &str) -> Option<&Reservation> {
        self.seq_of(id).and_then(|s| self.get(s))
    }

    /// [`Self::find`], the record itself.
    pub fn find_shared(&self, id: &str) -> Option<&Arc<Reservation>> {
        self.seq_of(id).and_then(|s| self.shared(s))
    }

    /// The (earliest) live reservation of `tenant` answering `subject`.
    pub fn answering(&self, tenant: &str, subject: &Subject) -> Option<u64> {
        self.by_subject.get(tenant)?.get(subject)?.first().copied()
    }

    /// Every live reservation of `tenant` answering `subject`.
    pub fn all_answering(&self, tenant: &str, subject: &Subject) -> Vec<u64> {
        self.by_subject
            .get(tenant)
            .and_then(|s| s.get(subject))
            .map(|seqs| seqs.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The live reservations of `tenant`'s job `job`, in sequence order.
    pub fn of_job<'a>(
        &'a self,
        tenant: &str,
        job: &str,
    ) -> impl DoubleEndedIterator<Item = &'a Reservation> + 'a {
        self.by_job
            .get(tenant)
            .and_then(|jobs| jobs.get(job))
            .into_iter()
            .flatten()
            .map(|seq| self.record(*seq))
    }

    /// How many reservations `tenant` holds.
    pub fn count_of(&self, tenant: &str) -> usize {
        self.per_tenant.get(tenant).copied().unwrap_or(0)
    }

    /// Adds `r`, or replaces the live record with its sequence number.
    pub fn insert(&mut self, r: impl Into<Arc<Reservation>>) {
        let r = r.into();
        let seq = r.seq;
        if let Some(old) = self.records.remove(&seq) {
            self.unindex(seq, &IndexKeys::of(&old));
        }
        self.index(seq, &IndexKeys::of(&r));
        self.records.insert(seq, r);
        self.touched.insert(seq);
    }

    pub fn remove(&mut self, seq: u64) -> Option<Arc<Reservation>> {
        let r = self.records.remove(&seq)?;
        self.unindex(seq, &IndexKeys::of(&r));
        self.touched.insert(seq);
        Some(r)
    }

    /// Records whose first flow starts at or before `t`, in start order;
    /// the others have nothing on the switches before `t`.
    pub fn starting_by(&self, t: u64) -> impl Iterator<Item = &Reservation> {
        self.starts
            .range(..=(t, u64::MAX))
            .map(|(_, seq)| self.record(*seq))
    }

    /// Records with flows between `from` and `to` (their first flow starts
    /// by `to`, their last ends at or after `from`), in sequence order.
    /// Through the start index, so what is held for later than `to` is not
    /// walked (the operator's page asks every two seconds, under the
    /// engine's lock).
    pub fn overlapping(&self, from: u64, to: u64) -> Vec<&Reservation> {
        let mut out: Vec<&Reservation> = self
            .starting_by(to)
            .filter(|r| r.end_unix_ns() >= from)
            .collect();
        out.sort_unstable_by_key(|r| r.seq);
        out
    }

    /// Sequence numbers of the records whose last flow ended by `t`, in
    /// sequence order.
    pub fn ended_by(&self, t: u64) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .ends
            .range(..=(t, u64::MAX))
            .map(|(_, seq)| *seq)
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// The next moment after `now` at which a record ends or a flow's
    /// entries go in (`lead_ns` before it starts) or come out.
    pub fn next_event(&self, now: u64, lead_ns: u64) -> Option<u64> {
        let end = self
            .event_ends
            .range((now.saturating_add(1), 0)..)
            .next()
            .map(|(t, _)| *t);
        // start - lead > now  <=>  start > now + lead
        let install = self
            .event_starts
            .range((now.saturating_add(lead_ns).saturating_add(1), 0)..)
            .next()
            .map(|(t, _)| t.saturating_sub(lead_ns));
        match (end, install) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Records put, changed or removed since [`Self::committed`].
    pub fn touched(&self) -> impl Iterator<Item = u64> + '_ {
        self.touched.iter().copied()
    }

    /// What [`Self::touched`] listed is durable.
    pub fn committed(&mut self) {
        self.touched.clear();
    }

    /// The `i`-th record in sequence order (tests).
    #[cfg(test)]
    pub fn nth(&self, i: usize) -> &Reservation {
        self.iter().nth(i).expect("fewer records")
    }

    /// [`Self::nth`], to change (tests).
    #[cfg(test)]
    pub fn nth_mut(&mut self, i: usize) -> RecordMut<'_> {
        let seq = self.nth(i).seq;
        self.record_mut(seq)
    }

    /// Removes [`Self::nth`] (tests).
    #[cfg(test)]
    pub fn remove_nth(&mut self, i: usize) -> Arc<Reservation> {
        let seq = self.nth(i).seq;
        self.remove(seq).expect("live")
    }

    fn index(&mut self, seq: u64, k: &IndexKeys) {
        self.by_id.insert(k.id.clone(), seq);
        add(&mut self.by_subject, &k.tenant, &k.subject, seq);
        if let Some(job) = &k.job {
            add(&mut self.by_job, &k.tenant, job, seq);
        }
        *self.per_tenant.entry(k.tenant.clone()).or_default() += 1;
        self.starts.insert((k.start, seq));
        self.ends.insert((k.end, seq));
        self.event_starts
            .extend(k.event_starts.iter().map(|t| (*t, seq)));
        self.event_ends
            .extend(k.event_ends.iter().map(|t| (*t, seq)));
    }

    fn unindex(&mut self, seq: u64, k: &IndexKeys) {
        if self.by_id.get(&k.id) == Some(&seq) {
            self.by_id.remove(&k.id);
        }
        take(&mut self.by_subject, &k.tenant, &k.subject, seq);
        if let Some(job) = &k.job {
            take(&mut self.by_job, &k.tenant, job, seq);
        }
        if let Some(n) = self.per_tenant.get_mut(&k.tenant) {
            *n -= 1;
            if *n == 0 {
                self.per_tenant.remove(&k.tenant);
            }
        }
        self.starts.remove(&(k.start, seq));
        self.ends.remove(&(k.end, seq));
        for t in &k.event_starts {
            self.event_starts.remove(&(*t, seq));
        }
        for t in &k.event_ends {
            self.event_ends.remove(&(*t, seq));
        }
    }
}

impl FromIterator<Reservation> for LiveReservations {
    fn from_iter<I: IntoIterator<Item = Reservation>>(records: I) -> Self {
        let mut set = LiveReservations::default();
        for r in records {
            set.insert(r);
        }
        set
    }
}

impl<'a> IntoIterator for &'a LiveReservations {
    type Item = &'a Reservation;
    type IntoIter = std::iter::Map<
        std::collections::btree_map::Values<'a, u64, Arc<Reservation>>,
        fn(&Arc<Reservation>) -> &Reservation,
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.records.values().map(|r| &**r)
    }
}

/// Saved as the list of records, in sequence order (the state file's
/// `reservations`).
impl Serialize for LiveReservations {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Loaded records are not "touched": they are what the store holds.
impl<'de> Deserialize<'de> for LiveReservations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let records = Vec::<Reservation>::deserialize(d)?;
        let mut set: LiveReservations = records.into_iter().collect();
        set.committed();
        Ok(set)
    }
}

/// A live record being changed; its indexes follow when it drops, and the
/// next commit writes it.
pub struct RecordMut<'a> {
    set: &'a mut LiveReservations,
    seq: u64,
    before: Option<IndexKeys>,
}

impl Deref for RecordMut<'_> {
    type Target = Reservation;
    fn deref(&self) -> &Reservation {
        self.set.record(self.seq)
    }
}

impl DerefMut for RecordMut<'_> {
    /// Copies the record first if someone else still holds it.
    fn deref_mut(&mut self) -> &mut Reservation {
        let seq = self.seq;
        Arc::make_mut(self.set.records.get_mut(&seq).expect("a guarded record"))
    }
}

impl Drop for RecordMut<'_> {
    fn drop(&mut self) {
        let before = self.before.take().expect("dropped once");
        let seq = self.seq;
        let after = IndexKeys::of(self.set.record(seq));
        if after != before {
            self.set.unindex(seq, &before);
            self.set.index(seq, &after);
        }
        self.set.touched.insert(seq);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::daemon::persistence::state_records::{FlowRecord, Reason, Status};

    /// A reservation of one flow from `start` to `end`.
    pub(crate) fn record(
        seq: u64,
        tenant: &str,
        demand: &str,
        start: u64,
        end: u64,
    ) -> Reservation {
        let mut r = crate::daemon::persistence::state_keys::tests::reservation(seq);
        r.id = format!("r{seq}/{demand}");
        r.tenant = tenant.into();
        r.subject = Subject::Demand(demand.into());
        r.flows = vec![FlowRecord {
            flow_id: "f".into(),
            src: "h1".into(),
            dst: "h2".into(),
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_rank: None,
            dst_rank: None,
            qp: 1,
            steer_qp: false,
            bytes: 1,
            rate_bps: 1,
            duration_ns: end - start,
            requested_start_unix_ns: start,
            status: Status::Admitted,
            reason: Reason::None,
            accepted_bps: 1,
            start_unix_ns: start,
            end_unix_ns: end,
            labels: Arc::from([16]),
            hops: Arc::from([super::super::state_records::Hop {
                switch: "leaf1".into(),
                port: 1,
            }]),
            udp_src_port: None,
            qp_choices: None,
            pinned: false,
        }];
        r
    }

    /// Every index answers what a walk over the records would.
    fn check(set: &LiveReservations, now: u64, lead: u64) {
        for r in set.iter() {
            assert_eq!(set.seq_of(&r.id), Some(r.seq));
            let first = set
                .iter()
                .find(|x| x.tenant == r.tenant && x.subject == r.subject);
            assert_eq!(set.answering(&r.tenant, &r.subject), first.map(|x| x.seq));
            let n = set.iter().filter(|x| x.tenant == r.tenant).count();
            assert_eq!(set.count_of(&r.tenant), n);
            if let Some(job) = &r.job_id {
                let walked: Vec<u64> = set
                    .iter()
                    .filter(|x| x.tenant == r.tenant && x.job_id.as_ref() == Some(job))
                    .map(|x| x.seq)
                    .collect();
                let indexed: Vec<u64> = set.of_job(&r.tenant, job).map(|x| x.seq).collect();
                assert_eq!(walked, indexed, "job {job}");
            }
        }
        let walked: BTreeSet<u64> = set
            .iter()
            .filter(|r| r.start_unix_ns() <= now)
            .map(|r| r.seq)
            .collect();
        let indexed: BTreeSet<u64> = set.starting_by(now).map(|r| r.seq).collect();
        assert_eq!(walked, indexed);
        let ended: Vec<u64> = set
            .iter()
            .filter(|r| r.end_unix_ns() <= now)
            .map(|r| r.seq)
            .collect();
        assert_eq!(ended, set.ended_by(now));
        for (from, to) in [
            (now, now),
            (now.saturating_sub(60), now + 60),
            (0, u64::MAX),
        ] {
            let walked: Vec<u64> = set
                .iter()
                .filter(|r| r.start_unix_ns() <= to && r.end_unix_ns() >= from)
                .map(|r| r.seq)
                .collect();
            let indexed: Vec<u64> = set.overlapping(from, to).iter().map(|r| r.seq).collect();
            assert_eq!(walked, indexed, "[{from}, {to}]");
        }
        let mut next: Option<u64> = None;
        for r in set.iter() {
            let mut consider = |t: u64| {
                if t > now && next.is_none_or(|n| t < n) {
                    next = Some(t);
                }
            };
            consider(r.end_unix_ns());
            for f in r.installing() {
                consider(f.install_unix_ns(lead));
                consider(f.end_unix_ns);
            }
        }
        assert_eq!(set.next_event(now, lead), next, "now {now}");
    }

    #[test]
    fn a_held_record_is_not_changed_by_a_change_to_the_live_one() {
        let mut set: LiveReservations = [record(1, "a", "d1", 100, 200)].into_iter().collect();
        let held = set.shared(1).expect("live").clone();
        // Read through the guard only: still the same record, not a copy.
        assert_eq!(set.record_mut(1).revision, 1);
        assert!(Arc::ptr_eq(&held, set.shared(1).expect("live")));
        set.record_mut(1).revision += 1;
        assert_eq!(held.revision, 1, "the holder keeps what it took");
        assert_eq!(set.record(1).revision, 2);
        assert!(!Arc::ptr_eq(&held, set.shared(1).expect("live")));
        let removed = set.remove(1).expect("live");
        assert_eq!(removed.revision, 2);
    }

    #[test]
    fn indexes_follow_inserts_changes_and_removals() {
        let of_job = |mut r: Reservation, job: &str| {
            r.job_id = Some(job.into());
            r
        };
        let mut set: LiveReservations = [
            of_job(record(1, "a", "d1", 100, 200), "j"),
            of_job(record(2, "a", "d2", 150, 400), "j"),
            of_job(record(3, "b", "d1", 50, 120), "j"),
        ]
        .into_iter()
        .collect();
        for now in [0, 60, 100, 130, 160, 250, 500] {
            check(&set, now, 20);
        }
        {
            let mut r = set.record_mut(2);
            r.flows[0].start_unix_ns = 300;
            r.flows[0].end_unix_ns = 350;
            r.job_id = Some("k".into());
        }
        let jobs = |set: &LiveReservations, tenant: &str, job: &str| -> Vec<u64> {
            set.of_job(tenant, job).map(|r| r.seq).collect()
        };
        assert_eq!(jobs(&set, "a", "j"), [1]);
        assert_eq!(jobs(&set, "a", "k"), [2]);
        assert_eq!(jobs(&set, "b", "j"), [3]);
        set.insert(record(4, "b", "d1", 10, 20));
        for now in [0, 15, 100, 290, 320, 360] {
            check(&set, now, 20);
        }
        assert_eq!(set.answering("b", &Subject::Demand("d1".into())), Some(3));
        set.remove(3);
        assert_eq!(set.answering("b", &Subject::Demand("d1".into())), Some(4));
        assert_eq!(set.seq_of("r3/d1"), None);
        assert_eq!(set.count_of("b"), 1);
        assert!(jobs(&set, "b", "j").is_empty());
        for now in [0, 15, 100, 290, 320, 360] {
            check(&set, now, 20);
        }
        let seqs: Vec<u64> = set.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2, 4], "sequence order");
    }

    #[test]
    fn a_commit_sees_what_changed_since_the_last() {
        let mut set: LiveReservations = (1..=5)
            .map(|s| record(s, "a", &format!("d{s}"), 0, 9))
            .collect();
        set.committed();
        assert_eq!(set.touched().count(), 0);
        set.record_mut(2).revision += 1;
        set.remove(4);
        set.insert(record(6, "a", "d6", 0, 9));
        assert_eq!(set.touched().collect::<Vec<_>>(), [2, 4, 6]);
        set.committed();
        assert_eq!(set.touched().count(), 0);
    }

    #[test]
    fn saved_as_a_list_and_loaded_untouched() {
        let set: LiveReservations = [record(2, "a", "x", 0, 9), record(1, "a", "y", 0, 9)]
            .into_iter()
            .collect();
        let text = serde_json::to_string(&set).unwrap();
        assert!(text.starts_with("[{\"id\":\"r1/y\""), "{text}");
        let back: LiveReservations = serde_json::from_str(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.touched().count(), 0);
        assert_eq!(back.seq_of("r2/x"), Some(2));
    }
}
