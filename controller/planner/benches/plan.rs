//! Planning time: ring all-reduce on 1k/8k/32k GPUs (rail-optimized and
//! 3-tier Clos) and an all-to-all of 130k flows. Each iteration plans on a
//! fresh planner (Planner::new is outside the timed part).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::demand::{Demand, DemandKind, QpAllocator};
use planner::topology::generate::{preset, Preset};
use planner::{Planner, PlannerConfig, Topology};

fn demand(t: &Topology, kind: CollectiveKind, gpus: u32) -> Demand {
    let c = Collective::new(kind, select_servers(t, gpus).unwrap(), 1 << 30);
    Demand {
        id: kind.name().into(),
        tenant: "bench".into(),
        priority: 0,
        elastic: false,
        deadline_ns: None,
        kind: DemandKind::Collective(kind),
        flows: expand(t, &c, &mut QpAllocator::new(t)).unwrap(),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan");
    g.sample_size(10);
    for (name, p) in [("rail", Preset::RailOptimized), ("clos3", Preset::Clos3)] {
        for gpus in [1024u32, 8192, 32768] {
            let t = Topology::from_spec(preset(p, gpus).unwrap()).unwrap();
            let d = vec![demand(&t, CollectiveKind::RingAllreduce, gpus)];
            g.bench_function(format!("ring_allreduce/{name}/{gpus}"), |b| {
                b.iter_batched(
                    || Planner::new(&t, PlannerConfig::default()),
                    |mut pl| pl.plan(&d),
                    BatchSize::LargeInput,
                )
            });
        }
    }
    let t = Topology::from_spec(preset(Preset::RailOptimized, 1024).unwrap()).unwrap();
    let d = vec![demand(&t, CollectiveKind::AllToAll, 1024)];
    g.bench_function(
        format!("all_to_all/rail/1024/{}_flows", d[0].flows.len()),
        |b| {
            b.iter_batched(
                || Planner::new(&t, PlannerConfig::default()),
                |mut pl| pl.plan(&d),
                BatchSize::LargeInput,
            )
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
