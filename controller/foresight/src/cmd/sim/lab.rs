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
use sim::reorder::Nic;

use super::reorder_args::ReorderArgs;

#[derive(Args)]
pub struct LabArgs {
    /// The lab's topology file (bmv2-lab/topologies/*.yaml).
    #[arg(long)]
    topology: PathBuf,
    /// The run's rocegen spec (bmv2-lab results raw/<run>/spec.json).
    #[arg(long)]
    spec: PathBuf,
    /// The lab mode the run used: ecmp5, qp, foresight, spray or flowlet
    /// (spray-gbn, spray-ooo, flowlet-gbn, flowlet-ooo name the NICs too).
    #[arg(long)]
    mode: String,
    /// The NICs of a spray or flowlet run: gbn (go-back-N) or ooo
    /// (out-of-order tolerant); single-path modes ignore it.
    #[arg(long)]
    nic: Option<String>,
    /// Round trip a go-back-N rewind costs, ms (default: one packet's
    /// store-and-forward time out and back, averaged over connections).
    #[arg(long)]
    rtt_ms: Option<f64>,
    /// The reordering model (--mtu is not used: the lab counts packets);
    /// --seed draws the flowlets' paths.
    #[command(flatten)]
    reorder: ReorderArgs,
    /// Flowlet path draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
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

fn nic(s: &str, what: &str) -> anyhow::Result<Nic> {
    match s {
        "gbn" => Ok(Nic::Gbn),
        "ooo" => Ok(Nic::Ooo),
        _ => anyhow::bail!("{what} '{s}': want gbn (go-back-N) or ooo (out-of-order tolerant)"),
    }
}

/// The mode and NICs from `--mode` (possibly `spray-gbn`) and `--nic`.
fn mode_and_nic(mode: &str, flag: Option<&str>) -> anyhow::Result<(LabMode, Nic)> {
    let (name, suffix) = match mode.rsplit_once('-') {
        Some((m, n @ ("gbn" | "ooo"))) => (m, Some(n)),
        _ => (mode, None),
    };
    let m: LabMode = name
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--mode: {e}"))?;
    let n = match (suffix, flag) {
        (Some(a), Some(b)) if a != b => {
            anyhow::bail!("--mode {mode} and --nic {b} name different NICs")
        }
        (Some(a), _) => Some(nic(a, "--mode")?),
        (None, Some(b)) => Some(nic(b, "--nic")?),
        (None, None) => None,
    };
    if suffix.is_some() && !m.multipath() {
        anyhow::bail!("--mode {mode}: only spray and flowlet take a NIC kind");
    }
    match n {
        Some(n) => Ok((m, n)),
        None if m.multipath() => {
            anyhow::bail!("--mode {m} needs --nic gbn or --nic ooo (the NICs the run used)")
        }
        None => Ok((m, Nic::Gbn)),
    }
}

pub fn run(a: LabArgs) -> anyhow::Result<()> {
    if !(a.pps_per_gbps > 0.0 && a.nic_fraction > 0.0) {
        anyhow::bail!("--pps-per-gbps and --nic-fraction must be positive");
    }
    let (mode, nic) = mode_and_nic(&a.mode, a.nic.as_deref())?;
    if let Some(ms) = a.rtt_ms {
        if !(ms.is_finite() && ms >= 0.0) {
            anyhow::bail!("--rtt-ms {ms}: want a time ≥ 0");
        }
    }
    let reorder = a.reorder.model(a.seed)?;
    let topo = yaml::load_file(&a.topology)
        .with_context(|| format!("--topology {}", a.topology.display()))?;
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let spec = Spec::parse(&read(&a.spec)?, &a.spec.display().to_string())?;
    let reservations = match &a.reservations {
        Some(p) => parse_reservations(&read(p)?, &p.display().to_string())?,
        None if mode == LabMode::Foresight => {
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
        nic,
        reorder,
        rtt_ns: a.rtt_ms.map(|ms| ms * 1e6),
    };
    let sc = Scenario::new(&topo, spec, mode, &reservations, settings)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_nics() {
        assert_eq!(mode_and_nic("qp", None).unwrap().0, LabMode::Qp);
        assert_eq!(
            mode_and_nic("spray", Some("gbn")).unwrap(),
            (LabMode::Spray, Nic::Gbn)
        );
        assert_eq!(
            mode_and_nic("flowlet-ooo", None).unwrap(),
            (LabMode::Flowlet, Nic::Ooo)
        );
        assert_eq!(
            mode_and_nic("spray-ooo", Some("ooo")).unwrap(),
            (LabMode::Spray, Nic::Ooo)
        );
        let err = |m: &str, n: Option<&str>| mode_and_nic(m, n).unwrap_err().to_string();
        assert!(err("spray", None).contains("--nic gbn"));
        assert!(err("spray-gbn", Some("ooo")).contains("different NICs"));
        assert!(err("ecmp5-gbn", None).contains("only spray and flowlet"));
        assert!(err("spray", Some("irn")).contains("want gbn"));
        assert!(err("letflow", None).contains("spray or flowlet"));
    }
}
