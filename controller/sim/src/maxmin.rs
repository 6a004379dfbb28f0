//! Max-min fair rates by progressive filling, kept up to date as flows come
//! and go.
//!
//! Every active flow loads its own links with coefficient 1 (a private
//! link of capacity `max_rate` stands in for a rate cap) and, when
//! sprayed, shared [`Parts`] with fractional coefficients. Rates rise
//! together from zero; when a link fills, the flows crossing it freeze at
//! that level and the others keep rising. A link's saturation level is
//! `(capacity − frozen load) / (summed coefficients of unfrozen flows)`;
//! freezing flows can only raise the other links' levels, so a lazy
//! min-heap over links is exact.
//!
//! **Incremental re-solves.** Between two solves flows only leave and
//! arrive (a failure asks for a full solve). The new filling is the same
//! as the old one below a level `L`:
//! * below the lowest old rate of a departed flow — all its links filled
//!   at or above that rate, so removing it changes nothing lower down;
//! * below the level at which an arriving flow could first fill one of its
//!   links — at most the link's current load plus the newcomers' share,
//!   and at most (old weight + new weight) × level.
//!
//! So only the flows whose rate is at least `L` (plus the newcomers) are
//! re-solved, starting at `L`, with everything slower frozen as it was.
//! Flows are kept in groups of equal rate, so finding them costs nothing.
//! In a synchronised collective the flows that finish are the fastest
//! ones: most events re-solve nothing at all.
//!
//! A part's links are updated once per freezing level for all its flows
//! that froze at that level, not once per flow.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::parts::{PartId, Parts, Route};

/// Flow handle inside a [`MaxMin`].
pub type FlowId = u32;

const UNSOLVED: u32 = u32::MAX;
const FREE: u32 = u32::MAX - 1;

#[derive(Clone, Copy)]
struct Slot<T> {
    rate: f64,
    /// Offset in `arena`: own edges, then part ids.
    off: u32,
    /// Rate group ([`UNSOLVED`] before its first solve, [`FREE`] when unused).
    group: u32,
    n_edges: u16,
    n_parts: u16,
    /// The caller's state for this flow, kept here so one cache line serves both.
    data: T,
}

/// Flows that froze at one level. Members that left since are still
/// listed; a member belongs only while its slot names this group.
struct Group {
    level: f64,
    members: Vec<FlowId>,
}

#[derive(Clone, Copy, PartialEq)]
struct Key(f64, u32);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the lowest level.
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// Relative slack under which two levels count as equal.
const SAME: f64 = 1e-12;

/// Max-min state of a set of active flows on a network; each flow carries
/// a caller's `T`.
pub struct MaxMin<T> {
    /// Real edges; ids at and above are private rate-cap links.
    n_real: usize,
    cap: Vec<f64>,
    /// Per edge: summed coefficients of active flows.
    weight: Vec<f64>,
    /// Per edge: summed coefficient × rate of active flows.
    load: Vec<f64>,
    free_private: Vec<u32>,
    parts: Parts,
    /// Per part: flows added (+) and removed (−) and their rates, not yet
    /// applied to the part's links.
    part_delta: Vec<(f64, f64)>,
    dirty_parts: Vec<PartId>,
    slots: Vec<Slot<T>>,
    free_slots: Vec<FlowId>,
    arena: Vec<u32>,
    garbage: usize,
    live: usize,
    /// Sorted by level.
    groups: Vec<Group>,
    /// Lowest rate of a flow removed since the last solve.
    floor: f64,
    arrivals: Vec<FlowId>,
    full: bool,
    scratch: Scratch,
}

/// Per-solve state of one edge (one cache line for everything a flow's
/// freeze touches).
#[derive(Clone, Copy, Default)]
struct EdgeScratch {
    weight: f64,
    frozen: f64,
    /// Unfrozen (flow, edge) incidences.
    count: u32,
    /// This edge's flows are `adj[off..fill]`.
    off: u32,
    fill: u32,
    seen: bool,
}

/// Per-solve working arrays, sized to the network and reset after use.
#[derive(Default)]
struct Scratch {
    edge: Vec<EdgeScratch>,
    touched: Vec<u32>,
    adj: Vec<FlowId>,
    p_count: Vec<u32>,
    p_rates: Vec<f64>,
    p_off: Vec<u32>,
    p_fill: Vec<u32>,
    p_adj: Vec<FlowId>,
    p_touched: Vec<PartId>,
    p_pending: Vec<u32>,
    p_dirty: Vec<PartId>,
    unit: Vec<FlowId>,
    heap: BinaryHeap<Key>,
}

impl<T: Copy> MaxMin<T> {
    /// A network with these edge capacities (same unit as the rates).
    pub fn new(cap: &[f64]) -> MaxMin<T> {
        let n = cap.len();
        MaxMin {
            n_real: n,
            cap: cap.to_vec(),
            weight: vec![0.0; n],
            load: vec![0.0; n],
            free_private: Vec::new(),
            parts: Parts::new(),
            part_delta: Vec::new(),
            dirty_parts: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            arena: Vec::new(),
            garbage: 0,
            live: 0,
            groups: Vec::new(),
            floor: f64::INFINITY,
            arrivals: Vec::new(),
            full: false,
            scratch: Scratch::default(),
        }
    }

    /// Per real edge, the summed coefficients of the active flows (what
    /// least-loaded routing compares), and the parts table to intern
    /// routes into. Flows added with parts since the last solve are not
    /// yet counted on the parts' links.
    pub fn load_and_parts(&mut self) -> (&[f64], &mut Parts) {
        (&self.weight[..self.n_real], &mut self.parts)
    }

    /// Per real edge, the summed rate of the active flows (coefficient ×
    /// rate), as the last solve left it.
    pub fn edge_load(&self) -> &[f64] {
        &self.load[..self.n_real]
    }

    /// The parts table.
    pub fn parts(&self) -> &Parts {
        &self.parts
    }

    /// Current rate of flow `f` (0 until the solve after it was added).
    pub fn rate(&self, f: FlowId) -> f64 {
        self.slots[f as usize].rate
    }

    /// The caller's state of flow `f`.
    pub fn data(&self, f: FlowId) -> &T {
        &self.slots[f as usize].data
    }

    /// The caller's state of flow `f`, mutable.
    pub fn data_mut(&mut self, f: FlowId) -> &mut T {
        &mut self.slots[f as usize].data
    }

    /// Whether `f` is an active flow.
    pub fn is_live(&self, f: FlowId) -> bool {
        self.slots.get(f as usize).is_some_and(|s| s.group != FREE)
    }

    /// The active flows.
    pub fn live(&self) -> impl Iterator<Item = FlowId> + '_ {
        (0..self.slots.len() as FlowId).filter(|&f| self.slots[f as usize].group != FREE)
    }

    /// Active flows.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no flow is active.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Own edges of `f` (rate-cap links excluded) and its parts.
    pub fn route_of(&self, f: FlowId) -> (&[u32], &[PartId]) {
        let s = &self.slots[f as usize];
        let o = s.off as usize;
        let own = &self.arena[o..o + s.n_edges as usize];
        let real = own
            .iter()
            .position(|&e| e as usize >= self.n_real)
            .unwrap_or(own.len());
        (
            &own[..real],
            &self.arena[o + s.n_edges as usize..o + s.n_edges as usize + s.n_parts as usize],
        )
    }

    fn own(&self, f: FlowId) -> (usize, usize, usize) {
        let s = &self.slots[f as usize];
        let o = s.off as usize;
        (
            o,
            o + s.n_edges as usize,
            o + s.n_edges as usize + s.n_parts as usize,
        )
    }

    fn private_edge(&mut self, cap: f64) -> u32 {
        let e = match self.free_private.pop() {
            Some(e) => e,
            None => {
                self.cap.push(0.0);
                self.weight.push(0.0);
                self.load.push(0.0);
                (self.cap.len() - 1) as u32
            }
        };
        self.cap[e as usize] = cap;
        e
    }

    fn touch_part(&mut self, p: PartId, dn: f64, dr: f64) {
        let p = p as usize;
        if self.part_delta.len() <= p {
            self.part_delta.resize(p + 1, (0.0, 0.0));
        }
        let d = &mut self.part_delta[p];
        if d.0 == 0.0 && d.1 == 0.0 {
            self.dirty_parts.push(p as PartId);
        }
        d.0 += dn;
        d.1 += dr;
    }

    /// Adds a flow on `route`, at most `max_rate` (infinite: no cap),
    /// carrying `data`. Its rate is 0 until the next [`MaxMin::solve`].
    pub fn add(&mut self, route: &Route, max_rate: f64, data: T) -> FlowId {
        assert!(!route.is_empty(), "a flow must load at least one link");
        let off = self.arena.len() as u32;
        self.arena.extend_from_slice(&route.edges);
        if max_rate.is_finite() {
            let e = self.private_edge(max_rate.max(0.0));
            self.arena.push(e);
        }
        let n_edges = (self.arena.len() - off as usize) as u16;
        self.arena.extend_from_slice(&route.parts);
        for i in off as usize..off as usize + n_edges as usize {
            self.weight[self.arena[i] as usize] += 1.0;
        }
        for &p in &route.parts {
            self.touch_part(p, 1.0, 0.0);
        }
        let slot = Slot {
            rate: 0.0,
            off,
            group: UNSOLVED,
            n_edges,
            n_parts: route.parts.len() as u16,
            data,
        };
        let f = match self.free_slots.pop() {
            Some(f) => {
                self.slots[f as usize] = slot;
                f
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as FlowId
            }
        };
        self.live += 1;
        self.arrivals.push(f);
        f
    }

    /// Removes flow `f`; returns its data.
    pub fn remove(&mut self, f: FlowId) -> T {
        let s = self.slots[f as usize];
        assert!(s.group != FREE, "flow {f} is not active");
        if s.group == UNSOLVED {
            if let Some(k) = self.arrivals.iter().rposition(|&a| a == f) {
                self.arrivals.swap_remove(k);
            }
        } else {
            self.floor = self.floor.min(s.rate);
        }
        let (a, b, c) = self.own(f);
        for i in a..b {
            let e = self.arena[i] as usize;
            if e >= self.n_real {
                self.cap[e] = 0.0;
                self.weight[e] = 0.0;
                self.load[e] = 0.0;
                self.free_private.push(e as u32);
            } else {
                self.weight[e] -= 1.0;
                self.load[e] -= s.rate;
            }
        }
        for i in b..c {
            let p = self.arena[i];
            self.touch_part(p, -1.0, -s.rate);
        }
        self.garbage += c - a;
        self.slots[f as usize].group = FREE;
        self.free_slots.push(f);
        self.live -= 1;
        if self.garbage > 1 << 16 && self.garbage > self.arena.len() / 2 {
            self.compact();
        }
        s.data
    }

    /// Takes edge `e` out of service (capacity 0); the next solve is full.
    pub fn fail_edge(&mut self, e: u32) {
        self.cap[e as usize] = 0.0;
        self.full = true;
    }

    fn compact(&mut self) {
        let mut fresh = Vec::with_capacity(self.arena.len() - self.garbage);
        for s in &mut self.slots {
            if s.group == FREE {
                continue;
            }
            let o = s.off as usize;
            let n = s.n_edges as usize + s.n_parts as usize;
            s.off = fresh.len() as u32;
            fresh.extend_from_slice(&self.arena[o..o + n]);
        }
        self.arena = fresh;
        self.garbage = 0;
    }

    /// Applies the flows added to and removed from parts to the parts' links.
    fn flush_parts(&mut self) {
        for &p in &self.dirty_parts {
            let (dn, dr) = std::mem::take(&mut self.part_delta[p as usize]);
            for &(e, c) in self.parts.get(p) {
                self.weight[e as usize] += c * dn;
                self.load[e as usize] += c * dr;
            }
        }
        self.dirty_parts.clear();
    }

    /// The level below which the arrivals cannot change the filling.
    fn arrival_floor(&mut self, arrivals: &[FlowId]) -> f64 {
        let sc = &mut self.scratch;
        sc.edge.resize(self.cap.len(), EdgeScratch::default());
        sc.p_count.resize(self.parts.len(), 0);
        let add = |e: u32, c: f64, sc: &mut Scratch| {
            let e = e as usize;
            if !sc.edge[e].seen {
                sc.edge[e].seen = true;
                sc.touched.push(e as u32);
            }
            sc.edge[e].weight += c;
        };
        for &f in arrivals {
            let s = self.slots[f as usize];
            let o = s.off as usize;
            for i in o..o + s.n_edges as usize {
                add(self.arena[i], 1.0, sc);
            }
            for i in o + s.n_edges as usize..o + s.n_edges as usize + s.n_parts as usize {
                let p = self.arena[i];
                if sc.p_count[p as usize] == 0 {
                    sc.p_touched.push(p);
                }
                sc.p_count[p as usize] += 1;
            }
        }
        let mut pt = std::mem::take(&mut sc.p_touched);
        for &p in &pt {
            let n = sc.p_count[p as usize] as f64;
            for &(e, c) in self.parts.get(p) {
                add(e, c * n, sc);
            }
            sc.p_count[p as usize] = 0;
        }
        pt.clear();
        sc.p_touched = pt;
        let mut floor = f64::INFINITY;
        for &e in &sc.touched {
            let e = e as usize;
            let (cap, delta) = (self.cap[e], sc.edge[e].weight);
            let by_load = (cap - self.load[e]) / delta;
            let by_weight = cap / self.weight[e].max(delta);
            floor = floor.min(by_load.max(by_weight));
            sc.edge[e].weight = 0.0;
            sc.edge[e].seen = false;
        }
        sc.touched.clear();
        floor
    }

    /// Brings every rate up to date; calls `changed(flow, data, old rate,
    /// new rate)` for each flow whose rate changed.
    pub fn solve(&mut self, mut changed: impl FnMut(FlowId, &mut T, f64, f64)) {
        self.flush_parts();
        let mut arrivals = std::mem::take(&mut self.arrivals);
        let mut start = 0.0;
        // Nothing but newcomers: the filling is new anyway.
        self.full |= arrivals.len() == self.live;
        if !self.full {
            let floor = self.floor.min(self.arrival_floor(&arrivals));
            if floor == f64::INFINITY {
                self.arrivals = arrivals;
                self.arrivals.clear();
                return;
            }
            // Slack for rounding: re-solving from a lower level is always exact.
            start = floor * (1.0 - 1e-9);
        }
        let mut unit = std::mem::take(&mut self.scratch.unit);
        unit.clear();
        let keep = if start > 0.0 {
            self.groups.partition_point(|g| g.level < start)
        } else {
            0
        };
        unit.extend_from_slice(&arrivals);
        for (i, g) in self.groups.drain(keep..).enumerate() {
            let i = (keep + i) as u32;
            for &f in &g.members {
                let s = &mut self.slots[f as usize];
                if s.group == i {
                    s.group = UNSOLVED;
                    unit.push(f);
                }
            }
        }
        let full = self.full || unit.len() == self.live;
        if full {
            start = 0.0;
            unit.clear();
            for (f, s) in self.slots.iter_mut().enumerate() {
                if s.group != FREE {
                    s.group = UNSOLVED;
                    unit.push(f as FlowId);
                }
            }
            self.groups.clear();
        }
        if !unit.is_empty() {
            self.fill(&unit, start, full, &mut changed);
        }
        self.scratch.unit = unit;
        self.floor = f64::INFINITY;
        self.full = false;
        arrivals.clear();
        self.arrivals = arrivals;
    }

    /// Progressive filling of the flows in `unit` from level `start`, every
    /// other flow frozen at its rate (none when `full`).
    fn fill(
        &mut self,
        unit: &[FlowId],
        start: f64,
        full: bool,
        changed: &mut impl FnMut(FlowId, &mut T, f64, f64),
    ) {
        let ne = self.cap.len();
        let sc = &mut self.scratch;
        sc.edge.resize(ne, EdgeScratch::default());
        let np = self.parts.len();
        sc.p_count.resize(np, 0);
        sc.p_rates.resize(np, 0.0);
        sc.p_off.resize(np, 0);
        sc.p_fill.resize(np, 0);
        sc.p_pending.resize(np, 0);
        let arena = &self.arena;
        let slots = &self.slots;
        let parts = &self.parts;
        let touch = |e: usize, sc: &mut Scratch| {
            if !sc.edge[e].seen {
                sc.edge[e].seen = true;
                sc.touched.push(e as u32);
            }
        };
        // Unfrozen weight and old rates per edge and per part.
        for &f in unit {
            let s = &slots[f as usize];
            let o = s.off as usize;
            let m = o + s.n_edges as usize;
            for &e in &arena[o..m] {
                let e = e as usize;
                touch(e, sc);
                let x = &mut sc.edge[e];
                x.count += 1;
                x.weight += 1.0;
                x.frozen -= s.rate;
            }
            for &p in &arena[m..m + s.n_parts as usize] {
                let p = p as usize;
                if sc.p_count[p] == 0 {
                    sc.p_touched.push(p as PartId);
                }
                sc.p_count[p] += 1;
                sc.p_rates[p] += s.rate;
            }
        }
        // Edge -> flows over own edges, CSR.
        let mut total = 0u32;
        for &e in &sc.touched {
            let e = e as usize;
            sc.edge[e].off = total;
            sc.edge[e].fill = total;
            total += sc.edge[e].count;
        }
        let pt = std::mem::take(&mut sc.p_touched);
        for &p in &pt {
            let (n, r) = (sc.p_count[p as usize], sc.p_rates[p as usize]);
            for &(e, c) in parts.get(p) {
                let e = e as usize;
                if !sc.edge[e].seen {
                    touch(e, sc);
                    sc.edge[e].off = 0;
                    sc.edge[e].fill = 0;
                }
                sc.edge[e].count += n;
                sc.edge[e].weight += c * n as f64;
                sc.edge[e].frozen -= c * r;
            }
        }
        sc.p_touched = pt;
        for &e in &sc.touched {
            let e = e as usize;
            sc.edge[e].frozen = if full {
                0.0
            } else {
                self.load[e] + sc.edge[e].frozen
            };
        }
        sc.adj.resize(total as usize, 0);
        let mut ptotal = 0u32;
        for &p in &sc.p_touched {
            let p = p as usize;
            sc.p_off[p] = ptotal;
            sc.p_fill[p] = ptotal;
            ptotal += sc.p_count[p];
        }
        sc.p_adj.resize(ptotal as usize, 0);
        for &f in unit {
            let s = &slots[f as usize];
            let o = s.off as usize;
            let m = o + s.n_edges as usize;
            for &e in &arena[o..m] {
                let e = e as usize;
                sc.adj[sc.edge[e].fill as usize] = f;
                sc.edge[e].fill += 1;
            }
            for &p in &arena[m..m + s.n_parts as usize] {
                let p = p as usize;
                sc.p_adj[sc.p_fill[p] as usize] = f;
                sc.p_fill[p] += 1;
            }
        }
        if full {
            self.weight.fill(0.0);
            for &e in &sc.touched {
                self.weight[e as usize] = sc.edge[e as usize].weight;
            }
        }
        sc.heap.clear();
        for &e in &sc.touched {
            let e = e as usize;
            let l = (self.cap[e].max(0.0) - sc.edge[e].frozen) / sc.edge[e].weight.max(1e-300);
            debug_assert!(
                full || l >= start * (1.0 - 1e-6) - 1e-9,
                "edge {e}: level {l} below the re-solve floor {start}"
            );
            sc.heap.push(Key(l.max(start), e as u32));
        }
        // Filling.
        let mut level = start;
        let groups = &mut self.groups;
        let slots = &mut self.slots;
        let mut freeze = |f: FlowId,
                          level: f64,
                          sc: &mut Scratch,
                          slots: &mut [Slot<T>],
                          groups: &mut Vec<Group>| {
            let s = &mut slots[f as usize];
            // Unit flows are UNSOLVED until they freeze.
            if s.group != UNSOLVED {
                return;
            }
            if s.rate != level {
                let old = s.rate;
                s.rate = level;
                changed(f, &mut s.data, old, level);
            }
            let g = groups.len() - 1;
            s.group = g as u32;
            groups[g].members.push(f);
            let o = s.off as usize;
            let m = o + s.n_edges as usize;
            for &e in &arena[o..m] {
                let e = e as usize;
                let x = &mut sc.edge[e];
                x.weight -= 1.0;
                x.frozen += level;
                x.count -= 1;
            }
            for &p in &arena[m..m + s.n_parts as usize] {
                let p = p as usize;
                if sc.p_pending[p] == 0 {
                    sc.p_dirty.push(p as PartId);
                }
                sc.p_pending[p] += 1;
                sc.p_count[p] -= 1;
            }
        };
        // Frozen part members reach the part's links here, all at `level`.
        let flush = |level: f64, sc: &mut Scratch| {
            for &p in &sc.p_dirty {
                let n = std::mem::take(&mut sc.p_pending[p as usize]);
                for &(e, c) in parts.get(p) {
                    let e = e as usize;
                    sc.edge[e].weight -= c * n as f64;
                    sc.edge[e].frozen += c * n as f64 * level;
                    sc.edge[e].count -= n;
                }
            }
            sc.p_dirty.clear();
        };
        let cap = &self.cap;
        let level_of = |e: usize, sc: &Scratch| {
            (cap[e].max(0.0) - sc.edge[e].frozen) / sc.edge[e].weight.max(1e-300)
        };
        while let Some(Key(k, e)) = sc.heap.pop() {
            let eu = e as usize;
            if sc.edge[eu].count == 0 {
                continue;
            }
            let mut l = level_of(eu, sc).max(level);
            if l > level && !sc.p_dirty.is_empty() {
                // The level is about to rise: pending part freezes happened at `level`.
                flush(level, sc);
                l = level_of(eu, sc).max(level);
            }
            if l > k * (1.0 + SAME) + 1e-15 {
                sc.heap.push(Key(l, e));
                continue;
            }
            level = l;
            if groups.last().is_none_or(|g| g.level != level) {
                groups.push(Group {
                    level,
                    members: Vec::new(),
                });
            }
            for j in sc.edge[eu].off..sc.edge[eu].fill {
                let f = sc.adj[j as usize];
                freeze(f, level, sc, slots, groups);
            }
            for &p in parts.containing(e) {
                let pu = p as usize;
                if pu >= np || sc.p_count[pu] == 0 {
                    continue;
                }
                for j in sc.p_off[pu]..sc.p_fill[pu] {
                    let f = sc.p_adj[j as usize];
                    freeze(f, level, sc, slots, groups);
                }
            }
        }
        flush(level, sc);
        // New totals and scratch reset.
        if full {
            self.load.fill(0.0);
        }
        for &e in &sc.touched {
            let e = e as usize;
            self.load[e] = sc.edge[e].frozen;
            sc.edge[e].weight = 0.0;
            sc.edge[e].frozen = 0.0;
            sc.edge[e].count = 0;
            sc.edge[e].seen = false;
        }
        sc.touched.clear();
        for &p in &sc.p_touched {
            sc.p_count[p as usize] = 0;
            sc.p_rates[p as usize] = 0.0;
        }
        sc.p_touched.clear();
        for &f in unit {
            debug_assert!(
                self.slots[f as usize].group != UNSOLVED,
                "flow {f} never froze"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(edges: &[u32]) -> Route {
        Route {
            edges: edges.to_vec(),
            parts: Vec::new(),
        }
    }

    fn solve(routes: &[Route], cap: &[f64]) -> Vec<f64> {
        let mut m: MaxMin<()> = MaxMin::new(cap);
        let ids: Vec<FlowId> = routes.iter().map(|r| m.add(r, f64::INFINITY, ())).collect();
        m.solve(|_, _, _, _| {});
        ids.iter().map(|&f| m.rate(f)).collect()
    }

    #[test]
    fn single_bottleneck_gets_capacity() {
        let r = solve(&[route(&[0, 1])], &[100.0, 40.0]);
        assert!((r[0] - 40.0).abs() < 1e-9);
    }

    #[test]
    fn two_flows_sharing_a_link_get_half_each() {
        assert_eq!(
            solve(&[route(&[0]), route(&[0])], &[100.0]),
            vec![50.0, 50.0]
        );
    }

    #[test]
    fn flow_limited_elsewhere_leaves_the_rest() {
        // Flow 0 crosses links 0 (cap 10) and 1 (cap 4); flow 1 only link 0.
        let r = solve(&[route(&[0, 1]), route(&[0])], &[10.0, 4.0]);
        assert!(
            (r[0] - 4.0).abs() < 1e-9 && (r[1] - 6.0).abs() < 1e-9,
            "{r:?}"
        );
    }

    #[test]
    fn fractional_part_is_fluid_spraying() {
        // One flow split over links 1 and 2 (part), plus a flow on link 1.
        // Level x: link 1 carries x/2 + y; max-min: x = y -> 1.5x = 10.
        let mut m = MaxMin::new(&[100.0, 10.0, 10.0]);
        let p = m.load_and_parts().1.intern(&[(1, 0.5), (2, 0.5)]);
        let a = m.add(
            &Route {
                edges: vec![0],
                parts: vec![p],
            },
            f64::INFINITY,
            (),
        );
        let b = m.add(&route(&[1]), f64::INFINITY, ());
        m.solve(|_, _, _, _| {});
        assert!((m.rate(a) - 20.0 / 3.0).abs() < 1e-9 && (m.rate(b) - 20.0 / 3.0).abs() < 1e-9);
    }

    /// After every solve, [`MaxMin::edge_load`] is the summed coefficient ×
    /// rate of the active flows, parts included (what reordering reads).
    #[test]
    fn edge_load_follows_the_rates() {
        let mut rng = planner::rng::Rng::new(7);
        let cap = [10.0, 4.0, 25.0, 7.0, 12.0];
        let mut m: MaxMin<()> = MaxMin::new(&cap);
        let p = m.load_and_parts().1.intern(&[(1, 0.5), (3, 0.5)]);
        let mut live: Vec<(FlowId, Route)> = Vec::new();
        for step in 0..200 {
            if !live.is_empty() && rng.below(3) == 0 {
                let k = rng.below(live.len() as u64) as usize;
                m.remove(live.swap_remove(k).0);
            } else {
                let mut edges = vec![rng.below(5) as u32];
                if rng.below(2) == 0 {
                    edges.push(rng.below(5) as u32);
                    edges.dedup();
                }
                let parts = if rng.below(3) == 0 { vec![p] } else { vec![] };
                let r = Route { edges, parts };
                let max = [f64::INFINITY, 3.0][rng.below(2) as usize];
                live.push((m.add(&r, max, ()), r));
            }
            m.solve(|_, _, _, _| {});
            let mut want = [0.0; 5];
            let mut uses = Vec::new();
            for (id, r) in &live {
                r.uses(m.parts(), &mut uses);
                for &(e, c) in &uses {
                    want[e as usize] += c * m.rate(*id);
                }
            }
            for (e, (&got, &w)) in m.edge_load().iter().zip(&want).enumerate() {
                assert!((got - w).abs() < 1e-9, "step {step} edge {e}: {got} vs {w}");
            }
        }
    }

    #[test]
    fn dead_link_gives_zero() {
        assert_eq!(
            solve(&[route(&[0]), route(&[1])], &[0.0, 5.0]),
            vec![0.0, 5.0]
        );
    }

    #[test]
    fn parking_lot() {
        // Flow 0 crosses links 0,1,2; flows 1,2,3 one link each; all cap 1.
        let r = solve(
            &[route(&[0, 1, 2]), route(&[0]), route(&[1]), route(&[2])],
            &[1.0, 1.0, 1.0],
        );
        assert!(r.iter().all(|&x| (x - 0.5).abs() < 1e-12), "{r:?}");
    }

    #[test]
    fn rate_cap_is_a_private_link() {
        let mut m = MaxMin::new(&[10.0]);
        let a = m.add(&route(&[0]), 2.0, ());
        let b = m.add(&route(&[0]), f64::INFINITY, ());
        m.solve(|_, _, _, _| {});
        assert_eq!((m.rate(a), m.rate(b)), (2.0, 8.0));
    }

    #[test]
    fn departure_of_the_fastest_flow_changes_nothing_else() {
        // Links 0 (cap 2) and 1 (cap 10): flows a, b on 0; c alone on 1.
        let mut m = MaxMin::new(&[2.0, 10.0]);
        let a = m.add(&route(&[0]), f64::INFINITY, 'a');
        let b = m.add(&route(&[0, 1]), f64::INFINITY, 'b');
        let c = m.add(&route(&[1]), f64::INFINITY, 'c');
        let mut ch = Vec::new();
        m.solve(|f, d, old, new| ch.push((f, *d, old, new)));
        assert_eq!(ch.len(), 3);
        assert_eq!((m.rate(a), m.rate(b), m.rate(c)), (1.0, 1.0, 9.0));
        ch.clear();
        assert_eq!(m.remove(c), 'c');
        m.solve(|f, d, old, new| ch.push((f, *d, old, new)));
        assert!(ch.is_empty(), "{ch:?}");
        // Removing a slow flow speeds up its neighbour only.
        m.remove(a);
        m.solve(|f, d, old, new| ch.push((f, *d, old, new)));
        assert_eq!(ch, vec![(b, 'b', 1.0, 2.0)]);
        assert_eq!(m.rate(b), 2.0);
    }
}
