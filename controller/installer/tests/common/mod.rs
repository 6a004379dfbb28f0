//! Every kind of object the installer writes, for the tests that check
//! them against the committed P4Infos.

use std::collections::BTreeMap;

use installer::ecn::{dcqcn_entry, predrain_entry, EcnProfile, PREDRAIN_ALWAYS};
use installer::reservations::ReservedFlow;
use installer::static_state::{
    collector_config, hash_mode_config, hash_offset_config, hash_seed_config, port_mtu_config,
    static_state, Collector, EcmpMode,
};
use installer::Intent;
use planner::ecmp::HashMode;
use planner::Topology;

/// `bmv2-lab/topologies/leaf-spine-small.yaml`: 2 leaves, 2 spines, 4 hosts.
pub fn small_topology() -> Topology {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
    );
    planner::topology::yaml::load_file(path).unwrap()
}

/// The intent of every switch of `topo` with one of each object the
/// controller ever writes: the static state with an INT collector, every
/// ECMP mode (hashed both ways, flowlets, spraying), the ECMP hash seed and
/// offset, SR push entries for every stack depth (1-4 labels),
/// INT watch entries, INT port MTUs, lowered DCQCN profiles and pre-drain
/// entries with and without a QP.
pub fn every_object(topo: &Topology) -> BTreeMap<String, Intent> {
    let mut intents = static_state(topo, EcnProfile::default());
    let collector = Collector {
        host: topo.host_by_name("h4").unwrap(),
        udp_port: 32766,
        report_every: 4,
    };
    for (switch, objects) in collector_config(topo, collector) {
        for o in objects {
            intents.get_mut(&switch).unwrap().push(o);
        }
    }
    for (switch, objects) in port_mtu_config(topo, 4200) {
        for o in objects {
            intents.get_mut(&switch).unwrap().push(o);
        }
    }
    for (switch, intent) in intents.iter_mut() {
        intent.push(hash_mode_config(HashMode::QpAware));
        intent.push(hash_mode_config(HashMode::FiveTuple));
        intent.push(hash_mode_config(EcmpMode::Flowlet { timeout_us: 40_000 }));
        intent.push(hash_mode_config(EcmpMode::Spray));
        intent.push(hash_seed_config(planner::ecmp::switch_seed(switch)));
        intent.push(hash_offset_config(planner::ecmp::TIER_WINDOW_BITS));
    }
    let leaf1 = topo.switch_by_name("leaf1").unwrap();
    let intent = intents.get_mut("leaf1").unwrap();
    for depth in 1..=installer::names::SR_PUSH.len() as u32 {
        let flow = ReservedFlow {
            demand: "d".into(),
            flow: depth as usize,
            ingress_leaf: leaf1,
            src_ip: "10.0.1.1".parse().unwrap(),
            dst_ip: "10.0.2.1".parse().unwrap(),
            dst_qp: (depth % 2 == 0).then_some(0x100 + depth),
            labels: (0..depth).map(|i| 1001 + i).collect(),
            hops: vec![(leaf1, 3)],
            start_ns: 0,
            end_ns: 1,
            grant_bps: 0,
        };
        intent.push(flow.entry_in_queue(depth as u8));
        intent.push(flow.watch_entry());
        intent.push(predrain_entry(
            3,
            flow.src_ip,
            flow.dst_ip,
            flow.dst_qp,
            PREDRAIN_ALWAYS,
        ));
    }
    intent.push(dcqcn_entry(3, EcnProfile::lowered()));
    intents
}
