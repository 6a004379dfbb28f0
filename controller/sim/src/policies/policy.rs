//! The load-balancing policies a workload is simulated under: their names,
//! and parsing them from the command line.

use anyhow::bail;

use crate::reorder::Nic;

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
    /// Per-packet spraying (fluid), onto NICs of this kind.
    Spray(Nic),
    /// Flowlet switching: a random path per flow (message), NICs of this kind.
    Flowlet(Nic),
    /// The planner's paths (MoE: routed once from the groups' structure
    /// and pinned for every step).
    Foresight,
    /// The planner's paths, MoE re-planned for every step's own bytes:
    /// what pinning costs (not in [`Policy::all`]; elsewhere as
    /// `Foresight`, whose bytes do not change between iterations).
    ForesightReplan,
    /// The planner's paths, reached through the switches' own ECMP hash:
    /// each reserved flow sends on the UDP source port that hashes onto its
    /// path ([`planner::entropy`]); a flow with no such port keeps its own
    /// port and its ECMP path. No switch runs Foresight's program.
    ForesightEntropy,
}

impl Policy {
    /// Short name.
    pub fn name(&self) -> String {
        match self {
            Policy::Ideal => "ideal".into(),
            Policy::Ecmp => "ecmp".into(),
            Policy::QpHash { qps } => format!("qp-hash-{qps}"),
            Policy::Adaptive => "adaptive".into(),
            Policy::Spray(nic) => format!("spray-{}", nic.name()),
            Policy::Flowlet(nic) => format!("flowlet-{}", nic.name()),
            Policy::Foresight => "foresight".into(),
            Policy::ForesightReplan => "foresight-replan".into(),
            Policy::ForesightEntropy => "foresight-entropy".into(),
        }
    }

    /// Parses `ecmp`, `qp` / `qp-hash` (with `default_qps`), `qp-hash-K`,
    /// `adaptive`, `spray-gbn`, `spray-ooo`, `flowlet-gbn`, `flowlet-ooo`,
    /// `foresight`, `foresight-replan`, `foresight-entropy`, `ideal`. `spray` alone is `spray-ooo`: the reorder-free
    /// spraying this simulator modelled before NICs were told apart.
    pub fn parse(s: &str, default_qps: u32) -> anyhow::Result<Policy> {
        Ok(match s {
            "ideal" => Policy::Ideal,
            "ecmp" => Policy::Ecmp,
            "qp" | "qp-hash" => Policy::QpHash { qps: default_qps },
            "adaptive" => Policy::Adaptive,
            "spray" | "spray-ooo" => Policy::Spray(Nic::Ooo),
            "spray-gbn" => Policy::Spray(Nic::Gbn),
            "flowlet-ooo" => Policy::Flowlet(Nic::Ooo),
            "flowlet-gbn" => Policy::Flowlet(Nic::Gbn),
            "flowlet" => bail!(
                "policy 'flowlet': say which NICs, flowlet-gbn (go-back-N) or flowlet-ooo (out-of-order tolerant)"
            ),
            "foresight" => Policy::Foresight,
            "foresight-replan" => Policy::ForesightReplan,
            "foresight-entropy" => Policy::ForesightEntropy,
            _ => match s.strip_prefix("qp-hash-").map(str::parse::<u32>) {
                Some(Ok(k)) if k > 0 => Policy::QpHash { qps: k },
                _ => bail!(
                    "policy '{s}': expected one of ecmp, qp-hash, qp-hash-K, adaptive, spray-gbn, spray-ooo (or spray), flowlet-gbn, flowlet-ooo, foresight, foresight-replan, foresight-entropy, ideal"
                ),
            },
        })
    }

    /// The policies compared by default.
    pub fn all(qps: u32) -> Vec<Policy> {
        vec![
            Policy::Ecmp,
            Policy::QpHash { qps },
            Policy::Adaptive,
            Policy::Spray(Nic::Gbn),
            Policy::Spray(Nic::Ooo),
            Policy::Flowlet(Nic::Gbn),
            Policy::Flowlet(Nic::Ooo),
            Policy::Foresight,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_parse_and_bare_flowlet_is_refused() {
        for p in Policy::all(4) {
            assert_eq!(Policy::parse(&p.name(), 4).unwrap(), p);
        }
        assert_eq!(Policy::parse("spray", 4).unwrap(), Policy::Spray(Nic::Ooo));
        let r = Policy::ForesightReplan;
        assert_eq!(Policy::parse(&r.name(), 4).unwrap(), r);
        assert!(!Policy::all(4).contains(&r));
        let e = Policy::parse("flowlet", 4).unwrap_err().to_string();
        assert!(
            e.contains("flowlet-gbn") && e.contains("flowlet-ooo"),
            "{e}"
        );
        let e = Policy::parse("sprey", 4).unwrap_err().to_string();
        assert!(e.contains("spray-gbn"), "{e}");
    }
}
