//! A Write request whose updates point at entities held elsewhere.
//!
//! The controller keeps every entity it derives behind an `Arc` (the
//! intended states share them). P4Runtime's generated `WriteRequest` owns
//! its updates, so sending one meant a deep copy of every entity, and
//! another to keep the batch for naming what failed: a third of the
//! controller's work in a large commit. [`SharedWriteRequest`] encodes the
//! same bytes on the wire straight from the shared entities, and each
//! [`SharedEntity`] is encoded once, the first time it is sent.
//!
//! Encode only: decoding one skips every field (nothing decodes a request
//! the controller sends).

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use prost::bytes::{Buf, BufMut};
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};

use crate::proto::p4::v1 as p4;

// Field numbers of p4.v1.WriteRequest and p4.v1.Update (P4Runtime 1.x);
// `the_same_bytes_as_the_generated_request` holds them to the generated
// types.
const REQUEST_DEVICE_ID: u32 = 1;
const REQUEST_ELECTION_ID: u32 = 3;
const REQUEST_UPDATES: u32 = 4;
const REQUEST_ATOMICITY: u32 = 5;
const REQUEST_ROLE: u32 = 6;
const UPDATE_TYPE: u32 = 1;
const UPDATE_ENTITY: u32 = 2;

/// An entity the intended states share, with its wire encoding kept once
/// made. A reserved flow's entry goes out at least twice (insert, then
/// delete), a static one to every switch holding it; prost writes a nested
/// message into the request's buffer field by field and recomputes every
/// level's length, which was a fifth of the controller's work in a large
/// commit, so the bytes are made on the first send and copied after.
#[derive(Default)]
pub struct SharedEntity {
    entity: p4::Entity,
    wire: OnceLock<Box<[u8]>>,
}

impl SharedEntity {
    pub fn new(entity: p4::Entity) -> SharedEntity {
        SharedEntity {
            entity,
            wire: OnceLock::new(),
        }
    }

    /// The entity's protobuf encoding (made on the first call).
    pub fn wire(&self) -> &[u8] {
        self.wire
            .get_or_init(|| self.entity.encode_to_vec().into_boxed_slice())
    }

    pub fn into_entity(self) -> p4::Entity {
        self.entity
    }
}

impl From<p4::Entity> for SharedEntity {
    fn from(entity: p4::Entity) -> SharedEntity {
        SharedEntity::new(entity)
    }
}

impl Deref for SharedEntity {
    type Target = p4::Entity;

    fn deref(&self) -> &p4::Entity {
        &self.entity
    }
}

/// Equal entities are equal whether or not either was encoded yet.
impl PartialEq for SharedEntity {
    fn eq(&self, other: &SharedEntity) -> bool {
        self.entity == other.entity
    }
}

impl Clone for SharedEntity {
    fn clone(&self) -> SharedEntity {
        SharedEntity::new(self.entity.clone())
    }
}

impl std::fmt::Debug for SharedEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.entity.fmt(f)
    }
}

/// One update: insert, modify or delete of a shared entity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedUpdate {
    kind: i32,
    entity: Option<Arc<SharedEntity>>,
}

impl SharedUpdate {
    pub fn new(kind: p4::update::Type, entity: Arc<SharedEntity>) -> SharedUpdate {
        SharedUpdate {
            kind: kind as i32,
            entity: Some(entity),
        }
    }

    /// The entity, if the update has one.
    pub fn entity(&self) -> Option<&p4::Entity> {
        self.entity.as_deref().map(Deref::deref)
    }
}

impl From<p4::Update> for SharedUpdate {
    fn from(u: p4::Update) -> SharedUpdate {
        SharedUpdate {
            kind: u.r#type,
            entity: u.entity.map(|e| Arc::new(e.into())),
        }
    }
}

impl Message for SharedUpdate {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if self.kind != 0 {
            encoding::int32::encode(UPDATE_TYPE, &self.kind, buf);
        }
        if let Some(e) = &self.entity {
            let wire = e.wire();
            encoding::encode_key(UPDATE_ENTITY, WireType::LengthDelimited, buf);
            encoding::encode_varint(wire.len() as u64, buf);
            buf.put_slice(wire);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let kind = if self.kind != 0 {
            encoding::int32::encoded_len(UPDATE_TYPE, &self.kind)
        } else {
            0
        };
        kind + self.entity.as_ref().map_or(0, |e| {
            let len = e.wire().len();
            encoding::key_len(UPDATE_ENTITY) + encoding::encoded_len_varint(len as u64) + len
        })
    }

    fn clear(&mut self) {
        *self = SharedUpdate::default();
    }
}

/// P4Runtime's WriteRequest with shared updates (`role_id`, deprecated,
/// is never sent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SharedWriteRequest {
    pub device_id: u64,
    pub election_id: Option<p4::Uint128>,
    pub updates: Vec<SharedUpdate>,
    pub atomicity: i32,
    pub role: String,
}

impl Message for SharedWriteRequest {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if self.device_id != 0 {
            encoding::uint64::encode(REQUEST_DEVICE_ID, &self.device_id, buf);
        }
        if let Some(id) = &self.election_id {
            encoding::message::encode(REQUEST_ELECTION_ID, id, buf);
        }
        for u in &self.updates {
            encoding::message::encode(REQUEST_UPDATES, u, buf);
        }
        if self.atomicity != 0 {
            encoding::int32::encode(REQUEST_ATOMICITY, &self.atomicity, buf);
        }
        if !self.role.is_empty() {
            encoding::string::encode(REQUEST_ROLE, &self.role, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let mut len = 0;
        if self.device_id != 0 {
            len += encoding::uint64::encoded_len(REQUEST_DEVICE_ID, &self.device_id);
        }
        if let Some(id) = &self.election_id {
            len += encoding::message::encoded_len(REQUEST_ELECTION_ID, id);
        }
        len += encoding::message::encoded_len_repeated(REQUEST_UPDATES, &self.updates);
        if self.atomicity != 0 {
            len += encoding::int32::encoded_len(REQUEST_ATOMICITY, &self.atomicity);
        }
        if !self.role.is_empty() {
            len += encoding::string::encoded_len(REQUEST_ROLE, &self.role);
        }
        len
    }

    fn clear(&mut self) {
        *self = SharedWriteRequest::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(table_id: u32, value: u8) -> p4::Entity {
        p4::TableEntry {
            table_id,
            r#match: vec![p4::FieldMatch {
                field_id: 1,
                field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                    p4::field_match::Exact {
                        value: vec![value; 4],
                    },
                )),
            }],
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: 7,
                    params: vec![p4::action::Param {
                        param_id: 1,
                        value: vec![value],
                    }],
                })),
            }),
            priority: i32::from(value),
            ..Default::default()
        }
        .into()
    }

    /// What goes on the wire is the generated request's encoding, field
    /// for field, and decodes as one.
    #[test]
    fn the_same_bytes_as_the_generated_request() {
        use p4::update::Type;
        let updates = [
            (Type::Insert, entry(1, 3)),
            (Type::Modify, entry(2, 200)),
            (Type::Delete, entry(3, 0)),
        ];
        for (device_id, role, atomicity, election) in [
            (0, "", 0, None),
            (7, "sdn", 1, Some(p4::Uint128 { high: 1, low: 9 })),
        ] {
            let generated = p4::WriteRequest {
                device_id,
                election_id: election,
                updates: updates
                    .iter()
                    .map(|(k, e)| p4::Update {
                        r#type: *k as i32,
                        entity: Some(e.clone()),
                    })
                    .collect(),
                atomicity,
                role: role.into(),
                ..Default::default()
            };
            let shared = SharedWriteRequest {
                device_id,
                election_id: election,
                updates: updates
                    .iter()
                    .map(|(k, e)| SharedUpdate::new(*k, Arc::new(e.clone().into())))
                    .collect(),
                atomicity,
                role: role.into(),
            };
            let bytes = shared.encode_to_vec();
            assert_eq!(bytes, generated.encode_to_vec());
            assert_eq!(shared.encoded_len(), bytes.len());
            assert_eq!(
                p4::WriteRequest::decode(bytes.as_slice()).unwrap(),
                generated
            );
        }
        // An entity sent again is the same bytes, from its kept encoding.
        let shared = Arc::new(SharedEntity::new(entry(5, 9)));
        let insert = SharedUpdate::new(Type::Insert, shared.clone());
        let delete = SharedUpdate::new(Type::Delete, shared.clone());
        assert_eq!(shared.wire(), entry(5, 9).encode_to_vec().as_slice());
        for (u, kind) in [(insert, Type::Insert), (delete, Type::Delete)] {
            let generated = p4::Update {
                r#type: kind as i32,
                entity: Some(entry(5, 9)),
            };
            assert_eq!(u.encode_to_vec(), generated.encode_to_vec());
            assert_eq!(u.encoded_len(), generated.encoded_len());
        }
        // Equality is the entity's, encoded or not.
        let fresh = SharedEntity::new(entry(5, 9));
        assert_eq!(*shared, fresh);
        assert_eq!((*shared).clone(), fresh);
        assert_ne!(*shared, SharedEntity::new(entry(5, 8)));
        // An update converted from the generated one is the same update.
        let u = p4::Update {
            r#type: Type::Insert as i32,
            entity: Some(entry(4, 1)),
        };
        assert_eq!(
            SharedUpdate::from(u.clone()).encode_to_vec(),
            u.encode_to_vec()
        );
    }
}
