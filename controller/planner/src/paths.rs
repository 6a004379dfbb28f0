//! Paths through the fabric and their SR-MPLS adjacency label stacks.
//!
//! A [`Path`] is the list of directed edges from the ingress leaf to the
//! destination host NIC (the source NIC's own uplink is not part of it, but
//! is reserved with it, see [`Path::reserved_edges`]). Each edge is a hop
//! `(switch, egress port)`; the label for a hop is
//! [`ADJ_LABEL_BASE`] `+ port`.

use std::fmt;

use serde::Serialize;

use crate::conventions::{ADJ_LABEL_BASE, MAX_SR_DEPTH};
use crate::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};

/// Longest path in a (validated, at most 3-tier) Clos: leaf → spine →
/// super-spine → spine → leaf → host.
pub const MAX_PATH_EDGES: usize = 5;

/// A path from the ingress leaf to the destination host, as directed edges.
/// Small and `Copy`: a plan holds one per flow.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Path {
    len: u8,
    edges: [EdgeId; MAX_PATH_EDGES],
}

impl fmt::Debug for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.edges()).finish()
    }
}

impl Path {
    /// An empty path (no hops).
    pub const EMPTY: Path = Path {
        len: 0,
        edges: [0; MAX_PATH_EDGES],
    };

    /// A path from edges (panics if longer than [`MAX_PATH_EDGES`]).
    pub fn from_edges(edges: &[EdgeId]) -> Path {
        assert!(
            edges.len() <= MAX_PATH_EDGES,
            "path longer than a 3-tier Clos allows"
        );
        let mut p = Path::EMPTY;
        p.edges[..edges.len()].copy_from_slice(edges);
        p.len = edges.len() as u8;
        p
    }

    /// Appends an edge.
    pub fn push(&mut self, e: EdgeId) {
        assert!(
            (self.len as usize) < MAX_PATH_EDGES,
            "path longer than a 3-tier Clos allows"
        );
        self.edges[self.len as usize] = e;
        self.len += 1;
    }

    /// The edges, ingress leaf first.
    pub fn edges(&self) -> &[EdgeId] {
        &self.edges[..self.len as usize]
    }

    /// Number of hops.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for the empty path.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every edge a flow on this path loads: the source NIC's uplink, then the path.
    pub fn reserved_edges(
        &self,
        topo: &Topology,
        src: HostIdx,
    ) -> impl Iterator<Item = EdgeId> + '_ {
        std::iter::once(topo.host_up_edge(src)).chain(self.edges().iter().copied())
    }

    /// The hops as (switch, egress port).
    pub fn hops(&self, topo: &Topology) -> Vec<Hop> {
        self.edges()
            .iter()
            .map(|&e| {
                let l = topo.edge(e);
                let NodeRef::Switch(s) = l.from else {
                    panic!("path edge {e} does not leave a switch")
                };
                let sw = &topo.switches()[s as usize];
                Hop {
                    switch: sw.name.clone(),
                    switch_id: sw.id,
                    egress_port: l.from_port,
                }
            })
            .collect()
    }

    /// The SR-MPLS adjacency labels the ingress leaf pushes (top of stack
    /// first; the ingress leaf pops the first one itself). Fails if a hop
    /// past [`MAX_SR_DEPTH`] is not a deterministic downward hop.
    pub fn label_stack(&self, topo: &Topology) -> Result<Vec<u32>, SrError> {
        let edges = self.edges();
        let Some(&last) = edges.last() else {
            return Ok(Vec::new());
        };
        let NodeRef::Host(dst) = topo.edge(last).to else {
            return Err(SrError::NotToHost);
        };
        let dst_leaf = topo.hosts()[dst as usize].leaf;
        for &e in edges.iter().skip(MAX_SR_DEPTH) {
            let l = topo.edge(e);
            let NodeRef::Switch(s) = l.from else {
                return Err(SrError::NotToHost);
            };
            let downward = match l.to {
                NodeRef::Host(_) => s == dst_leaf,
                NodeRef::Switch(t) => {
                    topo.switches()[t as usize].role.tier()
                        < topo.switches()[s as usize].role.tier()
                        && topo.next_hops(s, dst_leaf).count() == 1
                }
            };
            if !downward {
                return Err(SrError::TooDeep {
                    hop: topo.describe_edge(e),
                    depth: MAX_SR_DEPTH,
                });
            }
        }
        Ok(edges
            .iter()
            .take(MAX_SR_DEPTH)
            .map(|&e| ADJ_LABEL_BASE + topo.edge(e).from_port as u32)
            .collect())
    }
}

/// One hop of a path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// Switch name.
    pub switch: String,
    /// Switch id (P4Runtime device id).
    pub switch_id: u32,
    /// Port the packet leaves through.
    pub egress_port: u16,
}

/// A path that cannot be expressed as an SR label stack.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrError {
    /// A hop beyond the stack depth is a choice IPv4 routing would make differently.
    #[error(
        "hop {hop} lies beyond the {depth}-label SR stack and is not a deterministic downward hop"
    )]
    TooDeep {
        /// The hop.
        hop: String,
        /// MAX_SR_DEPTH.
        depth: usize,
    },
    /// The path does not end at a host.
    #[error("path does not end at a host")]
    NotToHost,
}

/// The one path between two NICs on the same leaf, or `None` if they are on
/// different leaves.
pub fn local_path(topo: &Topology, src: HostIdx, dst: HostIdx) -> Option<Path> {
    let (a, b) = (&topo.hosts()[src as usize], &topo.hosts()[dst as usize]);
    (a.leaf == b.leaf).then(|| Path::from_edges(&[topo.host_down_edge(dst)]))
}

/// Every equal-cost path from `src` to `dst` (ECMP groups followed at every
/// switch), stopping after `limit` paths. For small fabrics, tests and exact
/// solvers; the planner itself never enumerates.
pub fn all_paths(topo: &Topology, src: HostIdx, dst: HostIdx, limit: usize) -> Vec<Path> {
    let src_leaf = topo.hosts()[src as usize].leaf;
    let dst_leaf = topo.hosts()[dst as usize].leaf;
    let mut out = Vec::new();
    let mut cur = Path::EMPTY;
    fn rec(
        topo: &Topology,
        s: SwitchIdx,
        dst_leaf: SwitchIdx,
        dst: HostIdx,
        cur: &mut Path,
        out: &mut Vec<Path>,
        limit: usize,
    ) {
        if out.len() >= limit {
            return;
        }
        if s == dst_leaf {
            let mut p = *cur;
            p.push(topo.host_down_edge(dst));
            out.push(p);
            return;
        }
        for e in topo.next_hops(s, dst_leaf) {
            let NodeRef::Switch(t) = topo.edge(e).to else {
                continue;
            };
            let saved = *cur;
            cur.push(e);
            rec(topo, t, dst_leaf, dst, cur, out, limit);
            *cur = saved;
        }
    }
    rec(topo, src_leaf, dst_leaf, dst, &mut cur, &mut out, limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::{leaf_spine, multi_pod, LeafSpine, MultiPod};

    #[test]
    fn two_tier_path_has_three_labels() {
        let t = Topology::from_spec(leaf_spine(&LeafSpine::default()).unwrap()).unwrap();
        let h1 = t.host_by_name("h1").unwrap();
        let h3 = t.host_by_name("h3").unwrap();
        let paths = all_paths(&t, h1, h3, 100);
        assert_eq!(paths.len(), 2);
        // via spine1: leaf1 port 3, spine1 port 2 (leaf2), leaf2 port 1 (h3).
        assert_eq!(paths[0].label_stack(&t).unwrap(), vec![1003, 1002, 1001]);
        assert_eq!(paths[1].label_stack(&t).unwrap(), vec![1004, 1002, 1001]);
        let hops = paths[1].hops(&t);
        assert_eq!(
            hops[0],
            Hop {
                switch: "leaf1".into(),
                switch_id: 1,
                egress_port: 4
            }
        );
        assert_eq!(hops[1].switch, "spine2");
    }

    #[test]
    fn three_tier_path_leaves_last_hop_to_ipv4() {
        let t = Topology::from_spec(multi_pod(&MultiPod::default()).unwrap()).unwrap();
        let a = t.host_by_name("h1").unwrap();
        let b = t.host_by_name("h8").unwrap();
        let paths = all_paths(&t, a, b, 100);
        // 2 planes x 2 super-spines.
        assert_eq!(paths.len(), 4);
        for p in &paths {
            assert_eq!(p.len(), 5);
            let labels = p.label_stack(&t).unwrap();
            assert_eq!(labels.len(), MAX_SR_DEPTH);
            assert!(labels.iter().all(|&l| l > ADJ_LABEL_BASE));
        }
        let local = local_path(&t, a, t.host_by_name("h2").unwrap()).unwrap();
        assert_eq!(local.label_stack(&t).unwrap(), vec![1002]);
    }

    #[test]
    fn path_not_ending_at_a_host_is_refused() {
        let t = Topology::from_spec(multi_pod(&MultiPod::default()).unwrap()).unwrap();
        let a = t.host_by_name("h1").unwrap();
        let b = t.host_by_name("h8").unwrap();
        let p = all_paths(&t, a, b, 1)[0];
        let up = p.edges()[0];
        let bogus = Path::from_edges(&[p.edges()[0], p.edges()[1], p.edges()[2], p.edges()[3], up]);
        assert_eq!(bogus.label_stack(&t), Err(SrError::NotToHost));
    }
}
