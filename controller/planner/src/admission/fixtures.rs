//! Fabrics and demands the admission tests share.

use super::{Plan, Planner, PlannerConfig};
use crate::demand::load_str;
use crate::topology::generate::{leaf_spine, LeafSpine};
use crate::topology::{NodeRef, Topology};

pub fn small() -> Topology {
    // 2 leaves x 2 hosts, 2 spines, 100G everywhere.
    Topology::from_spec(leaf_spine(&LeafSpine::default()).unwrap()).unwrap()
}

pub fn planner(t: &Topology) -> Planner<'_> {
    Planner::new(t, PlannerConfig::default())
}

/// The demands of `yaml` (NICs at 90 % of line rate) planned as one set
/// on [`small`] under `config`: how the tests of one outcome or reason
/// start, so each shows only its demands and what it checks.
pub fn plan_small(yaml: &str, config: PlannerConfig) -> Plan {
    let t = small();
    let d = load_str(&t, yaml, 0.9).unwrap();
    Planner::new(&t, config).plan(&d)
}

/// 2 leaves x 5 hosts, 2 spines, 100G.
pub fn two_by_five() -> Topology {
    Topology::from_spec(
        leaf_spine(&LeafSpine {
            hosts_per_leaf: 5,
            ..Default::default()
        })
        .unwrap(),
    )
    .unwrap()
}

pub fn uplink_peak(t: &Topology, p: &Planner<'_>) -> f64 {
    let leaf1 = t.switch_by_name("leaf1").unwrap();
    t.switch_out_edges(leaf1)
        .iter()
        .filter(|&&e| matches!(t.edge(e).to, NodeRef::Switch(_)))
        .map(|&e| p.ledger().max(e) as f64 / t.edge(e).capacity_bps as f64)
        .fold(0.0, f64::max)
}

/// Five transfers leaf1 -> leaf2 of 30, 30, 20, 20, 20 Gbit/s in one
/// file: placed one by one (largest first, each on the emptier spine)
/// the spines carry 70 and 50; planned as one set, 60 and 60.
pub const LPT_TRAP: &str = "demands:
  - {id: a, src: h1, dst: h6, bytes: 1GB, rate_gbps: 30}
  - {id: b, src: h2, dst: h7, bytes: 1GB, rate_gbps: 30}
  - {id: c, src: h3, dst: h8, bytes: 1GB, rate_gbps: 20}
  - {id: d, src: h4, dst: h9, bytes: 1GB, rate_gbps: 20}
  - {id: e, src: h5, dst: h10, bytes: 1GB, rate_gbps: 20}
";
