//! Plans one collective on a generated non-blocking fabric and prints the
//! planning time and the plan's summary, e.g.
//! `cargo run --release -p planner --example plan_collective -- clos3 all-to-all 1024 [runs]`.

use std::time::Instant;

use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::demand::{Demand, DemandKind, QpAllocator};
use planner::report::{self, ReportOptions};
use planner::topology::generate::{preset, Preset};
use planner::{Planner, PlannerConfig, Topology};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: plan_collective <leaf-spine|clos3|rail-optimized> <collective> <gpus> [runs]";
    let fabric = match args.first().map(String::as_str) {
        Some("leaf-spine") => Preset::LeafSpine,
        Some("clos3") => Preset::Clos3,
        Some("rail-optimized") => Preset::RailOptimized,
        _ => panic!("{usage}"),
    };
    let kind = args
        .get(1)
        .and_then(|k| CollectiveKind::parse(k))
        .expect(usage);
    let gpus: u32 = args.get(2).and_then(|g| g.parse().ok()).expect(usage);
    let runs: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(5);
    let t = Topology::from_spec(preset(fabric, gpus).unwrap()).unwrap();
    let c = Collective::new(kind, select_servers(&t, gpus).unwrap(), 1 << 30);
    let d = vec![Demand {
        id: kind.name().into(),
        tenant: "example".into(),
        priority: 0,
        elastic: false,
        deadline_ns: None,
        kind: DemandKind::Collective(kind),
        flows: expand(&t, &c, &mut QpAllocator::new(&t)).unwrap(),
    }];
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        let mut p = Planner::new(&t, PlannerConfig::default());
        let t0 = Instant::now();
        let plan = p.plan(&d);
        times.push(t0.elapsed().as_secs_f64() * 1e3);
        last = Some((p, plan));
    }
    times.sort_by(f64::total_cmp);
    let (p, plan) = last.unwrap();
    let r = report::build(
        &p,
        &d,
        &plan,
        times[times.len() / 2],
        ReportOptions {
            flows_per_demand: 2,
            links: 3,
        },
    );
    print!("{}", report::render_text(&r));
    println!(
        "{} flows; planning time median {:.3} ms, min {:.3} ms over {} runs",
        d[0].flows.len(),
        times[times.len() / 2],
        times[0],
        times.len()
    );
}
