//! The lab adapter on real lab inputs: the fixtures are one smoke run of
//! `experiment.py allreduce --seeds 1 --bytes 196608` on leaf-spine-lab
//! (raw/s1-<mode>/spec.json and the Foresight run's reservations.json).

use planner::topology::{yaml, NodeRef, Topology};
use sim::lab::{parse_reservations, Choice, LabMode, Scenario, Settings, Spec};
use sim::reorder::Nic;

fn topo() -> Topology {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bmv2-lab/topologies/leaf-spine-lab.yaml"
    );
    yaml::load_file(path).expect("leaf-spine-lab.yaml")
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/lab/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn spec(mode: &str) -> Spec {
    Spec::parse(&fixture(&format!("{mode}.spec.json")), mode).expect("fixture spec")
}

/// The egress port a path leaves its first leaf by.
fn first_uplink(topo: &Topology, path: &[u32]) -> u16 {
    let e = topo.edge(path[1]);
    assert!(matches!(e.from, NodeRef::Switch(_)));
    e.from_port
}

/// (sender, sender QP, data uplink, ACK uplink) per connection, in spec
/// order, as the PTF suite's Python hash (`ptf-tests/fs_packets.py`
/// crc32_roce / crc32_5tuple with switch_seed, checked against BMv2)
/// predicts for these specs: leaf uplinks are ports 5 (spine1) and 6.
const QP_UPLINKS: [(&str, u32, u16, u16); 18] = [
    ("h1", 1875815, 5, 6),
    ("h5", 6447744, 6, 5),
    ("h2", 3409046, 6, 5),
    ("h6", 6421898, 6, 6),
    ("h3", 12690417, 6, 6),
    ("h7", 4083100, 6, 5),
    ("h4", 3720695, 5, 6),
    ("h8", 6224010, 5, 6),
    ("h1", 9809931, 6, 5),
    ("h5", 2021749, 5, 5),
    ("h2", 1708286, 5, 6),
    ("h6", 5499195, 6, 6),
    ("h3", 9098248, 5, 5),
    ("h7", 14316972, 5, 6),
    ("h4", 14117547, 5, 5),
    ("h8", 10158778, 5, 6),
    ("h4", 7211292, 5, 5),
    ("h3", 12585996, 6, 6),
];

const FIVE_TUPLE_UPLINKS: [(&str, u32, u16, u16); 18] = [
    ("h1", 1875815, 5, 6),
    ("h5", 6447744, 6, 5),
    ("h2", 3409046, 5, 6),
    ("h6", 6421898, 5, 6),
    ("h3", 12690417, 6, 5),
    ("h7", 4083100, 6, 5),
    ("h4", 3720695, 6, 6),
    ("h8", 6224010, 6, 6),
    ("h1", 9809931, 5, 6),
    ("h5", 2021749, 6, 6),
    ("h2", 1708286, 5, 6),
    ("h6", 5499195, 5, 5),
    ("h3", 9098248, 6, 6),
    ("h7", 14316972, 6, 5),
    ("h4", 14117547, 6, 6),
    ("h8", 10158778, 6, 5),
    ("h4", 7211292, 6, 6),
    ("h3", 12585996, 5, 5),
];

fn check_uplinks(mode: LabMode, want: &[(&str, u32, u16, u16)]) {
    let t = topo();
    let sc = Scenario::new(&t, spec(&mode.to_string()), mode, &[], Settings::default())
        .expect("scenario");
    assert_eq!(sc.connections.len(), want.len());
    for (c, &(host, qp, data, ack)) in sc.connections.iter().zip(want) {
        assert_eq!(t.hosts()[c.src as usize].name, host);
        assert_eq!(c.src_qp, qp);
        assert_eq!(c.choice, Choice::Hashed);
        assert_eq!(
            first_uplink(&t, &c.path),
            data,
            "{mode} data {host} QP {qp}"
        );
        assert_eq!(
            first_uplink(&t, &c.ack_path),
            ack,
            "{mode} ACK {host} QP {qp}"
        );
        // Path ends: the sender's NIC link, the receiver's port.
        assert_eq!(c.path[0], t.host_up_edge(c.src));
        assert_eq!(*c.path.last().unwrap(), t.host_down_edge(c.dst));
        assert_eq!(c.ack_path[0], t.host_up_edge(c.dst));
    }
}

#[test]
fn qp_aware_choices_match_the_data_plane_hash() {
    check_uplinks(LabMode::Qp, &QP_UPLINKS);
}

#[test]
fn five_tuple_choices_match_the_data_plane_hash() {
    check_uplinks(LabMode::Ecmp5, &FIVE_TUPLE_UPLINKS);
}

#[test]
fn ecmp5_channels_of_a_pair_share_a_path() {
    let t = topo();
    let sc = Scenario::new(&t, spec("ecmp5"), LabMode::Ecmp5, &[], Settings::default()).unwrap();
    let ring: Vec<_> = sc.connections.iter().filter(|c| c.collective).collect();
    assert_eq!(ring.len(), 16);
    for a in &ring {
        for b in &ring {
            if (a.src, a.dst) == (b.src, b.dst) {
                assert_eq!(a.path, b.path);
            }
        }
    }
}

#[test]
fn foresight_uses_the_reserved_paths() {
    let t = topo();
    let text = fixture("foresight.reservations.json");
    let res = parse_reservations(&text, "fixture").unwrap();
    let sc = Scenario::new(
        &t,
        spec("foresight"),
        LabMode::Foresight,
        &res,
        Settings::default(),
    )
    .unwrap();
    let reserved: Vec<_> = sc
        .connections
        .iter()
        .filter(|c| c.choice == Choice::Reserved)
        .collect();
    // The lab: "reserved 16/18" (the background flows fell back to ECMP).
    assert_eq!(reserved.len(), 16);
    assert!(reserved.iter().all(|c| c.collective));
    // The planner spreads the 8 cross-leaf connections of each leaf 4 / 4.
    for leaf_port in [5, 6] {
        let n = reserved
            .iter()
            .filter(|c| first_uplink(&t, &c.path) == leaf_port)
            .count();
        assert_eq!(n, 8, "uplink port {leaf_port}");
    }
}

#[test]
fn ideal_is_the_labs() {
    // runs.csv of the smoke run: ideal_s 1.4933.
    let t = topo();
    let sc = Scenario::new(&t, spec("qp"), LabMode::Qp, &[], Settings::default()).unwrap();
    assert!((sc.ideal_s() - 1.4933).abs() < 1e-4, "{}", sc.ideal_s());
    let o = sc.simulate().unwrap();
    assert!(o.slowdown >= 1.0, "{o:?}");
}

#[test]
fn ideal_counts_what_a_nic_receives() {
    // Two senders into one receiver (MoE's hot expert): the receiver's NIC,
    // 200 packets at 90 % of 250 pps, bounds the run, not a sender's 100.
    let t = topo();
    let text = format!(
        r#"{{"start_unix_ns": 0, "payload_bytes": 1000,
            "hosts": {{"h1": "10.0.1.1", "h2": "10.0.1.2", "h3": "10.0.1.3"}}, "flows": [{},{}]}}"#,
        flow("a", "h1", "h3", 10, ""),
        flow("b", "h2", "h3", 20, "")
    );
    let s = Spec::parse(&text, "test").unwrap();
    let sc = Scenario::new(&t, s, LabMode::Qp, &[], Settings::default()).unwrap();
    assert!(
        (sc.ideal_s() - 200.0 / 225.0).abs() < 1e-9,
        "{}",
        sc.ideal_s()
    );
}

fn one_leaf_spec(flows: &str) -> Spec {
    let text = format!(
        r#"{{"start_unix_ns": 0, "payload_bytes": 1000,
            "hosts": {{"h1": "10.0.1.1", "h2": "10.0.1.2"}}, "flows": [{flows}]}}"#
    );
    Spec::parse(&text, "test").unwrap()
}

fn flow(id: &str, src: &str, dst: &str, qp: u32, after: &str) -> String {
    format!(
        r#"{{"id": "{id}", "kind": "collective", "src": "{src}", "dst": "{dst}", "src_qp": {qp},
            "dest_qp": {}, "udp_src_port": 50000, "bytes": 100000, "line_rate_pps": 100.0,
            "dscp": 24, "start_offset_ns": 0, "after": [{after}]}}"#,
        qp + 1
    )
}

#[test]
fn a_step_waits_for_the_previous_one_plus_its_last_packet() {
    // 100 packets at 100 pps, then the answer: each one's last packet
    // leaves 0.99 s after its first, then takes one packet time on the
    // 100G leaf port (250 pps: 4 ms).
    let t = topo();
    let s = one_leaf_spec(&format!(
        "{},{}",
        flow("a", "h1", "h2", 10, ""),
        flow("b", "h2", "h1", 20, r#""a""#)
    ));
    let o = Scenario::new(&t, s, LabMode::Qp, &[], Settings::default())
        .unwrap()
        .simulate()
        .unwrap();
    assert!((o.completion_s - 1.988).abs() < 1e-6, "{o:?}");
    assert!((o.step_excess_ms - (4.0 - 10.0)).abs() < 1e-6, "{o:?}");
    let no_latency = Settings {
        hop_latency: false,
        ..Settings::default()
    };
    let s = one_leaf_spec(&format!(
        "{},{}",
        flow("a", "h1", "h2", 10, ""),
        flow("b", "h2", "h1", 20, r#""a""#)
    ));
    let o = Scenario::new(&t, s, LabMode::Qp, &[], no_latency)
        .unwrap()
        .simulate()
        .unwrap();
    assert!((o.completion_s - 2.0).abs() < 1e-6, "{o:?}");
}

#[test]
fn messages_of_one_connection_share_its_rate() {
    // Two 100-packet messages on one QP pair at 100 pps: 2 s, not 1 s.
    let t = topo();
    let s = one_leaf_spec(&format!(
        "{},{}",
        flow("a", "h1", "h2", 10, ""),
        flow("b", "h1", "h2", 10, "")
    ));
    let fluid = Settings {
        hop_latency: false,
        ..Settings::default()
    };
    let o = Scenario::new(&t, s, LabMode::Qp, &[], fluid)
        .unwrap()
        .simulate()
        .unwrap();
    assert!((o.completion_s - 2.0).abs() < 1e-6, "{o:?}");
}

#[test]
fn errors_name_the_bad_input() {
    let t = topo();
    let s = one_leaf_spec(&flow("a", "h1", "h9", 10, ""));
    let e = Scenario::new(&t, s, LabMode::Qp, &[], Settings::default())
        .err()
        .unwrap();
    let msg = format!("{e:#}");
    assert!(msg.contains("flows[0] (a)") && msg.contains("h9"), "{msg}");

    let s = one_leaf_spec(&flow("a", "h1", "h2", 10, r#""nope""#));
    let e = Scenario::new(&t, s, LabMode::Qp, &[], Settings::default())
        .unwrap()
        .simulate()
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("after 'nope'"), "{e:#}");

    let res = parse_reservations(
        r#"[{"flows": [{"src": "10.0.1.1", "dst": "10.0.1.2", "dest_qp": 11,
             "accepted_bps": 1, "path": ["leaf1:9"]}]}]"#,
        "test",
    )
    .unwrap();
    let s = one_leaf_spec(&flow("a", "h1", "h2", 10, ""));
    let e = Scenario::new(&t, s, LabMode::Foresight, &res, Settings::default())
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("leaf1 has no port 9"), "{e:#}");
}

/// Spraying in the lab: every message splits evenly over a leaf's two
/// uplinks, so both carry the same packets; onto out-of-order NICs that is
/// the whole story, onto go-back-N NICs reordering costs rewinds (more
/// with CNPs), and the NIC kind changes nothing for single-path modes.
#[test]
fn spraying_splits_evenly_and_go_back_n_pays() {
    let t = topo();
    let with = |nic, cnp| Settings {
        nic,
        reorder: sim::reorder::ReorderModel {
            cnp_on_ooo: cnp,
            ..Default::default()
        },
        ..Settings::default()
    };
    let run = |mode, settings| {
        Scenario::new(&t, spec("qp"), mode, &[], settings)
            .unwrap()
            .simulate()
            .unwrap()
    };
    let ooo = run(LabMode::Spray, with(Nic::Ooo, false));
    assert_eq!(ooo.mode, "spray-ooo");
    for leaf in ["leaf1", "leaf2"] {
        let (a, b) = (
            ooo.port_packets[&format!("{leaf}:5")],
            ooo.port_packets[&format!("{leaf}:6")],
        );
        assert!(a > 0.0 && (a - b).abs() < 1e-6 * a, "{leaf}: {a} vs {b}");
    }
    assert!(ooo.slowdown >= 1.0, "{ooo:?}");
    let gbn = run(LabMode::Spray, with(Nic::Gbn, false));
    assert_eq!(gbn.mode, "spray-gbn");
    assert!(gbn.completion_s > ooo.completion_s, "{gbn:?} vs {ooo:?}");
    let cnp = run(LabMode::Spray, with(Nic::Gbn, true));
    assert!(cnp.completion_s > gbn.completion_s, "{cnp:?} vs {gbn:?}");
    let qp = run(LabMode::Qp, with(Nic::Gbn, true));
    assert_eq!(qp.mode, "qp");
    assert_eq!(
        qp.completion_s,
        run(LabMode::Qp, with(Nic::Ooo, false)).completion_s
    );
}

/// Flowlets in the lab: every message on one path drawn with the seed
/// (the same seed, the same run), ACKs sprayed; a timeout far beyond the
/// lab's delay spread makes go-back-N NICs cost nothing.
#[test]
fn flowlets_draw_one_path_per_message() {
    let t = topo();
    let settings = |seed, nic, timeout_ms: f64| Settings {
        nic,
        reorder: sim::reorder::ReorderModel {
            seed,
            flowlet_timeout_ns: timeout_ms * 1e6,
            ..Default::default()
        },
        ..Settings::default()
    };
    let sc = |seed, nic, timeout| {
        Scenario::new(
            &t,
            spec("qp"),
            LabMode::Flowlet,
            &[],
            settings(seed, nic, timeout),
        )
        .unwrap()
    };
    let a = sc(1, Nic::Ooo, 1e3);
    assert!(a.data_uses.iter().flatten().all(|u| u.1 == 1.0));
    assert!(a.ack_uses.iter().flatten().any(|u| u.1 < 1.0));
    let b = sc(2, Nic::Ooo, 1e3);
    assert_ne!(a.data_uses, b.data_uses, "another seed, other draws");
    let (oa, oa2) = (
        a.simulate().unwrap(),
        sc(1, Nic::Ooo, 1e3).simulate().unwrap(),
    );
    assert_eq!(oa.completion_s, oa2.completion_s);
    assert_eq!(oa.mode, "flowlet-ooo");
    let long = sc(1, Nic::Gbn, 1e3).simulate().unwrap();
    assert_eq!(long.completion_s, oa.completion_s);
    // A timeout of a microsecond against millisecond packet times.
    let short = sc(1, Nic::Gbn, 1e-3).simulate().unwrap();
    assert!(short.completion_s > oa.completion_s, "{short:?} vs {oa:?}");
}
