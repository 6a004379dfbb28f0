//! Everything that differs between the switch targets Foresight drives:
//! BMv2 running the v1model program and Tofino running the TNA program.
//!
//! Both programs carry the same P4Runtime names (`tests/tna_names.rs`
//! checks it), so the installer builds one intent for either; this module
//! is where the targets part ways:
//!
//! * [`device_config`] — the `p4_device_config` each target's P4Runtime
//!   server wants, and where the compiled artifacts are;
//! * [`ports`] — topology ports as the device numbers them (Tofino device
//!   ports are not front-panel numbers), one [`PortMap`] per switch;
//! * queues — a traffic class is a BMv2 priority queue or a TNA `qid`
//!   ([`Target::queue_id_bits`], [`CNP_CLASS`]);
//! * report sessions — a BMv2 clone session copies whole packets (the
//!   program truncates its reports), a Tofino mirror session truncates
//!   them itself ([`Target::clone_packet_length`]).
//!
//! [`Devices`] applies all of it to intended objects when they are
//! resolved ([`crate::Intent::resolve`]), so nothing else in the
//! controller asks which target it drives.

pub mod device_config;
pub mod ports;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use p4rt::value::parse_value;
use p4rt::{EntrySpec, Value};

use crate::names;
use crate::object::Object;

pub use device_config::{Artifacts, DeviceConfigError, TofinoFormat, TofinoOutput};
pub use ports::{PortMap, PortMapError};

/// The switch target: which program the switches run and how they take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// BMv2 `simple_switch_grpc`, `p4src/v1model/foresight.p4` (v1model).
    #[default]
    Bmv2,
    /// Tofino (bf_switchd's P4Runtime server or Stratum), the TNA program.
    Tofino,
}

impl Target {
    pub const ALL: [Target; 2] = [Target::Bmv2, Target::Tofino];

    pub fn name(self) -> &'static str {
        match self {
            Target::Bmv2 => "bmv2",
            Target::Tofino => "tofino",
        }
    }

    /// The committed P4Info of this target's program, relative to the
    /// repository root (`p4src/compile.sh` and the TNA build write them).
    pub fn p4info_file(self) -> &'static str {
        match self {
            Target::Bmv2 => "p4src/build/foresight.p4info.binpb",
            Target::Tofino => "p4src/build/tna/foresight.p4info.binpb",
        }
    }

    /// [`Target::p4info_file`] in the checkout this controller was built from.
    pub fn committed_p4info(self) -> PathBuf {
        repository_root().join(self.p4info_file())
    }

    /// `packet_length_bytes` of clone session `session`: 0 copies whole
    /// packets. The v1model program truncates INT reports itself
    /// (`truncate()`); TNA has no such extern, so the Tofino mirror session
    /// that carries them truncates instead.
    pub fn clone_packet_length(self, session: u32) -> i32 {
        match self {
            Target::Tofino if session == names::INT_REPORT_CLONE_SESSION => {
                INT_REPORT_MIRROR_BYTES as i32
            }
            _ => 0,
        }
    }

    /// Width of the queue id a traffic class selects: BMv2's
    /// `standard_metadata.priority` (3 bits, 8 queues with
    /// `--priority-queues 8`) or TNA's `qid` (`QueueId_t`, 5 bits).
    /// A DCQCN threshold of `packets` in the unit the target's queue depth
    /// (`enq_qdepth`) counts: packets on BMv2, 80-byte cells on Tofino,
    /// where a full RoCE frame ([`ROCE_FRAME_BYTES`]) takes
    /// [`TOFINO_CELLS_PER_FRAME`] cells. Saturates at the 19-bit field.
    pub fn queue_depth(self, packets: u128) -> u128 {
        let depth = match self {
            Target::Bmv2 => packets,
            Target::Tofino => packets.saturating_mul(TOFINO_CELLS_PER_FRAME as u128),
        };
        depth.min((1 << QUEUE_DEPTH_BITS) - 1)
    }

    pub const fn queue_id_bits(self) -> u32 {
        match self {
            Target::Bmv2 => 3,
            Target::Tofino => 5,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown target `{s}` (want bmv2 or tofino)"))
    }
}

/// The repository checkout the controller was built from.
fn repository_root() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    root.canonicalize().unwrap_or(root)
}

/// Width of `kmin`/`kmax` (and of `enq_qdepth`) in both programs.
pub const QUEUE_DEPTH_BITS: u32 = 19;
/// Tofino's traffic manager counts queue depth in cells of this many bytes.
pub const TOFINO_CELL_BYTES: u32 = 80;
/// A RoCEv2 frame at the 4,096-byte RoCE MTU: Ethernet 14 + IPv4 20 + UDP 8
/// + BTH 12 + payload 4,096 + ICRC 4 + FCS 4.
pub const ROCE_FRAME_BYTES: u32 = 4158;
/// Cells one such frame takes.
pub const TOFINO_CELLS_PER_FRAME: u32 = ROCE_FRAME_BYTES.div_ceil(TOFINO_CELL_BYTES);

/// Width of a port in both programs (`port_id_t` in `formats.p4`, TNA's
/// `PortId_t` on Tofino 1).
pub const PORT_BITS: u32 = 9;

/// Foresight's traffic classes: the MPLS TC of reserved traffic and the
/// `qos.set_priority` value. On both targets class `c` is queue `c` of the
/// egress port: BMv2 priority queue `c` (higher served first), Tofino
/// `qid` `c` (the TNA program widens the class to `QueueId_t`; how the
/// traffic manager schedules qids 0-7 is port configuration, outside
/// P4Runtime).
pub const TRAFFIC_CLASSES: u8 = 8;
/// The class the data plane gives CNPs (`PRIORITY_CNP` in `formats.p4`).
pub const CNP_CLASS: u8 = 7;

// Every class the controller uses is a queue on both targets.
const _: () = {
    let classes = TRAFFIC_CLASSES as u32;
    assert!(classes <= 1 << Target::Bmv2.queue_id_bits());
    assert!(classes <= 1 << Target::Tofino.queue_id_bits());
    assert!(CNP_CLASS < TRAFFIC_CLASSES);
    assert!(crate::reservations::RESERVED_TC < TRAFFIC_CLASSES);
};

/// Size of a Tofino INT report mirror copy (the mirror session's maximum
/// packet length): the sink's copy up to the end of the BTH with a full
/// stack of [`crate::reservations::INT_MAX_HOP`] hops, and room for the
/// TNA program's mirror header. The TNA program's report builder relies
/// on exactly this much of the packet.
pub const INT_REPORT_MIRROR_BYTES: u32 = REPORTED_HEADERS_BYTES
    + crate::reservations::INT_MAX_HOP as u32 * INT_HOP_BYTES
    + MIRROR_HEADER_BYTES;
/// Ethernet 14, IPv4 20, UDP 8, INT shim 4, INT-MD header 12, BTH 12.
const REPORTED_HEADERS_BYTES: u32 = 14 + 20 + 8 + 4 + 12 + 12;
/// One hop of Foresight's instructions (0xF400 + DS 0x8000): 7 words.
const INT_HOP_BYTES: u32 = 28;
/// Room for the TNA program's mirror header (bridged report metadata).
const MIRROR_HEADER_BYTES: u32 = 32;

/// Fields of the Foresight program whose values are ports: translated from
/// topology to device numbering. `tests/tna_names.rs` checks that every
/// [`PORT_BITS`]-wide field the installer writes is one of these.
pub const PORT_PARAMS: [(&str, &str); 2] = [
    (names::SET_NEXTHOP, "port"),
    (names::FORWARD_ADJACENCY, "port"),
];
/// Match fields whose values are ports, by table.
pub const PORT_MATCHES: [(&str, &str); 4] = [
    (names::INT_SINK_PORTS, "egress_port"),
    (names::INT_PORT_MTU, "egress_port"),
    (names::DCQCN_PORT, "egress_port"),
    (names::PREDRAIN, "egress_port"),
];

/// The fabric's switches as devices: their target and how each numbers
/// its ports. Switches without a port map use topology numbering.
#[derive(Debug, Clone, Default)]
pub struct Devices {
    target: Target,
    ports: BTreeMap<String, PortMap>,
}

/// A port field whose value is not a port number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object} `{field}`: `{value}` is not a port number")]
pub struct NotAPort {
    pub object: String,
    pub field: String,
    pub value: String,
}

impl Devices {
    /// `ports` by switch name; switches not in it keep topology numbering.
    pub fn new(target: Target, ports: BTreeMap<String, PortMap>) -> Devices {
        Devices { target, ports }
    }

    /// BMv2 switches numbered like the topology (the lab, the tests).
    pub fn bmv2() -> Devices {
        Devices::default()
    }

    pub fn target(&self) -> Target {
        self.target
    }

    /// The device port of `switch`'s topology port `port`.
    pub fn device_port(&self, switch: &str, port: u16) -> u16 {
        self.ports
            .get(switch)
            .map_or(port, |map| map.device_port(port))
    }

    /// `object` as `switch` must receive it: ports in device numbering.
    /// (How much of a packet a clone session copies is
    /// [`Target::clone_packet_length`], which resolution asks directly.)
    pub fn adapt(&self, switch: &str, object: &Object) -> Result<Object, NotAPort> {
        let port = |object: &str, field: &str, text: &str| -> Result<String, NotAPort> {
            let not_a_port = || NotAPort {
                object: object.to_string(),
                field: field.to_string(),
                value: text.to_string(),
            };
            let value = parse_value(text).map_err(|_| not_a_port())?;
            let port = value
                .as_u128()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(not_a_port)?;
            Ok(self.device_port(switch, port).to_string())
        };
        let spec = |e: &EntrySpec| -> Result<EntrySpec, NotAPort> {
            let mut e = e.clone();
            for (table, field) in PORT_MATCHES {
                if e.table == table {
                    if let Some(v) = e.matches.get_mut(field) {
                        *v = port(table, field, v)?;
                    }
                }
            }
            for (action, field) in PORT_PARAMS {
                if e.action.as_deref() == Some(action) {
                    if let Some(v) = e.params.get_mut(field) {
                        *v = port(action, field, v)?;
                    }
                }
            }
            if e.action.as_deref() == Some(crate::names::SET_DCQCN) {
                for field in ["kmin", "kmax"] {
                    if let Some(v) = e.params.get_mut(field) {
                        // A value that is no number is left for the P4Info
                        // encoding to refuse, with its own error.
                        if let Some(packets) = parse_value(v).ok().and_then(|x| x.as_u128()) {
                            *v = self.target.queue_depth(packets).to_string();
                        }
                    }
                }
            }
            Ok(e)
        };
        Ok(match object {
            Object::Entry(e) => Object::Entry(spec(e)?),
            Object::Default(e) => Object::Default(spec(e)?),
            Object::Member {
                profile,
                id,
                action,
                params,
            } => {
                let params = params
                    .iter()
                    .map(|(name, value)| {
                        let is_port = PORT_PARAMS.contains(&(action.as_str(), name.as_str()));
                        let value = match value.as_u128() {
                            Some(p) if is_port => {
                                let p = u16::try_from(p).map_err(|_| NotAPort {
                                    object: action.clone(),
                                    field: name.clone(),
                                    value: p.to_string(),
                                })?;
                                Value::from(self.device_port(switch, p))
                            }
                            _ => value.clone(),
                        };
                        Ok((name.clone(), value))
                    })
                    .collect::<Result<_, NotAPort>>()?;
                Object::Member {
                    profile: profile.clone(),
                    id: *id,
                    action: action.clone(),
                    params,
                }
            }
            Object::Group { .. } => object.clone(),
            Object::CloneSession { id, ports } => Object::CloneSession {
                id: *id,
                ports: ports
                    .iter()
                    .map(|p| match u16::try_from(*p) {
                        Ok(p) => Ok(u32::from(self.device_port(switch, p))),
                        Err(_) => Err(NotAPort {
                            object: format!("clone session {id}"),
                            field: "replica port".into(),
                            value: p.to_string(),
                        }),
                    })
                    .collect::<Result<_, _>>()?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf1_map() -> Devices {
        let map = PortMap::new("leaf1", [(1, 128), (2, 136)].into(), &[1, 2]).unwrap();
        Devices::new(Target::Tofino, [("leaf1".to_string(), map)].into())
    }

    fn entry(
        table: &str,
        matches: &[(&str, &str)],
        action: &str,
        params: &[(&str, &str)],
    ) -> Object {
        Object::Entry(EntrySpec {
            table: table.into(),
            matches: matches
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            action: Some(action.into()),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            priority: None,
            group: None,
            member: None,
            meter: None,
        })
    }

    /// The INT sink entry of egress port `port`: the simplest entry with a
    /// port in its match, so the tests show on it where ports become
    /// device ports and where they stay.
    fn int_sink(port: u16) -> Object {
        entry(
            names::INT_SINK_PORTS,
            &[("egress_port", &port.to_string())],
            names::INT_SET_SINK,
            &[],
        )
    }

    #[test]
    fn targets_parse_by_name() {
        assert_eq!("tofino".parse::<Target>(), Ok(Target::Tofino));
        assert_eq!("bmv2".parse::<Target>(), Ok(Target::Bmv2));
        let err = "tna".parse::<Target>().unwrap_err();
        assert!(err.contains("bmv2 or tofino"), "{err}");
        assert_eq!(Target::default(), Target::Bmv2);
    }

    #[test]
    fn dcqcn_thresholds_are_cells_on_tofino_and_packets_on_bmv2() {
        assert_eq!(TOFINO_CELLS_PER_FRAME, 52);
        assert_eq!(Target::Bmv2.queue_depth(12), 12);
        assert_eq!(Target::Tofino.queue_depth(12), 12 * 52);
        assert_eq!(Target::Tofino.queue_depth(1 << 20), (1 << 19) - 1);
        let dcqcn = entry(
            names::DCQCN_PORT,
            &[("egress_port", "3")],
            names::SET_DCQCN,
            &[("kmin", "2"), ("kmax", "12"), ("pmax", "3")],
        );
        let tofino = Devices::new(Target::Tofino, BTreeMap::new());
        let Object::Entry(e) = tofino.adapt("leaf1", &dcqcn).unwrap() else {
            panic!()
        };
        assert_eq!(e.params["kmin"], "104");
        assert_eq!(e.params["kmax"], "624");
        assert_eq!(e.params["pmax"], "3");
        assert_eq!(Devices::bmv2().adapt("leaf1", &dcqcn).unwrap(), dcqcn);
    }

    #[test]
    fn ports_of_entries_members_and_clone_sessions_become_device_ports() {
        let devices = leaf1_map();
        let sink = int_sink(2);
        assert_eq!(devices.adapt("leaf1", &sink).unwrap(), int_sink(136));
        let adjacency = entry(
            names::SR_ADJACENCY,
            &[("label", "1001")],
            names::FORWARD_ADJACENCY,
            &[("port", "1"), ("dst_mac", "02:00:00:00:00:01")],
        );
        // The label is an id (1000 + topology port), not a port: it stays.
        assert_eq!(
            devices.adapt("leaf1", &adjacency).unwrap(),
            entry(
                names::SR_ADJACENCY,
                &[("label", "1001")],
                names::FORWARD_ADJACENCY,
                &[("port", "128"), ("dst_mac", "02:00:00:00:00:01")],
            )
        );
        let member = Object::Member {
            profile: names::ECMP_SELECTOR.into(),
            id: 2,
            action: names::SET_NEXTHOP.into(),
            params: vec![
                ("port".into(), Value::from(2u16)),
                ("src_mac".into(), Value::from([6, 0, 0, 1, 0, 2])),
            ],
        };
        let Object::Member { id, params, .. } = devices.adapt("leaf1", &member).unwrap() else {
            panic!("a member stays a member");
        };
        assert_eq!(id, 2, "member ids are ids");
        assert_eq!(params[0], ("port".to_string(), Value::from(136u16)));
        assert_eq!(
            params[1],
            ("src_mac".to_string(), Value::from([6, 0, 0, 1, 0, 2]))
        );
        let clone = Object::CloneSession {
            id: names::INT_REPORT_CLONE_SESSION,
            ports: vec![1],
        };
        assert_eq!(
            devices.adapt("leaf1", &clone).unwrap(),
            Object::CloneSession {
                id: names::INT_REPORT_CLONE_SESSION,
                ports: vec![128],
            }
        );
    }

    #[test]
    fn switches_without_a_map_and_bmv2_keep_everything() {
        let devices = leaf1_map();
        let sink = int_sink(2);
        assert_eq!(devices.adapt("spine1", &sink).unwrap(), sink);
        let dcqcn = entry(
            names::DCQCN_PORT,
            &[("egress_port", "2")],
            names::SET_DCQCN,
            &[("kmin", "2"), ("kmax", "12"), ("pmax", "3")],
        );
        let clone = Object::CloneSession {
            id: names::INT_REPORT_CLONE_SESSION,
            ports: vec![3],
        };
        assert_eq!(Devices::bmv2().adapt("leaf1", &clone).unwrap(), clone);
        assert_eq!(Devices::bmv2().adapt("leaf1", &dcqcn).unwrap(), dcqcn);
    }

    #[test]
    fn a_port_field_that_is_not_a_number_is_an_error() {
        let bad = entry(
            names::PREDRAIN,
            &[("egress_port", "3&&&0x1ff")],
            names::PREDRAIN_MARK,
            &[],
        );
        let err = leaf1_map().adapt("leaf1", &bad).unwrap_err();
        assert_eq!(err.field, "egress_port");
        assert!(err.to_string().contains("is not a port number"), "{err}");
    }

    #[test]
    fn only_the_report_session_is_truncated_and_only_on_tofino() {
        let report = names::INT_REPORT_CLONE_SESSION;
        assert_eq!(Target::Bmv2.clone_packet_length(report), 0);
        // 14 + 20 + 8 + 4 + 12 + 12 header bytes, 8 hops of 28, 32 of mirror header.
        assert_eq!(Target::Tofino.clone_packet_length(report), 326);
        assert_eq!(Target::Tofino.clone_packet_length(report + 1), 0);
    }

    /// What a resolved report session holds on each target.
    fn resolved_session(devices: &Devices) -> p4rt::proto::p4::v1::CloneSessionEntry {
        use p4rt::proto::p4::v1::{entity::Entity, packet_replication_engine_entry::Type};
        let info = p4rt::P4Info::load(Target::Bmv2.committed_p4info()).unwrap();
        let intent = crate::Intent {
            objects: vec![Object::CloneSession {
                id: names::INT_REPORT_CLONE_SESSION,
                ports: vec![2],
            }],
        };
        let resolved = intent.resolve("leaf1", &info, devices).unwrap();
        let entity = (*resolved.entities.into_values().next().unwrap()).clone();
        let Some(Entity::PacketReplicationEngineEntry(pre)) = entity.into_entity().entity else {
            panic!("not a PRE entry");
        };
        let Some(Type::CloneSessionEntry(session)) = pre.r#type else {
            panic!("not a clone session");
        };
        session
    }

    #[test]
    fn resolution_sends_tofino_report_sessions_truncated_to_device_ports() {
        let tofino = resolved_session(&leaf1_map());
        assert_eq!(tofino.packet_length_bytes, INT_REPORT_MIRROR_BYTES as i32);
        #[allow(deprecated)]
        let port = tofino.replicas[0].port_kind.clone();
        #[allow(deprecated)]
        let want = p4rt::proto::p4::v1::replica::PortKind::EgressPort(136);
        assert_eq!(port, Some(want));
        assert_eq!(resolved_session(&Devices::bmv2()).packet_length_bytes, 0);
    }

    #[test]
    fn cnp_class_and_report_session_are_the_programs_constants() {
        let headers = std::fs::read_to_string(repository_root().join("p4src/shared/formats.p4"))
            .expect("p4src/shared/formats.p4");
        let constant = |name: &str| -> u32 {
            let line = headers
                .lines()
                .find(|l| l.starts_with("const") && l.contains(&format!(" {name} ")))
                .unwrap_or_else(|| panic!("formats.p4 defines no {name}"));
            let value = line.split('=').nth(1).unwrap().trim().trim_end_matches(';');
            value.parse().unwrap_or_else(|_| panic!("{name} = {value}"))
        };
        assert_eq!(constant("PRIORITY_CNP"), u32::from(CNP_CLASS));
        assert_eq!(
            constant("INT_REPORT_CLONE_SESSION"),
            names::INT_REPORT_CLONE_SESSION
        );
    }
}
