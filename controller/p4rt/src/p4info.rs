//! The P4Info that p4c writes, indexed for lookups by name and by id.
//!
//! Names resolve by fully qualified name (`FwdIngress.ipv4_lpm`) or by the
//! alias p4c chose (`ipv4_lpm`); an unknown name is an error that suggests
//! the closest known ones.

use std::collections::HashMap;
use std::path::Path;

use prost::Message;

use crate::error::{Error, P4InfoError};
use crate::proto::p4::config::v1 as cfg;

/// Descriptor set of the P4Runtime protos, for text-format parsing.
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/p4runtime_descriptors.bin"));

/// Name → position lookups for one kind of P4 object.
#[derive(Debug, Default, Clone)]
struct Index {
    by_name: HashMap<String, usize>,
    by_id: HashMap<u32, usize>,
    names: Vec<String>,
}

impl Index {
    fn build<'a>(preambles: impl Iterator<Item = Option<&'a cfg::Preamble>>) -> Self {
        let mut index = Index::default();
        for (position, preamble) in preambles.enumerate() {
            let Some(preamble) = preamble else { continue };
            index.by_id.insert(preamble.id, position);
            index.by_name.insert(preamble.name.clone(), position);
            if !preamble.alias.is_empty() {
                index
                    .by_name
                    .entry(preamble.alias.clone())
                    .or_insert(position);
            }
            index.names.push(preamble.name.clone());
        }
        index
    }

    fn find(&self, kind: &'static str, name: &str) -> Result<usize, P4InfoError> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| P4InfoError::Unknown {
                kind,
                name: name.into(),
                suggestions: closest(name, self.by_name.keys()),
            })
    }

    fn find_id(&self, kind: &'static str, id: u32) -> Result<usize, P4InfoError> {
        self.by_id
            .get(&id)
            .copied()
            .ok_or(P4InfoError::UnknownId { kind, id })
    }
}

/// Up to three known names that look like `wanted`.
pub(crate) fn closest<'a>(wanted: &str, known: impl Iterator<Item = &'a String>) -> Vec<String> {
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(f64, &String)> = known
        .map(|name| {
            let lower = name.to_lowercase();
            let mut score = strsim::normalized_levenshtein(&wanted_lower, &lower);
            if lower.ends_with(&wanted_lower) || wanted_lower.ends_with(&lower) {
                score = score.max(0.8);
            }
            (score, name)
        })
        .filter(|(score, _)| *score >= 0.5)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut out: Vec<String> = scored.into_iter().map(|(_, name)| name.clone()).collect();
    out.dedup();
    out.truncate(3);
    out
}

/// A P4Info with indexes for every kind of object the controller touches.
#[derive(Debug, Clone)]
pub struct P4Info {
    raw: cfg::P4Info,
    tables: Index,
    actions: Index,
    action_profiles: Index,
    counters: Index,
    direct_counters: Index,
    meters: Index,
    registers: Index,
    digests: Index,
    packet_metadata: Index,
}

macro_rules! lookups {
    ($($by_name:ident, $by_id:ident, $index:ident, $raw:ident, $kind:literal, $ty:ty;)*) => {$(
        #[doc = concat!("The ", $kind, " called `name` (full name or alias).")]
        pub fn $by_name(&self, name: &str) -> Result<&$ty, P4InfoError> {
            Ok(&self.raw.$raw[self.$index.find($kind, name)?])
        }
        #[doc = concat!("The ", $kind, " with P4Info id `id`.")]
        pub fn $by_id(&self, id: u32) -> Result<&$ty, P4InfoError> {
            Ok(&self.raw.$raw[self.$index.find_id($kind, id)?])
        }
    )*};
}

impl P4Info {
    /// Index a decoded P4Info.
    pub fn new(raw: cfg::P4Info) -> Self {
        P4Info {
            tables: Index::build(raw.tables.iter().map(|x| x.preamble.as_ref())),
            actions: Index::build(raw.actions.iter().map(|x| x.preamble.as_ref())),
            action_profiles: Index::build(raw.action_profiles.iter().map(|x| x.preamble.as_ref())),
            counters: Index::build(raw.counters.iter().map(|x| x.preamble.as_ref())),
            direct_counters: Index::build(raw.direct_counters.iter().map(|x| x.preamble.as_ref())),
            meters: Index::build(raw.meters.iter().map(|x| x.preamble.as_ref())),
            registers: Index::build(raw.registers.iter().map(|x| x.preamble.as_ref())),
            digests: Index::build(raw.digests.iter().map(|x| x.preamble.as_ref())),
            packet_metadata: Index::build(
                raw.controller_packet_metadata
                    .iter()
                    .map(|x| x.preamble.as_ref()),
            ),
            raw,
        }
    }

    /// Parse the binary encoding (`*.p4info.binpb`).
    pub fn from_binary(bytes: &[u8]) -> Result<Self, P4InfoError> {
        cfg::P4Info::decode(bytes)
            .map(Self::new)
            .map_err(|e| P4InfoError::Parse {
                source_name: "binary P4Info".into(),
                reason: e.to_string(),
            })
    }

    /// Parse the protobuf text format (`*.p4info.txtpb`).
    pub fn from_text(text: &str) -> Result<Self, P4InfoError> {
        let parse_err = |reason: String| P4InfoError::Parse {
            source_name: "text P4Info".into(),
            reason,
        };
        let pool = prost_reflect::DescriptorPool::decode(DESCRIPTORS)
            .map_err(|e| parse_err(format!("descriptor pool: {e}")))?;
        let descriptor = pool
            .get_message_by_name("p4.config.v1.P4Info")
            .ok_or_else(|| parse_err("p4.config.v1.P4Info missing from descriptors".into()))?;
        let message = prost_reflect::DynamicMessage::parse_text_format(descriptor, text)
            .map_err(|e| parse_err(e.to_string()))?;
        Self::from_binary(&message.encode_to_vec())
    }

    /// Load from a file: text format if the name ends in `.txt`/`.txtpb`,
    /// binary otherwise.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| Error::File {
            path: path.display().to_string(),
            source,
        })?;
        let name = path.display().to_string();
        let with_name = |e: P4InfoError| match e {
            P4InfoError::Parse { reason, .. } => P4InfoError::Parse {
                source_name: name.clone(),
                reason,
            },
            other => other,
        };
        let parsed = if name.ends_with(".txt") || name.ends_with(".txtpb") {
            let text = String::from_utf8(bytes).map_err(|e| P4InfoError::Parse {
                source_name: name.clone(),
                reason: e.to_string(),
            })?;
            Self::from_text(&text)
        } else {
            Self::from_binary(&bytes)
        };
        Ok(parsed.map_err(with_name)?)
    }

    /// The decoded message, as sent in SetForwardingPipelineConfig.
    pub fn raw(&self) -> &cfg::P4Info {
        &self.raw
    }

    /// Whether table `table_id` has a direct meter (its entries may carry a
    /// meter configuration, and a read returns it only when asked).
    pub fn has_direct_meter(&self, table_id: u32) -> bool {
        self.raw
            .direct_meters
            .iter()
            .any(|m| m.direct_table_id == table_id)
    }

    lookups! {
        table, table_by_id, tables, tables, "table", cfg::Table;
        action, action_by_id, actions, actions, "action", cfg::Action;
        action_profile, action_profile_by_id, action_profiles, action_profiles, "action profile", cfg::ActionProfile;
        counter, counter_by_id, counters, counters, "counter", cfg::Counter;
        direct_counter, direct_counter_by_id, direct_counters, direct_counters, "direct counter", cfg::DirectCounter;
        meter, meter_by_id, meters, meters, "meter", cfg::Meter;
        register, register_by_id, registers, registers, "register", cfg::Register;
        digest, digest_by_id, digests, digests, "digest", cfg::Digest;
        packet_metadata, packet_metadata_by_id, packet_metadata, controller_packet_metadata, "controller packet metadata", cfg::ControllerPacketMetadata;
    }

    /// A match field of `table` by name.
    pub fn match_field<'a>(
        &self,
        table: &'a cfg::Table,
        name: &str,
    ) -> Result<&'a cfg::MatchField, P4InfoError> {
        table
            .match_fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| {
                let known: Vec<String> =
                    table.match_fields.iter().map(|f| f.name.clone()).collect();
                P4InfoError::Unknown {
                    kind: "match field",
                    name: format!("{name} (table {})", name_of(&table.preamble)),
                    suggestions: closest(name, known.iter()),
                }
            })
    }

    /// A parameter of `action` by name.
    pub fn action_param<'a>(
        &self,
        action: &'a cfg::Action,
        name: &str,
    ) -> Result<&'a cfg::action::Param, P4InfoError> {
        action
            .params
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| {
                let known: Vec<String> = action.params.iter().map(|p| p.name.clone()).collect();
                P4InfoError::Unknown {
                    kind: "action parameter",
                    name: format!("{name} (action {})", name_of(&action.preamble)),
                    suggestions: closest(name, known.iter()),
                }
            })
    }

    /// Table names, for listings.
    pub fn table_names(&self) -> &[String] {
        &self.tables.names
    }
}

/// The match kind of a field (`Unspecified` for architecture-specific kinds).
pub fn match_type(field: &cfg::MatchField) -> cfg::match_field::MatchType {
    match field.r#match {
        Some(cfg::match_field::Match::MatchType(kind)) => {
            cfg::match_field::MatchType::try_from(kind).unwrap_or_default()
        }
        _ => cfg::match_field::MatchType::Unspecified,
    }
}

/// The name in a preamble, or `?` for a P4Info without one.
pub fn name_of(preamble: &Option<cfg::Preamble>) -> &str {
    preamble.as_ref().map(|p| p.name.as_str()).unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
pkg_info { arch: "v1model" }
tables {
  preamble { id: 37375156 name: "FwdIngress.ipv4_lpm" alias: "ipv4_lpm" }
  match_fields { id: 1 name: "dst_addr" bitwidth: 32 match_type: LPM }
  action_refs { id: 25652968 }
  size: 1024
}
actions {
  preamble { id: 25652968 name: "FwdIngress.forward" alias: "forward" }
  params { id: 1 name: "port" bitwidth: 9 }
  params { id: 2 name: "src_mac" bitwidth: 48 }
}
"#;

    #[test]
    fn text_format_parses_and_resolves_by_name_and_alias() {
        let info = P4Info::from_text(TEXT).unwrap();
        let table = info.table("ipv4_lpm").unwrap();
        assert_eq!(table.preamble.as_ref().unwrap().id, 37375156);
        assert_eq!(info.table("FwdIngress.ipv4_lpm").unwrap().size, 1024);
        assert_eq!(info.match_field(table, "dst_addr").unwrap().bitwidth, 32);
        let action = info.action_by_id(25652968).unwrap();
        assert_eq!(info.action_param(action, "port").unwrap().bitwidth, 9);
    }

    #[test]
    fn binary_round_trip() {
        let info = P4Info::from_text(TEXT).unwrap();
        let again = P4Info::from_binary(&info.raw().encode_to_vec()).unwrap();
        assert_eq!(again.table_names(), info.table_names());
    }

    #[test]
    fn unknown_names_suggest_close_ones() {
        let info = P4Info::from_text(TEXT).unwrap();
        let err = info.table("ipv4_lmp").unwrap_err().to_string();
        assert!(err.contains("unknown table `ipv4_lmp`"), "{err}");
        assert!(err.contains("did you mean ipv4_lpm"), "{err}");
        let action = info.action("forward").unwrap();
        let err = info.action_param(action, "prot").unwrap_err().to_string();
        assert!(err.contains("did you mean port"), "{err}");
        assert!(info
            .counter("nothing_like_it")
            .unwrap_err()
            .to_string()
            .ends_with('`'));
    }

    #[test]
    fn malformed_text_is_an_error() {
        let err = P4Info::from_text("tables { preamble { id: \"x\" } }").unwrap_err();
        assert!(matches!(err, P4InfoError::Parse { .. }), "{err}");
    }
}
