//! `foresight scale --workload moe-ep`: the planner's side of a MoE
//! expert-parallel round at fabric size, every EP group at once. NDSP and
//! the engine do not take MoE as one pattern yet (issue #59), so this
//! stops at the planner: it is what the controller's compute would be
//! once they do, not the whole loop that `--workload ring` times.
//!
//! * first step: the groups routed from their structure
//!   ([`planner::moe::MoeRouting::route`], equal bytes, the pattern's
//!   paths) and the step's rate booked per link in the ledger;
//! * steady step: the step's own (uneven) bytes evaluated on the pinned
//!   paths ([`planner::moe::MoeRouting::evaluate_into`]), every link's
//!   room checked over the window and the step booked per link (replacing
//!   the step before), as `admit_on_pattern` does for a ring.
//!
//! Each step's bytes are drawn (log-normal expert popularity, a new draw a
//! step) before its clock starts: they arrive in the announcement.

use std::time::Instant;

use planner::clos::ClosShape;
use planner::moe::{MoePattern, MoeRouting, NicLayout, StepBytes, StepLoad};
use planner::rng::Rng;
use planner::{Planner, PlannerConfig, Topology, Window};
use serde::Serialize;

/// The step's window: it starts this long after it is announced and the
/// bytes are booked at the rate that sends them in `DURATION_NS`.
const START_NS: u64 = 1_000_000_000;
const DURATION_NS: u64 = 100_000_000;

/// What one run measures.
#[derive(Serialize)]
pub(super) struct MoeReport {
    fabric: String,
    gpus: u32,
    switches: usize,
    ep: u32,
    groups: usize,
    flows: usize,
    links_booked: usize,
    /// Building the pattern (the groups' NICs), once per job.
    pattern_ms: f64,
    /// Routing from structure plus booking the first step.
    first_ms: f64,
    steady_p50_ms: f64,
    steady_p99_ms: f64,
    steady_steps: usize,
    /// Steps whose bytes did not fit their window on the pinned paths
    /// (they would be planned afresh; here they are still booked).
    steady_not_fitting: usize,
    peak_rss_mib: f64,
}

/// Time one MoE-EP job of `ep`-rank groups on `topo`: its first step and
/// `steps` steady ones, each of `bytes_per_rank` spread over the rank's
/// group with log-normal skew `skew`.
pub(super) fn run(
    topo: &Topology,
    ep: u32,
    steps: usize,
    bytes_per_rank: u64,
    skew: f64,
) -> anyhow::Result<MoeReport> {
    let clos = ClosShape::detect(topo)
        .ok_or_else(|| anyhow::anyhow!("{}: not a regular Clos", topo.name()))?;
    let t = Instant::now();
    let pattern = MoePattern::consecutive(topo, ep, NicLayout::RailAligned)?;
    let pattern_ms = t.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "scale: {} EP groups of {ep}, {} flows; the first step...",
        pattern.groups().len(),
        pattern.pair_count()
    );
    let mut planner = Planner::new(topo, PlannerConfig::default());
    let window = Window::new(START_NS, START_NS + DURATION_NS);
    let per_pair = bytes_per_rank / u64::from(ep - 1);

    let t = Instant::now();
    let routing = MoeRouting::route(topo, &clos, &pattern, &StepBytes::even(&pattern, per_pair))?;
    let booked = book(&mut planner, topo, routing.shape_load(), window, "step-0")?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "scale: first step {first_ms:.0} ms ({booked} links booked); {steps} steady steps..."
    );

    let mut rng = Rng::new(59);
    let mut load = StepLoad::default();
    let mut times = Vec::with_capacity(steps);
    let mut not_fitting = 0;
    for i in 1..=steps {
        let bytes = skewed(&pattern, per_pair, skew, &mut rng);
        let t = Instant::now();
        routing.evaluate_into(topo, &bytes, &mut load)?;
        if !load.fits(topo, DURATION_NS) {
            not_fitting += 1;
        }
        book(&mut planner, topo, &load, window, "step")?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if i % 10 == 0 || i == steps {
            eprintln!("scale: steady step {i}/{steps}: {:.2} ms", times[i - 1]);
        }
    }
    times.sort_by(f64::total_cmp);
    let q = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    Ok(MoeReport {
        fabric: topo.name().to_string(),
        gpus: topo.gpu_count() as u32,
        switches: topo.switches().len(),
        ep,
        groups: pattern.groups().len(),
        flows: routing.flows().len(),
        links_booked: booked,
        pattern_ms,
        first_ms,
        steady_p50_ms: q(0.5),
        steady_p99_ms: q(0.99),
        steady_steps: steps,
        steady_not_fitting: not_fitting,
        peak_rss_mib: super::scale::peak_rss_mib(),
    })
}

/// Checks every loaded link has the step's rate free over `window` and
/// books it as `id` (replacing what `id` held); returns the links booked.
fn book(
    planner: &mut Planner,
    topo: &Topology,
    load: &StepLoad,
    window: Window,
    id: &str,
) -> anyhow::Result<usize> {
    planner.release(id);
    let mut entries = Vec::new();
    for (e, &bytes) in load.link_bytes().iter().enumerate() {
        if bytes == 0 {
            continue;
        }
        let bps = (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(window.len_ns())) as u64;
        let e = e as planner::topology::EdgeId;
        let free = planner.free_bps(e, window);
        if free < bps {
            anyhow::bail!(
                "{}: the step needs {bps} bit/s, {free} free",
                topo.describe_edge(e)
            );
        }
        entries.push((e, window, bps));
    }
    planner.book_fixed(id, &entries);
    Ok(entries.len())
}

/// Every pair's bytes: `per_pair` times a log-normal weight per
/// destination expert (mean 1), drawn anew.
fn skewed(pattern: &MoePattern, per_pair: u64, skew: f64, rng: &mut Rng) -> StepBytes {
    let weights: Vec<Vec<f64>> = pattern
        .groups()
        .iter()
        .map(|g| {
            (0..g.len())
                .map(|_| {
                    // Box-Muller; exp(sigma z - sigma^2 / 2) has mean 1.
                    let (u, v) = (rng.unit().max(f64::MIN_POSITIVE), rng.unit());
                    let z = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                    (skew * z - skew * skew / 2.0).exp()
                })
                .collect()
        })
        .collect();
    StepBytes::from_fn(pattern, |g, _, dst| {
        (per_pair as f64 * weights[g][dst]).round() as u64
    })
}

pub(super) fn print(r: &MoeReport) {
    println!(
        "{} ({} GPUs, {} switches), one MoE-EP round: {} groups of {}, {} flows",
        r.fabric, r.gpus, r.switches, r.groups, r.ep, r.flows
    );
    println!(
        "  planner only (NDSP and the engine do not take MoE as a pattern yet); the pattern's NICs {:.1} ms",
        r.pattern_ms
    );
    println!(
        "  first step (routed from structure, {} links booked): {:.1} ms",
        r.links_booked, r.first_ms
    );
    println!(
        "  steady step (evaluated on the pinned paths, checked and booked per link), p50 / p99: {:.2} / {:.2} ms over {} steps ({} over their window)",
        r.steady_p50_ms, r.steady_p99_ms, r.steady_steps, r.steady_not_fitting
    );
    println!("  peak memory {:.0} MiB", r.peak_rss_mib);
}
