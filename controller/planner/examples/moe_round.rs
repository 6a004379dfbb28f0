//! First-step and steady-step cost of a MoE expert-parallel all-to-all on
//! the 3-tier Clos presets (per-GPU 400G NICs, 8 per server):
//!
//! * first step: [`MoeRouting::route`] of the pattern for equal bytes (the
//!   structure alone), evaluation of that shape included;
//! * steady step: [`MoeRouting::evaluate_into`] of a new step's uneven
//!   bytes on the pinned paths and [`StepLoad::fits`] against a budget
//!   (median and worst of the steps); the budget is the time the step's
//!   busiest NIC needs, so a step fits when the fabric never binds;
//! * re-route: [`MoeRouting::route`] for one uneven step's own bytes.
//!
//! Each step's bytes: every source rank sends `TOKENS` tokens × top-`K`
//! × `TOKEN_BYTES`, spread over the destination ranks by an expert
//! popularity that is Zipf-like (exponent 1, re-drawn every step) with
//! ±20 % noise per pair: a few hot experts, different every step.
//!
//! `cargo run --release -p planner --example moe_round [-- GPUS...]`
//! (default 8192 32768).

use std::time::Instant;

use planner::clos::ClosShape;
use planner::moe::{MoePattern, MoeRouting, NicLayout, StepBytes, StepLoad};
use planner::rng::Rng;
use planner::topology::generate::{preset, Preset};
use planner::Topology;

const TOKENS: u64 = 4096;
const K: u64 = 8;
/// 7168 hidden × 1 byte (FP8 dispatch).
const TOKEN_BYTES: u64 = 7168;
const STEPS: usize = 20;

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// One step: per group, a fresh popularity over destination ranks.
fn step(p: &MoePattern, rng: &mut Rng) -> StepBytes {
    let per_source = TOKENS * K * TOKEN_BYTES;
    let mut weights: Vec<Vec<f64>> = Vec::new();
    for ranks in p.groups() {
        let n = ranks.len();
        let mut w: Vec<f64> = (0..n).map(|r| 1.0 / (r + 1) as f64).collect();
        for i in (1..n).rev() {
            w.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let sum: f64 = w.iter().sum();
        weights.push(w.into_iter().map(|x| x / sum).collect());
    }
    StepBytes::from_fn(p, |g, _, j| {
        let noise = 0.8 + 0.4 * rng.unit();
        (per_source as f64 * weights[g][j] * noise) as u64
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run(t: &Topology, c: &ClosShape, ep: u32) {
    let p = MoePattern::consecutive(t, ep, NicLayout::Direct).unwrap();
    let la_first = load_average();
    let t0 = Instant::now();
    let r = MoeRouting::route(t, c, &p, &StepBytes::even(&p, TOKEN_BYTES)).unwrap();
    let first_ms = ms(t0);
    let mut rng = Rng::new(59);
    let steps: Vec<StepBytes> = (0..STEPS).map(|_| step(&p, &mut rng)).collect();
    // Each step's budget: the time its busiest NIC needs (no routing can
    // beat it), so a step fits when the fabric is never the bottleneck.
    let budgets: Vec<u64> = steps
        .iter()
        .map(|s| {
            let load = r.evaluate(t, s).unwrap();
            (r.step_bound(t, c, &load).nic.utilisation * 1e9).ceil() as u64
        })
        .collect();
    let la_steady = load_average();
    let mut load = StepLoad::default();
    let (mut times, mut ratios, mut vs_nic) = (Vec::new(), Vec::new(), Vec::new());
    let mut fit = 0;
    for (s, &budget) in steps.iter().zip(&budgets) {
        let t0 = Instant::now();
        r.evaluate_into(t, s, &mut load).unwrap();
        let fits = load.fits(t, budget);
        times.push(ms(t0));
        fit += usize::from(fits);
        let peak = load.busiest_fabric_link(t).map_or(0.0, |l| l.seconds);
        let bound = r.step_bound(t, c, &load);
        ratios.push(peak / bound.fabric.utilisation);
        vs_nic.push(peak / bound.nic.utilisation);
    }
    let worst = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let la_reroute = load_average();
    let t0 = Instant::now();
    let own = MoeRouting::route(t, c, &p, &steps[0]).unwrap();
    let reroute_ms = ms(t0);
    let own_peak = own.max_uplink_load().map_or(0.0, |l| l.seconds);
    let own_bound = own.step_bound(t, c, own.shape_load()).fabric.utilisation;
    println!(
        "| {} | {ep} | {} | {} | {first_ms:.0} ({la_first}) | {:.2} / {:.2} ({la_steady}) | {:.3} / {:.3} | {:.3} | {fit}/{STEPS} | {reroute_ms:.0} ({la_reroute}) | {:.3} |",
        t.gpu_count(),
        p.pair_count(),
        r.flows().len(),
        median(&mut times.clone()),
        worst(&times),
        median(&mut ratios.clone()),
        worst(&ratios),
        worst(&vs_nic),
        own_peak / own_bound,
    );
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("GPU counts"))
        .collect();
    let gpus = if args.is_empty() {
        vec![8192, 32768]
    } else {
        args
    };
    println!("clos3 presets, EP groups of consecutive GPUs, direct NICs; {STEPS} uneven steps; load average (1/5/15 min) beside each time\n");
    println!("| GPUs | EP | rank pairs | flows | first step ms (load) | steady step ms, median / worst (load) | pinned fabric peak / fabric bound, median / worst | fabric peak / NIC bound, worst | steps within the NIC bound | re-route one step ms (load) | re-routed fabric peak / bound |");
    println!("|---:|---:|---:|---:|---|---|---|---:|---:|---|---:|");
    for g in gpus {
        let t = Topology::from_spec(preset(Preset::Clos3, g).unwrap()).unwrap();
        let c = ClosShape::detect(&t).unwrap();
        for ep in [64, 256] {
            run(&t, &c, ep);
        }
    }
}
