//! Capacitated edge colouring of bipartite multigraphs.
//!
//! On a Clos, a batch of equal-rate concurrent flows between leaves is a
//! bipartite multigraph (source leaves on the left, destination leaves on
//! the right, one edge per flow) and choosing each flow's spine is choosing
//! its colour. With `k` colours (spines) of capacity `cap` (flows per link)
//! a colouring exists whenever every vertex has degree at most `k·cap`
//! (König's theorem for `cap = 1`; split each vertex into `cap` copies for
//! the general case), so `cap = ⌈Δ/k⌉` — the lower bound on the busiest
//! uplink — is always reached.
//!
//! The algorithm is the classical alternating-path one, run directly on the
//! capacitated graph: colour edge `(u, v)` with a colour that has room at
//! both ends if there is one; otherwise take `α` with room at `u` and `β`
//! with room at `v`, walk from `v` along `α`, `β`, `α`, … edges (any
//! not-yet-walked edge of the needed colour at each vertex) until a vertex
//! has none, and swap `α`/`β` along the walk. Every vertex inside the walk
//! keeps its counts; the walk cannot end at `v`, and if it ends at `u` it
//! only frees more `α` there, so afterwards `α` has room at both ends.

/// No colour yet.
pub const NONE: u32 = u32::MAX;

/// A bipartite multigraph being coloured with `k` colours of capacity `cap`.
///
/// Storage is flat: every vertex that has edges gets `k` lists of `cap + 1`
/// slots (one spare for the moment an alternating walk passes through).
#[derive(Clone, Debug)]
pub struct Colouring {
    k: usize,
    cap: usize,
    nl: usize,
    ends: Vec<(u32, u32)>,
    colour: Vec<u32>,
    /// Dense index of each vertex with edges (u32::MAX: none).
    dense: Vec<u32>,
    /// `count[dense * k + c]`.
    count: Vec<u32>,
    /// `slots[(dense * k + c) * (cap + 1) + i]`.
    slots: Vec<u32>,
    /// Slot position of each edge in its list at its left / right end.
    pos: Vec<(u32, u32)>,
    stamp: Vec<u32>,
    cur: u32,
    /// Per list, where the current walk's scan for an unwalked edge
    /// resumes (valid when `scan_stamp` equals `cur`): walked edges stay
    /// walked and lists do not change during a walk, so the first unwalked
    /// edge only moves forward and each list is scanned once per walk.
    scan: Vec<u32>,
    scan_stamp: Vec<u32>,
}

impl Colouring {
    /// A graph with `nl` left and `nr` right vertices and the given edges
    /// `(left, right)`, all uncoloured; edge ids are positions in `edges`.
    pub fn new(nl: usize, nr: usize, k: usize, cap: usize, edges: &[(u32, u32)]) -> Colouring {
        assert!(
            k > 0 && cap > 0,
            "need at least one colour of capacity >= 1"
        );
        let mut dense = vec![u32::MAX; nl + nr];
        let mut active = 0u32;
        let mut ends = Vec::with_capacity(edges.len());
        for &(l, r) in edges {
            assert!(
                (l as usize) < nl && (r as usize) < nr,
                "edge ({l}, {r}) out of range"
            );
            let r = nl as u32 + r;
            for v in [l, r] {
                if dense[v as usize] == u32::MAX {
                    dense[v as usize] = active;
                    active += 1;
                }
            }
            ends.push((l, r));
        }
        let lists = active as usize * k;
        Colouring {
            k,
            cap,
            nl,
            colour: vec![NONE; ends.len()],
            stamp: vec![0; ends.len()],
            pos: vec![(0, 0); ends.len()],
            ends,
            dense,
            count: vec![0; lists],
            slots: vec![0; lists * (cap + 1)],
            cur: 0,
            scan: vec![0; lists],
            scan_stamp: vec![0; lists],
        }
    }

    /// The graph split into *runs* for weighted balance: `left_order` lists
    /// every edge once, all edges of a left vertex together, and each `k`
    /// consecutive edges of one vertex become one copy of it (likewise
    /// `right_order` on the right). Coloured with `k` colours of capacity
    /// 1, every run gets `k` distinct colours, so a vertex has at most one
    /// edge of each colour per run. With each vertex's runs ordered
    /// heaviest first, the edges of one colour at a vertex then weigh at
    /// most its total ÷ `k` plus its heaviest edge (a run's heaviest edge
    /// weighs no more than the previous run's lightest, which is at most
    /// that run's mean); with equal weights that is König's `⌈deg/k⌉`.
    /// A copy has at most `k` edges, so the colouring always exists.
    /// Edge ids are kept; [`Colouring::ends`] gives copy ids.
    pub fn in_runs(
        nl: usize,
        nr: usize,
        k: usize,
        edges: &[(u32, u32)],
        left_order: &[u32],
        right_order: &[u32],
    ) -> Colouring {
        assert!(k > 0, "need at least one colour");
        let (copies_l, left) = runs(nl, k, edges, left_order, |e| e.0);
        let (copies_r, right) = runs(nr, k, edges, right_order, |e| e.1);
        let split: Vec<(u32, u32)> = left.into_iter().zip(right).collect();
        Colouring::new(copies_l, copies_r, k, 1, &split)
    }

    fn list_index(&self, v: u32, c: u32) -> usize {
        let d = self.dense[v as usize];
        debug_assert!(d != u32::MAX, "vertex without edges");
        d as usize * self.k + c as usize
    }

    fn list(&self, v: u32, c: u32) -> &[u32] {
        if self.dense[v as usize] == u32::MAX {
            return &[];
        }
        let li = self.list_index(v, c);
        let base = li * (self.cap + 1);
        &self.slots[base..base + self.count[li] as usize]
    }

    /// Colour of edge `e` ([`NONE`] if uncoloured).
    pub fn colour_of(&self, e: u32) -> u32 {
        self.colour[e as usize]
    }

    /// Edges of colour `c` at left vertex `l`.
    pub fn left_count(&self, l: u32, c: u32) -> usize {
        self.list(l, c).len()
    }

    /// Edges of colour `c` at right vertex `r`.
    pub fn right_count(&self, r: u32, c: u32) -> usize {
        self.list(self.nl as u32 + r, c).len()
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.ends.len()
    }

    /// The edge's (left, right) vertices.
    pub fn ends(&self, e: u32) -> (u32, u32) {
        let (l, r) = self.ends[e as usize];
        (l, r - self.nl as u32)
    }

    fn cnt(&self, v: u32, c: u32) -> usize {
        self.count[self.list_index(v, c)] as usize
    }

    fn set(&mut self, e: u32, c: u32) {
        let old = self.colour[e as usize];
        let (a, b) = self.ends[e as usize];
        let width = self.cap + 1;
        if old != NONE {
            for (side, v) in [(0, a), (1, b)] {
                let li = self.list_index(v, old);
                let base = li * width;
                let n = self.count[li] as usize;
                let p = self.end_pos(e, side);
                debug_assert_eq!(self.slots[base + p], e);
                let moved = self.slots[base + n - 1];
                self.slots[base + p] = moved;
                let moved_side = if self.ends[moved as usize].0 == v {
                    0
                } else {
                    1
                };
                self.set_end_pos(moved, moved_side, p);
                self.count[li] -= 1;
            }
        }
        if c != NONE {
            for (side, v) in [(0, a), (1, b)] {
                let li = self.list_index(v, c);
                let n = self.count[li] as usize;
                assert!(
                    n < width,
                    "more than cap + 1 edges of one colour at a vertex"
                );
                self.slots[li * width + n] = e;
                self.set_end_pos(e, side, n);
                self.count[li] += 1;
            }
        }
        self.colour[e as usize] = c;
    }

    fn end_pos(&self, e: u32, side: usize) -> usize {
        let p = self.pos[e as usize];
        (if side == 0 { p.0 } else { p.1 }) as usize
    }

    fn set_end_pos(&mut self, e: u32, side: usize, p: usize) {
        let slot = &mut self.pos[e as usize];
        if side == 0 {
            slot.0 = p as u32;
        } else {
            slot.1 = p as u32;
        }
    }

    fn next_stamp(&mut self) {
        self.cur = self.cur.wrapping_add(1);
        if self.cur == 0 {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.scan_stamp.iter_mut().for_each(|s| *s = 0);
            self.cur = 1;
        }
    }

    /// The first edge of colour `c` at `v` not yet in the current walk.
    fn first_unwalked(&mut self, v: u32, c: u32) -> Option<u32> {
        if self.dense[v as usize] == u32::MAX {
            return None;
        }
        let li = self.list_index(v, c);
        if self.scan_stamp[li] != self.cur {
            self.scan_stamp[li] = self.cur;
            self.scan[li] = 0;
        }
        let base = li * (self.cap + 1);
        let n = self.count[li];
        while self.scan[li] < n {
            let x = self.slots[base + self.scan[li] as usize];
            if self.stamp[x as usize] != self.cur {
                return Some(x);
            }
            self.scan[li] += 1;
        }
        None
    }

    fn other(&self, e: u32, v: u32) -> u32 {
        let (a, b) = self.ends[e as usize];
        if a == v {
            b
        } else {
            a
        }
    }

    /// Colours every uncoloured edge, in id order. Among the colours with
    /// room at both ends, the one with the lowest `pref(edge, colour)` wins
    /// (ties: fewest edges of that colour at the two ends, then lowest
    /// colour). Panics if some vertex has more than `k·cap` edges.
    pub fn colour_all(&mut self, mut pref: impl FnMut(u32, u32) -> i64) {
        for e in 0..self.ends.len() as u32 {
            if self.colour[e as usize] == NONE {
                let c = self.colour_edge(e, &mut pref);
                self.set(e, c);
            }
        }
    }

    /// Colours one edge (if uncoloured) the way [`Colouring::colour_all`]
    /// does and returns its colour. Alternating walks may recolour other edges.
    pub fn colour_one(&mut self, e: u32, mut pref: impl FnMut(u32, u32) -> i64) -> u32 {
        if self.colour[e as usize] == NONE {
            let c = self.colour_edge(e, &mut pref);
            self.set(e, c);
        }
        self.colour[e as usize]
    }

    fn colour_edge(&mut self, e: u32, pref: &mut impl FnMut(u32, u32) -> i64) -> u32 {
        let (u, v) = self.ends[e as usize];
        let mut best: Option<(i64, usize, u32)> = None;
        for c in 0..self.k as u32 {
            let (cu, cv) = (self.cnt(u, c), self.cnt(v, c));
            if cu < self.cap && cv < self.cap {
                let key = (pref(e, c), cu + cv, c);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
        }
        if let Some((_, _, c)) = best {
            return c;
        }
        let room = |v: u32| {
            (0..self.k as u32)
                .filter(|&c| self.cnt(v, c) < self.cap)
                .min_by_key(|&c| self.cnt(v, c))
                .unwrap_or_else(|| {
                    panic!("vertex has more than k*cap = {} edges", self.k * self.cap)
                })
        };
        let alpha = room(u);
        let beta = room(v);
        // Walk from v: alpha, beta, alpha, ... and swap.
        self.next_stamp();
        let mut walk = Vec::new();
        let (mut w, mut need) = (v, alpha);
        while let Some(next) = self.first_unwalked(w, need) {
            self.stamp[next as usize] = self.cur;
            walk.push(next);
            w = self.other(next, w);
            need = if need == alpha { beta } else { alpha };
        }
        for &x in &walk {
            let c = if self.colour[x as usize] == alpha {
                beta
            } else {
                alpha
            };
            self.set(x, c);
        }
        debug_assert!(self.cnt(u, alpha) < self.cap && self.cnt(v, alpha) < self.cap);
        alpha
    }

    /// Moves edge `e` to colour `to`, repairing capacity at its ends by
    /// swapping along alternating walks. Returns the changes made (edge, old
    /// colour) so the caller can [`Colouring::undo`] them, or `None` (and
    /// changes nothing) if the capacities cannot be restored this way.
    pub fn recolour(&mut self, e: u32, to: u32) -> Option<Vec<(u32, u32)>> {
        self.recolour_with(e, to, |_, _, _| 0)
    }

    /// [`Colouring::recolour`], choosing at each step of the walks the
    /// candidate edge `x` with the lowest `pref(x, old colour, new colour)`.
    pub fn recolour_with(
        &mut self,
        e: u32,
        to: u32,
        pref: impl Fn(u32, u32, u32) -> i64,
    ) -> Option<Vec<(u32, u32)>> {
        let from = self.colour[e as usize];
        if from == to || from == NONE {
            return Some(Vec::new());
        }
        self.next_stamp();
        let mut log = vec![(e, from)];
        self.set(e, to);
        self.stamp[e as usize] = self.cur;
        let (u, v) = self.ends[e as usize];
        for start in [u, v] {
            let (mut w, mut over) = (start, to);
            while self.cnt(w, over) > self.cap {
                let flip_to = if over == to { from } else { to };
                let Some(&x) = self
                    .list(w, over)
                    .iter()
                    .filter(|&&x| self.stamp[x as usize] != self.cur)
                    .min_by_key(|&&x| pref(x, over, flip_to))
                else {
                    self.undo(&log);
                    return None;
                };
                self.stamp[x as usize] = self.cur;
                log.push((x, over));
                self.set(x, flip_to);
                w = self.other(x, w);
                over = flip_to;
            }
        }
        Some(log)
    }

    /// Reverts the changes returned by [`Colouring::recolour`].
    pub fn undo(&mut self, log: &[(u32, u32)]) {
        for &(x, old) in log.iter().rev() {
            self.set(x, old);
        }
    }

    /// True when every vertex has at most `cap` edges of each colour and
    /// every edge is coloured.
    pub fn is_proper(&self) -> bool {
        self.colour.iter().all(|&c| c != NONE) && self.count.iter().all(|&n| n as usize <= self.cap)
    }
}

/// The copy of each edge's end when the ends' edges, in `order`, are cut
/// into runs of `k`; returns the number of copies and each edge's copy.
fn runs(
    n: usize,
    k: usize,
    edges: &[(u32, u32)],
    order: &[u32],
    end: impl Fn(&(u32, u32)) -> u32,
) -> (usize, Vec<u32>) {
    assert_eq!(order.len(), edges.len(), "an order lists every edge once");
    let mut copy = vec![u32::MAX; edges.len()];
    let mut done = vec![false; n];
    let (mut copies, mut cur, mut len) = (0u32, u32::MAX, 0usize);
    for &e in order {
        let v = end(&edges[e as usize]);
        assert!((v as usize) < n, "edge {e}: vertex {v} out of range");
        if v != cur {
            assert!(
                !done[v as usize],
                "the order must list a vertex's edges together (vertex {v})"
            );
            if cur != u32::MAX {
                done[cur as usize] = true;
            }
            (cur, len) = (v, 0);
        }
        if len == 0 {
            copies += 1;
        }
        assert_eq!(copy[e as usize], u32::MAX, "edge {e} listed twice");
        copy[e as usize] = copies - 1;
        len = (len + 1) % k;
    }
    (copies as usize, copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn max_degree(nl: usize, nr: usize, edges: &[(u32, u32)]) -> usize {
        let mut d = vec![0usize; nl + nr];
        for &(l, r) in edges {
            d[l as usize] += 1;
            d[nl + r as usize] += 1;
        }
        d.into_iter().max().unwrap_or(0)
    }

    #[test]
    fn reaches_koenig_bound_on_random_multigraphs() {
        let mut rng = Rng::new(42);
        for _ in 0..300 {
            let nl = 1 + rng.below(12) as usize;
            let nr = 1 + rng.below(12) as usize;
            let m = rng.below(120) as usize;
            let edges: Vec<(u32, u32)> = (0..m)
                .map(|_| (rng.below(nl as u64) as u32, rng.below(nr as u64) as u32))
                .collect();
            let delta = max_degree(nl, nr, &edges).max(1);
            let k = 1 + rng.below(8) as usize;
            let cap = delta.div_ceil(k);
            let mut c = Colouring::new(nl, nr, k, cap, &edges);
            c.colour_all(|_, _| 0);
            assert!(
                c.is_proper(),
                "nl={nl} nr={nr} k={k} cap={cap} delta={delta}"
            );
        }
    }

    #[test]
    fn exactly_delta_colours_for_regular_graph() {
        // K_{4,4} with doubled edges: 8-regular, must use exactly 8 colours of capacity 1.
        let edges: Vec<(u32, u32)> = (0..4)
            .flat_map(|l| (0..4).flat_map(move |r| [(l, r), (l, r)]))
            .collect();
        let mut c = Colouring::new(4, 4, 8, 1, &edges);
        c.colour_all(|_, _| 0);
        assert!(c.is_proper());
        for l in 0..4 {
            for col in 0..8 {
                assert_eq!(c.left_count(l, col), 1);
            }
        }
    }

    /// Runs heaviest first: at every vertex, each colour's weight is at
    /// most total / k + heaviest edge; equal weights give ⌈deg/k⌉ edges.
    #[test]
    fn runs_balance_weights_within_one_edge() {
        let mut rng = Rng::new(7);
        for case in 0..200 {
            let (nl, nr) = (1 + rng.below(6) as usize, 1 + rng.below(6) as usize);
            let k = 1 + rng.below(6) as usize;
            let m = rng.below(80) as usize;
            let edges: Vec<(u32, u32)> = (0..m)
                .map(|_| (rng.below(nl as u64) as u32, rng.below(nr as u64) as u32))
                .collect();
            let equal = case % 4 == 0;
            let w: Vec<u64> = (0..m)
                .map(|_| if equal { 5 } else { 1 + rng.below(1000) })
                .collect();
            let order = |side: usize| {
                let mut o: Vec<u32> = (0..m as u32).collect();
                let end = |e: u32| {
                    let (l, r) = edges[e as usize];
                    if side == 0 {
                        l
                    } else {
                        r
                    }
                };
                o.sort_by_key(|&e| (end(e), std::cmp::Reverse(w[e as usize])));
                o
            };
            let mut c = Colouring::in_runs(nl, nr, k, &edges, &order(0), &order(1));
            c.colour_all(|_, _| 0);
            assert!(c.is_proper());
            for side in 0..2 {
                let n = if side == 0 { nl } else { nr };
                for v in 0..n as u32 {
                    let mine: Vec<u32> = (0..m as u32)
                        .filter(|&e| {
                            let (l, r) = edges[e as usize];
                            (if side == 0 { l } else { r }) == v
                        })
                        .collect();
                    let total: u64 = mine.iter().map(|&e| w[e as usize]).sum();
                    let max = mine.iter().map(|&e| w[e as usize]).max().unwrap_or(0);
                    for col in 0..k as u32 {
                        let on: Vec<u32> = mine
                            .iter()
                            .copied()
                            .filter(|&e| c.colour_of(e) == col)
                            .collect();
                        let load: u64 = on.iter().map(|&e| w[e as usize]).sum();
                        assert!(
                            load as f64 <= total as f64 / k as f64 + max as f64 + 1e-9,
                            "case {case}: vertex {v} colour {col}: {load} > {total}/{k} + {max}"
                        );
                        if equal {
                            assert!(on.len() <= mine.len().div_ceil(k), "case {case}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn recolour_keeps_capacities_or_refuses() {
        let mut rng = Rng::new(3);
        for _ in 0..100 {
            let (nl, nr, k) = (6, 6, 4);
            let edges: Vec<(u32, u32)> = (0..40)
                .map(|_| (rng.below(6) as u32, rng.below(6) as u32))
                .collect();
            let cap = max_degree(nl, nr, &edges).div_ceil(k);
            let mut c = Colouring::new(nl, nr, k, cap, &edges);
            c.colour_all(|_, _| 0);
            for _ in 0..20 {
                let e = rng.below(40) as u32;
                let to = rng.below(k as u64) as u32;
                let before: Vec<u32> = (0..40).map(|x| c.colour_of(x)).collect();
                match c.recolour(e, to) {
                    Some(_) => assert_eq!(c.colour_of(e), to),
                    None => assert_eq!((0..40).map(|x| c.colour_of(x)).collect::<Vec<_>>(), before),
                }
                assert!(c.is_proper());
            }
        }
    }
}
