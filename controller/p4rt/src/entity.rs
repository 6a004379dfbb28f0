//! Typed builders for the P4Runtime entities the controller writes and reads.
//!
//! Every builder resolves names through [`P4Info`] and encodes values by the
//! bytestring rules, so a wrong name or an oversized value fails here, with
//! the table, field or parameter named, before anything reaches a switch.

use crate::error::{P4InfoError, ValueError};
use crate::p4info::{match_type, name_of, P4Info};
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;
use crate::value::Value;

use p4::field_match::FieldMatchType;

/// Error while building an entity.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Name(#[from] P4InfoError),
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("{0}")]
    Invalid(String),
}

type Build<T> = Result<T, BuildError>;

/// An action call: action id and encoded parameters.
pub fn action(info: &P4Info, action_name: &str, params: &[(&str, Value)]) -> Build<p4::Action> {
    let action = info.action(action_name)?;
    let action_label = name_of(&action.preamble);
    let mut out = p4::Action {
        action_id: action.preamble.as_ref().map_or(0, |p| p.id),
        params: Vec::with_capacity(params.len()),
    };
    for (name, value) in params {
        let param = info.action_param(action, name)?;
        out.params.push(p4::action::Param {
            param_id: param.id,
            value: value.encode(
                param.bitwidth as u32,
                &format!("action {action_label}, param {name}"),
            )?,
        });
    }
    if out.params.len() != action.params.len() {
        let missing: Vec<&str> = action
            .params
            .iter()
            .filter(|p| !params.iter().any(|(n, _)| *n == p.name))
            .map(|p| p.name.as_str())
            .collect();
        return Err(BuildError::Invalid(format!(
            "action {action_label}: missing parameter(s) {}",
            missing.join(", ")
        )));
    }
    Ok(out)
}

/// Builds a table entry: `TableEntryBuilder::new(&info, "ipv4_lpm")?.lpm(..)?.action(..)?.build()`.
pub struct TableEntryBuilder<'a> {
    info: &'a P4Info,
    table: &'a cfg::Table,
    entry: p4::TableEntry,
}

impl<'a> TableEntryBuilder<'a> {
    pub fn new(info: &'a P4Info, table: &str) -> Build<Self> {
        let table = info.table(table)?;
        Ok(TableEntryBuilder {
            info,
            table,
            entry: p4::TableEntry {
                table_id: table.preamble.as_ref().map_or(0, |p| p.id),
                ..Default::default()
            },
        })
    }

    fn table_name(&self) -> &str {
        name_of(&self.table.preamble)
    }

    fn field(&self, name: &str, kind: cfg::match_field::MatchType) -> Build<(u32, u32, String)> {
        let field = self.info.match_field(self.table, name)?;
        let label = format!("table {}, match field {name}", self.table_name());
        if match_type(field) != kind {
            return Err(BuildError::Invalid(format!(
                "{label} is {:?}, not {:?}",
                match_type(field),
                kind
            )));
        }
        Ok((field.id, field.bitwidth as u32, label))
    }

    fn push(mut self, field_id: u32, m: FieldMatchType) -> Self {
        self.entry.r#match.retain(|f| f.field_id != field_id);
        self.entry.r#match.push(p4::FieldMatch {
            field_id,
            field_match_type: Some(m),
        });
        self
    }

    pub fn exact(self, field: &str, value: impl Into<Value>) -> Build<Self> {
        let (id, width, label) = self.field(field, cfg::match_field::MatchType::Exact)?;
        let value = value.into().encode(width, &label)?;
        Ok(self.push(id, FieldMatchType::Exact(p4::field_match::Exact { value })))
    }

    /// Longest-prefix match. A zero-length prefix is a wildcard: the field is
    /// left out, as P4Runtime requires.
    pub fn lpm(self, field: &str, value: impl Into<Value>, prefix_len: u32) -> Build<Self> {
        let (id, width, label) = self.field(field, cfg::match_field::MatchType::Lpm)?;
        if prefix_len > width {
            return Err(BuildError::Invalid(format!(
                "{label}: prefix length {prefix_len} exceeds the field's {width} bits"
            )));
        }
        if prefix_len == 0 {
            return Ok(self);
        }
        // Canonical LPM: bits past the prefix must be zero.
        let raw = value.into().as_u128().ok_or_else(|| ValueError {
            field: label.clone(),
            reason: "value wider than 128 bits".into(),
        })?;
        let masked = raw & crate::bytestring::prefix_mask(prefix_len, width);
        let value = Value::Int(masked).encode(width, &label)?;
        Ok(self.push(
            id,
            FieldMatchType::Lpm(p4::field_match::Lpm {
                value,
                prefix_len: prefix_len as i32,
            }),
        ))
    }

    /// Ternary match; an all-zero mask is a wildcard and leaves the field out.
    pub fn ternary(
        self,
        field: &str,
        value: impl Into<Value>,
        mask: impl Into<Value>,
    ) -> Build<Self> {
        let (id, width, label) = self.field(field, cfg::match_field::MatchType::Ternary)?;
        let mask = mask.into();
        let mask_int = mask.as_u128().unwrap_or(u128::MAX);
        if mask_int == 0 {
            return Ok(self);
        }
        let value_int = value.into().as_u128().ok_or_else(|| ValueError {
            field: label.clone(),
            reason: "value wider than 128 bits".into(),
        })?;
        let value = Value::Int(value_int & mask_int).encode(width, &label)?;
        let mask = mask.encode(width, &format!("{label} (mask)"))?;
        Ok(self.push(
            id,
            FieldMatchType::Ternary(p4::field_match::Ternary { value, mask }),
        ))
    }

    pub fn range(self, field: &str, low: impl Into<Value>, high: impl Into<Value>) -> Build<Self> {
        let (id, width, label) = self.field(field, cfg::match_field::MatchType::Range)?;
        let (low, high) = (low.into(), high.into());
        if low.as_u128() > high.as_u128() {
            return Err(BuildError::Invalid(format!("{label}: range low > high")));
        }
        let low = low.encode(width, &format!("{label} (low)"))?;
        let high = high.encode(width, &format!("{label} (high)"))?;
        Ok(self.push(
            id,
            FieldMatchType::Range(p4::field_match::Range { low, high }),
        ))
    }

    pub fn optional(self, field: &str, value: impl Into<Value>) -> Build<Self> {
        let (id, width, label) = self.field(field, cfg::match_field::MatchType::Optional)?;
        let value = value.into().encode(width, &label)?;
        Ok(self.push(
            id,
            FieldMatchType::Optional(p4::field_match::Optional { value }),
        ))
    }

    /// Priority, required when the table has ternary, range or optional fields.
    pub fn priority(mut self, priority: i32) -> Self {
        self.entry.priority = priority;
        self
    }

    pub fn action(mut self, name: &str, params: &[(&str, Value)]) -> Build<Self> {
        let call = action(self.info, name, params)?;
        let allowed = self
            .table
            .action_refs
            .iter()
            .any(|r| r.id == call.action_id);
        if !allowed {
            return Err(BuildError::Invalid(format!(
                "action {name} is not an action of table {}",
                self.table_name()
            )));
        }
        self.entry.action = Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(call)),
        });
        Ok(self)
    }

    /// Point the entry at an action profile member (tables with an action profile).
    pub fn member(mut self, member_id: u32) -> Self {
        self.entry.action = Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::ActionProfileMemberId(member_id)),
        });
        self
    }

    /// Point the entry at an action selector group (ECMP).
    pub fn group(mut self, group_id: u32) -> Self {
        self.entry.action = Some(p4::TableAction {
            r#type: Some(p4::table_action::Type::ActionProfileGroupId(group_id)),
        });
        self
    }

    /// Make this the table's default entry (no match fields; MODIFY only).
    pub fn default_entry(mut self) -> Self {
        self.entry.is_default_action = true;
        self
    }

    /// Idle timeout for tables that support it.
    pub fn idle_timeout_ns(mut self, ns: i64) -> Self {
        self.entry.idle_timeout_ns = ns;
        self
    }

    /// The entry, with match fields in P4Info id order (a canonical form, so
    /// entries built from the same fields in any order compare equal).
    pub fn build(mut self) -> Build<p4::TableEntry> {
        self.entry.r#match.sort_by_key(|m| m.field_id);
        let needs_priority = self.table.match_fields.iter().any(|f| {
            matches!(
                match_type(f),
                cfg::match_field::MatchType::Ternary
                    | cfg::match_field::MatchType::Range
                    | cfg::match_field::MatchType::Optional
            )
        });
        if needs_priority && self.entry.priority <= 0 && !self.entry.is_default_action {
            return Err(BuildError::Invalid(format!(
                "table {} has ternary/range/optional fields: the entry needs a priority > 0",
                self.table_name()
            )));
        }
        for field in &self.table.match_fields {
            let present = self.entry.r#match.iter().any(|m| m.field_id == field.id);
            if !present && match_type(field) == cfg::match_field::MatchType::Exact {
                return Err(BuildError::Invalid(format!(
                    "table {}: exact match field {} needs a value",
                    self.table_name(),
                    field.name
                )));
            }
        }
        Ok(self.entry)
    }
}

/// Selects every entry of a table, for wildcard reads.
pub fn all_table_entries(info: &P4Info, table: &str) -> Build<p4::Entity> {
    let table_id = info.table(table)?.preamble.as_ref().map_or(0, |p| p.id);
    Ok(table_wildcard(info, table_id))
}

/// Selects every entry of table `table_id`, with its direct meter's
/// configuration where the table has one (PI returns it only when the
/// request carries a `meter_config`).
pub fn table_wildcard(info: &P4Info, table_id: u32) -> p4::Entity {
    p4::TableEntry {
        table_id,
        meter_config: info.has_direct_meter(table_id).then(Default::default),
        ..Default::default()
    }
    .into()
}

/// A member of an action profile (one ECMP next hop).
pub fn action_profile_member(
    info: &P4Info,
    profile: &str,
    member_id: u32,
    action_name: &str,
    params: &[(&str, Value)],
) -> Build<p4::ActionProfileMember> {
    let profile = info.action_profile(profile)?;
    Ok(p4::ActionProfileMember {
        action_profile_id: profile.preamble.as_ref().map_or(0, |p| p.id),
        member_id,
        action: Some(action(info, action_name, params)?),
    })
}

/// A group of members with weights (an ECMP group).
pub fn action_profile_group(
    info: &P4Info,
    profile: &str,
    group_id: u32,
    members: &[(u32, i32)],
) -> Build<p4::ActionProfileGroup> {
    let profile = info.action_profile(profile)?;
    if profile.max_group_size > 0 && members.len() > profile.max_group_size as usize {
        return Err(BuildError::Invalid(format!(
            "action profile {}: {} members exceed max_group_size {}",
            name_of(&profile.preamble),
            members.len(),
            profile.max_group_size
        )));
    }
    Ok(p4::ActionProfileGroup {
        action_profile_id: profile.preamble.as_ref().map_or(0, |p| p.id),
        group_id,
        members: members
            .iter()
            .map(|(member_id, weight)| p4::action_profile_group::Member {
                member_id: *member_id,
                weight: *weight,
                watch_kind: None,
            })
            .collect(),
        max_size: 0,
    })
}

// PI v0.1.2 (BMv2) predates the `port` bytes field of P4Runtime 1.4, so the
// deprecated integer `egress_port` is the one both ends understand.
#[allow(deprecated)]
fn replicas(ports: &[(u32, u32)]) -> Vec<p4::Replica> {
    ports
        .iter()
        .map(|(port, instance)| p4::Replica {
            instance: *instance,
            port_kind: Some(p4::replica::PortKind::EgressPort(*port)),
        })
        .collect()
}

/// A multicast group replicating to `(port, instance)` pairs.
pub fn multicast_group(group_id: u32, ports: &[(u32, u32)]) -> p4::Entity {
    p4::PacketReplicationEngineEntry {
        r#type: Some(
            p4::packet_replication_engine_entry::Type::MulticastGroupEntry(
                p4::MulticastGroupEntry {
                    multicast_group_id: group_id,
                    replicas: replicas(ports),
                    metadata: Vec::new(),
                },
            ),
        ),
    }
    .into()
}

/// A clone session (e.g. mirroring INT reports to a collector port).
pub fn clone_session(session_id: u32, ports: &[(u32, u32)], truncate_to: i32) -> p4::Entity {
    p4::PacketReplicationEngineEntry {
        r#type: Some(
            p4::packet_replication_engine_entry::Type::CloneSessionEntry(p4::CloneSessionEntry {
                session_id,
                replicas: replicas(ports),
                class_of_service: 0,
                packet_length_bytes: truncate_to,
            }),
        ),
    }
    .into()
}

/// One cell of an indirect counter, or all cells when `index` is `None`.
pub fn counter(info: &P4Info, name: &str, index: Option<i64>) -> Build<p4::CounterEntry> {
    let counter = info.counter(name)?;
    check_index(name, index, counter.size)?;
    Ok(p4::CounterEntry {
        counter_id: counter.preamble.as_ref().map_or(0, |p| p.id),
        index: index.map(|index| p4::Index { index }),
        data: None,
    })
}

/// The direct counter attached to a table entry.
pub fn direct_counter(entry: p4::TableEntry) -> p4::DirectCounterEntry {
    p4::DirectCounterEntry {
        table_entry: Some(entry),
        data: None,
    }
}

/// One cell of a register (to read), or all cells when `index` is `None`.
pub fn register(info: &P4Info, name: &str, index: Option<i64>) -> Build<p4::RegisterEntry> {
    let register = info.register(name)?;
    check_index(name, index, register.size as i64)?;
    Ok(p4::RegisterEntry {
        register_id: register.preamble.as_ref().map_or(0, |p| p.id),
        index: index.map(|index| p4::Index { index }),
        data: None,
    })
}

/// A register cell with a value to write, width-checked against the register.
pub fn register_value(
    info: &P4Info,
    name: &str,
    index: i64,
    value: impl Into<Value>,
) -> Build<p4::RegisterEntry> {
    let register = info.register(name)?;
    check_index(name, Some(index), register.size as i64)?;
    let width = register
        .type_spec
        .as_ref()
        .and_then(|t| t.type_spec.as_ref())
        .and_then(|t| match t {
            cfg::p4_data_type_spec::TypeSpec::Bitstring(b) => match &b.type_spec {
                Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(bit)) => {
                    Some(bit.bitwidth as u32)
                }
                _ => None,
            },
            _ => None,
        })
        .ok_or_else(|| {
            BuildError::Invalid(format!(
                "register {name}: only bit<W> registers can be written"
            ))
        })?;
    let bytes = value
        .into()
        .encode(width, &format!("register {name}[{index}]"))?;
    Ok(p4::RegisterEntry {
        register_id: register.preamble.as_ref().map_or(0, |p| p.id),
        index: Some(p4::Index { index }),
        data: Some(p4::P4Data {
            data: Some(p4::p4_data::Data::Bitstring(bytes)),
        }),
    })
}

/// A meter cell with a two-rate configuration (rates in units the meter counts).
pub fn meter(
    info: &P4Info,
    name: &str,
    index: i64,
    config: p4::MeterConfig,
) -> Build<p4::MeterEntry> {
    let meter = info.meter(name)?;
    check_index(name, Some(index), meter.size)?;
    Ok(p4::MeterEntry {
        meter_id: meter.preamble.as_ref().map_or(0, |p| p.id),
        index: Some(p4::Index { index }),
        config: Some(config),
        counter_data: None,
    })
}

/// Digest configuration: how long and how many to batch before sending.
pub fn digest(
    info: &P4Info,
    name: &str,
    max_timeout_ns: i64,
    max_list_size: i32,
) -> Build<p4::DigestEntry> {
    let digest = info.digest(name)?;
    Ok(p4::DigestEntry {
        digest_id: digest.preamble.as_ref().map_or(0, |p| p.id),
        config: Some(p4::digest_entry::Config {
            max_timeout_ns,
            max_list_size,
            ack_timeout_ns: 1_000_000_000,
        }),
    })
}

fn check_index(name: &str, index: Option<i64>, size: i64) -> Build<()> {
    match index {
        Some(i) if i < 0 || (size > 0 && i >= size) => Err(BuildError::Invalid(format!(
            "{name}: index {i} outside 0..{size}"
        ))),
        _ => Ok(()),
    }
}

macro_rules! into_entity {
    ($($ty:ident => $variant:ident),*) => {$(
        impl From<p4::$ty> for p4::Entity {
            fn from(e: p4::$ty) -> Self {
                p4::Entity { entity: Some(p4::entity::Entity::$variant(e)) }
            }
        }
    )*};
}
into_entity!(
    TableEntry => TableEntry,
    ActionProfileMember => ActionProfileMember,
    ActionProfileGroup => ActionProfileGroup,
    CounterEntry => CounterEntry,
    DirectCounterEntry => DirectCounterEntry,
    RegisterEntry => RegisterEntry,
    MeterEntry => MeterEntry,
    DirectMeterEntry => DirectMeterEntry,
    PacketReplicationEngineEntry => PacketReplicationEngineEntry,
    DigestEntry => DigestEntry
);

/// A short description of an entity for error messages and logs.
pub fn describe(info: Option<&P4Info>, entity: &p4::Entity) -> String {
    use p4::entity::Entity as E;
    let table_name = |id: u32| {
        info.and_then(|i| i.table_by_id(id).ok())
            .map(|t| name_of(&t.preamble).to_string())
            .unwrap_or_else(|| format!("id {id}"))
    };
    match &entity.entity {
        Some(E::TableEntry(t)) => format!("table entry in {}", table_name(t.table_id)),
        Some(E::ActionProfileMember(m)) => format!("action profile member {}", m.member_id),
        Some(E::ActionProfileGroup(g)) => format!("action profile group {}", g.group_id),
        Some(E::CounterEntry(c)) => format!("counter {}", c.counter_id),
        Some(E::DirectCounterEntry(_)) => "direct counter".into(),
        Some(E::RegisterEntry(r)) => format!("register {}", r.register_id),
        Some(E::MeterEntry(m)) => format!("meter {}", m.meter_id),
        Some(E::DirectMeterEntry(_)) => "direct meter".into(),
        Some(E::PacketReplicationEngineEntry(_)) => "packet replication entry".into(),
        Some(E::DigestEntry(d)) => format!("digest {}", d.digest_id),
        Some(E::ExternEntry(_)) => "extern entry".into(),
        Some(E::ValueSetEntry(_)) => "value set".into(),
        None => "empty entity".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
tables {
  preamble { id: 1 name: "Ing.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "dst_addr" bitwidth: 32 match_type: LPM }
  action_refs { id: 10 }
}
tables {
  preamble { id: 2 name: "Ing.acl" alias: "acl" }
  match_fields { id: 1 name: "src" bitwidth: 32 match_type: TERNARY }
  match_fields { id: 2 name: "qp" bitwidth: 24 match_type: EXACT }
  action_refs { id: 10 }
}
actions {
  preamble { id: 10 name: "Ing.forward" alias: "forward" }
  params { id: 1 name: "port" bitwidth: 9 }
}
actions { preamble { id: 11 name: "Ing.other" alias: "other" } }
"#;

    fn info() -> P4Info {
        P4Info::from_text(TEXT).unwrap()
    }

    #[test]
    fn lpm_entry_is_canonical() {
        let info = info();
        let entry = TableEntryBuilder::new(&info, "ipv4_lpm")
            .unwrap()
            .lpm("dst_addr", std::net::Ipv4Addr::new(10, 0, 1, 77), 24)
            .unwrap()
            .action("forward", &[("port", 2u32.into())])
            .unwrap()
            .build()
            .unwrap();
        let Some(FieldMatchType::Lpm(lpm)) = &entry.r#match[0].field_match_type else {
            panic!("not lpm")
        };
        assert_eq!(lpm.value, vec![10, 0, 1, 0], "host bits cleared");
        assert_eq!(lpm.prefix_len, 24);
    }

    #[test]
    fn width_errors_name_table_and_param() {
        let info = info();
        let err = TableEntryBuilder::new(&info, "ipv4_lpm")
            .unwrap()
            .action("forward", &[("port", 512u32.into())])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("action Ing.forward, param port"), "{err}");
    }

    #[test]
    fn ternary_table_requires_priority_and_exact_fields() {
        let info = info();
        let base = || {
            TableEntryBuilder::new(&info, "acl")
                .unwrap()
                .ternary("src", 0x0a000001u32, 0xffffff00u32)
                .unwrap()
                .action("forward", &[("port", 1u32.into())])
                .unwrap()
        };
        let err = base()
            .exact("qp", 7u32)
            .unwrap()
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("priority"), "{err}");
        let err = base().priority(10).build().unwrap_err().to_string();
        assert!(err.contains("exact match field qp"), "{err}");
        let entry = base()
            .exact("qp", 7u32)
            .unwrap()
            .priority(10)
            .build()
            .unwrap();
        let Some(FieldMatchType::Ternary(t)) = &entry.r#match[0].field_match_type else {
            panic!("not ternary")
        };
        assert_eq!(t.value, vec![10, 0, 0, 0], "value masked");
    }

    #[test]
    fn wrong_match_kind_and_foreign_action_are_rejected() {
        let info = info();
        let b = TableEntryBuilder::new(&info, "ipv4_lpm").unwrap();
        assert!(b.exact("dst_addr", 1u32).is_err());
        let b = TableEntryBuilder::new(&info, "ipv4_lpm").unwrap();
        let err = b.action("other", &[]).err().unwrap().to_string();
        assert!(err.contains("not an action of table"), "{err}");
    }

    #[test]
    fn missing_param_is_named() {
        let err = action(&info(), "forward", &[]).unwrap_err().to_string();
        assert!(err.contains("missing parameter(s) port"), "{err}");
    }
}
