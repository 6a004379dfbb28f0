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
//! The switches may be Foresight's ([`Steering::new`]) or any that hash
//! with a CRC as a [`FabricHash`] describes them ([`Steering::for_fabric`]:
//! fixed-function ASICs, each with its own function, seed, fields and
//! offset, the ingress port included).
//!
//! **Why the search is cheap.** CRC is affine over GF(2): for inputs of one
//! length, `crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0)`, whatever the initial
//! register, seed or final XOR. So a switch's hash of the flow on port `p`
//! is the flow's hash under the switch's input layout with seed and ports
//! 0 (one CRC per flow and layout), XOR terms for the switch's seed, the
//! ingress port and `p` (two 256-entry tables per port, per layout). A candidate port costs two table lookups plus one XOR,
//! rotation and remainder per hop, and the walk stops at the first hop that
//! goes astray; nothing hashes the packet again.

use std::collections::HashMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;

use crate::conventions::UDP_SRC_PORT_BASE;
use crate::ecmp::{viable_next_hops, HashMode, SwitchHash};
use crate::flow::Flow;
use crate::hash_profile::{FabricHash, Field, HashProfile, Window};
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
    /// No port in the range hashes onto the path (with any of the
    /// destination QPs the client allowed).
    Exhausted {
        /// (port, QP) candidates tried: all of them.
        tried: u32,
        /// Destination QPs tried (1 when the QP was given).
        qps: u32,
    },
}

impl fmt::Display for NoPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoPort::OffRoutes { edge } => {
                write!(f, "the path's edge {edge} is not an ECMP next hop")
            }
            NoPort::Exhausted { tried, qps: 1 } => write!(
                f,
                "none of the {tried} allowed source ports hashes onto the path"
            ),
            NoPort::Exhausted { tried, qps } => write!(
                f,
                "none of the {tried} allowed (source port, destination QP) pairs over \
                 {qps} QPs hashes onto the path"
            ),
        }
    }
}

/// A port (and destination QP) that steers a flow, and how many
/// candidates the search tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steered {
    /// The UDP source port to send on.
    pub port: u16,
    /// The destination QP to send to: the flow's own unless the search
    /// could choose ([`Steering::port_and_qp_in`]).
    pub dest_qp: u32,
    /// Candidates tried, this one included.
    pub tried: u32,
}

/// One hop of the walk as the search checks it: the hash this switch
/// computes for the flow with source port 0, the layout whose port terms
/// apply, and the member of its group the path takes.
#[derive(Clone, Copy, Debug)]
struct Choice {
    hash0: u32,
    layout: usize,
    window: Window,
    group: u32,
    member: u32,
}

/// One input layout: a CRC, how the seed enters and the fields. A CRC over
/// a fixed-length input is affine in the seed, the fields, the ingress port
/// and the source port separately, so a switch's hash of a flow is the
/// layout's hash of the flow (seed 0, both ports 0) XOR a term for its
/// seed, one for the ingress port and one for the source port: one CRC per
/// flow and layout, then table lookups per hop and per candidate.
#[derive(Clone, Debug)]
struct Layout {
    /// The layout with seed 0.
    proto: HashProfile,
    /// `proto`'s hash of the all-zero flow.
    zero: u32,
    /// What a source port XORs in: `[0][b]` for a high byte `b`, `[1][b]`
    /// for the low byte (zero where the layout has no source port).
    port: Box<[[u32; 256]; 2]>,
    /// The same for the ingress port.
    in_port: Box<[[u32; 256]; 2]>,
}

/// A flow of all-zero fields (the constants of RoCEv2 stay).
fn zero_flow() -> Flow {
    Flow {
        src: 0,
        dst: 0,
        src_ip: std::net::Ipv4Addr::UNSPECIFIED,
        dst_ip: std::net::Ipv4Addr::UNSPECIFIED,
        udp_src_port: 0,
        dest_qp: 0,
        start_ns: 0,
        bytes: 0,
        rate_bps: 0,
        duration_ns: 0,
    }
}

fn split(v: u16) -> [usize; 2] {
    let [hi, lo] = v.to_be_bytes();
    [hi as usize, lo as usize]
}

impl Layout {
    fn new(p: &HashProfile) -> Layout {
        let proto = HashProfile {
            seed: 0,
            ..p.clone()
        };
        let zero = proto.hash(&zero_flow(), 0);
        let mut port = Box::new([[0u32; 256]; 2]);
        let mut in_port = Box::new([[0u32; 256]; 2]);
        for byte in 0..2 {
            for b in 0..256u16 {
                let v = b << (8 * (1 - byte));
                let f = Flow {
                    udp_src_port: v,
                    ..zero_flow()
                };
                port[byte][b as usize] = proto.hash(&f, 0) ^ zero;
                in_port[byte][b as usize] = proto.hash(&zero_flow(), v) ^ zero;
            }
        }
        Layout {
            proto,
            zero,
            port,
            in_port,
        }
    }

    fn fits(&self, p: &HashProfile) -> bool {
        self.proto.crc == p.crc
            && self.proto.seed_use == p.seed_use
            && self.proto.fields == p.fields
    }

    /// What `p`'s seed XORs into this layout's hash.
    fn seed_term(&self, p: &HashProfile) -> u32 {
        p.hash(&zero_flow(), 0) ^ self.zero
    }

    fn port_term(&self, port: u16) -> u32 {
        let [hi, lo] = split(port);
        self.port[0][hi] ^ self.port[1][lo]
    }

    fn in_port_term(&self, in_port: u16) -> u32 {
        let [hi, lo] = split(in_port);
        self.in_port[0][hi] ^ self.in_port[1][lo]
    }
}

/// Solves source ports for one fabric: how every switch hashes
/// ([`FabricHash`]), with each distinct input layout's terms worked out
/// once.
#[derive(Clone, Debug)]
pub struct Steering {
    fabric: FabricHash,
    layouts: Vec<Layout>,
    /// Per switch, its index into `layouts`.
    layout_of: Vec<usize>,
    /// Per switch, what its seed XORs into its layout's hash.
    seed_term: Vec<u32>,
}

impl Steering {
    /// For switches that all run Foresight's program, hashing as `hashes`
    /// (indexed by switch) over `mode`'s fields.
    pub fn new(hashes: &[SwitchHash], mode: HashMode) -> Steering {
        Steering::for_fabric(FabricHash {
            switches: hashes
                .iter()
                .map(|h| HashProfile::foresight(h.seed, h.offset, mode))
                .collect(),
        })
    }

    /// For switches hashing as `fabric` describes (fixed-function ones included).
    pub fn for_fabric(fabric: FabricHash) -> Steering {
        let mut layouts: Vec<Layout> = Vec::new();
        let layout_of: Vec<usize> = fabric
            .switches
            .iter()
            .map(|p| match layouts.iter().position(|l| l.fits(p)) {
                Some(i) => i,
                None => {
                    layouts.push(Layout::new(p));
                    layouts.len() - 1
                }
            })
            .collect();
        let seed_term = fabric
            .switches
            .iter()
            .zip(&layout_of)
            .map(|(p, &l)| layouts[l].seed_term(p))
            .collect();
        Steering {
            fabric,
            layouts,
            layout_of,
            seed_term,
        }
    }

    /// The hash switch `s` computes for `flow` (on its own source port)
    /// arriving on `in_port`, from the flow's layout hash `base` (seed 0,
    /// ports 0).
    fn hash_at(&self, s: SwitchIdx, base: u32, in_port: u16) -> u32 {
        let l = &self.layouts[self.layout_of[s as usize]];
        base ^ self.seed_term[s as usize] ^ l.in_port_term(in_port)
    }

    /// Whether some switch hashes the destination QP: a flow whose QP the
    /// controller does not know cannot then be promised a port.
    pub fn needs_qp(&self) -> bool {
        self.fabric.hashes(Field::DstQp)
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
        let n = range.len();
        let start = if (range.first..=range.last).contains(&flow.udp_src_port) {
            u32::from(flow.udp_src_port - range.first)
        } else {
            0
        };
        for i in 0..n {
            let port = range.first + ((start + i) % n) as u16;
            if choices.iter().all(|c| self.holds(c, port)) {
                return Ok(Steered {
                    port,
                    dest_qp: flow.dest_qp,
                    tried: i + 1,
                });
            }
        }
        Err(NoPort::Exhausted { tried: n, qps: 1 })
    }

    /// [`Steering::port_in`] where the client lets the controller choose
    /// the destination QP too, among `qps`: each QP (the flow's own first,
    /// then upward, wrapping) with the ports of `range`, until a pair
    /// hashes onto the path. A QP is the only entropy left where switches
    /// hash it but not the source port (then each QP is tried on one port),
    /// and extra entropy where the port range is narrow. Where no switch
    /// hashes the QP, only the flow's own is tried.
    pub fn port_and_qp_in<F: Fn(EdgeId) -> bool + Copy>(
        &self,
        groups: &mut Groups<'_, F>,
        flow: &Flow,
        path: &Path,
        range: PortRange,
        qps: RangeInclusive<u32>,
    ) -> Result<Steered, NoPort> {
        let (first, last) = (*qps.start(), *qps.end());
        if last < first || !self.needs_qp() {
            return self.port_in(groups, flow, path, range);
        }
        let n = last - first + 1;
        let own = if qps.contains(&flow.dest_qp) {
            flow.dest_qp - first
        } else {
            0
        };
        let ports = if self.fabric.hashes(Field::L4SrcPort) {
            range
        } else {
            // The port changes no hash: one per QP, inside the range.
            let p = if (range.first..=range.last).contains(&flow.udp_src_port) {
                flow.udp_src_port
            } else {
                range.first
            };
            PortRange { first: p, last: p }
        };
        let mut tried = 0u32;
        for i in 0..n {
            let candidate = Flow {
                dest_qp: first + (own + i) % n,
                ..flow.clone()
            };
            match self.port_in(groups, &candidate, path, ports) {
                Ok(s) => {
                    return Ok(Steered {
                        tried: tried.saturating_add(s.tried),
                        ..s
                    })
                }
                Err(NoPort::Exhausted { tried: t, .. }) => tried = tried.saturating_add(t),
                Err(off_routes) => return Err(off_routes),
            }
        }
        Err(NoPort::Exhausted { tried, qps: n })
    }

    fn holds(&self, c: &Choice, port: u16) -> bool {
        let h = c.hash0 ^ self.layouts[c.layout].port_term(port);
        c.window.apply(h) % c.group == c.member
    }

    /// The member each switch on `path` must pick, from the source leaf to
    /// the destination leaf, with the hash each computes for the flow on
    /// source port 0.
    fn choices<F: Fn(EdgeId) -> bool + Copy>(
        &self,
        groups: &mut Groups<'_, F>,
        flow: &Flow,
        path: &Path,
    ) -> Result<Vec<Choice>, NoPort> {
        let (topo, down) = (groups.topo, groups.down);
        let dst_leaf = topo.hosts()[flow.dst as usize].leaf;
        let mut s = topo.hosts()[flow.src as usize].leaf;
        let mut in_port = topo.edge(topo.host_up_edge(flow.src)).to_port;
        let port0 = Flow {
            udp_src_port: 0,
            ..flow.clone()
        };
        // The flow's hash per layout (seed 0, ports 0), worked out on first use.
        let mut bases: smallvec::SmallVec<[Option<u32>; 4]> =
            smallvec::smallvec![None; self.layouts.len()];
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
            // A group of one decides nothing: no port is needed for it.
            if group.len() > 1 {
                let layout = self.layout_of[s as usize];
                let base = *bases[layout]
                    .get_or_insert_with(|| self.layouts[layout].proto.hash(&port0, 0));
                choices.push(Choice {
                    hash0: self.hash_at(s, base, in_port),
                    layout,
                    window: self.fabric.switches[s as usize].window(),
                    group: group.len() as u32,
                    member: member as u32,
                });
            }
            let link = topo.edge(e);
            let NodeRef::Switch(t) = link.to else {
                return Err(NoPort::OffRoutes { edge: e });
            };
            (s, in_port) = (t, link.to_port);
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
pub(crate) mod tests {
    use super::*;
    use crate::ecmp::{ecmp_path_avoiding, HashKey, SeedPolicy};
    use crate::paths::all_paths;
    use crate::topology::generate::{multi_pod, MultiPod};

    /// Two pods of 4 leaves and 4 spines, 4 super-spines per plane, 2
    /// hosts per leaf: every tier hashes.
    pub(crate) fn fabric() -> Topology {
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
                assert_port_walks(&steering, &topo, &flow, p, &hashes, mode, |_| false);
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
            assert_port_walks(
                &steering,
                &topo,
                &flow,
                p,
                &hashes,
                HashMode::FiveTuple,
                down,
            );
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
        mode: HashMode,
        down: impl Fn(EdgeId) -> bool + Copy,
    ) {
        let s = steering
            .port_for(topo, flow, path, PortRange::default(), down)
            .unwrap();
        let mut f = flow.clone();
        f.udp_src_port = s.port;
        let key = HashKey::of_flow(&f, mode);
        let walked = ecmp_path_avoiding(topo, f.src, f.dst, &key, hashes, down);
        assert_eq!(walked.as_ref(), Some(path), "{mode:?} port {}", s.port);
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
            Err(NoPort::Exhausted { tried: 1, qps: 1 })
        );
    }

    /// Switches that hash the destination QP but not the source port (IPs
    /// and QP only): no port can move a flow, so a path its own QP does not
    /// hash onto is reached only by choosing its QP. The search finds one
    /// among the client's choices that walks the path under the
    /// description, keeps the flow's own QP when it already does, and
    /// says how many QPs it tried when none does.
    #[test]
    fn a_qp_steers_where_switches_ignore_the_source_port() {
        let topo = fabric();
        let described = FabricHash::from_yaml(
            &topo,
            "version: 1\ndefault: {function: crc32c, seed: name, fields: [src_ip, dst_ip, dst_qp]}\n\
             roles: {spine: {offset: 8}, superspine: {offset: 16}}\n",
            "qp-only.yaml",
        )
        .unwrap();
        let steering = Steering::for_fabric(described.clone());
        assert!(steering.needs_qp());
        let last = topo.hosts().len() as u32 - 1;
        let flow = Flow::new(&topo, 0, last, 0x500, 0, 1 << 20, 100_000_000_000);
        let own = described.path_avoiding(&topo, &flow, |_| false).unwrap();
        let choices = 0x500..=0x5ff;
        let mut groups = Groups::new(&topo, |_: EdgeId| false);
        let s = steering
            .port_and_qp_in(
                &mut groups,
                &flow,
                &own,
                PortRange::default(),
                choices.clone(),
            )
            .unwrap();
        assert_eq!(
            (s.dest_qp, s.tried),
            (0x500, 1),
            "its own QP walks its own path"
        );
        let paths = all_paths(&topo, 0, last, 1000);
        let mut moved = 0;
        for p in paths.iter().filter(|p| **p != own) {
            // Ports alone cannot leave the flow's own path.
            assert!(matches!(
                steering.port_in(&mut groups, &flow, p, PortRange::default()),
                Err(NoPort::Exhausted { .. })
            ));
            let s = steering
                .port_and_qp_in(&mut groups, &flow, p, PortRange::default(), choices.clone())
                .unwrap();
            assert!(choices.contains(&s.dest_qp));
            let mut f = flow.clone();
            (f.udp_src_port, f.dest_qp) = (s.port, s.dest_qp);
            assert_eq!(
                described.path_avoiding(&topo, &f, |_| false).as_ref(),
                Some(p)
            );
            moved += 1;
        }
        assert_eq!(moved, paths.len() - 1);
        // One QP and a path it does not take: exhausted, over one QP.
        let other = paths.iter().find(|p| **p != own).unwrap();
        assert_eq!(
            steering.port_and_qp_in(
                &mut groups,
                &flow,
                other,
                PortRange::default(),
                0x500..=0x500
            ),
            Err(NoPort::Exhausted { tried: 1, qps: 1 })
        );
    }

    /// Switches described as fixed-function ASICs (CRC-16 seeded in the
    /// register, the ingress port hashed, spines reading other bits, one
    /// super-spine on CRC-32's high half): every path between two pods
    /// still gets a port, and the port walks it under that description.
    #[test]
    fn described_switches_are_steered_too() {
        let topo = fabric();
        let described = FabricHash::from_yaml(
            &topo,
            "version: 1\n\
             default: {function: crc16-ccitt-false, seed: 0x2b, fields: [src_ip, dst_ip, ip_proto, l4_src_port, l4_dst_port, ingress_port]}\n\
             roles: {spine: {offset: 5}, superspine: {function: crc32, seed_use: xor, seed: 9, offset: 16, bits: 16}}\n",
            "asic.yaml",
        )
        .unwrap();
        let steering = Steering::for_fabric(described.clone());
        assert_eq!(steering.layouts.len(), 2, "one layout per CRC");
        let last = topo.hosts().len() as u32 - 1;
        let flow = Flow::new(&topo, 1, last, 0x42, 0, 1 << 20, 100_000_000_000);
        for p in all_paths(&topo, 1, last, 1000) {
            let s = steering
                .port_for(&topo, &flow, &p, PortRange::default(), |_| false)
                .unwrap();
            let mut f = flow.clone();
            f.udp_src_port = s.port;
            assert_eq!(described.path_avoiding(&topo, &f, |_| false), Some(p));
        }
        assert!(!steering.needs_qp());
    }

    /// A switch's hash as the solver composes it (the flow's layout hash,
    /// the switch's seed term, the ingress and source port terms) is the
    /// switch's hash, for every seed use and a hashed ingress port.
    #[test]
    fn composed_hashes_are_the_switches_hashes() {
        let topo = fabric();
        let mut rng = crate::rng::Rng::new(11);
        for (function, seed_use) in [
            ("crc32", "prepend"),
            ("crc16-arc", "init"),
            ("crc32c", "xor"),
        ] {
            let described = FabricHash::from_yaml(
                &topo,
                &format!(
                    "version: 1\ndefault: {{function: {function}, seed: name, seed_use: {seed_use}, \
                     fields: [dst_qp, src_ip, ingress_port, l4_src_port, dst_ip]}}\n"
                ),
                "x.yaml",
            );
            // `name` seeds are 32-bit: too wide for a 16-bit register.
            let described = described.unwrap_or_else(|_| {
                FabricHash::from_yaml(
                    &topo,
                    &format!(
                        "version: 1\ndefault: {{function: {function}, seed: 0x5a5a, seed_use: {seed_use}, \
                         fields: [dst_qp, src_ip, ingress_port, l4_src_port, dst_ip]}}\n"
                    ),
                    "x.yaml",
                )
                .unwrap()
            });
            let steering = Steering::for_fabric(described.clone());
            let last = topo.hosts().len() as u32 - 1;
            for _ in 0..200 {
                let mut f = Flow::new(&topo, 0, last, rng.below(1 << 24) as u32, 0, 1, 1);
                let (port, in_port) = (rng.below(65536) as u16, rng.below(65536) as u16);
                let s = rng.below(topo.switches().len() as u64) as SwitchIdx;
                let l = steering.layout_of[s as usize];
                let base = steering.layouts[l].proto.hash(
                    &Flow {
                        udp_src_port: 0,
                        ..f.clone()
                    },
                    0,
                );
                let composed =
                    steering.hash_at(s, base, in_port) ^ steering.layouts[l].port_term(port);
                f.udp_src_port = port;
                assert_eq!(
                    composed,
                    described.switches[s as usize].hash(&f, in_port),
                    "{function} {seed_use}"
                );
            }
        }
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
