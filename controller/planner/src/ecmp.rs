//! ECMP as a switch computes it, and the ECMP baseline the planner is
//! compared with.
//!
//! **The hash (shared with the data plane, `p4src/v1model/routing.p4`).**
//! Every switch computes CRC-32 (IEEE 802.3, reflected, init and final XOR
//! `0xFFFFFFFF` — v1model `HashAlgorithm.crc32`, the same as zlib) over
//! its own 32-bit seed (4 bytes, big-endian) followed by the 13-byte key
//! ([`HashKey`]), concatenated big-endian fields:
//! * RoCEv2 (UDP destination port 4791), QP-aware: IPv4 source (4 bytes),
//!   IPv4 destination (4), UDP source port (2), BTH destination QP (3);
//! * 5-tuple (not QP-aware): IPv4 source (4), IPv4 destination (4), IP
//!   protocol (1), L4 source port (2), L4 destination port (2).
//!
//! The switch's selector then reads that hash rotated right by the
//! switch's hash offset ([`SwitchHash::select`]), and the member of an ECMP
//! group is `selected % group size`, members ordered by egress port
//! ([`crate::Topology::next_hops`] order, which is also the order the
//! installer creates them in, BMv2's member order). A path is walked
//! switch by switch, each hashing with its own seed and offset.
//!
//! **Seeds and offsets** ([`SeedPolicy`]). By default every switch's seed
//! is the CRC-32 of its name ([`switch_seed`]; `zlib.crc32(name.encode())`
//! in Python): it depends on nothing but the name, so two topology files
//! that name a switch alike give it the same seed, and anyone can
//! recompute it. Its offset is its tier's ([`tier_offset`]: leaves 0,
//! spines 10, super-spines 20), the ECMP hash offset a fixed-function ASIC
//! has (SAI's `SAI_SWITCH_ATTR_ECMP_DEFAULT_HASH_OFFSET`, which SONiC sets
//! per device role). `SeedPolicy::SeedsOnly` keeps the seeds and sets
//! every offset to 0 (the fabric before independent tiers);
//! `SeedPolicy::Same(n)` gives every switch seed `n` and offset 0:
//! switches that all hash alike, the polarised fabric.
//!
//! **What a seed can and cannot do, and why offsets.** CRC is affine over
//! GF(2): for inputs of one length, `crc(seed ++ key) = crc(0 ++ key) ^
//! c(seed)`, so a seed XORs a per-switch constant into one common hash.
//! With the same seed at every tier, a spine choosing among 16 uplinks
//! takes `(h % 32) % 16` of the `h % 32` its leaf took: the tiers repeat
//! each other and a spine sends everything from below to one uplink (hash
//! polarisation). Per-switch seeds alone break that fabric-wide
//! repetition, but not all of it: when both group sizes are multiples of
//! `2^k`, the second choice's index mod `2^k` is the first's XOR a
//! constant of the (leaf, spine) pair, so with power-of-two groups (the
//! generated Clos fabrics) a spine sends every flow that came from one
//! leaf to the same uplink. Tier offsets end that: a power-of-two group
//! reads bits `offset..offset + log2(size)` of the hash, and the tiers'
//! windows do not overlap for groups of up to 1,024 members, so
//! consecutive tiers read different bits of the CRC, which vary
//! independently over the flows' keys. [`random_baseline`] is ECMP that
//! picks independently at every hop, the reference.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::conventions::{IP_PROTO_UDP, ROCEV2_UDP_PORT};
use crate::flow::Flow;
use crate::ledger::Ledger;
use crate::paths::Path;
use crate::rng::Rng;
use crate::topology::{EdgeId, HostIdx, NodeRef, Role, SwitchIdx, Topology};

/// Which fields the switches hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashMode {
    /// IPv4 src/dst, UDP source port, BTH destination QP.
    QpAware,
    /// IPv4 src/dst, protocol, L4 ports.
    FiveTuple,
}

/// The 13 bytes a switch hashes after its seed (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashKey(pub [u8; 13]);

impl HashKey {
    /// RoCEv2, QP-aware: src IP, dst IP, UDP source port, dest QP (24 bits).
    pub fn roce_qp(src: Ipv4Addr, dst: Ipv4Addr, udp_src_port: u16, dest_qp: u32) -> HashKey {
        let mut key = [0u8; 13];
        key[0..4].copy_from_slice(&src.octets());
        key[4..8].copy_from_slice(&dst.octets());
        key[8..10].copy_from_slice(&udp_src_port.to_be_bytes());
        key[10..13].copy_from_slice(&dest_qp.to_be_bytes()[1..4]);
        HashKey(key)
    }

    /// The 5-tuple: src IP, dst IP, protocol, L4 source port, L4 destination port.
    pub fn five_tuple(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        src_port: u16,
        dst_port: u16,
    ) -> HashKey {
        let mut key = [0u8; 13];
        key[0..4].copy_from_slice(&src.octets());
        key[4..8].copy_from_slice(&dst.octets());
        key[8] = protocol;
        key[9..11].copy_from_slice(&src_port.to_be_bytes());
        key[11..13].copy_from_slice(&dst_port.to_be_bytes());
        HashKey(key)
    }

    /// The key switches in `mode` take from a RoCEv2 flow.
    pub fn of_flow(f: &Flow, mode: HashMode) -> HashKey {
        HashKey::of_packet(
            f.src_ip,
            f.dst_ip,
            IP_PROTO_UDP,
            f.udp_src_port,
            ROCEV2_UDP_PORT,
            f.dest_qp,
            mode,
        )
    }

    /// The key switches in `mode` take from any IPv4 packet: the QP-aware
    /// key for RoCEv2 (UDP to 4791) in QP-aware mode, the 5-tuple
    /// otherwise (`dest_qp` is then unused; ports 0 where the packet has
    /// none).
    pub fn of_packet(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: u8,
        src_port: u16,
        dst_port: u16,
        dest_qp: u32,
        mode: HashMode,
    ) -> HashKey {
        let roce = protocol == IP_PROTO_UDP && dst_port == ROCEV2_UDP_PORT;
        if roce && mode == HashMode::QpAware {
            HashKey::roce_qp(src, dst, src_port, dest_qp)
        } else {
            HashKey::five_tuple(src, dst, protocol, src_port, dst_port)
        }
    }

    /// What a switch with this seed computes: CRC-32 of `seed` (big-endian)
    /// followed by the key.
    pub fn hash(&self, seed: u32) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&seed.to_be_bytes());
        h.update(&self.0);
        h.finalize()
    }
}

/// A switch's default seed: CRC-32 (zlib) of its name's UTF-8 bytes.
pub fn switch_seed(name: &str) -> u32 {
    crc32fast::hash(name.as_bytes())
}

/// Bits of hash each tier's window spans: power-of-two groups of up to
/// `2^10` members read disjoint bits at consecutive tiers.
pub const TIER_WINDOW_BITS: u32 = 10;

/// The hash offset of a switch of this tier under [`SeedPolicy::PerSwitch`]:
/// leaves 0, spines 10, super-spines 20 (the `routing.hash_offset` the
/// controller writes).
pub fn tier_offset(role: Role) -> u32 {
    (u32::from(role.tier()) - 1) * TIER_WINDOW_BITS
}

/// How one switch hashes: its seed, prepended to the key, and its hash
/// offset, by which the selector rotates the CRC right before taking the
/// member (`p4src/v1model/routing.p4`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SwitchHash {
    /// Prepended to every hash input (`routing.hash_seed`).
    pub seed: u32,
    /// Right rotation of the 32-bit CRC, 0..=31 (`routing.hash_offset`).
    pub offset: u32,
}

impl SwitchHash {
    /// What the switch's selector takes the member from:
    /// `rotr32(key.hash(seed), offset)`.
    pub fn select(&self, key: &HashKey) -> u32 {
        key.hash(self.seed).rotate_right(self.offset)
    }

    /// The member this switch picks for `key` in a group of `group_size`.
    pub fn member(&self, key: &HashKey, group_size: usize) -> usize {
        member_index(self.select(key), group_size)
    }
}

/// Which seed and hash offset each switch hashes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SeedPolicy {
    /// Each switch its own seed, [`switch_seed`] of its name, and its
    /// tier's offset ([`tier_offset`]): consecutive tiers decide
    /// independently (what real fabrics do with per-role hash offsets).
    #[default]
    PerSwitch,
    /// Each switch its own seed, every offset 0: tiers stay partly
    /// correlated (module docs), the fabric before hash offsets.
    SeedsOnly,
    /// Every switch this one seed and offset 0 (the polarised fabric).
    Same(u32),
}

impl SeedPolicy {
    /// The seed of the switch called `name`.
    pub fn seed(&self, name: &str) -> u32 {
        match *self {
            SeedPolicy::PerSwitch | SeedPolicy::SeedsOnly => switch_seed(name),
            SeedPolicy::Same(n) => n,
        }
    }

    /// The hash offset of a switch of tier `role`.
    pub fn offset(&self, role: Role) -> u32 {
        match *self {
            SeedPolicy::PerSwitch => tier_offset(role),
            SeedPolicy::SeedsOnly | SeedPolicy::Same(_) => 0,
        }
    }

    /// How the switch called `name`, of tier `role`, hashes.
    pub fn switch_hash(&self, name: &str, role: Role) -> SwitchHash {
        SwitchHash {
            seed: self.seed(name),
            offset: self.offset(role),
        }
    }

    /// How every switch hashes, indexed by [`SwitchIdx`].
    pub fn seeds(&self, topo: &Topology) -> Vec<SwitchHash> {
        topo.switches()
            .iter()
            .map(|s| self.switch_hash(&s.name, s.role))
            .collect()
    }
}

/// `per-switch`, `seeds-only` or `same:N` (N decimal or `0x` hex), as on
/// the command line.
impl fmt::Display for SeedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeedPolicy::PerSwitch => f.write_str("per-switch"),
            SeedPolicy::SeedsOnly => f.write_str("seeds-only"),
            SeedPolicy::Same(n) => write!(f, "same:{n}"),
        }
    }
}

impl FromStr for SeedPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<SeedPolicy, String> {
        match s {
            "per-switch" => return Ok(SeedPolicy::PerSwitch),
            "seeds-only" => return Ok(SeedPolicy::SeedsOnly),
            _ => {}
        }
        let bad = || {
            format!("hash seed policy '{s}': want per-switch, seeds-only or same:N (N a 32-bit number, decimal or 0x hex)")
        };
        let n = s.strip_prefix("same:").ok_or_else(bad)?;
        let parsed = match n.strip_prefix("0x").or_else(|| n.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16),
            None => n.parse(),
        };
        parsed.map(SeedPolicy::Same).map_err(|_| bad())
    }
}

impl Serialize for SeedPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Index of the chosen member in a group of `group_size` (ordered by egress port).
pub fn member_index(hash: u32, group_size: usize) -> usize {
    assert!(group_size > 0, "empty ECMP group");
    hash as usize % group_size
}

/// The path ECMP gives a flow with this key: at every switch `s`, member
/// `seeds[s].member(key, |group|)` of the group toward the destination leaf.
pub fn ecmp_path(
    topo: &Topology,
    src: HostIdx,
    dst: HostIdx,
    key: &HashKey,
    seeds: &[SwitchHash],
) -> Path {
    walk(topo, src, dst, |s, n| seeds[s as usize].member(key, n))
}

/// The ECMP next hops of switch `s` towards `leaf` that are up (`down`
/// says which edges are not) and still lead, along the ECMP DAG, to `leaf`
/// over edges that are up — in the order of [`Topology::next_hops`]. The
/// routes and ECMP groups the controller installs use exactly these, so
/// [`ecmp_path_avoiding`] follows what the data plane does.
pub fn viable_next_hops<'a, F>(
    topo: &'a Topology,
    s: SwitchIdx,
    leaf: SwitchIdx,
    down: F,
) -> impl Iterator<Item = EdgeId> + 'a
where
    F: Fn(EdgeId) -> bool + Copy + 'a,
{
    topo.next_hops(s, leaf).filter(move |&e| {
        !down(e)
            && match topo.edge(e).to {
                NodeRef::Switch(t) => reaches(topo, t, leaf, down),
                NodeRef::Host(_) => false,
            }
    })
}

fn reaches<F: Fn(EdgeId) -> bool + Copy>(
    topo: &Topology,
    s: SwitchIdx,
    leaf: SwitchIdx,
    down: F,
) -> bool {
    s == leaf || viable_next_hops(topo, s, leaf, down).next().is_some()
}

/// [`ecmp_path`] when the edges `down` marks are out of service: every
/// hop hashes over its viable next hops only. `None` when `dst` cannot be
/// reached (or its own downlink is down).
pub fn ecmp_path_avoiding<F: Fn(EdgeId) -> bool + Copy>(
    topo: &Topology,
    src: HostIdx,
    dst: HostIdx,
    key: &HashKey,
    seeds: &[SwitchHash],
    down: F,
) -> Option<Path> {
    walk_avoiding(topo, src, dst, down, |s, _, n| {
        seeds[s as usize].member(key, n)
    })
}

/// From the source leaf to `dst` over the viable next hops (`down` marks
/// the edges out of service): `pick(switch, ingress port, group size)`
/// chooses the member at every switch. `None` when `dst` cannot be reached.
pub fn walk_avoiding<F: Fn(EdgeId) -> bool + Copy>(
    topo: &Topology,
    src: HostIdx,
    dst: HostIdx,
    down: F,
    mut pick: impl FnMut(SwitchIdx, u16, usize) -> usize,
) -> Option<Path> {
    let dst_leaf = topo.hosts()[dst as usize].leaf;
    let mut s = topo.hosts()[src as usize].leaf;
    let mut in_port = topo.edge(topo.host_up_edge(src)).to_port;
    let mut p = Path::EMPTY;
    while s != dst_leaf {
        let group: smallvec::SmallVec<[EdgeId; 64]> =
            viable_next_hops(topo, s, dst_leaf, down).collect();
        if group.is_empty() {
            return None;
        }
        let e = group[pick(s, in_port, group.len())];
        p.push(e);
        let link = topo.edge(e);
        let NodeRef::Switch(t) = link.to else {
            unreachable!("next hops lead to switches")
        };
        (s, in_port) = (t, link.to_port);
    }
    let last = topo.host_down_edge(dst);
    if down(last) {
        return None;
    }
    p.push(last);
    Some(p)
}

/// ECMP with an independent uniform choice at every hop, for every flow:
/// the reference without correlation between tiers (which CRC seeds do
/// not fully remove, see the module docs), random collisions included.
pub fn random_path(topo: &Topology, src: HostIdx, dst: HostIdx, rng: &mut Rng) -> Path {
    walk(topo, src, dst, |_, n| rng.below(n as u64) as usize)
}

/// From the source leaf to `dst`: `pick(switch, group size)` chooses the
/// member at every switch.
fn walk(
    topo: &Topology,
    src: HostIdx,
    dst: HostIdx,
    mut pick: impl FnMut(SwitchIdx, usize) -> usize,
) -> Path {
    let dst_leaf = topo.hosts()[dst as usize].leaf;
    let mut s = topo.hosts()[src as usize].leaf;
    let mut p = Path::EMPTY;
    while s != dst_leaf {
        let group: smallvec::SmallVec<[EdgeId; 64]> = topo.next_hops(s, dst_leaf).collect();
        let e = group[pick(s, group.len())];
        p.push(e);
        let NodeRef::Switch(t) = topo.edge(e).to else {
            unreachable!("next hops lead to switches")
        };
        s = t;
    }
    p.push(topo.host_down_edge(dst));
    p
}

/// How a set of flows fares on ECMP without reservations.
#[derive(Clone, Debug, Serialize)]
pub struct EcmpOutcome {
    /// The hashing.
    pub mode: String,
    /// Highest offered load / capacity on any link (may exceed 1).
    pub peak_utilisation: f64,
    /// Links whose offered load exceeds capacity at some time.
    pub overloaded_links: usize,
    /// Predicted completion of the last flow, ns.
    pub completion_ns: u64,
    /// Per flow predicted completion, ns.
    #[serde(skip)]
    pub flow_completion_ns: Vec<u64>,
    /// Per flow path.
    #[serde(skip)]
    pub paths: Vec<Path>,
}

/// Predicted completion of a flow sharing links: it progresses at
/// `rate / max(1, offered/capacity)` where offered is the peak offered load
/// on its path during its window (proportional sharing of each bottleneck).
pub fn slowdown(topo: &Topology, offered: &Ledger, f: &Flow, p: &Path) -> f64 {
    let w = f.window();
    p.reserved_edges(topo, f.src)
        .map(|e| offered.peak(e, w) as f64 / topo.edge(e).capacity_bps as f64)
        .fold(1.0, f64::max)
}

fn outcome(topo: &Topology, flows: &[Flow], paths: Vec<Path>, mode: String) -> EcmpOutcome {
    let mut offered = Ledger::new(topo.edge_count());
    let mut used = Vec::new();
    for (f, p) in flows.iter().zip(&paths) {
        for e in p.reserved_edges(topo, f.src) {
            if offered.timeline(e).is_zero() {
                used.push(e);
            }
            offered.reserve(e, f.window(), f.rate_bps);
        }
    }
    let mut peak = 0.0f64;
    let mut over = 0;
    for &e in &used {
        let u = offered.max(e) as f64 / topo.edge(e).capacity_bps as f64;
        peak = peak.max(u);
        if u > 1.0 + 1e-12 {
            over += 1;
        }
    }
    let flow_completion_ns: Vec<u64> = flows
        .iter()
        .zip(&paths)
        .map(|(f, p)| {
            f.start_ns + (f.duration_ns as f64 * slowdown(topo, &offered, f, p)).ceil() as u64
        })
        .collect();
    EcmpOutcome {
        mode,
        peak_utilisation: peak,
        overloaded_links: over,
        completion_ns: flow_completion_ns.iter().copied().max().unwrap_or(0),
        flow_completion_ns,
        paths,
    }
}

/// Every flow hashed as the switches would, each switch with its seed
/// under `seeds`.
pub fn baseline(topo: &Topology, flows: &[Flow], mode: HashMode, seeds: SeedPolicy) -> EcmpOutcome {
    let by_switch = seeds.seeds(topo);
    let paths = flows
        .iter()
        .map(|f| ecmp_path(topo, f.src, f.dst, &HashKey::of_flow(f, mode), &by_switch))
        .collect();
    let name = match mode {
        HashMode::QpAware => "ecmp-qp-aware",
        HashMode::FiveTuple => "ecmp-5-tuple",
    };
    outcome(topo, flows, paths, format!("{name} [{seeds}]"))
}

/// Every flow on an independently random equal-cost path (seeded).
pub fn random_baseline(topo: &Topology, flows: &[Flow], seed: u64) -> EcmpOutcome {
    let mut rng = Rng::new(seed);
    let paths = flows
        .iter()
        .map(|f| random_path(topo, f.src, f.dst, &mut rng))
        .collect();
    outcome(topo, flows, paths, "ecmp-ideal-random".into())
}

/// Probability that `n` flows hashed uniformly onto `s` paths all land on
/// different paths: `s! / ((s−n)! · s^n)`.
pub fn no_collision_probability(s: u32, n: u32) -> f64 {
    if n > s {
        return 0.0;
    }
    (0..n).map(|i| (s - i) as f64 / s as f64).product()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::QpAllocator;
    use crate::topology::generate::{leaf_spine, multi_pod, preset, LeafSpine, MultiPod, Preset};

    /// CRC-32/ISO-HDLC bit by bit, straight from its definition (reflected
    /// polynomial 0xEDB88320, init and final XOR all ones): the reference
    /// the table-driven `crc32fast` is checked against.
    fn reference_crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn crc32_is_ieee() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(reference_crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn hash_keys_are_laid_out_as_documented() {
        let (s, d) = (Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 2, 1));
        assert_eq!(
            HashKey::roce_qp(s, d, 0xc001, 0xAB12_3456).0,
            [10, 0, 1, 1, 10, 0, 2, 1, 0xc0, 0x01, 0x12, 0x34, 0x56]
        );
        assert_eq!(
            HashKey::five_tuple(s, d, 17, 0xc001, 4791).0,
            [10, 0, 1, 1, 10, 0, 2, 1, 17, 0xc0, 0x01, 0x12, 0xb7]
        );
    }

    /// The switch hash is CRC-32 of the seed (big-endian) then the key,
    /// against the bitwise reference for random seeds and keys, and against
    /// one value from Python's `zlib.crc32` (an independent implementation).
    #[test]
    fn seeded_hash_is_crc32_of_seed_then_key() {
        let mut rng = Rng::new(13);
        for _ in 0..2000 {
            let seed = rng.next_u64() as u32;
            let mut key = [0u8; 13];
            key.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
            let mut input = seed.to_be_bytes().to_vec();
            input.extend_from_slice(&key);
            assert_eq!(HashKey(key).hash(seed), reference_crc32(&input));
        }
        // zlib.crc32(bytes.fromhex("12345678") + bytes([10,0,1,1,10,0,2,1,0xc0,1,0x12,0x34,0x56]))
        let key = HashKey::roce_qp(
            Ipv4Addr::new(10, 0, 1, 1),
            Ipv4Addr::new(10, 0, 2, 1),
            0xc001,
            0x12_3456,
        );
        assert_eq!(key.hash(0x1234_5678), 0xf029_098c);
    }

    #[test]
    fn a_switch_seed_is_crc32_of_its_name() {
        // zlib.crc32(b"leaf1"), zlib.crc32(b"spine1")
        assert_eq!(switch_seed("leaf1"), 0xbd74_076c);
        assert_eq!(switch_seed("spine1"), 0x8895_ff78);
        assert_eq!(switch_seed("s1"), reference_crc32(b"s1"));
        assert_eq!(SeedPolicy::PerSwitch.seed("leaf1"), switch_seed("leaf1"));
        assert_eq!(SeedPolicy::Same(7).seed("leaf1"), 7);
        assert_eq!(SeedPolicy::default(), SeedPolicy::PerSwitch);
    }

    #[test]
    fn seed_policies_parse_and_print_alike() {
        for (text, policy) in [
            ("per-switch", SeedPolicy::PerSwitch),
            ("seeds-only", SeedPolicy::SeedsOnly),
            ("same:0", SeedPolicy::Same(0)),
            ("same:4294967295", SeedPolicy::Same(u32::MAX)),
        ] {
            assert_eq!(text.parse::<SeedPolicy>(), Ok(policy));
            assert_eq!(policy.to_string(), text);
        }
        assert_eq!("same:0x1F".parse(), Ok(SeedPolicy::Same(31)));
        for bad in [
            "",
            "same",
            "same:",
            "same:-1",
            "same:4294967296",
            "per_switch",
            "seeds",
            "0",
        ] {
            let e = bad.parse::<SeedPolicy>().unwrap_err();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains("same:N"),
                "{e}"
            );
        }
    }

    /// The selector's value is the seeded CRC rotated right by the offset,
    /// against one value from Python (`zlib.crc32` and a rotation), and
    /// the policies give the documented offsets.
    #[test]
    fn the_selector_reads_the_crc_rotated_by_the_offset() {
        let key = HashKey::roce_qp(
            Ipv4Addr::new(10, 0, 1, 1),
            Ipv4Addr::new(10, 0, 2, 1),
            0xc001,
            0x12_3456,
        );
        // h = zlib.crc32(...) = 0xf029098c (above); ((h >> 10) | (h << 22)) & 0xffffffff
        let spine = SwitchHash {
            seed: 0x1234_5678,
            offset: 10,
        };
        assert_eq!(spine.select(&key), 0x633c_0a42);
        assert_eq!(spine.member(&key, 8), 0x633c_0a42 % 8);
        let leaf = SwitchHash { offset: 0, ..spine };
        assert_eq!(leaf.select(&key), 0xf029_098c);
        assert_eq!(
            [Role::Leaf, Role::Spine, Role::Superspine].map(tier_offset),
            [0, 10, 20]
        );
        assert_eq!(
            SeedPolicy::PerSwitch.switch_hash("spine1", Role::Spine),
            SwitchHash {
                seed: switch_seed("spine1"),
                offset: 10
            }
        );
        for policy in [SeedPolicy::SeedsOnly, SeedPolicy::Same(3)] {
            assert_eq!(policy.offset(Role::Superspine), 0, "{policy}");
        }
        assert_eq!(SeedPolicy::SeedsOnly.seed("leaf1"), switch_seed("leaf1"));
    }

    /// Another seed reshuffles a group of 7 (about 6 flows in 7 move) and
    /// relabels a group of 8: since CRC is affine, every flow's member
    /// moves by the same XOR, `(hash(a) ^ hash(b)) % 8` (module docs).
    #[test]
    fn a_seed_changes_the_member() {
        let mut rng = Rng::new(5);
        let keys: Vec<HashKey> = (0..4096)
            .map(|_| {
                HashKey::roce_qp(
                    Ipv4Addr::from(rng.next_u64() as u32),
                    Ipv4Addr::from(rng.next_u64() as u32),
                    rng.next_u64() as u16,
                    rng.next_u64() as u32,
                )
            })
            .collect();
        let (leaf, spine) = (switch_seed("leaf1"), switch_seed("spine1"));
        for (a, b) in [(0, 1), (leaf, spine), (0, leaf)] {
            let moved = keys
                .iter()
                .filter(|k| member_index(k.hash(a), 7) != member_index(k.hash(b), 7))
                .count() as f64
                / keys.len() as f64;
            // 6/7 = 0.857; the band is about ±6 σ.
            assert!(
                (0.82..=0.89).contains(&moved),
                "seeds {a:#x} {b:#x}: {moved}"
            );
            let shifts: std::collections::BTreeSet<usize> = keys
                .iter()
                .map(|k| member_index(k.hash(a), 8) ^ member_index(k.hash(b), 8))
                .collect();
            assert_eq!(shifts.len(), 1, "seeds {a:#x} {b:#x}: {shifts:?}");
        }
    }

    /// Flows from every host of pod 0 to pod 1 of a 3-tier Clos, random
    /// QPs; per flow (leaf, spine, leaf's member index, spine's member index).
    fn tier_choices(
        t: &Topology,
        seeds: SeedPolicy,
        flows: usize,
    ) -> Vec<(u32, u32, usize, usize)> {
        let by_switch = seeds.seeds(t);
        let pod0: Vec<HostIdx> = (0..t.hosts().len() as HostIdx)
            .filter(|&h| t.hosts()[h as usize].ip.octets()[1] == 0)
            .collect();
        let pod1: Vec<HostIdx> = (0..t.hosts().len() as HostIdx)
            .filter(|&h| t.hosts()[h as usize].ip.octets()[1] == 1)
            .collect();
        assert!(!pod0.is_empty() && !pod1.is_empty());
        let mut rng = Rng::new(99);
        (0..flows)
            .map(|i| {
                let src = pod0[i % pod0.len()];
                let dst = pod1[rng.below(pod1.len() as u64) as usize];
                let f = Flow::new(t, src, dst, rng.below(1 << 24) as u32, 0, 1, 1_000_000_000);
                let key = HashKey::of_flow(&f, HashMode::QpAware);
                let p = ecmp_path(t, f.src, f.dst, &key, &by_switch);
                let dst_leaf = t.hosts()[dst as usize].leaf;
                let index = |s: SwitchIdx, e: EdgeId| {
                    t.next_hops(s, dst_leaf)
                        .position(|x| x == e)
                        .expect("a member")
                };
                let leaf = t.hosts()[src as usize].leaf;
                let NodeRef::Switch(spine) = t.edge(p.edges()[0]).to else {
                    panic!("leaf uplinks go to spines")
                };
                (
                    leaf,
                    spine,
                    index(leaf, p.edges()[0]),
                    index(spine, p.edges()[1]),
                )
            })
            .collect()
    }

    /// The 1,024-GPU `clos3` preset: leaves hash over 32 spines, spines over
    /// 16 super-spines. With one seed everywhere, the spine repeats its
    /// leaf's choice (`j = i mod 16`) for every flow; with per-switch seeds
    /// (with or without offsets) about 1 flow in 16 does.
    #[test]
    fn per_switch_seeds_stop_the_second_tier_repeating_the_first() {
        let t = Topology::from_spec(preset(Preset::Clos3, 1024).unwrap()).unwrap();
        let share = |seeds| {
            let c = tier_choices(&t, seeds, 20_000);
            c.iter().filter(|x| x.3 == x.2 % 16).count() as f64 / c.len() as f64
        };
        assert_eq!(share(SeedPolicy::Same(0)), 1.0);
        assert_eq!(share(SeedPolicy::Same(0xdead_beef)), 1.0);
        for seeds in [SeedPolicy::SeedsOnly, SeedPolicy::PerSwitch] {
            let s = share(seeds);
            assert!(
                (0.03..=0.10).contains(&s),
                "{seeds}: {s} of flows repeat the leaf's choice"
            );
        }
    }

    /// What seeds alone do not fix (module docs): with power-of-two
    /// groups, all flows that a spine gets from one leaf leave on one
    /// uplink; independent per-hop choices would use all 16.
    #[test]
    fn without_offsets_power_of_two_groups_send_one_leafs_flows_through_one_spine_uplink() {
        let t = Topology::from_spec(preset(Preset::Clos3, 1024).unwrap()).unwrap();
        for seeds in [SeedPolicy::SeedsOnly, SeedPolicy::Same(0)] {
            let mut used: std::collections::HashMap<(u32, u32), std::collections::BTreeSet<usize>> =
                Default::default();
            for (leaf, spine, _, j) in tier_choices(&t, seeds, 20_000) {
                used.entry((leaf, spine)).or_default().insert(j);
            }
            // 16 leaves x 32 spines in pod 0, about 39 flows each.
            assert!(used.len() > 500, "{seeds}: {} pairs", used.len());
            assert!(used.values().all(|u| u.len() == 1), "{seeds}");
        }
    }

    /// Tier offsets make the spine's choice independent of its leaf's: the
    /// flows a spine gets from one leaf spread over all 16 uplinks, and
    /// over all (leaf member, spine member) pairs the counts are what
    /// independent uniform choices give (chi-square, 511 degrees of
    /// freedom: mean 511, sd 32; the bound 700 is 5.9 sd, and the inputs
    /// are fixed, so the test is deterministic).
    #[test]
    fn tier_offsets_make_the_spine_choose_independently_of_its_leaf() {
        let t = Topology::from_spec(preset(Preset::Clos3, 1024).unwrap()).unwrap();
        let choices = tier_choices(&t, SeedPolicy::PerSwitch, 40_000);
        let mut used: std::collections::HashMap<(u32, u32), std::collections::BTreeSet<usize>> =
            Default::default();
        let mut joint = vec![0u32; 32 * 16];
        for &(leaf, spine, i, j) in &choices {
            used.entry((leaf, spine)).or_default().insert(j);
            joint[i * 16 + j] += 1;
        }
        // About 78 flows per (leaf, spine) pair: a given uplink stays unused
        // with probability (15/16)^78 = 0.0065, so about 1 pair in 10
        // misses one and 4 missing has probability < 1e-6 per pair. Ask
        // for 13 of 16 on every pair and all 16 on 80 % of them (the mean
        // is 90 %, sd 1.3 %).
        assert!(
            used.values().all(|u| u.len() >= 13),
            "a pair kept to few uplinks"
        );
        let all = used.values().filter(|u| u.len() == 16).count();
        assert!(
            all * 10 >= used.len() * 8,
            "{all} of {} pairs use all 16",
            used.len()
        );
        let expected = choices.len() as f64 / joint.len() as f64;
        let chi2: f64 = joint
            .iter()
            .map(|&n| (n as f64 - expected).powi(2) / expected)
            .sum();
        assert!(
            chi2 < 700.0,
            "leaf and spine choices are dependent: chi2 {chi2}"
        );
    }

    /// Group sizes without a common power-of-two factor (3 spines per pod,
    /// 5 super-spines per plane): per-switch seeds spread each (leaf,
    /// spine) pair's flows over all 5 uplinks.
    #[test]
    fn coprime_groups_spread_one_leafs_flows_over_every_spine_uplink() {
        let t = Topology::from_spec(
            multi_pod(&MultiPod {
                pods: 2,
                leaves_per_pod: 4,
                spines_per_pod: 3,
                superspines_per_plane: 5,
                hosts_per_leaf: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let mut used: std::collections::HashMap<(u32, u32), std::collections::BTreeSet<usize>> =
            Default::default();
        for (leaf, spine, _, j) in tier_choices(&t, SeedPolicy::PerSwitch, 4_000) {
            used.entry((leaf, spine)).or_default().insert(j);
        }
        assert_eq!(used.len(), 4 * 3);
        assert!(used.values().all(|u| u.len() == 5), "{used:?}");
    }

    #[test]
    fn collision_probability_formula() {
        assert!((no_collision_probability(8, 8) - 0.002403).abs() < 1e-5);
        assert!((no_collision_probability(32, 8) - 0.385_715).abs() < 1e-5);
        assert_eq!(no_collision_probability(2, 3), 0.0);
    }

    /// Monte-Carlo over real hashes: N flows with random QPs from one leaf to
    /// another over S spines land on distinct spines with probability
    /// S!/((S−N)!·S^N).
    #[test]
    fn monte_carlo_matches_formula() {
        for (spines, n) in [(8u32, 8u32), (8, 4), (16, 4), (4, 2)] {
            let t = Topology::from_spec(
                leaf_spine(&LeafSpine {
                    leaves: 2,
                    spines,
                    hosts_per_leaf: n,
                    ..Default::default()
                })
                .unwrap(),
            )
            .unwrap();
            let seeds = SeedPolicy::PerSwitch.seeds(&t);
            let mut rng = Rng::new(spines as u64 * 100 + n as u64);
            let trials = 20_000;
            let mut clean = 0;
            for _ in 0..trials {
                let mut seen = vec![false; t.edge_count()];
                let mut ok = true;
                for h in 0..n {
                    let qp = rng.below(1 << 24) as u32;
                    let f = Flow::new(&t, h, n + h, qp, 0, 1000, 1_000_000_000);
                    let key = HashKey::of_flow(&f, HashMode::QpAware);
                    let p = ecmp_path(&t, f.src, f.dst, &key, &seeds);
                    let up = p.edges()[0];
                    if std::mem::replace(&mut seen[up as usize], true) {
                        ok = false;
                    }
                }
                if ok {
                    clean += 1;
                }
            }
            let p = no_collision_probability(spines, n);
            let est = clean as f64 / trials as f64;
            let sigma = (p * (1.0 - p) / trials as f64).sqrt();
            assert!(
                (est - p).abs() < 5.0 * sigma + 1e-3,
                "S={spines} N={n}: Monte-Carlo {est} vs formula {p}"
            );
        }
    }

    #[test]
    fn baseline_finds_collisions_the_planner_avoids() {
        // 8 flows leaf1 -> leaf2 over 8 spines: ECMP (either hash) almost
        // surely collides; peak utilisation is then 2 flows' worth.
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                leaves: 2,
                spines: 8,
                hosts_per_leaf: 8,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let mut q = QpAllocator::new(&t);
        let flows: Vec<Flow> = (0..8)
            .map(|h| {
                let qp = q.alloc(8 + h);
                Flow::new(&t, h, 8 + h, qp, 0, 1_000_000, 50_000_000_000)
            })
            .collect();
        let b = baseline(&t, &flows, HashMode::QpAware, SeedPolicy::PerSwitch);
        assert_eq!(b.paths.len(), 8);
        assert_eq!(b.mode, "ecmp-qp-aware [per-switch]");
        assert!(b.peak_utilisation >= 0.5 - 1e-9);
        // Completion is never earlier than the flows' own duration.
        assert!(b.completion_ns >= flows[0].end_ns());
    }
}
