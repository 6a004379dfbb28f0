//! `foresight sim`: the flow-level (max-min fair) simulator — policies ×
//! workloads on a topology file or a generated fabric; table, CSV, SVG.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use planner::demand::parse_bytes;
use planner::ecmp::SeedPolicy;
use planner::topology::{generate, yaml, Topology};
use sim::workload::{build, WorkloadKind, WorkloadSpec};
use sim::{FailSpec, Policy};

use super::topo::FabricPreset;

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
    Mix,
}

#[derive(Args, Clone)]
struct Common {
    /// Fabric to generate when no --topology is given.
    #[arg(long, value_enum, default_value = "clos3")]
    fabric: FabricPreset,
    /// Workload.
    #[arg(long, value_enum, default_value = "ring")]
    workload: Workload,
    /// Collective buffer size (e.g. 1GiB, 256MB).
    #[arg(long, default_value = "1GiB")]
    bytes: String,
    /// Channels (QP connections per neighbour pair); default = GPUs per server.
    #[arg(long)]
    channels: Option<u32>,
    /// Policies, comma-separated: ecmp, qp-hash[-K], adaptive, spray, foresight.
    #[arg(long, default_value = "ecmp,qp-hash,adaptive,spray,foresight")]
    policies: String,
    /// QPs per connection for qp-hash.
    #[arg(long, default_value_t = 4)]
    qps: u32,
    /// Iterations (each starts when the previous one's slowest flow ends).
    #[arg(long, default_value_t = 1)]
    iterations: u32,
    /// Mix: KV-cache bytes per prefill server.
    #[arg(long, default_value = "256MiB")]
    kv_bytes: String,
    /// Background flows (random NIC pairs, spread over the run).
    #[arg(long, default_value_t = 0)]
    background: u32,
    /// Bytes per background flow.
    #[arg(long, default_value = "64MiB")]
    background_bytes: String,
    /// 0: QPs as the planner allocates them; otherwise random QPs from this seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Switch ECMP hash seeds: per-switch (CRC-32 of the switch name, as
    /// the controller installs them) or same:N (every switch N: the
    /// polarised fabric).
    #[arg(long, default_value = "per-switch")]
    hash_seed: SeedPolicy,
    /// Results directory.
    #[arg(long, default_value = "target/sim")]
    out: PathBuf,
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
    /// When links fail, µs (default: half the ideal first iteration).
    #[arg(long)]
    fail_at_us: Option<f64>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct TableArgs {
    /// Fabric sizes, GPUs (100k is run as 102400: whole 16-leaf pods).
    #[arg(long, value_delimiter = ',', default_value = "1024,8192,32768,102400")]
    sizes: Vec<u32>,
    #[command(flatten)]
    common: Common,
}

pub fn run(cmd: SimCmd) -> anyhow::Result<()> {
    match cmd.what {
        What::Run(a) => run_one(a),
        What::Table(a) => table(a),
        What::Validate { trials } => {
            println!("paths flows  trials   monte-carlo  formula   |diff|/sigma");
            for (s, n) in [(8u32, 8u32), (16, 8), (32, 8), (64, 8), (8, 4), (4, 2)] {
                let c = sim::validate::collision_monte_carlo(
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

fn spec(c: &Common) -> anyhow::Result<(WorkloadSpec, Vec<Policy>)> {
    let policies = c
        .policies
        .split(',')
        .map(|s| Policy::parse(s.trim(), c.qps))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let bytes = |s: &str, f: &str| parse_bytes(s).map_err(|e| anyhow::anyhow!("--{f} {s}: {e}"));
    Ok((
        WorkloadSpec {
            kind: match c.workload {
                Workload::Ring => WorkloadKind::Ring,
                Workload::AllToAll => WorkloadKind::AllToAll,
                Workload::Mix => WorkloadKind::Mix,
            },
            gpus: None,
            bytes: bytes(&c.bytes, "bytes")?,
            channels: c.channels,
            kv_bytes: bytes(&c.kv_bytes, "kv-bytes")?,
            background: c.background,
            background_bytes: bytes(&c.background_bytes, "background-bytes")?,
            iterations: c.iterations,
            seed: c.seed,
        },
        policies,
    ))
}

fn fabric(preset: FabricPreset, gpus: u32) -> anyhow::Result<Topology> {
    let spec = generate::preset(preset.preset(), gpus).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Topology::from_spec(spec)?)
}

fn progress() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

fn run_one(a: RunArgs) -> anyhow::Result<()> {
    let (ws, policies) = spec(&a.common)?;
    let t0 = Instant::now();
    let topo = match &a.topology {
        Some(p) => yaml::load_file(p).with_context(|| format!("loading {}", p.display()))?,
        None => fabric(a.common.fabric, a.gpus)?,
    };
    let build_s = t0.elapsed().as_secs_f64();
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
    fail.edges
        .extend(sim::random_links(&topo, a.fail_random, a.common.seed));
    fail.edges.sort_unstable();
    fail.edges.dedup();
    let results = sim::run_all(&topo, &w, &policies, a.common.hash_seed, &fail, progress());
    println!(
        "{}: {} NICs, {} switches; workload {} ({} connections/iteration, {} background), {} iteration(s); hash seeds {}{}",
        topo.name(),
        topo.hosts().len(),
        topo.switches().len(),
        w.name,
        w.connections().count(),
        w.background.len(),
        w.iterations,
        a.common.hash_seed,
        if fail.edges.is_empty() {
            String::new()
        } else {
            format!("; {} directed links fail mid-run", fail.edges.len())
        }
    );
    print!("{}", sim::output::table(&results));
    println!(
        "fabric build {build_s:.2} s; peak RSS {} MiB",
        sim::peak_rss_kib().map_or("?".into(), |k| format!("{:.0}", k as f64 / 1024.0))
    );
    sim::output::write_all(&a.common.out, &results)?;
    println!(
        "wrote {}/{{iterations,summary,link_util}}.csv, ratio.svg, util_cdf.svg",
        a.common.out.display()
    );
    Ok(())
}

fn table(a: TableArgs) -> anyhow::Result<()> {
    let (ws, policies) = spec(&a.common)?;
    let mut rows: Vec<(u32, Vec<sim::PolicyResult>)> = Vec::new();
    for &g in &a.sizes {
        let t0 = Instant::now();
        let topo = fabric(a.common.fabric, g)?;
        let w = build(&topo, &ws)?;
        let r = sim::run_all(
            &topo,
            &w,
            &policies,
            a.common.hash_seed,
            &FailSpec::default(),
            progress(),
        );
        eprintln!("{g} GPUs: {:.1} s", t0.elapsed().as_secs_f64());
        rows.push((g, r));
    }
    println!("switch hash seeds: {}", a.common.hash_seed);
    let names: Vec<String> = rows[0].1.iter().skip(1).map(|r| r.policy.clone()).collect();
    let mut s = String::from("| GPUs |");
    for n in &names {
        let _ = write!(s, " {n} |");
    }
    s.push_str("\n|---:|");
    for _ in &names {
        s.push_str("---:|");
    }
    s.push('\n');
    let mut csv = String::from("gpus,policy,mean_ratio,max_ratio,ideal_ns\n");
    for (g, r) in &rows {
        let _ = write!(s, "| {g} |");
        for p in r.iter().skip(1) {
            let _ = write!(s, " {:.2} |", p.mean_ratio);
            let _ = writeln!(
                csv,
                "{g},{},{:.6},{:.6},{:.1}",
                p.policy, p.mean_ratio, p.max_ratio, r[0].iteration_ns[0]
            );
        }
        s.push('\n');
    }
    print!("{s}");
    std::fs::create_dir_all(&a.common.out)?;
    std::fs::write(a.common.out.join("table.md"), &s)?;
    std::fs::write(a.common.out.join("table.csv"), csv)?;
    println!(
        "peak RSS {} MiB; wrote {}/table.md, table.csv",
        sim::peak_rss_kib().map_or("?".into(), |k| format!("{:.0}", k as f64 / 1024.0)),
        a.common.out.display()
    );
    Ok(())
}
