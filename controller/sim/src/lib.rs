//! Foresight's flow-level simulator: max-min fair (fluid) rates for the
//! flows of AI collectives on a fabric, under eight load-balancing policies.
//!
//! * [`maxmin`] — progressive filling over the links each flow uses.
//! * [`engine`] — event-driven simulation (rates recomputed at every
//!   start, finish and link failure); iterations chain (iteration n+1
//!   starts when the slowest flow of iteration n finishes).
//! * [`routing`] — the switch ECMP walk (the planner's hash with each
//!   switch's seed, group order and `hash % |group|`), fluid spraying,
//!   per-hop least-loaded.
//! * [`qps`] — the K QPs of a connection under `qp-hash-K`.
//! * [`workload`] — the planner's collectives (ring all-reduce,
//!   all-to-all, KV transfer) plus background flows.
//! * [`ecmp_collisions`] — Monte-Carlo ECMP collisions vs `S!/((S−N)!·S^N)`.
//! * [`output`] — table, CSV and SVG plots.
//! * [`learned`] — a job that announces nothing, its periodic schedule
//!   learned and reserved ahead by the controller (T+5).
//! * [`lab`] — one BMv2 lab run (its topology, rocegen spec and
//!   reservations) as a scenario, to check the simulator against the lab.
//! * [`reorder`] — what reordering costs sprayed and flowlet traffic on
//!   go-back-N and out-of-order-tolerant NICs.
//!
//! Policies ([`Policy`]): ECMP on the 5-tuple; QP-aware hashing with `k`
//! QPs per connection (each connection split into `k` equal sub-flows on
//! consecutive QPs, see [`qps`], each hashed on its own QP and source
//! port); adaptive (per hop, the next hop with the fewest active flows at
//! flow start, ties broken by the switch hash); spraying (fluid, split
//! equally over next hops) and flowlets (a random member per hop, drawn
//! afresh for every flow), each on go-back-N or out-of-order-tolerant NICs
//! ([`reorder`]); Foresight (the planner's paths; a flow whose
//! path fails is re-placed least-loaded, as a re-plan would). Unannounced
//! background traffic uses ECMP under Foresight. Every hashing switch uses
//! its seed under a [`SeedPolicy`] (per-switch by default, or one seed
//! everywhere: the polarised fabric).
//! The ideal is the same traffic on one non-blocking switch (only the NIC
//! links constrain).

pub mod ecmp_collisions;
pub mod engine;
pub mod fabrics;
pub mod lab;
pub mod learned;
pub mod maxmin;
pub mod output;
pub mod parts;
pub mod qps;
pub mod radix;
#[cfg(test)]
mod reference;
pub mod reorder;
pub mod routing;
pub mod suite;
pub mod workload;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::bail;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use planner::demand::Flow;
use planner::ecmp::{HashKey, HashMode};
use planner::entropy::{Groups, PortRange, Steering};
use planner::hash_profile::FabricHash;
use planner::paths::Path;
use planner::topology::{EdgeId, HostIdx, NodeRef, SwitchIdx, Topology};
use planner::{Planner, PlannerConfig};

use engine::{simulate, Factors, Failure, Job, Links, Options, Router, SimFlow};
use parts::{PartId, Parts, Route as SimRoute, Use};
use qps::{flow_key_on_qp, key_on_qp, qp_blocks};
use reorder::{Nic, RandomPaths, ReorderModel};
use routing::{Fabric, FlowHash, FlowKey, Hashed, SwitchHashing};
use workload::Workload;

/// A load-balancing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Everything on the NIC links only (one big non-blocking switch).
    Ideal,
    /// ECMP on the 5-tuple, one QP per connection.
    Ecmp,
    /// QP-aware hashing, `qps` QPs per connection.
    QpHash {
        /// QPs per connection.
        qps: u32,
    },
    /// Least-loaded next hop at flow start.
    Adaptive,
    /// Per-packet spraying (fluid), onto NICs of this kind.
    Spray(Nic),
    /// Flowlet switching: a random path per flow (message), NICs of this kind.
    Flowlet(Nic),
    /// The planner's paths.
    Foresight,
    /// The planner's paths, reached through the switches' own ECMP hash:
    /// each reserved flow sends on the UDP source port that hashes onto its
    /// path ([`planner::entropy`]); a flow with no such port keeps its own
    /// port and its ECMP path. No switch runs Foresight's program.
    ForesightEntropy,
}

impl Policy {
    /// Short name.
    pub fn name(&self) -> String {
        match self {
            Policy::Ideal => "ideal".into(),
            Policy::Ecmp => "ecmp".into(),
            Policy::QpHash { qps } => format!("qp-hash-{qps}"),
            Policy::Adaptive => "adaptive".into(),
            Policy::Spray(nic) => format!("spray-{}", nic.name()),
            Policy::Flowlet(nic) => format!("flowlet-{}", nic.name()),
            Policy::Foresight => "foresight".into(),
            Policy::ForesightEntropy => "foresight-entropy".into(),
        }
    }

    /// Parses `ecmp`, `qp` / `qp-hash` (with `default_qps`), `qp-hash-K`,
    /// `adaptive`, `spray-gbn`, `spray-ooo`, `flowlet-gbn`, `flowlet-ooo`,
    /// `foresight`, `foresight-entropy`, `ideal`. `spray` alone is `spray-ooo`: the reorder-free
    /// spraying this simulator modelled before NICs were told apart.
    pub fn parse(s: &str, default_qps: u32) -> anyhow::Result<Policy> {
        Ok(match s {
            "ideal" => Policy::Ideal,
            "ecmp" => Policy::Ecmp,
            "qp" | "qp-hash" => Policy::QpHash { qps: default_qps },
            "adaptive" => Policy::Adaptive,
            "spray" | "spray-ooo" => Policy::Spray(Nic::Ooo),
            "spray-gbn" => Policy::Spray(Nic::Gbn),
            "flowlet-ooo" => Policy::Flowlet(Nic::Ooo),
            "flowlet-gbn" => Policy::Flowlet(Nic::Gbn),
            "flowlet" => bail!(
                "policy 'flowlet': say which NICs, flowlet-gbn (go-back-N) or flowlet-ooo (out-of-order tolerant)"
            ),
            "foresight" => Policy::Foresight,
            "foresight-entropy" => Policy::ForesightEntropy,
            _ => match s.strip_prefix("qp-hash-").map(str::parse::<u32>) {
                Some(Ok(k)) if k > 0 => Policy::QpHash { qps: k },
                _ => bail!(
                    "policy '{s}': expected one of ecmp, qp-hash, qp-hash-K, adaptive, spray-gbn, spray-ooo (or spray), flowlet-gbn, flowlet-ooo, foresight, foresight-entropy, ideal"
                ),
            },
        })
    }

    /// The policies compared by default.
    pub fn all(qps: u32) -> Vec<Policy> {
        vec![
            Policy::Ecmp,
            Policy::QpHash { qps },
            Policy::Adaptive,
            Policy::Spray(Nic::Gbn),
            Policy::Spray(Nic::Ooo),
            Policy::Flowlet(Nic::Gbn),
            Policy::Flowlet(Nic::Ooo),
            Policy::Foresight,
        ]
    }
}

#[derive(Clone, Copy, Debug)]
enum How {
    Hashed(FlowHash),
    /// Connection `c`: one hash per QP, `qp_hashes[c * qps..(c + 1) * qps]`.
    QpHashed(u32),
    Adaptive(FlowHash),
    Spray,
    /// A random member per hop from this draw (a flowlet).
    Flowlet(u32),
    /// Index into the planned paths, and the hash for a fallback.
    Fixed(u32, FlowHash),
    Ideal,
}

struct Route {
    src: HostIdx,
    dst: HostIdx,
    how: How,
}

struct PolicyRouter<'t> {
    fabric: Fabric<'t>,
    routes: Vec<Route>,
    /// QPs per connection (qp-hash) and their hashes.
    qps: u32,
    qp_hashes: Vec<FlowHash>,
    /// On a described fabric, per route what its switches hash (the
    /// connection's QPs' keys in `qp_keys`, like `qp_hashes`); empty on
    /// Foresight's program, which hashes the [`FlowHash`]es.
    keys: Vec<FlowKey>,
    qp_keys: Vec<FlowKey>,
    paths: Vec<Path>,
    /// Sprayed fabric parts per (source leaf, destination leaf); `None`:
    /// unreachable. Cleared when links fail.
    spray: HashMap<(SwitchIdx, SwitchIdx), Option<Vec<PartId>>>,
    uses: Vec<Use>,
    /// Go-back-N NICs under spraying or flowlets: what reordering costs.
    gbn: Option<ReorderModel>,
    /// Per flow, its bits (flowlets on go-back-N NICs only).
    bits: Vec<f64>,
    /// Per leaf pair, the random paths' hops (none: unreachable or one
    /// leaf) and their delay variance at an epoch. Cleared when links fail.
    spreads: HashMap<(SwitchIdx, SwitchIdx), Spread>,
}

/// The random paths between two leaves and their delay variance at an epoch.
struct Spread {
    paths: RandomPaths,
    epoch: u64,
    var_ns2: f64,
}

/// A well-mixed 32-bit draw from a seed and an index (SplitMix64).
pub(crate) fn draw(seed: u64, i: u64) -> u32 {
    let mut r = planner::rng::Rng::new(seed ^ i.wrapping_mul(0xa076_1d64_78bd_642f));
    (r.next_u64() >> 32) as u32
}

impl PolicyRouter<'_> {
    /// Fluid spraying: the NIC links, plus the leaf pair's fabric shares
    /// as shared parts (one rising, one falling on a Clos).
    fn sprayed(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        parts: &mut Parts,
        out: &mut SimRoute,
    ) -> bool {
        let topo = self.fabric.topo;
        let (up, down) = (topo.host_up_edge(src), topo.host_down_edge(dst));
        if self.fabric.is_failed(up) || self.fabric.is_failed(down) {
            return false;
        }
        let key = (
            topo.hosts()[src as usize].leaf,
            topo.hosts()[dst as usize].leaf,
        );
        if !self.spray.contains_key(&key) {
            let ids = self.fabric.sprayed(src, dst, &mut self.uses).then(|| {
                let fabric = &self.uses[1..self.uses.len() - 1];
                let rising = |e: EdgeId| {
                    let l = topo.edge(e);
                    let tier = |n: NodeRef| match n {
                        NodeRef::Switch(s) => topo.switches()[s as usize].role.tier(),
                        NodeRef::Host(_) => 0,
                    };
                    tier(l.to) > tier(l.from)
                };
                fabric
                    .chunk_by(|a, b| rising(a.0) == rising(b.0))
                    .map(|run| parts.intern(run))
                    .collect()
            });
            self.spray.insert(key, ids);
        }
        let Some(ids) = &self.spray[&key] else {
            return false;
        };
        out.edges.push(up);
        out.parts.extend_from_slice(ids);
        out.edges.push(down);
        true
    }

    /// Delay variance of a random path from `src`'s leaf to `dst`'s, ns²,
    /// at the links' current loads (once per leaf pair and epoch).
    fn path_variance(
        &mut self,
        src: HostIdx,
        dst: HostIdx,
        model: &ReorderModel,
        links: &Links<'_>,
    ) -> f64 {
        let topo = self.fabric.topo;
        let key = (
            topo.hosts()[src as usize].leaf,
            topo.hosts()[dst as usize].leaf,
        );
        if !self.spreads.contains_key(&key) {
            let paths = if self.fabric.sprayed(src, dst, &mut self.uses) {
                RandomPaths::of_sprayed(topo, &self.uses)
            } else {
                RandomPaths::default()
            };
            let fresh = Spread {
                paths,
                epoch: u64::MAX,
                var_ns2: 0.0,
            };
            self.spreads.insert(key, fresh);
        }
        let s = self.spreads.get_mut(&key).expect("inserted above");
        if s.epoch != links.epoch {
            s.var_ns2 = s.paths.variance(model, links);
            s.epoch = links.epoch;
        }
        s.var_ns2
    }
}

impl Router for PolicyRouter<'_> {
    fn subflows(&self, i: usize) -> u32 {
        match self.routes[i].how {
            How::QpHashed(_) => self.qps,
            _ => 1,
        }
    }
    fn route(
        &mut self,
        i: usize,
        sub: u32,
        load: &[f64],
        parts: &mut Parts,
        out: &mut SimRoute,
    ) -> bool {
        let r = &self.routes[i];
        let (src, dst) = (r.src, r.dst);
        // The fabric's terms: the key where described, else the hash.
        let hashed = |keys: &[FlowKey], at: usize, h: FlowHash| {
            keys.get(at)
                .map_or(Hashed::Program(h), |&k| Hashed::Described(k))
        };
        let (keys, qp_keys) = (&self.keys, &self.qp_keys);
        let f = &mut self.fabric;
        let u = &mut self.uses;
        let ok = match r.how {
            How::Hashed(h) => f.hashed(src, dst, hashed(keys, i, h), u),
            How::QpHashed(c) => {
                let at = c as usize * self.qps as usize + sub as usize;
                f.hashed(src, dst, hashed(qp_keys, at, self.qp_hashes[at]), u)
            }
            How::Adaptive(h) => f.least_loaded(src, dst, hashed(keys, i, h), load, u),
            How::Spray => return self.sprayed(src, dst, parts, out),
            How::Flowlet(d) => f.random(src, dst, d, u),
            How::Fixed(p, h) => {
                f.fixed(src, &self.paths[p as usize], u)
                    || f.least_loaded(src, dst, hashed(keys, i, h), load, u)
            }
            How::Ideal => f.ideal(src, dst, u),
        };
        debug_assert!(
            u.iter().all(|x| x.1 == 1.0),
            "single-path routes load whole links"
        );
        out.edges.extend(u.iter().map(|x| x.0));
        ok
    }
    fn fail(&mut self, edges: &[u32]) {
        for &e in edges {
            self.fabric.fail(e);
        }
        self.spray.clear();
        self.spreads.clear();
    }
    fn rehash_on_failure(&self, i: usize) -> bool {
        matches!(
            self.routes[i].how,
            How::Hashed(_) | How::QpHashed(_) | How::Spray
        )
    }
    fn reorders(&self, i: usize) -> bool {
        self.gbn.is_some() && matches!(self.routes[i].how, How::Spray | How::Flowlet(_))
    }
    fn factors(&mut self, i: usize, rate: f64, links: &Links<'_>) -> Factors {
        let Some(model) = self.gbn else {
            return Factors::WHOLE;
        };
        let r = &self.routes[i];
        let (src, dst, how) = (r.src, r.dst, r.how);
        let var = self.path_variance(src, dst, &model, links);
        match how {
            How::Spray => {
                let nic = self.fabric.topo.edge(self.fabric.topo.host_up_edge(src));
                let nic_rate = nic.capacity_bps as f64 / 1e9;
                model.gbn(rate, model.spray_ooo(rate, nic_rate, var))
            }
            How::Flowlet(_) => model.flowlet_gbn(rate, self.bits[i], model.flowlet_overtake(var)),
            _ => Factors::WHOLE,
        }
    }
}

/// Link failures to inject: these edges go down at `at_ns` (default: half
/// of the ideal first iteration).
#[derive(Clone, Debug, Default)]
pub struct FailSpec {
    /// Directed edges (both directions of a link).
    pub edges: Vec<EdgeId>,
    /// When, ns.
    pub at_ns: Option<f64>,
}

/// Both directed edges of the link between switches `a` and `b` (by name).
pub fn link_edges(topo: &Topology, a: &str, b: &str) -> anyhow::Result<Vec<EdgeId>> {
    let (Some(x), Some(y)) = (topo.switch_by_name(a), topo.switch_by_name(b)) else {
        bail!("--fail {a},{b}: both ends must be switch names of the fabric");
    };
    let mut out = Vec::new();
    for (s, t) in [(x, y), (y, x)] {
        for &e in topo.switch_out_edges(s) {
            if topo.edge(e).to == NodeRef::Switch(t) {
                out.push(e);
            }
        }
    }
    if out.is_empty() {
        bail!("--fail {a},{b}: no link between these switches");
    }
    Ok(out)
}

/// `n` random switch-to-switch links (both directions), seeded.
pub fn random_links(topo: &Topology, n: u32, seed: u64) -> Vec<EdgeId> {
    let fabric: Vec<EdgeId> = (0..topo.edge_count() as u32)
        .filter(|&e| {
            let l = topo.edge(e);
            matches!((l.from, l.to), (NodeRef::Switch(a), NodeRef::Switch(b)) if a < b)
        })
        .collect();
    let mut rng = planner::rng::Rng::new(seed ^ 0xfa11);
    let mut out = Vec::new();
    for _ in 0..n.min(fabric.len() as u32) {
        let e = fabric[rng.below(fabric.len() as u64) as usize];
        let l = topo.edge(e);
        let (NodeRef::Switch(a), NodeRef::Switch(b)) = (l.from, l.to) else {
            continue;
        };
        out.extend(
            link_edges(
                topo,
                &topo.switches()[a as usize].name,
                &topo.switches()[b as usize].name,
            )
            .unwrap_or_default(),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Distribution of time-averaged utilisation over the switch-to-switch
/// links that carried traffic.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct UtilStats {
    /// Links with traffic.
    pub links: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Highest.
    pub max: f64,
}

impl UtilStats {
    /// From values (sorted here).
    pub fn of(v: &mut [f64]) -> UtilStats {
        if v.is_empty() {
            return UtilStats::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        UtilStats {
            links: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// One job's iterations under a policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct JobResult {
    /// Job name.
    pub name: String,
    /// Per iteration: duration, ns.
    pub iteration_ns: Vec<f64>,
    /// Per iteration: duration ÷ the ideal's duration of that iteration.
    pub ratio: Vec<f64>,
    /// Mean of `ratio`.
    pub mean_ratio: f64,
}

/// One policy's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Per job.
    pub jobs: Vec<JobResult>,
    /// Mean ratio of the job that suffers most (the table's figure).
    pub mean_ratio: f64,
    /// Largest ratio of any iteration of any job.
    pub max_ratio: f64,
    /// Link utilisation distribution.
    pub util: UtilStats,
    /// Per used fabric link: time-averaged utilisation (sorted).
    #[serde(skip)]
    pub link_util: Vec<f64>,
    /// Flows simulated (each QP of a connection counts).
    pub flows: usize,
    /// Rate recomputations.
    pub events: usize,
    /// Flows that never finished (unroutable after failures).
    pub unfinished: usize,
    /// Wall time of the simulation (and planning, for Foresight), s.
    pub wall_s: f64,
    /// Of which planning, s.
    pub plan_s: f64,
    /// Entropy steering's ports (`foresight-entropy` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steering: Option<SteeringStats>,
}

/// How unannounced traffic is routed under a policy, and what a described
/// switch hashes of it; `qp` is the flow's QP under qp-hash (numbered by
/// [`qps::qp_blocks`]); `draw` picks a flowlet's path.
fn unannounced(policy: Policy, f: &Flow, qp: Option<u32>, draw: u32) -> (How, FlowKey) {
    let five = FlowHash::of(&HashKey::of_flow(f, HashMode::FiveTuple));
    let how = match policy {
        Policy::Ideal => How::Ideal,
        Policy::Ecmp | Policy::Foresight | Policy::ForesightEntropy => How::Hashed(five),
        Policy::QpHash { .. } => {
            let qp = qp.expect("qp-hash numbers every flow's QPs");
            return (
                How::Hashed(FlowHash::of(&key_on_qp(f, qp))),
                flow_key_on_qp(qp),
            );
        }
        Policy::Adaptive => How::Adaptive(five),
        Policy::Spray(_) => How::Spray,
        Policy::Flowlet(_) => How::Flowlet(draw),
    };
    (how, FlowKey::of(f))
}

/// One policy's flows and how each is routed.
struct Prepared {
    flows: Vec<SimFlow>,
    routes: Vec<Route>,
    /// qp-hash: per connection its QPs' hashes.
    qp_hashes: Vec<FlowHash>,
    /// On a described fabric (else empty): per route, and per connection's
    /// QP, what the switches hash.
    keys: Vec<FlowKey>,
    qp_keys: Vec<FlowKey>,
}

/// Simulation inputs derived for one policy: flows, their routing, and the
/// QP hashes (qp-hash: `qps` per connection, on the consecutive QPs
/// [`qps::qp_blocks`] gives it, the same every iteration). Foresight's
/// paths and the QP hashes are indexed like [`Workload::connections`].
/// A flowlet's path is drawn from `seed` and the flow's index (each
/// iteration's flows draw afresh). Under entropy steering, `ports` gives
/// per connection the source port it was told to send on. `described`:
/// the switches hash as described, so keep every route's key.
fn prepare(
    w: &Workload,
    policy: Policy,
    planned: bool,
    seed: u64,
    ports: &[Option<u16>],
    described: bool,
) -> Prepared {
    let mut first = Vec::with_capacity(w.demands.len());
    let mut total = 0;
    for d in &w.demands {
        first.push(total);
        total += d.flows.len();
    }
    // Sized once: these hold a row per flow of every iteration.
    let rows = w
        .jobs
        .iter()
        .map(|js| {
            js.iterations as usize
                * w.demands[js.demands.clone()]
                    .iter()
                    .map(|d| d.flows.len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + w.background.len()
        + w.streams.len();
    let mut flows = Vec::with_capacity(rows);
    let mut routes = Vec::with_capacity(rows);
    let mut keys = Vec::with_capacity(if described { rows } else { 0 });
    let blocks = match policy {
        Policy::QpHash { qps } => Some(qp_blocks(w, qps)),
        _ => None,
    };
    let qp_hashes: Vec<FlowHash> = match (policy, &blocks) {
        (Policy::QpHash { qps }, Some(b)) => w
            .connections()
            .zip(&b.connections)
            .flat_map(|(f, &start)| (start..start + qps).map(|qp| FlowHash::of(&key_on_qp(f, qp))))
            .collect(),
        _ => Vec::new(),
    };
    let qp_keys: Vec<FlowKey> = match (policy, &blocks) {
        (Policy::QpHash { qps }, Some(b)) if described => b
            .connections
            .iter()
            .flat_map(|&start| (start..start + qps).map(flow_key_on_qp))
            .collect(),
        _ => Vec::new(),
    };
    for (job, js) in w.jobs.iter().enumerate() {
        for n in 0..js.iterations {
            for di in js.demands.clone() {
                for (k, f) in w.demands[di].flows.iter().enumerate() {
                    let bits = f.bytes as f64 * 8.0;
                    flows.push(SimFlow::gated(bits, job as u32, n, f.start_ns as f64));
                    let conn = (first[di] + k) as u32;
                    let five = || FlowHash::of(&HashKey::of_flow(f, HashMode::FiveTuple));
                    let mut key = FlowKey::of(f);
                    let how = match policy {
                        Policy::Ideal => How::Ideal,
                        Policy::Ecmp => How::Hashed(five()),
                        // The connection's QPs share its bytes equally.
                        Policy::QpHash { .. } => How::QpHashed(conn),
                        Policy::Adaptive => How::Adaptive(five()),
                        Policy::Spray(_) => How::Spray,
                        Policy::Flowlet(_) => How::Flowlet(draw(seed, routes.len() as u64)),
                        Policy::Foresight => {
                            assert!(planned, "Foresight needs the planned paths");
                            How::Fixed(conn, five())
                        }
                        Policy::ForesightEntropy => match ports[conn as usize] {
                            Some(port) => {
                                let mut steered = f.clone();
                                steered.udp_src_port = port;
                                key.udp_src_port = port;
                                How::Hashed(FlowHash::of(&HashKey::of_flow(
                                    &steered,
                                    HashMode::FiveTuple,
                                )))
                            }
                            None => How::Hashed(five()),
                        },
                    };
                    if described {
                        keys.push(key);
                    }
                    routes.push(Route {
                        src: f.src,
                        dst: f.dst,
                        how,
                    });
                }
            }
        }
    }
    let background = w.background.iter().enumerate().map(|(i, f)| {
        let flow = SimFlow::at(f.bytes as f64 * 8.0, f.start_ns as f64);
        (flow, f, blocks.as_ref().map(|b| b.background[i]))
    });
    let streams = w.streams.iter().enumerate().map(|(i, f)| {
        let mut flow = SimFlow::at(f64::INFINITY, 0.0);
        flow.max_gbps = (f.rate_bps as f64 / 1e9) as f32;
        (flow, f, blocks.as_ref().map(|b| b.streams[i]))
    });
    for (flow, f, qp) in background.chain(streams) {
        flows.push(flow);
        let (how, key) = unannounced(policy, f, qp, draw(seed, routes.len() as u64));
        if described {
            keys.push(key);
        }
        routes.push(Route {
            src: f.src,
            dst: f.dst,
            how,
        });
    }
    Prepared {
        flows,
        routes,
        qp_hashes,
        keys,
        qp_keys,
    }
}

/// Everything one policy's simulation needs.
struct Setup<'t> {
    flows: Vec<SimFlow>,
    jobs: Vec<Job>,
    cap: Vec<f64>,
    router: PolicyRouter<'t>,
    plan_s: f64,
    steering: Option<SteeringStats>,
}

/// Links down from time 0 are known before planning: Foresight plans
/// around them. Switches hash as `hashing` says, and the planner predicts
/// fallback paths with the same hashes.
fn setup<'t>(
    topo: &'t Topology,
    w: &Workload,
    policy: Policy,
    hashing: &SwitchHashing,
    model: &ReorderModel,
    failures: &[Failure],
) -> Setup<'t> {
    let t0 = Instant::now();
    let planned = matches!(policy, Policy::Foresight | Policy::ForesightEntropy);
    let mut reserved = Vec::new();
    let paths: Vec<Path> = if planned {
        let config = match hashing {
            SwitchHashing::Program(seeds) => PlannerConfig {
                ecmp_seeds: *seeds,
                ..PlannerConfig::default()
            },
            SwitchHashing::Described(d) => PlannerConfig {
                switch_hash: Some(d.clone()),
                ..PlannerConfig::default()
            },
        };
        let mut p = Planner::new(topo, config);
        for f in failures.iter().filter(|f| f.at_ns <= 0.0) {
            for &e in &f.edges {
                p.set_edge_down(e, true);
            }
        }
        let plan = p.plan(&w.demands);
        reserved = plan
            .demands
            .iter()
            .flat_map(|d| d.flows.iter().map(|f| f.reserved_bps > 0))
            .collect();
        plan.demands
            .iter()
            .flat_map(|d| d.flows.iter().map(|f| f.path))
            .collect()
    } else {
        Vec::new()
    };
    let plan_s = t0.elapsed().as_secs_f64();
    let (ports, steering) = if policy == Policy::ForesightEntropy {
        let (ports, stats) = steer(topo, w, &paths, &reserved, hashing, failures);
        (ports, Some(stats))
    } else {
        (Vec::new(), None)
    };
    let described = matches!(hashing, SwitchHashing::Described(_));
    let Prepared {
        flows,
        routes,
        qp_hashes,
        keys,
        qp_keys,
    } = prepare(
        w,
        policy,
        !paths.is_empty() || w.demands.is_empty(),
        model.seed,
        &ports,
        described,
    );
    let gbn =
        matches!(policy, Policy::Spray(Nic::Gbn) | Policy::Flowlet(Nic::Gbn)).then_some(*model);
    let bits = match policy {
        Policy::Flowlet(Nic::Gbn) => flows.iter().map(|f| f.bits).collect(),
        _ => Vec::new(),
    };
    let cap: Vec<f64> = (0..topo.edge_count() as u32)
        .map(|e| topo.edge(e).capacity_bps as f64 / 1e9)
        .collect();
    Setup {
        flows,
        jobs: w
            .jobs
            .iter()
            .map(|j| Job {
                iterations: j.iterations,
                gap_ns: j.gap_ns,
            })
            .collect(),
        cap,
        router: PolicyRouter {
            fabric: Fabric::hashing(topo, hashing),
            routes,
            qps: match policy {
                Policy::QpHash { qps } => qps,
                _ => 1,
            },
            qp_hashes,
            keys,
            qp_keys,
            paths,
            spray: HashMap::new(),
            uses: Vec::new(),
            gbn,
            bits,
            spreads: HashMap::new(),
        },
        plan_s,
        steering,
    }
}

/// What entropy steering found for one workload: how many reserved flows
/// got a port, how many did not, and what the search cost.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SteeringStats {
    /// Connections the planner reserved a path for.
    pub reserved: usize,
    /// Of which a source port steers onto that path.
    pub steered: usize,
    /// Of which no port in the range does (they keep their ECMP path).
    pub no_port: usize,
    /// Wall time of the whole search, s.
    pub search_s: f64,
    /// Most candidate ports one flow needed.
    pub max_tried: u32,
}

/// A source port per connection of `w` (`None`: not reserved, or no port
/// found), from the 49152-65535 range, for switches hashing as `hashing`
/// says (Foresight's program: the 5-tuple, with its seeds); links down
/// from time 0 are out of the groups, as they are in the switches' routes.
fn steer(
    topo: &Topology,
    w: &Workload,
    paths: &[Path],
    reserved: &[bool],
    hashing: &SwitchHashing,
    failures: &[Failure],
) -> (Vec<Option<u16>>, SteeringStats) {
    let t0 = Instant::now();
    let mut down = vec![false; topo.edge_count()];
    for f in failures.iter().filter(|f| f.at_ns <= 0.0) {
        for &e in &f.edges {
            down[e as usize] = true;
        }
    }
    let steering = match hashing {
        SwitchHashing::Program(seeds) => Steering::new(&seeds.seeds(topo), HashMode::FiveTuple),
        SwitchHashing::Described(d) => Steering::for_fabric(FabricHash::clone(d)),
    };
    let mut groups = Groups::new(topo, |e: u32| down[e as usize]);
    let mut stats = SteeringStats::default();
    let ports = w
        .connections()
        .zip(paths)
        .zip(reserved)
        .map(|((f, path), &reserved)| {
            if !reserved {
                return None;
            }
            stats.reserved += 1;
            match steering.port_in(&mut groups, f, path, PortRange::default()) {
                Ok(s) => {
                    stats.steered += 1;
                    stats.max_tried = stats.max_tried.max(s.tried);
                    Some(s.port)
                }
                Err(_) => {
                    stats.no_port += 1;
                    None
                }
            }
        })
        .collect();
    stats.search_s = t0.elapsed().as_secs_f64();
    (ports, stats)
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress_bar(len: u64, msg: String) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// Simulates one policy, every switch hashing as `hashing` says,
/// reordering costed by `model`; `ideal` gives per job the ideal's
/// iteration times (ratios are 1 without it).
#[allow(clippy::too_many_arguments)]
pub fn run_policy(
    topo: &Topology,
    w: &Workload,
    policy: Policy,
    hashing: &SwitchHashing,
    model: &ReorderModel,
    failures: &[Failure],
    ideal: Option<&[JobResult]>,
    progress: Option<&MultiProgress>,
) -> PolicyResult {
    let t0 = Instant::now();
    let mut su = setup(topo, w, policy, hashing, model, failures);
    let gating: u64 = (0..su.flows.len())
        .filter(|&i| su.flows[i].gate.is_some())
        .map(|i| su.router.subflows(i) as u64)
        .sum();
    let pb = progress.map(|m| m.add(progress_bar(gating, policy.name())));
    let o = simulate(
        &su.flows,
        &su.jobs,
        &su.cap,
        &mut su.router,
        failures,
        Options {
            progress: pb.as_ref(),
            finish_times: false,
            coalesce_ns: w.coalesce_ns,
        },
    );
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let flows = (0..su.flows.len())
        .map(|i| su.router.subflows(i) as usize)
        .sum();
    let (cap, plan_s) = (&su.cap, su.plan_s);
    let jobs: Vec<JobResult> = w
        .jobs
        .iter()
        .zip(o.iteration_ns)
        .enumerate()
        .map(|(j, (spec, iteration_ns))| {
            let ratio: Vec<f64> = match ideal {
                Some(id) => iteration_ns
                    .iter()
                    .zip(&id[j].iteration_ns)
                    .map(|(a, b)| a / b)
                    .collect(),
                None => vec![1.0; iteration_ns.len()],
            };
            JobResult {
                name: spec.name.clone(),
                mean_ratio: ratio.iter().sum::<f64>() / ratio.len().max(1) as f64,
                iteration_ns,
                ratio,
            }
        })
        .collect();
    let span = o.end_ns.max(1e-9);
    let mut link_util: Vec<f64> = (0..topo.edge_count() as u32)
        .filter(|&e| {
            let l = topo.edge(e);
            matches!((l.from, l.to), (NodeRef::Switch(_), NodeRef::Switch(_)))
                && o.edge_bits[e as usize] > 0.0
        })
        .map(|e| o.edge_bits[e as usize] / (cap[e as usize] * span))
        .collect();
    let util = UtilStats::of(&mut link_util);
    PolicyResult {
        policy: policy.name(),
        mean_ratio: jobs.iter().map(|j| j.mean_ratio).fold(0.0, f64::max),
        max_ratio: jobs
            .iter()
            .flat_map(|j| j.ratio.iter().copied())
            .fold(0.0, f64::max),
        jobs,
        util,
        link_util,
        flows,
        events: o.events,
        unfinished: o.unfinished,
        wall_s,
        plan_s,
        steering: su.steering,
    }
}

/// Relative cost, to start the longest simulations first.
fn cost_rank(p: Policy) -> u32 {
    match p {
        Policy::QpHash { qps } => 10 + qps,
        Policy::Foresight | Policy::ForesightEntropy => 9,
        Policy::Adaptive => 8,
        Policy::Flowlet(_) => 6,
        Policy::Ecmp => 5,
        Policy::Spray(_) => 4,
        Policy::Ideal => 0,
    }
}

/// The ideal first, then every policy, `threads` at a time (0: one per
/// core; each holds its own simulation in memory), longest first; results
/// in `policies` order. Failures are timed against the ideal. Switches
/// hash as `hashing` says; `model` costs reordering.
#[allow(clippy::too_many_arguments)]
pub fn run_all(
    topo: &Topology,
    w: &Workload,
    policies: &[Policy],
    hashing: &SwitchHashing,
    model: &ReorderModel,
    fail: &FailSpec,
    progress: bool,
    threads: usize,
) -> Vec<PolicyResult> {
    let mp = progress.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
    let ideal = run_policy(
        topo,
        w,
        Policy::Ideal,
        hashing,
        model,
        &[],
        None,
        mp.as_ref(),
    );
    let failures: Vec<Failure> = if fail.edges.is_empty() {
        Vec::new()
    } else {
        vec![Failure {
            at_ns: fail.at_ns.unwrap_or(ideal.jobs[0].iteration_ns[0] / 2.0),
            edges: fail.edges.clone(),
        }]
    };
    let todo: Vec<Policy> = policies
        .iter()
        .copied()
        .filter(|&p| p != Policy::Ideal)
        .collect();
    let mut order: Vec<usize> = (0..todo.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(cost_rank(todo[k])));
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, todo.len().max(1));
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<PolicyResult>>> = Mutex::new(vec![None; todo.len()]);
    let id = &ideal.jobs;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(&k) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = run_policy(
                        topo,
                        w,
                        todo[k],
                        hashing,
                        model,
                        &failures,
                        Some(id),
                        mp.as_ref(),
                    );
                    done.lock().expect("no thread panicked holding it")[k] = Some(r);
                }
            });
        }
    });
    let mut out = vec![ideal];
    out.extend(
        done.into_inner()
            .expect("no thread panicked holding it")
            .into_iter()
            .map(|r| r.expect("every policy ran")),
    );
    out
}

/// Peak resident set of this process (VmHWM), KiB, if readable.
pub fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use planner::ecmp::SeedPolicy;
    use planner::topology::generate::{preset, Preset};
    use workload::{build, WorkloadKind, WorkloadSpec};

    fn leaf_spine_256() -> Topology {
        Topology::from_spec(preset(Preset::LeafSpine, 256).unwrap()).unwrap()
    }

    /// multi-job on the 64-GPU fabric of `foresight sim run --gpus 64`.
    fn multi_job_64() -> (Topology, Workload) {
        let t = fabrics::generated(Preset::Clos3, 64, 1).unwrap();
        let spec = WorkloadSpec {
            kind: WorkloadKind::MultiJob,
            kv_bytes: 256 << 20,
            ..Default::default()
        };
        let w = build(&t, &spec).unwrap();
        (t, w)
    }

    /// The three jobs of multi-job (the two training rings are both
    /// `ring-allreduce` demands) each follow their own planned paths: every
    /// iteration of every job is as fast as in the ideal fabric (the 64-GPU
    /// fabric of `foresight sim run --gpus 64`, its default sizes).
    #[test]
    fn foresight_is_ideal_on_multi_job() {
        let (t, w) = multi_job_64();
        let r = run_all(
            &t,
            &w,
            &[Policy::Foresight],
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &FailSpec::default(),
            false,
            1,
        );
        let f = r.iter().find(|p| p.policy == "foresight").unwrap();
        assert_eq!(f.jobs.len(), 3);
        for j in &f.jobs {
            assert!(
                j.ratio.iter().all(|&x| x <= 1.0 + 1e-6),
                "{}: {:?}",
                j.name,
                j.ratio
            );
        }
    }

    /// Steered by source ports alone, every reserved flow of the multi-job
    /// mix (rings, all-to-all, background) finds a port and every job runs
    /// as it does on Foresight's SR paths; the ECMP it replaces does not.
    #[test]
    fn entropy_steering_matches_sr_paths() {
        let (t, w) = multi_job_64();
        let r = run_all(
            &t,
            &w,
            &[Policy::Ecmp, Policy::Foresight, Policy::ForesightEntropy],
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &FailSpec::default(),
            false,
            1,
        );
        let by = |name: &str| r.iter().find(|p| p.policy == name).unwrap();
        let st = by("foresight-entropy").steering.unwrap();
        assert!(st.reserved > 40, "{st:?}");
        assert_eq!((st.steered, st.no_port), (st.reserved, 0), "{st:?}");
        for (sr, ent) in by("foresight")
            .jobs
            .iter()
            .zip(&by("foresight-entropy").jobs)
        {
            assert!(
                (sr.mean_ratio - ent.mean_ratio).abs() < 1e-9,
                "{}: {} vs {}",
                sr.name,
                sr.mean_ratio,
                ent.mean_ratio
            );
        }
        assert!(by("ecmp").mean_ratio > by("foresight-entropy").mean_ratio + 0.1);
        assert!(by("foresight").steering.is_none());
    }

    /// Foresight's program written as a description simulates exactly as
    /// the program's fast path: ECMP, adaptive and entropy steering on the
    /// multi-job mix, iteration for iteration.
    #[test]
    fn the_program_described_simulates_as_the_program() {
        let (t, w) = multi_job_64();
        let policies = [Policy::Ecmp, Policy::Adaptive, Policy::ForesightEntropy];
        let run = |h: &SwitchHashing| {
            run_all(
                &t,
                &w,
                &policies,
                h,
                &ReorderModel::default(),
                &FailSpec::default(),
                false,
                1,
            )
        };
        let program = run(&SeedPolicy::PerSwitch.into());
        let d = FabricHash::foresight(&t, &SeedPolicy::PerSwitch, HashMode::FiveTuple);
        let described = run(&SwitchHashing::Described(std::sync::Arc::new(d)));
        assert_eq!(program.len(), described.len());
        for (a, b) in program.iter().zip(&described) {
            assert_eq!(a.policy, b.policy);
            for (x, y) in a.jobs.iter().zip(&b.jobs) {
                assert_eq!(x.iteration_ns, y.iteration_ns, "{} {}", a.policy, x.name);
            }
        }
    }

    /// Where every tier takes its member from the same bits of one CRC, a
    /// flow's spine fixes its super-spine (the switches' choices are
    /// polarised): entropy steering finds no port for reserved paths off
    /// that diagonal and leaves those flows on ECMP. The same CRC read at
    /// other bits per tier (an ASIC's hash offset) steers every flow. The
    /// two descriptions are the examples in `docs/switch-hash/`.
    #[test]
    fn a_polarised_fabric_leaves_flows_without_a_port() {
        let t = fabrics::generated(Preset::Clos3, 256, 1).unwrap();
        let spec = WorkloadSpec {
            kind: WorkloadKind::AllToAll,
            bytes: 16 << 20,
            ..Default::default()
        };
        let w = build(&t, &spec).unwrap();
        let steering = |name: &str| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/switch-hash");
            let file = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
            let d = FabricHash::from_yaml(&t, &file, name).unwrap();
            let r = run_all(
                &t,
                &w,
                &[Policy::ForesightEntropy],
                &SwitchHashing::Described(std::sync::Arc::new(d)),
                &ReorderModel::default(),
                &FailSpec::default(),
                false,
                1,
            );
            let p = r.iter().find(|p| p.policy == "foresight-entropy");
            p.unwrap().steering.unwrap()
        };
        let polarised = steering("asic-crc16-polarised.yaml");
        assert!(
            polarised.no_port > 0 && polarised.steered > 0,
            "{polarised:?}"
        );
        let spread = steering("asic-crc16.yaml");
        assert!(spread.reserved > 1000, "{spread:?}");
        assert_eq!(
            (spread.steered, spread.no_port),
            (spread.reserved, 0),
            "{spread:?}"
        );
    }

    #[test]
    fn foresight_and_spray_are_ideal_ecmp_is_worse_on_average() {
        let t = leaf_spine_256();
        let mut ecmp_sum = 0.0;
        let seeds = [0u64, 1, 2, 3];
        for &seed in &seeds {
            let w = build(
                &t,
                &WorkloadSpec {
                    kind: WorkloadKind::Ring,
                    bytes: 64 << 20,
                    seed,
                    ..Default::default()
                },
            )
            .unwrap();
            let r = run_all(
                &t,
                &w,
                &[Policy::Ecmp, Policy::Spray(Nic::Ooo), Policy::Foresight],
                &SeedPolicy::PerSwitch.into(),
                &ReorderModel::default(),
                &FailSpec::default(),
                false,
                1,
            );
            let get = |n: &str| r.iter().find(|x| x.policy == n).unwrap().mean_ratio;
            assert!(
                (get("spray-ooo") - 1.0).abs() < 1e-6,
                "spray {}",
                get("spray-ooo")
            );
            assert!(
                (get("foresight") - 1.0).abs() < 1e-6,
                "foresight {}",
                get("foresight")
            );
            assert!(get("ecmp") >= 1.0 - 1e-9);
            ecmp_sum += get("ecmp");
        }
        assert!(
            ecmp_sum / seeds.len() as f64 > 1.2,
            "ecmp mean {}",
            ecmp_sum / 4.0
        );
    }

    /// Spraying onto out-of-order-tolerant NICs is the fluid spraying of
    /// before, whatever the reordering model says; onto go-back-N NICs the
    /// same traffic on a loaded fabric loses goodput to rewinds, and more
    /// where NICs also send CNPs. Flowlets on go-back-N NICs pay only where
    /// the delay spread reaches the flowlet timeout.
    #[test]
    fn go_back_n_pays_for_reordering_and_ooo_nics_do_not() {
        let t = Topology::from_spec(preset(Preset::Clos3, 256).unwrap()).unwrap();
        // A ring with background streams: ring flows run at line rate, so
        // their packets are one packet time apart, within the spread.
        let w = build(
            &t,
            &WorkloadSpec {
                bytes: 64 << 20,
                background_load: 0.3,
                ..Default::default()
            },
        )
        .unwrap();
        let run = |p: Policy, m: &ReorderModel| {
            run_policy(&t, &w, p, &SeedPolicy::PerSwitch.into(), m, &[], None, None).jobs[0]
                .iteration_ns[0]
        };
        let base = ReorderModel::default();
        let odd = ReorderModel {
            packet_bits: 8192.0,
            rtt_ns: 50_000.0,
            max_queue_pkts: 500.0,
            nic_burst: 64,
            flowlet_timeout_ns: 1.0,
            cnp_on_ooo: true,
            ..base
        };
        let ooo = run(Policy::Spray(Nic::Ooo), &base);
        assert_eq!(ooo, run(Policy::Spray(Nic::Ooo), &odd));
        assert_eq!(ooo, run(Policy::parse("spray", 4).unwrap(), &base));
        let gbn = run(Policy::Spray(Nic::Gbn), &base);
        assert!(gbn > 1.05 * ooo, "spray-gbn {gbn} vs spray-ooo {ooo}");
        let cnp = ReorderModel {
            cnp_on_ooo: true,
            ..base
        };
        let with_cnp = run(Policy::Spray(Nic::Gbn), &cnp);
        assert!(with_cnp > gbn, "with CNPs {with_cnp} vs {gbn}");
        // An idle spread (queues capped at nothing) costs nothing.
        let calm = ReorderModel {
            max_queue_pkts: 0.0,
            ..base
        };
        assert_eq!(run(Policy::Spray(Nic::Gbn), &calm), ooo);
        // Flowlets: the default timeout is far above the spread.
        let fl = run(Policy::Flowlet(Nic::Ooo), &base);
        assert_eq!(run(Policy::Flowlet(Nic::Gbn), &base), fl);
        let short = ReorderModel {
            flowlet_timeout_ns: 1.0,
            ..base
        };
        assert!(run(Policy::Flowlet(Nic::Gbn), &short) > fl);
        assert_eq!(run(Policy::Flowlet(Nic::Ooo), &short), fl);
    }

    #[test]
    fn policy_names_parse_and_bare_flowlet_is_refused() {
        for p in Policy::all(4) {
            assert_eq!(Policy::parse(&p.name(), 4).unwrap(), p);
        }
        assert_eq!(Policy::parse("spray", 4).unwrap(), Policy::Spray(Nic::Ooo));
        let e = Policy::parse("flowlet", 4).unwrap_err().to_string();
        assert!(
            e.contains("flowlet-gbn") && e.contains("flowlet-ooo"),
            "{e}"
        );
        let e = Policy::parse("sprey", 4).unwrap_err().to_string();
        assert!(e.contains("spray-gbn"), "{e}");
    }

    /// Every policy on a small 3-tier fabric, the engine equals the
    /// from-scratch reference: all-to-all with background flows and a link
    /// failing mid-run; MoE with background streams on a fabric with a
    /// link down from the start; the three jobs of multi-job.
    #[test]
    fn policies_agree_with_the_reference_engine() {
        let t = Topology::from_spec(preset(Preset::Clos3, 64).unwrap()).unwrap();
        let link = random_links(&t, 1, 5);
        let cases = [
            (
                WorkloadSpec {
                    kind: WorkloadKind::AllToAll,
                    bytes: 16 << 20,
                    background: 20,
                    background_bytes: 4 << 20,
                    iterations: 2,
                    seed: 3,
                    ..Default::default()
                },
                200_000.0,
            ),
            (
                WorkloadSpec {
                    kind: WorkloadKind::Moe,
                    bytes: 16 << 20,
                    background_load: 0.2,
                    ..Default::default()
                },
                0.0,
            ),
            (
                WorkloadSpec {
                    kind: WorkloadKind::MultiJob,
                    bytes: 16 << 20,
                    kv_bytes: 4 << 20,
                    ..Default::default()
                },
                f64::INFINITY,
            ),
        ];
        for (spec, at_ns) in cases {
            let mut last: HashMap<String, Vec<f64>> = HashMap::new();
            let mut w = build(&t, &spec).unwrap();
            // Exactly; coalescing is checked against exact runs below.
            w.coalesce_ns = 0.0;
            let failures = [Failure {
                at_ns,
                edges: link.clone(),
            }];
            for p in [
                Policy::Ideal,
                Policy::Ecmp,
                Policy::QpHash { qps: 2 },
                Policy::Adaptive,
                Policy::Spray(Nic::Ooo),
                Policy::Spray(Nic::Gbn),
                Policy::Flowlet(Nic::Ooo),
                Policy::Flowlet(Nic::Gbn),
                Policy::Foresight,
            ] {
                // Go-back-N with CNPs, and a flowlet timeout short enough
                // for new flowlets to overtake: every factor is exercised.
                let model = ReorderModel {
                    cnp_on_ooo: true,
                    flowlet_timeout_ns: 150.0,
                    ..ReorderModel::default()
                };
                let mut a = setup(&t, &w, p, &SeedPolicy::PerSwitch.into(), &model, &failures);
                let mut b = setup(&t, &w, p, &SeedPolicy::PerSwitch.into(), &model, &failures);
                let opts = Options {
                    progress: None,
                    finish_times: true,
                    coalesce_ns: w.coalesce_ns,
                };
                let fast = simulate(&a.flows, &a.jobs, &a.cap, &mut a.router, &failures, opts);
                let slow = reference::simulate(
                    &b.flows,
                    &b.jobs,
                    &b.cap,
                    &mut b.router,
                    &failures,
                    w.coalesce_ns,
                );
                let name = format!("{} {}", w.name, p.name());
                assert_eq!(fast.unfinished, slow.unfinished, "{name}");
                let close = |x: f64, y: f64| x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
                let (fi, si) = (fast.iteration_ns.concat(), slow.iteration_ns.concat());
                assert_eq!(fi.len(), si.len());
                for (x, y) in fi.iter().zip(&si) {
                    assert!(close(*x, *y), "{name}: iteration {x} vs {y}");
                }
                for (i, (x, y)) in fast.finish_ns.iter().zip(&slow.finish_ns).enumerate() {
                    assert!(close(*x, *y), "{name}: flow {i} finished at {x} vs {y}");
                }
                assert!(fast.events > 10, "{name}: {} events", fast.events);
                last.insert(p.name(), fi);
            }
            // The go-back-N factors were in play: those runs took longer.
            for kind in ["spray", "flowlet"] {
                let (g, o) = (&last[&format!("{kind}-gbn")], &last[&format!("{kind}-ooo")]);
                assert!(
                    g.iter().sum::<f64>() > o.iter().sum::<f64>(),
                    "{}: {kind} gbn {g:?} vs ooo {o:?}",
                    w.name
                );
            }
        }
    }

    /// MoE finishes within 0.1 % of the phase are merged; iteration times
    /// stay within 0.2 % of the exact simulation under every policy.
    #[test]
    fn moe_coalescing_stays_close_to_exact() {
        let t = Topology::from_spec(preset(Preset::Clos3, 256).unwrap()).unwrap();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Moe,
                bytes: 16 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(w.coalesce_ns > 0.0);
        let mut exact = w.clone();
        exact.coalesce_ns = 0.0;
        for p in Policy::all(2) {
            let m = ReorderModel::default();
            let a = run_policy(
                &t,
                &w,
                p,
                &SeedPolicy::PerSwitch.into(),
                &m,
                &[],
                None,
                None,
            );
            let b = run_policy(
                &t,
                &exact,
                p,
                &SeedPolicy::PerSwitch.into(),
                &m,
                &[],
                None,
                None,
            );
            let (x, y) = (a.jobs[0].iteration_ns[0], b.jobs[0].iteration_ns[0]);
            assert!((x - y).abs() <= 2e-3 * y, "{}: {x} vs exact {y}", a.policy);
            assert!(
                a.events < b.events,
                "{}: {} vs {} events",
                a.policy,
                a.events,
                b.events
            );
        }
    }

    #[test]
    fn failure_mid_run_is_survived() {
        let t = leaf_spine_256();
        let w = build(
            &t,
            &WorkloadSpec {
                bytes: 64 << 20,
                iterations: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let fail = FailSpec {
            edges: random_links(&t, 4, 7),
            at_ns: None,
        };
        assert_eq!(fail.edges.len(), 8);
        let r = run_all(
            &t,
            &w,
            &Policy::all(4),
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &fail,
            false,
            2,
        );
        for p in &r {
            assert_eq!(p.unfinished, 0, "{}", p.policy);
            assert!(p.mean_ratio >= 1.0 - 1e-9, "{} {}", p.policy, p.mean_ratio);
        }
    }

    #[test]
    fn mix_with_background_runs() {
        let t = leaf_spine_256();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Mix,
                bytes: 32 << 20,
                kv_bytes: 16 << 20,
                background: 50,
                background_bytes: 8 << 20,
                iterations: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let r = run_all(
            &t,
            &w,
            &Policy::all(4),
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &FailSpec::default(),
            false,
            0,
        );
        assert_eq!(r.len(), 9);
        for p in &r {
            assert_eq!(p.unfinished, 0);
            assert_eq!(p.jobs[0].iteration_ns.len(), 2);
            assert!(p.jobs[0]
                .iteration_ns
                .iter()
                .all(|x| x.is_finite() && *x > 0.0));
        }
    }

    /// All-to-all between the 8 leaves (one 4-NIC server each) of a 3-tier
    /// Clos whose spines hash over 4 super-spines: with one seed everywhere
    /// every spine repeats its leaf's choice and uses one uplink of 4;
    /// per-switch seeds spread a pod's leaves over more of them, for ECMP
    /// and QP hashing alike (how far is fixed by the seeds, see
    /// `planner::ecmp`).
    #[test]
    fn per_switch_seeds_use_more_of_a_three_tier_fabric() {
        let t = Topology::from_spec(
            planner::topology::generate::multi_pod(&planner::topology::generate::MultiPod {
                pods: 2,
                leaves_per_pod: 4,
                spines_per_pod: 4,
                superspines_per_plane: 4,
                hosts_per_leaf: 4,
                nics_per_server: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::AllToAll,
                bytes: 16 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        let run = |seeds: SeedPolicy| {
            let policies = [Policy::Ecmp, Policy::QpHash { qps: 2 }];
            let m = ReorderModel::default();
            run_all(
                &t,
                &w,
                &policies,
                &seeds.into(),
                &m,
                &FailSpec::default(),
                false,
                1,
            )
        };
        let (same, per_switch) = (run(SeedPolicy::Same(0)), run(SeedPolicy::PerSwitch));
        for p in 1..3 {
            let name = &same[p].policy;
            // Leaf-spine links both ways (8 x 4 x 2) plus one super-spine
            // link per spine each way (8 x 2).
            assert_eq!(same[p].util.links, 64 + 16, "{name}");
            assert!(per_switch[p].util.links > 64 + 16, "{name}");
            assert!(
                per_switch[p].mean_ratio < same[p].mean_ratio,
                "{name}: {} vs {}",
                per_switch[p].mean_ratio,
                same[p].mean_ratio
            );
        }
    }
}
