//! Simulator figures: one ring all-reduce iteration on a 32,768-GPU
//! 3-tier Clos (time per policy, peak RSS), then the policy × fabric size
//! table; switches hash with per-switch seeds. `cargo run --release -p sim --example sim_figures [-- 1024,8192,...]`

use std::time::Instant;

use planner::ecmp::SeedPolicy;
use planner::topology::generate::{preset, Preset};
use planner::topology::Topology;
use sim::workload::{build, WorkloadSpec};
use sim::{run_policy, FailSpec, Policy};

fn main() -> anyhow::Result<()> {
    let sizes: Vec<u32> = std::env::args()
        .nth(1)
        .map(|s| {
            s.split(',')
                .map(|x| x.parse().expect("GPU count"))
                .collect()
        })
        .unwrap_or_else(|| vec![1024, 8192, 32768, 102_400]);
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // 1. 32k timing.
    let t0 = Instant::now();
    let topo =
        Topology::from_spec(preset(Preset::Clos3, 32768).map_err(|e| anyhow::anyhow!("{e}"))?)?;
    let w = build(&topo, &WorkloadSpec::default())?;
    println!(
        "32,768-GPU clos3: {} NICs, {} switches, {} edges, {} ring connections; fabric+workload {:.2} s",
        topo.hosts().len(),
        topo.switches().len(),
        topo.edge_count(),
        w.connections().count(),
        t0.elapsed().as_secs_f64()
    );
    let seeds = sim::routing::SwitchHashing::Program(SeedPolicy::PerSwitch);
    let model = sim::reorder::ReorderModel::default();
    let ideal = run_policy(&topo, &w, Policy::Ideal, &seeds, &model, &[], None, None);
    println!("  {:<10} sim {:>6.3} s", "ideal", ideal.wall_s);
    for p in Policy::all(4) {
        let r = run_policy(&topo, &w, p, &seeds, &model, &[], Some(&ideal.jobs), None);
        println!(
            "  {:<10} sim {:>6.3} s (of which planning {:.3} s), iteration/ideal {:.3}, {} events",
            r.policy,
            r.wall_s - r.plan_s,
            r.plan_s,
            r.mean_ratio,
            r.events
        );
    }
    println!(
        "  peak RSS {:.0} MiB",
        sim::peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
    drop(topo);
    // 2. Table.
    let names: Vec<String> = Policy::all(4).iter().map(Policy::name).collect();
    println!(
        "\n| GPUs | {} |\n|---:|{}",
        names.join(" | "),
        "---:|".repeat(names.len())
    );
    for g in sizes {
        let topo =
            Topology::from_spec(preset(Preset::Clos3, g).map_err(|e| anyhow::anyhow!("{e}"))?)?;
        let w = build(&topo, &WorkloadSpec::default())?;
        let r = sim::run_all(
            &topo,
            &w,
            &Policy::all(4),
            &seeds,
            &model,
            &FailSpec::default(),
            progress,
            0,
        );
        let cells: Vec<String> = r
            .iter()
            .skip(1)
            .map(|p| format!("{:.2}", p.mean_ratio))
            .collect();
        println!("| {g} | {} |", cells.join(" | "));
    }
    println!(
        "peak RSS {:.0} MiB",
        sim::peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
    Ok(())
}
