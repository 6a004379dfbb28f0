//! The planner's state: the topology, the ledger of what is reserved,
//! which links are down, and per demand what it holds in the ledger
//! (so that it can be released or moved).

use std::collections::HashMap;

use serde::Serialize;

use crate::assign::{Assigner, FlowReq};
use crate::clos::ClosShape;
use crate::ecmp::{HashMode, SeedPolicy, SwitchHash};
use crate::joint::JointFlow;
use crate::ledger::{Ledger, Window};
use crate::paths::Path;
use crate::topology::{EdgeId, HostIdx, NodeRef, Topology};

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
    /// The seed and hash offset each switch hashes with (the same prediction).
    pub ecmp_seeds: SeedPolicy,
    /// How switches that do not run Foresight's program hash, as a file
    /// describes them (`--switch-hash`): when set, the prediction of
    /// fallback flows (and entropy steering) uses it instead of
    /// `ecmp_hash` and `ecmp_seeds`.
    #[serde(skip)]
    pub switch_hash: Option<std::sync::Arc<crate::hash_profile::FabricHash>>,
    /// Largest set of flows placed jointly; larger sets (and reservations
    /// of more flows) are placed batch by batch and never moved.
    pub joint_max_flows: usize,
    /// Move evaluations one joint search may spend (deterministic effort).
    pub joint_evaluations: u64,
    /// Wall-clock cap on the joint work of one planning call, µs: a
    /// safety net under load; the evaluation count normally ends the search first.
    pub joint_budget_us: u64,
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
            switch_hash: None,
            joint_max_flows: 4096,
            joint_evaluations: 5_000,
            joint_budget_us: 50_000,
        }
    }
}

/// A reserved flow, kept so the reservation can move.
#[derive(Clone, Copy, Debug)]
pub(super) struct Placed {
    pub(super) index: u32,
    pub(super) flow: JointFlow,
    pub(super) path: Path,
}

#[derive(Default, Clone, Debug)]
pub(super) struct Committed {
    pub(super) entries: Vec<(EdgeId, Window, u64)>,
    pub(super) groups: Vec<Window>,
    /// Its flows and paths, when it may move (at most `joint_max_flows`
    /// flows); `entries` is then exactly what they reserve.
    pub(super) placed: Vec<Placed>,
    /// Placed as one coloured batch (optimal on its own: nothing to gain
    /// from re-placing it alone).
    pub(super) coloured_alone: bool,
}

/// The planner: a topology, its ledger, and scratch space. Plans can be
/// added incrementally; [`Planner::release`] frees a demand's reservations.
pub struct Planner<'t> {
    pub(super) topo: &'t Topology,
    pub(super) clos: Option<ClosShape>,
    pub(super) ledger: Ledger,
    pub(super) assigner: Assigner,
    pub(super) config: PlannerConfig,
    pub(super) committed: HashMap<String, Committed>,
    pub(super) scratch: Vec<Path>,
    pub(super) reqs: Vec<FlowReq>,
    /// headroom × capacity per edge, bit/s.
    pub(super) limits: Vec<u64>,
    /// Edges that are down (no capacity, avoided by path choice).
    pub(super) down: Vec<bool>,
    /// How every switch hashes (`config.ecmp_seeds`), by switch index.
    pub(super) seeds: Vec<SwitchHash>,
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
        let movable = flows.len() <= self.config.joint_max_flows;
        let mut reserving = 0;
        for (index, &(src, path, w, bps)) in flows.iter().enumerate() {
            if bps == 0 || w.len_ns() == 0 {
                continue;
            }
            reserving += 1;
            for e in path.reserved_edges(self.topo, src) {
                self.ledger.reserve(e, w, bps);
                c.entries.push((e, w, bps));
            }
            if !c.groups.contains(&w) {
                self.ledger.open(w);
                c.groups.push(w);
            }
            let dst = path.edges().last().map(|&e| self.topo.edge(e).to);
            if let (true, Some(NodeRef::Host(dst))) = (movable, dst) {
                c.placed.push(Placed {
                    index: index as u32,
                    flow: JointFlow {
                        src,
                        dst,
                        rate_bps: bps,
                        window: w,
                    },
                    path,
                });
            }
        }
        if c.placed.len() != reserving {
            // Not every flow could be kept with its path: it stays put.
            c.placed.clear();
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

    pub(super) fn limit(&self, e: EdgeId) -> u64 {
        if self.down[e as usize] {
            0
        } else {
            self.limits[e as usize]
        }
    }

    /// Frees every reservation of demand `id`; false if it has none.
    /// Books `entries` (bit/s on a link over a window) as reservation `id`,
    /// replacing what `id` held, as a group that never moves: what a step
    /// admitted on its job's pinned paths holds, one entry per link and
    /// window rather than per flow and hop.
    pub fn book_fixed(&mut self, id: &str, entries: &[(EdgeId, Window, u64)]) {
        self.release(id);
        let mut c = Committed::default();
        for &(e, w, bps) in entries {
            if bps == 0 || w.len_ns() == 0 {
                continue;
            }
            self.ledger.reserve(e, w, bps);
            c.entries.push((e, w, bps));
            if !c.groups.contains(&w) {
                self.ledger.open(w);
                c.groups.push(w);
            }
        }
        if !c.entries.is_empty() {
            self.committed.insert(id.to_string(), c);
        }
    }

    pub fn release(&mut self, id: &str) -> bool {
        let Some(c) = self.committed.remove(id) else {
            return false;
        };
        self.rollback(&c);
        true
    }

    pub(super) fn rollback(&mut self, c: &Committed) {
        for &(e, w, b) in &c.entries {
            self.ledger
                .release(e, w, b)
                .expect("releasing what was reserved");
        }
        for &w in &c.groups {
            self.ledger.close(w);
        }
    }

    /// Takes a committed demand's reservations out of the ledger (its
    /// windows stay open).
    pub(super) fn unreserve(&mut self, id: &str) {
        let c = self.committed.get_mut(id).expect("committed");
        for &(e, w, b) in &c.entries {
            self.ledger
                .release(e, w, b)
                .expect("releasing what was reserved");
        }
        c.entries.clear();
    }

    /// Reserves a committed demand's placed flows on their paths.
    pub(super) fn rereserve(&mut self, id: &str) {
        let c = self.committed.get_mut(id).expect("committed");
        for p in &c.placed {
            for e in p.path.reserved_edges(self.topo, p.flow.src) {
                self.ledger.reserve(e, p.flow.window, p.flow.rate_bps);
                c.entries.push((e, p.flow.window, p.flow.rate_bps));
            }
        }
    }
}

#[cfg(test)]
mod tests {

    use crate::admission::fixtures::*;
    use crate::admission::Outcome;
    use crate::demand::load_str;
    use crate::ledger::Window;

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
    fn book_fixed_holds_its_entries_until_released_and_never_moves() {
        let t = small();
        let path = crate::paths::all_paths(&t, 0, 2, 8).remove(0);
        let edges: Vec<_> = path.reserved_edges(&t, 0).collect();
        let (w1, w2) = (Window::new(10, 20), Window::new(30, 40));
        let mut p = planner(&t);
        p.book_fixed(
            "step",
            &[(edges[0], w1, 7), (edges[1], w2, 3), (edges[1], w1, 0)],
        );
        assert_eq!(p.ledger().at(edges[0], 15), 7);
        assert_eq!(p.ledger().at(edges[1], 35), 3);
        assert_eq!(p.ledger().at(edges[1], 15), 0, "a zero rate books nothing");
        assert!(!p.ledger().is_idle(w1) && !p.ledger().is_idle(w2));
        assert!(
            p.reoptimize(&["step"]).moved.is_empty(),
            "fixed entries do not move"
        );
        // Booking again replaces, it does not add.
        p.book_fixed("step", &[(edges[0], w1, 2)]);
        assert_eq!(p.ledger().at(edges[0], 15), 2);
        assert_eq!(p.ledger().at(edges[1], 35), 0);
        assert!(p.release("step"));
        assert_eq!(p.ledger().at(edges[0], 15), 0);
        assert!(p.ledger().is_idle(w1) && p.ledger().is_idle(w2));
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
