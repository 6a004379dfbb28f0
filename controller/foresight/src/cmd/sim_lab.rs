//! `foresight sim lab`: one BMv2 lab run (its topology file, rocegen spec
//! and, for Foresight, the controller's reservations) through the
//! simulator, so that `bmv2-lab/compare_sim.py` can set predicted against
//! measured completion.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use planner::ecmp::SeedPolicy;
use planner::topology::yaml;
use sim::lab::{parse_reservations, LabMode, Scenario, Settings, Spec};

#[derive(Args)]
pub struct LabArgs {
    /// The lab's topology file (bmv2-lab/topologies/*.yaml).
    #[arg(long)]
    topology: PathBuf,
    /// The run's rocegen spec (bmv2-lab results raw/<run>/spec.json).
    #[arg(long)]
    spec: PathBuf,
    /// The lab mode the run used: ecmp5, qp or foresight.
    #[arg(long)]
    mode: LabMode,
    /// Foresight mode: the controller's answer to the forecast
    /// (raw/<run>/reservations.json).
    #[arg(long)]
    reservations: Option<PathBuf>,
    /// Switch ECMP hash seeds and offsets, as the lab ran them (per-switch,
    /// seeds-only or same:N).
    #[arg(long, default_value = "per-switch")]
    hash_seed: SeedPolicy,
    /// Port drain rate per Gbit/s (experiment.py --pps-per-gbps).
    #[arg(long, default_value_t = 2.5)]
    pps_per_gbps: f64,
    /// NIC rate ÷ port rate (experiment.py --nic-fraction); sets the ideal.
    #[arg(long, default_value_t = 0.9)]
    nic_fraction: f64,
    /// Receivers ACK every N packets (experiment.py passes 16).
    #[arg(long, default_value_t = 16)]
    ack_every: u32,
    /// ... or this long after the first unacknowledged packet; 0: no ACK
    /// traffic at all.
    #[arg(long, default_value_t = 100.0)]
    ack_delay_ms: f64,
    /// Leave out the per-step latency (the last packet's packet times).
    #[arg(long)]
    no_latency: bool,
    /// Print JSON (with packets per switch port) instead of one line.
    #[arg(long)]
    json: bool,
}

pub fn run(a: LabArgs) -> anyhow::Result<()> {
    if !(a.pps_per_gbps > 0.0 && a.nic_fraction > 0.0) {
        anyhow::bail!("--pps-per-gbps and --nic-fraction must be positive");
    }
    let topo = yaml::load_file(&a.topology)
        .with_context(|| format!("--topology {}", a.topology.display()))?;
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let spec = Spec::parse(&read(&a.spec)?, &a.spec.display().to_string())?;
    let reservations = match &a.reservations {
        Some(p) => parse_reservations(&read(p)?, &p.display().to_string())?,
        None if a.mode == LabMode::Foresight => {
            anyhow::bail!("--mode foresight needs --reservations (raw/<run>/reservations.json)")
        }
        None => Vec::new(),
    };
    let settings = Settings {
        pps_per_gbps: a.pps_per_gbps,
        nic_fraction: a.nic_fraction,
        ack_every: a.ack_every,
        ack_delay_ms: a.ack_delay_ms,
        hop_latency: !a.no_latency,
        seeds: a.hash_seed,
    };
    let sc = Scenario::new(&topo, spec, a.mode, &reservations, settings)?;
    let o = sc.simulate()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&o)?);
    } else {
        println!(
            "{}: completion {:.4} s = {:.3}x ideal ({:.4} s); a step {:.1} ms beyond its packets at line rate (median); {} of {} connections on reserved paths",
            o.mode, o.completion_s, o.slowdown, o.ideal_s, o.step_excess_ms, o.reserved, o.connections
        );
    }
    Ok(())
}
