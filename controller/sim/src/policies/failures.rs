//! Link failures to inject into a run: which links (by name, or drawn at
//! random) and when.

use anyhow::bail;
use planner::topology::{EdgeId, NodeRef, Topology};

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
