//! Entropy steering: the RoCEv2 UDP source port that makes the fabric's own
//! ECMP hash carry a flow along its reserved path, so switches that cannot
//! run Foresight's program (fixed-function ASICs) still follow the plan.
//!
//! RoCEv2 leaves the UDP source port to the sender as entropy, and every
//! switch hashes it. Given how each switch hashes ([`SwitchHash`], the
//! fields of [`HashMode`], members in [`crate::Topology::next_hops`] order),
//! the walk [`crate::ecmp::ecmp_path_avoiding`] predicts is a function of
//! the port, and [`Steering::port_for`] searches the allowed range for a
//! port whose walk is the reserved path.
//!
//! **Why the search is cheap.** CRC is affine over GF(2): for inputs of one
//! length, `crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0)`. So the seed-0 hash of a
//! key whose port is `p` is the hash of the key with port 0, XOR a term
//! linear in `p` (two 256-entry tables, one per port byte), and a switch's
//! seed XORs a constant of its own ([`SwitchHash::select`] is then one XOR
//! and a rotation). A candidate port costs two table lookups plus one XOR,
//! rotation and remainder per hop, and the walk stops at the first hop that
//! goes astray; nothing hashes the 17 bytes again.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use crate::conventions::UDP_SRC_PORT_BASE;
use crate::ecmp::{viable_next_hops, HashKey, HashMode, SwitchHash};
use crate::flow::Flow;
use crate::paths::Path;
use crate::topology::{EdgeId, NodeRef, SwitchIdx, Topology};

/// The UDP source ports a sender may be told to use, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    /// First allowed port.
    pub first: u16,
    /// Last allowed port (`>= first`).
    pub last: u16,
}

impl PortRange {
    /// How many ports the range holds.
    pub fn len(&self) -> u32 {
        u32::from(self.last) - u32::from(self.first) + 1
    }

    /// Never true: a range holds at least its first port.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The ephemeral range RoCEv2 NICs draw source ports from (49152–65535).
impl Default for PortRange {
    fn default() -> PortRange {
        PortRange {
            first: UDP_SRC_PORT_BASE,
            last: u16::MAX,
        }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// `FIRST-LAST`, as on the command line (`49152-65535`).
impl FromStr for PortRange {
    type Err = String;

    fn from_str(s: &str) -> Result<PortRange, String> {
        let bad = |why: &str| {
            format!("UDP source port range '{s}': {why} (want FIRST-LAST, for example 49152-65535)")
        };
        let (a, b) = s.split_once('-').ok_or_else(|| bad("no '-'"))?;
        let port = |t: &str| {
            t.trim()
                .parse::<u16>()
                .map_err(|_| bad(&format!("'{t}' is not a port 0-65535")))
        };
        let (first, last) = (port(a)?, port(b)?);
        if first == 0 {
            return Err(bad("port 0 is not a source port"));
        }
        if last < first {
            return Err(bad("the last port is below the first"));
        }
        Ok(PortRange { first, last })
    }
}

/// Why no port steers a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPort {
    /// The path leaves the fabric's ECMP routes (a hop outside its switch's
    /// group toward the destination, or a link that is down): no hash can
    /// give it.
    OffRoutes {
        /// The first edge the routes cannot take.
        edge: EdgeId,
    },
    /// No port in the range hashes onto the path.
    Exhausted {
        /// Ports tried (the whole range).
        tried: u32,
    },
}

impl fmt::Display for NoPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoPort::OffRoutes { edge } => {
                write!(f, "the path's edge {edge} is not an ECMP next hop")
            }
            NoPort::Exhausted { tried } => write!(
                f,
                "none of the {tried} allowed source ports hashes onto the path"
            ),
        }
    }
}

/// A port that steers a flow, and how many candidates the search tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steered {
    /// The UDP source port to send on.
    pub port: u16,
    /// Candidates tried, this one included.
    pub tried: u32,
}

/// One hop of the walk as the search checks it: the switch's hash and the
/// member of its group the path takes.
#[derive(Clone, Copy, Debug)]
struct Choice {
    term: u32,
    offset: u32,
    group: u32,
    member: u32,
}

impl Choice {
    fn holds(&self, hash0: u32) -> bool {
        (hash0 ^ self.term).rotate_right(self.offset) % self.group == self.member
    }
}

/// Solves source ports for one fabric: how every switch hashes, and which
/// fields.
#[derive(Clone, Debug)]
pub struct Steering {
    /// Per switch ([`crate::topology::SwitchIdx`]): what its seed XORs into
    /// a seed-0 hash, and its offset.
    terms: Vec<(u32, u32)>,
    mode: HashMode,
    /// `port_term[0][b]`: the term of a port whose high byte is `b` (low
    /// byte 0); `port_term[1][b]` the low byte's.
    port_term: [[u32; 256]; 2],
}

impl Steering {
    /// For switches hashing as `hashes` (indexed by switch) over `mode`'s fields.
    pub fn new(hashes: &[SwitchHash], mode: HashMode) -> Steering {
        let zero = HashKey([0; 13]);
        let base = zero.hash(0);
        let terms = hashes
            .iter()
            .map(|h| (zero.hash(h.seed) ^ base, h.offset))
            .collect();
        let at = match mode {
            HashMode::QpAware => 8,
            HashMode::FiveTuple => 9,
        };
        let mut port_term = [[0u32; 256]; 2];
        for (byte, table) in port_term.iter_mut().enumerate() {
            for (b, slot) in table.iter_mut().enumerate() {
                let mut key = [0u8; 13];
                key[at + byte] = b as u8;
                *slot = HashKey(key).hash(0) ^ base;
            }
        }
        Steering {
            terms,
            mode,
            port_term,
        }
    }

    /// The fields the switches hash.
    pub fn mode(&self) -> HashMode {
        self.mode
    }

    /// The seed-0 hash of `flow`'s key with source port `port`.
    fn hash0(&self, zero_port: u32, port: u16) -> u32 {
        let [hi, lo] = port.to_be_bytes();
        zero_port ^ self.port_term[0][hi as usize] ^ self.port_term[1][lo as usize]
    }

    /// The first port of `range` whose ECMP walk is `path`, with the edges
    /// `down` marks out of every group (as the switches' routes are).
    /// Ports are tried from the flow's own port upward, wrapping, so a flow
    /// whose hash already takes the path keeps its port.
    pub fn port_for<F: Fn(EdgeId) -> bool + Copy>(
        &self,
        topo: &Topology,
        flow: &Flow,
        path: &Path,
        range: PortRange,
        down: F,
    ) -> Result<Steered, NoPort> {
        self.port_in(&mut Groups::new(topo, down), flow, path, range)
    }

    /// [`Steering::port_for`] over groups kept between calls: for many
    /// flows on one link state.
    pub fn port_in<F: Fn(EdgeId) -> bool + Copy>(
        &self,
        groups: &mut Groups<'_, F>,
        flow: &Flow,
        path: &Path,
        range: PortRange,
    ) -> Result<Steered, NoPort> {
        let choices = self.choices(groups, flow, path)?;
        let key = HashKey::of_packet(
            flow.src_ip,
            flow.dst_ip,
            crate::conventions::IP_PROTO_UDP,
            0,
            crate::conventions::ROCEV2_UDP_PORT,
            flow.dest_qp,
            self.mode,
        );
        let zero_port = key.hash(0);
        let n = range.len();
        let start = if (range.first..=range.last).contains(&flow.udp_src_port) {
            u32::from(flow.udp_src_port - range.first)
        } else {
            0
        };
        for i in 0..n {
            let port = range.first + ((start + i) % n) as u16;
            let h = self.hash0(zero_port, port);
            if choices.iter().all(|c| c.holds(h)) {
                return Ok(Steered { port, tried: i + 1 });
            }
        }
        Err(NoPort::Exhausted { tried: n })
    }

    /// The member each switch on `path` must pick, from the source leaf to
    /// the destination leaf.
    fn choices<F: Fn(EdgeId) -> bool + Copy>(
        &self,
        groups: &mut Groups<'_, F>,
        flow: &Flow,
        path: &Path,
    ) -> Result<Vec<Choice>, NoPort> {
        let (topo, down) = (groups.topo, groups.down);
        let dst_leaf = topo.hosts()[flow.dst as usize].leaf;
        let mut s = topo.hosts()[flow.src as usize].leaf;
        let edges = path.edges();
        let mut choices = Vec::with_capacity(edges.len());
        for &e in edges {
            if s == dst_leaf {
                if e != topo.host_down_edge(flow.dst) || down(e) {
                    return Err(NoPort::OffRoutes { edge: e });
                }
                return Ok(choices);
            }
            let group = groups.toward(s, dst_leaf);
            let member = group
                .iter()
                .position(|&g| g == e)
                .ok_or(NoPort::OffRoutes { edge: e })?;
            let (term, offset) = self.terms[s as usize];
            // A group of one decides nothing: no port is needed for it.
            if group.len() > 1 {
                choices.push(Choice {
                    term,
                    offset,
                    group: group.len() as u32,
                    member: member as u32,
                });
            }
            let NodeRef::Switch(t) = topo.edge(e).to else {
                return Err(NoPort::OffRoutes { edge: e });
            };
            s = t;
        }
        // The path ended before reaching the destination host.
        Err(NoPort::OffRoutes {
            edge: edges.last().copied().unwrap_or_default(),
        })
    }
}

/// The ECMP groups switches hash over toward each destination leaf, with
/// the edges `down` marks out of them ([`viable_next_hops`]), worked out
/// once per (switch, leaf) and kept: a search over a million flows would
/// otherwise rebuild them for every flow.
pub struct Groups<'t, F> {
    topo: &'t Topology,
    down: F,
    kept: HashMap<(SwitchIdx, SwitchIdx), Vec<EdgeId>>,
}

impl<'t, F: Fn(EdgeId) -> bool + Copy> Groups<'t, F> {
    /// For `topo` with the edges `down` marks out of service.
    pub fn new(topo: &'t Topology, down: F) -> Groups<'t, F> {
        Groups {
            topo,
            down,
            kept: HashMap::new(),
        }
    }

    /// The members of switch `s`'s group toward `leaf`, in member order.
    fn toward(&mut self, s: SwitchIdx, leaf: SwitchIdx) -> &[EdgeId] {
        let (topo, down) = (self.topo, self.down);
        self.kept
            .entry((s, leaf))
            .or_insert_with(|| viable_next_hops(topo, s, leaf, down).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecmp::{ecmp_path_avoiding, SeedPolicy};
    use crate::paths::all_paths;
    use crate::topology::generate::{multi_pod, MultiPod};

    fn fabric() -> Topology {
        Topology::from_spec(
            multi_pod(&MultiPod {
                pods: 2,
                leaves_per_pod: 4,
                spines_per_pod: 4,
                superspines_per_plane: 4,
                hosts_per_leaf: 2,
                ..MultiPod::default()
            })
            .unwrap(),
        )
        .unwrap()
    }

    /// Every path between two hosts in different pods is steerable, and the
    /// port found walks exactly that path under the planner's ECMP model,
    /// in both hash modes and with a link down.
    #[test]
    fn the_port_found_walks_the_path() {
        let topo = fabric();
        let hashes = SeedPolicy::PerSwitch.seeds(&topo);
        let last = topo.hosts().len() as u32 - 1;
        let flow = Flow::new(&topo, 0, last, 0x123, 0, 1 << 20, 100_000_000_000);
        let paths = all_paths(&topo, 0, last, 1000);
        assert_eq!(paths.len(), 16, "4 spines x 4 super-spines");
        for mode in [HashMode::FiveTuple, HashMode::QpAware] {
            let steering = Steering::new(&hashes, mode);
            for p in &paths {
                assert_port_walks(&steering, &topo, &flow, p, &hashes, |_| false);
            }
        }
        // With the first path's first uplink down, that path is off the
        // routes and every other path still steers around it.
        let cut = paths[0].edges()[0];
        let down = |e: EdgeId| e == cut;
        let steering = Steering::new(&hashes, HashMode::FiveTuple);
        assert_eq!(
            steering.port_for(&topo, &flow, &paths[0], PortRange::default(), down),
            Err(NoPort::OffRoutes { edge: cut })
        );
        for p in paths.iter().filter(|p| !p.edges().contains(&cut)) {
            assert_port_walks(&steering, &topo, &flow, p, &hashes, down);
        }
    }

    /// The port found for `flow` on `path` walks exactly `path` under the
    /// planner's ECMP model with the edges `down` marks out.
    fn assert_port_walks(
        steering: &Steering,
        topo: &Topology,
        flow: &Flow,
        path: &Path,
        hashes: &[SwitchHash],
        down: impl Fn(EdgeId) -> bool + Copy,
    ) {
        let s = steering
            .port_for(topo, flow, path, PortRange::default(), down)
            .unwrap();
        let mut f = flow.clone();
        f.udp_src_port = s.port;
        let key = HashKey::of_flow(&f, steering.mode());
        let walked = ecmp_path_avoiding(topo, f.src, f.dst, &key, hashes, down);
        assert_eq!(
            walked.as_ref(),
            Some(path),
            "{:?} port {}",
            steering.mode(),
            s.port
        );
    }

    /// A flow whose own port already hashes onto the path keeps it; a range
    /// of one wrong port is exhausted.
    #[test]
    fn own_port_first_and_exhaustion() {
        let topo = fabric();
        let hashes = SeedPolicy::PerSwitch.seeds(&topo);
        let last = topo.hosts().len() as u32 - 1;
        let flow = Flow::new(&topo, 0, last, 0x77, 0, 1 << 20, 100_000_000_000);
        let mode = HashMode::FiveTuple;
        let own = ecmp_path_avoiding(
            &topo,
            0,
            last,
            &HashKey::of_flow(&flow, mode),
            &hashes,
            |_| false,
        )
        .unwrap();
        let steering = Steering::new(&hashes, mode);
        let s = steering
            .port_for(&topo, &flow, &own, PortRange::default(), |_| false)
            .unwrap();
        assert_eq!((s.port, s.tried), (flow.udp_src_port, 1));
        let other = all_paths(&topo, 0, last, 1000)
            .into_iter()
            .find(|p| *p != own)
            .unwrap();
        let one = PortRange {
            first: flow.udp_src_port,
            last: flow.udp_src_port,
        };
        assert_eq!(
            steering.port_for(&topo, &flow, &other, one, |_| false),
            Err(NoPort::Exhausted { tried: 1 })
        );
    }

    #[test]
    fn port_ranges_parse_or_say_why() {
        assert_eq!(
            "1000-2000".parse::<PortRange>(),
            Ok(PortRange {
                first: 1000,
                last: 2000
            })
        );
        assert_eq!(PortRange::default().len(), 16384);
        for (bad, why) in [
            ("1000", "no '-'"),
            ("0-10", "port 0"),
            ("20-10", "below the first"),
            ("1-70000", "'70000' is not a port"),
        ] {
            let e = bad.parse::<PortRange>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
