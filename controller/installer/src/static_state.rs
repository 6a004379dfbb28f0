//! The state every switch holds independent of reservations, derived from
//! the topology: routes and ECMP groups, SR adjacencies, DSCP priorities,
//! INT node id and sink ports, DCQCN marking thresholds, and (with a
//! collector) where INT sinks send their telemetry reports.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use p4rt::value::Value;
use p4rt::{EntrySpec, P4Info};
use planner::ecmp::{HashMode, SwitchHash};
use planner::topology::{EdgeId, NodeRef, SwitchIdx};
use planner::Topology;

use crate::addressing::{neighbour_mac, subnets_by_leaf, switch_address, switch_port_mac};
use crate::ecn::dcqcn_entry;
use crate::intent::Intent;
use crate::names;
use crate::object::Object;

pub use crate::ecn::EcnProfile;

/// DSCP of RoCEv2 data in the fabric and the BMv2 priority queue it uses.
pub const ROCE_DSCP: u8 = 24;
pub const ROCE_QUEUE: u8 = 3;
const _: () = assert!(ROCE_QUEUE < crate::device::TRAFFIC_CLASSES);

fn mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

fn entry(
    table: &str,
    matches: &[(&str, String)],
    action: &str,
    params: &[(&str, String)],
) -> EntrySpec {
    EntrySpec {
        table: table.into(),
        matches: matches
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        action: Some(action.into()),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        priority: None,
        group: None,
        member: None,
        meter: None,
    }
}

/// Egress edges of a switch to everything it is wired to, by port: other
/// switches and (on a leaf) hosts.
fn ports(topo: &Topology, s: SwitchIdx) -> Vec<u32> {
    let mut edges: Vec<u32> = topo.switch_out_edges(s).to_vec();
    for (h, host) in topo.hosts().iter().enumerate() {
        if host.leaf == s {
            edges.push(topo.host_down_edge(h as u32));
        }
    }
    edges.sort_by_key(|e| topo.edge(*e).from_port);
    edges
}

/// The static intent of every switch, by switch name, every link up.
pub fn static_state(topo: &Topology, ecn: EcnProfile) -> BTreeMap<String, Intent> {
    static_state_with_down(topo, ecn, &BTreeSet::new())
}

/// The static intent of every switch with the directed edges in `down`
/// out of service (see [`switch_state_with_down`]).
pub fn static_state_with_down(
    topo: &Topology,
    ecn: EcnProfile,
    down: &BTreeSet<EdgeId>,
) -> BTreeMap<String, Intent> {
    let subnets = subnets_by_leaf(topo);
    (0..topo.switches().len() as SwitchIdx)
        .map(|s| {
            (
                topo.switches()[s as usize].name.clone(),
                state_of(topo, s, ecn, down, &subnets),
            )
        })
        .collect()
}

/// The static intent of one switch, every link up.
pub fn switch_state(topo: &Topology, s: SwitchIdx, ecn: EcnProfile) -> Intent {
    switch_state_with_down(topo, s, ecn, &BTreeSet::new())
}

/// The next hops of `s` towards `leaf` that are up and still lead there
/// (shared with the planner's ECMP path prediction).
fn viable_next_hops(
    topo: &Topology,
    s: SwitchIdx,
    leaf: SwitchIdx,
    down: &BTreeSet<EdgeId>,
) -> Vec<EdgeId> {
    if down.is_empty() {
        return topo.next_hops(s, leaf).collect();
    }
    planner::ecmp::viable_next_hops(topo, s, leaf, |e| down.contains(&e)).collect()
}

/// The static intent of one switch with the directed edges in `down` out
/// of service: routes and ECMP groups use only next hops that are up and
/// still lead to the destination leaf (a group that keeps one member
/// becomes a plain next hop; a leaf no longer reachable gets no route).
/// Adjacencies, members and port settings stay, so a link that comes back
/// changes only routes and groups.
pub fn switch_state_with_down(
    topo: &Topology,
    s: SwitchIdx,
    ecn: EcnProfile,
    down: &BTreeSet<EdgeId>,
) -> Intent {
    state_of(topo, s, ecn, down, &subnets_by_leaf(topo))
}

/// [`switch_state_with_down`] with every leaf's subnets at hand.
fn state_of(
    topo: &Topology,
    s: SwitchIdx,
    ecn: EcnProfile,
    down: &BTreeSet<EdgeId>,
    subnets: &HashMap<SwitchIdx, BTreeSet<(std::net::Ipv4Addr, u8)>>,
) -> Intent {
    let me = &topo.switches()[s as usize];
    let mut intent = Intent::default();
    intent.push(Object::Default(entry(
        names::INT_NODE_CONFIG,
        &[],
        names::INT_SET_NODE_ID,
        &[("node_id", me.id.to_string())],
    )));
    intent.push(Object::Entry(entry(
        names::DSCP_PRIORITY,
        &[("dscp", ROCE_DSCP.to_string())],
        names::SET_PRIORITY,
        &[("priority", ROCE_QUEUE.to_string())],
    )));

    for edge in ports(topo, s) {
        let link = topo.edge(edge);
        let port = link.from_port;
        let src_mac = switch_port_mac(me.id, port);
        let dst_mac = neighbour_mac(topo, edge);
        intent.push(Object::Entry(entry(
            names::SR_ADJACENCY,
            &[(
                "label",
                (planner::conventions::ADJ_LABEL_BASE + u32::from(port)).to_string(),
            )],
            names::FORWARD_ADJACENCY,
            &[
                ("port", port.to_string()),
                ("src_mac", mac(src_mac)),
                ("dst_mac", mac(dst_mac)),
            ],
        )));
        intent.push(Object::Member {
            profile: names::ECMP_SELECTOR.into(),
            id: u32::from(port),
            action: names::SET_NEXTHOP.into(),
            params: vec![
                ("port".into(), Value::from(port)),
                ("src_mac".into(), Value::from(src_mac)),
                ("dst_mac".into(), Value::from(dst_mac)),
            ],
        });
        intent.push(dcqcn_entry(port, ecn));
        if matches!(link.to, NodeRef::Host(_)) {
            intent.push(Object::Entry(entry(
                names::INT_SINK_PORTS,
                &[("egress_port", port.to_string())],
                names::INT_SET_SINK,
                &[],
            )));
        }
    }

    // Routes: host /32s on the own leaf, leaf subnets elsewhere through one
    // next hop (member) or an ECMP group per distinct set of ports.
    let mut groups: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
    for (h, host) in topo.hosts().iter().enumerate() {
        if host.leaf == s {
            let port = topo.edge(topo.host_down_edge(h as u32)).from_port;
            intent.push(Object::Entry(route(
                &format!("{}/32", host.ip),
                u32::from(port),
                None,
            )));
        }
    }
    for &leaf in topo.leaves() {
        if leaf == s {
            continue;
        }
        let hops: Vec<u32> = viable_next_hops(topo, s, leaf, down)
            .into_iter()
            .map(|e| u32::from(topo.edge(e).from_port))
            .collect();
        if hops.is_empty() {
            continue;
        }
        for (net, len) in subnets.get(&leaf).into_iter().flatten() {
            let prefix = format!("{net}/{len}");
            if hops.len() == 1 {
                intent.push(Object::Entry(route(&prefix, hops[0], None)));
            } else {
                let next_id = groups.len() as u32 + 1;
                let id = *groups.entry(hops.clone()).or_insert(next_id);
                intent.push(Object::Entry(route(&prefix, 0, Some(id))));
            }
        }
    }
    for (members, id) in groups {
        intent.push(Object::Group {
            profile: names::ECMP_SELECTOR.into(),
            id,
            members,
        });
    }
    intent
}

/// How the switches pick an ECMP group's member (`routing.hash_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcmpMode {
    /// ECMP on the flow hash, RoCEv2 keyed as the [`HashMode`] says.
    Hash(HashMode),
    /// Flowlet switching: a flow keeps a random member until its packets
    /// pause longer than `timeout_us` (switch timestamp units, µs on
    /// BMv2), then draws a new one.
    Flowlet { timeout_us: u32 },
    /// Per-packet spraying: a random member for every packet.
    Spray,
}

impl EcmpMode {
    /// The key the planner predicts fallback paths with: the hashed modes'
    /// own; QP-aware for flowlets and spraying, whose members are random
    /// (flowlet slots are indexed by the QP-aware key), so the prediction
    /// names a path where the fabric uses several.
    pub fn hash_key(self) -> HashMode {
        match self {
            EcmpMode::Hash(mode) => mode,
            EcmpMode::Flowlet { .. } | EcmpMode::Spray => HashMode::QpAware,
        }
    }
}

impl From<HashMode> for EcmpMode {
    fn from(mode: HashMode) -> EcmpMode {
        EcmpMode::Hash(mode)
    }
}

/// The switch-wide ECMP mode (`routing.hash_mode` default action).
/// Always written, so a switch left in another mode is put back.
pub fn hash_mode_config(mode: impl Into<EcmpMode>) -> Object {
    let (action, params) = match mode.into() {
        EcmpMode::Hash(HashMode::QpAware) => (names::HASH_QP_AWARE, vec![]),
        EcmpMode::Hash(HashMode::FiveTuple) => (names::HASH_FIVE_TUPLE, vec![]),
        EcmpMode::Flowlet { timeout_us } => (
            names::HASH_FLOWLET,
            vec![("timeout_us", timeout_us.to_string())],
        ),
        EcmpMode::Spray => (names::HASH_SPRAY, vec![]),
    };
    Object::Default(entry(names::HASH_MODE, &[], action, &params))
}

/// The switch's ECMP hash offset (`routing.hash_offset` default action):
/// its selector reads the flow hash rotated right by `offset` bits.
/// Always written, so a switch left with another offset is put back.
pub fn hash_offset_config(offset: u32) -> Object {
    Object::Default(entry(
        names::HASH_OFFSET,
        &[],
        names::SET_HASH_OFFSET,
        &[("offset", offset.to_string())],
    ))
}

/// The switch's seed and hash offset. A pipeline without
/// `routing.hash_offset` (the TNA program: `p4src/README.md`) rotates by
/// nothing, so it gets the seed alone when the offset is 0, and an error
/// naming the missing table otherwise.
pub fn switch_hash_config(info: &P4Info, hash: SwitchHash) -> Result<Vec<Object>, String> {
    let seed = hash_seed_config(hash.seed);
    if info.table(names::HASH_OFFSET).is_ok() {
        return Ok(vec![seed, hash_offset_config(hash.offset)]);
    }
    if hash.offset == 0 {
        return Ok(vec![seed]);
    }
    Err(format!(
        "hash offset {} asked for, but the pipeline has no {} (the TNA program has no hash \
         offset yet, p4src/README.md): give every switch offset 0 (--hash-seed seeds-only or same:N)",
        hash.offset,
        names::HASH_OFFSET
    ))
}

/// The switch's ECMP hash seed (`routing.hash_seed` default action),
/// which the data plane prepends to every hash input. Always written, so
/// a switch left with another seed is put back.
pub fn hash_seed_config(seed: u32) -> Object {
    Object::Default(entry(
        names::HASH_SEED,
        &[],
        names::SET_HASH_SEED,
        &[("seed", seed.to_string())],
    ))
}

/// Where INT sinks send telemetry reports: a host of the fabric (the
/// collector) and its UDP port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collector {
    pub host: planner::topology::HostIdx,
    pub udp_port: u16,
    /// Sinks report 1 in this many packets of each watched flow (1: all);
    /// whoever reads the reports scales counts by it.
    pub report_every: u16,
}

/// The report configuration of every INT sink (every leaf with host ports):
/// the outer headers of its reports (`report_config` default action) and
/// the clone session that sends report copies toward the collector — its
/// host port on the collector's leaf, the first uplink towards that leaf
/// elsewhere (the fabric routes the report by its IPv4 destination).
pub fn collector_config(topo: &Topology, collector: Collector) -> BTreeMap<String, Vec<Object>> {
    collector_config_with_down(topo, collector, &BTreeSet::new())
}

/// [`collector_config`] with the edges in `down` out of service: a sink
/// sends its reports through the first viable uplink.
pub fn collector_config_with_down(
    topo: &Topology,
    collector: Collector,
    down: &BTreeSet<EdgeId>,
) -> BTreeMap<String, Vec<Object>> {
    let c = &topo.hosts()[collector.host as usize];
    let mut out = BTreeMap::new();
    for &leaf in topo.leaves() {
        let has_hosts = topo.hosts().iter().any(|h| h.leaf == leaf);
        if !has_hosts {
            continue;
        }
        let edge = if leaf == c.leaf {
            Some(topo.host_down_edge(collector.host))
        } else {
            viable_next_hops(topo, leaf, c.leaf, down).first().copied()
        };
        let Some(edge) = edge else { continue };
        let me = &topo.switches()[leaf as usize];
        let port = topo.edge(edge).from_port;
        let objects = vec![
            Object::Default(entry(
                names::INT_REPORT_CONFIG,
                &[],
                names::INT_SET_COLLECTOR,
                &[
                    ("src_mac", mac(switch_port_mac(me.id, port))),
                    ("dst_mac", mac(neighbour_mac(topo, edge))),
                    ("src_addr", switch_address(me.id).to_string()),
                    ("collector_addr", c.ip.to_string()),
                    ("src_port", collector.udp_port.to_string()),
                    ("collector_port", collector.udp_port.to_string()),
                ],
            )),
            Object::CloneSession {
                id: names::INT_REPORT_CLONE_SESSION,
                ports: vec![u32::from(port)],
            },
            Object::Default(entry(
                names::INT_REPORT_SAMPLING,
                &[],
                names::INT_SET_REPORT_EVERY,
                &[("every", collector.report_every.to_string())],
            )),
        ];
        out.insert(me.name.clone(), objects);
    }
    out
}

/// The smallest MTU an IPv4 link may have (RFC 791).
pub const MIN_MTU: u16 = 68;

/// INT's MTU check on every port of every switch (`port_mtu`): a hop
/// whose metadata would take a packet (IPv4 plus MPLS labels) past `mtu`
/// bytes sets the INT M bit instead. Ports without an entry are unchecked.
pub fn port_mtu_config(topo: &Topology, mtu: u16) -> BTreeMap<String, Vec<Object>> {
    assert!(mtu >= MIN_MTU, "an MTU below {MIN_MTU} bytes");
    (0..topo.switches().len() as SwitchIdx)
        .map(|s| {
            let objects = ports(topo, s)
                .into_iter()
                .map(|edge| {
                    Object::Entry(entry(
                        names::INT_PORT_MTU,
                        &[("egress_port", topo.edge(edge).from_port.to_string())],
                        names::INT_SET_PORT_MTU,
                        &[("mtu", mtu.to_string())],
                    ))
                })
                .collect();
            (topo.switches()[s as usize].name.clone(), objects)
        })
        .collect()
}

/// An LPM route to a member (one next hop, member id = port) or a group.
fn route(prefix: &str, member_port: u32, group: Option<u32>) -> EntrySpec {
    EntrySpec {
        table: names::IPV4_LPM.into(),
        matches: [("dst_addr".to_string(), prefix.to_string())].into(),
        action: None,
        params: Default::default(),
        priority: None,
        group,
        member: group.is_none().then_some(member_port),
        meter: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Topology {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
        );
        planner::topology::yaml::load_file(path).unwrap()
    }

    fn count(intent: &Intent, table: &str) -> usize {
        intent
            .objects
            .iter()
            .filter(|o| matches!(o, Object::Entry(e) if e.table == table))
            .count()
    }

    /// (prefix, member, group) of every route of an intent.
    fn routes(intent: &Intent) -> Vec<(String, Option<u32>, Option<u32>)> {
        intent
            .objects
            .iter()
            .filter_map(|o| match o {
                Object::Entry(e) if e.table == names::IPV4_LPM => {
                    Some((e.matches["dst_addr"].clone(), e.member, e.group))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_down_link_leaves_routes_and_groups_of_every_switch_that_used_it() {
        let topo = small();
        let leaf1 = topo.switch_by_name("leaf1").unwrap();
        let spine1 = topo.switch_by_name("spine1").unwrap();
        // leaf1:3 <-> spine1:1, both directions.
        let down: BTreeSet<EdgeId> = (0..topo.edge_count() as EdgeId)
            .filter(|&e| {
                let l = topo.edge(e);
                matches!((l.from, l.to), (NodeRef::Switch(a), NodeRef::Switch(b))
                    if (a == leaf1 && b == spine1) || (a == spine1 && b == leaf1))
            })
            .collect();
        assert_eq!(down.len(), 2);
        let state = static_state_with_down(&topo, EcnProfile::default(), &down);
        let has_group = |i: &Intent| i.objects.iter().any(|o| matches!(o, Object::Group { .. }));
        // leaf1 reaches leaf2 through spine2 (port 4) only: no group left.
        assert!(routes(&state["leaf1"]).contains(&("10.0.2.0/24".into(), Some(4), None)));
        assert!(!has_group(&state["leaf1"]));
        // From leaf2, spine1 no longer leads to leaf1: spine2 (port 4) only.
        assert!(routes(&state["leaf2"]).contains(&("10.0.1.0/24".into(), Some(4), None)));
        // spine1 has no route to leaf1's subnet; spine2 keeps its own.
        assert!(!routes(&state["spine1"])
            .iter()
            .any(|r| r.0 == "10.0.1.0/24"));
        assert!(routes(&state["spine2"])
            .iter()
            .any(|r| r.0 == "10.0.1.0/24"));
        // Ports, adjacencies and members stay: only routes and groups move.
        let all_up = static_state(&topo, EcnProfile::default());
        for (sw, intent) in &state {
            let keep = |i: &Intent| {
                i.objects
                    .iter()
                    .filter(|o| {
                        !matches!(o, Object::Group { .. })
                            && !matches!(o, Object::Entry(e) if e.table == names::IPV4_LPM)
                    })
                    .count()
            };
            assert_eq!(keep(intent), keep(&all_up[sw]), "{sw}");
        }
        // Nothing down: exactly the all-up state.
        let same = static_state_with_down(&topo, EcnProfile::default(), &BTreeSet::new());
        assert_eq!(same, all_up);
    }

    #[test]
    fn leaf_routes_hosts_locally_and_remote_subnets_over_ecmp() {
        let topo = small();
        let state = static_state(&topo, EcnProfile::default());
        let leaf1 = &state["leaf1"];
        // 2 local hosts as /32, leaf2's /24 through a group of both spines.
        assert_eq!(count(leaf1, names::IPV4_LPM), 3);
        let groups: Vec<_> = leaf1
            .objects
            .iter()
            .filter_map(|o| match o {
                Object::Group { members, .. } => Some(members.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].len(), 2, "both spines");
        // One adjacency, member and DCQCN entry per wired port (2 hosts + 2 spines).
        assert_eq!(count(leaf1, names::SR_ADJACENCY), 4);
        assert_eq!(count(leaf1, names::DCQCN_PORT), 4);
        assert_eq!(count(leaf1, names::INT_SINK_PORTS), 2);
        let remote = leaf1.objects.iter().find_map(|o| match o {
            Object::Entry(e)
                if e.table == names::IPV4_LPM && e.matches["dst_addr"] == "10.0.2.0/24" =>
            {
                Some(e.clone())
            }
            _ => None,
        });
        assert_eq!(remote.unwrap().group, Some(1));
    }

    #[test]
    fn spines_have_one_next_hop_per_leaf_and_no_sinks() {
        let topo = small();
        let spine = &static_state(&topo, EcnProfile::default())["spine1"];
        assert_eq!(
            count(spine, names::IPV4_LPM),
            2,
            "one route per leaf subnet"
        );
        assert_eq!(count(spine, names::INT_SINK_PORTS), 0);
        assert!(!spine
            .objects
            .iter()
            .any(|o| matches!(o, Object::Group { .. })));
    }

    #[test]
    fn port_mtu_covers_every_port_of_every_switch() {
        let topo = small();
        let config = port_mtu_config(&topo, 4200);
        assert_eq!(config.len(), topo.switches().len());
        for (s, sw) in topo.switches().iter().enumerate() {
            let ports: BTreeSet<String> = config[&sw.name]
                .iter()
                .map(|o| match o {
                    Object::Entry(e) => {
                        assert_eq!(e.params["mtu"], "4200");
                        e.matches["egress_port"].clone()
                    }
                    other => panic!("{other:?}"),
                })
                .collect();
            let want: BTreeSet<String> = ports_of(&topo, s as SwitchIdx);
            assert_eq!(ports, want, "{}", sw.name);
        }
    }

    fn ports_of(topo: &Topology, s: SwitchIdx) -> BTreeSet<String> {
        ports(topo, s)
            .into_iter()
            .map(|e| topo.edge(e).from_port.to_string())
            .collect()
    }

    #[test]
    fn collector_config_points_every_sink_at_the_collector() {
        let topo = small();
        let h3 = topo.host_by_name("h3").unwrap();
        let config = collector_config(
            &topo,
            Collector {
                host: h3,
                udp_port: 32766,
                report_every: 8,
            },
        );
        assert_eq!(config.len(), 2, "both leaves are sinks, spines are not");
        let clone_port = |leaf: &str| {
            config[leaf].iter().find_map(|o| match o {
                Object::CloneSession { ports, .. } => Some(ports[0]),
                _ => None,
            })
        };
        assert_eq!(clone_port("leaf2"), Some(1), "h3's host port");
        assert!(matches!(clone_port("leaf1"), Some(3 | 4)), "an uplink");
        let Object::Default(report) = &config["leaf1"][0] else {
            panic!("report_config first")
        };
        assert_eq!(report.params["collector_addr"], "10.0.2.1");
        let every = config["leaf2"].iter().find_map(|o| match o {
            Object::Default(e) if e.table == names::INT_REPORT_SAMPLING => {
                Some(e.params["every"].clone())
            }
            _ => None,
        });
        assert_eq!(
            every.as_deref(),
            Some("8"),
            "every sink samples as configured"
        );
    }

    #[test]
    fn hash_mode_is_the_default_action_of_routing_hash_mode() {
        for (mode, action, params) in [
            (HashMode::QpAware.into(), names::HASH_QP_AWARE, vec![]),
            (HashMode::FiveTuple.into(), names::HASH_FIVE_TUPLE, vec![]),
            (
                EcmpMode::Flowlet { timeout_us: 40_000 },
                names::HASH_FLOWLET,
                vec![("timeout_us", "40000")],
            ),
            (EcmpMode::Spray, names::HASH_SPRAY, vec![]),
        ] {
            match hash_mode_config(mode) {
                Object::Default(e) => {
                    assert_eq!(e.table, names::HASH_MODE);
                    assert_eq!(e.action.as_deref(), Some(action));
                    assert!(e.matches.is_empty());
                    let have: Vec<(&str, &str)> = e
                        .params
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    assert_eq!(have, params, "{mode:?}");
                }
                other => panic!("not a default action: {other:?}"),
            }
        }
        assert_eq!(EcmpMode::Spray.hash_key(), HashMode::QpAware);
        assert_eq!(
            EcmpMode::Hash(HashMode::FiveTuple).hash_key(),
            HashMode::FiveTuple
        );
    }

    /// The committed v1model pipeline takes the offset; a P4Info without
    /// `hash_offset` (as the TNA program's) takes the seed alone at offset
    /// 0 and refuses any other offset, naming the table.
    #[test]
    fn the_offset_is_written_where_the_pipeline_has_it() {
        let v1 = P4Info::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../p4src/build/foresight.p4info.binpb"
        ))
        .unwrap();
        let spine = SwitchHash {
            seed: 7,
            offset: 10,
        };
        let objects = switch_hash_config(&v1, spine).unwrap();
        assert_eq!(objects, vec![hash_seed_config(7), hash_offset_config(10)]);
        let mut raw = v1.raw().clone();
        raw.tables.retain(|t| {
            t.preamble
                .as_ref()
                .is_some_and(|p| p.name != names::HASH_OFFSET)
        });
        let without = P4Info::new(raw);
        assert_eq!(
            switch_hash_config(&without, SwitchHash { offset: 0, ..spine }).unwrap(),
            vec![hash_seed_config(7)]
        );
        let e = switch_hash_config(&without, spine).unwrap_err();
        assert!(
            e.contains(names::HASH_OFFSET) && e.contains("offset 10"),
            "{e}"
        );
    }

    #[test]
    fn hash_seed_is_the_default_action_of_routing_hash_seed() {
        for seed in [0, 1, u32::MAX] {
            match hash_seed_config(seed) {
                Object::Default(e) => {
                    assert_eq!(e.table, names::HASH_SEED);
                    assert_eq!(e.action.as_deref(), Some(names::SET_HASH_SEED));
                    assert!(e.matches.is_empty());
                    assert_eq!(e.params["seed"], seed.to_string());
                }
                other => panic!("not a default action: {other:?}"),
            }
        }
    }

    #[test]
    fn adjacency_macs_point_at_the_neighbour() {
        let topo = small();
        let leaf1 = &static_state(&topo, EcnProfile::default())["leaf1"];
        let h1 = leaf1.objects.iter().find_map(|o| match o {
            Object::Entry(e) if e.table == names::SR_ADJACENCY && e.matches["label"] == "1001" => {
                Some(e.clone())
            }
            _ => None,
        });
        let h1 = h1.expect("label 1001 = port 1 = h1");
        assert_eq!(h1.params["dst_mac"], "02:00:0a:00:01:01");
        assert_eq!(h1.params["src_mac"], "06:00:00:01:00:01");
    }
}
