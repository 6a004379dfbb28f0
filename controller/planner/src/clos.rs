//! Recognizing a regular Clos in a topology, so path choice can be done as
//! edge colouring.
//!
//! The shape the colouring planner needs: every pod has the same number `S`
//! of spines and each of its leaves has exactly one link to each of them,
//! all of one capacity; with super-spines, spine `j` of every pod connects
//! once to each of the `X` super-spines of plane `j` (planes disjoint), all of
//! one capacity. Then a leaf-to-leaf path is fixed by a spine index `j` (and,
//! between pods, a super-spine index `x` in plane `j`). The generators build
//! exactly this; anything else is planned by the general (greedy) method.

use crate::topology::{EdgeId, NodeRef, Role, SwitchIdx, Topology};

/// A regular 2- or 3-tier Clos, indexed for path construction.
#[derive(Clone, Debug)]
pub struct ClosShape {
    /// Spines per pod = planes.
    pub spines: usize,
    /// Super-spines per plane (0 for a 2-tier fabric).
    pub superspines: usize,
    /// Pods.
    pub pods: usize,
    /// Capacity of every leaf-spine link, bit/s.
    pub leaf_capacity_bps: u64,
    /// Capacity of every spine-superspine link, bit/s (0 for 2-tier).
    pub pod_capacity_bps: u64,
    leaf_slot: Vec<u32>,
    leaf_pod: Vec<u32>,
    leaf_up: Vec<EdgeId>,
    leaf_down: Vec<EdgeId>,
    pod_up: Vec<EdgeId>,
    pod_down: Vec<EdgeId>,
}

const NO: u32 = u32::MAX;

/// Records the first capacity seen in `slot`; false if `c` differs from it.
fn same_cap(c: u64, slot: &mut Option<u64>) -> bool {
    *slot.get_or_insert(c) == c
}

impl ClosShape {
    /// Recognizes the shape, or `None` if the fabric is not a regular Clos.
    pub fn detect(topo: &Topology) -> Option<ClosShape> {
        let sw = topo.switches();
        let mut pod_ids: Vec<u32> = sw
            .iter()
            .filter(|s| s.role != Role::Superspine)
            .map(|s| s.pod)
            .collect();
        pod_ids.sort_unstable();
        pod_ids.dedup();
        let pods = pod_ids.len();
        let dense_pod = |p: u32| pod_ids.binary_search(&p).expect("pod listed") as u32;
        // Spines per pod, in switch order.
        let mut pod_spines: Vec<Vec<SwitchIdx>> = vec![Vec::new(); pods];
        let mut spine_pos = vec![NO; sw.len()];
        for (i, s) in sw.iter().enumerate() {
            if s.role == Role::Spine {
                let p = dense_pod(s.pod) as usize;
                spine_pos[i] = pod_spines[p].len() as u32;
                pod_spines[p].push(i as u32);
            }
        }
        let spines = pod_spines.first()?.len();
        if spines == 0 || pod_spines.iter().any(|v| v.len() != spines) {
            return None;
        }
        let leaves = topo.leaves();
        let mut leaf_slot = vec![NO; sw.len()];
        for (k, &l) in leaves.iter().enumerate() {
            leaf_slot[l as usize] = k as u32;
        }
        let nl = leaves.len();
        let mut leaf_pod = vec![0u32; nl];
        let mut leaf_up = vec![NO; nl * spines];
        let mut leaf_down = vec![NO; nl * spines];
        let mut cap = None;
        for (k, &l) in leaves.iter().enumerate() {
            let p = dense_pod(sw[l as usize].pod);
            leaf_pod[k] = p;
            for &e in topo.switch_out_edges(l) {
                let link = topo.edge(e);
                let NodeRef::Switch(t) = link.to else {
                    return None;
                };
                if sw[t as usize].role != Role::Spine || dense_pod(sw[t as usize].pod) != p {
                    return None;
                }
                let j = spine_pos[t as usize] as usize;
                if leaf_up[k * spines + j] != NO || !same_cap(link.capacity_bps, &mut cap) {
                    return None;
                }
                leaf_up[k * spines + j] = e;
            }
        }
        // Downlinks and super-spine planes.
        let mut plane_of_ss = vec![NO; sw.len()];
        let mut plane_members: Vec<Vec<SwitchIdx>> = vec![Vec::new(); spines];
        for (i, s) in sw.iter().enumerate() {
            if s.role != Role::Spine {
                continue;
            }
            let j = spine_pos[i] as usize;
            for &e in topo.switch_out_edges(i as u32) {
                let NodeRef::Switch(t) = topo.edge(e).to else {
                    return None;
                };
                match sw[t as usize].role {
                    Role::Leaf => {
                        let k = leaf_slot[t as usize] as usize;
                        if leaf_down[k * spines + j] != NO
                            || !same_cap(topo.edge(e).capacity_bps, &mut cap)
                        {
                            return None;
                        }
                        leaf_down[k * spines + j] = e;
                    }
                    Role::Superspine => {
                        if plane_of_ss[t as usize] == NO {
                            plane_of_ss[t as usize] = j as u32;
                            plane_members[j].push(t);
                        } else if plane_of_ss[t as usize] != j as u32 {
                            return None; // not disjoint planes (e.g. full mesh)
                        }
                    }
                    Role::Spine => return None,
                }
            }
        }
        if leaf_up.contains(&NO) || leaf_down.contains(&NO) {
            return None;
        }
        let leaf_capacity_bps = cap?;
        for m in &mut plane_members {
            m.sort_unstable();
        }
        let superspines = plane_members[0].len();
        if plane_members.iter().any(|m| m.len() != superspines) || (superspines == 0 && pods > 1) {
            return None;
        }
        let mut pod_up = vec![NO; pods * spines * superspines];
        let mut pod_down = vec![NO; pods * spines * superspines];
        let mut pcap = None;
        if superspines > 0 {
            for (p, list) in pod_spines.iter().enumerate() {
                for (j, &s) in list.iter().enumerate() {
                    for &e in topo.switch_out_edges(s) {
                        let NodeRef::Switch(t) = topo.edge(e).to else {
                            return None;
                        };
                        if sw[t as usize].role != Role::Superspine {
                            continue;
                        }
                        let x = plane_members[j].binary_search(&t).ok()?;
                        let slot = (p * spines + j) * superspines + x;
                        if pod_up[slot] != NO || !same_cap(topo.edge(e).capacity_bps, &mut pcap) {
                            return None;
                        }
                        pod_up[slot] = e;
                    }
                }
            }
            for (j, members) in plane_members.iter().enumerate() {
                for (x, &ss) in members.iter().enumerate() {
                    for &e in topo.switch_out_edges(ss) {
                        let NodeRef::Switch(t) = topo.edge(e).to else {
                            return None;
                        };
                        let p = dense_pod(sw[t as usize].pod) as usize;
                        if spine_pos[t as usize] as usize != j {
                            return None;
                        }
                        let slot = (p * spines + j) * superspines + x;
                        if pod_down[slot] != NO || !same_cap(topo.edge(e).capacity_bps, &mut pcap) {
                            return None;
                        }
                        pod_down[slot] = e;
                    }
                }
            }
            if pod_up.contains(&NO) || pod_down.contains(&NO) {
                return None;
            }
        }
        Some(ClosShape {
            spines,
            superspines,
            pods,
            leaf_capacity_bps,
            pod_capacity_bps: pcap.unwrap_or(0),
            leaf_slot,
            leaf_pod,
            leaf_up,
            leaf_down,
            pod_up,
            pod_down,
        })
    }

    /// Dense index of a leaf (`None` if `s` is not a leaf).
    pub fn leaf_index(&self, s: SwitchIdx) -> Option<usize> {
        let k = *self.leaf_slot.get(s as usize)?;
        (k != NO).then_some(k as usize)
    }
    /// Number of leaves.
    pub fn leaf_count(&self) -> usize {
        self.leaf_pod.len()
    }
    /// Dense pod of a leaf index.
    pub fn pod_of(&self, leaf: usize) -> usize {
        self.leaf_pod[leaf] as usize
    }
    /// Leaf `leaf` → its spine `j`.
    pub fn up(&self, leaf: usize, j: usize) -> EdgeId {
        self.leaf_up[leaf * self.spines + j]
    }
    /// Spine `j` of the leaf's pod → leaf `leaf`.
    pub fn down(&self, leaf: usize, j: usize) -> EdgeId {
        self.leaf_down[leaf * self.spines + j]
    }
    /// Spine `j` of pod `p` → super-spine `x` of plane `j`.
    pub fn pod_up(&self, p: usize, j: usize, x: usize) -> EdgeId {
        self.pod_up[(p * self.spines + j) * self.superspines + x]
    }
    /// Super-spine `x` of plane `j` → spine `j` of pod `p`.
    pub fn pod_down(&self, p: usize, j: usize, x: usize) -> EdgeId {
        self.pod_down[(p * self.spines + j) * self.superspines + x]
    }
    /// All uplinks of a leaf.
    pub fn leaf_uplinks(&self, leaf: usize) -> &[EdgeId] {
        &self.leaf_up[leaf * self.spines..(leaf + 1) * self.spines]
    }
    /// All downlinks into a leaf.
    pub fn leaf_downlinks(&self, leaf: usize) -> &[EdgeId] {
        &self.leaf_down[leaf * self.spines..(leaf + 1) * self.spines]
    }
    /// All spine→super-spine links of a pod.
    pub fn pod_uplinks(&self, p: usize) -> &[EdgeId] {
        let n = self.spines * self.superspines;
        &self.pod_up[p * n..(p + 1) * n]
    }
    /// All super-spine→spine links into a pod.
    pub fn pod_downlinks(&self, p: usize) -> &[EdgeId] {
        let n = self.spines * self.superspines;
        &self.pod_down[p * n..(p + 1) * n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::*;

    #[test]
    fn detects_generated_fabrics() {
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                leaves: 3,
                spines: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        assert_eq!(
            (c.spines, c.superspines, c.pods, c.leaf_count()),
            (4, 0, 1, 3)
        );
        let t = Topology::from_spec(
            multi_pod(&MultiPod {
                pods: 3,
                superspines_per_plane: 2,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let c = ClosShape::detect(&t).unwrap();
        assert_eq!((c.spines, c.superspines, c.pods), (2, 2, 3));
        let e = c.pod_up(1, 1, 0);
        assert_eq!(t.describe_edge(e), "p2-spine2:3 -> ss2-1:2");
        let t = Topology::from_spec(rail_optimized(&RailOptimized::default()).unwrap()).unwrap();
        assert!(ClosShape::detect(&t).is_some());
    }

    #[test]
    fn irregular_fabric_is_not_a_clos_shape() {
        let mut spec = leaf_spine(&LeafSpine {
            leaves: 2,
            spines: 2,
            ..Default::default()
        })
        .unwrap();
        spec.links.pop(); // leaf2 loses its link to spine2
        let t = Topology::from_spec(spec).unwrap();
        assert!(ClosShape::detect(&t).is_none());
    }
}
