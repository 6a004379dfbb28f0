//! ECMP as a switch computes it, and the ECMP baseline the planner is
//! compared with.
//!
//! **The hash (shared with the data plane).** CRC-32 (IEEE 802.3,
//! reflected, init and final XOR `0xFFFFFFFF` — v1model
//! `HashAlgorithm.crc32`, the same as zlib) over the concatenated big-endian
//! fields:
//! * RoCEv2 (UDP destination port 4791), QP-aware: IPv4 source (4 bytes),
//!   IPv4 destination (4), UDP source port (2), BTH destination QP (3);
//! * 5-tuple (not QP-aware): IPv4 source (4), IPv4 destination (4), IP
//!   protocol (1), L4 source port (2), L4 destination port (2).
//!
//! The member of an ECMP group is `hash % group size`, members ordered by
//! egress port ([`crate::Topology::next_hops`] order). Every switch uses the
//! same hash, so choices at successive tiers are correlated (hash
//! polarization); the baseline reports this faithfully, and also an ideal
//! independent-random ECMP for comparison.

use std::net::Ipv4Addr;

use serde::Serialize;

use crate::conventions::{IP_PROTO_UDP, ROCEV2_UDP_PORT};
use crate::demand::Flow;
use crate::ledger::Ledger;
use crate::paths::Path;
use crate::rng::Rng;
use crate::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};

/// Which fields the switches hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HashMode {
    /// IPv4 src/dst, UDP source port, BTH destination QP.
    QpAware,
    /// IPv4 src/dst, protocol, L4 ports.
    FiveTuple,
}

/// CRC-32 of the RoCEv2 QP-aware key: src IP, dst IP, UDP source port, dest QP (24 bits).
pub fn roce_qp_hash(src: Ipv4Addr, dst: Ipv4Addr, udp_src_port: u16, dest_qp: u32) -> u32 {
    let mut key = [0u8; 13];
    key[0..4].copy_from_slice(&src.octets());
    key[4..8].copy_from_slice(&dst.octets());
    key[8..10].copy_from_slice(&udp_src_port.to_be_bytes());
    key[10..13].copy_from_slice(&dest_qp.to_be_bytes()[1..4]);
    crc32fast::hash(&key)
}

/// CRC-32 of the 5-tuple key: src IP, dst IP, protocol, L4 src port, L4 dst port.
pub fn five_tuple_hash(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: u8,
    src_port: u16,
    dst_port: u16,
) -> u32 {
    let mut key = [0u8; 13];
    key[0..4].copy_from_slice(&src.octets());
    key[4..8].copy_from_slice(&dst.octets());
    key[8] = protocol;
    key[9..11].copy_from_slice(&src_port.to_be_bytes());
    key[11..13].copy_from_slice(&dst_port.to_be_bytes());
    crc32fast::hash(&key)
}

/// Index of the chosen member in a group of `group_size` (ordered by egress port).
pub fn member_index(hash: u32, group_size: usize) -> usize {
    assert!(group_size > 0, "empty ECMP group");
    hash as usize % group_size
}

/// The hash a switch computes for a RoCEv2 flow.
pub fn flow_hash(f: &Flow, mode: HashMode) -> u32 {
    match mode {
        HashMode::QpAware => roce_qp_hash(f.src_ip, f.dst_ip, f.udp_src_port, f.dest_qp),
        HashMode::FiveTuple => five_tuple_hash(
            f.src_ip,
            f.dst_ip,
            IP_PROTO_UDP,
            f.udp_src_port,
            ROCEV2_UDP_PORT,
        ),
    }
}

/// The path ECMP gives a flow with this hash: at every switch, member
/// `hash % |group|` of the group toward the destination leaf.
pub fn ecmp_path(topo: &Topology, src: HostIdx, dst: HostIdx, hash: u32) -> Path {
    walk(topo, src, dst, |n| member_index(hash, n))
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
    hash: u32,
    down: F,
) -> Option<Path> {
    let dst_leaf = topo.hosts()[dst as usize].leaf;
    let mut s = topo.hosts()[src as usize].leaf;
    let mut p = Path::EMPTY;
    while s != dst_leaf {
        let group: smallvec::SmallVec<[EdgeId; 64]> =
            viable_next_hops(topo, s, dst_leaf, down).collect();
        if group.is_empty() {
            return None;
        }
        let e = group[member_index(hash, group.len())];
        p.push(e);
        let NodeRef::Switch(t) = topo.edge(e).to else {
            unreachable!("next hops lead to switches")
        };
        s = t;
    }
    let last = topo.host_down_edge(dst);
    if down(last) {
        return None;
    }
    p.push(last);
    Some(p)
}

/// ECMP with an independent uniform choice at every hop (an idealized
/// switch with per-switch hash seeds).
pub fn random_path(topo: &Topology, src: HostIdx, dst: HostIdx, rng: &mut Rng) -> Path {
    walk(topo, src, dst, |n| rng.below(n as u64) as usize)
}

fn walk(topo: &Topology, src: HostIdx, dst: HostIdx, mut pick: impl FnMut(usize) -> usize) -> Path {
    let dst_leaf = topo.hosts()[dst as usize].leaf;
    let mut s = topo.hosts()[src as usize].leaf;
    let mut p = Path::EMPTY;
    while s != dst_leaf {
        let group: smallvec::SmallVec<[EdgeId; 64]> = topo.next_hops(s, dst_leaf).collect();
        let e = group[pick(group.len())];
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

/// Every flow hashed as the switches would.
pub fn baseline(topo: &Topology, flows: &[Flow], mode: HashMode) -> EcmpOutcome {
    let paths = flows
        .iter()
        .map(|f| ecmp_path(topo, f.src, f.dst, flow_hash(f, mode)))
        .collect();
    let name = match mode {
        HashMode::QpAware => "ecmp-qp-aware",
        HashMode::FiveTuple => "ecmp-5-tuple",
    };
    outcome(topo, flows, paths, name.into())
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
    use crate::demand::QpAllocator;
    use crate::topology::generate::{leaf_spine, LeafSpine};

    #[test]
    fn crc32_is_ieee() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn hash_keys_are_laid_out_as_documented() {
        let (s, d) = (Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 2, 1));
        let key = [10, 0, 1, 1, 10, 0, 2, 1, 0xc0, 0x01, 0x12, 0x34, 0x56];
        assert_eq!(
            roce_qp_hash(s, d, 0xc001, 0xAB12_3456),
            crc32fast::hash(&key)
        );
        let key5 = [10, 0, 1, 1, 10, 0, 2, 1, 17, 0xc0, 0x01, 0x12, 0xb7];
        assert_eq!(
            five_tuple_hash(s, d, 17, 0xc001, 4791),
            crc32fast::hash(&key5)
        );
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
            let mut rng = Rng::new(spines as u64 * 100 + n as u64);
            let trials = 20_000;
            let mut clean = 0;
            for _ in 0..trials {
                let mut seen = vec![false; t.edge_count()];
                let mut ok = true;
                for h in 0..n {
                    let qp = rng.below(1 << 24) as u32;
                    let f = Flow::new(&t, h, n + h, qp, 0, 1000, 1_000_000_000);
                    let p = ecmp_path(&t, f.src, f.dst, flow_hash(&f, HashMode::QpAware));
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
        let b = baseline(&t, &flows, HashMode::QpAware);
        assert_eq!(b.paths.len(), 8);
        assert!(b.peak_utilisation >= 0.5 - 1e-9);
        // Completion is never earlier than the flows' own duration.
        assert!(b.completion_ns >= flows[0].end_ns());
    }
}
