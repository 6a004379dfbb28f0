//! Moving reservations (paths only, never windows or rates): the joint
//! search over the pool of what may move, to admit a demand
//! ([`Planner::plan_moving`]) or to lower the peak
//! ([`Planner::reoptimize`]), recording what moved and why ([`super::Moved`]).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::conventions::bps_to_gbps;
use crate::demand::Demand;
use crate::joint::{self, Effort, Fabric, JointFlow, JointResult};
use crate::paths::Path;

use super::answer::{JointSummary, MoveCause, Moved, MovedFlow, Reason, Reoptimized};
use super::call::{Batch, JointRun};
use super::planner::{Committed, Placed, Planner};

impl<'t> Planner<'t> {
    /// Re-places the reservations named in `movable` jointly (paths only)
    /// when that lowers their links' peak utilisation — after a
    /// cancellation freed capacity, or a link went down under some of them.
    pub fn reoptimize(&mut self, movable: &[&str]) -> Reoptimized {
        let pool = self.movable_pool(movable);
        let before = self.paths_of(&pool);
        let mut run = JointRun {
            deadline: Instant::now() + Duration::from_micros(self.config.joint_budget_us),
            summary: JointSummary::default(),
            causes: HashMap::new(),
        };
        self.lower_pool_peak(&pool, movable, &mut run);
        Reoptimized {
            moved: self.moved_since(&before, movable, &run.causes),
            peak_before: run.summary.peak_before,
            peak_after: run.summary.peak_after,
            evaluations: run.summary.evaluations,
            cut_short: run.summary.cut_short,
        }
    }

    /// The ids of `movable` that hold flows that can move.
    pub(super) fn movable_pool(&self, movable: &[&str]) -> Vec<String> {
        let mut seen = HashSet::with_capacity(movable.len());
        movable
            .iter()
            .filter(|id| {
                self.committed
                    .get(**id)
                    .is_some_and(|c| !c.placed.is_empty())
            })
            .filter(|id| seen.insert(**id))
            .map(|id| id.to_string())
            .collect()
    }

    pub(super) fn paths_of(&self, ids: &[String]) -> Vec<(String, Vec<Path>)> {
        ids.iter()
            .map(|id| {
                let c = &self.committed[id];
                (id.clone(), c.placed.iter().map(|p| p.path).collect())
            })
            .collect()
    }

    pub(super) fn moved_since(
        &self,
        before: &[(String, Vec<Path>)],
        movable: &[&str],
        causes: &HashMap<String, Vec<MoveCause>>,
    ) -> Vec<Moved> {
        let movable: HashSet<&str> = movable.iter().copied().collect();
        let mut out = Vec::new();
        for (id, old) in before {
            if !movable.contains(id.as_str()) {
                continue;
            }
            let Some(c) = self.committed.get(id) else {
                continue;
            };
            let flows: Vec<MovedFlow> = c
                .placed
                .iter()
                .zip(old)
                .filter(|(p, o)| p.path != **o)
                .map(|(p, o)| MovedFlow {
                    index: p.index as usize,
                    from: *o,
                    to: p.path,
                })
                .collect();
            if !flows.is_empty() {
                out.push(Moved {
                    id: id.clone(),
                    flows,
                    causes: causes.get(id).cloned().unwrap_or_default(),
                });
            }
        }
        out
    }

    /// `d`'s flows placed batch by batch on the current ledger, without
    /// reserving: where the joint search starts them.
    pub(super) fn initial_paths(&mut self, d: &Demand, batches: &[Batch]) -> Vec<Path> {
        let mut paths = vec![Path::EMPTY; d.flows.len()];
        for b in batches {
            self.assign_batch(d, b, b.window);
            for (k, &i) in b.flows.iter().enumerate() {
                paths[i as usize] = self.scratch[k];
            }
        }
        paths
    }

    /// Takes the pool's flows out of the ledger and searches one
    /// assignment for them and `extra` (starting at `extra_init`), until
    /// the peak is at most `good_enough` or the effort is spent. The
    /// pool stays out of the ledger: the caller applies or restores.
    fn search_pool(
        &mut self,
        pool: &[String],
        extra: &[JointFlow],
        extra_init: &[Path],
        good_enough: f64,
        run: &mut JointRun,
    ) -> JointResult {
        let mut flows = Vec::new();
        let mut init = Vec::new();
        for id in pool {
            self.unreserve(id);
            for p in &self.committed[id].placed {
                flows.push(p.flow);
                init.push(p.path);
            }
        }
        flows.extend_from_slice(extra);
        init.extend_from_slice(extra_init);
        let limits: Vec<u64> = (0..self.topo.edge_count() as u32)
            .map(|e| self.limit(e))
            .collect();
        let fab = Fabric {
            topo: self.topo,
            ledger: &self.ledger,
            limits: &limits,
            down: &self.down,
        };
        let r = joint::solve(
            fab,
            &flows,
            &init,
            Effort {
                evaluations: self.config.joint_evaluations,
                kicks: flows.len().min(32) as u32,
                good_enough,
                deadline: Some(run.deadline),
            },
        );
        run.summary.searches += 1;
        run.summary.evaluations += r.evaluations;
        run.summary.cut_short |= r.cut_short;
        r
    }

    /// Puts the pool back in the ledger: with `paths` (pool order) when
    /// given, recording `cause` for those that changed; else as it was.
    fn restore_pool(
        &mut self,
        pool: &[String],
        paths: Option<&[Path]>,
        cause: &MoveCause,
        run: &mut JointRun,
    ) {
        let mut k = 0;
        for id in pool {
            if let Some(paths) = paths {
                let c = self.committed.get_mut(id).expect("pool ids are committed");
                let mut changed = false;
                for p in &mut c.placed {
                    changed |= p.path != paths[k];
                    p.path = paths[k];
                    k += 1;
                }
                if changed {
                    run.causes
                        .entry(id.clone())
                        .or_default()
                        .push(cause.clone());
                }
            }
            self.rereserve(id);
        }
    }

    /// Admits `d` by placing it jointly with the pool, if that fits; else
    /// the link that binds in the best assignment found (or `incremental`,
    /// what blocked it on top of the pool, when `d` is not on that link).
    pub(super) fn admit_jointly(
        &mut self,
        d: &Demand,
        batches: &[Batch],
        pool: &[String],
        incremental: Reason,
        run: &mut JointRun,
    ) -> Result<Vec<Path>, Reason> {
        let init = self.initial_paths(d, batches);
        let extra: Vec<JointFlow> = d
            .flows
            .iter()
            .map(|f| JointFlow {
                src: f.src,
                dst: f.dst,
                rate_bps: f.rate_bps,
                window: f.window(),
            })
            .collect();
        // Any assignment that fits admits it; the peak is lowered afterwards.
        let fits = self.config.headroom * (1.0 - 1e-9);
        let r = self.search_pool(pool, &extra, &init, fits, run);
        let pooled = r.paths.len() - extra.len();
        if let Some(o) = r.overload {
            self.restore_pool(
                pool,
                None,
                &MoveCause::Admit {
                    demand: d.id.clone(),
                },
                run,
            );
            // In the best assignment found, what `d` puts on the link and
            // what the others leave it there.
            let need: u64 = extra
                .iter()
                .zip(&r.paths[pooled..])
                .filter(|(f, p)| {
                    f.window.start_ns < o.window.end_ns
                        && o.window.start_ns < f.window.end_ns
                        && p.reserved_edges(self.topo, f.src).any(|e| e == o.edge)
                })
                .map(|(f, _)| f.rate_bps)
                .sum();
            if need == 0 {
                return Err(incremental);
            }
            return Err(Reason::Bottleneck {
                link: self.topo.describe_edge(o.edge),
                start_ns: o.window.start_ns,
                end_ns: o.window.end_ns,
                free_gbps: bps_to_gbps(o.free_bps.saturating_sub(o.need_bps - need)),
                needed_gbps: bps_to_gbps(need),
            });
        }
        let cause = MoveCause::Admit {
            demand: d.id.clone(),
        };
        self.restore_pool(pool, Some(&r.paths[..pooled]), &cause, run);
        let paths = r.paths[pooled..].to_vec();
        let mut c = Committed::default();
        for (i, (f, &path)) in extra.iter().zip(&paths).enumerate() {
            c.placed.push(Placed {
                index: i as u32,
                flow: *f,
                path,
            });
            if !c.groups.contains(&f.window) {
                c.groups.push(f.window);
                self.ledger.open(f.window);
            }
        }
        self.committed.insert(d.id.clone(), c);
        self.rereserve(&d.id);
        Ok(paths)
    }

    /// Re-places the pool jointly when that lowers its peak utilisation.
    pub(super) fn lower_pool_peak(
        &mut self,
        pool: &[String],
        movable: &[&str],
        run: &mut JointRun,
    ) {
        let flows: usize = pool.iter().map(|id| self.committed[id].placed.len()).sum();
        // One coloured batch is optimal on its own, unless links went down since.
        let alone_optimal = pool.len() == 1
            && self.committed[&pool[0]].coloured_alone
            && !self.down.iter().any(|&d| d);
        if flows == 0 || alone_optimal || flows > self.config.joint_max_flows {
            return;
        }
        let r = self.search_pool(pool, &[], &[], 0.0, run);
        run.summary.peak_before = Some(r.start_peak);
        // Earlier reservations move only for a lower peak; the set's own
        // flows are not installed anywhere yet and take any better spread.
        let movable: HashSet<&str> = movable.iter().copied().collect();
        let earlier = pool.iter().any(|id| movable.contains(id.as_str()));
        let better = r.peak < r.start_peak - 1e-12 || !earlier;
        if r.fits() && better {
            run.summary.peak_after = Some(r.peak);
            let cause = MoveCause::LowerPeak {
                from: r.start_peak,
                to: r.peak,
            };
            self.restore_pool(pool, Some(&r.paths), &cause, run);
        } else {
            run.summary.peak_after = Some(r.start_peak);
            self.restore_pool(
                pool,
                None,
                &MoveCause::LowerPeak { from: 0.0, to: 0.0 },
                run,
            );
        }
    }

    /// The pool's placed flows, to come back to.
    pub(super) fn save_pool(&self, pool: &[String]) -> Vec<(String, Vec<Placed>)> {
        pool.iter()
            .map(|id| (id.clone(), self.committed[id].placed.clone()))
            .collect()
    }

    pub(super) fn restore_saved(&mut self, saved: Vec<(String, Vec<Placed>)>) {
        for (id, placed) in saved {
            self.unreserve(&id);
            self.committed
                .get_mut(&id)
                .expect("pool ids are committed")
                .placed = placed;
            self.rereserve(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::fixtures::*;
    use crate::admission::{MoveCause, Outcome, PlannerConfig};
    use crate::demand::load_str;

    #[test]
    fn a_set_is_placed_jointly_not_in_sequence() {
        let t = two_by_five();
        let d = load_str(&t, LPT_TRAP, 0.9).unwrap();
        let mut joint = planner(&t);
        let plan = joint.plan(&d);
        assert!(plan.demands.iter().all(|p| p.outcome == Outcome::Admitted));
        assert!(
            (uplink_peak(&t, &joint) - 0.6).abs() < 1e-9,
            "{}",
            uplink_peak(&t, &joint)
        );
        assert!(plan.moved.is_empty(), "nothing earlier may move");
        assert!(plan.joint.peak_after.unwrap() < plan.joint.peak_before.unwrap());
        // The paths reported are the ones reserved.
        for (dp, dm) in plan.demands.iter().zip(&d) {
            let up = dp.flows[0].path.edges()[0];
            assert!(joint.ledger().max(up) >= dm.flows[0].rate_bps);
        }
        let mut sequential = Planner::new(
            &t,
            PlannerConfig {
                joint_max_flows: 0,
                ..Default::default()
            },
        );
        sequential.plan(&d);
        assert!((uplink_peak(&t, &sequential) - 0.7).abs() < 1e-9);
    }

    /// x and y (45G each) were placed on different spines earlier; z (50G)
    /// fits only with x and y on one spine (90 = the headroom) and z alone
    /// on the other.
    #[test]
    fn earlier_reservations_move_to_admit_a_demand_only_when_allowed() {
        let t = two_by_five();
        let earlier = load_str(
            &t,
            "demands:\n  - {id: x, src: h1, dst: h6, bytes: 1GB, rate_gbps: 45}\n  - {id: y, src: h2, dst: h7, bytes: 1GB, rate_gbps: 45}\n",
            0.9,
        )
        .unwrap();
        let z = load_str(
            &t,
            "demands:\n  - {id: z, src: h3, dst: h8, bytes: 1GB, rate_gbps: 50}\n",
            0.9,
        )
        .unwrap();
        let mut fixed = planner(&t);
        let first = fixed.plan(&earlier);
        assert_ne!(
            first.demands[0].flows[0].path.edges()[0],
            first.demands[1].flows[0].path.edges()[0]
        );
        assert!(matches!(
            fixed.plan(&z).demands[0].outcome,
            Outcome::Partial { .. }
        ));

        let mut p = planner(&t);
        p.plan(&earlier);
        let plan = p.plan_moving(&z, &["x", "y"]);
        assert_eq!(plan.demands[0].outcome, Outcome::Admitted);
        assert_eq!(plan.joint.admitted_by_moving, vec!["z".to_string()]);
        assert_eq!(plan.moved.len(), 1, "{:?}", plan.moved);
        let m = &plan.moved[0];
        assert_eq!(m.causes, vec![MoveCause::Admit { demand: "z".into() }]);
        assert_eq!(m.flows.len(), 1);
        assert_ne!(m.flows[0].from, m.flows[0].to);
        // The ledger holds the moved path, not the old one.
        let w = earlier[0].flows[0].window();
        assert_eq!(
            p.ledger().peak(m.flows[0].from.edges()[0], w),
            50_000_000_000
        );
        assert_eq!(p.ledger().peak(m.flows[0].to.edges()[0], w), 90_000_000_000);
        for e in 0..t.edge_count() as u32 {
            assert!(p.ledger().max(e) <= p.limits[e as usize]);
        }
        // Released one by one, nothing is left behind.
        for id in ["x", "y", "z"] {
            assert!(p.release(id));
        }
        for e in 0..t.edge_count() as u32 {
            assert!(p.ledger().timeline(e).is_zero());
        }
    }

    #[test]
    fn reoptimize_takes_movable_reservations_off_a_down_link() {
        let t = small();
        let d = load_str(
            &t,
            "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 40}\n",
            0.9,
        )
        .unwrap();
        let mut p = planner(&t);
        let old = p.plan(&d).demands[0].flows[0].path;
        let up = old.edges()[0];
        p.set_edge_down(up, true);
        // Not movable: stays (the caller re-plans it another way).
        assert!(p.reoptimize(&[]).moved.is_empty());
        assert_eq!(p.ledger().max(up), 40_000_000_000);
        let r = p.reoptimize(&["a"]);
        assert_eq!(r.moved.len(), 1);
        assert_eq!(r.moved[0].flows[0].from, old);
        assert!(!r.moved[0].flows[0].to.edges().contains(&up));
        assert!(matches!(r.moved[0].causes[0], MoveCause::LowerPeak { .. }));
        assert_eq!(p.ledger().max(up), 0);
        assert!(r.peak_after.unwrap() < 1.0 && r.peak_before.unwrap() > 1.0);
    }
}
