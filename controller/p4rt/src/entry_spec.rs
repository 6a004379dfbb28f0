//! Table entries as people write them (YAML/JSON) and read them back:
//! names instead of ids, values as text.
//!
//! Match values by kind: exact and optional `10.0.0.1`, `42`, `0x2a` or a MAC;
//! LPM `10.0.1.0/24`; ternary `10.0.0.0&&&255.255.0.0`; range `100..200`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bytestring::{decode_u128, hex};
use crate::entity::{BuildError, TableEntryBuilder};
use crate::p4info::{match_type, name_of, P4Info};
use crate::proto::p4::config::v1::match_field::MatchType;
use crate::proto::p4::v1 as p4;
use crate::value::parse_value;

/// One table entry by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntrySpec {
    pub table: String,
    #[serde(default, rename = "match")]
    pub matches: BTreeMap<String, String>,
    /// Action name; absent when the entry points at an action profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<u32>,
    /// The configuration of the table's direct meter for this entry;
    /// absent: the switch's default (BMv2 colours every packet green).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meter: Option<MeterRates>,
}

/// A two-rate meter (RFC 2698), in the unit the meter counts (bytes or
/// packets per second, and bytes or packets of burst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeterRates {
    pub cir: i64,
    pub cburst: i64,
    pub pir: i64,
    pub pburst: i64,
}

impl MeterRates {
    pub fn to_config(self) -> p4::MeterConfig {
        p4::MeterConfig {
            cir: self.cir,
            cburst: self.cburst,
            pir: self.pir,
            pburst: self.pburst,
            eburst: 0,
        }
    }

    pub fn from_config(c: &p4::MeterConfig) -> MeterRates {
        MeterRates {
            cir: c.cir,
            cburst: c.cburst,
            pir: c.pir,
            pburst: c.pburst,
        }
    }
}

fn parse(text: &str, label: &str) -> Result<crate::Value, BuildError> {
    parse_value(text).map_err(|reason| BuildError::Invalid(format!("{label}: {reason}")))
}

impl EntrySpec {
    /// Resolve names and encode values into a P4Runtime table entry.
    pub fn to_entry(&self, info: &P4Info) -> Result<p4::TableEntry, BuildError> {
        let table = info.table(&self.table)?;
        let mut builder = TableEntryBuilder::new(info, &self.table)?;
        for (field_name, text) in &self.matches {
            let field = info.match_field(table, field_name)?;
            let label = format!("table {}, match {field_name}", self.table);
            builder = match match_type(field) {
                MatchType::Exact => builder.exact(field_name, parse(text, &label)?)?,
                MatchType::Optional => builder.optional(field_name, parse(text, &label)?)?,
                MatchType::Lpm => {
                    let (value, len) = text.split_once('/').unwrap_or((text, ""));
                    let len = if len.is_empty() {
                        field.bitwidth as u32
                    } else {
                        len.parse().map_err(|_| {
                            BuildError::Invalid(format!("{label}: bad prefix length in `{text}`"))
                        })?
                    };
                    builder.lpm(field_name, parse(value, &label)?, len)?
                }
                MatchType::Ternary => {
                    let (value, mask) = text.split_once("&&&").ok_or_else(|| {
                        BuildError::Invalid(format!(
                            "{label}: ternary wants value&&&mask, got `{text}`"
                        ))
                    })?;
                    builder.ternary(field_name, parse(value, &label)?, parse(mask, &label)?)?
                }
                MatchType::Range => {
                    let (low, high) = text.split_once("..").ok_or_else(|| {
                        BuildError::Invalid(format!("{label}: range wants low..high, got `{text}`"))
                    })?;
                    builder.range(field_name, parse(low, &label)?, parse(high, &label)?)?
                }
                MatchType::Unspecified => {
                    return Err(BuildError::Invalid(format!(
                        "{label}: unsupported match kind"
                    )))
                }
            };
        }
        if let Some(priority) = self.priority {
            builder = builder.priority(priority);
        }
        builder = match (&self.action, self.group, self.member) {
            (Some(action), None, None) => {
                let params = self
                    .params
                    .iter()
                    .map(|(name, text)| {
                        Ok((
                            name.as_str(),
                            parse(text, &format!("action {action}, param {name}"))?,
                        ))
                    })
                    .collect::<Result<Vec<_>, BuildError>>()?;
                builder.action(action, &params)?
            }
            (None, Some(group), None) => builder.group(group),
            (None, None, Some(member)) => builder.member(member),
            _ => {
                return Err(BuildError::Invalid(format!(
                    "table {}: give exactly one of action, group or member",
                    self.table
                )))
            }
        };
        let mut entry = builder.build()?;
        if let Some(meter) = self.meter {
            if !info.has_direct_meter(entry.table_id) {
                return Err(BuildError::Invalid(format!(
                    "table {}: a meter is given but the table has no direct meter",
                    self.table
                )));
            }
            if meter.cir < 0 || meter.pir < meter.cir || meter.cburst < 0 || meter.pburst < 0 {
                return Err(BuildError::Invalid(format!(
                    "table {}: meter wants 0 <= cir <= pir and bursts >= 0, got {meter:?}",
                    self.table
                )));
            }
            entry.meter_config = Some(meter.to_config());
        }
        Ok(entry)
    }

    /// Describe an entry read from a switch with P4Info names.
    pub fn from_entry(info: &P4Info, entry: &p4::TableEntry) -> Result<EntrySpec, BuildError> {
        use p4::field_match::FieldMatchType as M;
        let table = info.table_by_id(entry.table_id)?;
        let mut matches = BTreeMap::new();
        for m in &entry.r#match {
            let field = table
                .match_fields
                .iter()
                .find(|f| f.id == m.field_id)
                .ok_or_else(|| {
                    BuildError::Invalid(format!("unknown match field id {}", m.field_id))
                })?;
            let show = |bytes: &[u8]| show_value(bytes, field.bitwidth as u32);
            let text = match &m.field_match_type {
                Some(M::Exact(e)) => show(&e.value),
                Some(M::Optional(o)) => show(&o.value),
                Some(M::Lpm(l)) => format!("{}/{}", show(&l.value), l.prefix_len),
                Some(M::Ternary(t)) => format!("{}&&&{}", show(&t.value), show(&t.mask)),
                Some(M::Range(r)) => format!("{}..{}", show(&r.low), show(&r.high)),
                _ => "?".into(),
            };
            matches.insert(field.name.clone(), text);
        }
        let mut spec = EntrySpec {
            table: name_of(&table.preamble).to_string(),
            matches,
            action: None,
            params: BTreeMap::new(),
            priority: (entry.priority != 0).then_some(entry.priority),
            group: None,
            member: None,
            meter: entry.meter_config.as_ref().map(MeterRates::from_config),
        };
        match entry.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            Some(p4::table_action::Type::Action(call)) => {
                let action = info.action_by_id(call.action_id)?;
                spec.action = Some(name_of(&action.preamble).to_string());
                for param in &call.params {
                    let def = action.params.iter().find(|p| p.id == param.param_id);
                    let (name, width) = def.map_or((format!("#{}", param.param_id), 128), |d| {
                        (d.name.clone(), d.bitwidth as u32)
                    });
                    spec.params.insert(name, show_value(&param.value, width));
                }
            }
            Some(p4::table_action::Type::ActionProfileGroupId(g)) => spec.group = Some(*g),
            Some(p4::table_action::Type::ActionProfileMemberId(m)) => spec.member = Some(*m),
            _ => {}
        }
        Ok(spec)
    }
}

/// 32-bit values print as IPv4, 48-bit as MAC, others in decimal (hex when wide).
fn show_value(bytes: &[u8], bitwidth: u32) -> String {
    let Some(v) = decode_u128(bytes) else {
        return format!("0x{}", hex(bytes));
    };
    match bitwidth {
        32 => std::net::Ipv4Addr::from(v as u32).to_string(),
        48 => {
            let b = (v as u64).to_be_bytes();
            format!(
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                b[2], b[3], b[4], b[5], b[6], b[7]
            )
        }
        w if w > 64 => format!("0x{v:x}"),
        _ => v.to_string(),
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
actions {
  preamble { id: 10 name: "Ing.forward" alias: "forward" }
  params { id: 1 name: "port" bitwidth: 9 }
  params { id: 2 name: "dst_mac" bitwidth: 48 }
}
"#;

    #[test]
    fn yaml_spec_round_trips_through_p4runtime() {
        let info = P4Info::from_text(TEXT).unwrap();
        let yaml = "table: ipv4_lpm\nmatch: {dst_addr: 10.0.1.0/24}\naction: forward\nparams: {port: '3', dst_mac: '00:00:0a:00:01:02'}\n";
        let spec: EntrySpec = serde_yaml::from_str(yaml).unwrap();
        let entry = spec.to_entry(&info).unwrap();
        let back = EntrySpec::from_entry(&info, &entry).unwrap();
        assert_eq!(back.table, "Ing.ipv4_lpm");
        assert_eq!(back.matches["dst_addr"], "10.0.1.0/24");
        assert_eq!(back.action.as_deref(), Some("Ing.forward"));
        assert_eq!(back.params["port"], "3");
        assert_eq!(back.params["dst_mac"], "00:00:0a:00:01:02");
        assert_eq!(back.to_entry(&info).unwrap(), entry);
    }

    #[test]
    fn errors_name_the_field() {
        let info = P4Info::from_text(TEXT).unwrap();
        let spec: EntrySpec = serde_yaml::from_str(
            "table: ipv4_lpm\nmatch: {dst_addr: 10.0.1.0/x}\naction: forward\nparams: {port: '1', dst_mac: '0'}\n",
        )
        .unwrap();
        let err = spec.to_entry(&info).unwrap_err().to_string();
        assert!(
            err.contains("match dst_addr") && err.contains("prefix length"),
            "{err}"
        );
        let bad: Result<EntrySpec, _> = serde_yaml::from_str("table: t\nacton: x\n");
        assert!(bad.unwrap_err().to_string().contains("acton"));
    }
}
