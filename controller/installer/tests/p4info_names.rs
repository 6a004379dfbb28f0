//! Every name the installer writes resolves against the committed P4Info
//! of `p4src/v1model/foresight.p4`: the static state of a fabric with an INT
//! collector, the ECMP hash mode and seed, reservation SR push and INT
//! watch entries, lowered DCQCN profiles and pre-drain entries.

mod common;

use installer::ecn::{dcqcn_entry, predrain_entry, EcnProfile, PREDRAIN_ALWAYS};
use installer::reservations::reserved_flows;
use installer::static_state::{
    collector_config, hash_mode_config, hash_seed_config, static_state, Collector,
};
use installer::{Devices, Object};
use p4rt::P4Info;
use planner::{Planner, PlannerConfig};

fn info() -> P4Info {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../p4src/build/foresight.p4info.binpb"
    );
    P4Info::load(path).expect("committed P4Info (p4src/compile.sh)")
}

#[test]
fn every_kind_of_object_resolves_against_the_committed_p4info() {
    let info = info();
    for (name, intent) in &common::every_object(&common::small_topology()) {
        intent
            .resolve(name, &info, &Devices::bmv2())
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn every_object_resolves_against_the_committed_p4info() {
    let info = info();
    let topo = common::small_topology();
    let mut intents = static_state(&topo, EcnProfile::default());
    let collector = Collector {
        host: topo.host_by_name("h4").unwrap(),
        udp_port: 32766,
        report_every: 4,
    };
    for (switch, intent) in intents.iter_mut() {
        intent.push(hash_mode_config(planner::ecmp::HashMode::FiveTuple));
        intent.push(hash_seed_config(planner::ecmp::switch_seed(switch)));
    }
    for (switch, objects) in collector_config(&topo, collector) {
        for o in objects {
            intents.get_mut(&switch).unwrap().push(o);
        }
    }
    let demands = planner::demand::load_str(
        &topo,
        "demands:\n  - {id: a, src: h1, dst: h3, bytes: 1GB, rate_gbps: 40}\n",
        0.9,
    )
    .unwrap();
    let mut planner = Planner::new(&topo, PlannerConfig::default());
    let plan = planner.plan(&demands);
    let flows = reserved_flows(&topo, &demands, &plan);
    assert_eq!(flows.len(), 1);
    for f in &flows {
        let leaf = &topo.switches()[f.ingress_leaf as usize].name;
        let intent = intents.get_mut(leaf).unwrap();
        intent.push(f.entry());
        intent.push(f.watch_entry());
        // The same flow in another priority queue differs only in `tc`.
        let (Object::Entry(a), Object::Entry(b)) = (f.entry(), f.entry_in_queue(3)) else {
            panic!("reservation entries are table entries");
        };
        assert_eq!(
            a.params["tc"],
            installer::reservations::RESERVED_TC.to_string()
        );
        assert_eq!(b.params["tc"], "3");
        assert_eq!((&a.matches, &a.action), (&b.matches, &b.action));
        intent.push(dcqcn_entry(3, EcnProfile::lowered()));
        intent.push(predrain_entry(
            3,
            f.src_ip,
            f.dst_ip,
            Some(9),
            PREDRAIN_ALWAYS,
        ));
        intent.push(predrain_entry(4, f.src_ip, f.dst_ip, None, 0x8000));
    }
    for (name, intent) in &intents {
        let resolved = intent
            .resolve(name, &info, &Devices::bmv2())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!resolved.entities.is_empty());
    }
    let leaf1 = intents["leaf1"]
        .resolve("leaf1", &info, &Devices::bmv2())
        .unwrap();
    assert_eq!(
        leaf1.defaults.len(),
        5,
        "INT node id, hash mode, hash seed, report config and report sampling"
    );
}
