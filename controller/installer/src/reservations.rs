//! Reserved flows as ingress-leaf entries: the SR push (which also sets the
//! priority queue through the MPLS traffic class) and the INT watch entry.

use std::net::Ipv4Addr;

use p4rt::EntrySpec;
use planner::admission::Plan;
use planner::conventions::ROCEV2_UDP_PORT;
use planner::topology::{NodeRef, SwitchIdx};
use planner::{Demand, Topology};

use crate::names;
use crate::object::Object;

/// BMv2 priority queue / MPLS traffic class of reserved traffic.
pub const RESERVED_TC: u8 = 5;
/// Priority of reservation entries (all are exact in effect, so equal).
pub const RESERVATION_PRIORITY: i32 = 100;
/// Priority of INT watch entries.
pub const WATCH_PRIORITY: i32 = 100;
/// Priority of the INT watch of a learned job's host pairs: below a
/// reserved flow's own watch entry, which it may overlap.
pub const JOB_WATCH_PRIORITY: i32 = 50;
/// INT instructions Foresight asks for (`p4src/README.md`): node id, L1
/// ports, hop latency, queue id + occupancy, egress timestamp.
pub const INT_INSTRUCTIONS: u16 = 0xF400;
/// Foresight domain-specific instructions: egress port transmitted bytes.
pub const INT_DS_INSTRUCTIONS: u16 = 0x8000;
/// Remaining hop count a source grants (a 3-tier Clos path has 5 hops).
pub const INT_MAX_HOP: u8 = 8;

/// One reserved flow as the data plane sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedFlow {
    /// Demand id it belongs to.
    pub demand: String,
    /// Index of the flow within its demand.
    pub flow: usize,
    pub ingress_leaf: SwitchIdx,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// RoCE destination QP steered; `None` steers every QP between the hosts.
    pub dst_qp: Option<u32>,
    /// Adjacency labels, top first (1..=4).
    pub labels: Vec<u32>,
    /// The path as (switch, egress port), ingress leaf first.
    pub hops: Vec<(SwitchIdx, u16)>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The rate (bits/s) its entry's meter holds it to; 0: not policed.
    pub grant_bps: u64,
}

fn qp_match(dst_qp: Option<u32>) -> String {
    match dst_qp {
        Some(qp) => format!("{qp}&&&0xffffff"),
        None => "0&&&0".to_string(),
    }
}

fn host_match(ip: Ipv4Addr) -> String {
    format!("{ip}&&&255.255.255.255")
}

impl ReservedFlow {
    /// The ingress leaf's `sr.reservation` entry: push the label stack and
    /// put the flow in the reserved priority queue, up to its grant.
    pub fn entry(&self) -> Object {
        self.entry_in_queue(RESERVED_TC)
    }

    /// The same entry with another traffic class (priority queue) `tc`.
    pub fn entry_in_queue(&self, tc: u8) -> Object {
        let mut params = vec![("tc".to_string(), tc.to_string())];
        for (i, label) in self.labels.iter().enumerate() {
            params.push((format!("label{i}"), label.to_string()));
        }
        Object::Entry(EntrySpec {
            table: names::SR_RESERVATION.into(),
            matches: [
                ("src_addr".to_string(), host_match(self.src_ip)),
                ("dst_addr".to_string(), host_match(self.dst_ip)),
                ("dst_qp".to_string(), qp_match(self.dst_qp)),
            ]
            .into(),
            action: Some(names::SR_PUSH[self.labels.len() - 1].into()),
            params: params.into_iter().collect(),
            priority: Some(RESERVATION_PRIORITY),
            group: None,
            member: None,
            meter: crate::policing::meter_of(self.grant_bps),
        })
    }

    /// The ingress leaf's INT `watchlist` entry: instrument the flow's
    /// RoCEv2 packets so every hop stamps its queue and the sink reports.
    /// A flow that steers every QP of its host pair (a TCP job's, too) is
    /// watched for all its traffic, as it is steered: its UDP packets get
    /// INT, and the entry's counter counts TCP as well (reservations that
    /// follow their traffic read it).
    pub fn watch_entry(&self) -> Object {
        watch(
            self.src_ip,
            self.dst_ip,
            self.dst_qp.map(|_| ROCEV2_UDP_PORT),
            self.dst_qp,
            WATCH_PRIORITY,
        )
    }
}

/// The watch of every UDP and TCP packet from `src` to `dst`, at the
/// source host's leaf: how the controller sees a job it is learning (T+5).
/// UDP packets get INT; TCP packets (a gloo job's) are only counted by the
/// entry's direct counter, which the controller polls.
pub fn host_pair_watch_entry(src: Ipv4Addr, dst: Ipv4Addr) -> Object {
    watch(src, dst, None, None, JOB_WATCH_PRIORITY)
}

fn watch(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    l4_dst_port: Option<u16>,
    dst_qp: Option<u32>,
    priority: i32,
) -> Object {
    let port = match l4_dst_port {
        Some(p) => format!("{p}&&&0xffff"),
        None => "0&&&0".to_string(),
    };
    Object::Entry(EntrySpec {
        table: names::INT_WATCHLIST.into(),
        matches: [
            ("src_addr".to_string(), host_match(src)),
            ("dst_addr".to_string(), host_match(dst)),
            ("l4_dst_port".to_string(), port),
            ("dst_qp".to_string(), qp_match(dst_qp)),
        ]
        .into(),
        action: Some(names::INT_SOURCE.into()),
        params: [
            ("max_hop".to_string(), INT_MAX_HOP.to_string()),
            (
                "instruction_bitmap".to_string(),
                format!("{INT_INSTRUCTIONS:#x}"),
            ),
            (
                "ds_instruction".to_string(),
                format!("{INT_DS_INSTRUCTIONS:#x}"),
            ),
        ]
        .into(),
        priority: Some(priority),
        group: None,
        member: None,
        meter: None,
    })
}

/// The hops of a plan path as (switch, egress port).
pub fn path_hops(topo: &Topology, path: &planner::Path) -> Vec<(SwitchIdx, u16)> {
    path.edges()
        .iter()
        .filter_map(|&e| {
            let link = topo.edge(e);
            match link.from {
                NodeRef::Switch(s) => Some((s, link.from_port)),
                NodeRef::Host(_) => None,
            }
        })
        .collect()
}

/// The reserved flows of a plan: every flow with a reservation and a path
/// whose label stack the data plane can carry.
pub fn reserved_flows(topo: &Topology, demands: &[Demand], plan: &Plan) -> Vec<ReservedFlow> {
    let mut out = Vec::new();
    for dp in &plan.demands {
        let demand = &demands[dp.demand];
        for (i, (flow, fp)) in demand.flows.iter().zip(&dp.flows).enumerate() {
            if fp.reserved_bps == 0 || fp.path.is_empty() {
                continue;
            }
            let Ok(labels) = fp.path.label_stack(topo) else {
                continue;
            };
            if labels.is_empty() || labels.len() > names::SR_PUSH.len() {
                continue;
            }
            let hops = path_hops(topo, &fp.path);
            let Some(&(ingress_leaf, _)) = hops.first() else {
                continue;
            };
            out.push(ReservedFlow {
                demand: demand.id.clone(),
                flow: i,
                ingress_leaf,
                src_ip: flow.src_ip,
                dst_ip: flow.dst_ip,
                dst_qp: Some(flow.dest_qp),
                labels,
                hops,
                start_ns: fp.start_ns,
                end_ns: fp.start_ns + flow.duration_ns,
                grant_bps: fp.reserved_bps,
            });
        }
    }
    out
}
