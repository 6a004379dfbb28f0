//! `foresight sim t5`: what learning a job's periodic schedule buys
//! (T+5), with the network times from the simulator and the controller's
//! learner.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use planner::demand::parse_bytes;
use planner::ecmp::SeedPolicy;
use planner::periodic::{LearnerConfig, Transfer};
use planner::topology::Topology;
use sim::learned::{self, Job, Phase, Summary};
use sim::workload::{build, WorkloadKind, WorkloadSpec};
use sim::{FailSpec, Policy};

use crate::cmd::topo::FabricPreset;

#[derive(Args)]
pub struct LearnedArgs {
    /// Fabric to generate.
    #[arg(long, value_enum, default_value = "clos3")]
    fabric: FabricPreset,
    /// GPUs (the ring uses all of them).
    #[arg(long, default_value_t = 1024)]
    gpus: u32,
    /// Ring all-reduce buffer per iteration.
    #[arg(long, default_value = "1GiB")]
    bytes: String,
    /// Iterations of the job.
    #[arg(long, default_value_t = 60)]
    iterations: usize,
    /// Compute time per iteration, ms (default: twice the ideal
    /// communication time).
    #[arg(long)]
    compute_ms: Option<f64>,
    /// Relative standard deviations of the compute time, comma-separated.
    #[arg(long, default_value = "0,0.01,0.03,0.1")]
    jitter: String,
    /// From this iteration the buffer doubles (another batch size); none
    /// with --no-change.
    #[arg(long, default_value_t = 30)]
    change_at: usize,
    #[arg(long)]
    no_change: bool,
    /// Seeds per jitter level.
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Matching iterations before the learner predicts.
    #[arg(long, default_value_t = 3)]
    lock_after: usize,
    /// The learner's timing window, a fraction of the iteration.
    #[arg(long, default_value_t = 0.05)]
    window: f64,
    /// Switch ECMP hash seeds and offsets (per-switch, seeds-only or same:N).
    #[arg(long, default_value = "per-switch")]
    hash_seed: SeedPolicy,
    /// Results directory.
    #[arg(long, default_value = "target/sim/t5")]
    out: PathBuf,
}

/// One iteration's communication of a ring of `bytes`, timed by the
/// simulator under ECMP, Foresight and on the ideal fabric.
fn phase(topo: &Topology, bytes: u64, seeds: SeedPolicy) -> anyhow::Result<Phase> {
    let spec = WorkloadSpec {
        kind: WorkloadKind::Ring,
        gpus: None,
        bytes,
        channels: None,
        kv_bytes: 0,
        background: 0,
        background_bytes: 0,
        background_load: 0.0,
        moe_skew: 0.0,
        ep_gpus: 64,
        iterations: 1,
        seed: 0,
    };
    let w = build(topo, &spec)?;
    let results = sim::run_all(
        topo,
        &w,
        &[Policy::Ecmp, Policy::Foresight],
        &seeds.into(),
        &sim::reorder::ReorderModel::default(),
        &FailSpec::default(),
        false,
        0,
    );
    let time = |name: &str| -> anyhow::Result<f64> {
        results
            .iter()
            .find(|r| r.policy == name)
            .map(|r| r.jobs[0].iteration_ns[0])
            .with_context(|| format!("the simulator returned no {name} result"))
    };
    let transfers = w
        .connections()
        .map(|f| Transfer {
            src: f.src_ip.to_string(),
            dst: f.dst_ip.to_string(),
            bytes: f.bytes,
        })
        .collect();
    Ok(Phase {
        transfers,
        ecmp_ns: time("ecmp")?,
        foresight_ns: time("foresight")?,
        ideal_ns: time("ideal")?,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(a: LearnedArgs) -> anyhow::Result<()> {
    let jitters: Vec<f64> = a
        .jitter
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|j| (0.0..1.0).contains(j))
                .with_context(|| format!("--jitter {s}: expected a fraction in [0, 1)"))
        })
        .collect::<anyhow::Result<_>>()?;
    if a.iterations == 0 || a.seeds == 0 {
        bail!("--iterations and --seeds must be at least 1");
    }
    let bytes = parse_bytes(&a.bytes).map_err(|e| anyhow::anyhow!("--bytes {}: {e}", a.bytes))?;
    let topo = sim::fabrics::generated(a.fabric.preset(), a.gpus, 1)?;
    eprintln!("simulating one iteration of the ring under ECMP and Foresight...");
    let mut phases = vec![phase(&topo, bytes, a.hash_seed)?];
    let change_at = (!a.no_change).then_some(a.change_at);
    if change_at.is_some() {
        phases.push(phase(&topo, 2 * bytes, a.hash_seed)?);
    }
    let compute_ns = a.compute_ms.map_or(2.0 * phases[0].ideal_ns, |ms| ms * 1e6);
    let learner = LearnerConfig {
        lock_after: a.lock_after,
        jitter: a.window,
        ..LearnerConfig::default()
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;

    let mut csv = String::from(
        "jitter,seed,first_reserved,relearned_after,reserved_fraction,mean_ratio,steady_ratio,\
         ecmp_ratio,announced_ratio,wrong,wrong_cost_ms\n",
    );
    let mut table = format!(
        "T+5 on a {}-GPU ring ({} per iteration, compute {:.1} ms; ECMP {:.2}x, announced {:.2}x ideal{}), \
         learner: lock after {}, window {:.0} %, {} seeds (medians)\n\n\
         | compute jitter | first reserved iteration | unreserved after the change | reserved after lock | T+5 mean ratio | steady ratio | wrong predictions |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
        a.gpus,
        a.bytes,
        compute_ns / 1e6,
        phases[0].ecmp_ns / phases[0].ideal_ns,
        phases[0].foresight_ns / phases[0].ideal_ns,
        change_at.map_or(String::new(), |c| format!("; buffer doubles at iteration {c}")),
        a.lock_after,
        100.0 * a.window,
        a.seeds,
    );
    for &jitter in &jitters {
        let mut runs: Vec<Summary> = Vec::new();
        for seed in 0..a.seeds {
            let job = Job {
                iterations: a.iterations,
                compute_ns,
                jitter,
                change_at,
                seed: 1 + seed,
            };
            let (rows, s) = learned::study(&phases, job, learner);
            let opt = |v: Option<usize>| v.map_or(String::new(), |x| x.to_string());
            let _ = writeln!(
                csv,
                "{jitter},{},{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{},{:.3}",
                1 + seed,
                opt(s.first_reserved),
                opt(s.relearned_after),
                s.reserved_fraction,
                s.mean_ratio,
                s.steady_ratio,
                s.ecmp_ratio,
                s.announced_ratio,
                s.wrong,
                s.wrong_cost_ns / 1e6
            );
            if seed == 0 {
                let name = format!("t5_jitter_{jitter}.svg");
                learned::plot(
                    &a.out.join(&name),
                    &rows,
                    &phases,
                    &format!(
                        "{}-GPU ring, compute jitter {:.0} %",
                        a.gpus,
                        100.0 * jitter
                    ),
                )?;
            }
            runs.push(s);
        }
        let m = |f: &dyn Fn(&Summary) -> f64| median(runs.iter().map(f).collect());
        let opt_m = |f: &dyn Fn(&Summary) -> Option<usize>| {
            let v = median(
                runs.iter()
                    .map(|s| f(s).map_or(f64::NAN, |x| x as f64))
                    .collect(),
            );
            if v.is_finite() {
                format!("{v:.0}")
            } else {
                "never".into()
            }
        };
        let _ = writeln!(
            table,
            "| {:.0} % | {} | {} | {:.0} % | {:.2}x | {:.2}x | {:.0} |",
            100.0 * jitter,
            opt_m(&|s| s.first_reserved),
            if change_at.is_some() {
                opt_m(&|s| s.relearned_after)
            } else {
                "-".into()
            },
            100.0 * m(&|s| s.reserved_fraction),
            m(&|s| s.mean_ratio),
            m(&|s| s.steady_ratio),
            m(&|s| s.wrong as f64),
        );
    }
    std::fs::write(a.out.join("t5.csv"), csv).context("writing t5.csv")?;
    std::fs::write(a.out.join("t5.md"), &table).context("writing t5.md")?;
    print!("{table}");
    eprintln!("wrote {}/{{t5.csv,t5.md,t5_jitter_*.svg}}", a.out.display());
    Ok(())
}
