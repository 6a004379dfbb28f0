//! Entropy steering (`foresight-entropy`): a UDP source port per reserved
//! connection that the switches' own hash carries along its planned path,
//! and what the search found.

use std::time::Instant;

use planner::ecmp::HashMode;
use planner::entropy::{Groups, PortRange, Steering};
use planner::hash_profile::FabricHash;
use planner::paths::Path;
use planner::topology::Topology;

use crate::engine::Failure;
use crate::routing::SwitchHashing;
use crate::workload::Workload;

/// What entropy steering found for one workload: how many reserved flows
/// got a port, how many did not, and what the search cost.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct SteeringStats {
    /// Connections the planner reserved a path for.
    pub reserved: usize,
    /// Of which a source port steers onto that path.
    pub steered: usize,
    /// Of which no port in the range does (they keep their ECMP path).
    pub no_port: usize,
    /// Wall time of the whole search, s.
    pub search_s: f64,
    /// Most candidate ports one flow needed.
    pub max_tried: u32,
}

/// A source port per connection of `w` (`None`: not reserved, or no port
/// found), from the 49152-65535 range, for switches hashing as `hashing`
/// says (Foresight's program: the 5-tuple, with its seeds); links down
/// from time 0 are out of the groups, as they are in the switches' routes.
pub(super) fn steer(
    topo: &Topology,
    w: &Workload,
    paths: &[Path],
    reserved: &[bool],
    hashing: &SwitchHashing,
    failures: &[Failure],
) -> (Vec<Option<u16>>, SteeringStats) {
    let t0 = Instant::now();
    let mut down = vec![false; topo.edge_count()];
    for f in failures.iter().filter(|f| f.at_ns <= 0.0) {
        for &e in &f.edges {
            down[e as usize] = true;
        }
    }
    let steering = match hashing {
        SwitchHashing::Program(seeds) => Steering::new(&seeds.seeds(topo), HashMode::FiveTuple),
        SwitchHashing::Described(d) => Steering::for_fabric(FabricHash::clone(d)),
    };
    let mut groups = Groups::new(topo, |e: u32| down[e as usize]);
    let mut stats = SteeringStats::default();
    let ports = w
        .connections()
        .zip(paths)
        .zip(reserved)
        .map(|((f, path), &reserved)| {
            if !reserved {
                return None;
            }
            stats.reserved += 1;
            match steering.port_in(&mut groups, f, path, PortRange::default()) {
                Ok(s) => {
                    stats.steered += 1;
                    stats.max_tried = stats.max_tried.max(s.tried);
                    Some(s.port)
                }
                Err(_) => {
                    stats.no_port += 1;
                    None
                }
            }
        })
        .collect();
    stats.search_s = t0.elapsed().as_secs_f64();
    (ports, stats)
}
