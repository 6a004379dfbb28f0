//! One planning call in its phases: the demands in canonical order,
//! admitted in full, exchanged, the set's peak lowered, the rest settled,
//! then the per-flow plans (what it returns is in answer.rs).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::assign::{FlowReq, Method};
use crate::conventions::transfer_ns;
use crate::demand::Demand;
use crate::joint::JointFlow;
use crate::ledger::Window;

use super::answer::{DemandPlan, FlowPlan, JointSummary, Plan};
use super::call::{Batch, JointRun, Work};
use super::planner::Planner;

impl<'t> Planner<'t> {
    /// Plans `demands` as one set on top of what the ledger already holds;
    /// earlier reservations stay where they are.
    pub fn plan(&mut self, demands: &[Demand]) -> Plan {
        self.plan_moving(demands, &[])
    }

    /// Plans `demands` as one set (see the module doc for the objective).
    /// The earlier reservations named in `movable` (ids planned or
    /// restored before) may change paths — never windows or rates — when
    /// that admits a demand or lowers the peak; [`Plan::moved`] says which
    /// flows moved and why. Reservations of more than `joint_max_flows`
    /// flows, or partial ones, never move.
    pub fn plan_moving(&mut self, demands: &[Demand], movable: &[&str]) -> Plan {
        let deadline = Instant::now() + Duration::from_micros(self.config.joint_budget_us);
        let order = Self::canonical_order(demands);
        let mut pool = self.movable_pool(movable);
        let before = self.paths_of(&pool);
        let mut run = JointRun {
            deadline,
            summary: JointSummary::default(),
            causes: HashMap::new(),
        };
        let mut work: Vec<Work> = demands.iter().map(|d| Work::new(d.flows.len())).collect();
        let batches: Vec<Vec<Batch>> = demands.iter().map(Self::batches).collect();
        // Only a demand whose id holds nothing yet can be moved as a whole.
        let fresh: Vec<bool> = demands
            .iter()
            .map(|d| !self.committed.contains_key(&d.id))
            .collect();
        for &di in &order {
            let (d, w) = (&demands[di], &mut work[di]);
            self.admit_in_full(d, &batches[di], w, fresh[di], &mut pool, &mut run);
        }
        self.exchange(
            demands, &batches, &order, &fresh, &mut work, &mut pool, &mut run,
        );
        self.lower_pool_peak(&pool, movable, &mut run);
        for &di in &order {
            if work[di].blocked.is_some() {
                let (d, w) = (&demands[di], &mut work[di]);
                self.settle(d, &batches[di], w, fresh[di], &mut pool);
            }
        }
        self.take_back_moved_paths(demands, &fresh, &mut work);
        let moved = self.moved_since(&before, movable, &run.causes);
        let mut plan = self.finish(demands, work);
        plan.order = order;
        plan.moved = moved;
        plan.joint = run.summary;
        plan
    }

    /// Each fresh demand takes back its flows' paths from its record, where
    /// joint placement may have moved them. Demands that repeat an id share
    /// one record (their flows appended one after the other), so a placed
    /// flow is matched by its index and the flow itself, and taken once: a
    /// demand never takes another's paths.
    fn take_back_moved_paths(&self, demands: &[Demand], fresh: &[bool], work: &mut [Work]) {
        let mut taken: HashMap<&str, Vec<bool>> = HashMap::new();
        for (di, d) in demands.iter().enumerate() {
            let w = &mut work[di];
            if !fresh[di] || w.reserved.iter().all(|&r| r == 0) {
                continue;
            }
            let Some(c) = self.committed.get(&d.id) else {
                continue;
            };
            let used = taken
                .entry(d.id.as_str())
                .or_insert_with(|| vec![false; c.placed.len()]);
            let mut claimed = vec![false; d.flows.len()];
            for (k, p) in c.placed.iter().enumerate() {
                let i = p.index as usize;
                let Some(f) = d.flows.get(i) else {
                    continue;
                };
                let own = JointFlow {
                    src: f.src,
                    dst: f.dst,
                    rate_bps: f.rate_bps,
                    window: f.window().shifted(w.shift),
                };
                if !used[k] && p.flow == own && !claimed[i] {
                    used[k] = true;
                    claimed[i] = true;
                    w.paths[i] = p.path;
                }
            }
        }
    }

    /// Priority (higher first), bytes (larger first), start (earlier
    /// first), id, then input position (only for repeated ids).
    fn canonical_order(demands: &[Demand]) -> Vec<usize> {
        let bytes: Vec<u128> = demands
            .iter()
            .map(|d| d.flows.iter().map(|f| f.bytes as u128).sum())
            .collect();
        let mut order: Vec<usize> = (0..demands.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&demands[a], &demands[b]);
            y.priority
                .cmp(&x.priority)
                .then(bytes[b].cmp(&bytes[a]))
                .then(x.start_ns().cmp(&y.start_ns()))
                .then(x.id.cmp(&y.id))
                .then(a.cmp(&b))
        });
        order
    }

    fn batches(d: &Demand) -> Vec<Batch> {
        let mut index: HashMap<(u64, u64, u64), usize> = HashMap::new();
        let mut out: Vec<Batch> = Vec::new();
        let mut last: Option<((u64, u64, u64), usize)> = None;
        for (i, f) in d.flows.iter().enumerate() {
            let key = (f.start_ns, f.end_ns(), f.rate_bps);
            let b = match last {
                Some((k, b)) if k == key => b,
                _ => *index.entry(key).or_insert_with(|| {
                    out.push(Batch {
                        window: f.window(),
                        flows: Vec::new(),
                    });
                    out.len() - 1
                }),
            };
            out[b].flows.push(i as u32);
            last = Some((key, b));
        }
        out.sort_by_key(|b| b.window);
        out
    }

    /// Paths for batch `b` of `d` in window `w` (its own, or shifted) on
    /// the current ledger, left in `self.scratch` in `b.flows` order;
    /// nothing is reserved. Placing in full, partially and the start of a
    /// joint search all begin with this step, then differ in what they
    /// reserve.
    pub(super) fn assign_batch(&mut self, d: &Demand, b: &Batch, w: Window) -> Method {
        self.reqs.clear();
        self.reqs.extend(b.flows.iter().map(|&i| {
            let f = &d.flows[i as usize];
            FlowReq {
                src: f.src,
                dst: f.dst,
                rate_bps: f.rate_bps,
            }
        }));
        self.assigner.assign(
            self.topo,
            self.clos.as_ref(),
            &self.ledger,
            w,
            &self.reqs,
            &mut self.scratch,
        )
    }

    /// Per-flow plans, ECMP predictions for what fell back, completions.
    fn finish(&self, demands: &[Demand], work: Vec<Work>) -> Plan {
        let mut plans: Vec<Option<DemandPlan>> = vec![None; demands.len()];
        let mut fallback: Vec<(usize, usize)> = Vec::new();
        for (di, (d, w)) in demands.iter().zip(work).enumerate() {
            let flows: Vec<FlowPlan> = d
                .flows
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let r = w.reserved[i];
                    let start = f.start_ns + w.shift;
                    FlowPlan {
                        path: w.paths[i],
                        reserved_bps: r,
                        start_ns: start,
                        completion_ns: if r == f.rate_bps {
                            Some(start + f.duration_ns)
                        } else if r > 0 {
                            Some(start + transfer_ns(f.bytes, r))
                        } else {
                            None
                        },
                    }
                })
                .collect();
            for (i, fp) in flows.iter().enumerate() {
                if fp.reserved_bps == 0 {
                    fallback.push((di, i));
                }
            }
            plans[di] = Some(DemandPlan {
                demand: di,
                outcome: w.outcome.expect("every demand settled"),
                shift_ns: w.shift,
                flows,
                completion_ns: None,
                method: w.method,
            });
        }
        self.predict_fallback(demands, &mut plans, &fallback);
        let demands_out: Vec<DemandPlan> = plans
            .into_iter()
            .map(|p| {
                let mut p = p.expect("every demand planned");
                p.completion_ns = p
                    .flows
                    .iter()
                    .map(|f| f.completion_ns)
                    .try_fold(0u64, |m, c| c.map(|c| m.max(c)));
                p
            })
            .collect();
        Plan {
            demands: demands_out,
            order: Vec::new(),
            moved: Vec::new(),
            joint: JointSummary::default(),
        }
    }
}

#[cfg(test)]
mod tests {

    use crate::admission::fixtures::*;
    use crate::admission::Outcome;
    use crate::demand::load_str;
    use crate::topology::NodeRef;

    /// Demands that repeat an id share one reservation record; each still
    /// gets paths that take its own flows to their own destinations.
    #[test]
    fn demands_repeating_an_id_keep_their_own_paths() {
        let t = two_by_five();
        let mut d = load_str(
            &t,
            "demands:\n  - {id: a, src: h1, dst: h6, bytes: 1GB, rate_gbps: 30}\n  - {id: b, src: h2, dst: h9, bytes: 1GB, rate_gbps: 30}\n",
            0.9,
        )
        .unwrap();
        d[1].id = d[0].id.clone();
        let plan = planner(&t).plan(&d);
        for (dm, dp) in d.iter().zip(&plan.demands) {
            for (f, fp) in dm.flows.iter().zip(&dp.flows) {
                assert_eq!(fp.reserved_bps, f.rate_bps, "{:?}", dp.outcome);
                let last = *fp.path.edges().last().expect("a path");
                assert_eq!(
                    t.edge(last).to,
                    NodeRef::Host(f.dst),
                    "the flow to {} follows {:?}",
                    f.dst,
                    fp.path
                );
            }
        }
    }

    #[test]
    fn input_order_does_not_change_the_plan() {
        let t = two_by_five();
        let d = load_str(&t, LPT_TRAP, 0.9).unwrap();
        let mut rng = crate::rng::Rng::new(5);
        let mut reference: Option<(Vec<Outcome>, f64)> = None;
        for _ in 0..10 {
            let mut shuffled = d.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let mut p = planner(&t);
            let plan = p.plan(&shuffled);
            let mut by_id: Vec<(String, Outcome)> = shuffled
                .iter()
                .zip(&plan.demands)
                .map(|(dm, dp)| (dm.id.clone(), dp.outcome.clone()))
                .collect();
            by_id.sort_by(|a, b| a.0.cmp(&b.0));
            let got = (
                by_id.into_iter().map(|x| x.1).collect(),
                uplink_peak(&t, &p),
            );
            match &reference {
                None => reference = Some(got),
                Some(r) => assert_eq!(r, &got),
            }
        }
    }
}
