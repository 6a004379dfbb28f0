//! Admission in full at the requested start: on top of what the set
//! placed so far (batch by batch, [`crate::assign`]), else jointly with
//! what may move ([`super::moving`]); then exchanges within a priority
//! class that admit more of its bytes.

use std::time::Instant;

use crate::assign::Method;
use crate::conventions::bps_to_gbps;
use crate::demand::Demand;
use crate::joint::{self, JointFlow};
use crate::paths::Path;
use crate::topology::EdgeId;

use super::answer::{Outcome, Reason};
use super::call::{Batch, JointRun, Work};
use super::planner::{Committed, Placed, Planner};

/// Admitted demands tried as the one to take out for a left-out demand.
const MAX_EXCHANGE_TAKERS: usize = 4;

/// Exchanges stop once the call's joint searches have spent this many
/// times `joint_evaluations`.
const EXCHANGE_EVALUATIONS_PER_FLOW_BUDGET: u64 = 4;

impl<'t> Planner<'t> {
    /// Why a demand cannot be reserved in full whatever the paths.
    fn precheck(&self, d: &Demand) -> Option<Reason> {
        if let Some(r) = self.nic_check(d) {
            return Some(r);
        }
        d.deadline_ns
            .filter(|&dl| d.end_ns() > dl)
            .map(|dl| Reason::DeadlineBeforeCompletion {
                deadline_ns: dl,
                completion_ns: d.end_ns(),
            })
    }

    fn nic_check(&self, d: &Demand) -> Option<Reason> {
        for f in &d.flows {
            for e in [
                self.topo.host_up_edge(f.src),
                self.topo.host_down_edge(f.dst),
            ] {
                let limit = self.limit(e);
                if f.rate_bps > limit {
                    return Some(Reason::ExceedsNic {
                        link: self.topo.describe_edge(e),
                        rate_gbps: bps_to_gbps(f.rate_bps),
                        limit_gbps: bps_to_gbps(limit),
                    });
                }
            }
        }
        None
    }

    /// Admits `d` in full at its requested start if it fits: on top of
    /// the set so far, else by re-placing it jointly with the pool.
    pub(super) fn admit_in_full(
        &mut self,
        d: &Demand,
        batches: &[Batch],
        w: &mut Work,
        fresh: bool,
        pool: &mut Vec<String>,
        run: &mut JointRun,
    ) {
        if let Some(r) = self.precheck(d) {
            w.blocked = Some(r);
            return;
        }
        match self.try_place(d, batches, 0, &mut w.paths) {
            Ok((mut c, m)) => {
                c.coloured_alone = batches.len() == 1 && m == Method::Colouring;
                w.method = Some(m);
                self.commit_full(d, c, &w.paths, 0, fresh, pool);
            }
            Err(reason) => {
                let joint_flows: usize = d.flows.len()
                    + pool
                        .iter()
                        .map(|id| self.committed[id].placed.len())
                        .sum::<usize>();
                if !fresh || pool.is_empty() || joint_flows > self.config.joint_max_flows {
                    w.blocked = Some(reason);
                    return;
                }
                match self.admit_jointly(d, batches, pool, reason, run) {
                    Ok(paths) => {
                        w.paths = paths;
                        w.method = Some(Method::Joint);
                        run.summary.admitted_by_moving.push(d.id.clone());
                        pool.push(d.id.clone());
                    }
                    Err(r) => {
                        w.blocked = Some(r);
                        return;
                    }
                }
            }
        }
        w.outcome = Some(Outcome::Admitted);
        for (r, f) in w.reserved.iter_mut().zip(&d.flows) {
            *r = f.rate_bps;
        }
    }

    /// Places all batches at `shift`; on success the reservations are in the
    /// ledger and the paths in `paths`.
    pub(super) fn try_place(
        &mut self,
        d: &Demand,
        batches: &[Batch],
        shift: u64,
        paths: &mut [Path],
    ) -> Result<(Committed, Method), Reason> {
        let mut c = Committed::default();
        let mut method = Method::Colouring;
        let mut largest = 0;
        for b in batches {
            let w = b.window.shifted(shift);
            let m = self.assign_batch(d, b, w);
            if b.flows.len() > largest {
                largest = b.flows.len();
                method = m;
            }
            let mut worst: Option<(i128, EdgeId, u64, u64)> = None;
            for (e, add) in self.assigner.added() {
                let peak = self.ledger.peak(e, w);
                let limit = self.limit(e);
                let over = (peak + add) as i128 - limit as i128;
                if over > 0 && worst.is_none_or(|x| over > x.0) {
                    worst = Some((over, e, limit.saturating_sub(peak), add));
                }
            }
            if let Some((_, e, free, need)) = worst {
                self.rollback(&c);
                return Err(Reason::Bottleneck {
                    link: self.topo.describe_edge(e),
                    start_ns: w.start_ns,
                    end_ns: w.end_ns,
                    free_gbps: bps_to_gbps(free),
                    needed_gbps: bps_to_gbps(need),
                });
            }
            c.entries.reserve(self.assigner.added().len());
            for (e, add) in self.assigner.added() {
                self.ledger.reserve(e, w, add);
                c.entries.push((e, w, add));
            }
            self.ledger.open(w);
            c.groups.push(w);
            for (k, &i) in b.flows.iter().enumerate() {
                paths[i as usize] = self.scratch[k];
            }
        }
        Ok((c, method))
    }

    /// Records a full reservation made by [`Planner::try_place`] (its
    /// ledger entries are in `c`), with its flows and paths when it may move.
    pub(super) fn commit_full(
        &mut self,
        d: &Demand,
        mut c: Committed,
        paths: &[Path],
        shift: u64,
        fresh: bool,
        pool: &mut Vec<String>,
    ) {
        let movable = fresh && d.flows.len() <= self.config.joint_max_flows;
        if movable {
            c.placed = d
                .flows
                .iter()
                .zip(paths)
                .enumerate()
                .map(|(i, (f, &path))| Placed {
                    index: i as u32,
                    flow: JointFlow {
                        src: f.src,
                        dst: f.dst,
                        rate_bps: f.rate_bps,
                        window: f.window().shifted(shift),
                    },
                    path,
                })
                .collect();
            pool.push(d.id.clone());
        }
        let e = self.committed.entry(d.id.clone()).or_default();
        e.entries.extend(c.entries);
        e.groups.extend(c.groups);
        e.placed.extend(c.placed);
        e.coloured_alone = c.coloured_alone;
    }

    /// Exchanges that admit more bytes of a priority class: for a demand
    /// of the class left out by a link it shares with admitted demands of
    /// the class, each such admitted demand in turn (smallest first) is taken out,
    /// the left-out demands of the class are tried again in order (the one
    /// taken out last), and the exchange is kept when the class then holds
    /// more bytes. Higher classes are never touched; lower ones keep what
    /// they hold (their paths may move).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn exchange(
        &mut self,
        demands: &[Demand],
        batches: &[Vec<Batch>],
        order: &[usize],
        fresh: &[bool],
        work: &mut [Work],
        pool: &mut Vec<String>,
        run: &mut JointRun,
    ) {
        let bytes = |di: usize| -> u128 { demands[di].flows.iter().map(|f| f.bytes as u128).sum() };
        let max_flows = self.config.joint_max_flows;
        let movable_size = |di: usize| demands[di].flows.len() <= max_flows;
        let eligible = |di: usize, w: &Work| {
            fresh[di] && movable_size(di) && matches!(w.blocked, Some(Reason::Bottleneck { .. }))
        };
        let mut exchanged = false;
        for class in order.chunk_by(|&a, &b| demands[a].priority == demands[b].priority) {
            // What a higher class gave back may now admit demands of this one.
            if exchanged {
                for &q in class {
                    if eligible(q, &work[q]) && !self.exchange_budget_spent(run) {
                        let mut w = Work::new(demands[q].flows.len());
                        self.admit_in_full(&demands[q], &batches[q], &mut w, true, pool, run);
                        if w.outcome.is_some() {
                            work[q] = w;
                        }
                    }
                }
            }
            for &r in class {
                if !eligible(r, &work[r]) || self.exchange_budget_spent(run) {
                    continue;
                }
                let reach = self.edges_near(&demands[r], &batches[r]);
                let mut takers: Vec<usize> = class
                    .iter()
                    .copied()
                    .filter(|&a| {
                        work[a].outcome == Some(Outcome::Admitted)
                            && fresh[a]
                            && pool.contains(&demands[a].id)
                            && self.committed[&demands[a].id].placed.iter().any(|p| {
                                p.path
                                    .reserved_edges(self.topo, p.flow.src)
                                    .any(|e| reach.contains(&e))
                            })
                    })
                    .collect();
                takers.sort_by_key(|&a| (bytes(a), a));
                takers.truncate(MAX_EXCHANGE_TAKERS);
                for a in takers {
                    if self.exchange_budget_spent(run) {
                        break;
                    }
                    let retry: Vec<usize> = std::iter::once(r)
                        .chain(
                            class
                                .iter()
                                .copied()
                                .filter(|&q| q != r && eligible(q, &work[q])),
                        )
                        .chain(std::iter::once(a))
                        .collect();
                    let a_saved = self.committed[&demands[a].id].clone();
                    let causes_saved = run.causes.clone();
                    self.release(&demands[a].id);
                    pool.retain(|id| id != &demands[a].id);
                    let pool_before = pool.clone();
                    let saved = self.save_pool(pool);
                    let mut tried: Vec<(usize, Work)> = Vec::new();
                    for &q in &retry {
                        let d = &demands[q];
                        let mut w = Work::new(d.flows.len());
                        self.admit_in_full(d, &batches[q], &mut w, true, pool, run);
                        tried.push((q, w));
                    }
                    let gained: u128 = tried
                        .iter()
                        .filter(|(q, w)| *q != a && w.outcome.is_some())
                        .map(|(q, _)| bytes(*q))
                        .sum();
                    let a_back = tried.iter().any(|(q, w)| *q == a && w.outcome.is_some());
                    let lost = if a_back { 0 } else { bytes(a) };
                    if gained > lost {
                        for (q, w) in tried {
                            // Admitted now, or the one taken out (with why it
                            // no longer fits); the others keep their reason.
                            if w.outcome.is_some() || q == a {
                                work[q] = w;
                            }
                        }
                        exchanged = true;
                        if !eligible(r, &work[r]) {
                            break;
                        }
                        continue;
                    }
                    // Undo: what the retries admitted goes, the pool and
                    // the demand taken out come back as they were.
                    for (q, w) in &tried {
                        if w.outcome.is_some() {
                            self.release(&demands[*q].id);
                        }
                    }
                    *pool = pool_before;
                    self.restore_saved(saved);
                    run.causes = causes_saved;
                    let id = demands[a].id.clone();
                    let mut c = a_saved;
                    c.entries.clear();
                    for &g in &c.groups {
                        self.ledger.open(g);
                    }
                    self.committed.insert(id.clone(), c);
                    self.rereserve(&id);
                    pool.push(id);
                }
            }
        }
    }

    fn exchange_budget_spent(&self, run: &JointRun) -> bool {
        run.summary.evaluations
            >= EXCHANGE_EVALUATIONS_PER_FLOW_BUDGET.saturating_mul(self.config.joint_evaluations)
            || Instant::now() >= run.deadline
    }

    /// Edges `d`'s flows would load if placed now, on any of their paths.
    fn edges_near(&mut self, d: &Demand, batches: &[Batch]) -> std::collections::HashSet<EdgeId> {
        let init = self.initial_paths(d, batches);
        let mut out = std::collections::HashSet::new();
        for (f, p) in d.flows.iter().zip(&init) {
            out.extend(p.reserved_edges(self.topo, f.src));
            for q in crate::paths::all_paths(self.topo, f.src, f.dst, joint::MAX_CANDIDATES) {
                out.extend(q.edges().iter().copied());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {

    use crate::admission::fixtures::*;
    use crate::admission::{Outcome, PlannerConfig, Reason};
    use crate::demand::load_str;

    #[test]
    fn admits_what_fits_and_never_exceeds_headroom() {
        let t = small();
        let d = load_str(&t, "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80}\n  - {id: b, src: h2, dst: h4, bytes: 1GB, rate_gbps: 80}\n", 0.9).unwrap();
        let mut p = planner(&t);
        let plan = p.plan(&d);
        for dp in &plan.demands {
            assert_eq!(dp.outcome, Outcome::Admitted);
            assert_eq!(dp.completion_ns, Some(100_000_000));
        }
        // The two flows take different spines.
        assert_ne!(
            plan.demands[0].flows[0].path.edges()[0],
            plan.demands[1].flows[0].path.edges()[0]
        );
        for e in 0..t.edge_count() as u32 {
            assert!(p.ledger().max(e) as f64 <= 0.9 * t.edge(e).capacity_bps as f64);
        }
    }

    #[test]
    fn deadline_and_nic_reasons() {
        let yaml = "demands:
  - {id: dl, src: h1, dst: h3, bytes: 1GB, rate_gbps: 10, deadline_ns: 100}
  - {id: fat, src: h2, dst: h4, bytes: 1GB, rate_gbps: 95}
";
        let plan = plan_small(yaml, PlannerConfig::default());
        assert!(matches!(
            &plan.demands[0].outcome,
            Outcome::Rejected {
                reason: Reason::DeadlineBeforeCompletion {
                    deadline_ns: 100,
                    completion_ns: 800_000_000
                }
            }
        ));
        match &plan.demands[1].outcome {
            Outcome::Partial {
                reason: Reason::ExceedsNic { limit_gbps, .. },
                ..
            } => assert!((limit_gbps - 90.0).abs() < 1e-9),
            o => panic!("unexpected {o:?}"),
        }
    }

    #[test]
    fn priority_wins_the_contended_link() {
        let yaml = "demands:
  - {id: low, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 1}
  - {id: high, src: h2, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 7}
";
        let plan = plan_small(yaml, PlannerConfig::default());
        assert_eq!(plan.demands[1].outcome, Outcome::Admitted);
        assert!(matches!(plan.demands[0].outcome, Outcome::Partial { .. }));
    }
}
