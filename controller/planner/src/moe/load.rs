//! One step's bytes on the pinned paths: per directed link and per flow.
//! A step cannot finish before its busiest link has sent its bytes, so the
//! link time (bytes ÷ capacity) is the load's unit, the same unit as the
//! step's lower bound ([`super::MoeRouting::step_bound`]).

use crate::conventions::NS_PER_SEC;
use crate::topology::{EdgeId, NodeRef, Topology};

/// Bytes of one step on every directed link (indexed by [`EdgeId`]) and on
/// every flow of the routing that evaluated it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepLoad {
    pub(super) link: Vec<u64>,
    pub(super) flow: Vec<u64>,
}

/// One link's load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkLoad {
    /// The directed link.
    pub edge: EdgeId,
    /// Bytes the step puts on it.
    pub bytes: u64,
    /// Time the link needs to send them at its capacity, s.
    pub seconds: f64,
}

impl StepLoad {
    /// Bytes on each directed link.
    pub fn link_bytes(&self) -> &[u64] {
        &self.link
    }

    /// Bytes of each flow ([`super::MoeRouting::flows`] order).
    pub fn flow_bytes(&self) -> &[u64] {
        &self.flow
    }

    /// The load of link `e`.
    pub fn link(&self, topo: &Topology, e: EdgeId) -> LinkLoad {
        let bytes = self.link[e as usize];
        LinkLoad {
            edge: e,
            bytes,
            seconds: bytes as f64 * 8.0 / topo.edge(e).capacity_bps as f64,
        }
    }

    /// The switch-to-switch link that needs the longest (`None` when no
    /// byte crosses one): what path choice decides.
    pub fn busiest_fabric_link(&self, topo: &Topology) -> Option<LinkLoad> {
        self.busiest(topo, |e| {
            let l = topo.edge(e);
            matches!((l.from, l.to), (NodeRef::Switch(_), NodeRef::Switch(_)))
        })
    }

    /// The link, NICs included, that needs the longest.
    pub fn busiest_link(&self, topo: &Topology) -> Option<LinkLoad> {
        self.busiest(topo, |_| true)
    }

    fn busiest(&self, topo: &Topology, keep: impl Fn(EdgeId) -> bool) -> Option<LinkLoad> {
        let mut best: Option<LinkLoad> = None;
        for (e, &b) in self.link.iter().enumerate() {
            if b == 0 || !keep(e as EdgeId) {
                continue;
            }
            let l = self.link(topo, e as EdgeId);
            if best.is_none_or(|x| l.seconds > x.seconds) {
                best = Some(l);
            }
        }
        best
    }

    /// Whether every link sends its bytes within `budget_ns` (exact, in
    /// integers).
    pub fn fits(&self, topo: &Topology, budget_ns: u64) -> bool {
        self.link.iter().enumerate().all(|(e, &b)| {
            b as u128 * 8 * NS_PER_SEC as u128
                <= topo.edge(e as EdgeId).capacity_bps as u128 * budget_ns as u128
        })
    }
}
