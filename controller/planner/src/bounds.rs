//! Lower bounds on the peak link utilisation any path assignment can reach.
//!
//! At every moment, some traffic *must* cross certain groups of links:
//! * a NIC's uplink / downlink carries all its flows;
//! * a flow between different leaves leaves its leaf on one of the leaf's
//!   `S` uplinks, and enters the destination leaf on one of its `S`
//!   downlinks;
//! * a flow between pods leaves its pod on one of the pod's `S·X`
//!   spine→super-spine links, and enters the destination pod on one of its
//!   `S·X` super-spine→spine links.
//!
//! For a group of `m` links of capacity `C` crossed by flows of total rate
//! `R`, some link carries at least `R/(m·C)` (the *cut bound*); if the `n`
//! flows all have the same rate `r`, flows cannot be split, so some link
//! carries `⌈n/m⌉·r` (the *colouring bound*: on a leaf's uplinks it is
//! König's `⌈Δ/S⌉`). The bound is the maximum over groups and over time.
//! [`batch_lower_bound`] gives the same bounds for one batch without
//! times (one MoE step's bytes), NIC and switch-to-switch groups apart.

use serde::Serialize;

use crate::clos::ClosShape;
use crate::flow::Flow;
use crate::topology::{EdgeId, HostIdx, Topology};

/// The lower bound and what sets it.
#[derive(Clone, Debug, Serialize)]
pub struct LowerBound {
    /// Peak utilisation no assignment can beat.
    pub utilisation: f64,
    /// The link group that sets it, e.g. `uplinks of leaf 'leaf3'`.
    pub group: String,
    /// When (ns).
    pub at_ns: u64,
    /// Which bound: "cut", "colouring" or "nic".
    pub kind: &'static str,
}

#[derive(Clone, Default)]
struct Group {
    n: u64,
    sum: u128,
    sumsq: u128,
}

/// The link groups of a fabric that every transfer between two hosts
/// must cross: indices `2h` / `2h+1` are host `h`'s uplink / downlink,
/// then the uplinks / downlinks of each leaf, then of each pod (3-tier).
struct Groups<'a> {
    topo: &'a Topology,
    clos: Option<&'a ClosShape>,
    nh: usize,
    nl: usize,
    np: usize,
}

impl<'a> Groups<'a> {
    fn new(topo: &'a Topology, clos: Option<&'a ClosShape>) -> Groups<'a> {
        Groups {
            topo,
            clos,
            nh: topo.hosts().len(),
            nl: clos.map_or(0, |c| c.leaf_count()),
            np: clos.map_or(0, |c| if c.superspines > 0 { c.pods } else { 0 }),
        }
    }

    fn count(&self) -> usize {
        2 * self.nh + 2 * self.nl + 2 * self.np
    }

    /// True for the host groups (the rest are switch-to-switch links).
    fn is_nic(&self, gi: usize) -> bool {
        gi < 2 * self.nh
    }

    /// The groups a transfer from `src` to `dst` crosses.
    fn ids(&self, src: HostIdx, dst: HostIdx) -> smallvec::SmallVec<[usize; 6]> {
        let (nh, nl) = (self.nh, self.nl);
        let mut g = smallvec::smallvec![2 * src as usize, 2 * dst as usize + 1];
        if let Some(c) = self.clos {
            let hosts = self.topo.hosts();
            let (a, b) = (hosts[src as usize].leaf, hosts[dst as usize].leaf);
            if a != b {
                let (u, v) = (c.leaf_index(a).unwrap(), c.leaf_index(b).unwrap());
                g.push(2 * nh + 2 * u);
                g.push(2 * nh + 2 * v + 1);
                let (p, q) = (c.pod_of(u), c.pod_of(v));
                if self.np > 0 && p != q {
                    g.push(2 * nh + 2 * nl + 2 * p);
                    g.push(2 * nh + 2 * nl + 2 * q + 1);
                }
            }
        }
        g
    }

    /// The bound a group sets and its kind.
    fn value(&self, gi: usize, g: &Group) -> (f64, &'static str) {
        let (nh, nl) = (self.nh, self.nl);
        if g.n == 0 {
            return (0.0, "cut");
        }
        let (m, cap) = if gi < 2 * nh {
            let h = gi / 2;
            let e: EdgeId = if gi % 2 == 0 {
                self.topo.host_up_edge(h as u32)
            } else {
                self.topo.host_down_edge(h as u32)
            };
            (1u64, self.topo.edge(e).capacity_bps)
        } else if gi < 2 * nh + 2 * nl {
            let c = self.clos.unwrap();
            (c.spines as u64, c.leaf_capacity_bps)
        } else {
            let c = self.clos.unwrap();
            ((c.spines * c.superspines) as u64, c.pod_capacity_bps)
        };
        let cut = g.sum as f64 / (m as f64 * cap as f64);
        let uniform = g.sum * g.sum == g.n as u128 * g.sumsq;
        if uniform && m > 1 {
            let r = (g.sum / g.n as u128) as f64;
            let col = g.n.div_ceil(m) as f64 * r / cap as f64;
            if col > cut {
                return (col, "colouring");
            }
        }
        (cut, if gi < 2 * nh { "nic" } else { "cut" })
    }

    fn describe(&self, gi: usize) -> String {
        describe(self.topo, self.clos, self.nh, self.nl, gi)
    }
}

impl Group {
    fn add(&mut self, r: u128) {
        self.n += 1;
        self.sum += r;
        self.sumsq += r * r;
    }

    fn remove(&mut self, r: u128) {
        self.n -= 1;
        self.sum -= r;
        self.sumsq -= r * r;
    }
}

/// Computes the bound for a set of flows (reserved at their full rates).
/// Without a regular Clos shape only the NIC links are used.
pub fn lower_bound(topo: &Topology, clos: Option<&ClosShape>, flows: &[Flow]) -> LowerBound {
    let index = Groups::new(topo, clos);
    let mut groups = vec![Group::default(); index.count()];
    let mut events: Vec<(u64, bool, u32)> = Vec::with_capacity(flows.len() * 2);
    for (i, f) in flows.iter().enumerate() {
        events.push((f.start_ns, true, i as u32));
        events.push((f.end_ns(), false, i as u32));
    }
    // Removals before additions at the same time.
    events.sort_unstable_by_key(|&(t, add, i)| (t, add, i));
    let mut best = LowerBound {
        utilisation: 0.0,
        group: String::new(),
        at_ns: 0,
        kind: "cut",
    };
    let mut best_gi = usize::MAX;
    let mut touched: Vec<usize> = Vec::new();
    let mut k = 0;
    while k < events.len() {
        let t = events[k].0;
        touched.clear();
        while k < events.len() && events[k].0 == t {
            let (_, add, i) = events[k];
            let f = &flows[i as usize];
            let r = f.rate_bps as u128;
            for gi in index.ids(f.src, f.dst) {
                if add {
                    groups[gi].add(r);
                } else {
                    groups[gi].remove(r);
                }
                touched.push(gi);
            }
            k += 1;
        }
        for &gi in &touched {
            let (v, kind) = index.value(gi, &groups[gi]);
            if v > best.utilisation + 1e-12 {
                best.utilisation = v;
                best.at_ns = t;
                best.kind = kind;
                best_gi = gi;
            }
        }
    }
    if best_gi != usize::MAX {
        best.group = index.describe(best_gi);
    }
    best
}

/// The bounds for one batch of transfers that all run at once, split by
/// where they bind: the NICs (which no path choice can relieve) and the
/// switch-to-switch links (leaf and pod uplinks / downlinks, which path
/// choice spreads).
#[derive(Clone, Debug, Serialize)]
pub struct BatchBound {
    /// Over the host uplinks and downlinks.
    pub nic: LowerBound,
    /// Over the switch-to-switch links (zero without a Clos shape).
    pub fabric: LowerBound,
}

/// The cut and colouring bounds for a batch of `(src, dst, amount)`
/// transfers that run together (no times; `at_ns` is 0). A group's value
/// is its amount ÷ (links × capacity): a utilisation when amounts are
/// rates in bit/s, seconds of link time when they are bits. Each transfer
/// is unsplittable (one path), which the colouring bound counts.
pub fn batch_lower_bound(
    topo: &Topology,
    clos: Option<&ClosShape>,
    transfers: impl IntoIterator<Item = (HostIdx, HostIdx, u64)>,
) -> BatchBound {
    let index = Groups::new(topo, clos);
    let mut groups = vec![Group::default(); index.count()];
    for (src, dst, amount) in transfers {
        for gi in index.ids(src, dst) {
            groups[gi].add(amount as u128);
        }
    }
    let empty = || LowerBound {
        utilisation: 0.0,
        group: String::new(),
        at_ns: 0,
        kind: "cut",
    };
    let (mut nic, mut fabric) = (empty(), empty());
    for (gi, g) in groups.iter().enumerate() {
        let (v, kind) = index.value(gi, g);
        let best = if index.is_nic(gi) {
            &mut nic
        } else {
            &mut fabric
        };
        if v > best.utilisation {
            best.utilisation = v;
            best.kind = kind;
            best.group = index.describe(gi);
        }
    }
    BatchBound { nic, fabric }
}

fn describe(topo: &Topology, clos: Option<&ClosShape>, nh: usize, nl: usize, gi: usize) -> String {
    if gi < 2 * nh {
        let h = &topo.hosts()[gi / 2].name;
        return format!(
            "{} of host '{h}'",
            if gi % 2 == 0 { "uplink" } else { "downlink" }
        );
    }
    let c = clos.expect("leaf and pod groups need a Clos shape");
    if gi < 2 * nh + 2 * nl {
        let k = (gi - 2 * nh) / 2;
        let leaf = topo.leaves()[k];
        return format!(
            "{} of leaf '{}'",
            if gi % 2 == 0 { "uplinks" } else { "downlinks" },
            topo.switches()[leaf as usize].name
        );
    }
    let p = (gi - 2 * nh - 2 * nl) / 2;
    let _ = c;
    format!(
        "{} of pod {}",
        if gi % 2 == 0 { "uplinks" } else { "downlinks" },
        p
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::*;

    #[test]
    fn colouring_bound_for_unsplittable_flows() {
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                leaves: 2,
                spines: 3,
                hosts_per_leaf: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        // 4 flows of 10G from leaf1 to leaf2 over 3 spines: ceil(4/3) * 10G / 100G = 0.2.
        let flows: Vec<Flow> = (0..4)
            .map(|h| Flow::new(&t, h, 4 + h, 256, 0, 1000, 10_000_000_000))
            .collect();
        let b = lower_bound(&t, Some(&c), &flows);
        assert!((b.utilisation - 0.2).abs() < 1e-12, "{b:?}");
        assert_eq!(b.kind, "colouring");
        assert_eq!(b.group, "uplinks of leaf 'leaf1'");
        // Non-overlapping in time: only 1 flow at a time -> NIC bound 0.1.
        let seq: Vec<Flow> = (0..4)
            .map(|h| Flow::new(&t, h, 4 + h, 256, h as u64 * 1000, 1000, 10_000_000_000))
            .collect();
        let b = lower_bound(&t, Some(&c), &seq);
        assert!((b.utilisation - 0.1).abs() < 1e-12, "{b:?}");
    }

    /// The batch bound splits NIC and fabric groups: 4 transfers of 10
    /// from leaf1 to leaf2 over 3 spines set ⌈4/3⌉·10/100 on the uplinks
    /// (colouring), each NIC 10/100; uneven amounts fall back to the cut.
    #[test]
    fn batch_bound_separates_nics_from_fabric() {
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                leaves: 2,
                spines: 3,
                hosts_per_leaf: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        let g = 1_000_000_000u64;
        let b = batch_lower_bound(&t, Some(&c), (0..4).map(|h| (h, 4 + h, 10 * g)));
        assert!((b.fabric.utilisation - 0.2).abs() < 1e-12, "{b:?}");
        assert_eq!(b.fabric.kind, "colouring");
        assert_eq!(b.fabric.group, "uplinks of leaf 'leaf1'");
        assert!((b.nic.utilisation - 0.1).abs() < 1e-12, "{b:?}");
        assert_eq!(b.nic.kind, "nic");
        let uneven = [(0, 4, 30 * g), (1, 5, 10 * g), (2, 6, 20 * g)];
        let b = batch_lower_bound(&t, Some(&c), uneven);
        assert!((b.fabric.utilisation - 0.2).abs() < 1e-12, "{b:?}");
        assert_eq!(b.fabric.kind, "cut");
        assert!((b.nic.utilisation - 0.3).abs() < 1e-12, "{b:?}");
        let none = batch_lower_bound(&t, None, uneven);
        assert_eq!(none.fabric.utilisation, 0.0);
    }
}
