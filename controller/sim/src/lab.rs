//! The BMv2 lab as a simulator scenario, so that the simulator can be
//! checked against the lab run for run: the lab's topology file, one run's
//! rocegen spec (`raw/<run>/spec.json`: flows, QPs, UDP source ports,
//! rates, start offsets, dependencies) and, in Foresight mode, the
//! reservations the controller answered with (`reservations.json`).
//!
//! **Units.** The lab shapes switch egress ports in packets/s, not bytes
//! (`bmv2-lab/README.md`), so the scenario counts packets: a flow's "bits"
//! are packets × 1e9 and a link's "Gbit/s" its packets/s, which keeps the
//! engine's times in nanoseconds of lab time.
//!
//! **What is modelled**, each as the lab does it:
//! * the switches' seeded ECMP ([`planner::ecmp::ecmp_path`], bit for bit
//!   the P4 hash) on the 5-tuple (`ecmp5`) or QP-aware (`qp`,
//!   `foresight`), for data and for ACKs (which hash on their own key:
//!   receiver to sender, the sender's QP);
//! * ports that drain `gbps × pps_per_gbps` packets/s; host-to-leaf links
//!   are not shaped (only switch egress ports are);
//! * each connection (QP pair) sends its messages one after the other at
//!   its rate (a virtual link per connection), and a ring step starts when
//!   the previous step's chunk has arrived: chains of `after` dependencies
//!   become jobs, one iteration per step;
//! * per-step latency: a sender paces a message, so its last packet
//!   leaves one packet interval before the fluid finish; it then crosses
//!   every switch egress port of its path, one packet time each (a
//!   store-and-forward switch; BMv2 itself forwards at once on an idle port,
//!   and its queueing, which this stands in for, is not modelled), before
//!   the next step can start;
//! * coalesced ACKs on the reverse path (every `ack_every` packets or
//!   `ack_delay_ms` after the first unacknowledged one), as streams;
//! * Foresight: reserved connections on their recorded paths; pre-drained
//!   background flows get what the reserved flows leave on their path, but
//!   not less than DCQCN's rate floor;
//! * `spray`: data and ACKs split equally over the next hops at every
//!   switch (the fluid of per-packet spraying); `flowlet`: every message
//!   (and every background flow) on a random path drawn hop by hop with
//!   `--seed` (the lab's draws are its own: compare distributions over
//!   seeds, not runs), ACKs sprayed (each sparse ACK a flowlet of its own);
//! * for `spray` and `flowlet` onto go-back-N NICs (`--nic gbn`), the
//!   reordering model of [`crate::reorder`] in the lab's units: a packet
//!   time is a port's `1/pps`, and the round trip a rewind costs is, unless
//!   given, one packet's store-and-forward time out and back (the mean over
//!   connections of the data and ACK paths' packet times).
//!
//! Not modelled: DCQCN's rate oscillation (max-min is its ideal steady
//! state), queueing delay (except as the spread that reorders packets),
//! drops and their retransmissions, BMv2's CPU.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use planner::conventions::{IP_PROTO_UDP, ROCEV2_UDP_PORT};
use planner::ecmp::{ecmp_path, HashKey, HashMode, SeedPolicy, SwitchHash};
use planner::topology::{EdgeId, HostIdx, NodeRef, Topology};
use rocegen::spec::{Flow, Kind};
use serde::Deserialize;

use crate::engine::{simulate, Factors, Job, Links, Options, Router, SimFlow};
use crate::parts::{Parts, Route, Use};
use crate::reorder::{Nic, RandomPaths, ReorderModel};
use crate::routing::Fabric;

/// Packets are counted as this many "bits" (see the module docs).
const PACKET: f64 = 1e9;

/// The lab's modes (`bmv2-lab/experiment.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabMode {
    /// Switches hash the 5-tuple; a pair's channels share a source port
    /// (the spec already carries the shared port).
    Ecmp5,
    /// QP-aware hashing.
    Qp,
    /// QP-aware hashing plus the controller's reservations and pre-drain.
    Foresight,
    /// Per-packet spraying (NIC kind in [`Settings::nic`]).
    Spray,
    /// Flowlet switching (NIC kind in [`Settings::nic`]).
    Flowlet,
}

impl LabMode {
    /// What the switches hash in this mode (spraying and flowlets hash
    /// nothing; their [`Connection::path`] is the QP-aware one).
    pub fn hash_mode(self) -> HashMode {
        match self {
            LabMode::Ecmp5 => HashMode::FiveTuple,
            LabMode::Qp | LabMode::Foresight | LabMode::Spray | LabMode::Flowlet => {
                HashMode::QpAware
            }
        }
    }

    /// Whether a packet's path is not fixed by its headers (so the NIC
    /// kind matters).
    pub fn multipath(self) -> bool {
        matches!(self, LabMode::Spray | LabMode::Flowlet)
    }
}

impl FromStr for LabMode {
    type Err = String;
    fn from_str(s: &str) -> Result<LabMode, String> {
        match s {
            "ecmp5" => Ok(LabMode::Ecmp5),
            "qp" => Ok(LabMode::Qp),
            "foresight" => Ok(LabMode::Foresight),
            "spray" => Ok(LabMode::Spray),
            "flowlet" => Ok(LabMode::Flowlet),
            _ => Err(format!(
                "lab mode '{s}': want ecmp5, qp, foresight, spray or flowlet (bmv2-lab/experiment.py's modes)"
            )),
        }
    }
}

impl fmt::Display for LabMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LabMode::Ecmp5 => "ecmp5",
            LabMode::Qp => "qp",
            LabMode::Foresight => "foresight",
            LabMode::Spray => "spray",
            LabMode::Flowlet => "flowlet",
        })
    }
}

/// One lab run's traffic: rocegen's spec, read with
/// [`Spec::parse`](rocegen::spec::Spec::parse) (not validated: the
/// scenario checks what it uses).
pub use rocegen::spec::Spec;

/// One reservation as `foresight reserve batch --json` prints it.
#[derive(Clone, Debug, Deserialize)]
pub struct Reservation {
    /// Its flows.
    pub flows: Vec<ReservedFlow>,
}

/// A flow of a reservation: a connection and the path granted to it.
#[derive(Clone, Debug, Deserialize)]
pub struct ReservedFlow {
    /// Sender address.
    pub src: Ipv4Addr,
    /// Receiver address.
    pub dst: Ipv4Addr,
    /// Receiver's QP.
    pub dest_qp: Option<u32>,
    /// Granted rate; 0: fell back to ECMP.
    pub accepted_bps: u64,
    /// `switch:egress_port` per hop.
    #[serde(default)]
    pub path: Vec<String>,
}

/// Parses `reservations.json`; errors name `what`.
pub fn parse_reservations(text: &str, what: &str) -> Result<Vec<Reservation>> {
    serde_json::from_str(text)
        .with_context(|| format!("{what}: not the output of `foresight reserve batch --json`"))
}

/// How the lab was run (the `experiment.py` flags that shape the fabric).
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Port drain rate per Gbit/s of link speed (`--pps-per-gbps`).
    pub pps_per_gbps: f64,
    /// A NIC's rate as a fraction of its port's (`--nic-fraction`); sets
    /// the ideal.
    pub nic_fraction: f64,
    /// Receivers ACK every this many packets (`rocegen run --ack-every`)...
    pub ack_every: u32,
    /// ... or this long after the first unacknowledged one (0: no ACKs).
    pub ack_delay_ms: f64,
    /// Per-step latency: a sender paces a message's `n` packets so the
    /// last leaves `(n − 1)/rate` after the first (the fluid model takes
    /// `n/rate`), then crosses each switch egress port in one packet time.
    pub hop_latency: bool,
    /// The switches' ECMP seeds.
    pub seeds: SeedPolicy,
    /// The receiving NICs (`spray` and `flowlet`; `--nic`).
    pub nic: Nic,
    /// The reordering model; its packet is set to the lab's (1e9 bits) and
    /// its round trip to `rtt_ns` or the paths' (see the module docs).
    pub reorder: ReorderModel,
    /// Round trip of a rewind, ns; `None`: one packet's time out and back.
    pub rtt_ns: Option<f64>,
}

impl Default for Settings {
    /// `experiment.py allreduce`'s defaults.
    fn default() -> Settings {
        Settings {
            pps_per_gbps: 2.5,
            nic_fraction: 0.9,
            ack_every: 16,
            ack_delay_ms: 100.0,
            hop_latency: true,
            seeds: SeedPolicy::PerSwitch,
            nic: Nic::Gbn,
            reorder: ReorderModel::default(),
            rtt_ns: None,
        }
    }
}

/// How a data connection is routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// By the switches' hash.
    Hashed,
    /// On the path the controller reserved.
    Reserved,
}

/// A connection (QP pair): its messages share one path and one rate.
#[derive(Clone, Debug)]
pub struct Connection {
    /// Sender.
    pub src: HostIdx,
    /// Receiver.
    pub dst: HostIdx,
    /// Sender's QP.
    pub src_qp: u32,
    /// Receiver's QP.
    pub dest_qp: u32,
    /// Collective (true) or background.
    pub collective: bool,
    /// The sender's rate, packets/s (after a partial grant).
    pub rate_pps: f64,
    /// Data path: topology edges from the sender's NIC to the receiver's
    /// (`spray`, `flowlet`: the QP-aware hashed path, which the data does
    /// not take; see [`Scenario::data_uses`]).
    pub path: Vec<EdgeId>,
    /// How it was chosen.
    pub choice: Choice,
    /// The ACKs' path (receiver to sender), hashed.
    pub ack_path: Vec<EdgeId>,
}

/// A lab run as a simulator input.
pub struct Scenario<'t> {
    topo: &'t Topology,
    mode: LabMode,
    settings: Settings,
    /// Per topology edge, packets/s (infinite: not shaped).
    edge_pps: Vec<f64>,
    /// Connections, by (src host, src QP) in spec order of first use.
    pub connections: Vec<Connection>,
    /// Per spec flow: its connection.
    pub flow_conn: Vec<usize>,
    /// Per spec flow: the links its data loads and the share on each (the
    /// connection's path; sprayed; or the message's flowlet).
    pub data_uses: Vec<Vec<Use>>,
    /// Per connection: the links its ACKs load (hashed, or sprayed).
    pub ack_uses: Vec<Vec<Use>>,
    /// Per connection: its random paths (`spray` and `flowlet` only).
    paths: Vec<RandomPaths>,
    spec: Spec,
}

/// Every link of a single path, whole.
fn whole(path: &[EdgeId]) -> Vec<Use> {
    path.iter().map(|&e| (e, 1.0)).collect()
}

/// The simulated run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LabOutcome {
    /// The mode.
    pub mode: String,
    /// The lab's ideal: the busiest NIC's collective packets (sent or received) over its rate, s.
    pub ideal_s: f64,
    /// From the ring's start to the last collective packet received, s.
    pub completion_s: f64,
    /// `completion_s / ideal_s`.
    pub slowdown: f64,
    /// Median over ring steps of the time from a step's start to its last
    /// packet's arrival, beyond its packets at the sender's rate, ms.
    pub step_excess_ms: f64,
    /// Packets per switch egress port (data and ACKs), `switch:port`,
    /// background counted up to its stop as the lab's counters do.
    pub port_packets: BTreeMap<String, f64>,
    /// Connections on reserved paths.
    pub reserved: usize,
    /// Connections (ring channels and background).
    pub connections: usize,
}

fn host(topo: &Topology, spec: &Spec, name: &str, what: &str) -> Result<HostIdx> {
    let h = topo
        .host_by_name(name)
        .with_context(|| format!("{what}: host '{name}' is not in topology {}", topo.name()))?;
    let ip = spec
        .hosts
        .get(name)
        .with_context(|| format!("{what}: host '{name}' is not in the spec's hosts"))?;
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| anyhow::anyhow!("hosts.{name}: '{ip}' is not an IPv4 address"))?;
    let want = topo.hosts()[h as usize].ip;
    if ip != want {
        bail!(
            "hosts.{name}: {ip} in the spec but {want} in topology {}",
            topo.name()
        );
    }
    Ok(h)
}

/// The hashed path from `src` to `dst` for a RoCEv2 packet with this
/// source port and destination QP: the NIC's link, then every switch's
/// seeded choice.
fn hashed_path(
    topo: &Topology,
    seeds: &[SwitchHash],
    mode: HashMode,
    src: HostIdx,
    dst: HostIdx,
    udp_src_port: u16,
    dest_qp: u32,
) -> Vec<EdgeId> {
    let hs = topo.hosts();
    let key = HashKey::of_packet(
        hs[src as usize].ip,
        hs[dst as usize].ip,
        IP_PROTO_UDP,
        udp_src_port,
        ROCEV2_UDP_PORT,
        dest_qp,
        mode,
    );
    let mut p = vec![topo.host_up_edge(src)];
    p.extend_from_slice(ecmp_path(topo, src, dst, &key, seeds).edges());
    p
}

/// The UDP source port rocegen puts on the ACKs of a connection whose
/// sender's QP is `qp` (`rocegen::gen::udp_port_for`).
pub fn ack_udp_port(qp: u32) -> u16 {
    49152 + (qp % 16384) as u16
}

/// A reserved path (`switch:egress_port` hops) as topology edges.
fn reserved_path(
    topo: &Topology,
    src: HostIdx,
    dst: HostIdx,
    hops: &[String],
) -> Result<Vec<EdgeId>> {
    let mut p = vec![topo.host_up_edge(src)];
    let mut at = NodeRef::Switch(topo.hosts()[src as usize].leaf);
    for hop in hops {
        let bad = || format!("reserved path {hops:?}: hop '{hop}' is not switch:port");
        let (name, port) = hop.rsplit_once(':').with_context(bad)?;
        let port: u16 = port.parse().ok().with_context(bad)?;
        let s = topo
            .switch_by_name(name)
            .with_context(|| format!("reserved path {hops:?}: no switch '{name}'"))?;
        if at != NodeRef::Switch(s) {
            bail!("reserved path {hops:?}: '{hop}' does not follow the previous hop");
        }
        let e = topo
            .switch_out_edges(s)
            .iter()
            .copied()
            .chain([topo.host_down_edge(dst)])
            .find(|&e| topo.edge(e).from == at && topo.edge(e).from_port == port)
            .with_context(|| format!("reserved path {hops:?}: {name} has no port {port}"))?;
        p.push(e);
        at = topo.edge(e).to;
    }
    if at != NodeRef::Host(dst) {
        bail!(
            "reserved path {hops:?} does not end at {}",
            topo.hosts()[dst as usize].name
        );
    }
    Ok(p)
}

impl<'t> Scenario<'t> {
    /// The run `spec` in `mode` on `topo`; `reservations` (Foresight mode
    /// only) are the controller's answer to the run's forecast.
    pub fn new(
        topo: &'t Topology,
        spec: Spec,
        mode: LabMode,
        reservations: &[Reservation],
        settings: Settings,
    ) -> Result<Scenario<'t>> {
        if mode != LabMode::Foresight && !reservations.is_empty() {
            bail!("reservations are only used in foresight mode, not {mode}");
        }
        let seeds = settings.seeds.seeds(topo);
        let hmode = mode.hash_mode();
        let mut granted: HashMap<(Ipv4Addr, Ipv4Addr, u32), &ReservedFlow> = HashMap::new();
        for f in reservations.iter().flat_map(|r| &r.flows) {
            if let (Some(qp), true) = (f.dest_qp, f.accepted_bps > 0) {
                granted.insert((f.src, f.dst, qp), f);
            }
        }
        let mut by_conn: HashMap<(HostIdx, u32), usize> = HashMap::new();
        let mut connections: Vec<Connection> = Vec::new();
        let mut flow_conn = Vec::with_capacity(spec.flows.len());
        for (i, f) in spec.flows.iter().enumerate() {
            let what = format!("flows[{i}] ({})", f.id);
            let src = host(topo, &spec, &f.src, &what)?;
            let dst = host(topo, &spec, &f.dst, &what)?;
            if src == dst {
                bail!("{what}: sender and receiver are both {}", f.src);
            }
            if !(f.line_rate_pps > 0.0 && f.line_rate_pps.is_finite()) {
                bail!("{what}: line_rate_pps {} must be positive", f.line_rate_pps);
            }
            let collective = f.kind == Kind::Collective;
            let k = match by_conn.get(&(src, f.src_qp)) {
                Some(&k) => k,
                None => {
                    let hs = topo.hosts();
                    let key = (hs[src as usize].ip, hs[dst as usize].ip, f.dest_qp);
                    let (path, choice) = match granted.get(&key) {
                        Some(r) if mode == LabMode::Foresight => (
                            reserved_path(topo, src, dst, &r.path).with_context(|| what.clone())?,
                            Choice::Reserved,
                        ),
                        _ => (
                            hashed_path(topo, &seeds, hmode, src, dst, f.udp_src_port, f.dest_qp),
                            Choice::Hashed,
                        ),
                    };
                    // ACKs: receiver to sender, to the sender's QP.
                    let ack_path = hashed_path(
                        topo,
                        &seeds,
                        hmode,
                        dst,
                        src,
                        ack_udp_port(f.src_qp),
                        f.src_qp,
                    );
                    connections.push(Connection {
                        src,
                        dst,
                        src_qp: f.src_qp,
                        dest_qp: f.dest_qp,
                        collective,
                        rate_pps: f.line_rate_pps,
                        path,
                        choice,
                        ack_path,
                    });
                    by_conn.insert((src, f.src_qp), connections.len() - 1);
                    connections.len() - 1
                }
            };
            let c = &connections[k];
            if c.dst != dst || c.dest_qp != f.dest_qp || c.collective != collective {
                bail!(
                    "{what}: connection ({}, QP {}) already goes to another receiver, QP or kind",
                    f.src,
                    f.src_qp
                );
            }
            flow_conn.push(k);
        }
        let mut fabric = Fabric::new(topo, settings.seeds);
        let mut uses = Vec::new();
        let hs = topo.hosts();
        let unreachable = |a: HostIdx, b: HostIdx| {
            anyhow::anyhow!(
                "{} cannot reach {} in topology {}",
                hs[a as usize].name,
                hs[b as usize].name,
                topo.name()
            )
        };
        let (mut data_uses, mut ack_uses, mut paths) = (Vec::new(), Vec::new(), Vec::new());
        for c in &connections {
            if mode.multipath() {
                if !fabric.sprayed(c.src, c.dst, &mut uses) {
                    return Err(unreachable(c.src, c.dst));
                }
                paths.push(RandomPaths::of_sprayed(topo, &uses));
                if !fabric.sprayed(c.dst, c.src, &mut uses) {
                    return Err(unreachable(c.dst, c.src));
                }
                ack_uses.push(uses.clone());
            } else {
                ack_uses.push(whole(&c.ack_path));
            }
        }
        for (i, &k) in flow_conn.iter().enumerate() {
            let c = &connections[k];
            let ok = match mode {
                LabMode::Spray => fabric.sprayed(c.src, c.dst, &mut uses),
                LabMode::Flowlet => {
                    let d = crate::policies::router::draw(settings.reorder.seed, i as u64);
                    fabric.random(c.src, c.dst, d, &mut uses)
                }
                _ => {
                    uses = whole(&c.path);
                    true
                }
            };
            if !ok {
                return Err(unreachable(c.src, c.dst));
            }
            data_uses.push(uses.clone());
        }
        let mut edge_pps = vec![f64::INFINITY; topo.edge_count()];
        for (e, pps) in edge_pps.iter_mut().enumerate() {
            let l = topo.edge(e as EdgeId);
            if let NodeRef::Switch(_) = l.from {
                // lab.py: max(1, round(Gbit/s × pps_per_gbps)).
                let gbps = l.capacity_bps as f64 / 1e9;
                *pps = (gbps * settings.pps_per_gbps).round().max(1.0);
            }
        }
        Ok(Scenario {
            topo,
            mode,
            settings,
            edge_pps,
            connections,
            flow_conn,
            data_uses,
            ack_uses,
            paths,
            spec,
        })
    }

    /// A packet's time through the switch egress ports of `path`, ns
    /// (fractional shares: the mean over the paths).
    fn latency_ns(&self, path: &[Use]) -> f64 {
        if !self.settings.hop_latency {
            return 0.0;
        }
        self.store_and_forward_ns(path)
    }

    /// One packet time per switch egress port on `path` (shares weighted), ns.
    fn store_and_forward_ns(&self, path: &[Use]) -> f64 {
        path.iter()
            .map(|&(e, c)| (self.edge_pps[e as usize], c))
            .filter(|p| p.0.is_finite())
            .map(|(p, c)| c * 1e9 / p)
            .sum()
    }

    /// The reordering model in the lab's units (see the module docs).
    pub fn reorder_model(&self) -> ReorderModel {
        let rtt = self.settings.rtt_ns.unwrap_or_else(|| {
            let n = self.connections.len().max(1) as f64;
            (0..self.connections.len())
                .map(|k| {
                    let data = self
                        .flow_conn
                        .iter()
                        .position(|&c| c == k)
                        .map_or(0.0, |i| self.store_and_forward_ns(&self.data_uses[i]));
                    data + self.store_and_forward_ns(&self.ack_uses[k])
                })
                .sum::<f64>()
                / n
        });
        ReorderModel {
            packet_bits: PACKET,
            rtt_ns: rtt,
            ..self.settings.reorder
        }
    }

    /// The mode and, for spraying and flowlets, the NICs: `spray-gbn`.
    pub fn mode_name(&self) -> String {
        if self.mode.multipath() {
            format!("{}-{}", self.mode, self.settings.nic.name())
        } else {
            self.mode.to_string()
        }
    }

    /// The lab's ideal: the collective packets through the busiest NIC,
    /// sent or received (MoE's hot experts receive more than they send),
    /// over its rate (`nic_fraction` of its port's), s.
    pub fn ideal_s(&self) -> f64 {
        let mut through: HashMap<(HostIdx, bool), f64> = HashMap::new();
        for (f, &k) in self.spec.flows.iter().zip(&self.flow_conn) {
            let c = &self.connections[k];
            if c.collective {
                *through.entry((c.src, true)).or_default() += self.packets(f);
                *through.entry((c.dst, false)).or_default() += self.packets(f);
            }
        }
        through
            .iter()
            .map(|(&(h, _), &n)| {
                let port = self.edge_pps[self.topo.host_down_edge(h) as usize];
                n / (port * self.settings.nic_fraction)
            })
            .fold(0.0, f64::max)
    }

    /// Packets the fluid model sends before a message's last packet leaves:
    /// all but the last one when latency is modelled (it then crosses the
    /// path on its own, [`Scenario::latency_ns`]).
    fn paced(&self, f: &Flow) -> f64 {
        let n = self.packets(f);
        if self.settings.hop_latency && n > 1.0 {
            n - 1.0
        } else {
            n
        }
    }

    fn packets(&self, f: &Flow) -> f64 {
        f.bytes.div_ceil(u64::from(self.spec.payload_bytes.max(1))) as f64
    }

    /// ACKs per second of a connection sending at `pps`: one per
    /// `ack_every` packets, or one per `ack_delay_ms` when that is sooner.
    fn ack_pps(&self, pps: f64) -> f64 {
        let s = &self.settings;
        if s.ack_delay_ms <= 0.0 || s.ack_every == 0 {
            return 0.0;
        }
        (pps / f64::from(s.ack_every))
            .max(1e3 / s.ack_delay_ms)
            .min(pps)
    }

    /// Simulates the run.
    pub fn simulate(&self) -> Result<LabOutcome> {
        let n_topo = self.topo.edge_count();
        // Edge capacities: the topology's, then one virtual link per
        // connection (its messages share the sender's rate, one at a time).
        let mut cap = self.edge_pps.clone();
        cap.extend(self.connections.iter().map(|c| c.rate_pps));
        let mut routes: Vec<Vec<Use>> = Vec::new();
        let mut flows: Vec<SimFlow> = Vec::new();
        // Per simulated flow: its connection, for data that can reorder.
        let mut data_of: Vec<Option<usize>> = Vec::new();
        // Chains of `after` dependencies become jobs, one step per iteration.
        let ids: HashMap<&str, usize> = self
            .spec
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| (f.id.as_str(), i))
            .collect();
        let mut next: Vec<Option<usize>> = vec![None; self.spec.flows.len()];
        for (i, f) in self.spec.flows.iter().enumerate() {
            match f.after.as_slice() {
                [] => {}
                [p] => {
                    let p = *ids.get(p.as_str()).with_context(|| {
                        format!("flows[{i}] ({}): after '{p}', which is no flow", f.id)
                    })?;
                    if next[p].replace(i).is_some() {
                        bail!(
                            "flows[{i}] ({}): '{}' already has a successor; only chains of steps are supported",
                            f.id,
                            self.spec.flows[p].id
                        );
                    }
                }
                _ => bail!(
                    "flows[{i}] ({}): waits for {} flows; only chains (one predecessor) are supported",
                    f.id,
                    f.after.len()
                ),
            }
        }
        let pps = |k: usize| self.connections[k].rate_pps;
        let mut jobs: Vec<Job> = Vec::new();
        // Per simulated flow: spec flow (None: ACK stream).
        let mut origin: Vec<Option<usize>> = Vec::new();
        let mut ring_start = f64::INFINITY;
        // Per simulated flow: the previous step of its chain.
        let mut pred: Vec<Option<usize>> = Vec::new();
        for (i, f) in self.spec.flows.iter().enumerate() {
            if !self.connections[self.flow_conn[i]].collective || !f.after.is_empty() {
                continue;
            }
            // A chain's head: walk it.
            let job = jobs.len() as u32;
            let mut it = 0u32;
            let mut at = Some(i);
            let mut offset = f.start_offset_ns as f64;
            ring_start = ring_start.min(offset);
            while let Some(j) = at {
                let g = &self.spec.flows[j];
                let kj = self.flow_conn[j];
                if !self.connections[kj].collective {
                    bail!(
                        "flows[{j}] ({}): background flows cannot wait for others",
                        g.id
                    );
                }
                let mut sf = SimFlow::gated(self.paced(g) * PACKET, job, it, offset);
                sf.max_gbps = pps(kj) as f32;
                flows.push(sf);
                let mut r = self.data_uses[j].clone();
                r.push(((n_topo + kj) as u32, 1.0));
                routes.push(r);
                data_of.push(Some(kj));
                origin.push(Some(j));
                pred.push((it > 0).then(|| flows.len() - 2));
                offset = self.latency_ns(&self.data_uses[j]);
                it += 1;
                at = next[j];
            }
            jobs.push(Job {
                iterations: it,
                gap_ns: 0.0,
            });
        }
        if jobs.is_empty() {
            bail!("the spec has no collective flows to time");
        }
        let chained: usize = jobs.iter().map(|j| j.iterations as usize).sum();
        let collective = self
            .flow_conn
            .iter()
            .filter(|&&k| self.connections[k].collective)
            .count();
        if chained != collective {
            bail!(
                "{} collective flows wait for a flow that is never sent (a dependency cycle)",
                collective - chained
            );
        }
        let mut reserved_on = vec![0.0f64; n_topo];
        for c in &self.connections {
            if c.choice == Choice::Reserved {
                for &e in &c.path {
                    reserved_on[e as usize] += c.rate_pps;
                }
            }
        }
        // Background: time-bounded streams at their rate; under Foresight,
        // pre-drained on reserved links down to what the reservations leave.
        for (i, f) in self.spec.flows.iter().enumerate() {
            let k = self.flow_conn[i];
            let c = &self.connections[k];
            if c.collective {
                continue;
            }
            let mut rate = c.rate_pps;
            if self.mode == LabMode::Foresight {
                let left = c
                    .path
                    .iter()
                    .filter(|&&e| reserved_on[e as usize] > 0.0)
                    .map(|&e| (self.edge_pps[e as usize] - reserved_on[e as usize]).max(0.0))
                    .fold(f64::INFINITY, f64::min);
                rate = rate.min(left).max(rate * self.spec.dcqcn.rmin_frac);
            }
            let bits = match f.stop_offset_ns {
                Some(stop) => {
                    c.rate_pps * (stop.saturating_sub(f.start_offset_ns)) as f64 / 1e9 * PACKET
                }
                None => self.packets(f) * PACKET,
            };
            let mut sf = SimFlow::at(bits, f.start_offset_ns as f64);
            sf.max_gbps = rate as f32;
            flows.push(sf);
            let mut r = self.data_uses[i].clone();
            r.push(((n_topo + k) as u32, 1.0));
            routes.push(r);
            data_of.push(Some(k));
            origin.push(Some(i));
        }
        // ACKs: a stream per connection from its first message on.
        let mut first_start: Vec<f64> = vec![f64::INFINITY; self.connections.len()];
        for (f, &k) in self.spec.flows.iter().zip(&self.flow_conn) {
            first_start[k] = first_start[k].min(f.start_offset_ns as f64);
        }
        for (k, c) in self.connections.iter().enumerate() {
            let a = self.ack_pps(c.rate_pps);
            if a > 0.0 {
                let mut sf = SimFlow::at(f64::INFINITY, first_start[k]);
                sf.max_gbps = a as f32;
                flows.push(sf);
                routes.push(self.ack_uses[k].clone());
                data_of.push(None);
                origin.push(None);
            }
        }
        let gbn = self.mode.multipath() && self.settings.nic == Nic::Gbn;
        let mut router = Fixed {
            routes: &routes,
            reorder: gbn.then(|| Reordering {
                model: self.reorder_model(),
                data_of: &data_of,
                bits: flows.iter().map(|f| f.bits).collect(),
                nic_pps: self.connections.iter().map(|c| c.rate_pps).collect(),
                paths: &self.paths,
                flowlets: self.mode == LabMode::Flowlet,
            }),
        };
        let out = simulate(
            &flows,
            &jobs,
            &cap,
            &mut router,
            &[],
            Options {
                progress: None,
                finish_times: true,
                coalesce_ns: 0.0,
            },
        );
        if out.unfinished > 0 {
            bail!("{} flows never finished", out.unfinished);
        }
        // Arrival of each step's last packet; a step starts when the
        // previous one has arrived (the head: at its offset).
        let arrive = |s: usize| {
            out.finish_ns[s] + self.latency_ns(&self.data_uses[origin[s].expect("a spec flow")])
        };
        let mut last = f64::NEG_INFINITY;
        let mut excess = Vec::with_capacity(pred.len());
        for (s, p) in pred.iter().enumerate() {
            let i = origin[s].expect("chain steps are spec flows");
            let begin = p.map_or(flows[s].start_ns, arrive);
            let alone =
                self.packets(&self.spec.flows[i]) / self.connections[self.flow_conn[i]].rate_pps;
            excess.push((arrive(s) - begin) / 1e6 - alone * 1e3);
            last = last.max(arrive(s));
        }
        excess.sort_by(f64::total_cmp);
        // The lab counts packets until every host is done: background that
        // outlives the ring keeps sending (alone, at its rate) until its stop.
        let mut edge_packets: Vec<f64> =
            out.edge_bits[..n_topo].iter().map(|b| b / PACKET).collect();
        for (i, (f, &k)) in self.spec.flows.iter().zip(&self.flow_conn).enumerate() {
            let c = &self.connections[k];
            if c.collective {
                // The last packet, which crossed on its own.
                let last = self.packets(f) - self.paced(f);
                for &(e, x) in &self.data_uses[i] {
                    edge_packets[e as usize] += x * last;
                }
            }
            let Some(stop) = f.stop_offset_ns.filter(|_| !c.collective) else {
                continue;
            };
            let secs = (stop as f64 - out.end_ns).max(0.0) / 1e9;
            for &(e, x) in &self.data_uses[i] {
                edge_packets[e as usize] += x * c.rate_pps * secs;
            }
            for &(e, x) in &self.ack_uses[k] {
                edge_packets[e as usize] += x * self.ack_pps(c.rate_pps) * secs;
            }
        }
        let mut port_packets = BTreeMap::new();
        for (e, &packets) in edge_packets.iter().enumerate() {
            let l = self.topo.edge(e as EdgeId);
            if let NodeRef::Switch(s) = l.from {
                let name = format!("{}:{}", self.topo.switches()[s as usize].name, l.from_port);
                port_packets.insert(name, packets);
            }
        }
        let ideal_s = self.ideal_s();
        let completion_s = (last - ring_start) / 1e9;
        Ok(LabOutcome {
            mode: self.mode_name(),
            ideal_s,
            completion_s,
            slowdown: completion_s / ideal_s,
            step_excess_ms: excess[excess.len() / 2],
            port_packets,
            reserved: self
                .connections
                .iter()
                .filter(|c| c.choice == Choice::Reserved)
                .count(),
            connections: self.connections.len(),
        })
    }
}

/// Every flow on its precomputed route (whole links, and one part of the
/// fractional ones), and what reordering costs go-back-N NICs.
struct Fixed<'a> {
    routes: &'a [Vec<Use>],
    reorder: Option<Reordering<'a>>,
}

/// Go-back-N reordering under `spray` or `flowlet`.
struct Reordering<'a> {
    model: ReorderModel,
    /// Per simulated flow: the connection of data that can reorder.
    data_of: &'a [Option<usize>],
    /// Per simulated flow: its bits.
    bits: Vec<f64>,
    /// Per connection: the sender's rate, packets/s (its NIC's pace).
    nic_pps: Vec<f64>,
    /// Per connection: its random paths.
    paths: &'a [RandomPaths],
    flowlets: bool,
}

impl Router for Fixed<'_> {
    fn route(
        &mut self,
        i: usize,
        _sub: u32,
        _load: &[f64],
        parts: &mut Parts,
        out: &mut Route,
    ) -> bool {
        let r = &self.routes[i];
        out.edges
            .extend(r.iter().filter(|u| u.1 == 1.0).map(|u| u.0));
        let shares: Vec<Use> = r.iter().copied().filter(|u| u.1 != 1.0).collect();
        if !shares.is_empty() {
            out.parts.push(parts.intern(&shares));
        }
        true
    }
    fn fail(&mut self, _edges: &[u32]) {}
    fn rehash_on_failure(&self, _i: usize) -> bool {
        false
    }
    fn reorders(&self, i: usize) -> bool {
        self.reorder
            .as_ref()
            .is_some_and(|r| r.data_of[i].is_some())
    }
    fn factors(&mut self, i: usize, rate: f64, links: &Links<'_>) -> Factors {
        let Some(r) = &self.reorder else {
            return Factors::WHOLE;
        };
        let Some(k) = r.data_of[i] else {
            return Factors::WHOLE;
        };
        let var = r.paths[k].variance(&r.model, links);
        if r.flowlets {
            r.model
                .flowlet_gbn(rate, r.bits[i], r.model.flowlet_overtake(var))
        } else {
            r.model
                .gbn(rate, r.model.spray_ooo(rate, r.nic_pps[k], var))
        }
    }
}
