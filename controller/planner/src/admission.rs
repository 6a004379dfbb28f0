//! Admission control and the planner entry point.
//!
//! Demands are planned in priority order (higher first, then earlier start,
//! then input order). For each demand, its flows are grouped into batches
//! that share a window and a rate; each batch is placed by
//! [`crate::assign`] on top of what is already reserved and checked against
//! the headroom (no link is ever committed beyond `headroom × capacity`).
//! Then:
//! 1. it fits at the requested start → **admitted**;
//! 2. else, if elastic, the earliest start (up to its deadline) at which it
//!    fits → **deferred**; candidates are the moments reservations end;
//! 3. else, if partial reservations are allowed, each flow gets what is free
//!    on its best path (at least `min_partial_fraction` of its rate) →
//!    **partial**, the rest falls back to ECMP;
//! 4. else → **rejected** (ECMP fallback), with the reason.

use std::collections::HashMap;

use serde::Serialize;

use crate::assign::{Assigner, FlowReq, Method};
use crate::clos::ClosShape;
use crate::conventions::{bps_to_gbps, transfer_ns};
use crate::demand::Demand;
use crate::ecmp::{ecmp_path, ecmp_path_avoiding, HashKey, HashMode, SeedPolicy};
use crate::ledger::{Ledger, Window};
use crate::paths::Path;
use crate::topology::{EdgeId, HostIdx, Topology};

/// Planner settings.
#[derive(Clone, Debug, Serialize)]
pub struct PlannerConfig {
    /// Fraction of each link's capacity that may be reserved (0, 1].
    pub headroom: f64,
    /// Give flows that do not fit whatever rate is free.
    pub allow_partial: bool,
    /// A partial reservation below this fraction of the flow's rate is not made.
    pub min_partial_fraction: f64,
    /// Most start times tried when deferring a demand.
    pub max_defer_tries: usize,
    /// The switches' ECMP hash, to predict where fallback flows go.
    pub ecmp_hash: HashMode,
    /// The seed each switch hashes with (the same prediction).
    pub ecmp_seeds: SeedPolicy,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            headroom: 0.9,
            allow_partial: true,
            min_partial_fraction: 0.1,
            max_defer_tries: 64,
            ecmp_hash: HashMode::QpAware,
            ecmp_seeds: SeedPolicy::PerSwitch,
        }
    }
}

/// Why a demand was not admitted as asked.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// A link has too little free capacity in the window.
    Bottleneck {
        /// The link.
        link: String,
        /// Window start, ns.
        start_ns: u64,
        /// Window end, ns.
        end_ns: u64,
        /// Free under the headroom, Gbit/s.
        free_gbps: f64,
        /// What the demand needs on it, Gbit/s.
        needed_gbps: f64,
    },
    /// A flow's rate exceeds what its NIC may carry at all.
    ExceedsNic {
        /// The NIC link.
        link: String,
        /// Flow rate, Gbit/s.
        rate_gbps: f64,
        /// Capacity × headroom, Gbit/s.
        limit_gbps: f64,
    },
    /// Even at the requested start it would finish after its deadline.
    DeadlineBeforeCompletion {
        /// Deadline, ns.
        deadline_ns: u64,
        /// Completion at the requested start, ns.
        completion_ns: u64,
    },
    /// Elastic, but no start time tried fits before the deadline.
    NoStartBeforeDeadline {
        /// Deadline, ns (none = unbounded).
        deadline_ns: Option<u64>,
        /// Start times tried.
        tried: usize,
        /// What blocked it at the requested start.
        blocked_by: Box<Reason>,
    },
    /// Partial reservations are disabled and it does not fit.
    DoesNotFit {
        /// What blocked it.
        blocked_by: Box<Reason>,
    },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Bottleneck { link, start_ns, end_ns, free_gbps, needed_gbps } => write!(
                f,
                "link {link} has {free_gbps:.3} Gbit/s free under the headroom in [{start_ns}, {end_ns}) ns but {needed_gbps:.3} Gbit/s are needed"
            ),
            Reason::ExceedsNic { link, rate_gbps, limit_gbps } => write!(
                f,
                "flow rate {rate_gbps:.3} Gbit/s exceeds the {limit_gbps:.3} Gbit/s NIC link {link} may carry under the headroom"
            ),
            Reason::DeadlineBeforeCompletion { deadline_ns, completion_ns } => write!(
                f,
                "would complete at {completion_ns} ns, after its deadline {deadline_ns} ns"
            ),
            Reason::NoStartBeforeDeadline { deadline_ns, tried, blocked_by } => match deadline_ns {
                Some(d) => write!(f, "no start time before the deadline {d} ns fits ({tried} tried); at the requested start: {blocked_by}"),
                None => write!(f, "no start time fits ({tried} tried); at the requested start: {blocked_by}"),
            },
            Reason::DoesNotFit { blocked_by } => write!(f, "does not fit and partial reservations are off: {blocked_by}"),
        }
    }
}

/// What happened to a demand.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Outcome {
    /// Reserved in full at the requested start.
    Admitted,
    /// Reserved in full, starting later.
    Deferred {
        /// Asked-for start, ns.
        requested_start_ns: u64,
        /// Granted start, ns.
        start_ns: u64,
    },
    /// Some flows (or some rate) reserved; the rest on ECMP.
    Partial {
        /// Flows with any reservation.
        reserved_flows: usize,
        /// Flows in the demand.
        flows: usize,
        /// Reserved rate / requested rate, summed over flows.
        reserved_fraction: f64,
        /// Why not in full.
        reason: Reason,
    },
    /// Nothing reserved; ECMP fallback.
    Rejected {
        /// Why.
        reason: Reason,
    },
}

/// One flow's plan.
#[derive(Clone, Copy, Debug)]
pub struct FlowPlan {
    /// Path (reserved, or the ECMP path for a fallback flow).
    pub path: Path,
    /// Reserved rate, bit/s (0 = ECMP fallback).
    pub reserved_bps: u64,
    /// Start after any deferral, ns.
    pub start_ns: u64,
    /// Predicted completion, ns (`None`: unbounded — its ECMP path is fully reserved).
    pub completion_ns: Option<u64>,
}

/// One demand's plan.
#[derive(Clone, Debug)]
pub struct DemandPlan {
    /// Index into the demands given to [`Planner::plan`].
    pub demand: usize,
    /// What happened.
    pub outcome: Outcome,
    /// How much later than asked it starts, ns.
    pub shift_ns: u64,
    /// Per flow, in the demand's flow order.
    pub flows: Vec<FlowPlan>,
    /// Predicted completion of the whole demand (`None`: unbounded).
    pub completion_ns: Option<u64>,
    /// How paths were chosen (the method of its largest batch).
    pub method: Option<Method>,
}

/// The result of planning a set of demands.
#[derive(Clone, Debug)]
pub struct Plan {
    /// One per demand, in input order.
    pub demands: Vec<DemandPlan>,
    /// Demand indices in the order they were planned.
    pub order: Vec<usize>,
}

#[derive(Default, Clone, Debug)]
struct Committed {
    entries: Vec<(EdgeId, Window, u64)>,
    groups: Vec<Window>,
}

struct Batch {
    window: Window,
    flows: Vec<u32>,
}

/// The planner: a topology, its ledger, and scratch space. Plans can be
/// added incrementally; [`Planner::release`] frees a demand's reservations.
pub struct Planner<'t> {
    topo: &'t Topology,
    clos: Option<ClosShape>,
    ledger: Ledger,
    assigner: Assigner,
    config: PlannerConfig,
    committed: HashMap<String, Committed>,
    scratch: Vec<Path>,
    reqs: Vec<FlowReq>,
    /// headroom × capacity per edge, bit/s.
    limits: Vec<u64>,
    /// Edges that are down (no capacity, avoided by path choice).
    down: Vec<bool>,
    /// Every switch's ECMP hash seed (`config.ecmp_seeds`), by switch index.
    seeds: Vec<u32>,
}

impl<'t> Planner<'t> {
    /// A planner with an empty ledger.
    pub fn new(topo: &'t Topology, config: PlannerConfig) -> Planner<'t> {
        assert!(
            config.headroom > 0.0 && config.headroom <= 1.0,
            "headroom must be in (0, 1]"
        );
        Planner {
            topo,
            clos: ClosShape::detect(topo),
            ledger: Ledger::new(topo.edge_count()),
            assigner: Assigner::new(topo),
            committed: HashMap::new(),
            scratch: Vec::new(),
            reqs: Vec::new(),
            limits: (0..topo.edge_count() as u32)
                .map(|e| (topo.edge(e).capacity_bps as f64 * config.headroom).floor() as u64)
                .collect(),
            down: vec![false; topo.edge_count()],
            seeds: config.ecmp_seeds.seeds(topo),
            config,
        }
    }

    /// Marks a directed edge down (`true`) or up again. A down edge has no
    /// reservable capacity and path choice avoids it whenever another
    /// equal-cost path exists; reservations already in the ledger are not
    /// touched (the caller releases and re-plans those that use it).
    pub fn set_edge_down(&mut self, e: EdgeId, down: bool) {
        self.down[e as usize] = down;
        self.assigner.set_down(e, down);
    }

    /// Whether an edge is marked down.
    pub fn is_edge_down(&self, e: EdgeId) -> bool {
        self.down[e as usize]
    }

    /// Bit/s that could still be reserved on `e` over `w` (0 when down).
    pub fn free_bps(&self, e: EdgeId, w: Window) -> u64 {
        self.limit(e).saturating_sub(self.ledger.peak(e, w))
    }

    /// Re-enters reservations made earlier (for example restored from a
    /// state file) exactly as they were, without choosing paths again:
    /// each flow is (source NIC, path, window, bit/s). Whatever `id` held
    /// before is released first. Capacity is not checked: the reservations
    /// were admitted once and the switches carry them.
    pub fn restore(&mut self, id: &str, flows: &[(HostIdx, Path, Window, u64)]) {
        self.release(id);
        let mut c = Committed::default();
        for &(src, path, w, bps) in flows {
            if bps == 0 || w.len_ns() == 0 {
                continue;
            }
            for e in path.reserved_edges(self.topo, src) {
                self.ledger.reserve(e, w, bps);
                c.entries.push((e, w, bps));
            }
            if !c.groups.contains(&w) {
                self.ledger.open(w);
                c.groups.push(w);
            }
        }
        if !c.entries.is_empty() || !c.groups.is_empty() {
            self.committed.insert(id.to_string(), c);
        }
    }

    /// The reservations so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
    /// The topology.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }
    /// The regular Clos shape, if the fabric has one.
    pub fn clos(&self) -> Option<&ClosShape> {
        self.clos.as_ref()
    }
    /// The settings.
    pub fn config(&self) -> &PlannerConfig {
        &self.config
    }

    fn limit(&self, e: EdgeId) -> u64 {
        if self.down[e as usize] {
            0
        } else {
            self.limits[e as usize]
        }
    }

    /// Frees every reservation of demand `id`; false if it has none.
    pub fn release(&mut self, id: &str) -> bool {
        let Some(c) = self.committed.remove(id) else {
            return false;
        };
        self.rollback(&c);
        true
    }

    fn rollback(&mut self, c: &Committed) {
        for &(e, w, b) in &c.entries {
            self.ledger
                .release(e, w, b)
                .expect("releasing what was reserved");
        }
        for &w in &c.groups {
            self.ledger.close(w);
        }
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

    /// Places all batches at `shift`; on success the reservations are in the
    /// ledger and the paths in `paths`.
    fn try_place(
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
            self.reqs.clear();
            self.reqs.extend(b.flows.iter().map(|&i| {
                let f = &d.flows[i as usize];
                FlowReq {
                    src: f.src,
                    dst: f.dst,
                    rate_bps: f.rate_bps,
                }
            }));
            let m = self.assigner.assign(
                self.topo,
                self.clos.as_ref(),
                &self.ledger,
                w,
                &self.reqs,
                &mut self.scratch,
            );
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
            );
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

    /// Plans `demands` on top of what the ledger already holds.
    pub fn plan(&mut self, demands: &[Demand]) -> Plan {
        let mut order: Vec<usize> = (0..demands.len()).collect();
        order.sort_by_key(|&i| {
            (
                std::cmp::Reverse(demands[i].priority),
                demands[i].start_ns(),
                i,
            )
        });
        let mut plans: Vec<Option<DemandPlan>> = vec![None; demands.len()];
        let mut fallback: Vec<(usize, usize)> = Vec::new();
        for &di in &order {
            let d = &demands[di];
            let n = d.flows.len();
            let mut paths = vec![Path::EMPTY; n];
            let mut reserved = vec![0u64; n];
            let mut shift = 0u64;
            let mut method = None;
            let batches = Self::batches(d);
            let outcome;
            let mut committed = None;
            let block: Option<Reason> = if let Some(r) = self.nic_check(d) {
                Some(r)
            } else if let Some(dl) = d.deadline_ns.filter(|&dl| d.end_ns() > dl) {
                Some(Reason::DeadlineBeforeCompletion {
                    deadline_ns: dl,
                    completion_ns: d.end_ns(),
                })
            } else {
                match self.try_place(d, &batches, 0, &mut paths) {
                    Ok((c, m)) => {
                        committed = Some(c);
                        method = Some(m);
                        None
                    }
                    Err(r) => Some(r),
                }
            };
            match block {
                None => {
                    outcome = Outcome::Admitted;
                    for (i, f) in d.flows.iter().enumerate() {
                        reserved[i] = f.rate_bps;
                    }
                }
                Some(reason) => {
                    let mut reason = reason;
                    let mut deferred = false;
                    if d.elastic && matches!(reason, Reason::Bottleneck { .. }) {
                        let cands = self.defer_candidates(d);
                        let tries = cands.len().min(self.config.max_defer_tries);
                        for &s in cands.iter().take(tries) {
                            if let Ok((c, m)) = self.try_place(d, &batches, s, &mut paths) {
                                committed = Some(c);
                                method = Some(m);
                                shift = s;
                                deferred = true;
                                break;
                            }
                        }
                        if !deferred {
                            reason = Reason::NoStartBeforeDeadline {
                                deadline_ns: d.deadline_ns,
                                tried: tries,
                                blocked_by: Box::new(reason),
                            };
                        }
                    }
                    if deferred {
                        outcome = Outcome::Deferred {
                            requested_start_ns: d.start_ns(),
                            start_ns: d.start_ns() + shift,
                        };
                        for (i, f) in d.flows.iter().enumerate() {
                            reserved[i] = f.rate_bps;
                        }
                    } else if self.config.allow_partial
                        && !matches!(reason, Reason::DeadlineBeforeCompletion { .. })
                    {
                        let c = self.partial(d, &batches, &mut paths, &mut reserved);
                        let got = reserved.iter().filter(|&&r| r > 0).count();
                        let asked: u128 = d.flows.iter().map(|f| f.rate_bps as u128).sum();
                        let given: u128 = reserved.iter().map(|&r| r as u128).sum();
                        if got > 0 {
                            outcome = Outcome::Partial {
                                reserved_flows: got,
                                flows: n,
                                reserved_fraction: given as f64 / asked.max(1) as f64,
                                reason,
                            };
                            committed = Some(c);
                        } else {
                            outcome = Outcome::Rejected { reason };
                        }
                    } else {
                        let reason = if matches!(reason, Reason::Bottleneck { .. }) {
                            Reason::DoesNotFit {
                                blocked_by: Box::new(reason),
                            }
                        } else {
                            reason
                        };
                        outcome = Outcome::Rejected { reason };
                    }
                }
            }
            if let Some(c) = committed {
                let e = self.committed.entry(d.id.clone()).or_default();
                e.entries.extend(c.entries);
                e.groups.extend(c.groups);
            }
            let flows: Vec<FlowPlan> = d
                .flows
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let r = reserved[i];
                    let start = f.start_ns + shift;
                    FlowPlan {
                        path: paths[i],
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
                outcome,
                shift_ns: shift,
                flows,
                completion_ns: None,
                method,
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
            order,
        }
    }

    /// Fallback flows take their ECMP path (the configured hash and seeds) at best-effort priority:
    /// each progresses at its rate scaled by the worst (offered best-effort
    /// load) / (capacity left by reservations) on its path.
    fn predict_fallback(
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
            let key = HashKey::of_flow(f, self.config.ecmp_hash);
            // With links down, the path the switches' reduced ECMP groups
            // give (unreachable: the plain one, for the report).
            let p = self
                .down
                .iter()
                .any(|d| *d)
                .then(|| {
                    ecmp_path_avoiding(self.topo, f.src, f.dst, &key, &self.seeds, |e| {
                        self.down[e as usize]
                    })
                })
                .flatten()
                .unwrap_or_else(|| ecmp_path(self.topo, f.src, f.dst, &key, &self.seeds));
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
    use super::*;
    use crate::demand::load_str;
    use crate::topology::generate::{leaf_spine, LeafSpine};

    fn small() -> Topology {
        // 2 leaves x 2 hosts, 2 spines, 100G everywhere.
        Topology::from_spec(leaf_spine(&LeafSpine::default()).unwrap()).unwrap()
    }

    fn planner(t: &Topology) -> Planner<'_> {
        Planner::new(t, PlannerConfig::default())
    }

    #[test]
    fn a_down_edge_is_avoided_and_has_no_capacity() {
        let t = small();
        let d = load_str(
            &t,
            "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80}\n  - {id: b, src: h2, dst: h4, bytes: 1GB, rate_gbps: 80}\n",
            0.9,
        )
        .unwrap();
        let mut p = planner(&t);
        let first = p.plan(&d[..1]);
        let up = first.demands[0].flows[0].path.edges()[0];
        p.release("a");
        p.set_edge_down(up, true);
        assert!(p.is_edge_down(up));
        assert_eq!(p.free_bps(up, Window::new(0, 1)), 0);
        // Both flows now share the other uplink of their leaf: 80 + 80 > 90.
        let plan = p.plan(&d);
        for dp in &plan.demands {
            for f in &dp.flows {
                if f.reserved_bps > 0 {
                    assert!(!f.path.edges().contains(&up), "reserved over a down edge");
                }
            }
        }
        assert_eq!(p.ledger().max(up), 0);
        for f in plan.demands.iter().flat_map(|dp| &dp.flows) {
            assert!(
                !f.path.edges().contains(&up),
                "ECMP fallback paths avoid it too"
            );
        }
        assert_eq!(plan.demands[0].outcome, Outcome::Admitted);
        assert_ne!(
            plan.demands[1].outcome,
            Outcome::Admitted,
            "one uplink left"
        );
        // Up again: both fit once more.
        p.release("a");
        p.release("b");
        p.set_edge_down(up, false);
        let plan = p.plan(&d);
        assert!(plan
            .demands
            .iter()
            .all(|dp| dp.outcome == Outcome::Admitted));
    }

    #[test]
    fn restore_reenters_the_given_paths_exactly() {
        let t = small();
        let d = load_str(
            &t,
            "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80}\n",
            0.9,
        )
        .unwrap();
        let mut fresh = planner(&t);
        let chosen = fresh.plan(&d).demands[0].flows[0].path;
        // The other spine's path: the one a re-plan would not choose.
        let other = crate::paths::all_paths(&t, 0, 2, 8)
            .into_iter()
            .find(|p| p.edges() != chosen.edges())
            .expect("two spines");
        let mut p = planner(&t);
        let w = Window::new(10, 20);
        p.restore("a", &[(0, other, w, 5)]);
        for e in other.reserved_edges(&t, 0) {
            assert_eq!(p.ledger().at(e, 15), 5);
        }
        assert_eq!(p.ledger().at(chosen.edges()[0], 15), 0);
        assert!(!p.ledger().is_idle(w));
        assert!(p.release("a"));
        assert!(p.ledger().is_idle(w));
        assert_eq!(p.ledger().at(other.edges()[0], 15), 0);
    }

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
    fn elastic_demand_is_deferred_to_when_the_nic_frees_up() {
        let t = small();
        let yaml = "demands:
  - {id: first, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 5}
  - {id: later, src: h1, dst: h4, bytes: 1GB, rate_gbps: 80, priority: 1, elastic: true, deadline_ns: 1000000000}
";
        let d = load_str(&t, yaml, 0.9).unwrap();
        let plan = planner(&t).plan(&d);
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
        let t = small();
        let yaml = "demands:
  - {id: first, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 5}
  - {id: late, src: h1, dst: h4, bytes: 1GB, rate_gbps: 80, elastic: true, deadline_ns: 150000000}
";
        let d = load_str(&t, yaml, 0.9).unwrap();
        let plan = planner(&t).plan(&d);
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
        let t = small();
        let yaml = "demands:
  - {id: first, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 5}
  - {id: rigid, src: h2, dst: h3, bytes: 1GB, rate_gbps: 80}
";
        let d = load_str(&t, yaml, 0.9).unwrap();
        let cfg = PlannerConfig {
            allow_partial: false,
            ..Default::default()
        };
        let plan = Planner::new(&t, cfg).plan(&d);
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

    #[test]
    fn deadline_and_nic_reasons() {
        let t = small();
        let yaml = "demands:
  - {id: dl, src: h1, dst: h3, bytes: 1GB, rate_gbps: 10, deadline_ns: 100}
  - {id: fat, src: h2, dst: h4, bytes: 1GB, rate_gbps: 95}
";
        let d = load_str(&t, yaml, 0.9).unwrap();
        let plan = planner(&t).plan(&d);
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
        let t = small();
        let yaml = "demands:
  - {id: low, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 1}
  - {id: high, src: h2, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 7}
";
        let d = load_str(&t, yaml, 0.9).unwrap();
        let plan = planner(&t).plan(&d);
        assert_eq!(plan.demands[1].outcome, Outcome::Admitted);
        assert!(matches!(plan.demands[0].outcome, Outcome::Partial { .. }));
    }

    #[test]
    fn release_restores_the_ledger() {
        let t = small();
        let d = load_str(
            &t,
            "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80}\n",
            0.9,
        )
        .unwrap();
        let mut p = planner(&t);
        p.plan(&d);
        assert!(p.release("a"));
        assert!(!p.release("a"));
        for e in 0..t.edge_count() as u32 {
            assert!(p.ledger().timeline(e).is_zero());
        }
        // And the same demand fits again.
        assert_eq!(p.plan(&d).demands[0].outcome, Outcome::Admitted);
    }
}
