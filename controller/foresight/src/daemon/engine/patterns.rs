//! Standing patterns: install once, admit per step. A training job sends
//! the same collective every step (the same ring, the same groups); only
//! the timing and the bytes change. The first step of a shape is planned
//! as any reservation; its QPs and paths become the job's [`Pattern`],
//! whose entries the switches keep for the job's life. A later step of the
//! same shape is *admitted* on those paths: its window is checked and
//! booked in the ledger (no path search) and it writes nothing. A step
//! that does not fit is planned afresh, on QPs of its own.
//!
//! A pattern goes when the job registers again or is cancelled, and when
//! a link on its paths goes down (the next step then plans and installs a
//! new one around the failure).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use ndsp::types as nt;
use planner::demand::Flow;
use planner::topology::EdgeId;

use super::outcome::{PlanTiming, Planned};
use super::records::{Engine, PinnedPaths, PinnedRoutes};
use crate::daemon::persistence::state_records::{
    FlowRecord, Pattern, PinnedFlow, Reason, Reservation, Status,
};

/// Most patterns one job keeps: each holds its SR entries for the job's
/// life, so a job of many shapes (say pipeline stages) stops adopting
/// there and its further shapes install per step as before.
pub const MAX_PATTERNS_PER_JOB: usize = 16;

/// What makes two steps of a job the same traffic on the same paths: the
/// collective's kind, ranks, peer ranks, channels and priority class, but
/// not its size, timing or id. FNV-1a 64 over a fixed encoding, so that it
/// is the same after a restart and across builds (it is persisted).
pub fn shape_of(c: &nt::ValidatedCollective) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(format!("{:?}|{:?}|{:?}|", c.kind, c.priority, c.elasticity).as_bytes());
    eat(&c.channels.to_be_bytes());
    eat(&(c.ranks.len() as u64).to_be_bytes());
    for r in &c.ranks {
        eat(&r.to_be_bytes());
    }
    eat(&(c.peer_ranks.len() as u64).to_be_bytes());
    for r in &c.peer_ranks {
        eat(&r.to_be_bytes());
    }
    format!("{:?}/{}r/{h:016x}", c.kind, c.ranks.len())
}

/// A step that does not fit its pattern's paths: which link, how much.
#[derive(Debug, Clone, PartialEq)]
pub struct NoRoom {
    pub link: String,
    pub free_bps: u64,
    pub need_bps: u64,
}

impl Engine {
    /// Job `job`'s pattern of `shape`, if it has one and steps may use it.
    pub(super) fn pattern(&self, tenant: &str, job: &str, shape: &str) -> Option<Arc<Pattern>> {
        if !self.standing_patterns {
            return None;
        }
        self.state
            .jobs
            .iter()
            .find(|j| j.tenant == tenant && j.job_id == job)?
            .patterns
            .iter()
            .find(|p| p.shape == shape)
            .cloned()
    }

    /// The pattern a pinned step rides on (found by its first flow's QP,
    /// which the controller gives out once per destination).
    pub(super) fn pattern_of(&self, r: &Reservation) -> Option<Arc<Pattern>> {
        let first = r.flows.iter().find(|f| f.pinned)?;
        let job = r.job_id.as_deref()?;
        self.state
            .jobs
            .iter()
            .find(|j| j.tenant == r.tenant && j.job_id == job)?
            .patterns
            .iter()
            .find(|p| {
                p.flows.len() == r.flows.len()
                    && p.flows
                        .iter()
                        .any(|pf| pf.qp == first.qp && pf.dst == first.dst)
            })
            .cloned()
    }

    /// The planner's view of `pattern`'s flows; `None` if a recorded hop
    /// is no longer a path of the fabric.
    fn pinned_paths(&mut self, pattern: &Pattern) -> Option<PinnedPaths> {
        if let Some(p) = self.pinned_paths.get(&pattern.seq) {
            return Some(p.clone());
        }
        let mut paths = Vec::with_capacity(pattern.flows.len());
        let mut on: HashMap<EdgeId, Vec<u32>> = HashMap::new();
        for (i, f) in pattern.flows.iter().enumerate() {
            let src = self.host(&f.src).ok()?;
            let path = self.path_of(&f.hops)?;
            for e in path.reserved_edges(self.topo, src) {
                on.entry(e).or_default().push(i as u32);
            }
            paths.push((src, path));
        }
        let mut links: Vec<_> = on.into_iter().collect();
        links.sort_unstable_by_key(|(e, _)| *e);
        let paths = Arc::new(PinnedRoutes { paths, links });
        self.pinned_paths.insert(pattern.seq, paths.clone());
        Some(paths)
    }

    /// Admit a step with `flows` (the pattern's QPs, this step's windows
    /// and rates, in the pattern's order) on `pattern`'s paths: check every
    /// link has the step's rate free over its window, book it, and fill
    /// `record` in (admitted, pinned: its entries are the pattern's).
    /// Checked and booked per link, not per flow and hop: the link's
    /// flows' rates summed per window (checked over the hull of the
    /// windows there: exact for a step whose flows share a window, as a
    /// ring's do; safe when they differ). Nothing is booked when it does
    /// not fit.
    pub(super) fn admit_on_pattern(
        &mut self,
        mut record: Reservation,
        pattern: &Pattern,
        flows: &[Flow],
        flow_ids: impl Fn(usize) -> String,
    ) -> Result<Planned, Box<(Reservation, NoRoom)>> {
        let started = Instant::now();
        let no_path = |record| {
            let room = NoRoom {
                link: "a recorded hop that is no longer a path".into(),
                free_bps: 0,
                need_bps: 0,
            };
            Box::new((record, room))
        };
        let Some(paths) = self.pinned_paths(pattern) else {
            return Err(no_path(record));
        };
        if paths.paths.len() != flows.len() {
            return Err(no_path(record));
        }
        // Per link, what the step adds there in each of its windows (one
        // window for a ring's step: its flows share it).
        let mut book: Vec<(EdgeId, planner::Window, u64)> = Vec::with_capacity(paths.links.len());
        for (e, on) in &paths.links {
            let first = book.len();
            for &i in on {
                let f = &flows[i as usize];
                let w = planner::Window::new(f.start_ns, f.start_ns + f.duration_ns);
                match book[first..].iter_mut().find(|(_, bw, _)| *bw == w) {
                    Some(entry) => entry.2 += f.rate_bps,
                    None => book.push((*e, w, f.rate_bps)),
                }
            }
        }
        let tenant = record.tenant.clone();
        for per_link in book.chunk_by(|a, b| a.0 == b.0) {
            // Several windows on a link: their sum over their hull (safe
            // where they overlap; a ring's step has one).
            let e = per_link[0].0;
            let bps: u64 = per_link.iter().map(|x| x.2).sum();
            let from = per_link.iter().map(|x| x.1.start_ns).min().expect("one");
            let to = per_link.iter().map(|x| x.1.end_ns).max().expect("one");
            let free = self
                .planner
                .free_bps(&tenant, e, planner::Window::new(from, to));
            if free < bps {
                let room = NoRoom {
                    link: self.topo.describe_edge(e),
                    free_bps: free,
                    need_bps: bps,
                };
                return Err(Box::new((record, room)));
            }
        }
        self.planner.book_fixed(&tenant, &record.id, &book);
        record.flows = flows
            .iter()
            .zip(&pattern.flows)
            .enumerate()
            .map(|(i, (flow, pf))| {
                let start = self.to_unix_ns(flow.start_ns);
                FlowRecord {
                    flow_id: flow_ids(i),
                    src: pf.src.clone(),
                    dst: pf.dst.clone(),
                    src_ip: pf.src_ip,
                    dst_ip: pf.dst_ip,
                    src_rank: None,
                    dst_rank: None,
                    qp: pf.qp,
                    steer_qp: pf.steer_qp,
                    bytes: flow.bytes,
                    rate_bps: flow.rate_bps,
                    duration_ns: flow.duration_ns,
                    requested_start_unix_ns: start,
                    status: Status::Admitted,
                    reason: Reason::None,
                    accepted_bps: flow.rate_bps,
                    start_unix_ns: start,
                    end_unix_ns: start + flow.duration_ns,
                    labels: pf.labels.clone(),
                    hops: pf.hops.clone(),
                    udp_src_port: None,
                    qp_choices: None,
                    pinned: true,
                }
            })
            .collect();
        record.status = Status::Admitted;
        record.reason = Reason::None;
        record.advisory = None;
        self.raise_grants(pattern, &record);
        let record = Arc::new(record);
        self.state.reservations.insert(record.clone());
        Ok(Planned {
            records: vec![record],
            timing: PlanTiming {
                planner_secs: started.elapsed().as_secs_f64(),
            },
            ..Planned::default()
        })
    }

    /// When step `record` on `pattern` was granted more than a flow's meter
    /// lets through, the pattern takes the larger grants and the step's
    /// sequence number (so its entries are laid again: a meter MODIFY per
    /// raised flow). Grants only rise: a job whose steps vary writes once
    /// per new peak, not once per step.
    fn raise_grants(&mut self, pattern: &Pattern, record: &Reservation) {
        let raised = record
            .flows
            .iter()
            .zip(&pattern.flows)
            .any(|(f, pf)| f.accepted_bps > pf.grant_bps);
        if !raised {
            return;
        }
        let Some(job) = self.state.jobs.iter_mut().find(|j| {
            j.tenant == record.tenant && Some(j.job_id.as_str()) == record.job_id.as_deref()
        }) else {
            return;
        };
        let Some(slot) = job.patterns.iter_mut().find(|p| p.seq == pattern.seq) else {
            return;
        };
        let flows = pattern
            .flows
            .iter()
            .zip(&record.flows)
            .map(|(pf, f)| PinnedFlow {
                grant_bps: pf.grant_bps.max(f.accepted_bps),
                ..pf.clone()
            })
            .collect();
        *slot = Arc::new(Pattern {
            shape: pattern.shape.clone(),
            seq: record.seq,
            priority: pattern.priority,
            flows,
        });
        if let Some(paths) = self.pinned_paths.remove(&pattern.seq) {
            self.pinned_paths.insert(record.seq, paths);
        }
    }

    /// Make `record` (a step just planned) its job's pattern of `shape`
    /// when every flow is admitted on SR labels: its flows become pinned,
    /// and their entries the pattern's. A job at [`MAX_PATTERNS_PER_JOB`]
    /// adopts no more.
    pub(super) fn adopt_pattern(&mut self, record: &mut Reservation, shape: String) {
        if !self.standing_patterns
            || record.status != Status::Admitted
            || record.flows.is_empty()
            || !record.flows.iter().all(|f| f.installs())
        {
            return;
        }
        let Some(job_id) = record.job_id.as_deref() else {
            return;
        };
        let Some(job) = self
            .state
            .jobs
            .iter_mut()
            .find(|j| j.tenant == record.tenant && j.job_id == job_id)
        else {
            return;
        };
        job.patterns.retain(|p| p.shape != shape);
        if job.patterns.len() >= MAX_PATTERNS_PER_JOB {
            return;
        }
        let flows = record
            .flows
            .iter_mut()
            .map(|f| {
                f.pinned = true;
                PinnedFlow {
                    src: f.src.clone(),
                    dst: f.dst.clone(),
                    src_ip: f.src_ip,
                    dst_ip: f.dst_ip,
                    qp: f.qp,
                    steer_qp: f.steer_qp,
                    labels: f.labels.clone(),
                    hops: f.hops.clone(),
                    grant_bps: f.accepted_bps,
                }
            })
            .collect();
        let pattern = Arc::new(Pattern {
            shape,
            seq: record.seq,
            priority: record.priority,
            flows,
        });
        job.patterns.push(pattern.clone());
        // The first step pays for the planner's view of the paths, once.
        self.pinned_paths(&pattern);
    }

    /// Drop every pattern with a hop on a directed edge in `down`: its
    /// entries leave the switches with it, and the steps recorded on it are
    /// re-planned by the link change like any reservation. Returns how many
    /// went.
    pub(super) fn drop_patterns_crossing(&mut self, down: &BTreeSet<EdgeId>) -> usize {
        let mut crossing = BTreeMap::new();
        for (j, job) in self.state.jobs.iter().enumerate() {
            for p in &job.patterns {
                let hit = p
                    .flows
                    .iter()
                    .flat_map(|f| f.hops.iter())
                    .any(|h| self.edge_of(h).is_some_and(|e| down.contains(&e)));
                if hit {
                    crossing.entry(j).or_insert_with(Vec::new).push(p.seq);
                }
            }
        }
        let mut dropped = 0;
        for (j, seqs) in crossing {
            let job = &mut self.state.jobs[j];
            job.patterns.retain(|p| !seqs.contains(&p.seq));
            for s in &seqs {
                self.pinned_paths.remove(s);
            }
            dropped += seqs.len();
        }
        dropped
    }

    /// Turn standing patterns on or off (`--standing-patterns`). Off drops
    /// every pattern a state written with them on holds: their entries
    /// go, and the live steps on them keep entries of their own.
    pub fn set_standing_patterns(&mut self, on: bool) {
        self.standing_patterns = on;
        if on {
            return;
        }
        let mut dropped = false;
        for job in self.state.jobs.iter_mut() {
            dropped |= !job.patterns.is_empty();
            job.patterns.clear();
        }
        self.pinned_paths.clear();
        if dropped {
            self.unpin_orphans();
        }
    }

    /// Unpin the flows of live steps riding a pattern that is gone, so
    /// that a re-plan gives them entries of their own.
    pub(super) fn unpin_orphans(&mut self) {
        let orphans: Vec<u64> = self
            .state
            .reservations
            .iter()
            .filter(|r| r.flows.iter().any(|f| f.pinned) && self.pattern_of(r).is_none())
            .map(|r| r.seq)
            .collect();
        for seq in orphans {
            let mut r = self.state.reservations.record_mut(seq);
            for f in r.flows.iter_mut() {
                f.pinned = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::daemon::persistence::state_records::Reservation;

    /// An engine with standing patterns on and the two-server job
    /// registered.
    fn patterned() -> Engine {
        let mut e = engine();
        e.set_standing_patterns(true);
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        e
    }

    /// Step `id` of the job's 16-rank ring: `bytes` from `start` for `dur`
    /// (offsets from `T0`), submitted at `now`.
    fn step(e: &mut Engine, id: &str, bytes: u64, start: u64, dur: u64, now: u64) -> Reservation {
        let mut req = ring(id, 16, start, dur);
        req.collective.as_mut().unwrap().size_bytes = bytes;
        let c = req.validate().unwrap();
        let planned = e.submit_collective(&c, collective_key(&req), now).unwrap();
        std::sync::Arc::unwrap_or_clone(planned.records.into_iter().next().unwrap())
    }

    fn qps_and_labels(r: &Reservation) -> Vec<(u32, Vec<u32>)> {
        r.flows.iter().map(|f| (f.qp, f.labels.to_vec())).collect()
    }

    /// The principal promise: the first step is planned and its entries go
    /// in, for good; a later step of the same shape (other size, other
    /// time) is admitted on the same QPs and paths, and the switches'
    /// state does not change at all, not at its submission, not at its
    /// start, not at its end.
    #[test]
    fn a_repeated_step_is_admitted_on_its_pattern_and_writes_nothing() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        assert_eq!(first.status, Status::Admitted);
        assert!(first.flows.iter().all(|f| f.pinned));
        assert_eq!(e.state.jobs[0].patterns.len(), 1);

        let lead = 10 * MS;
        let mut comp = compiler(e.topo, lead);
        let sr = installer::names::SR_RESERVATION;
        assert_eq!(
            tables(&comp.desired(&e.state, T0).unwrap(), sr),
            16,
            "standing: in before the first window, too"
        );
        assert!(!comp.changes(&e.state, T0).unwrap().is_empty());
        assert!(comp.changes(&e.state, T0 + 90 * MS).unwrap().is_empty());
        assert_eq!(e.expire(T0 + 300 * MS), vec![first.id.clone()]);
        assert!(
            comp.changes(&e.state, T0 + 300 * MS).unwrap().is_empty(),
            "the first step's end removes nothing"
        );

        let second = step(&mut e, "s2", 128 << 20, 400 * MS, 150 * MS, T0 + 310 * MS);
        assert_eq!(second.status, Status::Admitted);
        assert!(second.flows.iter().all(|f| f.pinned));
        assert_eq!(qps_and_labels(&second), qps_and_labels(&first));
        assert_eq!(second.start_unix_ns(), T0 + 400 * MS);
        assert_eq!(second.end_unix_ns(), T0 + 550 * MS);
        for t in [310, 390, 400, 549, 550] {
            assert!(
                comp.changes(&e.state, T0 + t * MS).unwrap().is_empty(),
                "no switch changes at {t} ms"
            );
        }
        assert_eq!(e.expire(T0 + 550 * MS), vec![second.id.clone()]);
        assert_eq!(
            tables(&comp.desired(&e.state, T0 + 600 * MS).unwrap(), sr),
            16
        );
        assert_eq!(e.state.jobs[0].patterns.len(), 1);
    }

    /// Each standing entry is metered at the largest grant a step of the
    /// pattern got: a step granted more raises the meters (the SR entries
    /// are re-laid, same keys, new meters); one granted the same or less
    /// writes nothing.
    #[test]
    fn a_larger_grant_raises_the_pattern_meters_once() {
        let mut e = patterned();
        let sr = installer::names::SR_RESERVATION;
        let meters = |d: &std::collections::BTreeMap<String, installer::intent::Resolved>| {
            let mut m: Vec<i64> = entries_of(d, None, sr)
                .iter()
                .map(|t| t.meter_config.as_ref().expect("metered").cir)
                .collect();
            m.dedup();
            m
        };
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        let grant = first.flows[0].accepted_bps;
        assert!(grant > 0);
        let mut comp = compiler(e.topo, 10 * MS);
        let rate = |bps: u64| installer::policing::meter_of(bps).unwrap().cir;
        assert_eq!(meters(&comp.desired(&e.state, T0).unwrap()), [rate(grant)]);
        assert!(!comp.changes(&e.state, T0).unwrap().is_empty());
        e.expire(T0 + 300 * MS);

        // Twice the bytes in the same time: twice the grant.
        let bigger = step(&mut e, "s2", 512 << 20, 400 * MS, 200 * MS, T0 + 310 * MS);
        assert!(bigger.flows.iter().all(|f| f.pinned));
        let raised = bigger.flows[0].accepted_bps;
        assert!(raised > grant);
        let changed = comp.changes(&e.state, T0 + 310 * MS).unwrap();
        assert!(!changed.is_empty(), "the meters rise");
        assert_eq!(
            meters(&comp.desired(&e.state, T0 + 310 * MS).unwrap()),
            [rate(raised)]
        );
        assert_eq!(
            tables(&comp.desired(&e.state, T0 + 310 * MS).unwrap(), sr),
            16
        );
        e.expire(T0 + 600 * MS);

        // The first size again: the meters stay at the peak, nothing moves.
        let again = step(&mut e, "s3", 256 << 20, 700 * MS, 200 * MS, T0 + 610 * MS);
        assert!(again.flows.iter().all(|f| f.pinned));
        for t in [610, 700, 900] {
            assert!(
                comp.changes(&e.state, T0 + t * MS).unwrap().is_empty(),
                "{t} ms"
            );
        }
    }

    /// The step's window is booked on the pinned paths: a demand that
    /// wants the same links at the same time sees them taken.
    #[test]
    fn a_pinned_step_books_its_window_in_the_ledger() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        e.expire(T0 + 300 * MS);
        let hop = &first.flows[0].hops[1];
        let edge = e.edge_of(hop).unwrap();
        let at = |e: &Engine, t: u64| e.planner.reserved_at(edge, e.to_planner_ns(T0 + t));
        assert_eq!(at(&e, 450), 0, "nothing booked before the step comes");
        let second = step(&mut e, "s2", 256 << 20, 400 * MS, 200 * MS, T0 + 310 * MS);
        let on_edge: u64 = second
            .flows
            .iter()
            .filter(|f| f.hops.iter().any(|h| e.edge_of(h) == Some(edge)))
            .map(|f| f.accepted_bps)
            .sum();
        assert!(on_edge > 0);
        assert_eq!(at(&e, 450 * MS), on_edge);
        assert_eq!(at(&e, 650 * MS), 0, "only its window");
    }

    /// A step too big for its pattern's paths is planned afresh on QPs of
    /// its own, says why, and the job keeps its pattern for the next.
    #[test]
    fn a_step_that_does_not_fit_its_paths_is_planned_on_qps_of_its_own() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        e.expire(T0 + 300 * MS);
        // 40 GB in 200 ms: far more than any link carries.
        let big = step(&mut e, "s2", 40 << 30, 400 * MS, 200 * MS, T0 + 310 * MS);
        assert!(big.flows.iter().all(|f| !f.pinned));
        let theirs: std::collections::BTreeSet<u32> = first.flows.iter().map(|f| f.qp).collect();
        assert!(big.flows.iter().all(|f| !theirs.contains(&f.qp)));
        let advisory = big.advisory.clone().unwrap();
        assert!(
            advisory.contains("not on the job's standing paths"),
            "{advisory}"
        );
        assert_eq!(e.state.jobs[0].patterns.len(), 1, "kept");
        let next = step(&mut e, "s3", 256 << 20, 700 * MS, 200 * MS, T0 + 610 * MS);
        assert!(next.flows.iter().all(|f| f.pinned));
        assert_eq!(qps_and_labels(&next), qps_and_labels(&first));
    }

    /// A link on the pattern's paths goes down: the pattern goes (its
    /// entries with it), the live step is re-planned with entries of its
    /// own, and the next step makes a new pattern around the failure.
    #[test]
    fn a_link_down_on_its_paths_drops_the_pattern() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        let uplink = first.flows[0].hops[0].clone();
        let change = e.set_link(&uplink.switch, u32::from(uplink.port), true, T0 + 50 * MS);
        assert!(change.unwrap().changed);
        assert!(e.state.jobs[0].patterns.is_empty());
        let live = e.state.reservations.find(&first.id).unwrap();
        assert!(live.flows.iter().all(|f| !f.pinned));
        assert!(live.flows.iter().all(|f| f.hops[0] != uplink));
        let mut comp = compiler(e.topo, 10 * MS);
        let d = comp.desired(&e.state, T0 + 90 * MS).unwrap();
        assert_eq!(tables(&d, installer::names::SR_RESERVATION), 16);
        e.expire(T0 + 300 * MS);
        let next = step(&mut e, "s2", 256 << 20, 400 * MS, 200 * MS, T0 + 310 * MS);
        assert!(next.flows.iter().all(|f| f.pinned));
        assert!(next.flows.iter().all(|f| f.hops[0] != uplink));
        assert_eq!(e.state.jobs[0].patterns.len(), 1);
    }

    /// Registering other ranks drops the job's patterns (a live step keeps
    /// entries of its own); the same registration again keeps them.
    #[test]
    fn registering_other_ranks_drops_the_patterns_the_same_keeps_them() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        assert_eq!(e.state.jobs[0].patterns.len(), 1, "same ranks: kept");
        register(&mut e, &["10.0.2.1", "10.0.1.1"]);
        assert!(e.state.jobs[0].patterns.is_empty());
        let live = e.state.reservations.find(&first.id).unwrap();
        assert!(live.flows.iter().all(|f| !f.pinned));
        let mut comp = compiler(e.topo, 10 * MS);
        let sr = installer::names::SR_RESERVATION;
        assert_eq!(
            tables(&comp.desired(&e.state, T0 + 90 * MS).unwrap(), sr),
            16
        );
        assert_eq!(
            tables(&comp.desired(&e.state, T0 + 300 * MS).unwrap(), sr),
            0
        );
    }

    /// Off (the default), nothing is adopted and every step installs its
    /// own entries; turning it off drops what a state holds.
    #[test]
    fn off_no_pattern_is_adopted_and_turning_off_drops_them() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let r = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        assert!(r.flows.iter().all(|f| !f.pinned));
        assert!(e.state.jobs[0].patterns.is_empty());

        let mut e = patterned();
        let r = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        e.set_standing_patterns(false);
        assert!(e.state.jobs[0].patterns.is_empty());
        let live = e.state.reservations.find(&r.id).unwrap();
        assert!(live.flows.iter().all(|f| !f.pinned));
    }

    /// A restart reloads the patterns with the state: the switches' state
    /// is exactly the same (a reconcile writes nothing), and the next step
    /// rides the pattern.
    #[test]
    fn a_restart_keeps_the_pattern_and_its_entries() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        e.expire(T0 + 300 * MS);
        let mut comp = compiler(e.topo, 10 * MS);
        let before = comp.desired(&e.state, T0 + 310 * MS).unwrap();
        let json = serde_json::to_vec(&e.state).unwrap();
        let state = State::from_json(&json, e.topo.name()).unwrap();
        let (mut again, _) = restart(e.topo, state);
        again.set_standing_patterns(true);
        let mut comp = compiler(again.topo, 10 * MS);
        let after = comp.desired(&again.state, T0 + 310 * MS).unwrap();
        assert_eq!(after.len(), before.len());
        for (switch, state) in &after {
            let entities = |s: &installer::intent::Resolved| {
                s.entities
                    .iter()
                    .map(|(k, v)| (k.clone(), v.entity.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(entities(state), entities(&before[switch]), "{switch}");
        }
        let next = step(
            &mut again,
            "s2",
            256 << 20,
            400 * MS,
            200 * MS,
            T0 + 310 * MS,
        );
        assert!(next.flows.iter().all(|f| f.pinned));
        assert_eq!(qps_and_labels(&next), qps_and_labels(&first));
    }

    /// A late start moves a pinned step's booking, not its paths or QPs.
    #[test]
    fn a_late_start_moves_the_booking_not_the_paths() {
        let mut e = patterned();
        let first = step(&mut e, "s1", 256 << 20, 100 * MS, 200 * MS, T0);
        e.expire(T0 + 300 * MS);
        let second = step(&mut e, "s2", 256 << 20, 400 * MS, 200 * MS, T0 + 310 * MS);
        let req = proto::ReportDeviationRequest {
            header: header(),
            reference_unix_ns: T0,
            deviation: Some(proto::WorkloadDeviation {
                target: Some(proto::workload_deviation::Target::CollectiveId("s2".into())),
                change: Some(proto::workload_deviation::Change::LateStart(
                    proto::StartChange {
                        start: Some(proto::start_change::Start::StartOffsetNs(450 * MS)),
                    },
                )),
                observed_unix_ns: 0,
            }),
        };
        let d = req.validate().unwrap();
        let moved = e.deviation(&d, T0 + 320 * MS).unwrap().records.remove(0);
        assert_eq!(moved.id, second.id);
        assert!(moved.flows.iter().all(|f| f.pinned));
        assert_eq!(qps_and_labels(&moved), qps_and_labels(&first));
        assert_eq!(moved.start_unix_ns(), T0 + 450 * MS);
        assert_eq!(moved.revision, second.revision + 1);
    }
}
