//! Foresight's flow-level simulator: max-min fair (fluid) rates for the
//! flows of AI collectives on a fabric, under five load-balancing policies.
//!
//! * [`maxmin`] — progressive filling over the links each flow uses.
//! * [`engine`] — event-driven simulation (rates recomputed at every
//!   start, finish and link failure); iterations chain (iteration n+1
//!   starts when the slowest flow of iteration n finishes).
//! * [`routing`] — the switch ECMP walk (the planner's hash with each
//!   switch's seed, group order and `hash % |group|`), fluid spraying,
//!   per-hop least-loaded.
//! * [`qps`] — the K QPs of a connection under `qp-hash-K`.
//! * [`workload`] — the planner's collectives (ring all-reduce,
//!   all-to-all, KV transfer) plus background flows.
//! * [`validate`] — Monte-Carlo ECMP collisions vs `S!/((S−N)!·S^N)`.
//! * [`output`] — table, CSV and SVG plots.
//!
//! Policies ([`Policy`]): ECMP on the 5-tuple; QP-aware hashing with `k`
//! QPs per connection (each connection split into `k` equal sub-flows on
//! consecutive QPs, see [`qps`]); adaptive (per hop, the next hop with the
//! fewest active flows at flow start, ties broken by the switch hash);
//! spraying (fluid, split equally over next hops); Foresight (the
//! planner's paths; a flow whose path fails is re-placed least-loaded, as a
//! re-plan would). Unannounced background traffic uses ECMP under Foresight.
//! Every hashing switch uses its seed under a [`SeedPolicy`] (per-switch by
//! default, or one seed everywhere: the polarised fabric).
//! The ideal is the same traffic on one non-blocking switch (only the NIC
//! links constrain).

pub mod engine;
pub mod maxmin;
pub mod output;
pub mod qps;
pub mod routing;
pub mod validate;
pub mod workload;

use std::time::Instant;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use planner::demand::Flow;
use planner::ecmp::{HashKey, HashMode, SeedPolicy};
use planner::paths::Path;
use planner::topology::{EdgeId, HostIdx, NodeRef, Topology};
use planner::{Planner, PlannerConfig};

use engine::{simulate, Failure, Router, SimFlow, Start};
use maxmin::Use;
use qps::{key_on_qp, qp_blocks};
use routing::Fabric;
use workload::Workload;

/// A load-balancing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Everything on the NIC links only (one big non-blocking switch).
    Ideal,
    /// ECMP on the 5-tuple, one QP per connection.
    Ecmp,
    /// QP-aware hashing, `qps` QPs per connection.
    QpHash {
        /// QPs per connection.
        qps: u32,
    },
    /// Least-loaded next hop at flow start.
    Adaptive,
    /// Per-packet spraying (fluid).
    Spray,
    /// The planner's paths.
    Foresight,
}

impl Policy {
    /// Short name.
    pub fn name(&self) -> String {
        match self {
            Policy::Ideal => "ideal".into(),
            Policy::Ecmp => "ecmp".into(),
            Policy::QpHash { qps } => format!("qp-hash-{qps}"),
            Policy::Adaptive => "adaptive".into(),
            Policy::Spray => "spray".into(),
            Policy::Foresight => "foresight".into(),
        }
    }

    /// Parses `ecmp`, `qp` / `qp-hash` (with `default_qps`), `qp-hash-K`,
    /// `adaptive`, `spray`, `foresight`, `ideal`.
    pub fn parse(s: &str, default_qps: u32) -> anyhow::Result<Policy> {
        Ok(match s {
            "ideal" => Policy::Ideal,
            "ecmp" => Policy::Ecmp,
            "qp" | "qp-hash" => Policy::QpHash { qps: default_qps },
            "adaptive" => Policy::Adaptive,
            "spray" => Policy::Spray,
            "foresight" => Policy::Foresight,
            _ => match s.strip_prefix("qp-hash-").map(str::parse::<u32>) {
                Some(Ok(k)) if k > 0 => Policy::QpHash { qps: k },
                _ => bail!(
                    "policy '{s}': expected one of ecmp, qp-hash, qp-hash-K, adaptive, spray, foresight, ideal"
                ),
            },
        })
    }

    /// The five policies compared by default.
    pub fn all(qps: u32) -> Vec<Policy> {
        vec![
            Policy::Ecmp,
            Policy::QpHash { qps },
            Policy::Adaptive,
            Policy::Spray,
            Policy::Foresight,
        ]
    }
}

#[derive(Clone, Copy, Debug)]
enum How {
    Hashed(HashKey),
    Adaptive(HashKey),
    Spray,
    Fixed(Path, HashKey),
    Ideal,
}

struct Route {
    src: HostIdx,
    dst: HostIdx,
    how: How,
}

struct PolicyRouter<'t> {
    fabric: Fabric<'t>,
    routes: Vec<Route>,
}

impl Router for PolicyRouter<'_> {
    fn route(&mut self, i: usize, load: &[f64], out: &mut Vec<Use>) -> bool {
        let r = &self.routes[i];
        let f = &mut self.fabric;
        match r.how {
            How::Hashed(k) => f.hashed(r.src, r.dst, &k, out),
            How::Adaptive(k) => f.least_loaded(r.src, r.dst, &k, load, out),
            How::Spray => f.sprayed(r.src, r.dst, out),
            How::Fixed(p, k) => {
                f.fixed(r.src, &p, out) || f.least_loaded(r.src, r.dst, &k, load, out)
            }
            How::Ideal => f.ideal(r.src, r.dst, out),
        }
    }
    fn fail(&mut self, edges: &[u32]) {
        for &e in edges {
            self.fabric.fail(e);
        }
    }
    fn rehash_on_failure(&self, i: usize) -> bool {
        matches!(self.routes[i].how, How::Hashed(_) | How::Spray)
    }
}

/// Link failures to inject: these edges go down at `at_ns` (default: half
/// of the ideal first iteration).
#[derive(Clone, Debug, Default)]
pub struct FailSpec {
    /// Directed edges (both directions of a link).
    pub edges: Vec<EdgeId>,
    /// When, ns.
    pub at_ns: Option<f64>,
}

/// Both directed edges of the link between switches `a` and `b` (by name).
pub fn link_edges(topo: &Topology, a: &str, b: &str) -> anyhow::Result<Vec<EdgeId>> {
    let (Some(x), Some(y)) = (topo.switch_by_name(a), topo.switch_by_name(b)) else {
        bail!("--fail {a},{b}: both ends must be switch names of the fabric");
    };
    let mut out = Vec::new();
    for (s, t) in [(x, y), (y, x)] {
        for &e in topo.switch_out_edges(s) {
            if topo.edge(e).to == NodeRef::Switch(t) {
                out.push(e);
            }
        }
    }
    if out.is_empty() {
        bail!("--fail {a},{b}: no link between these switches");
    }
    Ok(out)
}

/// `n` random switch-to-switch links (both directions), seeded.
pub fn random_links(topo: &Topology, n: u32, seed: u64) -> Vec<EdgeId> {
    let fabric: Vec<EdgeId> = (0..topo.edge_count() as u32)
        .filter(|&e| {
            let l = topo.edge(e);
            matches!((l.from, l.to), (NodeRef::Switch(a), NodeRef::Switch(b)) if a < b)
        })
        .collect();
    let mut rng = planner::rng::Rng::new(seed ^ 0xfa11);
    let mut out = Vec::new();
    for _ in 0..n.min(fabric.len() as u32) {
        let e = fabric[rng.below(fabric.len() as u64) as usize];
        let l = topo.edge(e);
        let (NodeRef::Switch(a), NodeRef::Switch(b)) = (l.from, l.to) else {
            continue;
        };
        out.extend(
            link_edges(
                topo,
                &topo.switches()[a as usize].name,
                &topo.switches()[b as usize].name,
            )
            .unwrap_or_default(),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Distribution of time-averaged utilisation over the switch-to-switch
/// links that carried traffic.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct UtilStats {
    /// Links with traffic.
    pub links: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Highest.
    pub max: f64,
}

impl UtilStats {
    /// From values (sorted here).
    pub fn of(v: &mut [f64]) -> UtilStats {
        if v.is_empty() {
            return UtilStats::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        UtilStats {
            links: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// One policy's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Per iteration: duration, ns.
    pub iteration_ns: Vec<f64>,
    /// Per iteration: duration ÷ ideal duration.
    pub ratio: Vec<f64>,
    /// Mean of `ratio`.
    pub mean_ratio: f64,
    /// Largest of `ratio`.
    pub max_ratio: f64,
    /// Link utilisation distribution.
    pub util: UtilStats,
    /// Per used fabric link: time-averaged utilisation (sorted).
    #[serde(skip)]
    pub link_util: Vec<f64>,
    /// Flows simulated.
    pub flows: usize,
    /// Rate recomputations.
    pub events: usize,
    /// Flows that never finished (unroutable after failures).
    pub unfinished: usize,
    /// Wall time of the simulation (and planning, for Foresight), s.
    pub wall_s: f64,
    /// Of which planning, s.
    pub plan_s: f64,
}

/// Simulation inputs derived for one policy.
fn prepare(w: &Workload, policy: Policy, paths: Option<&[Path]>) -> (Vec<SimFlow>, Vec<Route>) {
    let mut flows = Vec::new();
    let mut routes = Vec::new();
    let five = |f: &Flow| HashKey::of_flow(f, HashMode::FiveTuple);
    let blocks = match policy {
        Policy::QpHash { qps } => Some((qps, qp_blocks(w, qps))),
        _ => None,
    };
    for n in 0..w.iterations {
        for (j, f) in w.connections().enumerate() {
            let start = Start::Iteration(n, f.start_ns as f64);
            let bits = f.bytes as f64 * 8.0;
            if let Some((qps, b)) = &blocks {
                let first = b.connections[j];
                for qp in first..first + qps {
                    flows.push(SimFlow {
                        bits: bits / *qps as f64,
                        start,
                    });
                    routes.push(Route {
                        src: f.src,
                        dst: f.dst,
                        how: How::Hashed(key_on_qp(f, qp)),
                    });
                }
                continue;
            }
            let how = match policy {
                Policy::Ideal => How::Ideal,
                Policy::Ecmp => How::Hashed(five(f)),
                Policy::Adaptive => How::Adaptive(five(f)),
                Policy::Spray => How::Spray,
                Policy::Foresight => How::Fixed(paths.expect("planned")[j], five(f)),
                Policy::QpHash { .. } => unreachable!("split above"),
            };
            flows.push(SimFlow { bits, start });
            routes.push(Route {
                src: f.src,
                dst: f.dst,
                how,
            });
        }
    }
    for (i, f) in w.background.iter().enumerate() {
        let how = match policy {
            Policy::Ideal => How::Ideal,
            Policy::Ecmp | Policy::Foresight => How::Hashed(five(f)),
            Policy::QpHash { .. } => {
                let (_, b) = blocks.as_ref().expect("numbered above");
                How::Hashed(key_on_qp(f, b.background[i]))
            }
            Policy::Adaptive => How::Adaptive(five(f)),
            Policy::Spray => How::Spray,
        };
        flows.push(SimFlow {
            bits: f.bytes as f64 * 8.0,
            start: Start::At(f.start_ns as f64),
        });
        routes.push(Route {
            src: f.src,
            dst: f.dst,
            how,
        });
    }
    (flows, routes)
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

/// Simulates one policy, every switch hashing with its seed under `seeds`.
pub fn run_policy(
    topo: &Topology,
    w: &Workload,
    policy: Policy,
    seeds: SeedPolicy,
    failures: &[Failure],
    ideal: Option<&[f64]>,
    progress: bool,
) -> PolicyResult {
    let t0 = Instant::now();
    let paths: Option<Vec<Path>> = (policy == Policy::Foresight).then(|| {
        let mut p = Planner::new(topo, PlannerConfig::default());
        let plan = p.plan(&w.demands);
        plan.demands
            .iter()
            .flat_map(|d| d.flows.iter().map(|f| f.path))
            .collect()
    });
    let plan_s = t0.elapsed().as_secs_f64();
    let (flows, routes) = prepare(w, policy, paths.as_deref());
    let cap: Vec<f64> = (0..topo.edge_count() as u32)
        .map(|e| topo.edge(e).capacity_bps as f64 / 1e9)
        .collect();
    let mut router = PolicyRouter {
        fabric: Fabric::new(topo, seeds),
        routes,
    };
    let gating = flows
        .iter()
        .filter(|f| matches!(f.start, Start::Iteration(..)))
        .count();
    let pb = progress.then(|| progress_bar(gating as u64, policy.name()));
    let o = simulate(
        &flows,
        w.iterations,
        &cap,
        &mut router,
        failures,
        pb.as_ref(),
    );
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let ratio: Vec<f64> = match ideal {
        Some(id) => o.iteration_ns.iter().zip(id).map(|(a, b)| a / b).collect(),
        None => vec![1.0; o.iteration_ns.len()],
    };
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
        mean_ratio: ratio.iter().sum::<f64>() / ratio.len().max(1) as f64,
        max_ratio: ratio.iter().copied().fold(0.0, f64::max),
        ratio,
        iteration_ns: o.iteration_ns,
        util,
        link_util,
        flows: flows.len(),
        events: o.events,
        unfinished: o.unfinished,
        wall_s,
        plan_s,
    }
}

/// The ideal first, then every policy; failures resolved against the ideal.
pub fn run_all(
    topo: &Topology,
    w: &Workload,
    policies: &[Policy],
    seeds: SeedPolicy,
    fail: &FailSpec,
    progress: bool,
) -> Vec<PolicyResult> {
    let ideal = run_policy(topo, w, Policy::Ideal, seeds, &[], None, progress);
    let failures: Vec<Failure> = if fail.edges.is_empty() {
        Vec::new()
    } else {
        vec![Failure {
            at_ns: fail.at_ns.unwrap_or(ideal.iteration_ns[0] / 2.0),
            edges: fail.edges.clone(),
        }]
    };
    let mut out = vec![];
    let id = ideal.iteration_ns.clone();
    out.push(ideal);
    for &p in policies {
        if p != Policy::Ideal {
            out.push(run_policy(
                topo,
                w,
                p,
                seeds,
                &failures,
                Some(&id),
                progress,
            ));
        }
    }
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
    use planner::topology::generate::{preset, Preset};
    use workload::{build, WorkloadKind, WorkloadSpec};

    fn leaf_spine_256() -> Topology {
        Topology::from_spec(preset(Preset::LeafSpine, 256).unwrap()).unwrap()
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
                &[Policy::Ecmp, Policy::Spray, Policy::Foresight],
                SeedPolicy::PerSwitch,
                &FailSpec::default(),
                false,
            );
            let get = |n: &str| r.iter().find(|x| x.policy == n).unwrap().mean_ratio;
            assert!((get("spray") - 1.0).abs() < 1e-6, "spray {}", get("spray"));
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
        let r = run_all(&t, &w, &Policy::all(4), SeedPolicy::PerSwitch, &fail, false);
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
            SeedPolicy::PerSwitch,
            &FailSpec::default(),
            false,
        );
        assert_eq!(r.len(), 6);
        for p in &r {
            assert_eq!(p.unfinished, 0);
            assert_eq!(p.iteration_ns.len(), 2);
            assert!(p.iteration_ns.iter().all(|x| x.is_finite() && *x > 0.0));
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
        let run = |seeds| {
            let policies = [Policy::Ecmp, Policy::QpHash { qps: 2 }];
            run_all(&t, &w, &policies, seeds, &FailSpec::default(), false)
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
