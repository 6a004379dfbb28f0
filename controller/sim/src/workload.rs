//! Workloads: the planner's collectives expanded to flows (one flow per QP
//! connection), plus background traffic.

use anyhow::{bail, Context};
use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::conventions::{udp_src_port_for_qp, FIRST_QP, QP_MASK};
use planner::demand::{Demand, DemandKind, Flow, QpAllocator};
use planner::rng::Rng;
use planner::topology::Topology;

/// Largest all-to-all simulated (connections per iteration): 8,192 GPUs
/// at 8 channels is 8.4 million, about 2 GB with 4 QPs per connection.
pub const MAX_ALL_TO_ALL_FLOWS: u64 = 10_000_000;

/// What runs every iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Ring all-reduce over all the GPUs.
    Ring,
    /// All-to-all over all the GPUs.
    AllToAll,
    /// Ring all-reduce on the first half of the servers and prefill→decode
    /// KV-cache transfers on the other half.
    Mix,
}

impl WorkloadKind {
    /// Name used on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ring => "ring-allreduce",
            WorkloadKind::AllToAll => "all-to-all",
            WorkloadKind::Mix => "mix",
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
    /// Channels (QP connections per neighbour pair); `None` = GPUs per server.
    pub channels: Option<u32>,
    /// KV-cache bytes per prefill server (mix).
    pub kv_bytes: u64,
    /// Background flows (random NIC pairs, random start over the run).
    pub background: u32,
    /// Bytes per background flow.
    pub background_bytes: u64,
    /// Iterations.
    pub iterations: u32,
    /// 0: QPs as the planner's allocator hands them out; otherwise random QPs from this seed.
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
            iterations: 1,
            seed: 0,
        }
    }
}

/// A built workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Announced demands (one per collective) of one iteration; their flows
    /// are the connections, started relative to the iteration.
    pub demands: Vec<Demand>,
    /// Background flows (absolute start; never announced).
    pub background: Vec<Flow>,
    /// Iterations.
    pub iterations: u32,
    /// Name.
    pub name: String,
}

impl Workload {
    /// Announced connections of one iteration, in demand order.
    pub fn connections(&self) -> impl Iterator<Item = &Flow> {
        self.demands.iter().flat_map(|d| d.flows.iter())
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

/// Builds the workload on a fabric.
pub fn build(topo: &Topology, spec: &WorkloadSpec) -> anyhow::Result<Workload> {
    if spec.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    let total: u32 = topo.servers().iter().map(|s| s.gpus).sum();
    let gpus = spec.gpus.unwrap_or(total);
    let servers = select_servers(topo, gpus).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut qps = QpAllocator::new(topo);
    let mut demands = Vec::new();
    match spec.kind {
        WorkloadKind::Ring => demands.push(collective(
            topo,
            CollectiveKind::RingAllreduce,
            servers,
            spec.bytes,
            spec.channels,
            &mut qps,
        )?),
        WorkloadKind::AllToAll => {
            let s = servers.len() as u64;
            let ch = spec.channels.unwrap_or(8) as u64;
            if s * (s - 1) * ch > MAX_ALL_TO_ALL_FLOWS {
                bail!(
                    "all-to-all on {s} servers is {} flows; the simulator takes at most {MAX_ALL_TO_ALL_FLOWS} (about 1,100 servers at 8 channels; use fewer --gpus)",
                    s * (s - 1) * ch
                );
            }
            demands.push(collective(
                topo,
                CollectiveKind::AllToAll,
                servers,
                spec.bytes,
                spec.channels,
                &mut qps,
            )?)
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
        }
    }
    let mut rng = Rng::new(spec.seed ^ 0x5eed_f00d);
    if spec.seed != 0 {
        for d in &mut demands {
            for f in &mut d.flows {
                set_qp(f, FIRST_QP + rng.below((QP_MASK - FIRST_QP) as u64) as u32);
            }
        }
    }
    // Background: spread over the run at the ideal pace of the workload.
    let mut background = Vec::new();
    if spec.background > 0 {
        let est_ns = demands
            .iter()
            .flat_map(|d| d.flows.iter())
            .map(|f| {
                f.bytes as f64 * 8.0 / (topo.hosts()[f.src as usize].capacity_bps as f64 / 1e9)
            })
            .fold(1.0, f64::max);
        let span = est_ns * spec.iterations as f64;
        let n = topo.hosts().len() as u64;
        if n < 2 {
            bail!("background traffic needs at least 2 NICs");
        }
        for _ in 0..spec.background {
            let a = rng.below(n) as u32;
            let mut b = rng.below(n - 1) as u32;
            if b >= a {
                b += 1;
            }
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
    Ok(Workload {
        demands,
        background,
        iterations: spec.iterations,
        name: spec.kind.name().into(),
    })
}
