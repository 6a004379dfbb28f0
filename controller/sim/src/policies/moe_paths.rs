//! Foresight's paths for a MoE workload from the controller's own MoE
//! planner ([`planner::moe`]): the EP groups routed from their structure,
//! not flow by flow. The simulator's all-to-all sends channel `c` of a
//! server pair from NIC `c` to NIC `c`, which is the planner's
//! rail-aligned layout ([`NicLayout::RailAligned`]), so every connection
//! is one of the planner's flows (a NIC pair of one group).
//!
//! * pinned (`foresight`): routed once for equal bytes (the structure
//!   alone, as a job's first step installs it) and kept for every step,
//!   whatever its bytes;
//! * re-planned (`foresight-replan`): routed again for each step's own
//!   bytes, the cost a per-step re-plan would avoid paying in paths.

use planner::clos::ClosShape;
use planner::moe::{MoePattern, MoeRouting, NicLayout, Rank, StepBytes};
use planner::paths::Path;
use planner::topology::Topology;

use crate::workload::Workload;

/// Which steps get their own routing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Steps {
    /// One routing of the structure for every step.
    Pinned,
    /// A routing per step, for its bytes.
    Replanned,
}

/// The paths of `w`'s connections (pinned: one per connection; replanned:
/// per step, step-major), or `None` when `w` is not a single MoE job on a
/// Clos whose connections the planner's pattern covers (the caller then
/// plans flow by flow).
pub(super) fn moe_paths(topo: &Topology, w: &Workload, steps: Steps) -> Option<Vec<Path>> {
    if w.ep_groups.is_empty() || w.ep_groups.len() != w.demands.len() || w.jobs.len() != 1 {
        return None;
    }
    let clos = ClosShape::detect(topo)?;
    let servers = topo.servers();
    let groups: Vec<Vec<Rank>> = w
        .ep_groups
        .iter()
        .map(|g| {
            g.iter()
                .flat_map(|&s| {
                    (0..servers[s as usize].gpus).map(move |gpu| Rank { server: s, gpu })
                })
                .collect()
        })
        .collect();
    let pattern = MoePattern::new(topo, groups, NicLayout::RailAligned).ok()?;
    let route = |bytes: &StepBytes| MoeRouting::route(topo, &clos, &pattern, bytes).ok();
    let even = route(&StepBytes::even(&pattern, 1))?;
    let conn = connection_pairs(topo, w, &pattern, &even)?;
    match steps {
        Steps::Pinned => Some(conn.iter().map(|p| even.paths()[p.flow as usize]).collect()),
        Steps::Replanned => {
            let mut out = Vec::with_capacity(conn.len() * w.jobs[0].iterations as usize);
            for n in 0..w.jobs[0].iterations {
                let mut m: Vec<Vec<u64>> = pattern
                    .groups()
                    .iter()
                    .map(|g| vec![0; g.len() * g.len()])
                    .collect();
                for (k, (p, f)) in conn.iter().zip(w.connections()).enumerate() {
                    m[p.group as usize][p.pair as usize] += w.bytes(n, k, f);
                }
                let r = route(&StepBytes::new(&pattern, m).ok()?)?;
                out.extend(conn.iter().map(|p| r.paths()[p.flow as usize]));
            }
            Some(out)
        }
    }
}

/// Where a connection's bytes go in the planner's terms.
struct PairOf {
    group: u32,
    /// Row-major index of (the source server's first rank, the
    /// destination rank) in the group's byte matrix.
    pair: u32,
    /// The planner's flow carrying it.
    flow: u32,
}

/// Each connection's rank pair and planner flow (numbered as in `flows`,
/// any routing of `p`: the numbering does not depend on bytes); `None` if
/// a connection is not the planner's flow between the same NICs.
fn connection_pairs(
    topo: &Topology,
    w: &Workload,
    p: &MoePattern,
    flows: &MoeRouting,
) -> Option<Vec<PairOf>> {
    let hosts = topo.hosts();
    // Per NIC: its group and its first rank's position there.
    let mut rank_of = vec![(u32::MAX, 0u32); hosts.len()];
    for (g, ranks) in p.groups().iter().enumerate() {
        for i in 0..ranks.len() {
            let nic = p.nic(g, i);
            if rank_of[nic as usize].0 == u32::MAX {
                rank_of[nic as usize] = (g as u32, i as u32);
            }
        }
    }
    // Position of each server's first rank in its group.
    let mut first = vec![u32::MAX; topo.servers().len()];
    for ranks in p.groups() {
        for (i, r) in ranks.iter().enumerate().rev() {
            first[r.server as usize] = i as u32;
        }
    }
    let mut out = Vec::with_capacity(w.connections().count());
    for (g, d) in w.demands.iter().enumerate() {
        let n = p.groups()[g].len();
        for f in &d.flows {
            let (dg, j) = rank_of[f.dst as usize];
            let i = first[hosts[f.src as usize].server as usize];
            if dg as usize != g || i == u32::MAX {
                return None;
            }
            let flow = flows.flow_of_pair(g, i as usize, j as usize)?;
            let mf = flows.flows()[flow];
            if (mf.src, mf.dst) != (f.src, f.dst) {
                return None;
            }
            out.push(PairOf {
                group: g as u32,
                pair: i * n as u32 + j,
                flow: flow as u32,
            });
        }
    }
    Some(out)
}
