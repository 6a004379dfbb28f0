//! Path assignment for a batch of flows that share one time window: choose
//! each flow's path among the fabric's equal-cost paths so that the peak
//! link utilisation (reserved + new, over capacity) is as low as possible.
//!
//! Two methods:
//! * **Colouring** (regular Clos, equal rates, nothing else reserved in the
//!   window): the batch is a bipartite multigraph of leaves; spines are
//!   colours. [`crate::colouring`] reaches `⌈Δ/S⌉` flows per leaf-spine link,
//!   the optimum. On a 3-tier fabric the spine index also fixes the plane;
//!   colour choice prefers planes that keep each pod's inter-pod flows
//!   balanced, alternating-walk swaps then rebalance toward
//!   `X·⌈out(pod)/(S·X)⌉` flows per pod and plane, and a second colouring per
//!   plane picks super-spines. The result is checked against the lower bound
//!   by the tests and the figures. With links down the colouring still
//!   places the batch (it assumes every link), then the flows it put on a
//!   down link are re-placed one by one as greedy places a flow, and the
//!   repair below runs: a few hundred flows re-placed instead of the whole
//!   batch placed greedily (a 1,024-GPU all-to-all: seconds otherwise).
//! * **Greedy** (anything else): flows in decreasing rate order each take
//!   the path minimising (max, sum) of the resulting utilisations over the
//!   ECMP DAG (a small dynamic program), on top of the ledger's peak in the
//!   window; then flows are moved off the most utilised link while that
//!   strictly lowers it.

use crate::clos::ClosShape;
use crate::colouring::Colouring;
use crate::ledger::{Ledger, Window};
use crate::paths::Path;
use crate::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};

/// Utilisation added to a down edge: larger than any real utilisation, so
/// a path through a down edge is chosen only when every path has one.
pub const DOWN_PENALTY: f64 = 1.0e6;

/// One flow to place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowReq {
    /// Source NIC.
    pub src: HostIdx,
    /// Destination NIC.
    pub dst: HostIdx,
    /// Rate, bit/s.
    pub rate_bps: u64,
}

/// Which method placed a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Capacitated bipartite edge colouring (optimal per level).
    Colouring,
    /// Greedy min-max with repair.
    Greedy,
    /// Placed jointly with other demands' flows ([`crate::joint`]).
    Joint,
}

/// What a path search is for: a flow of rate `r` to `dst` over `w`.
#[derive(Clone, Copy)]
struct Query<'a> {
    topo: &'a Topology,
    ledger: &'a Ledger,
    w: Window,
    dst_leaf: SwitchIdx,
    dst: HostIdx,
    r: u64,
}

/// Reusable scratch space for assigning batches on one topology.
pub struct Assigner {
    stamp: u32,
    base: Vec<u64>,
    base_stamp: Vec<u32>,
    added: Vec<u64>,
    touched_stamp: Vec<u32>,
    touched: Vec<EdgeId>,
    memo_stamp: Vec<u32>,
    memo: Vec<(f64, f64, EdgeId)>,
    memo_gen: u32,
    nic_count: Vec<(u32, u32)>,
    /// Edges that are down, and how many.
    down: Vec<bool>,
    down_count: usize,
}

impl Assigner {
    /// Scratch space sized for `topo`.
    pub fn new(topo: &Topology) -> Assigner {
        let e = topo.edge_count();
        let s = topo.switches().len();
        Assigner {
            stamp: 0,
            base: vec![0; e],
            base_stamp: vec![0; e],
            added: vec![0; e],
            touched_stamp: vec![0; e],
            touched: Vec::new(),
            memo_stamp: vec![0; s],
            memo: vec![(0.0, 0.0, 0); s],
            memo_gen: 0,
            nic_count: Vec::new(),
            down: vec![false; e],
            down_count: 0,
        }
    }

    /// Marks an edge down (avoided: its utilisation counts as
    /// [`DOWN_PENALTY`] more than its load) or up again. While any edge is
    /// down, coloured batches have the flows on down edges re-placed.
    pub fn set_down(&mut self, e: EdgeId, down: bool) {
        let was = std::mem::replace(&mut self.down[e as usize], down);
        match (was, down) {
            (false, true) => self.down_count += 1,
            (true, false) => self.down_count -= 1,
            _ => {}
        }
    }

    /// Bit/s the last [`Assigner::assign`] put on each edge it touched.
    pub fn added(&self) -> impl ExactSizeIterator<Item = (EdgeId, u64)> + '_ {
        self.touched.iter().map(|&e| (e, self.added[e as usize]))
    }

    fn begin(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.base_stamp.iter_mut().for_each(|s| *s = 0);
            self.touched_stamp.iter_mut().for_each(|s| *s = 0);
            self.stamp = 1;
        }
        self.touched.clear();
    }

    fn add(&mut self, e: EdgeId, bps: u64) {
        let i = e as usize;
        if self.touched_stamp[i] != self.stamp {
            self.touched_stamp[i] = self.stamp;
            self.added[i] = 0;
            self.touched.push(e);
        }
        self.added[i] += bps;
    }

    fn sub(&mut self, e: EdgeId, bps: u64) {
        self.added[e as usize] -= bps;
    }

    /// Adds (`load_path`) or takes back (`unload_path`) a flow's rate on
    /// every edge of its path: how a flow is placed and moved.
    fn load_path(&mut self, p: &Path, bps: u64) {
        for &e in p.edges() {
            self.add(e, bps);
        }
    }

    fn unload_path(&mut self, p: &Path, bps: u64) {
        for &e in p.edges() {
            self.sub(e, bps);
        }
    }

    fn cur_added(&self, e: EdgeId) -> u64 {
        if self.touched_stamp[e as usize] == self.stamp {
            self.added[e as usize]
        } else {
            0
        }
    }

    fn base(&mut self, ledger: &Ledger, w: Window, e: EdgeId) -> u64 {
        let i = e as usize;
        if self.base_stamp[i] != self.stamp {
            self.base_stamp[i] = self.stamp;
            self.base[i] = ledger.peak(e, w);
        }
        self.base[i]
    }

    /// Places every flow of a batch active over `w`. `paths[i]` receives the
    /// path of `flows[i]`; [`Assigner::added`] then lists the load per edge
    /// (including the source NICs' uplinks). Nothing is written to the ledger.
    pub fn assign(
        &mut self,
        topo: &Topology,
        clos: Option<&ClosShape>,
        ledger: &Ledger,
        w: Window,
        flows: &[FlowReq],
        paths: &mut Vec<Path>,
    ) -> Method {
        self.begin();
        paths.clear();
        paths.resize(flows.len(), Path::EMPTY);
        let uniform = flows.windows(2).all(|p| p[0].rate_bps == p[1].rate_bps);
        match clos {
            Some(c) if uniform && ledger.is_idle(w) => {
                self.colour(topo, c, flows, paths);
                if self.down_count > 0 {
                    self.move_off_down(topo, ledger, w, flows, paths);
                }
                Method::Colouring
            }
            _ => {
                self.greedy(topo, ledger, w, flows, paths);
                Method::Greedy
            }
        }
    }

    fn colour(&mut self, topo: &Topology, c: &ClosShape, flows: &[FlowReq], paths: &mut [Path]) {
        let hosts = topo.hosts();
        let nl = c.leaf_count();
        let s = c.spines;
        let x = c.superspines;
        // Leaf-level graph of the flows that leave their leaf.
        let mut crossing: Vec<u32> = Vec::new();
        let mut ends: Vec<(u32, u32)> = Vec::new();
        let mut deg_out = vec![0usize; nl];
        let mut deg_in = vec![0usize; nl];
        for (i, f) in flows.iter().enumerate() {
            let (a, b) = (&hosts[f.src as usize], &hosts[f.dst as usize]);
            if a.leaf == b.leaf {
                paths[i] = Path::from_edges(&[topo.host_down_edge(f.dst)]);
                continue;
            }
            let u = c.leaf_index(a.leaf).expect("hosts attach to leaves") as u32;
            let v = c.leaf_index(b.leaf).expect("hosts attach to leaves") as u32;
            deg_out[u as usize] += 1;
            deg_in[v as usize] += 1;
            crossing.push(i as u32);
            ends.push((u, v));
        }
        if !crossing.is_empty() {
            let delta = deg_out.iter().chain(&deg_in).copied().max().unwrap_or(0);
            let cap1 = delta.div_ceil(s).max(1);
            let pod = |leaf: u32| c.pod_of(leaf as usize);
            let plane: Vec<u32> = if x == 0 {
                let mut col = Colouring::new(nl, nl, s, cap1, &ends);
                col.colour_all(|_, _| 0);
                (0..ends.len() as u32).map(|e| col.colour_of(e)).collect()
            } else {
                // Pod links only need balancing below the peak the batch
                // cannot avoid anyway: the leaf level (cap1 flows per
                // uplink) and the busiest NIC.
                let r = flows[0].rate_bps as f64;
                self.nic_count.resize(topo.hosts().len(), (0, 0));
                for f in flows {
                    self.nic_count[f.src as usize].0 += 1;
                    self.nic_count[f.dst as usize].1 += 1;
                }
                let mut nic_util = 0.0f64;
                for f in flows {
                    for h in [f.src, f.dst] {
                        let (o, i) = std::mem::take(&mut self.nic_count[h as usize]);
                        if o + i > 0 {
                            let u =
                                o.max(i) as f64 * r / topo.hosts()[h as usize].capacity_bps as f64;
                            nic_util = nic_util.max(u);
                        }
                    }
                }
                let floor_util = nic_util.max(cap1 as f64 * r / c.leaf_capacity_bps as f64);
                let allowed = (floor_util * c.pod_capacity_bps as f64 / r + 1e-9).floor() as usize;
                // Colour in flow order; if pods stay unbalanced, retry a few
                // other edge orders (small batches only) and keep the best.
                let mut best: Option<(i64, Vec<u32>)> = None;
                let attempts = if ends.len() <= 20_000 { 5 } else { 1 };
                let mut rng = crate::rng::Rng::new(ends.len() as u64);
                for attempt in 0..attempts {
                    let mut order: Vec<u32> = (0..ends.len() as u32).collect();
                    match attempt {
                        0 | 1 => {}
                        2 => order.reverse(),
                        _ => {
                            for i in (1..order.len()).rev() {
                                order.swap(i, rng.below(i as u64 + 1) as usize);
                            }
                        }
                    }
                    let ordered: Vec<(u32, u32)> =
                        order.iter().map(|&e| ends[e as usize]).collect();
                    let mut col = Colouring::new(nl, nl, s, cap1, &ordered);
                    colour_with_pod_preference(&mut col, &ordered, c);
                    let excess = rebalance_planes(&mut col, &ordered, c, x * allowed, attempt > 0);
                    if best.as_ref().is_none_or(|b| excess < b.0) {
                        let mut planes = vec![0u32; ends.len()];
                        for (k, &e) in order.iter().enumerate() {
                            planes[e as usize] = col.colour_of(k as u32);
                        }
                        best = Some((excess, planes));
                    }
                    if excess == 0 {
                        break;
                    }
                }
                best.expect("at least one attempt").1
            };
            // Level 2: per plane, pods → super-spines.
            let mut ss_of = vec![0u32; ends.len()];
            if x > 0 {
                let np = c.pods;
                let mut per_plane: Vec<Vec<u32>> = vec![Vec::new(); s];
                for (e, &(u, v)) in ends.iter().enumerate() {
                    if pod(u) != pod(v) {
                        per_plane[plane[e] as usize].push(e as u32);
                    }
                }
                for list in per_plane.iter().filter(|l| !l.is_empty()) {
                    let mut dout = vec![0usize; np];
                    let mut din = vec![0usize; np];
                    for &e in list {
                        let (u, v) = ends[e as usize];
                        dout[pod(u)] += 1;
                        din[pod(v)] += 1;
                    }
                    let d2 = dout.iter().chain(&din).copied().max().unwrap_or(1);
                    let pod_edges: Vec<(u32, u32)> = list
                        .iter()
                        .map(|&e| {
                            let (u, v) = ends[e as usize];
                            (pod(u) as u32, pod(v) as u32)
                        })
                        .collect();
                    let mut col2 = Colouring::new(np, np, x, d2.div_ceil(x).max(1), &pod_edges);
                    col2.colour_all(|_, _| 0);
                    for (k, &e) in list.iter().enumerate() {
                        ss_of[e as usize] = col2.colour_of(k as u32);
                    }
                }
            }
            for (e, &i) in crossing.iter().enumerate() {
                let f = &flows[i as usize];
                let (u, v) = (ends[e].0 as usize, ends[e].1 as usize);
                let j = plane[e] as usize;
                let mut p = Path::EMPTY;
                p.push(c.up(u, j));
                let (pu, pv) = (c.pod_of(u), c.pod_of(v));
                if pu != pv {
                    let xx = ss_of[e] as usize;
                    p.push(c.pod_up(pu, j, xx));
                    p.push(c.pod_down(pv, j, xx));
                }
                p.push(c.down(v, j));
                p.push(topo.host_down_edge(f.dst));
                paths[i as usize] = p;
            }
        }
        for (i, f) in flows.iter().enumerate() {
            self.add(topo.host_up_edge(f.src), f.rate_bps);
            self.load_path(&paths[i], f.rate_bps);
        }
    }

    fn util(&mut self, topo: &Topology, ledger: &Ledger, w: Window, e: EdgeId, extra: u64) -> f64 {
        let load = self.base(ledger, w, e) + self.cur_added(e) + extra;
        let u = load as f64 / topo.edge(e).capacity_bps as f64;
        if self.down[e as usize] {
            u + DOWN_PENALTY
        } else {
            u
        }
    }

    /// Best (max, sum) utilisation from switch `s` down to `dst`, memoized per call.
    fn best(&mut self, q: &Query<'_>, s: SwitchIdx) -> (f64, f64, EdgeId) {
        let Query {
            topo,
            ledger,
            w,
            dst_leaf,
            dst,
            r,
        } = *q;
        if self.memo_stamp[s as usize] == self.memo_gen {
            return self.memo[s as usize];
        }
        let res = if s == dst_leaf {
            let e = topo.host_down_edge(dst);
            let u = self.util(topo, ledger, w, e, r);
            (u, u, e)
        } else {
            let mut best = (f64::INFINITY, f64::INFINITY, EdgeId::MAX);
            let hops: smallvec::SmallVec<[EdgeId; 64]> = topo.next_hops(s, dst_leaf).collect();
            for e in hops {
                let NodeRef::Switch(t) = topo.edge(e).to else {
                    continue;
                };
                let u = self.util(topo, ledger, w, e, r);
                let (m, sum, _) = self.best(q, t);
                let cand = (u.max(m), u + sum, e);
                if (cand.0, cand.1) < (best.0, best.1) {
                    best = cand;
                }
            }
            best
        };
        self.memo_stamp[s as usize] = self.memo_gen;
        self.memo[s as usize] = res;
        res
    }

    fn best_path(
        &mut self,
        topo: &Topology,
        ledger: &Ledger,
        w: Window,
        f: &FlowReq,
    ) -> (f64, Path) {
        self.memo_gen = self.memo_gen.wrapping_add(1);
        if self.memo_gen == 0 {
            self.memo_stamp.iter_mut().for_each(|s| *s = 0);
            self.memo_gen = 1;
        }
        let src_leaf = topo.hosts()[f.src as usize].leaf;
        let dst_leaf = topo.hosts()[f.dst as usize].leaf;
        let q = Query {
            topo,
            ledger,
            w,
            dst_leaf,
            dst: f.dst,
            r: f.rate_bps,
        };
        let (m, _, _) = self.best(&q, src_leaf);
        let mut p = Path::EMPTY;
        let mut s = src_leaf;
        loop {
            let (_, _, e) = self.memo[s as usize];
            p.push(e);
            match topo.edge(e).to {
                NodeRef::Switch(t) => s = t,
                NodeRef::Host(_) => break,
            }
        }
        (m, p)
    }

    fn greedy(
        &mut self,
        topo: &Topology,
        ledger: &Ledger,
        w: Window,
        flows: &[FlowReq],
        paths: &mut [Path],
    ) {
        let mut order: Vec<u32> = (0..flows.len() as u32).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(flows[i as usize].rate_bps));
        for &i in &order {
            let f = flows[i as usize];
            self.add(topo.host_up_edge(f.src), f.rate_bps);
            let (_, p) = self.best_path(topo, ledger, w, &f);
            self.load_path(&p, f.rate_bps);
            paths[i as usize] = p;
        }
        self.repair(topo, ledger, w, flows, paths);
    }

    /// Re-places, as [`Assigner::greedy`] places a flow, every flow whose
    /// path crosses a down edge, then repairs.
    fn move_off_down(
        &mut self,
        topo: &Topology,
        ledger: &Ledger,
        w: Window,
        flows: &[FlowReq],
        paths: &mut [Path],
    ) {
        let mut moved = 0;
        for (i, f) in flows.iter().enumerate() {
            let old = paths[i];
            if !old.edges().iter().any(|&e| self.down[e as usize]) {
                continue;
            }
            self.unload_path(&old, f.rate_bps);
            let (_, p) = self.best_path(topo, ledger, w, f);
            self.load_path(&p, f.rate_bps);
            paths[i] = p;
            moved += 1;
        }
        if moved > 0 {
            self.repair(topo, ledger, w, flows, paths);
        }
    }

    /// Moves flows off the most utilised link while that lowers it.
    fn repair(
        &mut self,
        topo: &Topology,
        ledger: &Ledger,
        w: Window,
        flows: &[FlowReq],
        paths: &mut [Path],
    ) {
        const MAX_ROUNDS: usize = 64;
        let mut on_edge: std::collections::HashMap<EdgeId, Vec<u32>> =
            std::collections::HashMap::new();
        for (i, p) in paths.iter().enumerate() {
            for &e in p.edges() {
                on_edge.entry(e).or_default().push(i as u32);
            }
        }
        for _ in 0..MAX_ROUNDS {
            let mut worst = (0.0f64, EdgeId::MAX);
            for k in 0..self.touched.len() {
                let e = self.touched[k];
                let u = self.util(topo, ledger, w, e, 0);
                if u > worst.0 {
                    worst = (u, e);
                }
            }
            let (peak, e_star) = worst;
            let Some(list) = on_edge.get(&e_star).cloned() else {
                break;
            };
            let mut moved = false;
            for i in list {
                let f = flows[i as usize];
                let old = paths[i as usize];
                self.unload_path(&old, f.rate_bps);
                let (m, p) = self.best_path(topo, ledger, w, &f);
                if m < peak - 1e-12 && !p.edges().contains(&e_star) {
                    self.load_path(&p, f.rate_bps);
                    for &e in old.edges() {
                        if let Some(v) = on_edge.get_mut(&e) {
                            v.retain(|&x| x != i);
                        }
                    }
                    for &e in p.edges() {
                        on_edge.entry(e).or_default().push(i);
                    }
                    paths[i as usize] = p;
                    moved = true;
                    break;
                }
                self.load_path(&old, f.rate_bps);
            }
            if !moved {
                break;
            }
        }
    }
}

/// Colours the leaf-level graph, preferring for inter-pod flows the plane
/// least used so far by their two pods.
fn colour_with_pod_preference(col: &mut Colouring, ends: &[(u32, u32)], c: &ClosShape) {
    let s = c.spines;
    let np = c.pods;
    let pod = |l: u32| c.pod_of(l as usize);
    let mut pp_out = vec![0i64; np * s];
    let mut pp_in = vec![0i64; np * s];
    for e in 0..ends.len() as u32 {
        let (u, v) = ends[e as usize];
        let (p, q) = (pod(u), pod(v));
        let inter = p != q;
        let chosen = col.colour_one(e, |_, j| {
            if inter {
                pp_out[p * s + j as usize].max(pp_in[q * s + j as usize])
            } else {
                0
            }
        });
        if inter {
            pp_out[p * s + chosen as usize] += 1;
            pp_in[q * s + chosen as usize] += 1;
        }
    }
}

/// Alternating-walk swaps at the leaf level that bring every pod's
/// inter-pod flows per plane down to `X·⌈max(out, in)/(S·X)⌉` (or to
/// `min_target`, a level that does not raise the batch's peak) where
/// possible, without breaking the leaf-level capacity.
/// Returns the excess left (0 = every pod and plane within the target).
/// With `guided`, the walks prefer edges whose flip helps the balance.
fn rebalance_planes(
    col: &mut Colouring,
    ends: &[(u32, u32)],
    c: &ClosShape,
    min_target: usize,
    guided: bool,
) -> i64 {
    let (s, x, np) = (c.spines, c.superspines, c.pods);
    let pod = |l: u32| c.pod_of(l as usize);
    let mut out_total = vec![0usize; np];
    let mut in_total = vec![0usize; np];
    let mut by_pod_out: Vec<Vec<u32>> = vec![Vec::new(); np];
    let mut by_pod_in: Vec<Vec<u32>> = vec![Vec::new(); np];
    for (e, &(u, v)) in ends.iter().enumerate() {
        let (p, q) = (pod(u), pod(v));
        if p != q {
            out_total[p] += 1;
            in_total[q] += 1;
            by_pod_out[p].push(e as u32);
            by_pod_in[q].push(e as u32);
        }
    }
    let b2 = out_total
        .iter()
        .chain(&in_total)
        .map(|&n| n.div_ceil(s * x))
        .max()
        .unwrap_or(0);
    let target = (x * b2).max(min_target) as i64;
    let mut pp_out = vec![0i64; np * s];
    let mut pp_in = vec![0i64; np * s];
    for (e, &(u, v)) in ends.iter().enumerate() {
        let (p, q) = (pod(u), pod(v));
        if p != q {
            let j = col.colour_of(e as u32) as usize;
            pp_out[p * s + j] += 1;
            pp_in[q * s + j] += 1;
        }
    }
    let excess =
        |o: &[i64], i: &[i64]| -> i64 { o.iter().chain(i).map(|&n| (n - target).max(0)).sum() };
    let mut total = excess(&pp_out, &pp_in);
    if total == 0 {
        return 0;
    }
    let apply =
        |log: &[(u32, u32)], col: &Colouring, pp_out: &mut [i64], pp_in: &mut [i64], sign: i64| {
            // Adjust counts for every edge in the log: old colour -> current colour.
            for &(e, old) in log {
                let (u, v) = ends[e as usize];
                let (p, q) = (pod(u), pod(v));
                if p == q {
                    continue;
                }
                let new = col.colour_of(e) as usize;
                pp_out[p * s + old as usize] -= sign;
                pp_in[q * s + old as usize] -= sign;
                pp_out[p * s + new] += sign;
                pp_in[q * s + new] += sign;
            }
        };
    // Bounded effort: a few recolouring attempts per crossing flow.
    let budget = 2 * ends.len() + 1000;
    let mut tries = 0;
    'outer: while total > 0 && tries < budget {
        for side in 0..2 {
            for p in 0..np {
                for a in 0..s {
                    let over = if side == 0 {
                        pp_out[p * s + a]
                    } else {
                        pp_in[p * s + a]
                    };
                    if over <= target {
                        continue;
                    }
                    let list = if side == 0 {
                        &by_pod_out[p]
                    } else {
                        &by_pod_in[p]
                    };
                    let mut planes: Vec<usize> = (0..s).filter(|&b| b != a).collect();
                    planes.sort_by_key(|&b| {
                        if side == 0 {
                            pp_out[p * s + b]
                        } else {
                            pp_in[p * s + b]
                        }
                    });
                    for &e in list.iter() {
                        if col.colour_of(e) as usize != a {
                            continue;
                        }
                        if tries >= budget {
                            break 'outer;
                        }
                        for &b in planes.iter().take(4) {
                            tries += 1;
                            // Walk through edges whose flip helps the pod balance:
                            // intra-pod edges are neutral, inter-pod ones are
                            // scored by the excess they add or remove.
                            let score = |x: u32, old: u32, new: u32| -> i64 {
                                let (u, v) = ends[x as usize];
                                let (p, q) = (pod(u), pod(v));
                                if p == q || !guided {
                                    return 0;
                                }
                                let over = |n: i64| (n - target).max(0);
                                let (o, n) = (old as usize, new as usize);
                                over(pp_out[p * s + n] + 1) - over(pp_out[p * s + n])
                                    + over(pp_in[q * s + n] + 1)
                                    - over(pp_in[q * s + n])
                                    - (over(pp_out[p * s + o]) - over(pp_out[p * s + o] - 1))
                                    - (over(pp_in[q * s + o]) - over(pp_in[q * s + o] - 1))
                            };
                            let Some(log) = col.recolour_with(e, b as u32, score) else {
                                continue;
                            };
                            // Temporarily apply the effect to compute the new excess.
                            let mut o2 = pp_out.clone();
                            let mut i2 = pp_in.clone();
                            apply(&log, col, &mut o2, &mut i2, 1);
                            let t2 = excess(&o2, &i2);
                            if t2 < total {
                                pp_out = o2;
                                pp_in = i2;
                                total = t2;
                                continue 'outer;
                            }
                            col.undo(&log);
                        }
                    }
                }
            }
        }
        break;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::*;

    fn peak_util(topo: &Topology, a: &Assigner) -> f64 {
        a.added()
            .map(|(e, b)| b as f64 / topo.edge(e).capacity_bps as f64)
            .fold(0.0, f64::max)
    }

    #[test]
    fn colouring_reaches_ceil_delta_over_s_on_leaf_spine() {
        // 4 leaves x 4 hosts, 3 spines; every host sends to the host with
        // the same index on the next leaf: 4 flows per leaf over 3 spines.
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                leaves: 4,
                spines: 3,
                hosts_per_leaf: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        let r = 10_000_000_000u64;
        let flows: Vec<FlowReq> = (0..16u32)
            .map(|h| FlowReq {
                src: h,
                dst: (h + 4) % 16,
                rate_bps: r,
            })
            .collect();
        let ledger = Ledger::new(t.edge_count());
        let mut a = Assigner::new(&t);
        let mut paths = Vec::new();
        let m = a.assign(
            &t,
            Some(&c),
            &ledger,
            Window::new(0, 100),
            &flows,
            &mut paths,
        );
        assert_eq!(m, Method::Colouring);
        // ceil(4/3) = 2 flows of 10G on a 100G uplink.
        assert!(
            (peak_util(&t, &a) - 0.2).abs() < 1e-9,
            "{}",
            peak_util(&t, &a)
        );
        for (f, p) in flows.iter().zip(&paths) {
            assert_eq!(p.len(), 3);
            assert_eq!(*p.edges().last().unwrap(), t.host_down_edge(f.dst));
        }
    }

    #[test]
    fn greedy_spreads_unequal_rates_and_uses_existing_load() {
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                leaves: 2,
                spines: 2,
                hosts_per_leaf: 2,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        let mut ledger = Ledger::new(t.edge_count());
        let w = Window::new(0, 100);
        // 60G already on leaf1 -> spine1.
        let l1 = t.switch_by_name("leaf1").unwrap();
        let up1 = t.switch_out_edges(l1)[0];
        ledger.reserve(up1, w, 60_000_000_000);
        ledger.open(w);
        let flows = [FlowReq {
            src: 0,
            dst: 2,
            rate_bps: 50_000_000_000,
        }];
        let mut a = Assigner::new(&t);
        let mut paths = Vec::new();
        assert_eq!(
            a.assign(&t, Some(&c), &ledger, w, &flows, &mut paths),
            Method::Greedy
        );
        assert_ne!(paths[0].edges()[0], up1, "must avoid the loaded uplink");
    }

    /// A leaf uplink down (both directions): an all-to-all batch on a
    /// 3-tier Clos is still coloured, no flow crosses the dead link, and the
    /// leaf's other three uplinks (and downlinks) share its flows evenly:
    /// 48 flows leave the leaf, 16 on each.
    #[test]
    fn colouring_moves_flows_off_a_down_link() {
        let t = Topology::from_spec(
            multi_pod(&MultiPod {
                pods: 2,
                leaves_per_pod: 2,
                spines_per_pod: 4,
                superspines_per_plane: 2,
                hosts_per_leaf: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        let n = t.hosts().len() as u32;
        let flows: Vec<FlowReq> = (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .map(|(src, dst)| FlowReq {
                src,
                dst,
                rate_bps: 1_000_000_000,
            })
            .collect();
        let leaf = t.hosts()[0].leaf;
        let ups: Vec<EdgeId> = t
            .switch_out_edges(leaf)
            .iter()
            .copied()
            .filter(|&e| matches!(t.edge(e).to, NodeRef::Switch(_)))
            .collect();
        assert_eq!(ups.len(), 4);
        let up = ups[0];
        let NodeRef::Switch(spine) = t.edge(up).to else {
            unreachable!("filtered above")
        };
        let down_edge = t
            .switch_out_edges(spine)
            .iter()
            .copied()
            .find(|&e| t.edge(e).to == NodeRef::Switch(leaf))
            .unwrap();
        let mut a = Assigner::new(&t);
        a.set_down(up, true);
        a.set_down(down_edge, true);
        let ledger = Ledger::new(t.edge_count());
        let mut paths = Vec::new();
        let m = a.assign(
            &t,
            Some(&c),
            &ledger,
            Window::new(0, 100),
            &flows,
            &mut paths,
        );
        assert_eq!(m, Method::Colouring);
        let mut count = vec![0u32; t.edge_count()];
        for p in &paths {
            assert!(!p.edges().contains(&up) && !p.edges().contains(&down_edge));
            for &e in p.edges() {
                count[e as usize] += 1;
            }
        }
        let into_leaf: Vec<EdgeId> = (0..t.edge_count() as EdgeId)
            .filter(|&e| e != down_edge)
            .filter(|&e| {
                let l = t.edge(e);
                l.to == NodeRef::Switch(leaf) && matches!(l.from, NodeRef::Switch(_))
            })
            .collect();
        assert_eq!(into_leaf.len(), 3);
        for &e in ups[1..].iter().chain(&into_leaf) {
            assert_eq!(count[e as usize], 16, "edge {e}");
        }
    }
}
