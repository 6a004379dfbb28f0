//! The spine (plane) and super-spine of every flow that leaves its leaf,
//! by edge colouring in runs ([`Colouring::in_runs`]).
//!
//! Runs fix how many flows of each run share a colour; which free colour
//! a flow takes is left to a load-aware choice: flows are coloured
//! heaviest first, each taking the colour whose links it would load
//! least (largest-first balancing inside the runs' guarantee).
//!
//! Two orders, because a 3-tier fabric has two tiers to balance and runs
//! balance exactly the vertices they are cut at:
//! * **leaf first**: runs of `S` per leaf, all the leaf's flows heaviest
//!   first (inter-pod flows before intra-pod ones among equals), so every
//!   leaf uplink / downlink carries at most the leaf's bytes ÷ `S` plus
//!   its heaviest flow;
//! * **pod first** (3-tier): the inter-pod flows in runs of `S` per pod,
//!   heaviest first then by leaf, so each pod's inter-pod bytes spread
//!   over the planes within one flow; then the intra-pod flows in runs
//!   per leaf.
//!
//! Leaf first is used unless its busiest link is a pod link; then pod
//! first is tried as well and the lower peak kept. Either way each
//! plane's inter-pod flows are coloured again in runs of `X` per pod for
//! the super-spine.

use std::cmp::Reverse;

use crate::clos::ClosShape;
use crate::colouring::Colouring;
use crate::topology::HostIdx;

/// The flows that leave their leaf, by leaf index of the Clos.
pub(super) struct Crossing<'a> {
    pub clos: &'a ClosShape,
    /// (source leaf, destination leaf).
    pub ends: Vec<(u32, u32)>,
    /// Bytes the routing orders by.
    pub weight: Vec<u64>,
    /// (source NIC, destination NIC), the tie order among equal bytes.
    pub nics: Vec<(HostIdx, HostIdx)>,
}

/// Spine index and super-spine index (in the plane) of each crossing flow.
pub(super) struct Choice {
    pub plane: Vec<u32>,
    pub superspine: Vec<u32>,
}

/// Which order produced a choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Order {
    LeafFirst,
    PodFirst,
}

/// Edge ids grouped by `vertex` (a counting sort over `n` vertices), each
/// vertex's edges in `key` order: the runs [`Colouring::in_runs`] cuts.
fn grouped<K: Ord>(
    n: usize,
    m: usize,
    vertex: impl Fn(usize) -> u32,
    key: impl Fn(u32) -> K,
) -> Vec<u32> {
    let mut start = vec![0usize; n + 1];
    for e in 0..m {
        start[vertex(e) as usize + 1] += 1;
    }
    for v in 0..n {
        start[v + 1] += start[v];
    }
    let mut next = start.clone();
    let mut order = vec![0u32; m];
    for e in 0..m {
        let v = vertex(e) as usize;
        order[next[v]] = e as u32;
        next[v] += 1;
    }
    for v in 0..n {
        order[start[v]..start[v + 1]].sort_unstable_by_key(|&e| key(e));
    }
    order
}

/// Bytes placed so far per leaf link (by plane) and per pod and plane,
/// so each flow can take the free colour it would load least.
struct Loads {
    s: usize,
    leaf_up: Vec<u64>,
    leaf_down: Vec<u64>,
    pod_out: Vec<u64>,
    pod_in: Vec<u64>,
    /// Bit/s of one leaf link, of one pod's links of one plane (`X` links).
    leaf_bps: f64,
    plane_bps: f64,
}

/// Where a flow goes: leaves, and pods when it leaves its pod.
#[derive(Clone, Copy)]
struct Ends {
    u: usize,
    v: usize,
    pods: Option<(usize, usize)>,
}

impl Loads {
    fn new(c: &ClosShape) -> Loads {
        let (s, nl, np) = (c.spines, c.leaf_count(), c.pods);
        Loads {
            s,
            leaf_up: vec![0; nl * s],
            leaf_down: vec![0; nl * s],
            pod_out: vec![0; np * s],
            pod_in: vec![0; np * s],
            leaf_bps: c.leaf_capacity_bps as f64,
            plane_bps: c.superspines as f64 * c.pod_capacity_bps as f64,
        }
    }

    /// The highest link time (ps) the flow would reach on plane `j`.
    fn cost(&self, f: Ends, j: usize, w: u64) -> i64 {
        let s = self.s;
        let leaf = self.leaf_up[f.u * s + j].max(self.leaf_down[f.v * s + j]) + w;
        let mut t = leaf as f64 / self.leaf_bps;
        if let Some((p, q)) = f.pods {
            let pod = self.pod_out[p * s + j].max(self.pod_in[q * s + j]) + w;
            t = t.max(pod as f64 / self.plane_bps);
        }
        (t * 8e12) as i64
    }

    fn add(&mut self, f: Ends, j: usize, w: u64) {
        let s = self.s;
        self.leaf_up[f.u * s + j] += w;
        self.leaf_down[f.v * s + j] += w;
        if let Some((p, q)) = f.pods {
            self.pod_out[p * s + j] += w;
            self.pod_in[q * s + j] += w;
        }
    }
}

/// Colours edges `0..n` of `col` heaviest first, each with the colour
/// `cost(state, edge, colour)` rates lowest among those its runs leave
/// free; `placed(state, edge, colour)` then records it. One connected
/// component at a time (for consecutive EP groups, one group at a time):
/// colouring never crosses components, and their data stays in cache.
fn colour_heaviest_first<S>(
    col: &mut Colouring,
    n: usize,
    weight: impl Fn(u32) -> u64,
    state: &mut S,
    cost: impl Fn(&S, u32, u32) -> i64,
    placed: impl Fn(&mut S, u32, u32),
) {
    let ends: Vec<(u32, u32)> = (0..n as u32).map(|e| col.ends(e)).collect();
    let nl = ends.iter().map(|e| e.0 + 1).max().unwrap_or(0) as usize;
    let nr = ends.iter().map(|e| e.1 + 1).max().unwrap_or(0) as usize;
    let mut parent: Vec<u32> = (0..(nl + nr) as u32).collect();
    fn root(parent: &mut [u32], mut v: u32) -> u32 {
        while parent[v as usize] != v {
            let up = parent[parent[v as usize] as usize];
            parent[v as usize] = up;
            v = up;
        }
        v
    }
    for &(l, r) in &ends {
        let (a, b) = (root(&mut parent, l), root(&mut parent, nl as u32 + r));
        parent[a.max(b) as usize] = a.min(b);
    }
    // A component is named by its first edge, so components keep their order.
    let mut first = vec![u32::MAX; nl + nr];
    let comp: Vec<u32> = (0..n)
        .map(|e| {
            let r = root(&mut parent, ends[e].0) as usize;
            if first[r] == u32::MAX {
                first[r] = e as u32;
            }
            first[r]
        })
        .collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_unstable_by_key(|&e| (comp[e as usize], Reverse(weight(e)), e));
    for e in order {
        let c = col.colour_one(e, |e, j| cost(state, e, j));
        placed(state, e, c);
    }
}

impl Crossing<'_> {
    fn pod(&self, leaf: u32) -> usize {
        self.clos.pod_of(leaf as usize)
    }

    fn inter(&self, e: usize) -> bool {
        let (u, v) = self.ends[e];
        self.pod(u) != self.pod(v)
    }

    fn flow_ends(&self, e: usize) -> Ends {
        let (u, v) = self.ends[e];
        let (p, q) = (self.pod(u), self.pod(v));
        Ends {
            u: u as usize,
            v: v as usize,
            pods: (p != q).then_some((p, q)),
        }
    }

    /// The choice with the lower peak of the orders worth trying.
    pub fn choose(&self) -> (Choice, Order) {
        let leaf_first = self.with_superspines(self.leaf_first());
        if self.clos.superspines == 0 {
            return (leaf_first, Order::LeafFirst);
        }
        let (peak, on_pod_link) = self.peak(&leaf_first);
        if !on_pod_link {
            return (leaf_first, Order::LeafFirst);
        }
        let pod_first = self.with_superspines(self.pod_first());
        if self.peak(&pod_first).0 < peak {
            (pod_first, Order::PodFirst)
        } else {
            (leaf_first, Order::LeafFirst)
        }
    }

    /// Runs of `S` per leaf over all crossing flows.
    pub fn leaf_first(&self) -> Vec<u32> {
        let (c, m) = (self.clos, self.ends.len());
        let (s, nl) = (c.spines, c.leaf_count());
        let w = |e: u32| self.weight[e as usize];
        let nic = |e: u32| self.nics[e as usize];
        let intra = |e: u32| !self.inter(e as usize);
        let left = grouped(
            nl,
            m,
            |e| self.ends[e].0,
            |e| (Reverse(w(e)), intra(e), nic(e).0, nic(e).1, e),
        );
        let right = grouped(
            nl,
            m,
            |e| self.ends[e].1,
            |e| (Reverse(w(e)), intra(e), nic(e).1, nic(e).0, e),
        );
        let mut col = Colouring::in_runs(nl, nl, s, &self.ends, &left, &right);
        colour_heaviest_first(
            &mut col,
            m,
            w,
            &mut Loads::new(c),
            |l, e, j| l.cost(self.flow_ends(e as usize), j as usize, w(e)),
            |l, e, j| l.add(self.flow_ends(e as usize), j as usize, w(e)),
        );
        (0..m as u32).map(|e| col.colour_of(e)).collect()
    }

    /// Runs of `S` per pod over the inter-pod flows, then runs of `S` per
    /// leaf over the intra-pod ones.
    pub fn pod_first(&self) -> Vec<u32> {
        let c = self.clos;
        let (s, nl, np) = (c.spines, c.leaf_count(), c.pods);
        let mut plane = vec![0u32; self.ends.len()];
        let mut loads = Loads::new(c);
        for inter in [true, false] {
            let list: Vec<u32> = (0..self.ends.len() as u32)
                .filter(|&e| self.inter(e as usize) == inter)
                .collect();
            if list.is_empty() {
                continue;
            }
            let k = list.len();
            let at = |i: u32| list[i as usize] as usize;
            let w = |i: u32| self.weight[at(i)];
            let (ends, n): (Vec<(u32, u32)>, usize) = if inter {
                let pods = list
                    .iter()
                    .map(|&e| {
                        let (u, v) = self.ends[e as usize];
                        (self.pod(u) as u32, self.pod(v) as u32)
                    })
                    .collect();
                (pods, np)
            } else {
                (list.iter().map(|&e| self.ends[e as usize]).collect(), nl)
            };
            let leaves = |i: u32| self.ends[at(i)];
            let nic = |i: u32| self.nics[at(i)];
            let left = grouped(
                n,
                k,
                |i| ends[i].0,
                |i| (Reverse(w(i)), leaves(i).0, nic(i).0, nic(i).1, i),
            );
            let right = grouped(
                n,
                k,
                |i| ends[i].1,
                |i| (Reverse(w(i)), leaves(i).1, nic(i).1, nic(i).0, i),
            );
            let mut col = Colouring::in_runs(n, n, s, &ends, &left, &right);
            colour_heaviest_first(
                &mut col,
                k,
                w,
                &mut loads,
                |l, i, j| l.cost(self.flow_ends(at(i)), j as usize, w(i)),
                |l, i, j| l.add(self.flow_ends(at(i)), j as usize, w(i)),
            );
            for i in 0..k as u32 {
                plane[at(i)] = col.colour_of(i);
            }
        }
        plane
    }

    /// Adds the super-spines: each plane's inter-pod flows in runs of `X`
    /// per pod, heaviest first, each on the super-spine whose two pod
    /// links it would load least.
    fn with_superspines(&self, plane: Vec<u32>) -> Choice {
        let c = self.clos;
        let (s, x, np) = (c.spines, c.superspines, c.pods);
        let mut superspine = vec![0u32; self.ends.len()];
        if x > 0 {
            let mut by_plane: Vec<Vec<u32>> = vec![Vec::new(); s];
            for e in 0..self.ends.len() {
                if self.inter(e) {
                    by_plane[plane[e] as usize].push(e as u32);
                }
            }
            // Bytes per (pod, super-spine of the plane), out and in.
            let mut links = (vec![0u64; np * x], vec![0u64; np * x]);
            for list in by_plane.iter().filter(|l| !l.is_empty()) {
                let at = |i: u32| list[i as usize] as usize;
                let pods: Vec<(u32, u32)> = list
                    .iter()
                    .map(|&e| {
                        let (u, v) = self.ends[e as usize];
                        (self.pod(u) as u32, self.pod(v) as u32)
                    })
                    .collect();
                let w = |i: u32| self.weight[at(i)];
                let nic = |i: u32| self.nics[at(i)];
                let k = list.len();
                let left = grouped(
                    np,
                    k,
                    |i| pods[i].0,
                    |i| (Reverse(w(i)), nic(i).0, nic(i).1, i),
                );
                let right = grouped(
                    np,
                    k,
                    |i| pods[i].1,
                    |i| (Reverse(w(i)), nic(i).1, nic(i).0, i),
                );
                let mut col = Colouring::in_runs(np, np, x, &pods, &left, &right);
                links.0.fill(0);
                links.1.fill(0);
                let pq = |i: u32| (pods[i as usize].0 as usize, pods[i as usize].1 as usize);
                colour_heaviest_first(
                    &mut col,
                    k,
                    w,
                    &mut links,
                    |(o, n), i, ss| {
                        let (p, q) = pq(i);
                        o[p * x + ss as usize].max(n[q * x + ss as usize]) as i64
                    },
                    |(o, n), i, ss| {
                        let (p, q) = pq(i);
                        o[p * x + ss as usize] += w(i);
                        n[q * x + ss as usize] += w(i);
                    },
                );
                for i in 0..k as u32 {
                    superspine[at(i)] = col.colour_of(i);
                }
            }
        }
        Choice { plane, superspine }
    }

    /// The highest bytes ÷ capacity over the leaf and pod links, and
    /// whether a pod link has it.
    fn peak(&self, ch: &Choice) -> (f64, bool) {
        let c = self.clos;
        let (s, x, nl, np) = (c.spines, c.superspines, c.leaf_count(), c.pods);
        let mut leaf = vec![0u64; 2 * nl * s];
        let mut pod = vec![0u64; 2 * np * s * x.max(1)];
        for (e, &(u, v)) in self.ends.iter().enumerate() {
            let (j, b) = (ch.plane[e] as usize, self.weight[e]);
            leaf[2 * (u as usize * s + j)] += b;
            leaf[2 * (v as usize * s + j) + 1] += b;
            let (p, q) = (self.pod(u), self.pod(v));
            if p != q {
                let ss = ch.superspine[e] as usize;
                pod[2 * ((p * s + j) * x + ss)] += b;
                pod[2 * ((q * s + j) * x + ss) + 1] += b;
            }
        }
        let top = |v: &[u64]| v.iter().copied().max().unwrap_or(0) as f64;
        let on_leaf = top(&leaf) / c.leaf_capacity_bps as f64;
        let on_pod = if x > 0 {
            top(&pod) / c.pod_capacity_bps as f64
        } else {
            0.0
        };
        (on_leaf.max(on_pod), on_pod > on_leaf)
    }
}
