//! The policy × workload × size table (`foresight sim table`): which
//! workloads on which fabrics, at which sizes.

use planner::topology::{NodeRef, Topology};

use crate::reorder::ReorderModel;
use crate::routing::SwitchHashing;
use crate::workload::{build, WorkloadKind, WorkloadSpec};
use crate::{fabrics, run_all, FailSpec, Policy, PolicyResult};

/// One row family of the table.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name on the command line and in the table.
    pub name: &'static str,
    /// The workload (built on every fabric size).
    pub spec: WorkloadSpec,
    /// Leaf oversubscription of the `clos3` fabric (1: non-blocking).
    pub oversubscription: u32,
    /// The first leaf's first uplink is down from the start (and known to
    /// the planner).
    pub link_down: bool,
    /// GPU counts it runs at (fabric-wide all-to-all kinds stop at 8k: 32k
    /// would be 134 million connections, which no job makes).
    pub sizes: &'static [u32],
    /// Runs only when named (`--workloads`): its sizes take minutes to
    /// hours here (the MoE-EP rows), too long for the table's default.
    pub when_named: bool,
}

const ALL_SIZES: &[u32] = &[1024, 8192, 32768];
const A2A_SIZES: &[u32] = &[1024, 8192];
/// MoE expert parallelism at the real shape: 8k, 32k and ~100k GPUs
/// (102,400: 200 pods of 16 leaves, [`fabrics::GPUS_100K`]).
pub const MOE_EP_SIZES: &[u32] = &[8192, 32768, fabrics::GPUS_100K];
/// Steps of the MoE-EP rows: each a new token draw on the same
/// connections (Foresight keeps its first paths).
pub const MOE_EP_STEPS: u32 = 3;

/// Background load of the background row: a quarter of every NIC.
pub const BACKGROUND_LOAD: f64 = 0.25;

/// The table's rows, in order.
pub fn scenarios() -> Vec<Scenario> {
    let spec = |kind| WorkloadSpec {
        kind,
        kv_bytes: 256 << 20,
        ..Default::default()
    };
    let row = |name, spec, oversubscription, link_down, sizes| Scenario {
        name,
        spec,
        oversubscription,
        link_down,
        sizes,
        when_named: false,
    };
    let moe = |ep_gpus| WorkloadSpec {
        ep_gpus,
        iterations: MOE_EP_STEPS,
        ..spec(WorkloadKind::Moe)
    };
    vec![
        row("ring", spec(WorkloadKind::Ring), 1, false, ALL_SIZES),
        row(
            "all-to-all",
            spec(WorkloadKind::AllToAll),
            1,
            false,
            A2A_SIZES,
        ),
        row("moe", spec(WorkloadKind::Moe), 1, false, A2A_SIZES),
        row(
            "multi-job",
            spec(WorkloadKind::MultiJob),
            1,
            false,
            ALL_SIZES,
        ),
        row(
            "ring+background",
            WorkloadSpec {
                background_load: BACKGROUND_LOAD,
                ..spec(WorkloadKind::Ring)
            },
            1,
            false,
            ALL_SIZES,
        ),
        row(
            "all-to-all link-down",
            spec(WorkloadKind::AllToAll),
            1,
            true,
            A2A_SIZES,
        ),
        row("ring 2:1", spec(WorkloadKind::Ring), 2, false, ALL_SIZES),
        row(
            "all-to-all 2:1",
            spec(WorkloadKind::AllToAll),
            2,
            false,
            A2A_SIZES,
        ),
        row("moe-ep64", moe(64), 1, false, MOE_EP_SIZES),
        row("moe-ep256", moe(256), 1, false, MOE_EP_SIZES),
        row("moe-ep64 2:1", moe(64), 2, false, MOE_EP_SIZES),
        row("moe-ep256 2:1", moe(256), 2, false, MOE_EP_SIZES),
    ]
    .into_iter()
    .map(|r| Scenario {
        when_named: r.sizes == MOE_EP_SIZES,
        ..r
    })
    .collect()
}

/// Runs one scenario at `gpus` GPUs: the ideal, then `policies`
/// (`threads` at a time, see [`run_all`]); `seed` as in [`WorkloadSpec`],
/// switches hashing as `hashing` says for the generated fabric,
/// reordering costed by `model`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    sc: &Scenario,
    gpus: u32,
    policies: &[Policy],
    seed: u64,
    hashing: &dyn Fn(&Topology) -> anyhow::Result<SwitchHashing>,
    model: &ReorderModel,
    progress: bool,
    threads: usize,
) -> anyhow::Result<Vec<PolicyResult>> {
    let topo = fabrics::clos3(gpus, sc.oversubscription)?;
    let hashing = hashing(&topo)?;
    let w = build(
        &topo,
        &WorkloadSpec {
            seed,
            ..sc.spec.clone()
        },
    )?;
    let fail = if sc.link_down {
        first_uplink_down(&topo)
    } else {
        FailSpec::default()
    };
    Ok(run_all(
        &topo, &w, policies, &hashing, model, &fail, progress, threads,
    ))
}

/// Both directions of the first leaf's first uplink, down from time 0.
pub fn first_uplink_down(topo: &Topology) -> FailSpec {
    let leaf = topo.leaves()[0];
    let up = topo
        .switch_out_edges(leaf)
        .iter()
        .copied()
        .find(|&e| matches!(topo.edge(e).to, NodeRef::Switch(_)))
        .expect("a leaf of a multi-tier fabric has an uplink");
    let NodeRef::Switch(spine) = topo.edge(up).to else {
        unreachable!("found above")
    };
    let names = |s: u32| topo.switches()[s as usize].name.clone();
    FailSpec {
        edges: crate::link_edges(topo, &names(leaf), &names(spine))
            .expect("the link exists: its edge was just found"),
        at_ns: Some(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_unique_comma_free_names_and_global_a2a_stops_at_8k() {
        let s = scenarios();
        assert!(
            s.iter().all(|r| !r.name.contains(',')),
            "names go in a comma list"
        );
        let mut names: Vec<_> = s.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), s.len());
        // The MoE-EP rows run only when named; every other row by default.
        for r in &s {
            assert_eq!(r.when_named, r.name.starts_with("moe-ep"), "{}", r.name);
        }
        for r in &s {
            let global = r.spec.kind == WorkloadKind::AllToAll
                || (r.spec.kind == WorkloadKind::Moe && r.spec.ep_gpus >= 8192);
            if global {
                assert!(r.sizes.iter().all(|&g| g <= 8192), "{}", r.name);
            }
        }
        // MoE at the real shape: EP 64 and 256, 1:1 and 2:1, up to ~100k.
        for ep in [64, 256] {
            for over in [1, 2] {
                let r = s
                    .iter()
                    .find(|r| {
                        r.spec.kind == WorkloadKind::Moe
                            && r.spec.ep_gpus == ep
                            && r.oversubscription == over
                            && r.sizes == MOE_EP_SIZES
                    })
                    .unwrap_or_else(|| panic!("no EP {ep} {over}:1 row"));
                assert!(r.spec.iterations > 1, "{}: steps", r.name);
            }
        }
    }

    #[test]
    fn the_link_down_is_a_leaf_uplink_in_both_directions_from_the_start() {
        let t = crate::fabrics::clos3(1024, 1).unwrap();
        let f = first_uplink_down(&t);
        assert_eq!(f.edges.len(), 2);
        assert_eq!(f.at_ns, Some(0.0));
        let ends: Vec<_> = f
            .edges
            .iter()
            .map(|&e| (t.edge(e).from, t.edge(e).to))
            .collect();
        assert_eq!(ends[0].0, ends[1].1);
        assert!(ends
            .iter()
            .any(|&(a, _)| a == NodeRef::Switch(t.leaves()[0])));
    }
}
