//! YAML round trips and validation errors that name the bad element.

use planner::topology::generate::{self, LeafSpine, MultiPod, Preset, RailOptimized};
use planner::topology::{yaml, Topology, TopologyError};

fn issues(text: &str) -> Vec<String> {
    match yaml::load_str(text) {
        Err(TopologyError::Invalid { issues, .. }) => {
            issues.iter().map(|i| i.to_string()).collect()
        }
        Err(e) => panic!("expected validation issues, got {e}"),
        Ok(_) => panic!("expected validation issues, topology was accepted"),
    }
}

#[test]
fn generated_fabrics_round_trip_through_yaml() {
    let specs = [
        generate::leaf_spine(&LeafSpine {
            leaves: 3,
            spines: 2,
            hosts_per_leaf: 4,
            nics_per_server: 2,
            ..Default::default()
        })
        .unwrap(),
        generate::multi_pod(&MultiPod {
            pods: 3,
            ..Default::default()
        })
        .unwrap(),
        generate::rail_optimized(&RailOptimized {
            servers: 12,
            ..Default::default()
        })
        .unwrap(),
        generate::preset(Preset::Clos3, 256).unwrap(),
    ];
    for spec in specs {
        let text = yaml::to_string(&spec);
        let back = yaml::parse(&text).unwrap();
        assert_eq!(back, spec, "{}", spec.name);
        let t = Topology::from_spec(back).unwrap();
        assert_eq!(t.hosts().len(), spec.hosts.len());
        // Saving the loaded topology gives the same text.
        assert_eq!(yaml::to_string(t.spec()), text);
    }
}

#[test]
fn shipped_example_topology_is_valid() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
    );
    let t = yaml::load_file(path).unwrap();
    assert_eq!((t.switches().len(), t.hosts().len()), (4, 4));
    let generated = generate::leaf_spine(&LeafSpine {
        name: "leaf-spine-small".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        t.spec(),
        &generated,
        "the shipped file is what `foresight topo generate leaf-spine` writes"
    );
}

const GOOD: &str = "
name: t
switches:
  - {name: leaf1, role: leaf, id: 1}
  - {name: leaf2, role: leaf, id: 2}
  - {name: spine1, role: spine, id: 3}
hosts:
  - {name: h1, ip: 10.0.1.1/24, mac: '02:00:00:00:01:01', leaf: leaf1, port: 1, gbps: 100}
  - {name: h2, ip: 10.0.2.1/24, mac: '02:00:00:00:02:01', leaf: leaf2, port: 1, gbps: 100}
links:
  - {node1: leaf1, port1: 2, node2: spine1, port2: 1, gbps: 100}
  - {node1: leaf2, port1: 2, node2: spine1, port2: 2, gbps: 100}
";

#[test]
fn minimal_hand_written_file_is_valid() {
    let t = yaml::load_str(GOOD).unwrap();
    assert_eq!(t.hosts()[0].gpus, 8, "gpus defaults to 8");
}

#[test]
fn port_reuse_names_both_users() {
    let bad = GOOD.replace("node1: leaf2, port1: 2", "node1: leaf2, port1: 1");
    let i = issues(&bad);
    assert!(
        i.iter().any(|m| m.contains(
            "links[1] leaf2:1 <-> spine1:2: port 1 on 'leaf2' is already used by hosts[1] 'h2'"
        )),
        "{i:?}"
    );
}

#[test]
fn bad_host_fields_are_named() {
    let bad = GOOD
        .replace("ip: 10.0.2.1/24", "ip: 10.0.1.7/24")
        .replace("mac: '02:00:00:00:01:01'", "mac: '02:00:00:00:01'")
        .replace("leaf: leaf2, port: 1", "leaf: spine1, port: 9");
    let i = issues(&bad);
    let want = [
        "hosts[0] 'h1': mac '02:00:00:00:01' is not of the form aa:bb:cc:dd:ee:ff",
        "hosts[1] 'h2': attaches to 'spine1', which is a spine; hosts attach to leaves",
    ];
    for w in want {
        assert!(i.iter().any(|m| m == w), "missing {w:?} in {i:?}");
    }
    let bad = GOOD.replace("ip: 10.0.2.1/24", "ip: 10.0.1.1/24");
    let i = issues(&bad);
    assert!(
        i.iter()
            .any(|m| m.contains("hosts[1] 'h2': ip 10.0.1.1 is already used by host 'h1'")),
        "{i:?}"
    );
    let bad = GOOD.replace("leaf: leaf2, port: 1", "leaf: leaf1, port: 3");
    let i = issues(&bad);
    assert!(
        i.iter().any(|m| m.contains(
            "hosts[1] 'h2': ip '10.0.2.1/24' is outside leaf 'leaf1''s subnet 10.0.1.0/24"
        )),
        "{i:?}"
    );
    let bad = GOOD.replace("ip: 10.0.2.1/24", "ip: 10.0.2.1");
    let i = issues(&bad);
    assert!(
        i.iter()
            .any(|m| m.contains("hosts[1] 'h2': ip '10.0.2.1' has no prefix length")),
        "{i:?}"
    );
}

#[test]
fn bad_links_are_named() {
    let bad = GOOD.replace(
        "node1: leaf1, port1: 2, node2: spine1",
        "node1: leaf1, port1: 2, node2: leaf2",
    );
    let i = issues(&bad);
    assert!(
        i.iter().any(|m| m.contains(
            "links[0] leaf1:2 <-> leaf2:1: joins a leaf to a leaf; links must join adjacent tiers"
        )),
        "{i:?}"
    );
    let bad = GOOD.replace("node2: spine1, port2: 2", "node2: h1, port2: 2");
    let i = issues(&bad);
    assert!(
        i.iter()
            .any(|m| m.contains("links[1] leaf2:2 <-> h1:2: 'h1' is a host")),
        "{i:?}"
    );
    let bad = GOOD.replace("port2: 2, gbps: 100", "port2: 2, gbps: -5");
    let i = issues(&bad);
    assert!(
        i.iter().any(|m| m.contains(
            "links[1] leaf2:2 <-> spine1:2: capacity -5 Gbit/s must be a positive number"
        )),
        "{i:?}"
    );
    // Removing leaf2's uplink disconnects it.
    let bad = GOOD.replace(
        "  - {node1: leaf2, port1: 2, node2: spine1, port2: 2, gbps: 100}\n",
        "",
    );
    let i = issues(&bad);
    assert!(
        i.iter()
            .any(|m| m.contains("switches[1] 'leaf2': leaf cannot reach leaf 'leaf1'")),
        "{i:?}"
    );
}

#[test]
fn duplicate_names_and_ids() {
    let bad = GOOD.replace(
        "{name: spine1, role: spine, id: 3}",
        "{name: leaf1, role: spine, id: 2}",
    );
    let i = issues(&bad);
    assert!(
        i.iter().any(|m| m
            .contains("switches[2] 'leaf1': name 'leaf1' is already used by switches[0] 'leaf1'")),
        "{i:?}"
    );
    assert!(
        i.iter()
            .any(|m| m.contains("id 2 is already used by switch 'leaf2'")),
        "{i:?}"
    );
}

#[test]
fn shape_errors_carry_line_numbers() {
    let bad = GOOD.replace("role: spine", "role: spline");
    match yaml::load_str(&bad) {
        Err(TopologyError::Parse(m)) => assert!(
            m.contains("unknown variant `spline`") && m.contains("line"),
            "{m}"
        ),
        other => panic!("expected a parse error, got {other:?}"),
    }
}
