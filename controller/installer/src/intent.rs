//! A switch's intended state: P4Runtime objects by name, resolved against a
//! P4Info into entities keyed for comparison with what a switch reports.

use std::collections::BTreeMap;
use std::sync::Arc;

use p4rt::entity::{self, BuildError};
use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, SharedEntity, Value};

use crate::device::{Devices, NotAPort};
use crate::object::Object;

/// Intended objects of one switch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Intent {
    pub objects: Vec<Object>,
}

#[derive(Debug, thiserror::Error)]
#[error("intended state of {switch}: {source}")]
pub struct IntentError {
    pub switch: String,
    #[source]
    pub source: ResolveError,
}

/// Why an object could not become an entity.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Port(#[from] NotAPort),
}

/// Identity of an entity on a switch. The order is the order of inserts
/// (members before the groups that use them, both before table entries);
/// deletes go in reverse.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    CloneSession {
        id: u32,
    },
    Member {
        profile_id: u32,
        id: u32,
    },
    Group {
        profile_id: u32,
        id: u32,
    },
    /// Encoded (table id, match fields sorted by id, priority); shared,
    /// so copying a state copies no key bytes.
    Table(Arc<[u8]>),
}

/// Intent resolved to P4Runtime entities.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// Keyed entities, in normal form (see [`normal_form`]). Shared: the
    /// intended states the controller derives one after another hold the
    /// same entities, so copying a state copies pointers, and comparing
    /// two states skips what they share.
    pub entities: BTreeMap<Key, Arc<SharedEntity>>,
    /// Default entries, always re-written (MODIFY is idempotent).
    pub defaults: Vec<p4::TableEntry>,
}

impl Intent {
    pub fn push(&mut self, object: Object) {
        self.objects.push(object);
    }

    /// Resolve names and values for `switch` as `devices` describe it (the
    /// one place where objects meet the target); the first bad object fails
    /// the whole intent.
    pub fn resolve(
        &self,
        switch: &str,
        info: &P4Info,
        devices: &Devices,
    ) -> Result<Resolved, IntentError> {
        let err = |source: BuildError| IntentError {
            switch: switch.to_string(),
            source: source.into(),
        };
        let mut out = Resolved::default();
        for object in &self.objects {
            let object = devices.adapt(switch, object).map_err(|e| IntentError {
                switch: switch.to_string(),
                source: e.into(),
            })?;
            let entity: p4::Entity = match &object {
                Object::Entry(spec) => spec.to_entry(info).map_err(err)?.into(),
                Object::Default(spec) => {
                    let mut entry = spec.to_entry(info).map_err(err)?;
                    entry.is_default_action = true;
                    out.defaults.push(entry);
                    continue;
                }
                Object::Member {
                    profile,
                    id,
                    action,
                    params,
                } => {
                    let params: Vec<(&str, Value)> = params
                        .iter()
                        .map(|(n, v)| (n.as_str(), v.clone()))
                        .collect();
                    entity::action_profile_member(info, profile, *id, action, &params)
                        .map_err(err)?
                        .into()
                }
                Object::Group {
                    profile,
                    id,
                    members,
                } => {
                    let weighted: Vec<(u32, i32)> = members.iter().map(|m| (*m, 1)).collect();
                    entity::action_profile_group(info, profile, *id, &weighted)
                        .map_err(err)?
                        .into()
                }
                Object::CloneSession { id, ports } => {
                    let replicas: Vec<(u32, u32)> = ports.iter().map(|p| (*p, 0)).collect();
                    let truncate = devices.target().clone_packet_length(*id);
                    entity::clone_session(*id, &replicas, truncate)
                }
            };
            let entity = normal_form(entity);
            let key = key_of(&entity).expect("intent objects are keyed kinds");
            out.entities.insert(key, Arc::new(entity.into()));
        }
        Ok(out)
    }
}

/// The key of an entity, for the kinds reconciliation manages.
pub fn key_of(entity: &p4::Entity) -> Option<Key> {
    use p4::entity::Entity as E;
    match entity.entity.as_ref()? {
        E::ActionProfileMember(m) => Some(Key::Member {
            profile_id: m.action_profile_id,
            id: m.member_id,
        }),
        E::ActionProfileGroup(g) => Some(Key::Group {
            profile_id: g.action_profile_id,
            id: g.group_id,
        }),
        E::PacketReplicationEngineEntry(pre) => match pre.r#type.as_ref()? {
            p4::packet_replication_engine_entry::Type::CloneSessionEntry(c) => {
                Some(Key::CloneSession { id: c.session_id })
            }
            _ => None,
        },
        E::TableEntry(t) => Some(Key::Table(table_key(t).into())),
        _ => None,
    }
}

/// The encoding of a `TableEntry` holding only `t`'s table id, match
/// fields and priority, written from `t` itself: a key costs no copy of
/// the match fields (every reserved flow's entries are keyed).
fn table_key(t: &p4::TableEntry) -> Vec<u8> {
    use prost::encoding::{int32, message, uint32};
    // Field numbers of p4.v1.TableEntry; proto3 leaves zero scalars out.
    const TABLE_ID: u32 = 1;
    const MATCH: u32 = 2;
    const PRIORITY: u32 = 4;
    let len = if t.table_id != 0 {
        uint32::encoded_len(TABLE_ID, &t.table_id)
    } else {
        0
    } + message::encoded_len_repeated(MATCH, &t.r#match)
        + if t.priority != 0 {
            int32::encoded_len(PRIORITY, &t.priority)
        } else {
            0
        };
    let mut out = Vec::with_capacity(len);
    if t.table_id != 0 {
        uint32::encode(TABLE_ID, &t.table_id, &mut out);
    }
    message::encode_repeated(MATCH, &t.r#match, &mut out);
    if t.priority != 0 {
        int32::encode(PRIORITY, &t.priority, &mut out);
    }
    out
}

/// Only the fields that define an entity, in a canonical order: what the
/// switch echoes back may carry extra fields (counter data, timeouts) or
/// list group members in another order.
pub fn normal_form(entity: p4::Entity) -> p4::Entity {
    use p4::entity::Entity as E;
    let inner = match entity.entity {
        Some(E::TableEntry(t)) => {
            let mut r#match = t.r#match;
            r#match.sort_by_key(|m| m.field_id);
            E::TableEntry(p4::TableEntry {
                table_id: t.table_id,
                r#match,
                action: t.action.map(normal_table_action),
                priority: t.priority,
                meter_config: t.meter_config,
                ..Default::default()
            })
        }
        Some(E::ActionProfileMember(m)) => E::ActionProfileMember(p4::ActionProfileMember {
            action: m.action.map(normal_action),
            ..m
        }),
        Some(E::ActionProfileGroup(g)) => {
            let mut members: Vec<p4::action_profile_group::Member> = g
                .members
                .into_iter()
                .map(|m| p4::action_profile_group::Member {
                    member_id: m.member_id,
                    weight: m.weight.max(1),
                    watch_kind: None,
                })
                .collect();
            members.sort_by_key(|m| m.member_id);
            E::ActionProfileGroup(p4::ActionProfileGroup {
                action_profile_id: g.action_profile_id,
                group_id: g.group_id,
                members,
                max_size: 0,
            })
        }
        Some(E::PacketReplicationEngineEntry(pre)) => {
            use p4::packet_replication_engine_entry::Type;
            match pre.r#type {
                Some(Type::CloneSessionEntry(c)) => {
                    let mut replicas: Vec<p4::Replica> =
                        c.replicas.into_iter().map(normal_replica).collect();
                    replicas.sort_by_key(|r| (replica_port(r), r.instance));
                    E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                        r#type: Some(Type::CloneSessionEntry(p4::CloneSessionEntry {
                            session_id: c.session_id,
                            replicas,
                            class_of_service: c.class_of_service,
                            packet_length_bytes: c.packet_length_bytes,
                        })),
                    })
                }
                other => E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                    r#type: other,
                }),
            }
        }
        Some(other) => other,
        None => return entity,
    };
    p4::Entity {
        entity: Some(inner),
    }
}

/// A replica with its port as the integer `egress_port` (PI, BMv2's
/// P4Runtime server, predates the `port` bytes of P4Runtime 1.4).
#[allow(deprecated)]
fn normal_replica(r: p4::Replica) -> p4::Replica {
    let port = replica_port(&r);
    p4::Replica {
        instance: r.instance,
        port_kind: Some(p4::replica::PortKind::EgressPort(port)),
    }
}

#[allow(deprecated)]
fn replica_port(r: &p4::Replica) -> u32 {
    match &r.port_kind {
        Some(p4::replica::PortKind::EgressPort(p)) => *p,
        Some(p4::replica::PortKind::Port(bytes)) => {
            bytes.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b))
        }
        None => 0,
    }
}

/// An action with its parameters in id order (switches echo them sorted).
fn normal_action(mut a: p4::Action) -> p4::Action {
    a.params.sort_by_key(|p| p.param_id);
    a
}

fn normal_table_action(t: p4::TableAction) -> p4::TableAction {
    match t.r#type {
        Some(p4::table_action::Type::Action(a)) => p4::TableAction {
            r#type: Some(p4::table_action::Type::Action(normal_action(a))),
        },
        other => p4::TableAction { r#type: other },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn entry(params: &[(u32, u8)]) -> p4::Entity {
        p4::TableEntry {
            table_id: 1,
            r#match: vec![],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: 7,
                    params: params
                        .iter()
                        .map(|(id, v)| p4::action::Param {
                            param_id: *id,
                            value: vec![*v],
                        })
                        .collect(),
                })),
            }),
            ..Default::default()
        }
        .into()
    }

    #[test]
    fn normal_form_orders_action_params_as_switches_echo_them() {
        // Built in name order, echoed in id order: the same entry.
        assert_eq!(
            normal_form(entry(&[(3, 1), (1, 2), (2, 3)])),
            normal_form(entry(&[(1, 2), (2, 3), (3, 1)]))
        );
        assert_ne!(
            normal_form(entry(&[(1, 2), (2, 3)])),
            normal_form(entry(&[(1, 3), (2, 2)]))
        );
    }

    /// The key is the generated encoding of the entry cut down to its
    /// table id, match and priority (zero fields left out as proto3 does).
    #[test]
    fn a_table_key_is_the_encoding_of_id_match_and_priority() {
        let field = |id: u32, v: &[u8]| p4::FieldMatch {
            field_id: id,
            field_match_type: Some(p4::field_match::FieldMatchType::Ternary(
                p4::field_match::Ternary {
                    value: v.to_vec(),
                    mask: vec![0xff; v.len()],
                },
            )),
        };
        for (table_id, priority, fields) in [
            (0, 0, vec![]),
            (33_554_433, 0, vec![field(1, &[10, 0, 1, 1])]),
            (7, 10, vec![field(2, &[1]), field(1, &[10, 0, 2, 1])]),
            (7, -3, vec![field(300, &[0; 40])]),
        ] {
            let mut full = match entry(&[(1, 2)]).entity {
                Some(p4::entity::Entity::TableEntry(t)) => t,
                _ => unreachable!(),
            };
            full.table_id = table_id;
            full.priority = priority;
            full.r#match = fields;
            full.counter_data = Some(p4::CounterData {
                byte_count: 5,
                packet_count: 1,
            });
            let cut = p4::TableEntry {
                table_id,
                r#match: full.r#match.clone(),
                priority,
                ..Default::default()
            };
            assert_eq!(table_key(&full), cut.encode_to_vec());
        }
    }

    #[test]
    fn normal_form_keeps_group_actions() {
        let e: p4::Entity = p4::TableEntry {
            table_id: 1,
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::ActionProfileGroupId(4)),
            }),
            ..Default::default()
        }
        .into();
        assert_eq!(normal_form(e.clone()), e);
    }
}
