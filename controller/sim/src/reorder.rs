//! What reordering costs multipath traffic, for a fluid simulator that
//! cannot see packets.
//!
//! **Where reordering comes from.** Two packets of one flow that take
//! different paths arrive out of order when the later one's path is
//! faster by more than the time between their departures. On a Clos all
//! equal-cost paths have the same length, so the difference is queueing.
//! Each fabric hop (a switch egress port; the NIC links before the paths
//! diverge and after they meet are shared FIFOs and reorder nothing) adds
//! an M/D/1 waiting time at the link's utilisation ρ in the fluid
//! solution: mean `ρ/(2(1−ρ))` and variance `mean² + ρ/(3(1−ρ))` packet
//! times (Pollaczek–Khinchine with a deterministic service time). A fluid
//! bottleneck has ρ = 1; there DCQCN keeps a standing queue near its ECN
//! threshold, not an infinite one, so ρ is capped where the mean wait is
//! [`ReorderModel::max_queue_pkts`].
//!
//! A path is a random draw per hop (spraying: the fluid shares are the
//! probabilities), so a path's delay has variance Σ over hops of the
//! mixture variance `Σ c (v + m²) − (Σ c m)²` (hops independent). Two
//! packets on independent draws differ by a variable of mean 0 and twice
//! that variance, taken as normal: the later of two packets sent `s`
//! apart arrives first with probability `Q(s / σ)`.
//!
//! **What it costs.**
//! * Go-back-N NIC (RoCE RC without out-of-order placement): the receiver
//!   NAKs the first out-of-order packet and drops what follows; the
//!   sender rewinds and resends what it sent in the round trip,
//!   `W = 1 + rate × RTT / MTU` packets. With a probability `p` per packet,
//!   goodput is `1 / (1 + p W)` of what the flow puts on the wire: the
//!   links carry the resent packets (the max-min share is the wire rate).
//! * With [`ReorderModel::cnp_on_ooo`] (NICs that also send a CNP on an
//!   out-of-order packet), each CNP interval with an out-of-order arrival,
//!   probability `q = 1 − (1−p)^n` for `n` packets an interval, halves the
//!   sender's rate (DCQCN's cut at α = 1), and each interval without one
//!   halves the distance back to its share (fast recovery): the mean rate
//!   is `1 − q` of the share, not less than DCQCN's floor. The unused rest
//!   of the share is not given to other flows (a fluid limit).
//! * Out-of-order-tolerant NIC (placement by PSN with selective
//!   acknowledgement: IRN, Spectrum-X SuperNIC, Ultra Ethernet):
//!   reordering costs nothing here. Their extra header bytes and selective
//!   ACKs are not charged (under 1 % of a 4 KiB packet).
//!
//! **Flowlets** (LetFlow): a switch re-draws a flow's member after a gap
//! longer than the flowlet timeout. A RoCE sender paced by its NIC has no
//! such gap inside a message, so a flowlet is a message: each flow the
//! simulator starts draws a fresh random path (a random member per hop)
//! and keeps it. A new flowlet overtakes the old one only when the delay
//! difference of two random paths exceeds the gap, which is at least the
//! timeout: probability `Q(timeout / σ)` per flow, costing one rewind of
//! `W` packets under go-back-N (a CNP then is one cut, not charged).
//! Gaps from rate changes inside a message are not modelled.
//!
//! **What the fluid model cannot see:** bursts (a NIC that sends several
//! packets of one QP back to back: [`ReorderModel::nic_burst`] packets at
//! the NIC's line rate, then a gap), queue correlation between hops and
//! between the two packets, the timing of real NAKs (a rewind stops the
//! flow for a round trip, taken here as lost wire share), drops, and
//! differences in cable length. Utilisations are those of the fluid
//! solution at the moment a flow's rate is set.

use planner::topology::{EdgeId, NodeRef, Topology};

use crate::engine::{Factors, Links};
use crate::parts::Use;

/// How a receiving NIC takes out-of-order packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Nic {
    /// Go-back-N (RoCE RC): NAK and rewind.
    Gbn,
    /// Out-of-order placement with selective acknowledgement.
    Ooo,
}

impl Nic {
    /// `gbn` or `ooo`.
    pub fn name(self) -> &'static str {
        match self {
            Nic::Gbn => "gbn",
            Nic::Ooo => "ooo",
        }
    }
}

/// The reordering model's parameters (CLI flags of `foresight sim`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReorderModel {
    /// A packet in the simulator's bits (`--mtu` × 8; `--mtu` 4096 bytes is
    /// RoCE's largest MTU). The lab scenario counts a packet as 1e9 bits.
    pub packet_bits: f64,
    /// Base round-trip time, ns (`--rtt-us`, 8 µs: NIC to NIC across a
    /// three-tier Clos, a few hops of switch latency each way).
    pub rtt_ns: f64,
    /// Mean wait at a saturated port, packets (`--max-queue-pkts`, 25:
    /// 100 KiB at 4 KiB, around DCQCN's ECN marking threshold).
    pub max_queue_pkts: f64,
    /// Packets a NIC sends back to back from one QP (`--nic-burst`, 1:
    /// packets of concurrent QPs interleave evenly, the fluid view).
    pub nic_burst: u32,
    /// Flowlet timeout, ns (`--flowlet-timeout-us`, 50 µs: several RTTs,
    /// LetFlow's lower range).
    pub flowlet_timeout_ns: f64,
    /// NICs send a CNP on an out-of-order packet (`--cnp-on-ooo`).
    pub cnp_on_ooo: bool,
    /// Least time between two CNPs of a QP, ns (`--cnp-interval-us`, 50 µs
    /// as in the DCQCN paper).
    pub cnp_interval_ns: f64,
    /// DCQCN's lowest rate, fraction of the share (`--cnp-floor`, 0.05 as
    /// rocegen's default `rmin_frac`).
    pub cnp_floor: f64,
    /// Seed of the flowlet path draws (`--seed`).
    pub seed: u64,
}

impl Default for ReorderModel {
    fn default() -> ReorderModel {
        ReorderModel {
            packet_bits: 4096.0 * 8.0,
            rtt_ns: 8_000.0,
            max_queue_pkts: 25.0,
            nic_burst: 1,
            flowlet_timeout_ns: 50_000.0,
            cnp_on_ooo: false,
            cnp_interval_ns: 50_000.0,
            cnp_floor: 0.05,
            seed: 0,
        }
    }
}

/// M/D/1 waiting time at utilisation `rho`, in service (packet) times:
/// (mean, variance). `rho` is capped where the mean reaches `max_queue`.
pub fn md1_wait(rho: f64, max_queue: f64) -> (f64, f64) {
    let cap = 2.0 * max_queue / (1.0 + 2.0 * max_queue);
    let rho = if rho.is_nan() {
        0.0
    } else {
        rho.clamp(0.0, cap)
    };
    if rho <= 0.0 {
        return (0.0, 0.0);
    }
    let mean = rho / (2.0 * (1.0 - rho));
    (mean, mean * mean + rho / (3.0 * (1.0 - rho)))
}

/// Delay variance of a path drawn at random hop by hop, ns². Each hop is
/// given as its links' (probability, mean wait ns, variance ns²).
pub fn path_variance<'a, H>(hops: H) -> f64
where
    H: IntoIterator<Item = &'a [(f64, f64, f64)]>,
{
    hops.into_iter()
        .map(|hop| {
            let m: f64 = hop.iter().map(|&(c, m, _)| c * m).sum();
            let s: f64 = hop.iter().map(|&(c, m, v)| c * (v + m * m)).sum();
            (s - m * m).max(0.0)
        })
        .sum()
}

/// The random paths between two leaves, hop by hop: per hop, its links
/// and the probability a packet takes each (the sprayed fluid shares).
#[derive(Clone, Debug, Default)]
pub struct RandomPaths {
    hops: Vec<Vec<Use>>,
}

/// A switch-to-switch link's hop on a Clos: (tier it leaves, tier it enters).
fn hop_key(topo: &Topology, e: EdgeId) -> (u8, u8) {
    let l = topo.edge(e);
    let tier = |n: NodeRef| match n {
        NodeRef::Switch(s) => topo.switches()[s as usize].role.tier(),
        NodeRef::Host(_) => 0,
    };
    (tier(l.from), tier(l.to))
}

impl RandomPaths {
    /// From a sprayed route's uses: its switch-to-switch links, grouped by
    /// hop (the tiers a link joins; on a Clos that is the hop). The NIC
    /// links are shared by all paths and left out.
    pub fn of_sprayed(topo: &Topology, uses: &[Use]) -> RandomPaths {
        let mut fabric: Vec<Use> = uses
            .iter()
            .copied()
            .filter(|u| {
                let l = topo.edge(u.0);
                matches!((l.from, l.to), (NodeRef::Switch(_), NodeRef::Switch(_)))
            })
            .collect();
        fabric.sort_by_key(|u| (hop_key(topo, u.0), u.0));
        RandomPaths {
            hops: fabric
                .chunk_by(|a, b| hop_key(topo, a.0) == hop_key(topo, b.0))
                .map(<[Use]>::to_vec)
                .collect(),
        }
    }

    /// Hops between the paths' divergence and their meeting.
    pub fn hops(&self) -> usize {
        self.hops.len()
    }

    /// Delay variance of one random path at the links' loads, ns² (links
    /// of capacity 0, down, are skipped).
    pub fn variance(&self, model: &ReorderModel, links: &Links<'_>) -> f64 {
        let mut moments: Vec<Vec<(f64, f64, f64)>> = Vec::with_capacity(self.hops.len());
        for h in &self.hops {
            let mut hop = Vec::with_capacity(h.len());
            for &(e, c) in h {
                let cap = links.cap[e as usize];
                if cap > 0.0 {
                    let (m, v) = md1_wait(links.load[e as usize] / cap, model.max_queue_pkts);
                    let t = model.packet_bits / cap;
                    hop.push((c, m * t, v * t * t));
                }
            }
            moments.push(hop);
        }
        path_variance(moments.iter().map(Vec::as_slice))
    }
}

/// Probability that of two packets sent `spacing_ns` apart on
/// independently drawn paths of delay variance `var_ns2` each, the later
/// one arrives first.
pub fn overtake(spacing_ns: f64, var_ns2: f64) -> f64 {
    // NaN or no spread: nothing overtakes.
    if var_ns2.is_nan() || var_ns2 <= 0.0 {
        return 0.0;
    }
    normal_tail(spacing_ns / (2.0 * var_ns2).sqrt())
}

/// `P(Z > x)` for a standard normal `Z`.
pub fn normal_tail(x: f64) -> f64 {
    0.5 * erfc(x / std::f64::consts::SQRT_2)
}

/// Complementary error function: a Chebyshev fit with fractional error
/// below 1.2e-7 everywhere (Press et al., Numerical Recipes, §6.2).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = [
        -1.265_512_23,
        1.000_023_68,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_203_98,
        1.488_515_87,
        -0.822_152_23,
        0.170_872_77,
    ]
    .iter()
    .rev()
    .fold(0.0, |acc, &c| acc * t + c);
    let r = t * (-z * z + poly).exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

impl ReorderModel {
    /// Refuses parameters the model has no meaning for, naming the flag.
    pub fn check(&self) -> anyhow::Result<()> {
        let finite_at_least = |v: f64, min: f64| v.is_finite() && v >= min;
        if !(self.packet_bits.is_finite() && self.packet_bits > 0.0) {
            anyhow::bail!("--mtu must be at least 1 byte");
        }
        if !finite_at_least(self.rtt_ns, 0.0) {
            anyhow::bail!("--rtt-us {}: want a time ≥ 0", self.rtt_ns / 1e3);
        }
        if !finite_at_least(self.max_queue_pkts, 0.0) {
            anyhow::bail!("--max-queue-pkts {}: want ≥ 0 packets", self.max_queue_pkts);
        }
        if self.nic_burst == 0 {
            anyhow::bail!("--nic-burst must be at least 1 packet");
        }
        if !(finite_at_least(self.flowlet_timeout_ns, 0.0) && self.flowlet_timeout_ns > 0.0) {
            anyhow::bail!(
                "--flowlet-timeout-us {}: want a time > 0",
                self.flowlet_timeout_ns / 1e3
            );
        }
        if !(finite_at_least(self.cnp_interval_ns, 0.0) && self.cnp_interval_ns > 0.0) {
            anyhow::bail!(
                "--cnp-interval-us {}: want a time > 0",
                self.cnp_interval_ns / 1e3
            );
        }
        if !(self.cnp_floor > 0.0 && self.cnp_floor <= 1.0) {
            anyhow::bail!("--cnp-floor {}: want a fraction in (0, 1]", self.cnp_floor);
        }
        Ok(())
    }

    /// Packets a flow at `rate` (bits/ns) has in flight over a round trip,
    /// plus the one that went out of order: what a go-back-N rewind resends.
    pub fn rewind_packets(&self, rate: f64) -> f64 {
        1.0 + rate * self.rtt_ns / self.packet_bits
    }

    /// Probability that a packet of a sprayed flow at `rate` (its NIC at
    /// `nic_rate`, bits/ns) arrives before its predecessor, paths of delay
    /// variance `var_ns2`. Within a NIC burst packets leave one NIC packet
    /// time apart; between bursts the rest of the burst's share of time.
    pub fn spray_ooo(&self, rate: f64, nic_rate: f64, var_ns2: f64) -> f64 {
        if rate.is_nan() || rate <= 0.0 {
            return 0.0;
        }
        let b = f64::from(self.nic_burst.max(1));
        let within = self.packet_bits / nic_rate.max(rate);
        let between = b * self.packet_bits / rate - (b - 1.0) * within;
        ((b - 1.0) * overtake(within, var_ns2) + overtake(between, var_ns2)) / b
    }

    /// Goodput and wire use of a go-back-N flow at share `rate` whose
    /// packets arrive out of order with probability `p` each.
    pub fn gbn(&self, rate: f64, p: f64) -> Factors {
        if p.is_nan() || p <= 0.0 {
            return Factors::WHOLE;
        }
        let wire = if self.cnp_on_ooo {
            let n = rate * self.cnp_interval_ns / self.packet_bits;
            // 1 − q = (1 − p)^n.
            let calm = (n * (-p).ln_1p()).exp();
            calm.max(self.cnp_floor).min(1.0)
        } else {
            1.0
        };
        let w = self.rewind_packets(rate * wire);
        Factors {
            goodput: wire / (1.0 + p * w),
            wire,
        }
    }

    /// Goodput of a go-back-N flow of `bits` at `rate` whose one flowlet
    /// boundary overtakes the previous flowlet with probability `p`.
    pub fn flowlet_gbn(&self, rate: f64, bits: f64, p: f64) -> Factors {
        if !(p > 0.0 && bits.is_finite() && bits > 0.0) {
            return Factors::WHOLE;
        }
        let extra = p * self.rewind_packets(rate) * self.packet_bits;
        Factors {
            goodput: bits / (bits + extra),
            wire: 1.0,
        }
    }

    /// The probability that a new flowlet overtakes the old one.
    pub fn flowlet_overtake(&self, var_ns2: f64) -> f64 {
        overtake(self.flowlet_timeout_ns, var_ns2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn normal_tail_known_values() {
        assert!(close(normal_tail(0.0), 0.5, 1e-7));
        assert!(close(normal_tail(1.0), 0.158_655_25, 1e-7));
        assert!(close(normal_tail(-1.0), 0.841_344_75, 1e-7));
        assert!(close(normal_tail(3.0), 0.001_349_898, 1e-9));
        assert!(normal_tail(40.0) < 1e-300);
    }

    #[test]
    fn md1_wait_moments() {
        assert_eq!(md1_wait(0.0, 25.0), (0.0, 0.0));
        // ρ = 0.5: mean 0.5, variance 0.25 + 1/3.
        let (m, v) = md1_wait(0.5, 25.0);
        assert!(close(m, 0.5, 1e-12) && close(v, 0.25 + 1.0 / 3.0, 1e-12));
        // A saturated port waits the cap, not forever.
        let (m, v) = md1_wait(1.0, 25.0);
        assert!(close(m, 25.0, 1e-9) && v.is_finite() && v > 625.0);
        assert!(md1_wait(0.9, 25.0).1 > md1_wait(0.5, 25.0).1);
    }

    #[test]
    fn equal_delays_and_no_jitter_reorder_nothing() {
        let m = ReorderModel::default();
        // Idle links: no variance at all.
        let idle = [(0.5, 0.0, 0.0), (0.5, 0.0, 0.0)];
        let var = path_variance([&idle[..], &idle[..]]);
        assert_eq!(var, 0.0);
        assert_eq!(m.spray_ooo(400.0, 400.0, var), 0.0);
        assert_eq!(m.gbn(400.0, 0.0), Factors::WHOLE);
        // Different but fixed delays per link are path asymmetry: it counts.
        let skew = [(0.5, 0.0, 0.0), (0.5, 100.0, 0.0)];
        assert!(close(path_variance([&skew[..]]), 2500.0, 1e-9));
    }

    #[test]
    fn spread_far_beyond_spacing_collapses_go_back_n() {
        let m = ReorderModel::default();
        // σ of 1 ms against a packet every 82 ns: half the packets overtake.
        let p = m.spray_ooo(400.0, 400.0, 1e12);
        assert!(close(p, 0.5, 1e-4), "{p}");
        let f = m.gbn(400.0, p);
        // W = 1 + 400 × 8000 / 32768 ≈ 98.7: goodput ≈ 2 %.
        assert!(f.goodput < 0.025 && f.goodput > 0.015, "{f:?}");
        assert_eq!(f.wire, 1.0);
        // Spacing far beyond the spread: nothing overtakes.
        assert!(m.spray_ooo(400.0, 400.0, 1.0) < 1e-100);
    }

    #[test]
    fn probability_grows_with_rate_and_spread() {
        let m = ReorderModel::default();
        let var = 80.0f64 * 80.0;
        let slow = m.spray_ooo(40.0, 400.0, var);
        let fast = m.spray_ooo(400.0, 400.0, var);
        assert!(slow < fast, "{slow} {fast}");
        assert!(fast < m.spray_ooo(400.0, 400.0, 4.0 * var));
        // Bursts put packets one NIC packet time apart even for slow flows.
        let burst = ReorderModel { nic_burst: 16, ..m };
        assert!(burst.spray_ooo(40.0, 400.0, var) > 10.0 * slow);
        assert!(m.gbn(400.0, 0.1).goodput < m.gbn(400.0, 0.01).goodput);
    }

    #[test]
    fn cnps_cut_the_wire_rate_down_to_the_floor() {
        let m = ReorderModel {
            cnp_on_ooo: true,
            ..ReorderModel::default()
        };
        let light = m.gbn(400.0, 1e-7);
        assert!(light.wire < 1.0 && light.wire > 0.9, "{light:?}");
        let heavy = m.gbn(400.0, 0.2);
        assert_eq!(heavy.wire, m.cnp_floor);
        assert!(heavy.goodput < ReorderModel::default().gbn(400.0, 0.2).goodput);
    }

    /// Sprayed routes on a three-tier Clos: four fabric hops between pods,
    /// two inside one, none inside a leaf; at one utilisation everywhere
    /// the variance is hops × the M/D/1 variance (no path asymmetry).
    #[test]
    fn random_paths_of_a_clos() {
        use planner::ecmp::SeedPolicy;
        use planner::topology::generate::{multi_pod, MultiPod};
        let t = Topology::from_spec(
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
        .unwrap();
        let mut f = crate::routing::Fabric::new(&t, SeedPolicy::PerSwitch);
        let mut uses = Vec::new();
        let hosts = t.hosts();
        let leaf = |h: u32| hosts[h as usize].leaf;
        let pod = |h: u32| t.switches()[leaf(h) as usize].pod;
        let a = 0u32;
        let same_leaf = (1..hosts.len() as u32)
            .find(|&h| leaf(h) == leaf(a))
            .unwrap();
        let same_pod = (1..hosts.len() as u32)
            .find(|&h| leaf(h) != leaf(a) && pod(h) == pod(a))
            .unwrap();
        let other_pod = (1..hosts.len() as u32).find(|&h| pod(h) != pod(a)).unwrap();
        let mut paths = |b: u32| {
            assert!(f.sprayed(a, b, &mut uses));
            RandomPaths::of_sprayed(&t, &uses)
        };
        let (p0, p2, p4) = (paths(same_leaf), paths(same_pod), paths(other_pod));
        assert_eq!((p0.hops(), p2.hops(), p4.hops()), (0, 2, 4));
        let m = ReorderModel::default();
        let cap = vec![400.0; t.edge_count()];
        let load = vec![200.0; t.edge_count()];
        let links = Links {
            load: &load,
            cap: &cap,
            epoch: 0,
        };
        let d = m.packet_bits / 400.0;
        let v = md1_wait(0.5, m.max_queue_pkts).1 * d * d;
        assert_eq!(p0.variance(&m, &links), 0.0);
        assert!(close(p2.variance(&m, &links), 2.0 * v, 1e-6 * v));
        assert!(close(p4.variance(&m, &links), 4.0 * v, 1e-6 * v));
    }

    #[test]
    fn bad_parameters_name_their_flag() {
        assert!(ReorderModel::default().check().is_ok());
        let bad = |m: ReorderModel, flag: &str| {
            let e = m.check().unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        };
        let d = ReorderModel::default();
        bad(
            ReorderModel {
                packet_bits: 0.0,
                ..d
            },
            "--mtu",
        );
        bad(ReorderModel { rtt_ns: -1.0, ..d }, "--rtt-us");
        bad(
            ReorderModel {
                max_queue_pkts: f64::NAN,
                ..d
            },
            "--max-queue-pkts",
        );
        bad(ReorderModel { nic_burst: 0, ..d }, "--nic-burst");
        bad(
            ReorderModel {
                flowlet_timeout_ns: 0.0,
                ..d
            },
            "--flowlet-timeout-us",
        );
        bad(
            ReorderModel {
                cnp_interval_ns: f64::INFINITY,
                ..d
            },
            "--cnp-interval-us",
        );
        bad(
            ReorderModel {
                cnp_floor: 0.0,
                ..d
            },
            "--cnp-floor",
        );
    }

    #[test]
    fn flowlets_pay_once_per_message() {
        let m = ReorderModel::default();
        // A spread well below the timeout: no overtaking.
        assert!(m.flowlet_overtake(1e6) < 1e-100);
        // A spread far beyond it: half the boundaries rewind W packets.
        let p = m.flowlet_overtake(1e16);
        assert!(close(p, 0.5, 1e-3));
        let bits = 1e9;
        let f = m.flowlet_gbn(400.0, bits, p);
        let extra = p * m.rewind_packets(400.0) * m.packet_bits;
        assert!(close(f.goodput, bits / (bits + extra), 1e-12));
        assert_eq!(m.flowlet_gbn(400.0, f64::INFINITY, p), Factors::WHOLE);
    }
}
