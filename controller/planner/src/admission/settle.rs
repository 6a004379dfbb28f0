//! Demands not admitted in full: deferred to a later start, given
//! partial reservations, or rejected; and where the flows left to ECMP go
//! and when they finish.

use crate::demand::Demand;
use crate::ecmp::{ecmp_path, ecmp_path_avoiding, HashKey};
use crate::ledger::Ledger;
use crate::paths::Path;
use crate::topology::EdgeId;

use super::answer::{DemandPlan, Outcome, Reason};
use super::call::{Batch, Work};
use super::planner::{Committed, Planner};

impl<'t> Planner<'t> {
    /// A demand not admitted in full: deferred, partial or rejected.
    pub(super) fn settle(
        &mut self,
        d: &Demand,
        batches: &[Batch],
        w: &mut Work,
        fresh: bool,
        pool: &mut Vec<String>,
    ) {
        let mut reason = w.blocked.take().expect("blocked");
        if d.elastic && matches!(reason, Reason::Bottleneck { .. }) {
            let cands = self.defer_candidates(d);
            let tries = cands.len().min(self.config.max_defer_tries);
            for &s in cands.iter().take(tries) {
                if let Ok((c, m)) = self.try_place(d, batches, s, &mut w.paths) {
                    self.commit_full(d, c, &w.paths, s, fresh, pool);
                    w.method = Some(m);
                    w.shift = s;
                    w.outcome = Some(Outcome::Deferred {
                        requested_start_ns: d.start_ns(),
                        start_ns: d.start_ns() + s,
                    });
                    for (r, f) in w.reserved.iter_mut().zip(&d.flows) {
                        *r = f.rate_bps;
                    }
                    return;
                }
            }
            reason = Reason::NoStartBeforeDeadline {
                deadline_ns: d.deadline_ns,
                tried: tries,
                blocked_by: Box::new(reason),
            };
        }
        if self.config.allow_partial && !matches!(reason, Reason::DeadlineBeforeCompletion { .. }) {
            let c = self.partial(d, batches, &mut w.paths, &mut w.reserved);
            let got = w.reserved.iter().filter(|&&r| r > 0).count();
            let asked: u128 = d.flows.iter().map(|f| f.rate_bps as u128).sum();
            let given: u128 = w.reserved.iter().map(|&r| r as u128).sum();
            if got > 0 {
                w.outcome = Some(Outcome::Partial {
                    reserved_flows: got,
                    flows: d.flows.len(),
                    reserved_fraction: given as f64 / asked.max(1) as f64,
                    reason,
                });
                let e = self.committed.entry(d.id.clone()).or_default();
                e.entries.extend(c.entries);
                e.groups.extend(c.groups);
                // Partial rates fit what was free: they do not move.
                e.placed.clear();
            } else {
                w.outcome = Some(Outcome::Rejected { reason });
            }
            return;
        }
        let reason = if matches!(reason, Reason::Bottleneck { .. }) {
            Reason::DoesNotFit {
                blocked_by: Box::new(reason),
            }
        } else {
            reason
        };
        w.outcome = Some(Outcome::Rejected { reason });
    }

    fn defer_candidates(&self, d: &Demand) -> Vec<u64> {
        let start = d.start_ns();
        let end = d.end_ns();
        let mut offsets: Vec<u64> = d.flows.iter().map(|f| f.start_ns - start).collect();
        offsets.sort_unstable();
        offsets.dedup();
        offsets.truncate(16);
        let mut shifts: Vec<u64> = Vec::new();
        for t in self.ledger.release_times() {
            for &o in &offsets {
                if let Some(s) = t.checked_sub(start + o) {
                    if s > 0 && d.deadline_ns.is_none_or(|dl| end + s <= dl) {
                        shifts.push(s);
                    }
                }
            }
        }
        shifts.sort_unstable();
        shifts.dedup();
        shifts
    }

    fn partial(
        &mut self,
        d: &Demand,
        batches: &[Batch],
        paths: &mut [Path],
        reserved: &mut [u64],
    ) -> Committed {
        let mut c = Committed::default();
        for b in batches {
            let w = b.window;
            self.assign_batch(d, b, w);
            let mut any = false;
            for (k, &i) in b.flows.iter().enumerate() {
                let f = &d.flows[i as usize];
                let p = self.scratch[k];
                let free = p
                    .reserved_edges(self.topo, f.src)
                    .map(|e| self.limit(e).saturating_sub(self.ledger.peak(e, w)))
                    .min()
                    .unwrap_or(0);
                let r = free.min(f.rate_bps);
                let floor = (f.rate_bps as f64 * self.config.min_partial_fraction).ceil() as u64;
                paths[i as usize] = p;
                if r > 0 && r >= floor {
                    for e in p.reserved_edges(self.topo, f.src) {
                        self.ledger.reserve(e, w, r);
                        c.entries.push((e, w, r));
                    }
                    reserved[i as usize] = r;
                    any = true;
                }
            }
            if any {
                self.ledger.open(w);
                c.groups.push(w);
            }
        }
        c
    }

    /// The path the switches' ECMP gives `f`: as described
    /// (`config.switch_hash`) or as Foresight's program hashes, over the
    /// groups that links down leave (unreachable: the plain path, for the
    /// report).
    pub fn ecmp_path_of(&self, f: &crate::Flow) -> Path {
        let key = HashKey::of_flow(f, self.config.ecmp_hash);
        let down = |e: EdgeId| self.down[e as usize];
        let any_down = self.down.iter().any(|d| *d);
        let plain = || ecmp_path(self.topo, f.src, f.dst, &key, &self.seeds);
        match &self.config.switch_hash {
            Some(described) => described
                .path_avoiding(self.topo, f, down)
                .or_else(|| described.path_avoiding(self.topo, f, |_| false))
                .unwrap_or_else(plain),
            None => any_down
                .then(|| ecmp_path_avoiding(self.topo, f.src, f.dst, &key, &self.seeds, down))
                .flatten()
                .unwrap_or_else(plain),
        }
    }

    /// Fallback flows take their ECMP path (the configured hash and seeds) at best-effort priority:
    /// each progresses at its rate scaled by the worst (offered best-effort
    /// load) / (capacity left by reservations) on its path.
    pub(super) fn predict_fallback(
        &self,
        demands: &[Demand],
        plans: &mut [Option<DemandPlan>],
        fallback: &[(usize, usize)],
    ) {
        if fallback.is_empty() {
            return;
        }
        let mut offered = Ledger::new(self.topo.edge_count());
        for &(di, i) in fallback {
            let f = &demands[di].flows[i];
            let p = self.ecmp_path_of(f);
            plans[di].as_mut().unwrap().flows[i].path = p;
            for e in p.reserved_edges(self.topo, f.src) {
                offered.reserve(e, f.window(), f.rate_bps);
            }
        }
        for &(di, i) in fallback {
            let f = &demands[di].flows[i];
            let fp = &mut plans[di].as_mut().unwrap().flows[i];
            let w = f.window();
            let mut slow = 1.0f64;
            for e in fp.path.reserved_edges(self.topo, f.src) {
                let cap = self.topo.edge(e).capacity_bps;
                let left = cap.saturating_sub(self.ledger.peak(e, w));
                if left == 0 {
                    slow = f64::INFINITY;
                    break;
                }
                slow = slow.max(offered.peak(e, w) as f64 / left as f64);
            }
            fp.completion_ns = slow
                .is_finite()
                .then(|| fp.start_ns + (f.duration_ns as f64 * slow).ceil() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::admission::fixtures::*;
    use crate::admission::{Outcome, PlannerConfig, Reason};

    #[test]
    fn elastic_demand_is_deferred_to_when_the_nic_frees_up() {
        let yaml = "demands:
  - {id: first, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 5}
  - {id: later, src: h1, dst: h4, bytes: 1GB, rate_gbps: 80, priority: 1, elastic: true, deadline_ns: 1000000000}
";
        let plan = plan_small(yaml, PlannerConfig::default());
        assert_eq!(plan.order, vec![0, 1]);
        assert_eq!(
            plan.demands[1].outcome,
            Outcome::Deferred {
                requested_start_ns: 0,
                start_ns: 100_000_000
            }
        );
        assert_eq!(plan.demands[1].completion_ns, Some(200_000_000));
    }

    #[test]
    fn elastic_demand_past_deadline_is_partial_with_reason() {
        let yaml = "demands:
  - {id: first, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 5}
  - {id: late, src: h1, dst: h4, bytes: 1GB, rate_gbps: 80, elastic: true, deadline_ns: 150000000}
";
        let plan = plan_small(yaml, PlannerConfig::default());
        match &plan.demands[1].outcome {
            Outcome::Partial {
                reserved_flows: 1,
                reason:
                    Reason::NoStartBeforeDeadline {
                        deadline_ns: Some(150_000_000),
                        blocked_by,
                        ..
                    },
                reserved_fraction,
                ..
            } => {
                // 90G headroom - 80G = 10G free on h1's NIC: 1/8 of the rate.
                assert!((reserved_fraction - 0.125).abs() < 1e-9);
                let s = blocked_by.to_string();
                assert!(
                    s.contains("h1 -> leaf1:1") && s.contains("10.000 Gbit/s free"),
                    "{s}"
                );
            }
            o => panic!("unexpected {o:?}"),
        }
        // Conservative completion at the reserved 10G: 800 ms.
        assert_eq!(plan.demands[1].completion_ns, Some(800_000_000));
    }

    #[test]
    fn rigid_demand_rejected_when_partial_is_off() {
        let yaml = "demands:
  - {id: first, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 5}
  - {id: rigid, src: h2, dst: h3, bytes: 1GB, rate_gbps: 80}
";
        let cfg = PlannerConfig {
            allow_partial: false,
            ..Default::default()
        };
        let plan = plan_small(yaml, cfg);
        match &plan.demands[1].outcome {
            Outcome::Rejected {
                reason: Reason::DoesNotFit { blocked_by },
            } => {
                assert!(
                    blocked_by.to_string().contains("leaf2:1 -> h3"),
                    "{blocked_by}"
                );
            }
            o => panic!("unexpected {o:?}"),
        }
        // ECMP fallback shares h3's downlink with a 80G reservation: 20G left
        // for 80G offered, so 4x slower: 400 ms.
        assert_eq!(plan.demands[1].completion_ns, Some(400_000_000));
        assert!(!plan.demands[1].flows[0].path.is_empty());
    }
}
