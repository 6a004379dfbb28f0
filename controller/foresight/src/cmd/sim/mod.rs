//! `foresight sim`: the flow-level (max-min fair) simulator — policies ×
//! workloads on a topology file or a generated fabric; table, CSV, SVG.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use planner::demand::parse_bytes;
use planner::ecmp::SeedPolicy;
use planner::hash_profile::FabricHash;
use planner::topology::{yaml, Topology};
use sim::routing::SwitchHashing;
use sim::workload::{build, WorkloadKind, WorkloadSpec};
use sim::{FailSpec, Policy};

use super::topo::FabricPreset;
use reorder_args::ReorderArgs;

mod lab;
mod learned;
mod reorder_args;

#[derive(Args)]
pub struct SimCmd {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Simulate a workload under each policy (table, CSV and plots in --out).
    Run(RunArgs),
    /// Iteration time ÷ ideal, policy × fabric size (a Markdown table).
    Table(TableArgs),
    /// One BMv2 lab run (topology, rocegen spec, reservations) simulated.
    Lab(lab::LabArgs),
    /// A job that announces nothing, learned and reserved ahead (T+5):
    /// iterations to learn, reserved share, cost of a wrong prediction.
    #[command(name = "t5")]
    Learned(learned::LearnedArgs),
    /// Monte-Carlo ECMP collisions vs S!/((S−N)!·S^N).
    Validate {
        /// Trials per case.
        #[arg(long, default_value_t = 100_000)]
        trials: u32,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Workload {
    Ring,
    AllToAll,
    /// Expert-parallel all-to-all with uneven token counts (--moe-skew).
    Moe,
    Mix,
    /// Two training jobs (different iteration periods) and inference KV transfers.
    MultiJob,
}

/// What is compared and how it runs (run and table).
#[derive(Args, Clone)]
struct PolicyArgs {
    /// Policies, comma-separated: ecmp, qp-hash[-K], adaptive, spray-gbn,
    /// spray-ooo (or spray), flowlet-gbn, flowlet-ooo, foresight, foresight-replan (MoE:
    /// re-planned for every step's bytes instead of pinned), foresight-entropy (the planned paths reached by choosing UDP source ports, no Foresight program on the switches). gbn: onto
    /// go-back-N RoCE NICs (reordering costs rewinds); ooo: onto NICs that
    /// accept out-of-order packets.
    #[arg(
        long,
        default_value = "ecmp,qp-hash,adaptive,spray-gbn,spray-ooo,flowlet-gbn,flowlet-ooo,foresight"
    )]
    policies: String,
    /// QPs per connection for qp-hash.
    #[arg(long, default_value_t = 4)]
    qps: u32,
    /// Random draws (MoE weights, background); unless 0, also random QPs
    /// instead of the planner's allocator order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Switch ECMP hash seeds and offsets: per-switch (CRC-32 of the switch
    /// name and its tier's hash offset, as the controller installs them),
    /// seeds-only (the seeds without offsets: tiers partly correlated) or
    /// same:N (every switch N, no offsets: the polarised fabric).
    #[arg(long, default_value = "per-switch")]
    hash_seed: SeedPolicy,
    /// Switches that do not run Foresight's program: every switch hashes as
    /// this file describes (YAML, docs/entropy-steering.md), for ECMP,
    /// foresight-entropy's ports and the planner's predictions. Instead of
    /// --hash-seed.
    #[arg(long, conflicts_with = "hash_seed")]
    switch_hash: Option<PathBuf>,
    /// Policies simulated at once (0: one per core; each holds its own
    /// simulation in memory).
    #[arg(long, default_value_t = 0)]
    jobs: usize,
    /// Results directory.
    #[arg(long, default_value = "target/sim")]
    out: PathBuf,
    #[command(flatten)]
    reorder: ReorderArgs,
}

#[derive(Args, Clone)]
struct Common {
    /// Fabric to generate when no --topology is given.
    #[arg(long, value_enum, default_value = "clos3")]
    fabric: FabricPreset,
    /// Leaf oversubscription of the generated clos3 fabric (2: half the spines).
    #[arg(long, default_value_t = 1)]
    oversubscription: u32,
    /// Workload.
    #[arg(long, value_enum, default_value = "ring")]
    workload: Workload,
    /// Collective buffer size (e.g. 1GiB, 256MB).
    #[arg(long, default_value = "1GiB")]
    bytes: String,
    /// Channels (QP connections per neighbour pair); default = GPUs per server.
    #[arg(long)]
    channels: Option<u32>,
    /// Iterations (each starts when the previous one's slowest flow ends;
    /// multi-job: of the first training job, at least 3; moe: steps, a
    /// new token draw each on the same connections).
    #[arg(long, default_value_t = 1)]
    iterations: u32,
    /// Mix and multi-job: KV-cache bytes per prefill server.
    #[arg(long, default_value = "256MiB")]
    kv_bytes: String,
    /// MoE: standard deviation of the log of expert popularity.
    #[arg(long, default_value_t = 0.3)]
    moe_skew: f64,
    /// MoE: GPUs per expert-parallel group (consecutive servers).
    #[arg(long, default_value_t = 64)]
    ep_gpus: u32,
    /// Background flows (random NIC pairs, spread over the run).
    #[arg(long, default_value_t = 0)]
    background: u32,
    /// Bytes per background flow.
    #[arg(long, default_value = "64MiB")]
    background_bytes: String,
    /// Background streams: every NIC sends up to this fraction of its line
    /// rate to a random NIC of another server, all run long.
    #[arg(long, default_value_t = 0.0)]
    background_load: f64,
    #[command(flatten)]
    policy: PolicyArgs,
}

#[derive(Args)]
struct RunArgs {
    /// Topology YAML (default: a generated --fabric sized for --gpus).
    #[arg(long, short)]
    topology: Option<PathBuf>,
    /// GPUs (fabric size when generated; the workload uses all of them).
    #[arg(long, default_value_t = 1024)]
    gpus: u32,
    /// Take down the link between two switches mid-run: `A,B` (repeatable).
    #[arg(long)]
    fail: Vec<String>,
    /// Take down this many random switch-to-switch links mid-run.
    #[arg(long, default_value_t = 0)]
    fail_random: u32,
    /// When links fail, µs (default: half the ideal first iteration; 0:
    /// down from the start, and Foresight plans around them).
    #[arg(long)]
    fail_at_us: Option<f64>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct TableArgs {
    /// Workloads (rows), comma-separated; default: ring, all-to-all, moe,
    /// multi-job, ring+background, "all-to-all link-down", "ring 2:1",
    /// "all-to-all 2:1". Only when named (minutes to hours each here):
    /// moe-ep64, moe-ep256, "moe-ep64 2:1", "moe-ep256 2:1".
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// GPU counts instead of each workload's own (1k, 8k, 32k where it allows).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u32>,
    #[command(flatten)]
    policy: PolicyArgs,
}

pub fn run(cmd: SimCmd) -> anyhow::Result<()> {
    match cmd.what {
        What::Run(a) => run_one(a),
        What::Table(a) => table(a),
        What::Lab(a) => lab::run(a),
        What::Learned(a) => learned::run(a),
        What::Validate { trials } => {
            println!("paths flows  trials   monte-carlo  formula   |diff|/sigma");
            for (s, n) in [(8u32, 8u32), (16, 8), (32, 8), (64, 8), (8, 4), (4, 2)] {
                let c = sim::ecmp_collisions::collision_monte_carlo(
                    s,
                    n,
                    trials,
                    1 + s as u64 * 31 + n as u64,
                );
                println!(
                    "{:>5} {:>5} {:>7}   {:>10.5}  {:>8.5}   {:.2}",
                    s,
                    n,
                    trials,
                    c.estimate,
                    c.formula,
                    (c.estimate - c.formula).abs() / c.sigma.max(1e-12)
                );
            }
            Ok(())
        }
    }
}

impl PolicyArgs {
    /// How the switches of `topo` hash: as --switch-hash describes, else
    /// Foresight's program under --hash-seed.
    fn hashing(&self, topo: &Topology) -> anyhow::Result<SwitchHashing> {
        let Some(p) = &self.switch_hash else {
            return Ok(self.hash_seed.into());
        };
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let described = FabricHash::from_yaml(topo, &text, &p.display().to_string())
            .map_err(anyhow::Error::msg)?;
        Ok(SwitchHashing::Described(Arc::new(described)))
    }
}

fn policies(p: &PolicyArgs) -> anyhow::Result<Vec<Policy>> {
    p.policies
        .split(',')
        .map(|s| Policy::parse(s.trim(), p.qps))
        .collect()
}

fn spec(c: &Common) -> anyhow::Result<WorkloadSpec> {
    let bytes = |s: &str, f: &str| parse_bytes(s).map_err(|e| anyhow::anyhow!("--{f} {s}: {e}"));
    Ok(WorkloadSpec {
        kind: match c.workload {
            Workload::Ring => WorkloadKind::Ring,
            Workload::AllToAll => WorkloadKind::AllToAll,
            Workload::Moe => WorkloadKind::Moe,
            Workload::Mix => WorkloadKind::Mix,
            Workload::MultiJob => WorkloadKind::MultiJob,
        },
        gpus: None,
        bytes: bytes(&c.bytes, "bytes")?,
        channels: c.channels,
        kv_bytes: bytes(&c.kv_bytes, "kv-bytes")?,
        background: c.background,
        background_bytes: bytes(&c.background_bytes, "background-bytes")?,
        background_load: c.background_load,
        moe_skew: c.moe_skew,
        ep_gpus: c.ep_gpus,
        iterations: c.iterations,
        seed: c.policy.seed,
    })
}

fn progress() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

fn peak_rss() -> String {
    sim::peak_rss_kib().map_or("?".into(), |k| format!("{:.0}", k as f64 / 1024.0))
}

fn run_one(a: RunArgs) -> anyhow::Result<()> {
    let ws = spec(&a.common)?;
    let policies = policies(&a.common.policy)?;
    let model = a.common.policy.reorder.model(a.common.policy.seed)?;
    let t0 = Instant::now();
    let topo = match &a.topology {
        Some(p) => {
            if a.common.oversubscription != 1 {
                bail!("--oversubscription applies to generated fabrics, not --topology");
            }
            yaml::load_file(p).with_context(|| format!("loading {}", p.display()))?
        }
        None => {
            sim::fabrics::generated(a.common.fabric.preset(), a.gpus, a.common.oversubscription)?
        }
    };
    let build_s = t0.elapsed().as_secs_f64();
    let hashing = a.common.policy.hashing(&topo)?;
    let w = build(&topo, &ws)?;
    let mut fail = FailSpec {
        edges: Vec::new(),
        at_ns: a.fail_at_us.map(|us| us * 1e3),
    };
    for f in &a.fail {
        let Some((x, y)) = f.split_once(',') else {
            bail!("--fail {f}: expected two switch names, A,B");
        };
        fail.edges
            .extend(sim::link_edges(&topo, x.trim(), y.trim())?);
    }
    fail.edges.extend(sim::random_links(
        &topo,
        a.fail_random,
        a.common.policy.seed,
    ));
    fail.edges.sort_unstable();
    fail.edges.dedup();
    let results = sim::run_all(
        &topo,
        &w,
        &policies,
        &hashing,
        &model,
        &fail,
        progress(),
        a.common.policy.jobs,
    );
    let jobs: Vec<String> = w
        .jobs
        .iter()
        .map(|j| format!("{} × {}", j.name, j.iterations))
        .collect();
    println!(
        "{}: {} NICs, {} switches; workload {} ({} connections per round of every job, {} background flows, {} streams); jobs {}; switches hash: {}{}",
        topo.name(),
        topo.hosts().len(),
        topo.switches().len(),
        w.name,
        w.connections().count(),
        w.background.len(),
        w.streams.len(),
        jobs.join(", "),
        hashing,
        if fail.edges.is_empty() {
            String::new()
        } else {
            format!(
                "; {} directed links fail {}",
                fail.edges.len(),
                if fail.at_ns == Some(0.0) { "from the start" } else { "mid-run" }
            )
        }
    );
    print!("{}", sim::output::table(&results));
    println!("fabric build {build_s:.2} s; peak RSS {} MiB", peak_rss());
    sim::output::write_all(&a.common.policy.out, &results)?;
    println!(
        "wrote {}/{{iterations,summary,link_util}}.csv, ratio.svg, util_cdf.svg",
        a.common.policy.out.display()
    );
    Ok(())
}

fn table(a: TableArgs) -> anyhow::Result<()> {
    let policies = policies(&a.policy)?;
    let model = a.policy.reorder.model(a.policy.seed)?;
    let all = sim::suite::scenarios();
    let chosen: Vec<&sim::suite::Scenario> = if a.workloads.is_empty() {
        all.iter().filter(|s| !s.when_named).collect()
    } else {
        a.workloads
            .iter()
            .map(|n| {
                let n = n.trim();
                all.iter().find(|s| s.name == n).ok_or_else(|| {
                    let names: Vec<&str> = all.iter().map(|s| s.name).collect();
                    anyhow::anyhow!("--workloads {n}: expected one of {}", names.join(", "))
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut rows: Vec<sim::output::SuiteRow> = Vec::new();
    for sc in chosen {
        let sizes = if a.sizes.is_empty() {
            sc.sizes
        } else {
            &a.sizes[..]
        };
        for &g in sizes {
            let t0 = Instant::now();
            let results = sim::suite::run(
                sc,
                g,
                &policies,
                a.policy.seed,
                &|topo| a.policy.hashing(topo),
                &model,
                progress(),
                a.policy.jobs,
            )
            .with_context(|| format!("{} at {g} GPUs", sc.name))?;
            eprintln!(
                "{} at {g} GPUs: {:.1} s, peak RSS so far {} MiB",
                sc.name,
                t0.elapsed().as_secs_f64(),
                peak_rss()
            );
            rows.push(sim::output::SuiteRow {
                workload: sc.name.into(),
                gpus: g,
                results,
            });
        }
    }
    let md = sim::output::suite_markdown(&rows);
    match &a.policy.switch_hash {
        Some(p) => println!("switches hash as {} describes", p.display()),
        None => println!("switch hash seeds: {}", a.policy.hash_seed),
    }
    print!("{md}");
    let out = &a.policy.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(out.join("table.md"), &md)?;
    std::fs::write(out.join("table.csv"), sim::output::suite_csv(&rows))?;
    println!(
        "peak RSS {} MiB; wrote {}/table.md, table.csv",
        peak_rss(),
        out.display()
    );
    Ok(())
}
