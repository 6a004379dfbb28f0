//! Workloads: jobs that repeat collectives every iteration (the planner's
//! collectives expanded to flows, one per QP connection), plus traffic
//! nobody announces.
//!
//! * `ring`, `all-to-all`, `mix` (ring on half the servers, prefill→decode
//!   KV transfers on the other half): one job.
//! * `moe`: expert-parallel all-to-alls with uneven token counts: every
//!   group of `ep_gpus` GPUs on consecutive servers (as frameworks place
//!   expert-parallel ranks) exchanges tokens at once (see [`moe_weights`]).
//! * `multi-job`: two training jobs with different iteration periods and
//!   inference KV transfers, sharing the fabric (see [`build`]).
//! * Background: `background` random NIC-pair flows spread over the run,
//!   and/or a stated load: every NIC streams to a random NIC of another
//!   server at up to `background_load` of its line rate for the whole run.

use std::ops::Range;

use anyhow::{bail, Context};
use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::conventions::{udp_src_port_for_qp, FIRST_QP, QP_MASK};
use planner::demand::{Demand, DemandKind, Flow, QpAllocator};
use planner::rng::Rng;
use planner::topology::{HostIdx, Topology};

/// Largest all-to-all simulated (connections per iteration): 8,192 GPUs
/// at 8 channels is 8.4 million, about 2 GB with 4 QPs per connection.
pub const MAX_ALL_TO_ALL_FLOWS: u64 = 10_000_000;

/// What runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Ring all-reduce over all the GPUs.
    Ring,
    /// All-to-all over all the GPUs.
    AllToAll,
    /// Expert-parallel all-to-all over all the GPUs, uneven token counts.
    Moe,
    /// Ring all-reduce on the first half of the servers and prefill→decode
    /// KV-cache transfers on the other half.
    Mix,
    /// Two training jobs and inference KV transfers.
    MultiJob,
}

impl WorkloadKind {
    /// Name used on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ring => "ring-allreduce",
            WorkloadKind::AllToAll => "all-to-all",
            WorkloadKind::Moe => "moe",
            WorkloadKind::Mix => "mix",
            WorkloadKind::MultiJob => "multi-job",
        }
    }
}

/// How to build a workload.
#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    /// Kind.
    pub kind: WorkloadKind,
    /// GPUs taking part (whole servers); `None` = every GPU of the fabric.
    pub gpus: Option<u32>,
    /// Collective buffer size, bytes.
    pub bytes: u64,
    /// Channels (QP connections per neighbour pair); `None` = GPUs per
    /// server (all-to-all and MoE: 8).
    pub channels: Option<u32>,
    /// KV-cache bytes per prefill server (mix, multi-job).
    pub kv_bytes: u64,
    /// Background flows (random NIC pairs, random start over the run).
    pub background: u32,
    /// Bytes per background flow.
    pub background_bytes: u64,
    /// Background streams: every NIC sends up to this fraction of its line
    /// rate to a random NIC of another server, all run long (0: none).
    pub background_load: f64,
    /// MoE: standard deviation of the log of expert popularity.
    pub moe_skew: f64,
    /// MoE: GPUs per expert-parallel group (all GPUs when at least that many).
    pub ep_gpus: u32,
    /// Iterations (multi-job: of the first training job, at least 3).
    pub iterations: u32,
    /// Random draws (MoE weights, background); unless 0, also random QPs
    /// instead of the planner's allocator order.
    pub seed: u64,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            kind: WorkloadKind::Ring,
            gpus: None,
            bytes: 1 << 30,
            channels: None,
            kv_bytes: 1 << 30,
            background: 0,
            background_bytes: 64 << 20,
            background_load: 0.0,
            moe_skew: 0.3,
            ep_gpus: 64,
            iterations: 1,
            seed: 0,
        }
    }
}

/// A job: the demands it runs every iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Name in outputs.
    pub name: String,
    /// Its demands, indices into [`Workload::demands`].
    pub demands: Range<usize>,
    /// Iterations.
    pub iterations: u32,
    /// Compute between the end of one iteration and the next, ns.
    pub gap_ns: f64,
}

/// A built workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Announced demands of one iteration of every job; their flows are the
    /// connections, started relative to their iteration.
    pub demands: Vec<Demand>,
    /// The jobs, by demand range.
    pub jobs: Vec<JobSpec>,
    /// Background flows (absolute start; never announced).
    pub background: Vec<Flow>,
    /// Background streams (never announced; run the whole simulation at up
    /// to `rate_bps`).
    pub streams: Vec<Flow>,
    /// Name.
    pub name: String,
    /// Finishes closer than this are simulated as one, ns (0: exact).
    /// MoE: 0.1 % of its nominal phase, since uneven sizes make every finish
    /// its own event and exact max-min then re-rates most flows each time.
    pub coalesce_ns: f64,
    /// MoE: the EP groups, servers in rank order, one per demand (empty
    /// otherwise), so a planner can route the groups from their structure.
    pub ep_groups: Vec<Vec<u32>>,
    /// MoE steps after the first: per iteration `n ≥ 1`, at `n − 1`, the
    /// bytes of every connection (in [`Workload::connections`] order), a
    /// new token draw per step on the same connections. Empty: every
    /// iteration repeats the demands' bytes.
    pub step_bytes: Vec<Vec<u64>>,
}

impl Workload {
    /// Announced connections of one iteration of every job, in demand order.
    pub fn connections(&self) -> impl Iterator<Item = &Flow> {
        self.demands.iter().flat_map(|d| d.flows.iter())
    }

    /// Bytes of connection `conn` (index into [`Workload::connections`],
    /// whose flow is `f`) in iteration `iteration` of its job.
    pub fn bytes(&self, iteration: u32, conn: usize, f: &Flow) -> u64 {
        match iteration.checked_sub(1) {
            Some(n) if !self.step_bytes.is_empty() => self.step_bytes[n as usize][conn],
            _ => f.bytes,
        }
    }
}

fn collective(
    topo: &Topology,
    kind: CollectiveKind,
    servers: Vec<u32>,
    bytes: u64,
    channels: Option<u32>,
    qps: &mut QpAllocator,
) -> anyhow::Result<Demand> {
    let mut c = Collective::new(kind, servers, bytes);
    c.channels = channels.unwrap_or(topo.servers()[c.servers[0] as usize].gpus.max(1));
    let flows = expand(topo, &c, qps).with_context(|| format!("expanding {kind}"))?;
    Ok(Demand {
        id: kind.name().into(),
        tenant: "sim".into(),
        priority: 100,
        elastic: false,
        deadline_ns: None,
        kind: DemandKind::Collective(kind),
        flows,
    })
}

/// Sets a flow's destination QP (and the UDP source port derived from it).
pub fn set_qp(f: &mut Flow, qp: u32) {
    f.dest_qp = qp & QP_MASK;
    f.udp_src_port = udp_src_port_for_qp(f.dest_qp);
}

/// A standard normal draw (Box–Muller).
pub(crate) fn normal(rng: &mut Rng) -> f64 {
    let u = 1.0 - rng.unit();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.unit()).cos()
}

/// A log-normal draw with mean 1: `exp(σz − σ²/2)`.
fn lognormal(rng: &mut Rng, sigma: f64) -> f64 {
    (sigma * normal(rng) - sigma * sigma / 2.0).exp()
}

/// MoE token imbalance: the factor on the all-to-all share for each
/// (source server, destination NIC). Each GPU hosts one expert; expert
/// popularity per destination NIC is log-normal with mean 1 and log
/// standard deviation `skew` (a few experts draw several times the mean);
/// each source server's routing varies around it, log-normal with `skew / 2`.
pub fn moe_weights(topo: &Topology, servers: &[u32], skew: f64, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = Rng::new(seed ^ 0x0e5e_a5e5);
    let popularity: Vec<f64> = (0..topo.hosts().len())
        .map(|_| lognormal(&mut rng, skew))
        .collect();
    servers
        .iter()
        .map(|_| {
            popularity
                .iter()
                .map(|&p| p * lognormal(&mut rng, skew / 2.0))
                .collect()
        })
        .collect()
}

/// One MoE step's bytes for an all-to-all's flows (`base`: their even
/// bytes): each reweighted by its entry of the [`moe_weights`] draw from
/// `seed`. Only the entries the flows use are drawn, each at its place
/// in the random stream ([`moe_weight_at`]), so a group costs its own
/// flows, not its servers times every NIC of the fabric (at 102,400 GPUs
/// the whole draw was over a billion log-normals per step).
fn moe_bytes(
    topo: &Topology,
    flows: &[Flow],
    base: &[u64],
    servers: &[u32],
    skew: f64,
    seed: u64,
) -> Vec<u64> {
    let mut pos = vec![usize::MAX; topo.servers().len()];
    for (i, &s) in servers.iter().enumerate() {
        pos[s as usize] = i;
    }
    let hosts = topo.hosts();
    let n = hosts.len() as u64;
    let mut popularity = std::collections::HashMap::new();
    flows
        .iter()
        .zip(base)
        .map(|(f, &b)| {
            let a = pos[hosts[f.src as usize].server as usize] as u64;
            let dst = f.dst as u64;
            let p = *popularity
                .entry(dst)
                .or_insert_with(|| moe_weight_at(seed, dst, skew));
            let w = p * moe_weight_at(seed, n + a * n + dst, skew / 2.0);
            ((b as f64 * w).round() as u64).max(1)
        })
        .collect()
}

/// The `k`-th log-normal draw of [`moe_weights`]'s stream from `seed`
/// with log-sd `sigma`: each draw takes two outputs of the SplitMix64
/// generator, whose state after `j` outputs is the seed plus `j` times
/// its increment, so the stream can start at any draw.
fn moe_weight_at(seed: u64, k: u64, sigma: f64) -> f64 {
    const STEP: u64 = 0x9e37_79b9_7f4a_7c15;
    let state = (seed ^ 0x0e5e_a5e5).wrapping_add((2 * k).wrapping_mul(STEP));
    lognormal(&mut Rng::new(state), sigma)
}

/// Sets an all-to-all's flows to `bytes` and announces each flow at the
/// rate that ends every flow together at the pace of the busiest NIC (so
/// the demand never asks more of a NIC than it has). Returns that nominal
/// duration, ns.
fn announce_moe(topo: &Topology, d: &mut Demand, bytes: &[u64]) -> f64 {
    let hosts = topo.hosts();
    let mut through = vec![0u128; hosts.len() * 2];
    for (f, &b) in d.flows.iter_mut().zip(bytes) {
        f.bytes = b;
        through[f.src as usize * 2] += b as u128;
        through[f.dst as usize * 2 + 1] += b as u128;
    }
    // Busiest NIC at 90 % of its line rate sets the duration.
    let dur_ns = through
        .iter()
        .enumerate()
        .map(|(k, &b)| b as f64 * 8e9 / (0.9 * hosts[k / 2].capacity_bps as f64))
        .fold(1.0, f64::max);
    for f in &mut d.flows {
        f.duration_ns = dur_ns.ceil() as u64;
        f.rate_bps = ((f.bytes as f64 * 8e9 / dur_ns).ceil() as u64).max(1);
    }
    dur_ns
}

/// The seed of MoE step `step` of EP group `group`: step 0 keeps the
/// draws of single-step runs, later steps draw afresh.
fn moe_seed(seed: u64, group: usize, step: u32) -> u64 {
    seed ^ (group as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (step as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)
}

/// All-to-all among `servers` within [`MAX_ALL_TO_ALL_FLOWS`].
fn a2a_fits(servers: &[u32], spec: &WorkloadSpec) -> anyhow::Result<()> {
    let s = servers.len() as u64;
    let ch = spec.channels.unwrap_or(8) as u64;
    if s * s.saturating_sub(1) * ch > MAX_ALL_TO_ALL_FLOWS {
        bail!(
            "{} on {s} servers is {} flows; the simulator takes at most {MAX_ALL_TO_ALL_FLOWS} (about 1,100 servers at 8 channels; use fewer --gpus)",
            spec.kind.name(),
            s * (s - 1) * ch
        );
    }
    Ok(())
}

/// The EP groups of `ep_gpus` GPUs on consecutive `servers` (one group of
/// them all when they have no more GPUs than that): whole servers, as
/// many in every group.
pub fn ep_groups_of(
    topo: &Topology,
    servers: &[u32],
    ep_gpus: u32,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let Some(&first) = servers.first() else {
        bail!("--ep-gpus {ep_gpus}: no servers to group");
    };
    let per_server = topo.servers()[first as usize].gpus.max(1);
    let group = (ep_gpus / per_server).max(1) as usize;
    if ep_gpus == 0
        || ep_gpus % per_server != 0
        || (servers.len() > group && servers.len() % group != 0)
    {
        bail!(
            "--ep-gpus {ep_gpus}: expert-parallel groups must be whole servers ({per_server} GPUs) dividing the {} servers",
            servers.len()
        );
    }
    Ok(servers.chunks(group).map(<[u32]>::to_vec).collect())
}

/// Nominal communication time of a demand (at its announced rates), ns.
fn nominal_ns(d: &Demand) -> f64 {
    (d.end_ns() - d.start_ns()).max(1) as f64
}

/// Builds the workload on a fabric.
///
/// `multi-job` deals the servers out in turn, `a b a b a b i i` per eight
/// (as a scheduler filling a fragmented cluster would: the jobs share
/// leaves and uplinks), 3/8, 3/8 and 1/4 of them:
/// * `train-a`: ring all-reduce of `bytes`, computing between iterations as
///   long as its nominal communication takes, `max(iterations, 3)` times;
/// * `train-b`: ring all-reduce of `bytes / 2`, computing 0.6 × its
///   communication time, so the two jobs' communication phases drift
///   against each other;
/// * `infer`: prefill→decode KV transfers of `kv_bytes` per prefill server
///   (half the inference servers), a round every quarter of `train-a`'s
///   communication time.
///
/// The second and third run as many iterations as span `train-a`'s run.
pub fn build(topo: &Topology, spec: &WorkloadSpec) -> anyhow::Result<Workload> {
    if spec.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    if !(0.0..=1.0).contains(&spec.background_load) {
        bail!(
            "--background-load {}: a fraction of the NIC line rate, in [0, 1]",
            spec.background_load
        );
    }
    if !(spec.moe_skew >= 0.0 && spec.moe_skew.is_finite()) {
        bail!(
            "--moe-skew {}: must be finite and at least 0",
            spec.moe_skew
        );
    }
    let total: u32 = topo.servers().iter().map(|s| s.gpus).sum();
    let gpus = spec.gpus.unwrap_or(total);
    let servers = select_servers(topo, gpus).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut qps = QpAllocator::new(topo);
    let mut demands = Vec::new();
    let mut coalesce_ns = 0.0;
    let mut ep_groups = Vec::new();
    let mut step_bytes = Vec::new();
    let one_job = |name: &str, n: usize| {
        vec![JobSpec {
            name: name.into(),
            demands: 0..n,
            iterations: spec.iterations,
            gap_ns: 0.0,
        }]
    };
    let jobs = match spec.kind {
        WorkloadKind::Ring => {
            demands.push(collective(
                topo,
                CollectiveKind::RingAllreduce,
                servers,
                spec.bytes,
                spec.channels,
                &mut qps,
            )?);
            one_job(spec.kind.name(), 1)
        }
        WorkloadKind::AllToAll => {
            a2a_fits(&servers, spec)?;
            demands.push(collective(
                topo,
                CollectiveKind::AllToAll,
                servers,
                spec.bytes,
                spec.channels,
                &mut qps,
            )?);
            one_job(spec.kind.name(), 1)
        }
        WorkloadKind::Moe => {
            let mut longest: f64 = 0.0;
            let steps = spec.iterations;
            let mut later: Vec<Vec<u64>> = vec![Vec::new(); steps as usize - 1];
            for (g, members) in ep_groups_of(topo, &servers, spec.ep_gpus)?
                .iter()
                .enumerate()
            {
                a2a_fits(members, spec)?;
                let mut d = collective(
                    topo,
                    CollectiveKind::AllToAll,
                    members.to_vec(),
                    spec.bytes,
                    spec.channels,
                    &mut qps,
                )?;
                let base: Vec<u64> = d.flows.iter().map(|f| f.bytes).collect();
                let draw = |step| {
                    let seed = moe_seed(spec.seed, g, step);
                    moe_bytes(topo, &d.flows, &base, members, spec.moe_skew, seed)
                };
                for (n, out) in later.iter_mut().enumerate() {
                    out.extend(draw(n as u32 + 1));
                }
                let first = draw(0);
                longest = longest.max(announce_moe(topo, &mut d, &first));
                d.id = format!("moe-ep{g}");
                demands.push(d);
                ep_groups.push(members.clone());
            }
            step_bytes = later;
            coalesce_ns = 1e-3 * longest;
            one_job(spec.kind.name(), demands.len())
        }
        WorkloadKind::Mix => {
            if servers.len() < 4 {
                bail!("mix needs at least 4 servers (2 training, 2 inference)");
            }
            let half = servers.len() / 2;
            demands.push(collective(
                topo,
                CollectiveKind::RingAllreduce,
                servers[..half].to_vec(),
                spec.bytes,
                spec.channels,
                &mut qps,
            )?);
            demands.push(collective(
                topo,
                CollectiveKind::KvTransfer,
                servers[half..].to_vec(),
                spec.kv_bytes,
                spec.channels,
                &mut qps,
            )?);
            one_job(spec.kind.name(), 2)
        }
        WorkloadKind::MultiJob => {
            let s = servers.len();
            if s < 8 {
                bail!("multi-job needs at least 8 servers (3 + 3 training, 2 inference), the fabric gives {s}");
            }
            const DEAL: [usize; 8] = [0, 1, 0, 1, 0, 1, 2, 2];
            let mut members: [Vec<u32>; 3] = Default::default();
            for (i, &sv) in servers.iter().enumerate() {
                members[DEAL[i % 8]].push(sv);
            }
            let parts = [
                (CollectiveKind::RingAllreduce, spec.bytes),
                (CollectiveKind::RingAllreduce, (spec.bytes / 2).max(1)),
                (CollectiveKind::KvTransfer, spec.kv_bytes),
            ];
            for ((kind, bytes), m) in parts.into_iter().zip(members) {
                demands.push(collective(topo, kind, m, bytes, spec.channels, &mut qps)?);
            }
            let comm: Vec<f64> = demands.iter().map(nominal_ns).collect();
            let gaps = [comm[0], 0.6 * comm[1], (0.25 * comm[0] - comm[2]).max(0.0)];
            let n_a = spec.iterations.max(3);
            let span = n_a as f64 * (comm[0] + gaps[0]);
            let runs = |k: usize| (span / (comm[k] + gaps[k])).ceil().max(1.0) as u32;
            ["train-a", "train-b", "infer"]
                .iter()
                .enumerate()
                .map(|(k, name)| JobSpec {
                    name: (*name).into(),
                    demands: k..k + 1,
                    iterations: if k == 0 { n_a } else { runs(k) },
                    gap_ns: gaps[k],
                })
                .collect()
        }
    };
    let mut rng = Rng::new(spec.seed ^ 0x5eed_f00d);
    if spec.seed != 0 {
        for d in &mut demands {
            for f in &mut d.flows {
                set_qp(f, FIRST_QP + rng.below((QP_MASK - FIRST_QP) as u64) as u32);
            }
        }
    }
    let n = topo.hosts().len() as u64;
    if (spec.background > 0 || spec.background_load > 0.0) && topo.servers().len() < 2 {
        bail!("background traffic needs at least 2 servers");
    }
    // A random NIC of another server than `a`'s.
    let peer = |a: HostIdx, rng: &mut Rng| loop {
        let b = rng.below(n) as HostIdx;
        if topo.hosts()[b as usize].server != topo.hosts()[a as usize].server {
            return b;
        }
    };
    // Background: spread over the run at the ideal pace of the first job.
    let mut background = Vec::new();
    if spec.background > 0 {
        let j = &jobs[0];
        let est_ns = demands[j.demands.clone()]
            .iter()
            .flat_map(|d| d.flows.iter())
            .map(|f| {
                f.bytes as f64 * 8.0 / (topo.hosts()[f.src as usize].capacity_bps as f64 / 1e9)
            })
            .fold(1.0, f64::max);
        let span = est_ns * j.iterations as f64;
        for _ in 0..spec.background {
            let a = rng.below(n) as HostIdx;
            let b = peer(a, &mut rng);
            let qp = qps.alloc(b);
            let rate = topo.hosts()[a as usize].capacity_bps;
            let start = (rng.unit() * span) as u64;
            background.push(Flow::new(
                topo,
                a,
                b,
                qp,
                start,
                spec.background_bytes,
                rate,
            ));
        }
    }
    let mut streams = Vec::new();
    if spec.background_load > 0.0 {
        let mut rng = Rng::new(spec.seed ^ 0xb6_10ad);
        for a in 0..n as HostIdx {
            let b = peer(a, &mut rng);
            let qp = qps.alloc(b);
            let cap = topo.hosts()[a as usize].capacity_bps as f64;
            let rate = ((spec.background_load * cap) as u64).max(1);
            streams.push(Flow::new(topo, a, b, qp, 0, 1, rate));
        }
    }
    Ok(Workload {
        demands,
        jobs,
        background,
        streams,
        name: spec.kind.name().into(),
        coalesce_ns,
        ep_groups,
        step_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use planner::topology::generate::{preset, Preset};

    fn clos(gpus: u32) -> Topology {
        Topology::from_spec(preset(Preset::Clos3, gpus).unwrap()).unwrap()
    }

    #[test]
    fn moe_is_uneven_with_mean_one_and_fits_the_nics() {
        let t = clos(256);
        let spec = WorkloadSpec {
            kind: WorkloadKind::Moe,
            ep_gpus: 256,
            ..Default::default()
        };
        let w = build(&t, &spec).unwrap();
        let a2a = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::AllToAll,
                ..spec.clone()
            },
        )
        .unwrap();
        let sum = |w: &Workload| w.connections().map(|f| f.bytes as f64).sum::<f64>();
        // Mean 1 over 7,936 flows: within a few percent of the uniform total.
        let r = sum(&w) / sum(&a2a);
        assert!((r - 1.0).abs() < 0.05, "total ratio {r}");
        let (lo, hi) = w.connections().fold((u64::MAX, 0), |(lo, hi), f| {
            (lo.min(f.bytes), hi.max(f.bytes))
        });
        assert!(hi > 4 * lo, "flows {lo}..{hi} bytes are not uneven");
        // Announced rates fill the busiest NIC to 90 % and no more.
        let mut up = vec![0u64; t.hosts().len()];
        for f in w.connections() {
            up[f.src as usize] += f.rate_bps;
        }
        let busiest = *up.iter().max().unwrap() as f64 / t.hosts()[0].capacity_bps as f64;
        assert!(busiest <= 0.9 + 1e-6, "busiest NIC at {busiest}");
        // Seeded: the same draws again.
        let again = build(&t, &spec).unwrap();
        assert!(again.connections().eq(w.connections()));
    }

    /// Drawing one entry at its place in the stream gives the entry of
    /// the whole draw, so skipping the fabric's other NICs changes nothing.
    #[test]
    fn moe_weight_at_is_the_whole_draws_entry() {
        let t = clos(256);
        let servers = [3u32, 4, 5];
        let (skew, seed) = (0.3, 77);
        let w = moe_weights(&t, &servers, skew, seed);
        let n = t.hosts().len() as u64;
        for (a, row) in w.iter().enumerate() {
            for (h, &x) in row.iter().enumerate() {
                let p = moe_weight_at(seed, h as u64, skew);
                let y = p * moe_weight_at(seed, n + a as u64 * n + h as u64, skew / 2.0);
                assert!((x - y).abs() <= 1e-12 * x, "server {a} NIC {h}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn moe_groups_are_consecutive_servers() {
        let t = clos(256);
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Moe,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(w.demands.len(), 4);
        assert!(w.coalesce_ns > 0.0);
        for (g, d) in w.demands.iter().enumerate() {
            assert_eq!(d.flows.len(), 8 * 7 * 8);
            for f in &d.flows {
                let s = t.hosts()[f.src as usize].server as usize;
                assert_eq!(s / 8, g, "group {g} flow from server {s}");
            }
        }
        let bad = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Moe,
                ep_gpus: 12,
                ..Default::default()
            },
        );
        assert!(bad.unwrap_err().to_string().contains("--ep-gpus 12"));
    }

    /// MoE steps after the first draw new bytes on the same connections;
    /// the first step is the single-step workload.
    #[test]
    fn moe_steps_draw_new_bytes_on_the_same_connections() {
        let t = clos(256);
        let spec = WorkloadSpec {
            kind: WorkloadKind::Moe,
            iterations: 3,
            ..Default::default()
        };
        let w = build(&t, &spec).unwrap();
        let one = build(
            &t,
            &WorkloadSpec {
                iterations: 1,
                ..spec.clone()
            },
        )
        .unwrap();
        assert!(one.step_bytes.is_empty());
        assert!(one.connections().eq(w.connections()));
        assert_eq!(w.ep_groups.len(), w.demands.len());
        let conns: Vec<&Flow> = w.connections().collect();
        assert_eq!(w.step_bytes.len(), 2);
        let step = |n: u32| -> Vec<u64> {
            conns
                .iter()
                .enumerate()
                .map(|(k, f)| w.bytes(n, k, f))
                .collect()
        };
        let (s0, s1, s2) = (step(0), step(1), step(2));
        assert_eq!(s0, conns.iter().map(|f| f.bytes).collect::<Vec<_>>());
        assert_eq!((&s1, &s2), (&w.step_bytes[0], &w.step_bytes[1]));
        for (a, b) in [(&s0, &s1), (&s1, &s2)] {
            let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
            assert!(
                same * 100 < a.len(),
                "{same} of {} flows kept their bytes",
                a.len()
            );
            let (ta, tb) = (a.iter().sum::<u64>() as f64, b.iter().sum::<u64>() as f64);
            assert!((ta / tb - 1.0).abs() < 0.05, "totals {ta} vs {tb}");
        }
    }

    #[test]
    fn multi_job_has_three_jobs_on_disjoint_servers_sharing_leaves() {
        let t = clos(256);
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::MultiJob,
                bytes: 64 << 20,
                kv_bytes: 16 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(w.jobs.len(), 3);
        assert_eq!(w.jobs[0].iterations, 3);
        assert!(w.jobs[1].iterations > 3, "{:?}", w.jobs[1]);
        let servers = |k: usize| -> std::collections::BTreeSet<u32> {
            w.demands[k]
                .flows
                .iter()
                .flat_map(|f| [f.src, f.dst])
                .map(|h| t.hosts()[h as usize].server)
                .collect()
        };
        assert!(servers(0).is_disjoint(&servers(1)));
        assert!(servers(1).is_disjoint(&servers(2)));
        assert!(servers(0).is_disjoint(&servers(2)));
        assert_eq!(
            (servers(0).len(), servers(1).len(), servers(2).len()),
            (12, 12, 8)
        );
        // The first leaf (4 servers) holds both training jobs.
        assert!(servers(0).contains(&0) && servers(1).contains(&1));
    }

    #[test]
    fn background_load_is_one_capped_stream_per_nic_off_server() {
        let t = clos(64);
        let w = build(
            &t,
            &WorkloadSpec {
                background_load: 0.25,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(w.streams.len(), t.hosts().len());
        for (a, f) in w.streams.iter().enumerate() {
            assert_eq!(f.src as usize, a);
            assert_ne!(
                t.hosts()[f.src as usize].server,
                t.hosts()[f.dst as usize].server
            );
            assert_eq!(f.rate_bps, t.hosts()[a].capacity_bps / 4);
        }
        let bad = build(
            &t,
            &WorkloadSpec {
                background_load: 1.5,
                ..Default::default()
            },
        );
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("--background-load 1.5"));
    }
}
