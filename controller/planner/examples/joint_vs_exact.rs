//! The planner through the user-facing path vs an exact MILP (good_lp +
//! microlp), both regimes, plus order sensitivity and re-optimization cost.
//!
//! Every case is a demand file (YAML text, as `foresight plan --demands`
//! reads it) loaded with `demand::load_str` and planned by one
//! `Planner::plan` call — the path the CLI, `reserve batch` and the
//! controller's NDSP batches take. The same flows are solved exactly:
//! * **all fits**: rates scaled so the exact min-max peak is 0.72 (under the
//!   0.9 headroom); MILP = min over path choices of the highest (link,
//!   time-cell) utilisation; ratio = planner peak / MILP peak;
//! * **binds**: rates scaled so the exact min-max peak is 1.26 (over the
//!   headroom); MILP = max admitted bytes, lexicographically by priority
//!   class (a demand counts when all its flows are reserved in full, each
//!   link-cell within headroom × capacity); ratio = planner admitted bytes /
//!   MILP admitted bytes.
//!
//! Then each case's demand file in 20 shuffled orders (admitted set and
//! peak vs the best order), the re-optimization cost, and the 32k-GPU
//! ring's planning time through the same call.
//!
//! Run: `cargo run --release -p planner --example joint_vs_exact` (add
//! `quick` for 4 cases per row instead of 12, `ring` for the ring only).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::time::Instant;

use good_lp::{
    constraint, microlp, variable, variables, Expression, Solution, SolverModel, Variable,
};
use planner::admission::Outcome;
use planner::demand::{load_str, Demand};
use planner::paths::all_paths;
use planner::rng::Rng;
use planner::topology::generate::{self, LeafSpine, MultiPod, RailOptimized};
use planner::{Planner, PlannerConfig, Topology};

const HEADROOM: f64 = 0.9;

fn fabrics() -> Vec<Topology> {
    [
        generate::leaf_spine(&LeafSpine {
            name: "2-tier 4 leaves x 8, 2 spines (4:1)".into(),
            leaves: 4,
            spines: 2,
            hosts_per_leaf: 8,
            gpus_per_host: 1,
            ..Default::default()
        })
        .unwrap(),
        generate::multi_pod(&MultiPod {
            name: "3-tier 3 pods x 2 leaves x 4, 2 planes x 1 (4:1)".into(),
            pods: 3,
            leaves_per_pod: 2,
            spines_per_pod: 2,
            superspines_per_plane: 1,
            hosts_per_leaf: 4,
            gpus_per_host: 1,
            ..Default::default()
        })
        .unwrap(),
        generate::rail_optimized(&RailOptimized {
            name: "rail 4 rails x 16 servers, 2 pods (2:1)".into(),
            rails: 4,
            servers: 16,
            servers_per_su: 4,
            sus_per_pod: 2,
            spines_per_pod: 2,
            superspines_per_plane: 1,
            nic_gbps: 100.0,
            leaf_uplink_gbps: 100.0,
            spine_uplink_gbps: 100.0,
            ..Default::default()
        })
        .unwrap(),
    ]
    .into_iter()
    .map(|s| Topology::from_spec(s).unwrap())
    .collect()
}

/// One demand of a case before its rates are scaled.
#[derive(Clone)]
struct Entry {
    id: String,
    priority: u8,
    /// The YAML fields other than id, priority, rate and bytes.
    body: String,
    rate_gbps: f64,
    /// Bytes per Gbit/s (so the duration stays put when the rate scales).
    bytes_per_gbps: f64,
}

fn yaml(entries: &[Entry], scale: f64) -> String {
    let mut s = String::from("demands:\n");
    for e in entries {
        let rate = (e.rate_gbps * scale).min(85.0);
        let bytes = (e.bytes_per_gbps * rate).round().max(1.0);
        let _ = writeln!(
            s,
            "  - {{id: {}, priority: {}, rate_gbps: {rate:.4}, bytes: {bytes}, {}}}",
            e.id, e.priority, e.body
        );
    }
    s
}

/// Random-rate transfers (10-24), some starting later.
fn transfers(t: &Topology, rng: &mut Rng, priorities: bool) -> Vec<Entry> {
    let n = 10 + rng.below(15) as usize;
    let hosts = t.hosts();
    (0..n)
        .map(|i| {
            let (a, b) = loop {
                let (a, b) = (rng.below(hosts.len() as u64), rng.below(hosts.len() as u64));
                if hosts[a as usize].server != hosts[b as usize].server {
                    break (a as usize, b as usize);
                }
            };
            let start = [0u64, 250_000, 500_000][rng.below(3) as usize];
            Entry {
                id: format!("t{i}"),
                priority: if priorities { rng.below(2) as u8 } else { 0 },
                body: format!(
                    "src: {}, dst: {}, start_ns: {start}",
                    hosts[a].name, hosts[b].name
                ),
                rate_gbps: 5.0 + rng.unit() * 25.0,
                // 1 ms at any rate: 125,000 bytes per Gbit/s.
                bytes_per_gbps: 125_000.0,
            }
        })
        .collect()
}

/// 2-3 collectives on random servers plus 4-10 transfers.
fn mixed(t: &Topology, rng: &mut Rng, priorities: bool) -> Vec<Entry> {
    let mut out = transfers(t, rng, priorities);
    out.truncate(4 + rng.below(7) as usize);
    let kinds = ["ring-allreduce", "all-to-all", "kv-transfer", "all-gather"];
    let ns = t.servers().len() as u64;
    for i in 0..2 + rng.below(2) {
        let k = kinds[rng.below(kinds.len() as u64) as usize];
        let m = 2 + rng.below(3);
        let mut picked: BTreeSet<u64> = BTreeSet::new();
        while (picked.len() as u64) < m {
            picked.insert(rng.below(ns));
        }
        let servers: Vec<&str> = picked
            .iter()
            .map(|&s| t.servers()[s as usize].name.as_str())
            .collect();
        let gpus = t.servers()[0].gpus;
        out.push(Entry {
            id: format!("c{i}"),
            priority: if priorities { rng.below(2) as u8 } else { 0 },
            body: format!(
                "collective: {k}, servers: [{}], channels: {}",
                servers.join(", "),
                gpus.min(2)
            ),
            rate_gbps: 5.0 + rng.unit() * 20.0,
            bytes_per_gbps: 125_000.0 * (1 + rng.below(2)) as f64,
        });
    }
    out
}

/// Time cells of a set of flows and which flows are active in each.
fn cells(demands: &[Demand]) -> Vec<Vec<(usize, usize)>> {
    let mut times: Vec<u64> = demands
        .iter()
        .flat_map(|d| d.flows.iter().flat_map(|f| [f.start_ns, f.end_ns()]))
        .collect();
    times.sort_unstable();
    times.dedup();
    times
        .windows(2)
        .map(|w| {
            let mut active = Vec::new();
            for (di, d) in demands.iter().enumerate() {
                for (fi, f) in d.flows.iter().enumerate() {
                    if f.start_ns < w[1] && w[0] < f.end_ns() {
                        active.push((di, fi));
                    }
                }
            }
            active
        })
        .collect()
}

/// Per flow, its candidate paths' reserved edges.
fn candidates(t: &Topology, demands: &[Demand]) -> Vec<Vec<Vec<Vec<u32>>>> {
    demands
        .iter()
        .map(|d| {
            d.flows
                .iter()
                .map(|f| {
                    all_paths(t, f.src, f.dst, 10_000)
                        .iter()
                        .map(|p| p.reserved_edges(t, f.src).collect())
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// `solve` on `demands`, retried on rotations of the list when the
/// solver fails numerically (the problem is the same; the pivots differ).
fn retried<T>(demands: &[Demand], solve: impl Fn(&[Demand]) -> Option<T>) -> Option<T> {
    (0..4).find_map(|r| {
        let mut d = demands.to_vec();
        d.rotate_left(r * demands.len() / 4);
        solve(&d)
    })
}

/// Exact min-max peak utilisation over links and time cells.
fn milp_min_peak(t: &Topology, demands: &[Demand]) -> Option<f64> {
    let cand = candidates(t, demands);
    let mut vars = variables!();
    let z: Variable = vars.add(variable().min(0.0));
    let y: Vec<Vec<Vec<Variable>>> = cand
        .iter()
        .map(|d| {
            d.iter()
                .map(|f| f.iter().map(|_| vars.add(variable().binary())).collect())
                .collect()
        })
        .collect();
    let mut model = vars.minimise(z).using(microlp);
    for d in &y {
        for f in d {
            let one: Expression = f.iter().copied().sum();
            model = model.with(constraint!(one == 1));
        }
    }
    for (e, terms) in link_rows(&cand, demands) {
        let l: Expression = terms
            .iter()
            .map(|&(di, fi, p)| {
                let f = &demands[di].flows[fi];
                (f.rate_bps as f64 / t.edge(e).capacity_bps as f64) * y[di][fi][p]
            })
            .sum();
        model = model.with(constraint!(l <= z));
    }
    model.solve().ok().map(|s| s.value(z))
}

/// (demand, flow, path) choices loading one link together, and the link.
type Term = (usize, usize, usize);
type Row = (u32, Vec<Term>);

/// One row per link and distinct set of (flow, path) terms active on it
/// together in some time cell (repeated rows make the simplex singular).
fn link_rows(cand: &[Vec<Vec<Vec<u32>>>], demands: &[Demand]) -> Vec<Row> {
    let mut rows: BTreeSet<Row> = BTreeSet::new();
    for active in cells(demands) {
        let mut load: HashMap<u32, Vec<Term>> = HashMap::new();
        for &(di, fi) in &active {
            for (p, edges) in cand[di][fi].iter().enumerate() {
                for &e in edges {
                    load.entry(e).or_default().push((di, fi, p));
                }
            }
        }
        rows.extend(load);
    }
    // A row whose terms are a subset of another row of the same link is implied.
    let all: Vec<_> = rows.into_iter().collect();
    all.iter()
        .filter(|(e, terms)| {
            !all.iter().any(|(e2, t2)| {
                e2 == e && t2.len() > terms.len() && terms.iter().all(|x| t2.contains(x))
            })
        })
        .cloned()
        .collect()
}

/// Exact max admitted bytes, lexicographically by priority class (highest
/// first); returns admitted bytes per class, highest class first.
fn milp_max_admitted(t: &Topology, demands: &[Demand]) -> Option<Vec<(u8, f64)>> {
    let cand = candidates(t, demands);
    let mut classes: Vec<u8> = demands.iter().map(|d| d.priority).collect();
    classes.sort_unstable_by(|a, b| b.cmp(a));
    classes.dedup();
    let mb = |d: &Demand| d.flows.iter().map(|f| f.bytes as f64).sum::<f64>() / 1e6;
    let mut fixed: Vec<(u8, f64)> = Vec::new();
    for &class in &classes {
        let mut vars = variables!();
        let x: Vec<Variable> = demands
            .iter()
            .map(|_| vars.add(variable().binary()))
            .collect();
        let y: Vec<Vec<Vec<Variable>>> = cand
            .iter()
            .map(|d| {
                d.iter()
                    .map(|f| f.iter().map(|_| vars.add(variable().binary())).collect())
                    .collect()
            })
            .collect();
        let of_class = |c: u8| -> Expression {
            demands
                .iter()
                .zip(&x)
                .filter(|(d, _)| d.priority == c)
                .map(|(d, &v)| mb(d) * v)
                .sum()
        };
        let mut model = vars.maximise(of_class(class)).using(microlp);
        for &(c, got) in &fixed {
            model = model.with(constraint!(of_class(c) >= got - 1e-3));
        }
        for (di, d) in y.iter().enumerate() {
            for f in d {
                let sum: Expression = f.iter().copied().sum();
                model = model.with(constraint!(sum == x[di]));
            }
        }
        for (e, terms) in link_rows(&cand, demands) {
            let l: Expression = terms
                .iter()
                .map(|&(di, fi, p)| (demands[di].flows[fi].rate_bps as f64 / 1e9) * y[di][fi][p])
                .sum();
            let limit = (t.edge(e).capacity_bps as f64 * HEADROOM).floor() / 1e9;
            model = model.with(constraint!(l <= limit));
        }
        let sol = model.solve().ok()?;
        let got: f64 = demands
            .iter()
            .zip(&x)
            .filter(|(d, _)| d.priority == class)
            .map(|(d, &v)| mb(d) * sol.value(v).round())
            .sum();
        fixed.push((class, got));
    }
    Some(fixed)
}

struct Run {
    peak: f64,
    /// Admitted bytes (MB) per priority class.
    admitted: HashMap<u8, f64>,
    admitted_ids: BTreeSet<String>,
    ms: f64,
}

fn plan(t: &Topology, text: &str, config: PlannerConfig) -> Run {
    let demands = load_str(t, text, 0.9).expect("generated demand files are valid");
    let mut p = Planner::new(t, config);
    let t0 = Instant::now();
    let plan = p.plan(&demands);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let peak = (0..t.edge_count() as u32)
        .map(|e| p.ledger().max(e) as f64 / t.edge(e).capacity_bps as f64)
        .fold(0.0, f64::max);
    let mut admitted: HashMap<u8, f64> = HashMap::new();
    let mut admitted_ids = BTreeSet::new();
    for (d, dp) in demands.iter().zip(&plan.demands) {
        if dp.outcome == Outcome::Admitted {
            *admitted.entry(d.priority).or_default() +=
                d.flows.iter().map(|f| f.bytes as f64).sum::<f64>() / 1e6;
            admitted_ids.insert(d.id.clone());
        }
    }
    Run {
        peak,
        admitted,
        admitted_ids,
        ms,
    }
}

fn batch_only() -> PlannerConfig {
    PlannerConfig {
        joint_max_flows: 0,
        ..Default::default()
    }
}

#[derive(Default)]
struct Stats {
    ratios: Vec<f64>,
    batch_ratios: Vec<f64>,
    top_ratios: Vec<f64>,
    plan_ms: Vec<f64>,
    milp_ms: Vec<f64>,
    flows: Vec<usize>,
    same_set: usize,
    order_peak: Vec<f64>,
    /// Cases the MILP solver failed on (numerically), left out.
    solver_failed: usize,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}
fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::min)
}

fn shuffled(entries: &[Entry], rng: &mut Rng) -> Vec<Entry> {
    let mut v = entries.to_vec();
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
    v
}

/// One row: `cases` random cases of a workload on a fabric in a regime.
fn row(t: &Topology, workload: &str, binds: bool, cases: usize, rng: &mut Rng) -> Stats {
    let mut r = Stats::default();
    for _ in 0..cases {
        let entries = match workload {
            "transfers" => transfers(t, rng, binds),
            _ => mixed(t, rng, binds),
        };
        // Scale rates so the exact min-max peak is where the regime wants it.
        let raw = load_str(t, &yaml(&entries, 1.0), 0.9).unwrap();
        let Some(u) = retried(&raw, |d| milp_min_peak(t, d)) else {
            r.solver_failed += 1;
            continue;
        };
        let target = if binds {
            1.4 * HEADROOM
        } else {
            0.8 * HEADROOM
        };
        let text = yaml(&entries, target / u);
        let demands = load_str(t, &text, 0.9).unwrap();
        let ours = plan(t, &text, PlannerConfig::default());
        let batch = plan(t, &text, batch_only());
        let t0 = Instant::now();
        if binds {
            let Some(exact) = retried(&demands, |d| milp_max_admitted(t, d)) else {
                r.solver_failed += 1;
                continue;
            };
            r.milp_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            let total: f64 = exact.iter().map(|c| c.1).sum();
            let got: f64 = ours.admitted.values().sum();
            let got_batch: f64 = batch.admitted.values().sum();
            r.ratios.push(got / total);
            r.batch_ratios.push(got_batch / total);
            if std::env::var_os("JOINT_DEBUG").is_some() {
                eprintln!("{} {workload}: ours {got:.1} {:?} batch {got_batch:.1} {:?} exact {exact:?}\n{text}", t.name(), ours.admitted_ids, batch.admitted_ids);
            }
            let (top, top_exact) = exact[0];
            let top_got = ours.admitted.get(&top).copied().unwrap_or(0.0);
            r.top_ratios.push(if top_exact > 0.0 {
                top_got / top_exact
            } else {
                1.0
            });
        } else {
            let Some(exact) = retried(&demands, |d| milp_min_peak(t, d)) else {
                r.solver_failed += 1;
                continue;
            };
            r.milp_ms.push(t0.elapsed().as_secs_f64() * 1e3);
            assert!(
                ours.peak > exact - 1e-9,
                "the MILP optimum {exact} is above the planner's {}",
                ours.peak
            );
            assert_eq!(ours.admitted_ids.len(), demands.len(), "all fit");
            r.ratios.push(ours.peak / exact);
            r.batch_ratios.push(batch.peak / exact);
        }
        r.flows
            .push(demands.iter().map(|d| d.flows.len()).sum::<usize>());
        r.plan_ms.push(ours.ms);
        // Order sensitivity: the same demand file in 20 orders.
        let mut peaks = Vec::new();
        let mut sets = BTreeSet::new();
        for _ in 0..20 {
            let o = plan(
                t,
                &yaml(&shuffled(&entries, rng), target / u),
                PlannerConfig::default(),
            );
            peaks.push(o.peak);
            sets.insert(o.admitted_ids);
        }
        if sets.len() == 1 {
            r.same_set += 1;
        }
        r.order_peak.push(max(&peaks) / min(&peaks));
    }
    r
}

/// Re-optimization cost: a 16-rank ring (16 flows) and 8 transfers
/// reserved earlier may move; a new transfer arrives, then a link fails.
fn reoptimization(quick: bool) {
    println!("\n## Re-optimization cost (16-rank ring + 8 transfers movable)\n");
    println!("2-tier fabric above; the ring is 16 one-GPU servers, one channel. Each run: plan the ring and transfers, then (a) `plan_moving` of one more transfer with all of them movable, (b) a spine uplink down and `reoptimize` of all of them. Times are medians of the runs.\n");
    println!("| step | runs | median ms | max ms | moved reservations (median) | peak before → after (median) |");
    println!("|---|---:|---:|---:|---:|---|");
    let t = &fabrics()[0];
    let runs = if quick { 10 } else { 50 };
    let mut rng = Rng::new(17);
    let (mut arrive, mut fail) = (Vec::new(), Vec::new());
    let (mut moved_a, mut moved_f) = (Vec::new(), Vec::new());
    let (mut peaks_a, mut peaks_f) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut entries = transfers(t, &mut rng, false);
        entries.truncate(8);
        let servers: Vec<&str> = t.servers()[..16].iter().map(|s| s.name.as_str()).collect();
        let mut text = yaml(&entries, 1.0);
        let _ = writeln!(
            text,
            "  - {{id: ring, collective: ring-allreduce, servers: [{}], channels: 1, rate_gbps: 20, bytes: 10MB}}",
            servers.join(", ")
        );
        let demands = load_str(t, &text, 0.9).unwrap();
        let ids: Vec<&str> = demands.iter().map(|d| d.id.as_str()).collect();
        let mut p = Planner::new(t, PlannerConfig::default());
        p.plan(&demands);
        let extra = transfers(t, &mut rng, false);
        let mut one = extra[..1].to_vec();
        one[0].id = "new".into();
        let new = load_str(t, &yaml(&one, 2.0), 0.9).unwrap();
        let t0 = Instant::now();
        let plan = p.plan_moving(&new, &ids);
        arrive.push(t0.elapsed().as_secs_f64() * 1e3);
        moved_a.push(plan.moved.len() as f64);
        peaks_a.push((
            plan.joint.peak_before.unwrap_or(f64::NAN),
            plan.joint.peak_after.unwrap_or(f64::NAN),
        ));
        let up = t
            .switch_out_edges(t.switch_by_name("leaf1").unwrap())
            .iter()
            .copied()
            .find(|&e| matches!(t.edge(e).to, planner::topology::NodeRef::Switch(_)))
            .unwrap();
        p.set_edge_down(up, true);
        let mut all = ids.clone();
        all.push("new");
        let t1 = Instant::now();
        let r = p.reoptimize(&all);
        fail.push(t1.elapsed().as_secs_f64() * 1e3);
        moved_f.push(r.moved.len() as f64);
        peaks_f.push((
            r.peak_before.unwrap_or(f64::NAN),
            r.peak_after.unwrap_or(f64::NAN),
        ));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let med_pair = |v: &mut Vec<(f64, f64)>| {
        v.sort_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)));
        v[v.len() / 2]
    };
    let (a, f) = (med_pair(&mut peaks_a), med_pair(&mut peaks_f));
    println!(
        "| a demand arrives (`plan_moving`) | {runs} | {:.3} | {:.3} | {} | {:.3} → {:.3} |",
        med(&mut arrive.clone()),
        max(&arrive),
        med(&mut moved_a),
        a.0,
        a.1
    );
    let fmt_peak = |x: f64| {
        if x > 1e5 {
            "on a down link".to_string()
        } else {
            format!("{x:.3}")
        }
    };
    println!(
        "| a spine uplink fails (`reoptimize`) | {runs} | {:.3} | {:.3} | {} | {} → {} |",
        med(&mut fail.clone()),
        max(&fail),
        med(&mut moved_f),
        fmt_peak(f.0),
        fmt_peak(f.1)
    );
}

/// Nanoseconds this thread has run on a CPU (Linux schedstat): planning
/// cost without the time other processes held the CPU.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The 32k-GPU ring through `Planner::plan` (one demand: joint placement
/// does not run at this size), wall and CPU time.
fn ring_32k(quick: bool) {
    use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
    use planner::demand::{DemandKind, QpAllocator};
    use planner::topology::generate::{preset, Preset};
    println!("\n## Ring all-reduce on 32,768 GPUs through `Planner::plan`\n");
    println!("1 GiB, 8 channels; fresh planner per run (`Planner::new` not timed). Wall time includes waiting for a CPU on a loaded machine; CPU time is the thread's own (Linux schedstat).\n");
    println!("| fabric | flows | runs | wall ms median | CPU ms median | CPU ms max |");
    println!("|---|---:|---:|---:|---:|---:|");
    let runs = if quick { 5 } else { 15 };
    for (name, p) in [
        ("rail-optimized", Preset::RailOptimized),
        ("3-tier Clos", Preset::Clos3),
    ] {
        let t = Topology::from_spec(preset(p, 32768).unwrap()).unwrap();
        let c = Collective::new(
            CollectiveKind::RingAllreduce,
            select_servers(&t, 32768).unwrap(),
            1 << 30,
        );
        let d = vec![Demand {
            id: "ring".into(),
            tenant: "fig".into(),
            priority: 0,
            elastic: false,
            deadline_ns: None,
            kind: DemandKind::Collective(CollectiveKind::RingAllreduce),
            flows: expand(&t, &c, &mut QpAllocator::new(&t)).unwrap(),
        }];
        let (mut wall, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let mut p = Planner::new(&t, PlannerConfig::default());
            let (c0, t0) = (thread_cpu_ns(), Instant::now());
            let plan = p.plan(&d);
            wall.push(t0.elapsed().as_secs_f64() * 1e3);
            if let (Some(a), Some(b)) = (c0, thread_cpu_ns()) {
                cpu.push((b - a) as f64 / 1e6);
            }
            assert_eq!(plan.demands[0].outcome, Outcome::Admitted);
        }
        wall.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!(
            "| {name} | {} | {runs} | {:.2} | {} | {} |",
            d[0].flows.len(),
            wall[wall.len() / 2],
            cpu.get(cpu.len() / 2)
                .map_or("-".into(), |c| format!("{c:.2}")),
            cpu.last().map_or("-".into(), |c| format!("{c:.2}")),
        );
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    if std::env::args().any(|a| a == "ring") {
        ring_32k(quick);
        return;
    }
    let cases = if quick { 4 } else { 12 };
    println!("# Planner through the user path vs exact MILP\n");
    println!(
        "Machine: {} logical CPUs; load average at start: {}.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "unknown".into())
    );
    println!("Each case: one demand file planned by one `Planner::plan` call (defaults: headroom 0.9, partial on). 'batch only' is the same call with joint placement off (`joint_max_flows: 0`): demand by demand, batch by batch, as before joint planning. Orders: the same file shuffled 20 times.\n");
    println!("| fabric | workload | regime | cases | flows (mean) | planner / exact: mean | worst | batch only: mean | worst | top class admitted / exact (worst) | same admitted set in 20 orders | peak worst order / best order (worst case) | plan ms mean / max | MILP ms mean |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rng = Rng::new(2026);
    for t in fabrics() {
        for workload in ["transfers", "mixed"] {
            for binds in [false, true] {
                let r = row(&t, workload, binds, cases, &mut rng);
                let flows: Vec<f64> = r.flows.iter().map(|&n| n as f64).collect();
                println!(
                    "| {} | {workload} | {} | {}{} | {:.1} | {:.4} | {:.4} | {:.4} | {:.4} | {} | {}/{} | {:.4} | {:.2} / {:.2} | {:.0} |",
                    t.name(),
                    if binds { "binds: admitted bytes" } else { "all fits: peak" },
                    r.ratios.len(),
                    if r.solver_failed > 0 { format!(" ({} MILP failures left out)", r.solver_failed) } else { String::new() },
                    mean(&flows),
                    mean(&r.ratios),
                    if binds { min(&r.ratios) } else { max(&r.ratios) },
                    mean(&r.batch_ratios),
                    if binds { min(&r.batch_ratios) } else { max(&r.batch_ratios) },
                    if binds { format!("{:.4}", min(&r.top_ratios)) } else { "-".into() },
                    r.same_set,
                    r.ratios.len(),
                    max(&r.order_peak),
                    mean(&r.plan_ms),
                    max(&r.plan_ms),
                    mean(&r.milp_ms),
                );
            }
        }
    }
    println!("\nRatios: all fits — planner peak / exact min-max peak (mean, worst = highest); binds — planner admitted bytes / exact max admitted bytes (mean, worst = lowest).");
    reoptimization(quick);
    ring_32k(quick);
}
