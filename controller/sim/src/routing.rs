//! Routing on a fabric with failed links: the switch ECMP walk (exactly
//! the planner's hash, each switch with its own seed and hash offset, or
//! each switch as a description of its hash says, and member order, with
//! dead members removed from the groups), per-hop fluid spraying, per-hop
//! least-loaded (adaptive) and per-hop random (flowlets).
//!
//! A next hop is usable when its link is up and the switch behind it can
//! still reach the destination leaf (routes toward a leaf that a failure cut
//! off are withdrawn, as BGP would).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use planner::demand::Flow;
use planner::ecmp::{member_index, HashKey, SeedPolicy, SwitchHash};
use planner::hash_profile::FabricHash;
use planner::paths::Path;
use planner::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};

use crate::parts::Use;

/// How a fabric's switches hash.
#[derive(Clone, Debug)]
pub enum SwitchHashing {
    /// Every switch runs Foresight's program, seeded and offset as the
    /// policy says: the simulator's fast path ([`FlowHash`]).
    Program(SeedPolicy),
    /// Every switch as a description of its hash says (fixed-function
    /// ASICs, `--switch-hash`): each hop hashes the flow's fields afresh.
    Described(Arc<FabricHash>),
}

impl From<SeedPolicy> for SwitchHashing {
    fn from(seeds: SeedPolicy) -> SwitchHashing {
        SwitchHashing::Program(seeds)
    }
}

impl fmt::Display for SwitchHashing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchHashing::Program(seeds) => write!(f, "Foresight's program, seeds {seeds}"),
            SwitchHashing::Described(_) => write!(f, "as described (--switch-hash)"),
        }
    }
}

/// What a described switch reads of a flow besides its two hosts'
/// addresses (which the route carries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowKey {
    /// UDP source port.
    pub udp_src_port: u16,
    /// BTH destination QP.
    pub dest_qp: u32,
}

impl FlowKey {
    /// The flow's own port and QP.
    pub fn of(f: &Flow) -> FlowKey {
        FlowKey {
            udp_src_port: f.udp_src_port,
            dest_qp: f.dest_qp,
        }
    }
}

/// What the switches hash of one flow, in the fabric's terms: its
/// seed-0 hash under Foresight's program, its key under a description.
#[derive(Clone, Copy, Debug)]
pub enum Hashed {
    /// [`SwitchHashing::Program`].
    Program(FlowHash),
    /// [`SwitchHashing::Described`].
    Described(FlowKey),
}

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

/// The fabric plus which links are down and how every switch hashes.
pub struct Fabric<'t> {
    /// The topology.
    pub topo: &'t Topology,
    /// Per switch, its hash as a [`Selector`] (Foresight's program).
    selectors: Vec<Selector>,
    /// Every switch's described hash, when the fabric is described.
    described: Option<Arc<FabricHash>>,
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
    /// All links up; switches running Foresight's program, seeded (and
    /// offset) as `seeds` says.
    pub fn new(topo: &'t Topology, seeds: SeedPolicy) -> Fabric<'t> {
        Fabric::hashing(topo, &SwitchHashing::Program(seeds))
    }

    /// All links up; switches hashing as `hashing` says.
    pub fn hashing(topo: &'t Topology, hashing: &SwitchHashing) -> Fabric<'t> {
        let (seeds, described) = match hashing {
            SwitchHashing::Program(seeds) => (*seeds, None),
            SwitchHashing::Described(d) => {
                assert_eq!(
                    d.switches.len(),
                    topo.switches().len(),
                    "one described hash per switch"
                );
                (SeedPolicy::PerSwitch, Some(d.clone()))
            }
        };
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
            described,
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

    /// Walks from the source leaf choosing a member per switch:
    /// `pick(the switch's selected hash of the flow, group)` (0 without
    /// `hashed`); `false` if the destination is unreachable.
    fn walk(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        hashed: Option<Hashed>,
        mut pick: impl FnMut(u32, &[EdgeId]) -> usize,
        out: &mut Vec<Use>,
    ) -> bool {
        out.clear();
        let topo = self.topo;
        if !self.ends_ok(src, dst) {
            return false;
        }
        let up = topo.host_up_edge(src);
        out.push((up, 1.0));
        let described = match hashed {
            Some(Hashed::Described(key)) => Some(self.described_flow(src, dst, key)),
            _ => None,
        };
        let dst_leaf = topo.hosts()[dst as usize].leaf;
        let mut s = topo.hosts()[src as usize].leaf;
        let mut in_port = topo.edge(up).to_port;
        while s != dst_leaf {
            self.load_group(s, dst_leaf);
            if self.group.is_empty() {
                out.clear();
                return false;
            }
            let value = match (hashed, &described, &self.described) {
                (None, ..) => 0,
                (Some(Hashed::Program(h)), _, None) => self.selectors[s as usize].select(h),
                (Some(Hashed::Described(_)), Some(flow), Some(d)) => {
                    let p = &d.switches[s as usize];
                    p.select(p.hash(flow, in_port))
                }
                _ => panic!("a flow hashed in the terms of another fabric's hashing"),
            };
            let e = self.group[pick(value, &self.group)];
            out.push((e, 1.0));
            let link = topo.edge(e);
            let NodeRef::Switch(t) = link.to else {
                unreachable!("next hops lead to switches")
            };
            (s, in_port) = (t, link.to_port);
        }
        out.push((topo.host_down_edge(dst), 1.0));
        true
    }

    /// The flow a described switch hashes: the hosts' addresses with the key.
    fn described_flow(&self, src: HostIdx, dst: HostIdx, key: FlowKey) -> Flow {
        let hs = self.topo.hosts();
        Flow {
            src,
            dst,
            src_ip: hs[src as usize].ip,
            dst_ip: hs[dst as usize].ip,
            udp_src_port: key.udp_src_port,
            dest_qp: key.dest_qp,
            start_ns: 0,
            bytes: 0,
            rate_bps: 0,
            duration_ns: 0,
        }
    }

    /// The path switches give a flow: member `selected hash % |group|` at
    /// every switch, each with its own hash (the planner's
    /// [`SwitchHash::member`], or the description's
    /// [`planner::hash_profile::HashProfile::member`]).
    pub fn hashed(&mut self, src: HostIdx, dst: HostIdx, h: Hashed, out: &mut Vec<Use>) -> bool {
        self.walk(src, dst, Some(h), |v, g| member_index(v, g.len()), out)
    }

    /// Per hop, the usable next hop with the least `load` (ties: by the
    /// switch's seeded hash).
    pub fn least_loaded(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        h: Hashed,
        load: &[f64],
        out: &mut Vec<Use>,
    ) -> bool {
        self.walk(
            src,
            dst,
            Some(h),
            |value, g| {
                let min = g
                    .iter()
                    .map(|&e| load[e as usize])
                    .fold(f64::INFINITY, f64::min);
                let ties = g
                    .iter()
                    .filter(|&&e| load[e as usize] <= min + 1e-9)
                    .count();
                let k = member_index(value, ties);
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
        self.walk(
            src,
            dst,
            None,
            |_, g| rng.below(g.len() as u64) as usize,
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
                assert!(f.hashed(a, b, Hashed::Program(FlowHash::of(&key)), &mut out));
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
            Hashed::Program(FlowHash::of(&HashKey::roce_qp(sa, sb, 49152, 1))),
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
            let got = f.hashed(a, b, Hashed::Program(FlowHash::of(&key)), &mut out);
            assert_eq!(got, want.is_some());
            let mine: Vec<u32> = out.iter().skip(1).map(|u| u.0).collect();
            assert_eq!(mine, want.map_or(Vec::new(), |p| p.edges().to_vec()));
        }
    }

    /// A fixed-function fabric: CRC-16 over the 5-tuple and the ingress
    /// port, the seed in the register, each tier reading other bits.
    const ASIC: &str = "\
version: 1
default:
  function: crc16-ccitt-false
  seed: 0x1d
  fields: [src_ip, dst_ip, ip_proto, l4_src_port, l4_dst_port, ingress_port]
roles:
  spine: {offset: 4}
  superspine: {function: crc32, seed_use: prepend, bits: 16, offset: 16}
";

    /// On a described fabric the walk is the description's own
    /// (`FabricHash::path_avoiding`: each hop hashing the flow and its
    /// ingress port), before and after a spine uplink fails.
    #[test]
    fn described_walk_matches_the_description() {
        let t = three_tier();
        let d = Arc::new(FabricHash::from_yaml(&t, ASIC, "asic.yaml").unwrap());
        let mut f = Fabric::hashing(&t, &SwitchHashing::Described(d.clone()));
        let n = t.hosts().len() as u32;
        let mut out = Vec::new();
        let mut failed = None;
        for round in 0..2 {
            for h in 0..2000u32 {
                let (a, b) = (h % n, (h * 7 + 3) % n);
                if a == b {
                    continue;
                }
                let key = FlowKey {
                    udp_src_port: 49152 + (h % 16384) as u16,
                    dest_qp: h.wrapping_mul(0x9e37_79b9) & 0xff_ffff,
                };
                let flow = f.described_flow(a, b, key);
                let want = d.path_avoiding(&t, &flow, |e| Some(e) == failed);
                let got = f.hashed(a, b, Hashed::Described(key), &mut out);
                assert_eq!(got, want.is_some(), "round {round}");
                let mine: Vec<u32> = out.iter().skip(1).map(|u| u.0).collect();
                assert_eq!(mine, want.map_or(Vec::new(), |p| p.edges().to_vec()));
            }
            // Take down the spine -> super-spine hop of some flow.
            let key = FlowKey {
                udp_src_port: 49152,
                dest_qp: 1,
            };
            assert!(f.hashed(0, n - 1, Hashed::Described(key), &mut out));
            failed = Some(out[2].0);
            f.fail(out[2].0);
        }
    }

    /// Foresight's program written as a description routes every flow as
    /// the program's fast path does.
    #[test]
    fn the_program_described_is_the_program() {
        let t = three_tier();
        let d = FabricHash::foresight(
            &t,
            &SeedPolicy::PerSwitch,
            planner::ecmp::HashMode::FiveTuple,
        );
        let mut described = Fabric::hashing(&t, &SwitchHashing::Described(Arc::new(d)));
        let mut program = Fabric::new(&t, SeedPolicy::PerSwitch);
        let n = t.hosts().len() as u32;
        let (mut a_out, mut b_out) = (Vec::new(), Vec::new());
        for h in 0..2000u32 {
            let (a, b) = (h % n, (h * 5 + 1) % n);
            if a == b {
                continue;
            }
            let key = FlowKey {
                udp_src_port: 49152 + h as u16,
                dest_qp: h,
            };
            let flow = described.described_flow(a, b, key);
            let five = FlowHash::of(&HashKey::of_flow(&flow, planner::ecmp::HashMode::FiveTuple));
            assert!(described.hashed(a, b, Hashed::Described(key), &mut a_out));
            assert!(program.hashed(a, b, Hashed::Program(five), &mut b_out));
            assert_eq!(a_out, b_out);
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
        let key = |qp| Hashed::Program(FlowHash::of(&HashKey::roce_qp(sa, sb, 49152, qp)));
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
