//! Reserved flows as ingress-leaf SR push entries (and INT watch entries).

use p4rt::EntrySpec;
use planner::admission::Plan;
use planner::topology::SwitchIdx;
use planner::{Demand, Topology};

use crate::intent::Object;
use crate::names;

/// BMv2 priority queue / MPLS traffic class of reserved traffic.
pub const RESERVED_TC: u8 = 5;
/// Priority of reservation entries (all are exact in effect, so equal).
pub const RESERVATION_PRIORITY: i32 = 100;

/// One reserved flow as the data plane sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedFlow {
    /// Demand id it belongs to.
    pub demand: String,
    pub ingress_leaf: SwitchIdx,
    pub src_ip: std::net::Ipv4Addr,
    pub dst_ip: std::net::Ipv4Addr,
    pub dst_qp: u32,
    /// Adjacency labels, top first (1..=4).
    pub labels: Vec<u32>,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl ReservedFlow {
    /// The ingress leaf's `sr.reservation` entry.
    pub fn entry(&self) -> Object {
        let mut params = vec![("tc".to_string(), RESERVED_TC.to_string())];
        for (i, label) in self.labels.iter().enumerate() {
            params.push((format!("label{i}"), label.to_string()));
        }
        Object::Entry(EntrySpec {
            table: names::SR_RESERVATION.into(),
            matches: [
                (
                    "src_addr".to_string(),
                    format!("{}&&&255.255.255.255", self.src_ip),
                ),
                (
                    "dst_addr".to_string(),
                    format!("{}&&&255.255.255.255", self.dst_ip),
                ),
                ("dst_qp".to_string(), format!("{}&&&0xffffff", self.dst_qp)),
            ]
            .into(),
            action: Some(names::SR_PUSH[self.labels.len() - 1].into()),
            params: params.into_iter().collect(),
            priority: Some(RESERVATION_PRIORITY),
            group: None,
            member: None,
        })
    }
}

/// The reserved flows of a plan: every flow with a reservation and a path
/// whose label stack the data plane can carry.
pub fn reserved_flows(topo: &Topology, demands: &[Demand], plan: &Plan) -> Vec<ReservedFlow> {
    let mut out = Vec::new();
    for dp in &plan.demands {
        let demand = &demands[dp.demand];
        for (flow, fp) in demand.flows.iter().zip(&dp.flows) {
            if fp.reserved_bps == 0 || fp.path.is_empty() {
                continue;
            }
            let Ok(labels) = fp.path.label_stack(topo) else {
                continue;
            };
            if labels.is_empty() || labels.len() > names::SR_PUSH.len() {
                continue;
            }
            let first = topo.edge(fp.path.edges()[0]);
            let planner::topology::NodeRef::Switch(ingress_leaf) = first.from else {
                continue;
            };
            out.push(ReservedFlow {
                demand: demand.id.clone(),
                ingress_leaf,
                src_ip: flow.src_ip,
                dst_ip: flow.dst_ip,
                dst_qp: flow.dest_qp,
                labels,
                start_ns: fp.start_ns,
                end_ns: fp.start_ns + flow.duration_ns,
            });
        }
    }
    out
}
