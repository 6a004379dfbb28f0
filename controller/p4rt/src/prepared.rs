//! Table entries built from P4Info ids and widths resolved once, for the
//! controller's hot path: a commit builds thousands of entries of the same
//! few tables, and looking names up and writing values as text (then
//! parsing them back, as [`crate::EntrySpec`] does) cost more than the
//! entries themselves. The result is the entry `TableEntryBuilder` would
//! build from the same names and values.

use crate::bytestring::encode_u128;
use crate::entity::{action, BuildError};
use crate::p4info::{match_type, name_of, P4Info};
use crate::proto::p4::config::v1::match_field::MatchType;
use crate::proto::p4::v1 as p4;
use crate::value::Value;

/// One match field's value, by the field's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue {
    Exact(u128),
    /// Value and mask; a zero mask leaves the field out (don't care).
    Ternary(u128, u128),
}

struct Field {
    id: u32,
    width: u32,
    kind: MatchType,
    label: String,
}

struct Param {
    id: u32,
    width: u32,
    label: String,
}

struct Action {
    id: u32,
    params: Vec<Param>,
}

/// A table's match fields and actions, in the order the caller named them.
pub struct PreparedTable {
    id: u32,
    fields: Vec<Field>,
    actions: Vec<Action>,
}

impl PreparedTable {
    /// Resolves `table`, its match fields `fields` and its `actions` with
    /// their parameters, each in the order given: [`Self::entry`] takes
    /// values in these orders. Every parameter of an action must be named.
    pub fn new(
        info: &P4Info,
        table: &str,
        fields: &[&str],
        actions: &[(&str, &[&str])],
    ) -> Result<PreparedTable, BuildError> {
        let t = info.table(table)?;
        let fields = fields
            .iter()
            .map(|name| {
                let f = info.match_field(t, name)?;
                Ok(Field {
                    id: f.id,
                    width: f.bitwidth as u32,
                    kind: match_type(f),
                    label: format!("table {table}, match field {name}"),
                })
            })
            .collect::<Result<Vec<_>, BuildError>>()?;
        let actions = actions
            .iter()
            .map(|(name, params)| {
                // The builder's own checks: the action exists, belongs to
                // the table and every parameter is named.
                let zeros: Vec<(&str, Value)> =
                    params.iter().map(|p| (*p, Value::Int(0))).collect();
                let call = action(info, name, &zeros)?;
                if !t.action_refs.iter().any(|r| r.id == call.action_id) {
                    return Err(BuildError::Invalid(format!(
                        "action {name} is not an action of table {}",
                        name_of(&t.preamble)
                    )));
                }
                let a = info.action(name)?;
                let params = params
                    .iter()
                    .map(|p| {
                        let param = info.action_param(a, p)?;
                        Ok(Param {
                            id: param.id,
                            width: param.bitwidth as u32,
                            label: format!("action {name}, param {p}"),
                        })
                    })
                    .collect::<Result<Vec<_>, BuildError>>()?;
                Ok(Action {
                    id: call.action_id,
                    params,
                })
            })
            .collect::<Result<Vec<_>, BuildError>>()?;
        Ok(PreparedTable {
            id: t.preamble.as_ref().map_or(0, |p| p.id),
            fields,
            actions,
        })
    }

    /// The entry matching `values` (one per field, in order) that calls
    /// action number `action` with `params` (one per parameter, in order).
    pub fn entry(
        &self,
        values: &[FieldValue],
        action: usize,
        params: &[u128],
        priority: i32,
    ) -> Result<p4::TableEntry, BuildError> {
        use p4::field_match::FieldMatchType as M;
        if values.len() != self.fields.len() {
            return Err(BuildError::Invalid(format!(
                "{} match values for {} fields",
                values.len(),
                self.fields.len()
            )));
        }
        let mut r#match = Vec::with_capacity(values.len());
        for (f, v) in self.fields.iter().zip(values) {
            let m = match (f.kind, *v) {
                (MatchType::Exact, FieldValue::Exact(x)) => M::Exact(p4::field_match::Exact {
                    value: encode_u128(x, f.width, &f.label)?,
                }),
                (MatchType::Ternary, FieldValue::Ternary(_, 0)) => continue,
                (MatchType::Ternary, FieldValue::Ternary(x, mask)) => {
                    M::Ternary(p4::field_match::Ternary {
                        value: encode_u128(x & mask, f.width, &f.label)?,
                        mask: encode_u128(mask, f.width, &format!("{} (mask)", f.label))?,
                    })
                }
                (kind, v) => {
                    return Err(BuildError::Invalid(format!(
                        "{} is {kind:?}, given {v:?}",
                        f.label
                    )))
                }
            };
            r#match.push(p4::FieldMatch {
                field_id: f.id,
                field_match_type: Some(m),
            });
        }
        r#match.sort_by_key(|m| m.field_id);
        let a = self
            .actions
            .get(action)
            .ok_or_else(|| BuildError::Invalid(format!("no prepared action {action}")))?;
        if params.len() != a.params.len() {
            return Err(BuildError::Invalid(format!(
                "{} parameters for an action of {}",
                params.len(),
                a.params.len()
            )));
        }
        let params = a
            .params
            .iter()
            .zip(params)
            .map(|(p, v)| {
                Ok(p4::action::Param {
                    param_id: p.id,
                    value: encode_u128(*v, p.width, &p.label)?,
                })
            })
            .collect::<Result<Vec<_>, BuildError>>()?;
        Ok(p4::TableEntry {
            table_id: self.id,
            r#match,
            action: Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::Action(p4::Action {
                    action_id: a.id,
                    params,
                })),
            }),
            priority,
            ..Default::default()
        })
    }
}
