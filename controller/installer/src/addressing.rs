//! Addresses the controller derives from the topology: switch port MACs
//! (locally administered, `06:00:<switch id, 2 bytes>:<port, 2 bytes>`; hosts use
//! `02:...` in the generated topologies, so the two never collide), the
//! address a switch sends its own packets from, and the subnet each leaf
//! owns.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;

use planner::topology::{NodeRef, SwitchIdx};
use planner::Topology;

/// MAC of `port` on the switch with id `switch_id`.
pub fn switch_port_mac(switch_id: u32, port: u16) -> [u8; 6] {
    let id = (switch_id as u16).to_be_bytes();
    let p = port.to_be_bytes();
    [0x06, 0x00, id[0], id[1], p[0], p[1]]
}

/// The MAC a packet leaving through `edge` must carry as destination: the
/// host NIC's, or the receiving switch port's.
pub fn neighbour_mac(topo: &Topology, edge: u32) -> [u8; 6] {
    let link = topo.edge(edge);
    match link.to {
        NodeRef::Host(h) => topo.hosts()[h as usize].mac,
        NodeRef::Switch(s) => switch_port_mac(topo.switches()[s as usize].id, link.to_port),
    }
}

/// The source address of what a switch itself sends (telemetry reports):
/// `172.31.<id / 256>.<id % 256>`, outside the fabric's host space.
pub fn switch_address(switch_id: u32) -> Ipv4Addr {
    Ipv4Addr::new(172, 31, (switch_id >> 8) as u8, switch_id as u8)
}

/// [`leaf_subnets`] of every leaf at once, by switch: one pass over the
/// hosts, where asking leaf by leaf passes over them once per leaf.
pub fn subnets_by_leaf(topo: &Topology) -> HashMap<SwitchIdx, BTreeSet<(Ipv4Addr, u8)>> {
    let mut out: HashMap<SwitchIdx, BTreeSet<(Ipv4Addr, u8)>> = HashMap::new();
    for h in topo.hosts() {
        out.entry(h.leaf)
            .or_default()
            .insert(subnet(h.ip, h.prefix_len));
    }
    out
}

fn subnet(ip: Ipv4Addr, prefix_len: u8) -> (Ipv4Addr, u8) {
    let mask = if prefix_len == 0 {
        0
    } else {
        u32::MAX << (32 - prefix_len)
    };
    (Ipv4Addr::from(u32::from(ip) & mask), prefix_len)
}

/// The subnets of a leaf's hosts (usually one /24), as (network, length).
pub fn leaf_subnets(topo: &Topology, leaf: SwitchIdx) -> BTreeSet<(Ipv4Addr, u8)> {
    topo.hosts()
        .iter()
        .filter(|h| h.leaf == leaf)
        .map(|h| subnet(h.ip, h.prefix_len))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_macs_are_unique_and_local() {
        assert_eq!(switch_port_mac(0x0102, 3), [0x06, 0, 1, 2, 0, 3]);
        assert_ne!(switch_port_mac(1, 2), switch_port_mac(2, 1));
        assert_eq!(
            switch_port_mac(7, 1)[0] & 0x02,
            0x02,
            "locally administered"
        );
    }
}
