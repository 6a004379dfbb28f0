//! Routing on a fabric with failed links: the switch ECMP walk (exactly
//! the planner's hash, each switch with its own seed and hash offset, and
//! member order, with dead members removed from the groups), per-hop fluid
//! spraying, per-hop least-loaded (adaptive) and per-hop random (flowlets).
//!
//! A next hop is usable when its link is up and the switch behind it can
//! still reach the destination leaf (routes toward a leaf that a failure cut
//! off are withdrawn, as BGP would).

use std::collections::HashMap;

use planner::ecmp::{member_index, HashKey, SeedPolicy, SwitchHash};
use planner::paths::Path;
use planner::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};

use crate::parts::Use;

/// A flow's hash key as the simulator carries it: [`HashKey::hash`] with
/// seed 0. CRC-32 is affine over GF(2) for inputs of one length, so the
/// hash a switch with seed `s` computes is this XOR a constant of `s`
/// ([`Fabric`] keeps one per switch, with the switch's hash offset): four
/// bytes per flow instead of thirteen, one XOR and one rotation per hop
/// instead of a CRC, the same bits (`tests::seeded_hash_is_the_planner_hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowHash(u32);

impl FlowHash {
    /// The key's seed-0 hash.
    pub fn of(key: &HashKey) -> FlowHash {
        FlowHash(key.hash(0))
    }
}

/// What seed `seed` XORs into every seed-0 hash (see [`FlowHash`]).
fn seed_term(seed: u32) -> u32 {
    let zero = HashKey([0; 13]);
    zero.hash(seed) ^ zero.hash(0)
}

/// One switch's hash as the walk applies it to a [`FlowHash`]: XOR the
/// seed's term, rotate by the offset ([`SwitchHash::select`]).
#[derive(Clone, Copy, Debug)]
struct Selector {
    term: u32,
    offset: u32,
}

impl Selector {
    fn of(h: SwitchHash) -> Selector {
        Selector {
            term: seed_term(h.seed),
            offset: h.offset,
        }
    }

    /// The switch's selector value for a flow: `SwitchHash::select`.
    fn select(self, h: FlowHash) -> u32 {
        (h.0 ^ self.term).rotate_right(self.offset)
    }
}

/// The fabric plus which links are down and every switch's hash seed and
/// offset.
pub struct Fabric<'t> {
    /// The topology.
    pub topo: &'t Topology,
    /// Per switch, its hash as a [`Selector`].
    selectors: Vec<Selector>,
    failed: Vec<bool>,
    any_failed: bool,
    reach: HashMap<(SwitchIdx, SwitchIdx), bool>,
    group: Vec<EdgeId>,
    /// Per switch, its switch-to-switch links with the switch each leads
    /// to, in egress-port order (`out[out_off[s]..out_off[s + 1]]`): one
    /// contiguous read per hop instead of a graph lookup per link.
    out: Vec<(EdgeId, SwitchIdx)>,
    out_off: Vec<u32>,
    /// Group of (switch, destination leaf) at `switch * leaves + leaf
    /// position`, as 1 + its offset in `cached` (`[len, members…]`); 0: not
    /// yet computed. Only when the table is small; cleared on failure.
    group_at: Vec<u32>,
    cached: Vec<EdgeId>,
    leaf_pos: Vec<u32>,
}

/// Largest (switch × leaf) group table kept, entries (64 MiB).
const MAX_GROUP_TABLE: usize = 1 << 24;

impl<'t> Fabric<'t> {
    /// All links up; switches seeded (and offset) as `seeds` says.
    pub fn new(topo: &'t Topology, seeds: SeedPolicy) -> Fabric<'t> {
        let mut out = Vec::new();
        let mut out_off = vec![0u32];
        for s in 0..topo.switches().len() as SwitchIdx {
            for &e in topo.switch_out_edges(s) {
                if let NodeRef::Switch(t) = topo.edge(e).to {
                    out.push((e, t));
                }
            }
            out_off.push(out.len() as u32);
        }
        let mut leaf_pos = vec![u32::MAX; topo.switches().len()];
        for (i, &l) in topo.leaves().iter().enumerate() {
            leaf_pos[l as usize] = i as u32;
        }
        let cells = topo.switches().len() * topo.leaves().len();
        Fabric {
            topo,
            selectors: seeds.seeds(topo).into_iter().map(Selector::of).collect(),
            failed: vec![false; topo.edge_count()],
            any_failed: false,
            reach: HashMap::new(),
            group: Vec::with_capacity(64),
            out,
            out_off,
            group_at: if cells <= MAX_GROUP_TABLE {
                vec![0; cells]
            } else {
                Vec::new()
            },
            cached: Vec::new(),
            leaf_pos,
        }
    }

    /// Takes a directed edge down.
    pub fn fail(&mut self, e: EdgeId) {
        self.failed[e as usize] = true;
        self.any_failed = true;
        self.reach.clear();
        self.group_at.fill(0);
        self.cached.clear();
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
        let cell =
            s as usize * self.topo.leaves().len() + self.leaf_pos[dst_leaf as usize] as usize;
        match self.group_at.get(cell) {
            Some(&0) => {
                self.find_group(s, dst_leaf);
                self.group_at[cell] = self.cached.len() as u32 + 1;
                self.cached.push(self.group.len() as EdgeId);
                self.cached.extend_from_slice(&self.group);
            }
            Some(&at) => {
                let n = self.cached[at as usize - 1] as usize;
                self.group
                    .extend_from_slice(&self.cached[at as usize..at as usize + n]);
            }
            None => self.find_group(s, dst_leaf),
        }
    }

    /// [`Fabric::load_group`], computed.
    fn find_group(&mut self, s: SwitchIdx, dst_leaf: SwitchIdx) {
        let topo = self.topo;
        if !self.any_failed {
            // Exactly `topo.next_hops`: the links one hop closer to the leaf.
            let Some(d) = topo.dist_to_leaf(s, dst_leaf).filter(|&d| d > 0) else {
                return;
            };
            let (a, b) = (self.out_off[s as usize], self.out_off[s as usize + 1]);
            for &(e, t) in &self.out[a as usize..b as usize] {
                if topo.dist_to_leaf(t, dst_leaf) == Some(d - 1) {
                    self.group.push(e);
                }
            }
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
    /// (`pick(switch's selector, group)`); `false` if the destination is
    /// unreachable.
    fn walk(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        mut pick: impl FnMut(Selector, &[EdgeId]) -> usize,
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
            let e = self.group[pick(self.selectors[s as usize], &self.group)];
            out.push((e, 1.0));
            s = self.to_switch(e).expect("next hops lead to switches");
        }
        out.push((topo.host_down_edge(dst), 1.0));
        true
    }

    /// The path switches give a flow with this hash: member
    /// `rotr(key.hash(seed), offset) % |group|` at every switch, with that
    /// switch's seed and offset (the planner's [`SwitchHash::member`]).
    pub fn hashed(&mut self, src: HostIdx, dst: HostIdx, h: FlowHash, out: &mut Vec<Use>) -> bool {
        self.walk(src, dst, |t, g| member_index(t.select(h), g.len()), out)
    }

    /// Per hop, the usable next hop with the least `load` (ties: by the
    /// switch's seeded hash).
    pub fn least_loaded(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        h: FlowHash,
        load: &[f64],
        out: &mut Vec<Use>,
    ) -> bool {
        self.walk(
            src,
            dst,
            |t, g| {
                let min = g
                    .iter()
                    .map(|&e| load[e as usize])
                    .fold(f64::INFINITY, f64::min);
                let ties = g
                    .iter()
                    .filter(|&&e| load[e as usize] <= min + 1e-9)
                    .count();
                let k = member_index(t.select(h), ties);
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

    /// A random member per hop, drawn independently at every switch from
    /// `draw` (a flowlet switch's choice; no switch hash involved).
    pub fn random(&mut self, src: HostIdx, dst: HostIdx, draw: u32, out: &mut Vec<Use>) -> bool {
        let mut rng = planner::rng::Rng::new(u64::from(draw) ^ 0xf10e_1e70_0000_0000);
        self.walk(src, dst, |_, g| rng.below(g.len() as u64) as usize, out)
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
    use planner::ecmp::{ecmp_path, ecmp_path_avoiding};
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

    /// The seed term and rotation are exact: every switch computes
    /// `SwitchHash::select` bit for bit, for RoCEv2 and 5-tuple keys and
    /// any seed and offset.
    #[test]
    fn seeded_hash_is_the_planner_hash() {
        let mut rng = planner::rng::Rng::new(11);
        let mut byte = || rng.below(256) as u8;
        for i in 0..5000u32 {
            let key = HashKey(std::array::from_fn(|_| byte()));
            let seed = match i % 3 {
                0 => i.wrapping_mul(0x9e37_79b9),
                1 => planner::ecmp::switch_seed(&format!("spine{i}")),
                _ => u32::MAX - i,
            };
            assert_eq!(
                FlowHash::of(&key).0 ^ seed_term(seed),
                key.hash(seed),
                "{key:?} {seed}"
            );
            let h = SwitchHash {
                seed,
                offset: i % 32,
            };
            assert_eq!(
                Selector::of(h).select(FlowHash::of(&key)),
                h.select(&key),
                "{key:?} {h:?}"
            );
        }
    }

    /// The sim's walk is the planner's `ecmp_path`, switch by switch, under
    /// every seed policy.
    #[test]
    fn hashed_walk_matches_the_planner_ecmp_path() {
        let t = three_tier();
        let n = t.hosts().len() as u32;
        for seeds in [
            SeedPolicy::PerSwitch,
            SeedPolicy::SeedsOnly,
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
                assert!(f.hashed(a, b, FlowHash::of(&key), &mut out));
                let p = ecmp_path(&t, a, b, &key, &by_switch);
                let mine: Vec<u32> = out[1..].iter().map(|u| u.0).collect();
                assert_eq!(mine, p.edges(), "{seeds}");
            }
        }
    }

    /// With a spine uplink down, the sim's walk is the planner's
    /// `ecmp_path_avoiding` (the groups the controller installs then).
    #[test]
    fn hashed_walk_after_a_failure_matches_the_planner() {
        let t = three_tier();
        let by_switch = SeedPolicy::PerSwitch.seeds(&t);
        let mut f = Fabric::new(&t, SeedPolicy::PerSwitch);
        let mut out = Vec::new();
        let (a, b) = (0, t.hosts().len() as u32 - 1);
        let (sa, sb) = (t.hosts()[a as usize].ip, t.hosts()[b as usize].ip);
        assert!(f.hashed(
            a,
            b,
            FlowHash::of(&HashKey::roce_qp(sa, sb, 49152, 1)),
            &mut out
        ));
        let hop = out[2].0;
        f.fail(hop);
        let n = t.hosts().len() as u32;
        for h in 0..2000u32 {
            let (a, b) = (h % n, (h * 5 + 1) % n);
            if a == b {
                continue;
            }
            let (sa, sb) = (t.hosts()[a as usize].ip, t.hosts()[b as usize].ip);
            let key = HashKey::roce_qp(sa, sb, 49152 + h as u16, h);
            let want = ecmp_path_avoiding(&t, a, b, &key, &by_switch, |e| e == hop);
            let got = f.hashed(a, b, FlowHash::of(&key), &mut out);
            assert_eq!(got, want.is_some());
            let mine: Vec<u32> = out.iter().skip(1).map(|u| u.0).collect();
            assert_eq!(mine, want.map_or(Vec::new(), |p| p.edges().to_vec()));
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

    /// Flowlet draws pick every hop on its own: all leaf-uplink ×
    /// spine-uplink pairs come up, about equally often (no tier repeats
    /// another's choice, unlike one shared hash).
    #[test]
    fn random_walk_draws_every_hop_independently() {
        let t = three_tier();
        let mut f = Fabric::new(&t, SeedPolicy::PerSwitch);
        let mut out = Vec::new();
        let a = t.host_by_name("h1").unwrap();
        let b = t.hosts().len() as u32 - 1;
        let mut count: HashMap<(EdgeId, EdgeId), u32> = HashMap::new();
        let n = 800;
        for d in 0..n {
            assert!(f.random(a, b, d, &mut out));
            assert_eq!(out.len(), 6, "up, 4 fabric hops, down");
            *count.entry((out[1].0, out[2].0)).or_default() += 1;
        }
        // 4 spines per leaf, 2 super-spines per spine.
        assert_eq!(count.len(), 8, "{count:?}");
        let (mean, sd) = (n as f64 / 8.0, (n as f64 / 8.0 * 7.0 / 8.0).sqrt());
        for (pair, &c) in &count {
            assert!((c as f64 - mean).abs() < 4.0 * sd, "{pair:?}: {c}");
        }
        // The same draw, the same path.
        let mut again = Vec::new();
        assert!(f.random(a, b, 7, &mut out) && f.random(a, b, 7, &mut again));
        assert_eq!(out, again);
    }

    #[test]
    fn failures_are_routed_around() {
        let t = three_tier();
        let mut f = Fabric::new(&t, SeedPolicy::PerSwitch);
        let mut out = Vec::new();
        let a = t.host_by_name("h1").unwrap();
        let b = t.hosts().len() as u32 - 1;
        let (sa, sb) = (t.hosts()[a as usize].ip, t.hosts()[b as usize].ip);
        let key = |qp| FlowHash::of(&HashKey::roce_qp(sa, sb, 49152, qp));
        assert!(f.hashed(a, b, key(12345), &mut out));
        let hop = out[2].0; // spine -> super-spine
        f.fail(hop);
        for qp in 0..200 {
            assert!(f.hashed(a, b, key(qp), &mut out));
            assert!(out.iter().all(|u| u.0 != hop));
            assert!(f.sprayed(a, b, &mut out));
            assert!(out.iter().all(|u| u.0 != hop));
        }
    }
}
