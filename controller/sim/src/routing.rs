//! Routing on a fabric with failed links: the switch ECMP walk (exactly
//! the planner's hash, each switch with its own seed, and member order,
//! with dead members removed from the groups), per-hop fluid spraying, and
//! per-hop least-loaded (adaptive).
//!
//! A next hop is usable when its link is up and the switch behind it can
//! still reach the destination leaf (routes toward a leaf that a failure cut
//! off are withdrawn, as BGP would).

use std::collections::HashMap;

use planner::ecmp::{member_index, HashKey, SeedPolicy};
use planner::paths::Path;
use planner::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};

use crate::maxmin::Use;

/// The fabric plus which links are down and every switch's hash seed.
pub struct Fabric<'t> {
    /// The topology.
    pub topo: &'t Topology,
    seeds: Vec<u32>,
    failed: Vec<bool>,
    any_failed: bool,
    reach: HashMap<(SwitchIdx, SwitchIdx), bool>,
    group: Vec<EdgeId>,
}

impl<'t> Fabric<'t> {
    /// All links up; switches seeded as `seeds` says.
    pub fn new(topo: &'t Topology, seeds: SeedPolicy) -> Fabric<'t> {
        Fabric {
            topo,
            seeds: seeds.seeds(topo),
            failed: vec![false; topo.edge_count()],
            any_failed: false,
            reach: HashMap::new(),
            group: Vec::with_capacity(64),
        }
    }

    /// Takes a directed edge down.
    pub fn fail(&mut self, e: EdgeId) {
        self.failed[e as usize] = true;
        self.any_failed = true;
        self.reach.clear();
    }

    /// Is the edge down?
    pub fn is_failed(&self, e: EdgeId) -> bool {
        self.failed[e as usize]
    }

    fn to_switch(&self, e: EdgeId) -> Option<SwitchIdx> {
        match self.topo.edge(e).to {
            NodeRef::Switch(t) => Some(t),
            NodeRef::Host(_) => None,
        }
    }

    fn reaches(&mut self, s: SwitchIdx, dst_leaf: SwitchIdx) -> bool {
        if s == dst_leaf {
            return true;
        }
        if !self.any_failed {
            return self.topo.dist_to_leaf(s, dst_leaf).is_some();
        }
        if let Some(&r) = self.reach.get(&(s, dst_leaf)) {
            return r;
        }
        let hops: Vec<EdgeId> = self.topo.next_hops(s, dst_leaf).collect();
        let mut r = false;
        for e in hops {
            if self.failed[e as usize] {
                continue;
            }
            if let Some(t) = self.to_switch(e) {
                if self.reaches(t, dst_leaf) {
                    r = true;
                    break;
                }
            }
        }
        self.reach.insert((s, dst_leaf), r);
        r
    }

    /// Usable next hops of `s` toward `dst_leaf`, in egress-port order, into `self.group`.
    fn load_group(&mut self, s: SwitchIdx, dst_leaf: SwitchIdx) {
        self.group.clear();
        let topo = self.topo;
        if !self.any_failed {
            self.group.extend(topo.next_hops(s, dst_leaf));
            return;
        }
        for e in topo.next_hops(s, dst_leaf) {
            if self.failed[e as usize] {
                continue;
            }
            let t = self.to_switch(e).expect("next hops lead to switches");
            if self.reaches(t, dst_leaf) {
                self.group.push(e);
            }
        }
    }

    fn ends_ok(&self, src: HostIdx, dst: HostIdx) -> bool {
        !self.failed[self.topo.host_up_edge(src) as usize]
            && !self.failed[self.topo.host_down_edge(dst) as usize]
    }

    /// Walks from the source leaf choosing a member per switch
    /// (`pick(switch's seed, group)`); `false` if the destination is
    /// unreachable.
    fn walk(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        mut pick: impl FnMut(u32, &[EdgeId]) -> usize,
        out: &mut Vec<Use>,
    ) -> bool {
        out.clear();
        let topo = self.topo;
        if !self.ends_ok(src, dst) {
            return false;
        }
        out.push((topo.host_up_edge(src), 1.0));
        let dst_leaf = topo.hosts()[dst as usize].leaf;
        let mut s = topo.hosts()[src as usize].leaf;
        while s != dst_leaf {
            self.load_group(s, dst_leaf);
            if self.group.is_empty() {
                out.clear();
                return false;
            }
            let e = self.group[pick(self.seeds[s as usize], &self.group)];
            out.push((e, 1.0));
            s = self.to_switch(e).expect("next hops lead to switches");
        }
        out.push((topo.host_down_edge(dst), 1.0));
        true
    }

    /// The path switches give a flow with this key: member
    /// `key.hash(seed) % |group|` at every switch, with that switch's seed
    /// (the planner's [`HashKey::hash`] and [`member_index`]).
    pub fn hashed(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        key: &HashKey,
        out: &mut Vec<Use>,
    ) -> bool {
        self.walk(
            src,
            dst,
            |seed, g| member_index(key.hash(seed), g.len()),
            out,
        )
    }

    /// Per hop, the usable next hop with the least `load` (ties: by the
    /// switch's hash of `key`).
    pub fn least_loaded(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        key: &HashKey,
        load: &[f64],
        out: &mut Vec<Use>,
    ) -> bool {
        self.walk(
            src,
            dst,
            |seed, g| {
                let min = g
                    .iter()
                    .map(|&e| load[e as usize])
                    .fold(f64::INFINITY, f64::min);
                let ties = g
                    .iter()
                    .filter(|&&e| load[e as usize] <= min + 1e-9)
                    .count();
                let k = member_index(key.hash(seed), ties);
                g.iter()
                    .enumerate()
                    .filter(|(_, &e)| load[e as usize] <= min + 1e-9)
                    .nth(k)
                    .map(|(i, _)| i)
                    .expect("k below the tie count")
            },
            out,
        )
    }

    /// A fixed path (the planner's), if all its links are up.
    pub fn fixed(&mut self, src: HostIdx, path: &Path, out: &mut Vec<Use>) -> bool {
        out.clear();
        let up = self.topo.host_up_edge(src);
        if self.failed[up as usize] || path.edges().iter().any(|&e| self.failed[e as usize]) {
            return false;
        }
        out.push((up, 1.0));
        out.extend(path.edges().iter().map(|&e| (e, 1.0)));
        true
    }

    /// The ideal fabric: only the two NIC links constrain.
    pub fn ideal(&self, src: HostIdx, dst: HostIdx, out: &mut Vec<Use>) -> bool {
        out.clear();
        out.push((self.topo.host_up_edge(src), 1.0));
        out.push((self.topo.host_down_edge(dst), 1.0));
        self.ends_ok(src, dst)
    }

    /// Per-packet spraying as a fluid: at every switch the flow splits
    /// equally over the usable next hops (on a Clos, every equal-cost path
    /// gets the same share).
    pub fn sprayed(&mut self, src: HostIdx, dst: HostIdx, out: &mut Vec<Use>) -> bool {
        out.clear();
        let topo = self.topo;
        if !self.ends_ok(src, dst) {
            return false;
        }
        out.push((topo.host_up_edge(src), 1.0));
        let dst_leaf = topo.hosts()[dst as usize].leaf;
        let mut level: Vec<(SwitchIdx, f64)> = vec![(topo.hosts()[src as usize].leaf, 1.0)];
        let mut next: Vec<(SwitchIdx, f64)> = Vec::new();
        while !(level.len() == 1 && level[0].0 == dst_leaf) {
            next.clear();
            for &(s, x) in &level {
                self.load_group(s, dst_leaf);
                if self.group.is_empty() {
                    out.clear();
                    return false;
                }
                let share = x / self.group.len() as f64;
                for &e in &self.group {
                    out.push((e, share));
                    next.push((self.to_switch(e).expect("switch"), share));
                }
            }
            next.sort_unstable_by_key(|p| p.0);
            level.clear();
            for &(s, x) in &next {
                match level.last_mut() {
                    Some(l) if l.0 == s => l.1 += x,
                    _ => level.push((s, x)),
                }
            }
        }
        out.push((topo.host_down_edge(dst), 1.0));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use planner::ecmp::ecmp_path;
    use planner::topology::generate::{multi_pod, MultiPod};

    fn three_tier() -> Topology {
        Topology::from_spec(
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
        .unwrap()
    }

    /// The sim's walk is the planner's `ecmp_path`, switch by switch, under
    /// either seed policy.
    #[test]
    fn hashed_walk_matches_the_planner_ecmp_path() {
        let t = three_tier();
        let n = t.hosts().len() as u32;
        for seeds in [
            SeedPolicy::PerSwitch,
            SeedPolicy::Same(0),
            SeedPolicy::Same(77),
        ] {
            let mut f = Fabric::new(&t, seeds);
            let by_switch = seeds.seeds(&t);
            let mut out = Vec::new();
            for h in 0..2000u32 {
                let (a, b) = (h % n, (h * 7 + 3) % n);
                if a == b {
                    continue;
                }
                let key = HashKey::roce_qp(
                    t.hosts()[a as usize].ip,
                    t.hosts()[b as usize].ip,
                    49152 + (h % 16384) as u16,
                    h.wrapping_mul(0x9e37_79b9) & 0xff_ffff,
                );
                assert!(f.hashed(a, b, &key, &mut out));
                let p = ecmp_path(&t, a, b, &key, &by_switch);
                let mine: Vec<u32> = out[1..].iter().map(|u| u.0).collect();
                assert_eq!(mine, p.edges(), "{seeds}");
            }
        }
    }

    #[test]
    fn spraying_splits_evenly_and_conserves_flow() {
        let t = three_tier();
        let mut f = Fabric::new(&t, SeedPolicy::PerSwitch);
        let mut out = Vec::new();
        let a = t.host_by_name("h1").unwrap();
        let b = t.hosts().len() as u32 - 1;
        assert!(f.sprayed(a, b, &mut out));
        // up + leaf->4 spines + 4 spines->2 ss each + 8 ss->spine + 4 spine->leaf + down
        let total: f64 = out.iter().map(|u| u.1).sum();
        assert!(
            (total - 6.0).abs() < 1e-9,
            "each of 6 hops carries the whole flow"
        );
    }

    #[test]
    fn failures_are_routed_around() {
        let t = three_tier();
        let mut f = Fabric::new(&t, SeedPolicy::PerSwitch);
        let mut out = Vec::new();
        let a = t.host_by_name("h1").unwrap();
        let b = t.hosts().len() as u32 - 1;
        let (sa, sb) = (t.hosts()[a as usize].ip, t.hosts()[b as usize].ip);
        assert!(f.hashed(a, b, &HashKey::roce_qp(sa, sb, 49152, 12345), &mut out));
        let hop = out[2].0; // spine -> super-spine
        f.fail(hop);
        for qp in 0..200 {
            let key = HashKey::roce_qp(sa, sb, 49152, qp);
            assert!(f.hashed(a, b, &key, &mut out));
            assert!(out.iter().all(|u| u.0 != hop));
            assert!(f.sprayed(a, b, &mut out));
            assert!(out.iter().all(|u| u.0 != hop));
        }
    }
}
