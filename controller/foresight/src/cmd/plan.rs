//! `foresight plan`: reservations and predicted completion for a demand
//! file or one collective, on a topology file or a generated fabric.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::conventions::gbps_to_bps;
use planner::demand::{self, parse_bytes, Demand, DemandKind, QpAllocator};
use planner::ecmp::{self, HashMode, SeedPolicy};
use planner::report::{self, EcmpComparison, ReportOptions};
use planner::topology::{generate, yaml, Topology};
use planner::{Planner, PlannerConfig};

use super::topo::FabricPreset;

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    RingAllreduce,
    TreeAllreduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Pipeline,
    KvTransfer,
}

impl Kind {
    fn kind(self) -> CollectiveKind {
        match self {
            Kind::RingAllreduce => CollectiveKind::RingAllreduce,
            Kind::TreeAllreduce => CollectiveKind::TreeAllreduce,
            Kind::AllGather => CollectiveKind::AllGather,
            Kind::ReduceScatter => CollectiveKind::ReduceScatter,
            Kind::AllToAll => CollectiveKind::AllToAll,
            Kind::Pipeline => CollectiveKind::Pipeline,
            Kind::KvTransfer => CollectiveKind::KvTransfer,
        }
    }
}

#[derive(Args)]
pub struct PlanCmd {
    /// Topology YAML (default: a generated --fabric sized for --gpus).
    #[arg(long, short)]
    topology: Option<PathBuf>,
    /// Fabric to generate when no --topology is given.
    #[arg(long, value_enum, default_value = "rail-optimized")]
    fabric: FabricPreset,
    /// Demand file (YAML: `demands: [...]`).
    #[arg(long, short, conflicts_with = "collective")]
    demands: Option<PathBuf>,
    /// Plan one collective instead of a demand file.
    #[arg(long, value_enum)]
    collective: Option<Kind>,
    /// GPUs taking part (whole servers, 8 GPUs each on generated fabrics).
    #[arg(long)]
    gpus: Option<u32>,
    /// Collective buffer size (e.g. 1GiB, 256MB, 1000000).
    #[arg(long, default_value = "1GiB")]
    bytes: String,
    /// Channels (QPs per neighbour pair); default = GPUs per server.
    #[arg(long)]
    channels: Option<u32>,
    /// Rate per flow, Gbit/s (default: fair share of headroom × NIC speed).
    #[arg(long)]
    rate_gbps: Option<f64>,
    /// One flow per ring step instead of one per connection.
    #[arg(long)]
    per_step: bool,
    /// Pipeline stages.
    #[arg(long, default_value_t = 2)]
    stages: u32,
    /// Pipeline micro-batches.
    #[arg(long, default_value_t = 4)]
    microbatches: u32,
    /// KV transfer: prefill servers (default half).
    #[arg(long)]
    prefill_servers: Option<u32>,
    /// Start of the collective, ns.
    #[arg(long, default_value_t = 0)]
    start_ns: u64,
    /// Fraction of each link's capacity that may be reserved.
    #[arg(long, default_value_t = 0.9)]
    headroom: f64,
    /// Reject instead of partially reserving demands that do not fit.
    #[arg(long)]
    no_partial: bool,
    /// Also predict the same flows on ECMP (QP-aware, 5-tuple, ideal random).
    #[arg(long)]
    ecmp: bool,
    /// Switch ECMP hash seeds and offsets, for ECMP fallback and --ecmp:
    /// per-switch (CRC-32 of the switch name, its tier's hash offset),
    /// seeds-only (no offsets) or same:N (every switch N, no offsets).
    #[arg(long, default_value = "per-switch")]
    hash_seed: SeedPolicy,
    /// Flows listed per demand.
    #[arg(long, default_value_t = 8)]
    flows: usize,
    /// Links listed.
    #[arg(long, default_value_t = 10)]
    links: usize,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn topology(cmd: &PlanCmd) -> anyhow::Result<Topology> {
    if let Some(path) = &cmd.topology {
        return Ok(yaml::load_file(path)?);
    }
    let Some(gpus) = cmd.gpus else {
        bail!("give --topology FILE, or --gpus N to plan on a generated --fabric");
    };
    let spec = generate::preset(cmd.fabric.preset(), gpus)?;
    Ok(Topology::from_spec(spec)?)
}

fn demands(cmd: &PlanCmd, topo: &Topology) -> anyhow::Result<Vec<Demand>> {
    if !(cmd.headroom > 0.0 && cmd.headroom <= 1.0) {
        bail!("--headroom {}: must be in (0, 1]", cmd.headroom);
    }
    match (&cmd.demands, cmd.collective) {
        (Some(path), _) => Ok(demand::load_file(topo, path, cmd.headroom)?),
        (None, Some(kind)) => {
            let kind = kind.kind();
            let gpus = match cmd.gpus {
                Some(g) => g,
                None => u32::try_from(topo.gpu_count()).context("too many GPUs")?,
            };
            let servers = select_servers(topo, gpus)?;
            let bytes = parse_bytes(&cmd.bytes).map_err(|e| anyhow::anyhow!("--bytes {e}"))?;
            let mut c = Collective::new(kind, servers, bytes);
            c.channels = cmd.channels.unwrap_or(topo.servers()[c.servers[0] as usize].gpus);
            c.start_ns = cmd.start_ns;
            c.line_rate_fraction = cmd.headroom;
            c.per_step = cmd.per_step;
            c.stages = cmd.stages;
            c.microbatches = cmd.microbatches;
            c.prefill_servers = cmd.prefill_servers;
            if let Some(r) = cmd.rate_gbps {
                if !(r.is_finite() && r > 0.0) {
                    bail!("--rate-gbps {r}: must be positive");
                }
                c.rate_bps = Some(gbps_to_bps(r));
            }
            let flows = expand(topo, &c, &mut QpAllocator::new(topo))?;
            Ok(vec![Demand {
                id: format!("{}-{gpus}gpu", kind.name()),
                tenant: "cli".into(),
                priority: 0,
                elastic: false,
                deadline_ns: None,
                kind: DemandKind::Collective(kind),
                flows,
            }])
        }
        (None, None) => bail!("give --demands FILE or --collective KIND (e.g. --collective ring-allreduce --gpus 1024)"),
    }
}

pub fn run(cmd: PlanCmd) -> anyhow::Result<()> {
    if cmd.demands.is_some() && cmd.topology.is_none() {
        bail!("--demands names hosts, so it needs --topology FILE");
    }
    let topo = topology(&cmd)?;
    let demands = demands(&cmd, &topo)?;
    let config = PlannerConfig {
        headroom: cmd.headroom,
        allow_partial: !cmd.no_partial,
        ecmp_seeds: cmd.hash_seed,
        ..Default::default()
    };
    let mut planner = Planner::new(&topo, config);
    let t0 = Instant::now();
    let plan = planner.plan(&demands);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut r = report::build(
        &planner,
        &demands,
        &plan,
        ms,
        ReportOptions {
            flows_per_demand: cmd.flows,
            links: cmd.links,
        },
    );
    if cmd.ecmp {
        let flows: Vec<_> = demands
            .iter()
            .flat_map(|d| d.flows.iter().cloned())
            .collect();
        r.ecmp = vec![
            EcmpComparison::from(&ecmp::baseline(
                &topo,
                &flows,
                HashMode::QpAware,
                cmd.hash_seed,
            )),
            EcmpComparison::from(&ecmp::baseline(
                &topo,
                &flows,
                HashMode::FiveTuple,
                cmd.hash_seed,
            )),
            EcmpComparison::from(&ecmp::random_baseline(&topo, &flows, 1)),
        ];
    }
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", report::render_text(&r));
    }
    Ok(())
}
