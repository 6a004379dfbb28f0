//! Validation against known numbers: the probability that `N` flows hashed
//! onto `S` paths see no collision, `S!/((S−N)!·S^N)`, estimated by
//! Monte-Carlo over the simulator's own ECMP routing with random QPs.

use planner::conventions::{FIRST_QP, QP_MASK};
use planner::demand::Flow;
use planner::ecmp::{no_collision_probability, HashKey, HashMode, SeedPolicy};
use planner::rng::Rng;
use planner::topology::generate::{leaf_spine, LeafSpine};
use planner::topology::Topology;

use crate::routing::{Fabric, FlowHash, Hashed};

/// One Monte-Carlo estimate.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Collision {
    /// Paths (spines).
    pub paths: u32,
    /// Flows.
    pub flows: u32,
    /// Trials.
    pub trials: u32,
    /// Fraction of trials without a collision.
    pub estimate: f64,
    /// `S!/((S−N)!·S^N)`.
    pub formula: f64,
    /// Binomial standard error of the estimate at the formula's p.
    pub sigma: f64,
}

/// `flows` flows from distinct NICs of one leaf to distinct NICs of another
/// over `paths` spines, each with a random destination QP, routed by the
/// switch hash (QP-aware, per-switch seeds): how often do they all take
/// different spines?
pub fn collision_monte_carlo(paths: u32, flows: u32, trials: u32, seed: u64) -> Collision {
    let t = Topology::from_spec(
        leaf_spine(&LeafSpine {
            leaves: 2,
            spines: paths,
            hosts_per_leaf: flows,
            ..Default::default()
        })
        .expect("valid leaf-spine"),
    )
    .expect("valid topology");
    let mut fabric = Fabric::new(&t, SeedPolicy::PerSwitch);
    let mut rng = Rng::new(seed);
    let mut route = Vec::new();
    let mut seen = vec![u32::MAX; t.edge_count()];
    let mut clean = 0u32;
    for trial in 0..trials {
        let mut ok = true;
        for h in 0..flows {
            let qp = FIRST_QP + rng.below((QP_MASK - FIRST_QP) as u64) as u32;
            let f = Flow::new(&t, h, flows + h, qp, 0, 1000, 1_000_000_000);
            fabric.hashed(
                f.src,
                f.dst,
                Hashed::Program(FlowHash::of(&HashKey::of_flow(&f, HashMode::QpAware))),
                &mut route,
            );
            let spine_link = route[1].0 as usize;
            if std::mem::replace(&mut seen[spine_link], trial) == trial {
                ok = false;
            }
        }
        clean += ok as u32;
    }
    let p = no_collision_probability(paths, flows);
    Collision {
        paths,
        flows,
        trials,
        estimate: clean as f64 / trials as f64,
        formula: p,
        sigma: (p * (1.0 - p) / trials as f64).sqrt(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within 4 standard errors (plus 1e-3 for p near 0 or 1); fixed seeds,
    /// so the test is deterministic.
    #[test]
    fn monte_carlo_matches_formula() {
        for (s, n) in [(8u32, 8u32), (32, 8), (16, 4), (4, 2)] {
            let c = collision_monte_carlo(s, n, 20_000, 42 + s as u64);
            assert!(
                (c.estimate - c.formula).abs() <= 4.0 * c.sigma + 1e-3,
                "{c:?}"
            );
        }
        // 8!/8^8 = 40320/16777216 = 0.24% (the "about 2.4%" is off
        // by a factor of ten; the collision probability is 99.76%).
        assert!((no_collision_probability(8, 8) - 0.002_403).abs() < 1e-6);
    }
}
