//! Running the policies: one policy's simulation set up (planned paths,
//! steered ports, flows and their routing) and run (`run_policy`), the
//! ideal and every policy run side by side (`run_all`), and the progress
//! bars and memory figure the runs report.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use planner::paths::Path;
use planner::topology::{NodeRef, Topology};
use planner::{Planner, PlannerConfig};

use super::failures::FailSpec;
use super::flows::{prepare, Prepared};
use super::moe_paths::{moe_paths, Steps};
use super::policy::Policy;
use super::results::{JobResult, PolicyResult, UtilStats};
use super::router::PolicyRouter;
use super::steering::{steer, SteeringStats};
use crate::engine::{simulate, Failure, Job, Options, Router, SimFlow};
use crate::reorder::{Nic, ReorderModel};
use crate::routing::{Fabric, SwitchHashing};
use crate::workload::Workload;

/// Everything one policy's simulation needs.
struct Setup<'t> {
    flows: Vec<SimFlow>,
    jobs: Vec<Job>,
    cap: Vec<f64>,
    router: PolicyRouter<'t>,
    plan_s: f64,
    steering: Option<SteeringStats>,
}

/// Links down from time 0 are known before planning: Foresight plans
/// around them. Switches hash as `hashing` says, and the planner predicts
/// fallback paths with the same hashes.
fn setup<'t>(
    topo: &'t Topology,
    w: &Workload,
    policy: Policy,
    hashing: &SwitchHashing,
    model: &ReorderModel,
    failures: &[Failure],
) -> Setup<'t> {
    let t0 = Instant::now();
    let planned = matches!(
        policy,
        Policy::Foresight | Policy::ForesightReplan | Policy::ForesightEntropy
    );
    let mut reserved = Vec::new();
    // MoE: the controller's MoE planner, when nothing is down at the start
    // (it routes on the whole fabric).
    let steps = match policy {
        Policy::Foresight => Some(Steps::Pinned),
        Policy::ForesightReplan => Some(Steps::Replanned),
        _ => None,
    };
    let moe = steps
        .filter(|_| !failures.iter().any(|f| f.at_ns <= 0.0))
        .and_then(|s| moe_paths(topo, w, s));
    let path_per_step = steps == Some(Steps::Replanned) && moe.is_some();
    let paths: Vec<Path> = if let Some(paths) = moe {
        paths
    } else if planned {
        let config = match hashing {
            SwitchHashing::Program(seeds) => PlannerConfig {
                ecmp_seeds: *seeds,
                ..PlannerConfig::default()
            },
            SwitchHashing::Described(d) => PlannerConfig {
                switch_hash: Some(d.clone()),
                ..PlannerConfig::default()
            },
        };
        let mut p = Planner::new(topo, config);
        for f in failures.iter().filter(|f| f.at_ns <= 0.0) {
            for &e in &f.edges {
                p.set_edge_down(e, true);
            }
        }
        let plan = p.plan(&w.demands);
        reserved = plan
            .demands
            .iter()
            .flat_map(|d| d.flows.iter().map(|f| f.reserved_bps > 0))
            .collect();
        plan.demands
            .iter()
            .flat_map(|d| d.flows.iter().map(|f| f.path))
            .collect()
    } else {
        Vec::new()
    };
    let plan_s = t0.elapsed().as_secs_f64();
    let (ports, steering) = if policy == Policy::ForesightEntropy {
        let (ports, stats) = steer(topo, w, &paths, &reserved, hashing, failures);
        (ports, Some(stats))
    } else {
        (Vec::new(), None)
    };
    let described = matches!(hashing, SwitchHashing::Described(_));
    let Prepared {
        flows,
        routes,
        qp_hashes,
        keys,
        qp_keys,
    } = prepare(
        w,
        policy,
        !paths.is_empty() || w.demands.is_empty(),
        path_per_step,
        model.seed,
        &ports,
        described,
    );
    let gbn =
        matches!(policy, Policy::Spray(Nic::Gbn) | Policy::Flowlet(Nic::Gbn)).then_some(*model);
    let bits = match policy {
        Policy::Flowlet(Nic::Gbn) => flows.iter().map(|f| f.bits).collect(),
        _ => Vec::new(),
    };
    let cap: Vec<f64> = (0..topo.edge_count() as u32)
        .map(|e| topo.edge(e).capacity_bps as f64 / 1e9)
        .collect();
    Setup {
        flows,
        jobs: w
            .jobs
            .iter()
            .map(|j| Job {
                iterations: j.iterations,
                gap_ns: j.gap_ns,
            })
            .collect(),
        cap,
        router: PolicyRouter {
            fabric: Fabric::hashing(topo, hashing),
            routes,
            qps: match policy {
                Policy::QpHash { qps } => qps,
                _ => 1,
            },
            qp_hashes,
            keys,
            qp_keys,
            paths,
            spray: HashMap::new(),
            uses: Vec::new(),
            gbn,
            bits,
            spreads: HashMap::new(),
        },
        plan_s,
        steering,
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
pub fn progress_bar(len: u64, msg: String) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// Simulates one policy, every switch hashing as `hashing` says,
/// reordering costed by `model`; `ideal` gives per job the ideal's
/// iteration times (ratios are 1 without it).
#[allow(clippy::too_many_arguments)]
pub fn run_policy(
    topo: &Topology,
    w: &Workload,
    policy: Policy,
    hashing: &SwitchHashing,
    model: &ReorderModel,
    failures: &[Failure],
    ideal: Option<&[JobResult]>,
    progress: Option<&MultiProgress>,
) -> PolicyResult {
    let t0 = Instant::now();
    let mut su = setup(topo, w, policy, hashing, model, failures);
    let gating: u64 = (0..su.flows.len())
        .filter(|&i| su.flows[i].gate.is_some())
        .map(|i| su.router.subflows(i) as u64)
        .sum();
    let pb = progress.map(|m| m.add(progress_bar(gating, policy.name())));
    let o = simulate(
        &su.flows,
        &su.jobs,
        &su.cap,
        &mut su.router,
        failures,
        Options {
            progress: pb.as_ref(),
            finish_times: false,
            coalesce_ns: w.coalesce_ns,
        },
    );
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let flows = (0..su.flows.len())
        .map(|i| su.router.subflows(i) as usize)
        .sum();
    let (cap, plan_s) = (&su.cap, su.plan_s);
    let jobs: Vec<JobResult> = w
        .jobs
        .iter()
        .zip(o.iteration_ns)
        .enumerate()
        .map(|(j, (spec, iteration_ns))| {
            let ratio: Vec<f64> = match ideal {
                Some(id) => iteration_ns
                    .iter()
                    .zip(&id[j].iteration_ns)
                    .map(|(a, b)| a / b)
                    .collect(),
                None => vec![1.0; iteration_ns.len()],
            };
            JobResult {
                name: spec.name.clone(),
                mean_ratio: ratio.iter().sum::<f64>() / ratio.len().max(1) as f64,
                iteration_ns,
                ratio,
            }
        })
        .collect();
    let span = o.end_ns.max(1e-9);
    let mut link_util: Vec<f64> = (0..topo.edge_count() as u32)
        .filter(|&e| {
            let l = topo.edge(e);
            matches!((l.from, l.to), (NodeRef::Switch(_), NodeRef::Switch(_)))
                && o.edge_bits[e as usize] > 0.0
        })
        .map(|e| o.edge_bits[e as usize] / (cap[e as usize] * span))
        .collect();
    let util = UtilStats::of(&mut link_util);
    PolicyResult {
        policy: policy.name(),
        mean_ratio: jobs.iter().map(|j| j.mean_ratio).fold(0.0, f64::max),
        max_ratio: jobs
            .iter()
            .flat_map(|j| j.ratio.iter().copied())
            .fold(0.0, f64::max),
        jobs,
        util,
        link_util,
        flows,
        events: o.events,
        unfinished: o.unfinished,
        wall_s,
        plan_s,
        steering: su.steering,
    }
}

/// Relative cost, to start the longest simulations first.
fn cost_rank(p: Policy) -> u32 {
    match p {
        Policy::QpHash { qps } => 10 + qps,
        Policy::Foresight | Policy::ForesightReplan | Policy::ForesightEntropy => 9,
        Policy::Adaptive => 8,
        Policy::Flowlet(_) => 6,
        Policy::Ecmp => 5,
        Policy::Spray(_) => 4,
        Policy::Ideal => 0,
    }
}

/// The ideal first, then every policy, `threads` at a time (0: one per
/// core; each holds its own simulation in memory), longest first; results
/// in `policies` order. Failures are timed against the ideal. Switches
/// hash as `hashing` says; `model` costs reordering.
#[allow(clippy::too_many_arguments)]
pub fn run_all(
    topo: &Topology,
    w: &Workload,
    policies: &[Policy],
    hashing: &SwitchHashing,
    model: &ReorderModel,
    fail: &FailSpec,
    progress: bool,
    threads: usize,
) -> Vec<PolicyResult> {
    let mp = progress.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
    let ideal = run_policy(
        topo,
        w,
        Policy::Ideal,
        hashing,
        model,
        &[],
        None,
        mp.as_ref(),
    );
    let failures: Vec<Failure> = if fail.edges.is_empty() {
        Vec::new()
    } else {
        vec![Failure {
            at_ns: fail.at_ns.unwrap_or(ideal.jobs[0].iteration_ns[0] / 2.0),
            edges: fail.edges.clone(),
        }]
    };
    let todo: Vec<Policy> = policies
        .iter()
        .copied()
        .filter(|&p| p != Policy::Ideal)
        .collect();
    let mut order: Vec<usize> = (0..todo.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(cost_rank(todo[k])));
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, todo.len().max(1));
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<PolicyResult>>> = Mutex::new(vec![None; todo.len()]);
    let id = &ideal.jobs;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(&k) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = run_policy(
                        topo,
                        w,
                        todo[k],
                        hashing,
                        model,
                        &failures,
                        Some(id),
                        mp.as_ref(),
                    );
                    done.lock().expect("no thread panicked holding it")[k] = Some(r);
                }
            });
        }
    });
    let mut out = vec![ideal];
    out.extend(
        done.into_inner()
            .expect("no thread panicked holding it")
            .into_iter()
            .map(|r| r.expect("every policy ran")),
    );
    out
}

/// Peak resident set of this process (VmHWM), KiB, if readable.
pub fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policies::failures::random_links;
    use crate::workload::{build, WorkloadKind, WorkloadSpec};
    use crate::{fabrics, reference};
    use planner::ecmp::{HashMode, SeedPolicy};
    use planner::hash_profile::FabricHash;
    use planner::topology::generate::{preset, Preset};

    fn leaf_spine_256() -> Topology {
        Topology::from_spec(preset(Preset::LeafSpine, 256).unwrap()).unwrap()
    }

    /// multi-job on the 64-GPU fabric of `foresight sim run --gpus 64`.
    fn multi_job_64() -> (Topology, Workload) {
        let t = fabrics::generated(Preset::Clos3, 64, 1).unwrap();
        let spec = WorkloadSpec {
            kind: WorkloadKind::MultiJob,
            kv_bytes: 256 << 20,
            ..Default::default()
        };
        let w = build(&t, &spec).unwrap();
        (t, w)
    }

    /// The three jobs of multi-job (the two training rings are both
    /// `ring-allreduce` demands) each follow their own planned paths: every
    /// iteration of every job is as fast as in the ideal fabric (the 64-GPU
    /// fabric of `foresight sim run --gpus 64`, its default sizes).
    #[test]
    fn foresight_is_ideal_on_multi_job() {
        let (t, w) = multi_job_64();
        let r = run_all(
            &t,
            &w,
            &[Policy::Foresight],
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &FailSpec::default(),
            false,
            1,
        );
        let f = r.iter().find(|p| p.policy == "foresight").unwrap();
        assert_eq!(f.jobs.len(), 3);
        for j in &f.jobs {
            assert!(
                j.ratio.iter().all(|&x| x <= 1.0 + 1e-6),
                "{}: {:?}",
                j.name,
                j.ratio
            );
        }
    }

    /// Steered by source ports alone, every reserved flow of the multi-job
    /// mix (rings, all-to-all, background) finds a port and every job runs
    /// as it does on Foresight's SR paths; the ECMP it replaces does not.
    #[test]
    fn entropy_steering_matches_sr_paths() {
        let (t, w) = multi_job_64();
        let r = run_all(
            &t,
            &w,
            &[Policy::Ecmp, Policy::Foresight, Policy::ForesightEntropy],
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &FailSpec::default(),
            false,
            1,
        );
        let by = |name: &str| r.iter().find(|p| p.policy == name).unwrap();
        let st = by("foresight-entropy").steering.unwrap();
        assert!(st.reserved > 40, "{st:?}");
        assert_eq!((st.steered, st.no_port), (st.reserved, 0), "{st:?}");
        for (sr, ent) in by("foresight")
            .jobs
            .iter()
            .zip(&by("foresight-entropy").jobs)
        {
            assert!(
                (sr.mean_ratio - ent.mean_ratio).abs() < 1e-9,
                "{}: {} vs {}",
                sr.name,
                sr.mean_ratio,
                ent.mean_ratio
            );
        }
        assert!(by("ecmp").mean_ratio > by("foresight-entropy").mean_ratio + 0.1);
        assert!(by("foresight").steering.is_none());
    }

    /// Foresight's program written as a description simulates exactly as
    /// the program's fast path: ECMP, adaptive and entropy steering on the
    /// multi-job mix, iteration for iteration.
    #[test]
    fn the_program_described_simulates_as_the_program() {
        let (t, w) = multi_job_64();
        let policies = [Policy::Ecmp, Policy::Adaptive, Policy::ForesightEntropy];
        let run = |h: &SwitchHashing| {
            run_all(
                &t,
                &w,
                &policies,
                h,
                &ReorderModel::default(),
                &FailSpec::default(),
                false,
                1,
            )
        };
        let program = run(&SeedPolicy::PerSwitch.into());
        let d = FabricHash::foresight(&t, &SeedPolicy::PerSwitch, HashMode::FiveTuple);
        let described = run(&SwitchHashing::Described(std::sync::Arc::new(d)));
        assert_eq!(program.len(), described.len());
        for (a, b) in program.iter().zip(&described) {
            assert_eq!(a.policy, b.policy);
            for (x, y) in a.jobs.iter().zip(&b.jobs) {
                assert_eq!(x.iteration_ns, y.iteration_ns, "{} {}", a.policy, x.name);
            }
        }
    }

    /// Where every tier takes its member from the same bits of one CRC, a
    /// flow's spine fixes its super-spine (the switches' choices are
    /// polarised): entropy steering finds no port for reserved paths off
    /// that diagonal and leaves those flows on ECMP. The same CRC read at
    /// other bits per tier (an ASIC's hash offset) steers every flow. The
    /// two descriptions are the examples in `docs/switch-hash/`.
    #[test]
    fn a_polarised_fabric_leaves_flows_without_a_port() {
        let t = fabrics::generated(Preset::Clos3, 256, 1).unwrap();
        let spec = WorkloadSpec {
            kind: WorkloadKind::AllToAll,
            bytes: 16 << 20,
            ..Default::default()
        };
        let w = build(&t, &spec).unwrap();
        let steering = |name: &str| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/switch-hash");
            let file = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
            let d = FabricHash::from_yaml(&t, &file, name).unwrap();
            let r = run_all(
                &t,
                &w,
                &[Policy::ForesightEntropy],
                &SwitchHashing::Described(std::sync::Arc::new(d)),
                &ReorderModel::default(),
                &FailSpec::default(),
                false,
                1,
            );
            let p = r.iter().find(|p| p.policy == "foresight-entropy");
            p.unwrap().steering.unwrap()
        };
        let polarised = steering("asic-crc16-polarised.yaml");
        assert!(
            polarised.no_port > 0 && polarised.steered > 0,
            "{polarised:?}"
        );
        let spread = steering("asic-crc16.yaml");
        assert!(spread.reserved > 1000, "{spread:?}");
        assert_eq!(
            (spread.steered, spread.no_port),
            (spread.reserved, 0),
            "{spread:?}"
        );
    }

    #[test]
    fn foresight_and_spray_are_ideal_ecmp_is_worse_on_average() {
        let t = leaf_spine_256();
        let mut ecmp_sum = 0.0;
        let seeds = [0u64, 1, 2, 3];
        for &seed in &seeds {
            let w = build(
                &t,
                &WorkloadSpec {
                    kind: WorkloadKind::Ring,
                    bytes: 64 << 20,
                    seed,
                    ..Default::default()
                },
            )
            .unwrap();
            let r = run_all(
                &t,
                &w,
                &[Policy::Ecmp, Policy::Spray(Nic::Ooo), Policy::Foresight],
                &SeedPolicy::PerSwitch.into(),
                &ReorderModel::default(),
                &FailSpec::default(),
                false,
                1,
            );
            let get = |n: &str| r.iter().find(|x| x.policy == n).unwrap().mean_ratio;
            assert!(
                (get("spray-ooo") - 1.0).abs() < 1e-6,
                "spray {}",
                get("spray-ooo")
            );
            assert!(
                (get("foresight") - 1.0).abs() < 1e-6,
                "foresight {}",
                get("foresight")
            );
            assert!(get("ecmp") >= 1.0 - 1e-9);
            ecmp_sum += get("ecmp");
        }
        assert!(
            ecmp_sum / seeds.len() as f64 > 1.2,
            "ecmp mean {}",
            ecmp_sum / 4.0
        );
    }

    /// Spraying onto out-of-order-tolerant NICs is the fluid spraying of
    /// before, whatever the reordering model says; onto go-back-N NICs the
    /// same traffic on a loaded fabric loses goodput to rewinds, and more
    /// where NICs also send CNPs. Flowlets on go-back-N NICs pay only where
    /// the delay spread reaches the flowlet timeout.
    #[test]
    fn go_back_n_pays_for_reordering_and_ooo_nics_do_not() {
        let t = Topology::from_spec(preset(Preset::Clos3, 256).unwrap()).unwrap();
        // A ring with background streams: ring flows run at line rate, so
        // their packets are one packet time apart, within the spread.
        let w = build(
            &t,
            &WorkloadSpec {
                bytes: 64 << 20,
                background_load: 0.3,
                ..Default::default()
            },
        )
        .unwrap();
        let run = |p: Policy, m: &ReorderModel| {
            run_policy(&t, &w, p, &SeedPolicy::PerSwitch.into(), m, &[], None, None).jobs[0]
                .iteration_ns[0]
        };
        let base = ReorderModel::default();
        let odd = ReorderModel {
            packet_bits: 8192.0,
            rtt_ns: 50_000.0,
            max_queue_pkts: 500.0,
            nic_burst: 64,
            flowlet_timeout_ns: 1.0,
            cnp_on_ooo: true,
            ..base
        };
        let ooo = run(Policy::Spray(Nic::Ooo), &base);
        assert_eq!(ooo, run(Policy::Spray(Nic::Ooo), &odd));
        assert_eq!(ooo, run(Policy::parse("spray", 4).unwrap(), &base));
        let gbn = run(Policy::Spray(Nic::Gbn), &base);
        assert!(gbn > 1.05 * ooo, "spray-gbn {gbn} vs spray-ooo {ooo}");
        let cnp = ReorderModel {
            cnp_on_ooo: true,
            ..base
        };
        let with_cnp = run(Policy::Spray(Nic::Gbn), &cnp);
        assert!(with_cnp > gbn, "with CNPs {with_cnp} vs {gbn}");
        // An idle spread (queues capped at nothing) costs nothing.
        let calm = ReorderModel {
            max_queue_pkts: 0.0,
            ..base
        };
        assert_eq!(run(Policy::Spray(Nic::Gbn), &calm), ooo);
        // Flowlets: the default timeout is far above the spread.
        let fl = run(Policy::Flowlet(Nic::Ooo), &base);
        assert_eq!(run(Policy::Flowlet(Nic::Gbn), &base), fl);
        let short = ReorderModel {
            flowlet_timeout_ns: 1.0,
            ..base
        };
        assert!(run(Policy::Flowlet(Nic::Gbn), &short) > fl);
        assert_eq!(run(Policy::Flowlet(Nic::Ooo), &short), fl);
    }

    /// Every policy on a small 3-tier fabric, the engine equals the
    /// from-scratch reference: all-to-all with background flows and a link
    /// failing mid-run; MoE with background streams on a fabric with a
    /// link down from the start; the three jobs of multi-job.
    #[test]
    fn policies_agree_with_the_reference_engine() {
        let t = Topology::from_spec(preset(Preset::Clos3, 64).unwrap()).unwrap();
        let link = random_links(&t, 1, 5);
        let cases = [
            (
                WorkloadSpec {
                    kind: WorkloadKind::AllToAll,
                    bytes: 16 << 20,
                    background: 20,
                    background_bytes: 4 << 20,
                    iterations: 2,
                    seed: 3,
                    ..Default::default()
                },
                200_000.0,
            ),
            (
                WorkloadSpec {
                    kind: WorkloadKind::Moe,
                    bytes: 16 << 20,
                    background_load: 0.2,
                    ..Default::default()
                },
                0.0,
            ),
            (
                WorkloadSpec {
                    kind: WorkloadKind::MultiJob,
                    bytes: 16 << 20,
                    kv_bytes: 4 << 20,
                    ..Default::default()
                },
                f64::INFINITY,
            ),
        ];
        for (spec, at_ns) in cases {
            let mut last: HashMap<String, Vec<f64>> = HashMap::new();
            let mut w = build(&t, &spec).unwrap();
            // Exactly; coalescing is checked against exact runs below.
            w.coalesce_ns = 0.0;
            let failures = [Failure {
                at_ns,
                edges: link.clone(),
            }];
            for p in [
                Policy::Ideal,
                Policy::Ecmp,
                Policy::QpHash { qps: 2 },
                Policy::Adaptive,
                Policy::Spray(Nic::Ooo),
                Policy::Spray(Nic::Gbn),
                Policy::Flowlet(Nic::Ooo),
                Policy::Flowlet(Nic::Gbn),
                Policy::Foresight,
            ] {
                // Go-back-N with CNPs, and a flowlet timeout short enough
                // for new flowlets to overtake: every factor is exercised.
                let model = ReorderModel {
                    cnp_on_ooo: true,
                    flowlet_timeout_ns: 150.0,
                    ..ReorderModel::default()
                };
                let mut a = setup(&t, &w, p, &SeedPolicy::PerSwitch.into(), &model, &failures);
                let mut b = setup(&t, &w, p, &SeedPolicy::PerSwitch.into(), &model, &failures);
                let opts = Options {
                    progress: None,
                    finish_times: true,
                    coalesce_ns: w.coalesce_ns,
                };
                let fast = simulate(&a.flows, &a.jobs, &a.cap, &mut a.router, &failures, opts);
                let slow = reference::simulate(
                    &b.flows,
                    &b.jobs,
                    &b.cap,
                    &mut b.router,
                    &failures,
                    w.coalesce_ns,
                );
                let name = format!("{} {}", w.name, p.name());
                assert_eq!(fast.unfinished, slow.unfinished, "{name}");
                let close = |x: f64, y: f64| x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
                let (fi, si) = (fast.iteration_ns.concat(), slow.iteration_ns.concat());
                assert_eq!(fi.len(), si.len());
                for (x, y) in fi.iter().zip(&si) {
                    assert!(close(*x, *y), "{name}: iteration {x} vs {y}");
                }
                for (i, (x, y)) in fast.finish_ns.iter().zip(&slow.finish_ns).enumerate() {
                    assert!(close(*x, *y), "{name}: flow {i} finished at {x} vs {y}");
                }
                assert!(fast.events > 10, "{name}: {} events", fast.events);
                last.insert(p.name(), fi);
            }
            // The go-back-N factors were in play: those runs took longer.
            for kind in ["spray", "flowlet"] {
                let (g, o) = (&last[&format!("{kind}-gbn")], &last[&format!("{kind}-ooo")]);
                assert!(
                    g.iter().sum::<f64>() > o.iter().sum::<f64>(),
                    "{}: {kind} gbn {g:?} vs ooo {o:?}",
                    w.name
                );
            }
        }
    }

    /// MoE finishes within 0.1 % of the phase are merged; iteration times
    /// stay within 0.2 % of the exact simulation under every policy.
    #[test]
    fn moe_coalescing_stays_close_to_exact() {
        let t = Topology::from_spec(preset(Preset::Clos3, 256).unwrap()).unwrap();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Moe,
                bytes: 16 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(w.coalesce_ns > 0.0);
        let mut exact = w.clone();
        exact.coalesce_ns = 0.0;
        for p in Policy::all(2) {
            let m = ReorderModel::default();
            let a = run_policy(
                &t,
                &w,
                p,
                &SeedPolicy::PerSwitch.into(),
                &m,
                &[],
                None,
                None,
            );
            let b = run_policy(
                &t,
                &exact,
                p,
                &SeedPolicy::PerSwitch.into(),
                &m,
                &[],
                None,
                None,
            );
            let (x, y) = (a.jobs[0].iteration_ns[0], b.jobs[0].iteration_ns[0]);
            assert!((x - y).abs() <= 2e-3 * y, "{}: {x} vs exact {y}", a.policy);
            assert!(
                a.events < b.events,
                "{}: {} vs {} events",
                a.policy,
                a.events,
                b.events
            );
        }
    }

    /// MoE steps under Foresight: paths from the MoE planner, the same
    /// pinned path for a connection in every step (re-planned: one per
    /// step, not all the same); every step's bytes are new.
    #[test]
    fn moe_steps_reuse_pinned_paths_and_replanning_routes_each_step() {
        use super::super::router::How;
        let t = fabrics::clos3(1024, 2).unwrap();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Moe,
                bytes: 16 << 20,
                iterations: 3,
                ..Default::default()
            },
        )
        .unwrap();
        let conns = w.connections().count();
        let pinned = moe_paths(&t, &w, Steps::Pinned).unwrap();
        assert_eq!(pinned.len(), conns);
        let re = moe_paths(&t, &w, Steps::Replanned).unwrap();
        assert_eq!(re.len(), 3 * conns);
        assert!(re.chunks(conns).any(|s| s != &pinned[..]));
        // Paths leave the source's leaf and reach the destination's.
        for (p, f) in pinned.iter().zip(w.connections()) {
            let leaf = |h: u32| NodeRef::Switch(t.hosts()[h as usize].leaf);
            if let (Some(&a), Some(&b)) = (p.edges().first(), p.edges().last()) {
                assert_eq!(t.edge(a).from, leaf(f.src));
                assert!(t.edge(b).to == leaf(f.dst) || t.edge(b).to == NodeRef::Host(f.dst));
            }
        }
        let hashing: SwitchHashing = SeedPolicy::PerSwitch.into();
        let m = ReorderModel::default();
        let fixed = |p: Policy| -> Vec<usize> {
            let su = setup(&t, &w, p, &hashing, &m, &[]);
            su.router
                .routes
                .iter()
                .map(|r| match r.how {
                    How::Fixed(k, _) => k as usize,
                    _ => panic!("{}: a connection off its planned path", p.name()),
                })
                .collect()
        };
        let (a, b) = (fixed(Policy::Foresight), fixed(Policy::ForesightReplan));
        assert_eq!(a.len(), 3 * conns);
        for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, i % conns, "pinned: step {} reuses the path", i / conns);
            assert_eq!(y, i, "re-planned: its step's own path");
        }
        // The engine's flows carry each step's bytes.
        let su = setup(&t, &w, Policy::Foresight, &hashing, &m, &[]);
        let bits: Vec<f64> = su.flows.iter().map(|f| f.bits).collect();
        assert!(bits[..conns] != bits[conns..2 * conns]);
        assert!(bits[conns..2 * conns] != bits[2 * conns..]);
        let r = run_policy(&t, &w, Policy::Foresight, &hashing, &m, &[], None, None);
        let it = &r.jobs[0].iteration_ns;
        assert_eq!(it.len(), 3);
        assert!(it[0] != it[1] && it[1] != it[2], "{it:?}");
    }

    #[test]
    fn failure_mid_run_is_survived() {
        let t = leaf_spine_256();
        let w = build(
            &t,
            &WorkloadSpec {
                bytes: 64 << 20,
                iterations: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let fail = FailSpec {
            edges: random_links(&t, 4, 7),
            at_ns: None,
        };
        assert_eq!(fail.edges.len(), 8);
        let r = run_all(
            &t,
            &w,
            &Policy::all(4),
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &fail,
            false,
            2,
        );
        for p in &r {
            assert_eq!(p.unfinished, 0, "{}", p.policy);
            assert!(p.mean_ratio >= 1.0 - 1e-9, "{} {}", p.policy, p.mean_ratio);
        }
    }

    #[test]
    fn mix_with_background_runs() {
        let t = leaf_spine_256();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Mix,
                bytes: 32 << 20,
                kv_bytes: 16 << 20,
                background: 50,
                background_bytes: 8 << 20,
                iterations: 2,
                ..Default::default()
            },
        )
        .unwrap();
        let r = run_all(
            &t,
            &w,
            &Policy::all(4),
            &SeedPolicy::PerSwitch.into(),
            &ReorderModel::default(),
            &FailSpec::default(),
            false,
            0,
        );
        assert_eq!(r.len(), 9);
        for p in &r {
            assert_eq!(p.unfinished, 0);
            assert_eq!(p.jobs[0].iteration_ns.len(), 2);
            assert!(p.jobs[0]
                .iteration_ns
                .iter()
                .all(|x| x.is_finite() && *x > 0.0));
        }
    }

    /// All-to-all between the 8 leaves (one 4-NIC server each) of a 3-tier
    /// Clos whose spines hash over 4 super-spines: with one seed everywhere
    /// every spine repeats its leaf's choice and uses one uplink of 4;
    /// per-switch seeds spread a pod's leaves over more of them, for ECMP
    /// and QP hashing alike (how far is fixed by the seeds, see
    /// `planner::ecmp`).
    #[test]
    fn per_switch_seeds_use_more_of_a_three_tier_fabric() {
        let t = Topology::from_spec(
            planner::topology::generate::multi_pod(&planner::topology::generate::MultiPod {
                pods: 2,
                leaves_per_pod: 4,
                spines_per_pod: 4,
                superspines_per_plane: 4,
                hosts_per_leaf: 4,
                nics_per_server: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let w = build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::AllToAll,
                bytes: 16 << 20,
                ..Default::default()
            },
        )
        .unwrap();
        let run = |seeds: SeedPolicy| {
            let policies = [Policy::Ecmp, Policy::QpHash { qps: 2 }];
            let m = ReorderModel::default();
            run_all(
                &t,
                &w,
                &policies,
                &seeds.into(),
                &m,
                &FailSpec::default(),
                false,
                1,
            )
        };
        let (same, per_switch) = (run(SeedPolicy::Same(0)), run(SeedPolicy::PerSwitch));
        for p in 1..3 {
            let name = &same[p].policy;
            // Leaf-spine links both ways (8 x 4 x 2) plus one super-spine
            // link per spine each way (8 x 2).
            assert_eq!(same[p].util.links, 64 + 16, "{name}");
            assert!(per_switch[p].util.links > 64 + 16, "{name}");
            assert!(
                per_switch[p].mean_ratio < same[p].mean_ratio,
                "{name}: {} vs {}",
                per_switch[p].mean_ratio,
                same[p].mean_ratio
            );
        }
    }
}
