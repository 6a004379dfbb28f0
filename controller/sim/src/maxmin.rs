//! Max-min fair rates by progressive filling (water-filling).
//!
//! Every active flow uses a set of links, each with a coefficient: 1 for a
//! single-path flow, the fraction of the flow carried by that link for a
//! sprayed (fluid) flow. Rates rise together from zero; when a link fills,
//! the flows crossing it freeze at the current level and the others keep
//! rising. The saturation level of link `e` is
//! `(capacity − frozen load) / (sum of coefficients of unfrozen flows)`;
//! freezing a flow at the current level can only raise the other links'
//! levels, so a lazy min-heap over links is exact.
//!
//! All state is in flat arrays indexed by edge id and reused between calls.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One link a flow loads: edge id and the fraction of the flow's rate on it.
pub type Use = (u32, f64);

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

/// Reusable water-filling solver over a fixed set of edges.
pub struct WaterFill {
    /// Sum of coefficients of unfrozen flows per edge.
    weight: Vec<f64>,
    /// Unfrozen flows per edge.
    count: Vec<u32>,
    /// Load of frozen flows per edge.
    frozen: Vec<f64>,
    /// CSR offset of the edge's flow list (valid for touched edges).
    off: Vec<u32>,
    fill: Vec<u32>,
    touched: Vec<u32>,
    adj: Vec<(u32, f64)>,
    heap: BinaryHeap<Key>,
    done: Vec<bool>,
}

impl WaterFill {
    /// A solver for a network of `edges` edges.
    pub fn new(edges: usize) -> WaterFill {
        WaterFill {
            weight: vec![0.0; edges],
            count: vec![0; edges],
            frozen: vec![0.0; edges],
            off: vec![0; edges],
            fill: vec![0; edges],
            touched: Vec::new(),
            adj: Vec::new(),
            heap: BinaryHeap::new(),
            done: Vec::new(),
        }
    }

    /// Max-min fair rates of `flows` (each a list of [`Use`]s) on links of
    /// capacity `cap` (same unit as the rates). A flow crossing a link of
    /// capacity 0 gets rate 0. Writes `rates[i]` for flow `i`.
    pub fn solve<'a, F>(&mut self, n: usize, route: F, cap: &[f64], rates: &mut Vec<f64>)
    where
        F: Fn(usize) -> &'a [Use],
    {
        rates.clear();
        rates.resize(n, f64::INFINITY);
        self.done.clear();
        self.done.resize(n, false);
        // Per-edge totals.
        for i in 0..n {
            for &(e, a) in route(i) {
                let e = e as usize;
                if self.count[e] == 0 {
                    self.touched.push(e as u32);
                }
                self.count[e] += 1;
                self.weight[e] += a;
            }
        }
        // CSR edge -> flows.
        let mut total = 0u32;
        for &e in &self.touched {
            let e = e as usize;
            self.off[e] = total;
            self.fill[e] = total;
            total += self.count[e];
        }
        self.adj.clear();
        self.adj.resize(total as usize, (0, 0.0));
        for i in 0..n {
            for &(e, a) in route(i) {
                let e = e as usize;
                self.adj[self.fill[e] as usize] = (i as u32, a);
                self.fill[e] += 1;
            }
        }
        self.heap.clear();
        for &e in &self.touched {
            let eu = e as usize;
            self.heap
                .push(Key(cap[eu].max(0.0) / self.weight[eu].max(1e-300), e));
        }
        let mut level = 0.0f64;
        while let Some(Key(k, e)) = self.heap.pop() {
            let eu = e as usize;
            if self.count[eu] == 0 {
                continue;
            }
            let l = ((cap[eu] - self.frozen[eu]).max(0.0) / self.weight[eu].max(1e-300)).max(level);
            if l > k * (1.0 + 1e-12) + 1e-15 {
                self.heap.push(Key(l, e));
                continue;
            }
            level = l;
            let (a, b) = (self.off[eu] as usize, self.fill[eu] as usize);
            for j in a..b {
                let (f, _) = self.adj[j];
                let f = f as usize;
                if self.done[f] {
                    continue;
                }
                self.done[f] = true;
                rates[f] = level;
                for &(e2, a2) in route(f) {
                    let e2 = e2 as usize;
                    self.frozen[e2] += a2 * level;
                    self.weight[e2] -= a2;
                    self.count[e2] -= 1;
                }
            }
        }
        // Reset scratch.
        for &e in &self.touched {
            let e = e as usize;
            self.weight[e] = 0.0;
            self.count[e] = 0;
            self.frozen[e] = 0.0;
        }
        self.touched.clear();
        // Flows with no links (not produced by the simulator) stay unbounded.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(routes: &[Vec<Use>], cap: &[f64]) -> Vec<f64> {
        let mut w = WaterFill::new(cap.len());
        let mut r = Vec::new();
        w.solve(routes.len(), |i| &routes[i], cap, &mut r);
        r
    }

    #[test]
    fn single_bottleneck_gets_capacity() {
        let r = solve(&[vec![(0, 1.0), (1, 1.0)]], &[100.0, 40.0]);
        assert!((r[0] - 40.0).abs() < 1e-9);
    }

    #[test]
    fn two_flows_sharing_a_link_get_half_each() {
        let r = solve(&[vec![(0, 1.0)], vec![(0, 1.0)]], &[100.0]);
        assert_eq!(r, vec![50.0, 50.0]);
    }

    #[test]
    fn flow_limited_elsewhere_leaves_the_rest() {
        // Flow 0 crosses links 0 (cap 10) and 1 (cap 4); flow 1 only link 0.
        let r = solve(&[vec![(0, 1.0), (1, 1.0)], vec![(0, 1.0)]], &[10.0, 4.0]);
        assert!(
            (r[0] - 4.0).abs() < 1e-9 && (r[1] - 6.0).abs() < 1e-9,
            "{r:?}"
        );
    }

    #[test]
    fn fractional_use_is_fluid_spraying() {
        // One flow split over two links of 10 each, plus a flow on link 0.
        // Level x: link 0 carries x/2 + y; max-min: x = y -> 1.5x = 10.
        let r = solve(&[vec![(0, 0.5), (1, 0.5)], vec![(0, 1.0)]], &[10.0, 10.0]);
        assert!((r[0] - 20.0 / 3.0).abs() < 1e-9 && (r[1] - 20.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn dead_link_gives_zero() {
        let r = solve(&[vec![(0, 1.0)], vec![(1, 1.0)]], &[0.0, 5.0]);
        assert_eq!(r, vec![0.0, 5.0]);
    }

    #[test]
    fn parking_lot() {
        // Classic: flow 0 crosses links 0,1,2; flows 1,2,3 one link each; all cap 1.
        let routes = vec![
            vec![(0, 1.0), (1, 1.0), (2, 1.0)],
            vec![(0, 1.0)],
            vec![(1, 1.0)],
            vec![(2, 1.0)],
        ];
        let r = solve(&routes, &[1.0, 1.0, 1.0]);
        assert!(r.iter().all(|&x| (x - 0.5).abs() < 1e-12), "{r:?}");
    }
}
