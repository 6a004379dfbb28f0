//! The planner's figures, as tables:
//!
//! 1. ring all-reduce on 1,024 / 8,192 / 32,768 GPUs (8 per server) on a
//!    rail-optimized and a plain 3-tier Clos: topology build, planning time
//!    (median of runs) and peak heap while planning;
//! 2. an all-to-all of more than 100k flows;
//! 3. optimality: peak link load vs the lower bound on every collective;
//! 4. exact MILP (good_lp + microlp) vs the planner on small random cases:
//!    load ratio and speed ratio;
//! 5. ECMP baselines (QP-aware, 5-tuple, ideal random) vs the plan: peak
//!    load and predicted completion.
//!
//! Run: `cargo run --release -p planner --example planner_figures` (add `quick` to
//! skip the 32k-GPU and 100k-flow rows).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use good_lp::{
    constraint, microlp, variable, variables, Expression, Solution, SolverModel, Variable,
};
use planner::assign::{Assigner, FlowReq};
use planner::bounds::lower_bound;
use planner::clos::ClosShape;
use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::demand::{Demand, DemandKind, QpAllocator};
use planner::ecmp::{self, HashMode, SeedPolicy};
use planner::paths::all_paths;
use planner::rng::Rng;
use planner::topology::generate::{self, LeafSpine, MultiPod, Preset, RailOptimized};
use planner::{Flow, Ledger, Planner, PlannerConfig, Topology, Window};

/// Counts heap bytes in use and the peak since the last reset.
struct Counting;
static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = CUR.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        CUR.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new > l.size() {
                let now = CUR.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CUR.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

fn reset_peak() -> usize {
    let c = CUR.load(Ordering::Relaxed);
    PEAK.store(c, Ordering::Relaxed);
    c
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn collective(
    t: &Topology,
    kind: CollectiveKind,
    gpus: u32,
    bytes: u64,
    rate: Option<u64>,
) -> Demand {
    let mut c = Collective::new(kind, select_servers(t, gpus).unwrap(), bytes);
    c.rate_bps = rate;
    let n = c.servers.len() as u32;
    if kind == CollectiveKind::Pipeline {
        c.stages = (3..=n).find(|p| n % p == 0).unwrap_or(2);
    }
    let flows = expand(t, &c, &mut QpAllocator::new(t)).unwrap();
    Demand {
        id: kind.name().into(),
        tenant: "fig".into(),
        priority: 0,
        elastic: false,
        deadline_ns: None,
        kind: DemandKind::Collective(kind),
        flows,
    }
}

fn peak_util(p: &Planner<'_>) -> f64 {
    let t = p.topology();
    (0..t.edge_count() as u32)
        .map(|e| p.ledger().max(e) as f64 / t.edge(e).capacity_bps as f64)
        .fold(0.0, f64::max)
}

/// Median planning time (ms) over `runs` fresh planners, and peak heap
/// (bytes above what was live before) of one run.
fn time_plan<'a>(t: &'a Topology, d: &Demand, runs: usize) -> (f64, usize, Planner<'a>, String) {
    let mut times = Vec::new();
    let mut last = None;
    let mut heap = 0;
    let mut method = String::new();
    for _ in 0..runs {
        let mut p = Planner::new(t, PlannerConfig::default());
        let before = reset_peak();
        let t0 = Instant::now();
        let plan = p.plan(std::slice::from_ref(d));
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        heap = PEAK.load(Ordering::Relaxed) - before;
        assert!(plan.demands[0].completion_ns.is_some());
        method = plan.demands[0]
            .method
            .map_or("-".into(), |m| format!("{m:?}").to_lowercase());
        drop(plan);
        last = Some(p);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], heap, last.unwrap(), method)
}

fn scale(quick: bool) {
    println!("## 1. Ring all-reduce planning time and memory (1 GiB buffer, 8 channels, 8 GPUs/server, 400G NICs)\n");
    println!("| fabric | GPUs | flows | switches | links | topology build ms | Planner::new ms | plan ms (median) | plan peak heap MiB | peak load | lower bound | method |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let sizes: &[u32] = if quick {
        &[1024, 8192]
    } else {
        &[1024, 8192, 32768]
    };
    for (name, preset) in [
        ("rail-optimized", Preset::RailOptimized),
        ("3-tier Clos", Preset::Clos3),
    ] {
        for &gpus in sizes {
            let t0 = Instant::now();
            let t = Topology::from_spec(generate::preset(preset, gpus).unwrap()).unwrap();
            let build = t0.elapsed().as_secs_f64() * 1e3;
            let d = collective(&t, CollectiveKind::RingAllreduce, gpus, 1 << 30, None);
            let t1 = Instant::now();
            drop(Planner::new(&t, PlannerConfig::default()));
            let new_ms = t1.elapsed().as_secs_f64() * 1e3;
            let (ms, heap, p, plan) = time_plan(&t, &d, 11);
            let lb = lower_bound(&t, p.clos(), &d.flows);
            println!(
                "| {name} | {gpus} | {} | {} | {} | {build:.1} | {new_ms:.1} | {ms:.2} | {:.1} | {:.3} | {:.3} | {plan} |",
                d.flows.len(),
                t.switches().len(),
                t.spec().links.len() + t.hosts().len(),
                mib(heap),
                peak_util(&p),
                lb.utilisation
            );
        }
    }
    if quick {
        return;
    }
    println!(
        "\n## 2. More than 100k flows: all-to-all on 1,024 GPUs (8 channels per server pair)\n"
    );
    println!(
        "| fabric | flows | plan ms (median) | plan peak heap MiB | peak load | lower bound |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, preset) in [
        ("rail-optimized", Preset::RailOptimized),
        ("3-tier Clos", Preset::Clos3),
    ] {
        let t = Topology::from_spec(generate::preset(preset, 1024).unwrap()).unwrap();
        let d = collective(&t, CollectiveKind::AllToAll, 1024, 1 << 30, None);
        let (ms, heap, p, _) = time_plan(&t, &d, 5);
        let lb = lower_bound(&t, p.clos(), &d.flows);
        println!(
            "| {name} | {} | {ms:.1} | {:.1} | {:.4} | {:.4} |",
            d.flows.len(),
            mib(heap),
            peak_util(&p),
            lb.utilisation
        );
    }
}

fn small_fabrics() -> Vec<Topology> {
    [
        generate::leaf_spine(&LeafSpine {
            name: "leaf-spine 4x3 (8:3)".into(),
            leaves: 4,
            spines: 3,
            hosts_per_leaf: 8,
            gpus_per_host: 1,
            nics_per_server: 8,
            ..Default::default()
        })
        .unwrap(),
        generate::multi_pod(&MultiPod {
            name: "3-tier 4 pods (8:3)".into(),
            pods: 4,
            leaves_per_pod: 2,
            spines_per_pod: 3,
            superspines_per_plane: 2,
            hosts_per_leaf: 8,
            gpus_per_host: 1,
            nics_per_server: 8,
            ..Default::default()
        })
        .unwrap(),
        generate::rail_optimized(&RailOptimized {
            name: "rail 4 rails, 3 pods (4:3)".into(),
            rails: 4,
            servers: 24,
            servers_per_su: 4,
            sus_per_pod: 2,
            spines_per_pod: 3,
            superspines_per_plane: 2,
            ..Default::default()
        })
        .unwrap(),
    ]
    .into_iter()
    .map(|s| Topology::from_spec(s).unwrap())
    .collect()
}

fn optimality() {
    println!("\n## 3. Optimality: peak link load vs lower bound (max of cut and colouring bounds), every collective\n");
    println!("Oversubscribed fabrics (so the fabric, not the NICs, binds), all GPUs, 100 Mbit/s per flow, headroom 1.0; plus the 1,024-GPU presets at default rates.\n");
    println!("| fabric | collective | flows | peak load | lower bound | bound kind | ratio |");
    println!("|---|---|---:|---:|---:|---|---:|");
    let mut worst: f64 = 1.0;
    let mut cases = 0;
    let mut run = |t: &Topology, kind: CollectiveKind, rate: Option<u64>, headroom: f64| {
        let d = collective(t, kind, t.gpu_count() as u32, 64 << 20, rate);
        let mut p = Planner::new(
            t,
            PlannerConfig {
                headroom,
                ..Default::default()
            },
        );
        p.plan(std::slice::from_ref(&d));
        let peak = peak_util(&p);
        let lb = lower_bound(t, p.clos(), &d.flows);
        let ratio = peak / lb.utilisation;
        worst = worst.max(ratio);
        cases += 1;
        println!(
            "| {} | {kind} | {} | {peak:.4} | {:.4} | {} | {ratio:.3} |",
            t.name(),
            d.flows.len(),
            lb.utilisation,
            lb.kind
        );
    };
    for t in small_fabrics() {
        for kind in CollectiveKind::ALL {
            run(&t, kind, Some(100_000_000), 1.0);
        }
    }
    for preset in [Preset::RailOptimized, Preset::Clos3] {
        let t = Topology::from_spec(generate::preset(preset, 1024).unwrap()).unwrap();
        for kind in CollectiveKind::ALL {
            run(&t, kind, None, 0.9);
        }
    }
    println!("\n{cases} cases; worst peak / lower bound = {worst:.3}");
}

/// Exact min-max path assignment with good_lp + microlp.
fn milp(t: &Topology, flows: &[Flow]) -> f64 {
    let mut vars = variables!();
    let z: Variable = vars.add(variable().min(0.0));
    let mut choice: Vec<Vec<(Variable, planner::Path)>> = Vec::new();
    for f in flows {
        let paths = all_paths(t, f.src, f.dst, 10_000);
        choice.push(
            paths
                .into_iter()
                .map(|p| (vars.add(variable().binary()), p))
                .collect(),
        );
    }
    let mut model = vars.minimise(z).using(microlp);
    let mut load: std::collections::HashMap<u32, Expression> = std::collections::HashMap::new();
    for (f, opts) in flows.iter().zip(&choice) {
        let one: Expression = opts.iter().map(|(v, _)| *v).sum();
        model = model.with(constraint!(one == 1));
        for (v, p) in opts {
            for e in p.reserved_edges(t, f.src) {
                let w = f.rate_bps as f64 / t.edge(e).capacity_bps as f64;
                *load.entry(e).or_default() += w * *v;
            }
        }
    }
    for (_, l) in load {
        model = model.with(constraint!(l <= z));
    }
    let sol = model.solve().expect("MILP solves");
    sol.value(z)
}

fn exact_comparison() {
    println!("\n## 4. Planner vs exact MILP (good_lp + microlp) on small random cases\n");
    println!("Random sources/destinations (different servers), equal or random rates, all concurrent, 100G links; the planner's path assignment for the batch (no admission) vs the MILP optimum of the same min-max problem.\n");
    println!("| fabric | rates | cases | flows/case | mean load ratio planner/MILP | worst | cases at 1.00 | mean planner ms | mean MILP ms | speed-up |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let fabrics = [
        Topology::from_spec(
            generate::leaf_spine(&LeafSpine {
                name: "leaf-spine 4 leaves x 4 hosts, 2 spines".into(),
                leaves: 4,
                spines: 2,
                hosts_per_leaf: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap(),
        Topology::from_spec(
            generate::multi_pod(&MultiPod {
                name: "3-tier 3 pods x 2 leaves x 3 hosts, 2 planes x 1".into(),
                pods: 3,
                leaves_per_pod: 2,
                spines_per_pod: 2,
                superspines_per_plane: 1,
                hosts_per_leaf: 3,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap(),
    ];
    let mut rng = Rng::new(2024);
    for t in &fabrics {
        let clos = ClosShape::detect(t);
        let ledger = Ledger::new(t.edge_count());
        for (nflows, uniform) in [(12usize, true), (12, false), (20, false)] {
            let cases = 20;
            let (mut sum_ratio, mut worst, mut exact, mut tp, mut tm) = (0.0, 0.0f64, 0, 0.0, 0.0);
            for _ in 0..cases {
                let n = t.hosts().len() as u64;
                let mut q = QpAllocator::new(t);
                let flows: Vec<Flow> = (0..nflows)
                    .map(|_| loop {
                        let (a, b) = (rng.below(n) as u32, rng.below(n) as u32);
                        if t.hosts()[a as usize].server != t.hosts()[b as usize].server {
                            let rate = if uniform {
                                10_000_000_000
                            } else {
                                (5 + rng.below(26)) * 1_000_000_000
                            };
                            let qp = q.alloc(b);
                            break Flow::new(t, a, b, qp, 0, 1 << 20, rate);
                        }
                    })
                    .collect();
                let reqs: Vec<FlowReq> = flows
                    .iter()
                    .map(|f| FlowReq {
                        src: f.src,
                        dst: f.dst,
                        rate_bps: f.rate_bps,
                    })
                    .collect();
                let t0 = Instant::now();
                let mut a = Assigner::new(t);
                let mut paths = Vec::new();
                a.assign(
                    t,
                    clos.as_ref(),
                    &ledger,
                    Window::new(0, 1_000_000),
                    &reqs,
                    &mut paths,
                );
                let planner_ms = t0.elapsed().as_secs_f64() * 1e3;
                let ours = a
                    .added()
                    .map(|(e, b)| b as f64 / t.edge(e).capacity_bps as f64)
                    .fold(0.0, f64::max);
                let t1 = Instant::now();
                let opt = milp(t, &flows);
                let milp_ms = t1.elapsed().as_secs_f64() * 1e3;
                let ratio = ours / opt;
                sum_ratio += ratio;
                worst = worst.max(ratio);
                assert!(
                    ratio > 1.0 - 1e-6,
                    "the MILP optimum {opt} is above the planner's {ours}"
                );
                if ratio < 1.0 + 1e-6 {
                    exact += 1;
                }
                tp += planner_ms;
                tm += milp_ms;
            }
            let c = cases as f64;
            println!(
                "| {} | {} | {cases} | {nflows} | {:.3} | {worst:.3} | {exact}/{cases} | {:.3} | {:.1} | {:.0}x |",
                t.name(),
                if uniform { "equal 10G" } else { "random 5-30G" },
                sum_ratio / c,
                tp / c,
                tm / c,
                tm / tp
            );
        }
    }
}

/// Random permutations (3 QPs per host pair, equal rates) on a small
/// oversubscribed 3-tier fabric: where leaf and pod balance interact.
fn permutations_vs_milp() {
    let t = Topology::from_spec(
        generate::multi_pod(&MultiPod {
            name: "3-tier 3 pods x 3 leaves x 4 NICs, 2 planes x 1".into(),
            pods: 3,
            leaves_per_pod: 3,
            spines_per_pod: 2,
            superspines_per_plane: 1,
            hosts_per_leaf: 4,
            gpus_per_host: 1,
            nics_per_server: 4,
            ..Default::default()
        })
        .unwrap(),
    )
    .unwrap();
    let mut rng = Rng::new(11);
    let n = t.hosts().len() as u32;
    let (cases, mut at_opt, mut solved, mut worst, mut tp, mut tm) = (40, 0, 0, 1.0f64, 0.0, 0.0);
    let mut nflows = 0;
    for _ in 0..cases {
        let mut perm: Vec<u32> = (0..n).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut q = QpAllocator::new(&t);
        let mut flows = Vec::new();
        for h in 0..n {
            let dst = perm[h as usize];
            if t.hosts()[h as usize].server == t.hosts()[dst as usize].server {
                continue;
            }
            for _ in 0..3 {
                let qp = q.alloc(dst);
                flows.push(Flow::new(&t, h, dst, qp, 0, 1 << 20, 2_000_000_000));
            }
        }
        nflows = flows.len();
        let d = Demand {
            id: "perm".into(),
            tenant: "t".into(),
            priority: 0,
            elastic: false,
            deadline_ns: None,
            kind: DemandKind::Transfer,
            flows,
        };
        let t0 = Instant::now();
        let mut p = Planner::new(
            &t,
            PlannerConfig {
                headroom: 1.0,
                ..Default::default()
            },
        );
        p.plan(std::slice::from_ref(&d));
        tp += t0.elapsed().as_secs_f64() * 1e3;
        let ours = peak_util(&p);
        let lb = lower_bound(&t, p.clos(), &d.flows).utilisation;
        // At the lower bound the plan is optimal; otherwise ask the MILP.
        let opt = if ours <= lb + 1e-9 {
            ours
        } else {
            let t1 = Instant::now();
            let opt = milp(&t, &d.flows);
            tm += t1.elapsed().as_secs_f64() * 1e3;
            solved += 1;
            opt
        };
        let ratio = ours / opt;
        worst = worst.max(ratio);
        if ratio < 1.0 + 1e-6 {
            at_opt += 1;
        }
    }
    println!(
        "| {} | equal 2G, random permutations x 3 QPs | {cases} | ~{nflows} | - | {worst:.3} | {at_opt}/{cases} | {:.3} | {} | - |",
        t.name(),
        tp / cases as f64,
        if solved > 0 { format!("{:.1}", tm / solved as f64) } else { "-".into() }
    );
    println!(
        "\n(Permutation rows: a plan at the lower bound is optimal without a solve; the MILP ran for the {solved} case(s) above the bound.)"
    );
}

fn ecmp_baselines(quick: bool) {
    println!("\n## 5. ECMP baselines on the same flows (no reservations)\n");
    println!("Predicted completion: each flow progresses at its rate / max(1, offered load / capacity) on its path (fluid, proportional sharing). ECMP as the switches hash: per-switch seeds (the default), and one seed everywhere (the polarised fabric); 'ideal random' picks uniformly and independently at every hop for every flow (collisions of its own included).\n");
    println!("| fabric | GPUs | collective | plan: peak load | plan: completion ms | ECMP QP-aware: peak / completion ms | ECMP QP-aware, same seed: peak / completion ms | ECMP 5-tuple: peak / completion ms | ideal random: peak / completion ms | gain (QP-aware completion / plan) |");
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let sizes: &[u32] = if quick { &[1024] } else { &[1024, 8192] };
    for (name, preset) in [
        ("rail-optimized", Preset::RailOptimized),
        ("3-tier Clos", Preset::Clos3),
    ] {
        for &gpus in sizes {
            let t = Topology::from_spec(generate::preset(preset, gpus).unwrap()).unwrap();
            let kinds: &[CollectiveKind] = if gpus > 1024 {
                &[CollectiveKind::RingAllreduce]
            } else {
                &CollectiveKind::ALL
            };
            for &kind in kinds {
                let d = collective(&t, kind, gpus, 1 << 30, None);
                let mut p = Planner::new(&t, PlannerConfig::default());
                let plan = p.plan(std::slice::from_ref(&d));
                let done = plan.demands[0].completion_ns.unwrap() as f64 / 1e6;
                let q = ecmp::baseline(&t, &d.flows, HashMode::QpAware, SeedPolicy::PerSwitch);
                let same = ecmp::baseline(&t, &d.flows, HashMode::QpAware, SeedPolicy::Same(0));
                let f5 = ecmp::baseline(&t, &d.flows, HashMode::FiveTuple, SeedPolicy::PerSwitch);
                let r = ecmp::random_baseline(&t, &d.flows, 7);
                let ms = |o: &ecmp::EcmpOutcome| o.completion_ns as f64 / 1e6;
                println!(
                    "| {name} | {gpus} | {kind} | {:.3} | {done:.3} | {:.2} / {:.3} | {:.2} / {:.3} | {:.2} / {:.3} | {:.2} / {:.3} | {:.2}x |",
                    peak_util(&p),
                    q.peak_utilisation,
                    ms(&q),
                    same.peak_utilisation,
                    ms(&same),
                    f5.peak_utilisation,
                    ms(&f5),
                    r.peak_utilisation,
                    ms(&r),
                    ms(&q) / done
                );
            }
        }
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    println!("# Foresight planner figures\n");
    println!(
        "Machine: {} logical CPUs; single-threaded planner.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    scale(quick);
    optimality();
    exact_comparison();
    permutations_vs_milp();
    ecmp_baselines(quick);
}
