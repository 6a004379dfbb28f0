//! The controller's admin views (`GET /v1/status`, `GET /v1/entries/<switch>`
//! on the HTTP endpoint), shared by the daemon and the CLI that prints them.

use std::collections::BTreeMap;

use p4rt::bytestring::decode_u128;
use p4rt::p4info::name_of;
use p4rt::proto::p4::v1 as p4;
use p4rt::{EntrySpec, P4Info};
use serde::{Deserialize, Serialize};

use super::switch_status::SwitchStatus;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusView {
    pub controller: ControllerView,
    pub switches: Vec<SwitchView>,
    pub reservations: ReservationsView,
    pub links: Vec<LinkView>,
    /// Set when the view is one tenant's (its client certificate's): its
    /// reservations only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl StatusView {
    /// The view a tenant gets, once its reservations are the only ones
    /// in it: what tells of the controller's host and of other tenants
    /// is taken out (the state file's path, the switches' management
    /// addresses, how many reservations the start-up reloaded). Link
    /// loads, links down and the switches' health stay: they are the
    /// fabric's, which every tenant shares.
    pub fn scope_to(mut self, tenant: &str) -> StatusView {
        self.controller.state_file = None;
        self.controller.restored_reservations = 0;
        for sw in &mut self.switches {
            sw.addr.clear();
        }
        self.tenant = Some(tenant.to_string());
        self
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControllerView {
    pub version: String,
    pub fabric: String,
    pub ndsp_addr: String,
    pub http_addr: String,
    pub election_id: String,
    pub lead_time_ms: f64,
    pub state_file: Option<String>,
    pub uptime_s: f64,
    pub now_unix_ns: u64,
    /// Live reservations reloaded from the state file at start.
    pub restored_reservations: usize,
    /// Of those, reservations whose recorded path crossed a link that is
    /// down; they were re-planned at start-up (every other one keeps its
    /// recorded path, in the ledger as on the switches).
    pub restored_diverged: Vec<String>,
    /// Fabric links taken down by the operator (`foresight link down`).
    #[serde(default)]
    pub links_down: Vec<String>,
    /// Time from start until every switch held the intended state.
    pub startup_reconcile_ms: Option<f64>,
}

/// The answer to `POST /v1/links/<node>:<port>/{down,up}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkChangeView {
    /// Both ends, e.g. `leaf1:3 <-> spine1:1`.
    pub link: String,
    /// `down` or `up`: the state asked for (and now in effect).
    pub state: String,
    /// False when the link already was in that state (nothing changed).
    pub changed: bool,
    /// Reservations re-planned, as they are now.
    pub replanned: Vec<ReplannedView>,
    /// Entities written to the switches for the change.
    pub switch_changes: usize,
    /// Switches that did not acknowledge (they are reconciled when back).
    pub switch_errors: Vec<String>,
    /// Every link down after the change.
    pub links_down: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplannedView {
    pub id: String,
    pub status: String,
    pub advisory: Option<String>,
    pub revision: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchView {
    pub name: String,
    pub addr: String,
    pub device_id: u64,
    /// `primary`, `backup` or `disconnected`.
    pub role: String,
    #[serde(flatten)]
    pub status: SwitchStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReservationsView {
    /// Count per lifecycle state (scheduled, installed, fallback, expired, cancelled).
    pub by_state: BTreeMap<String, usize>,
    /// Reserved flows whose entries are on the switches now.
    pub installed_flows: usize,
    /// Live reservations, then the most recent finished ones.
    pub list: Vec<ReservationSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReservationSummary {
    pub id: String,
    pub tenant: String,
    /// `demand:<id>` or `collective:<id>`.
    pub subject: String,
    pub job_id: Option<String>,
    pub status: String,
    pub state: String,
    pub flows: usize,
    pub reserved_flows: usize,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub install_unix_ns: Option<u64>,
    pub revision: u64,
    /// Made by the controller from the job's learned iterations (T+5).
    #[serde(default)]
    pub predicted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkView {
    /// `leaf1:3 -> spine1:1`.
    pub link: String,
    pub capacity_bps: u64,
    pub reserved_bps: u64,
    /// From INT reports, when any arrived recently.
    pub measured_bps: Option<u64>,
    pub utilization: Option<f64>,
    pub queue_packets: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntriesView {
    pub switch: String,
    pub addr: String,
    pub entities: Vec<EntityView>,
    /// How the switch differs from the controller's intended state.
    pub drift: DriftView,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DriftView {
    pub missing: Vec<String>,
    pub unexpected: Vec<String>,
    pub different: Vec<String>,
}

/// One entity a switch holds, decoded with P4Info names.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntityView {
    /// `table_entry`, `member`, `group`, `clone_session` or `other`.
    pub kind: String,
    /// Table entries: the entry by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<EntrySpec>,
    /// Members and groups: the action profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// Group members, or clone session ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<u32>,
    /// Anything that did not decode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

impl EntityView {
    fn new(kind: &str) -> EntityView {
        EntityView {
            kind: kind.into(),
            entry: None,
            profile: None,
            id: None,
            action: None,
            params: BTreeMap::new(),
            members: Vec::new(),
            raw: None,
        }
    }

    /// One line for people.
    pub fn line(&self) -> String {
        match (&self.entry, self.kind.as_str()) {
            (Some(e), _) => {
                let matches: Vec<String> =
                    e.matches.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let target = match (&e.action, e.group, e.member) {
                    (Some(a), _, _) => {
                        let params: Vec<String> =
                            e.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        format!("{}({})", short(a), params.join(", "))
                    }
                    (None, Some(g), _) => format!("group {g}"),
                    (None, None, Some(m)) => format!("member {m}"),
                    _ => "-".into(),
                };
                let prio = e.priority.map(|p| format!(" prio {p}")).unwrap_or_default();
                format!(
                    "{:<28} {} -> {target}{prio}",
                    short(&e.table),
                    matches.join(" ")
                )
            }
            (None, "member") => {
                let params: Vec<String> = self
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                format!(
                    "{:<28} member {} -> {}({})",
                    short(self.profile.as_deref().unwrap_or("?")),
                    self.id.unwrap_or(0),
                    short(self.action.as_deref().unwrap_or("?")),
                    params.join(", ")
                )
            }
            (None, "group") => format!(
                "{:<28} group {} members {:?}",
                short(self.profile.as_deref().unwrap_or("?")),
                self.id.unwrap_or(0),
                self.members
            ),
            (None, "clone_session") => format!(
                "{:<28} session {} ports {:?}",
                "clone session",
                self.id.unwrap_or(0),
                self.members
            ),
            _ => self.raw.clone().unwrap_or_else(|| self.kind.clone()),
        }
    }
}

/// `FsIngress.sr.reservation` -> `sr.reservation`.
fn short(name: &str) -> &str {
    name.split_once('.').map_or(name, |(_, rest)| rest)
}

fn show(bytes: &[u8], bitwidth: i32) -> String {
    match decode_u128(bytes) {
        Some(v) if bitwidth == 32 => std::net::Ipv4Addr::from(v as u32).to_string(),
        Some(v) if bitwidth == 48 => {
            let b = (v as u64).to_be_bytes();
            format!(
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                b[2], b[3], b[4], b[5], b[6], b[7]
            )
        }
        Some(v) => v.to_string(),
        None => format!("0x{}", p4rt::bytestring::hex(bytes)),
    }
}

#[allow(deprecated)]
fn replica_port(r: &p4::Replica) -> u32 {
    match &r.port_kind {
        Some(p4::replica::PortKind::EgressPort(p)) => *p,
        Some(p4::replica::PortKind::Port(b)) => b.iter().fold(0, |a, x| (a << 8) | u32::from(*x)),
        None => 0,
    }
}

/// Decode an entity read from a switch.
pub fn decode(info: &P4Info, entity: &p4::Entity) -> EntityView {
    use p4::entity::Entity as E;
    match &entity.entity {
        Some(E::TableEntry(t)) => match EntrySpec::from_entry(info, t) {
            Ok(spec) => EntityView {
                entry: Some(spec),
                ..EntityView::new("table_entry")
            },
            Err(e) => EntityView {
                raw: Some(format!("table entry that does not decode: {e}")),
                ..EntityView::new("table_entry")
            },
        },
        Some(E::ActionProfileMember(m)) => {
            let mut v = EntityView::new("member");
            v.profile = info
                .action_profile_by_id(m.action_profile_id)
                .ok()
                .map(|p| name_of(&p.preamble).to_string());
            v.id = Some(m.member_id);
            if let Some(action) = &m.action {
                if let Ok(a) = info.action_by_id(action.action_id) {
                    v.action = Some(name_of(&a.preamble).to_string());
                    for p in &action.params {
                        let def = a.params.iter().find(|d| d.id == p.param_id);
                        let (name, width) = def.map_or((format!("#{}", p.param_id), 0), |d| {
                            (d.name.clone(), d.bitwidth)
                        });
                        v.params.insert(name, show(&p.value, width));
                    }
                }
            }
            v
        }
        Some(E::ActionProfileGroup(g)) => {
            let mut v = EntityView::new("group");
            v.profile = info
                .action_profile_by_id(g.action_profile_id)
                .ok()
                .map(|p| name_of(&p.preamble).to_string());
            v.id = Some(g.group_id);
            v.members = g.members.iter().map(|m| m.member_id).collect();
            v.members.sort_unstable();
            v
        }
        Some(E::PacketReplicationEngineEntry(pre)) => match &pre.r#type {
            Some(p4::packet_replication_engine_entry::Type::CloneSessionEntry(c)) => {
                let mut v = EntityView::new("clone_session");
                v.id = Some(c.session_id);
                v.members = c.replicas.iter().map(replica_port).collect();
                v
            }
            _ => EntityView {
                raw: Some("multicast group".into()),
                ..EntityView::new("other")
            },
        },
        _ => EntityView {
            raw: Some(p4rt::entity::describe(Some(info), entity)),
            ..EntityView::new("other")
        },
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    fn reservation(id: &str, subject: &str) -> ReservationSummary {
        ReservationSummary {
            id: id.into(),
            tenant: "acme".into(),
            subject: subject.into(),
            job_id: None,
            status: "admitted".into(),
            state: "installed".into(),
            flows: 16,
            reserved_flows: 16,
            start_unix_ns: 1_000_000,
            end_unix_ns: 11_000_000,
            install_unix_ns: None,
            revision: 1,
            predicted: false,
        }
    }

    /// A status with one connected switch, two reservations and two
    /// links (one measured).
    pub fn sample() -> StatusView {
        StatusView {
            controller: ControllerView {
                version: "test".into(),
                fabric: "leaf-spine".into(),
                ndsp_addr: "127.0.0.1:1".into(),
                http_addr: "127.0.0.1:2".into(),
                election_id: "10".into(),
                lead_time_ms: 50.0,
                state_file: None,
                uptime_s: 1.0,
                now_unix_ns: 0,
                restored_reservations: 0,
                restored_diverged: vec![],
                links_down: vec![],
                startup_reconcile_ms: None,
            },
            switches: vec![SwitchView {
                name: "leaf1".into(),
                addr: "127.0.0.1:9559".into(),
                device_id: 1,
                role: "primary".into(),
                status: SwitchStatus {
                    connected: true,
                    primary: true,
                    ..SwitchStatus::default()
                },
            }],
            reservations: ReservationsView {
                by_state: BTreeMap::from([("installed".to_string(), 2), ("expired".into(), 1)]),
                installed_flows: 16,
                list: vec![
                    reservation("r-1", "demand:d-1"),
                    reservation(
                        "a-reservation-with-a-long-generated-id-0001",
                        "collective:ar-1",
                    ),
                ],
            },
            links: vec![
                LinkView {
                    link: "leaf1:3 -> spine1:1".into(),
                    capacity_bps: 10_000_000_000,
                    reserved_bps: 4_000_000_000,
                    measured_bps: Some(100_000_000),
                    utilization: Some(0.01),
                    queue_packets: Some(0),
                },
                LinkView {
                    link: "leaf1:4 -> spine2:1".into(),
                    capacity_bps: 10_000_000_000,
                    reserved_bps: 0,
                    measured_bps: None,
                    utilization: None,
                    queue_packets: None,
                },
            ],
            tenant: None,
        }
    }
}
