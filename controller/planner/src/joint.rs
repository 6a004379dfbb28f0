//! Joint path choice for a set of flows that may each have their own time
//! window: one assignment for the whole set, not a sequence.
//!
//! [`crate::assign`] places one batch (one window) at a time on top of
//! what is already reserved, so the order in which batches and demands
//! arrive shapes the result. Here every flow of the set can move at once:
//! time is cut into the elementary intervals ("cells") between the flows'
//! start and end times, each (link, cell) carries the reservations that
//! stay (the ledger's peak in the cell) plus the set's flows active in it,
//! and a local search over each flow's equal-cost paths lowers, in order,
//! the highest utilisation, the number of (link, cell) pairs at it, and the
//! sum of squared utilisations (which spreads load below the peak, where
//! the next flow or a failure re-plan will need headroom).
//!
//! Moves, tried until none improves or the effort is spent:
//! 1. **relocate** a flow crossing a peak (link, cell) to its best other path;
//! 2. **pair**: relocate one such flow even if that alone is worse, then
//!    the best second relocation of any flow, kept if the pair improves;
//! 3. **kick**: when stuck, a seeded random peak flow takes a random other
//!    path and the search continues; the best assignment seen is returned.
//!
//! The effort is counted in move evaluations, so for the same input (same
//! flow order) the result is the same on any machine; a wall-clock
//! deadline only cuts the search short as a safety net
//! ([`JointResult::cut_short`] says so).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::assign::DOWN_PENALTY;
use crate::ledger::{Ledger, Window};
use crate::paths::{all_paths, Path};
use crate::rng::Rng;
use crate::topology::{EdgeId, HostIdx, Topology};

/// Most equal-cost paths considered per flow.
pub const MAX_CANDIDATES: usize = 64;

/// Largest (link × cell) table the search builds; larger sets keep their
/// starting assignment.
pub const MAX_TABLE_ENTRIES: usize = 4 << 20;

/// One flow of the set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JointFlow {
    /// Source NIC.
    pub src: HostIdx,
    /// Destination NIC.
    pub dst: HostIdx,
    /// Bit/s to carry.
    pub rate_bps: u64,
    /// When.
    pub window: Window,
}

/// What the search may spend.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    /// Most move evaluations (the deterministic budget).
    pub evaluations: u64,
    /// Kicks out of a local optimum.
    pub kicks: u32,
    /// Stop as soon as the peak utilisation is at most this (0: search
    /// for the lowest peak; the headroom: any assignment that fits will do).
    pub good_enough: f64,
    /// Stop by then whatever the count (a safety net).
    pub deadline: Option<Instant>,
}

/// The fabric the set is placed on: the reservations that stay, the
/// reservable capacity per link (0 when down) and which links are down.
#[derive(Clone, Copy)]
pub struct Fabric<'a> {
    /// Topology.
    pub topo: &'a Topology,
    /// Reservations that do not move (the set's own flows are not in it).
    pub ledger: &'a Ledger,
    /// headroom × capacity per edge, bit/s.
    pub limits: &'a [u64],
    /// Edges that are down.
    pub down: &'a [bool],
}

/// A (link, cell) over its reservable capacity in the returned assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overload {
    /// The link.
    pub edge: EdgeId,
    /// The cell.
    pub window: Window,
    /// Bit/s free there for the set under the headroom.
    pub free_bps: u64,
    /// Bit/s the set puts there.
    pub need_bps: u64,
}

/// The assignment found.
#[derive(Clone, Debug)]
pub struct JointResult {
    /// One path per flow, in input order.
    pub paths: Vec<Path>,
    /// Highest utilisation (load / capacity) over the set's links and cells,
    /// at the start and at the end.
    pub start_peak: f64,
    /// See `start_peak`.
    pub peak: f64,
    /// The worst (link, cell) above its limit, if any.
    pub overload: Option<Overload>,
    /// Move evaluations spent.
    pub evaluations: u64,
    /// The deadline or the table size stopped the search early.
    pub cut_short: bool,
}

impl JointResult {
    /// Every link within its reservable capacity.
    pub fn fits(&self) -> bool {
        self.overload.is_none()
    }
}

/// (highest utilisation, (link, cell) pairs at it, sum of squares).
#[derive(Clone, Copy, Debug)]
struct Key {
    max: f64,
    at_max: u32,
    sumsq: f64,
}

impl Key {
    fn better_than(&self, o: &Key) -> bool {
        const EPS: f64 = 1e-12;
        if self.max < o.max - EPS {
            return true;
        }
        if self.max > o.max + EPS {
            return false;
        }
        if self.at_max != o.at_max {
            return self.at_max < o.at_max;
        }
        self.sumsq < o.sumsq - 1e-9 * o.sumsq.max(1.0)
    }
}

/// Branch-and-bound state.
struct Bb {
    /// Per local edge × cell: what the set adds (fixed edges, plus the
    /// flows chosen so far on the path so far).
    added: Vec<u64>,
    choice: Vec<usize>,
    best: f64,
    best_choice: Option<Vec<usize>>,
    exhaustive: bool,
}

struct FlowState {
    /// Cells `[lo, hi)`.
    lo: u32,
    hi: u32,
    rate: u64,
    /// Local edges of each candidate path (the source uplink is fixed and
    /// counted once at the start).
    cands: Vec<Vec<u32>>,
    cur: usize,
}

struct Search<'a> {
    fab: Fabric<'a>,
    cells: Vec<Window>,
    edges: Vec<EdgeId>,
    cap: Vec<f64>,
    down: Vec<bool>,
    /// Per local edge × cell: what stays, and what the set adds.
    base: Vec<u64>,
    added: Vec<u64>,
    /// Utilisation (as ordered bits) → how many (link, cell) pairs have it.
    hist: BTreeMap<u64, u32>,
    sumsq: f64,
    flows: Vec<FlowState>,
    paths: Vec<Vec<Path>>,
    evaluations: u64,
    effort: Effort,
    cut_short: bool,
}

/// Places `flows` jointly, starting from `initial` (one path per flow, as
/// placed so far); returns the best assignment found.
pub fn solve(
    fab: Fabric<'_>,
    flows: &[JointFlow],
    initial: &[Path],
    effort: Effort,
) -> JointResult {
    assert_eq!(flows.len(), initial.len(), "one starting path per flow");
    let Some(mut s) = Search::build(fab, flows, initial, effort) else {
        return JointResult {
            paths: initial.to_vec(),
            start_peak: f64::NAN,
            peak: f64::NAN,
            overload: None,
            evaluations: 0,
            cut_short: true,
        };
    };
    let start_peak = s.key().max;
    s.run();
    let overload = s.worst_overload();
    JointResult {
        paths: s
            .flows
            .iter()
            .zip(&s.paths)
            .map(|(f, p)| p[f.cur])
            .collect(),
        start_peak,
        peak: s.key().max,
        overload,
        evaluations: s.evaluations,
        cut_short: s.cut_short,
    }
}

impl<'a> Search<'a> {
    fn build(
        fab: Fabric<'a>,
        flows: &[JointFlow],
        initial: &[Path],
        effort: Effort,
    ) -> Option<Search<'a>> {
        let topo = fab.topo;
        let mut times: Vec<u64> = flows
            .iter()
            .flat_map(|f| [f.window.start_ns, f.window.end_ns])
            .collect();
        times.sort_unstable();
        times.dedup();
        let cells: Vec<Window> = times.windows(2).map(|t| Window::new(t[0], t[1])).collect();
        let nc = cells.len();
        let mut local: HashMap<EdgeId, u32> = HashMap::new();
        let mut edges: Vec<EdgeId> = Vec::new();
        let mut id = |e: EdgeId, edges: &mut Vec<EdgeId>| -> u32 {
            *local.entry(e).or_insert_with(|| {
                edges.push(e);
                edges.len() as u32 - 1
            })
        };
        let mut states = Vec::with_capacity(flows.len());
        let mut paths = Vec::with_capacity(flows.len());
        let mut uplinks = Vec::with_capacity(flows.len());
        for (f, &start) in flows.iter().zip(initial) {
            let mut cand = all_paths(topo, f.src, f.dst, MAX_CANDIDATES);
            let cur = match cand.iter().position(|p| *p == start) {
                Some(i) => i,
                None => {
                    cand.push(start);
                    cand.len() - 1
                }
            };
            let lo = times.partition_point(|&t| t < f.window.start_ns) as u32;
            let hi = times.partition_point(|&t| t < f.window.end_ns) as u32;
            uplinks.push(id(topo.host_up_edge(f.src), &mut edges));
            let local_cands = cand
                .iter()
                .map(|p| p.edges().iter().map(|&e| id(e, &mut edges)).collect())
                .collect();
            states.push(FlowState {
                lo,
                hi,
                rate: f.rate_bps,
                cands: local_cands,
                cur,
            });
            paths.push(cand);
        }
        if edges.len().saturating_mul(nc) > MAX_TABLE_ENTRIES {
            return None;
        }
        let mut base = vec![0u64; edges.len() * nc];
        for (le, &e) in edges.iter().enumerate() {
            for (c, w) in cells.iter().enumerate() {
                base[le * nc + c] = fab.ledger.peak(e, *w);
            }
        }
        let mut s = Search {
            fab,
            cap: edges
                .iter()
                .map(|&e| topo.edge(e).capacity_bps as f64)
                .collect(),
            down: edges.iter().map(|&e| fab.down[e as usize]).collect(),
            added: vec![0; base.len()],
            base,
            cells,
            edges,
            hist: BTreeMap::new(),
            sumsq: 0.0,
            flows: states,
            paths,
            evaluations: 0,
            effort,
            cut_short: false,
        };
        for i in 0..s.base.len() {
            s.count(i, 1);
        }
        for (i, &up) in uplinks.iter().enumerate() {
            let (lo, hi, r) = (s.flows[i].lo, s.flows[i].hi, s.flows[i].rate);
            s.load(up, lo, hi, r as i64);
            for k in 0..s.flows[i].cands[s.flows[i].cur].len() {
                let le = s.flows[i].cands[s.flows[i].cur][k];
                s.load(le, lo, hi, r as i64);
            }
        }
        Some(s)
    }

    fn util(&self, i: usize) -> f64 {
        let le = i / self.cells.len();
        if self.down[le] {
            // What stays on a down link cannot be helped; what the set adds can.
            if self.added[i] == 0 {
                0.0
            } else {
                DOWN_PENALTY + self.added[i] as f64 / self.cap[le]
            }
        } else {
            (self.base[i] + self.added[i]) as f64 / self.cap[le]
        }
    }

    /// Adds (`sign` 1) or removes (-1) entry `i` from the histogram and sum.
    fn count(&mut self, i: usize, sign: i32) {
        let u = self.util(i);
        let n = self.hist.entry(u.to_bits()).or_insert(0);
        if sign > 0 {
            *n += 1;
        } else {
            *n -= 1;
            if *n == 0 {
                self.hist.remove(&u.to_bits());
            }
        }
        self.sumsq += sign as f64 * u * u;
    }

    fn load(&mut self, le: u32, lo: u32, hi: u32, delta: i64) {
        let nc = self.cells.len();
        for c in lo..hi {
            let i = le as usize * nc + c as usize;
            self.count(i, -1);
            self.added[i] = (self.added[i] as i64 + delta) as u64;
            self.count(i, 1);
        }
    }

    fn key(&self) -> Key {
        let (&bits, &n) = self.hist.iter().next_back().expect("at least one entry");
        Key {
            max: f64::from_bits(bits),
            at_max: n,
            sumsq: self.sumsq,
        }
    }

    /// Moves flow `i` to candidate `to`.
    fn set(&mut self, i: usize, to: usize) {
        let from = self.flows[i].cur;
        if from == to {
            return;
        }
        let (lo, hi, r) = (
            self.flows[i].lo,
            self.flows[i].hi,
            self.flows[i].rate as i64,
        );
        let old = std::mem::take(&mut self.flows[i].cands[from]);
        let new = std::mem::take(&mut self.flows[i].cands[to]);
        for &le in old.iter().filter(|e| !new.contains(e)) {
            self.load(le, lo, hi, -r);
        }
        for &le in new.iter().filter(|e| !old.contains(e)) {
            self.load(le, lo, hi, r);
        }
        self.flows[i].cands[from] = old;
        self.flows[i].cands[to] = new;
        self.flows[i].cur = to;
    }

    /// The key with flow `i` on candidate `to` (the assignment is unchanged
    /// after); `None` without the full evaluation when a link it would add
    /// load to ends above `bound`.
    fn try_move(&mut self, i: usize, to: usize, bound: f64) -> Option<Key> {
        self.evaluations += 1;
        let from = self.flows[i].cur;
        let f = &self.flows[i];
        let nc = self.cells.len();
        for &le in f.cands[to].iter().filter(|e| !f.cands[from].contains(e)) {
            let l = le as usize;
            for c in f.lo..f.hi {
                let k = l * nc + c as usize;
                let u = if self.down[l] {
                    DOWN_PENALTY + (self.added[k] + f.rate) as f64 / self.cap[l]
                } else {
                    (self.base[k] + self.added[k] + f.rate) as f64 / self.cap[l]
                };
                if u > bound + 1e-12 {
                    return None;
                }
            }
        }
        self.set(i, to);
        let k = self.key();
        self.set(i, from);
        Some(k)
    }

    fn spent(&mut self) -> bool {
        if self.evaluations >= self.effort.evaluations {
            return true;
        }
        if self.evaluations % 64 == 0 {
            if let Some(d) = self.effort.deadline {
                if Instant::now() >= d {
                    self.cut_short = true;
                    return true;
                }
            }
        }
        false
    }

    /// Movable flows crossing a (link, cell) at or above `level`.
    fn flows_at(&self, level: f64) -> Vec<usize> {
        let nc = self.cells.len();
        let hot: Vec<bool> = (0..self.base.len())
            .map(|i| self.util(i) >= level - 1e-12)
            .collect();
        (0..self.flows.len())
            .filter(|&i| {
                let f = &self.flows[i];
                f.cands.len() > 1
                    && f.cands[f.cur]
                        .iter()
                        .any(|&le| (f.lo..f.hi).any(|c| hot[le as usize * nc + c as usize]))
            })
            .collect()
    }

    /// The best improving relocation of a hot flow, applied.
    fn relocate(&mut self, hot: &[usize]) -> bool {
        let now = self.key();
        let mut best: Option<(Key, usize, usize)> = None;
        for &i in hot {
            for j in 0..self.flows[i].cands.len() {
                if j == self.flows[i].cur || self.spent() {
                    continue;
                }
                let Some(k) = self.try_move(i, j, now.max) else {
                    continue;
                };
                if k.better_than(best.as_ref().map_or(&now, |b| &b.0)) {
                    best = Some((k, i, j));
                }
            }
        }
        match best {
            Some((_, i, j)) => {
                self.set(i, j);
                true
            }
            None => false,
        }
    }

    /// A hot flow's relocation followed by the best second relocation of a
    /// flow then at or above the old peak, applied when the pair improves.
    fn pair(&mut self, hot: &[usize]) -> bool {
        let now = self.key();
        for &i in hot {
            let from = self.flows[i].cur;
            for j in 0..self.flows[i].cands.len() {
                if j == from {
                    continue;
                }
                self.set(i, j);
                let second = self.flows_at(now.max);
                let mut best: Option<(Key, usize, usize)> = None;
                for &k in second.iter().filter(|&&k| k != i) {
                    for l in 0..self.flows[k].cands.len() {
                        if l == self.flows[k].cur {
                            continue;
                        }
                        if self.spent() {
                            self.set(i, from);
                            return false;
                        }
                        let Some(key) = self.try_move(k, l, now.max) else {
                            continue;
                        };
                        if key.better_than(best.as_ref().map_or(&now, |b| &b.0)) {
                            best = Some((key, k, l));
                        }
                    }
                }
                if let Some((_, k, l)) = best {
                    self.set(k, l);
                    return true;
                }
                self.set(i, from);
            }
        }
        false
    }

    /// Local search until stuck (no kicks): relocations, then pairs.
    fn descend(&mut self) {
        while !self.spent() {
            let hot = self.flows_at(self.key().max);
            if hot.is_empty() || !(self.relocate(&hot) || self.pair(&hot)) {
                break;
            }
        }
    }

    fn run(&mut self) {
        self.descend();
        if self.key().max <= self.effort.good_enough {
            return;
        }
        let proved = self.branch_and_bound();
        self.descend();
        if proved {
            return;
        }
        let mut rng = Rng::new(0x006a_6f69_6e74 ^ self.flows.len() as u64);
        let mut best_key = self.key();
        let mut best: Vec<usize> = self.flows.iter().map(|f| f.cur).collect();
        for _ in 0..self.effort.kicks {
            if self.spent() {
                break;
            }
            let hot = self.flows_at(self.key().max);
            if hot.is_empty() {
                break;
            }
            let i = hot[rng.below(hot.len() as u64) as usize];
            let n = self.flows[i].cands.len();
            let j = (self.flows[i].cur + 1 + rng.below(n as u64 - 1) as usize) % n;
            self.set(i, j);
            self.descend();
            let k = self.key();
            if k.better_than(&best_key) {
                best_key = k;
                best = self.flows.iter().map(|f| f.cur).collect();
            }
        }
        for (i, &c) in best.iter().enumerate() {
            self.set(i, c);
        }
    }

    /// Depth-first branch and bound on the peak alone, from the current
    /// assignment as the bound to beat: flows largest first, each path in
    /// order of the peak it leaves, a branch cut as soon as its partial
    /// peak reaches the best. Installs a better assignment if it finds one;
    /// true when the search was exhaustive (the peak is optimal).
    fn branch_and_bound(&mut self) -> bool {
        let nc = self.cells.len();
        // Edges every candidate of a flow shares carry it whatever is chosen.
        let mut fixed_added = self.added.clone();
        let mut var: Vec<Vec<Vec<u32>>> = Vec::with_capacity(self.flows.len());
        for f in &self.flows {
            let cur = &f.cands[f.cur];
            let common: Vec<u32> = cur
                .iter()
                .copied()
                .filter(|e| f.cands.iter().all(|c| c.contains(e)))
                .collect();
            // Take the flow's variable part out: what stays is fixed.
            for &le in cur.iter().filter(|e| !common.contains(e)) {
                for c in f.lo..f.hi {
                    fixed_added[le as usize * nc + c as usize] -= f.rate;
                }
            }
            var.push(
                f.cands
                    .iter()
                    .map(|c| c.iter().copied().filter(|e| !common.contains(e)).collect())
                    .collect(),
            );
        }
        let mut order: Vec<usize> = (0..self.flows.len())
            .filter(|&i| self.flows[i].cands.len() > 1)
            .collect();
        order.sort_by_key(|&i| {
            let f = &self.flows[i];
            (std::cmp::Reverse(f.rate as u128 * (f.hi - f.lo) as u128), i)
        });
        let mut bb = Bb {
            added: fixed_added,
            choice: self.flows.iter().map(|f| f.cur).collect(),
            best: self.key().max,
            best_choice: None,
            exhaustive: true,
        };
        let root = (0..self.base.len())
            .map(|i| self.util_of(i, bb.added[i]))
            .fold(0.0, f64::max);
        if root < bb.best - 1e-12 {
            self.dive(&mut bb, &var, &order, 0, root);
        }
        if let Some(choice) = bb.best_choice.take() {
            for (i, &c) in choice.iter().enumerate() {
                self.set(i, c);
            }
        }
        bb.exhaustive
    }

    fn util_of(&self, i: usize, added: u64) -> f64 {
        let le = i / self.cells.len();
        if self.down[le] {
            if added == 0 {
                0.0
            } else {
                DOWN_PENALTY + added as f64 / self.cap[le]
            }
        } else {
            (self.base[i] + added) as f64 / self.cap[le]
        }
    }

    fn dive(
        &mut self,
        bb: &mut Bb,
        var: &[Vec<Vec<u32>>],
        order: &[usize],
        depth: usize,
        peak: f64,
    ) {
        if depth == order.len() {
            bb.best = peak;
            bb.best_choice = Some(bb.choice.clone());
            return;
        }
        let nc = self.cells.len();
        let i = order[depth];
        let (lo, hi, r) = (self.flows[i].lo, self.flows[i].hi, self.flows[i].rate);
        // The peak each path leaves, best first.
        let mut opts: Vec<(f64, usize)> = var[i]
            .iter()
            .enumerate()
            .map(|(j, edges)| {
                let mut m = peak;
                for &le in edges {
                    for c in lo..hi {
                        let k = le as usize * nc + c as usize;
                        m = m.max(self.util_of(k, bb.added[k] + r));
                    }
                }
                (m, j)
            })
            .collect();
        opts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (m, j) in opts {
            if m >= bb.best - 1e-12 {
                break;
            }
            if self.spent() {
                bb.exhaustive = false;
                return;
            }
            self.evaluations += 1;
            for &le in &var[i][j] {
                for c in lo..hi {
                    bb.added[le as usize * nc + c as usize] += r;
                }
            }
            bb.choice[i] = j;
            self.dive(bb, var, order, depth + 1, m);
            for &le in &var[i][j] {
                for c in lo..hi {
                    bb.added[le as usize * nc + c as usize] -= r;
                }
            }
            if bb.best <= self.effort.good_enough {
                bb.exhaustive = false;
                return;
            }
        }
    }

    /// The (link, cell) furthest above its limit, if any.
    fn worst_overload(&self) -> Option<Overload> {
        let nc = self.cells.len();
        let mut worst: Option<(i128, Overload)> = None;
        for (le, &e) in self.edges.iter().enumerate() {
            let limit = if self.fab.down[e as usize] {
                0
            } else {
                self.fab.limits[e as usize]
            };
            for c in 0..nc {
                let i = le * nc + c;
                if self.added[i] == 0 {
                    continue;
                }
                let over = (self.base[i] + self.added[i]) as i128 - limit as i128;
                if over > 0 && worst.as_ref().is_none_or(|w| over > w.0) {
                    worst = Some((
                        over,
                        Overload {
                            edge: e,
                            window: self.cells[c],
                            free_bps: limit.saturating_sub(self.base[i]),
                            need_bps: self.added[i],
                        },
                    ));
                }
            }
        }
        worst.map(|w| w.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::{leaf_spine, LeafSpine};

    fn fabric() -> Topology {
        // 2 leaves x 2 hosts, 2 spines, 100G.
        Topology::from_spec(leaf_spine(&LeafSpine::default()).unwrap()).unwrap()
    }

    fn effort() -> Effort {
        Effort {
            evaluations: 100_000,
            kicks: 8,
            good_enough: 0.0,
            deadline: None,
        }
    }

    /// Two 60G flows from one leaf, both started on the same spine: the
    /// search splits them (peak 0.6 instead of 1.2) and reports that it fits.
    #[test]
    fn splits_flows_that_start_on_one_spine() {
        let t = fabric();
        let ledger = Ledger::new(t.edge_count());
        let limits: Vec<u64> = (0..t.edge_count() as u32)
            .map(|e| t.edge(e).capacity_bps * 9 / 10)
            .collect();
        let down = vec![false; t.edge_count()];
        let w = Window::new(0, 100);
        let flows = [
            JointFlow {
                src: 0,
                dst: 2,
                rate_bps: 60_000_000_000,
                window: w,
            },
            JointFlow {
                src: 1,
                dst: 3,
                rate_bps: 60_000_000_000,
                window: w,
            },
        ];
        let p0 = all_paths(&t, 0, 2, 8)[0];
        let p1 = all_paths(&t, 1, 3, 8)[0];
        assert_eq!(
            p0.edges()[0],
            p1.edges()[0],
            "both start on the first spine"
        );
        let fab = Fabric {
            topo: &t,
            ledger: &ledger,
            limits: &limits,
            down: &down,
        };
        let r = solve(fab, &flows, &[p0, p1], effort());
        assert!((r.start_peak - 1.2).abs() < 1e-9, "{}", r.start_peak);
        assert!((r.peak - 0.6).abs() < 1e-9, "{}", r.peak);
        assert_ne!(r.paths[0].edges()[0], r.paths[1].edges()[0]);
        assert!(r.fits());
    }

    /// Flows whose windows only partly overlap share a spine only where
    /// they do not overlap; a third flow that cannot fit is reported with
    /// the link and the cell that bind.
    #[test]
    fn windows_are_cells_and_overloads_name_the_link() {
        let t = fabric();
        let ledger = Ledger::new(t.edge_count());
        let limits: Vec<u64> = (0..t.edge_count() as u32)
            .map(|e| t.edge(e).capacity_bps * 9 / 10)
            .collect();
        let down = vec![false; t.edge_count()];
        let g = 1_000_000_000u64;
        let flows = [
            JointFlow {
                src: 0,
                dst: 2,
                rate_bps: 50 * g,
                window: Window::new(0, 100),
            },
            JointFlow {
                src: 1,
                dst: 3,
                rate_bps: 50 * g,
                window: Window::new(50, 150),
            },
            JointFlow {
                src: 0,
                dst: 2,
                rate_bps: 50 * g,
                window: Window::new(100, 200),
            },
        ];
        let init: Vec<Path> = flows
            .iter()
            .map(|f| all_paths(&t, f.src, f.dst, 8)[0])
            .collect();
        let fab = Fabric {
            topo: &t,
            ledger: &ledger,
            limits: &limits,
            down: &down,
        };
        let r = solve(fab, &flows, &init, effort());
        assert!((r.peak - 0.5).abs() < 1e-9, "{}", r.peak);
        assert!(r.fits());
        // A 50G flow h2 -> h1 (same leaf) over [0, 150) on top: h2's
        // uplink carries 100G from 50 on: over the 90G limit whatever the paths.
        let mut more = flows.to_vec();
        more.push(JointFlow {
            src: 1,
            dst: 0,
            rate_bps: 50 * g,
            window: Window::new(0, 150),
        });
        let mut init2 = r.paths.clone();
        init2.push(all_paths(&t, 1, 0, 8)[0]);
        let r2 = solve(fab, &more, &init2, effort());
        let o = r2.overload.expect("cannot fit");
        assert_eq!(o.edge, t.host_up_edge(1));
        assert_eq!(o.window, Window::new(50, 100));
        assert_eq!(o.need_bps, 100 * g);
        assert_eq!(o.free_bps, 90 * g);
    }

    /// A down link is left whenever another path exists.
    #[test]
    fn leaves_down_links() {
        let t = fabric();
        let ledger = Ledger::new(t.edge_count());
        let limits: Vec<u64> = (0..t.edge_count() as u32)
            .map(|e| t.edge(e).capacity_bps)
            .collect();
        let p = all_paths(&t, 0, 2, 8);
        let mut down = vec![false; t.edge_count()];
        down[p[0].edges()[0] as usize] = true;
        let flows = [JointFlow {
            src: 0,
            dst: 2,
            rate_bps: 10,
            window: Window::new(0, 10),
        }];
        let fab = Fabric {
            topo: &t,
            ledger: &ledger,
            limits: &limits,
            down: &down,
        };
        let r = solve(fab, &flows, &[p[0]], effort());
        assert_eq!(r.paths[0], p[1]);
        assert!(r.fits());
    }
}
