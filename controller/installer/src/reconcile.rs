//! Bring a switch to its intended state with the fewest writes: read what
//! it holds (the tables, members and groups the controller owns), diff by
//! key, then insert what is missing, modify what differs and delete what is
//! extra — never a duplicate, never a lost entry.

use std::collections::BTreeMap;

use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, Switch};

use crate::intent::{key_of, normal_form, Key, Resolved};
use crate::names;

/// What reconciliation changed (or would change).
#[derive(Debug, Default, Clone)]
pub struct Diff {
    pub insert: Vec<(Key, p4::Entity)>,
    pub modify: Vec<(Key, p4::Entity)>,
    pub delete: Vec<(Key, p4::Entity)>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.insert.is_empty() && self.modify.is_empty() && self.delete.is_empty()
    }

    pub fn summary(&self) -> String {
        format!(
            "{} inserted, {} modified, {} deleted",
            self.insert.len(),
            self.modify.len(),
            self.delete.len()
        )
    }
}

/// Compare intended entities with what the switch holds.
pub fn diff(intended: &Resolved, actual: Vec<p4::Entity>) -> Diff {
    let actual: BTreeMap<Key, p4::Entity> = actual
        .into_iter()
        .filter_map(|e| {
            let e = normal_form(e);
            key_of(&e).map(|k| (k, e))
        })
        .collect();
    let mut out = Diff::default();
    for (key, want) in &intended.entities {
        match actual.get(key) {
            None => out.insert.push((key.clone(), want.clone())),
            Some(have) if have != want => out.modify.push((key.clone(), want.clone())),
            Some(_) => {}
        }
    }
    for (key, have) in actual.into_iter().rev() {
        if !intended.entities.contains_key(&key) {
            out.delete.push((key, have));
        }
    }
    out
}

/// Wildcard reads of everything the controller owns on a switch.
pub fn owned_selectors(info: &P4Info) -> Result<Vec<p4::Entity>, p4rt::error::P4InfoError> {
    let mut wanted = Vec::new();
    for table in names::OWNED_TABLES {
        let id = info.table(table)?.preamble.as_ref().map_or(0, |p| p.id);
        wanted.push(
            p4::TableEntry {
                table_id: id,
                ..Default::default()
            }
            .into(),
        );
    }
    let profile = info
        .action_profile(names::ECMP_SELECTOR)?
        .preamble
        .as_ref()
        .map_or(0, |p| p.id);
    wanted.push(
        p4::ActionProfileMember {
            action_profile_id: profile,
            ..Default::default()
        }
        .into(),
    );
    wanted.push(
        p4::ActionProfileGroup {
            action_profile_id: profile,
            ..Default::default()
        }
        .into(),
    );
    Ok(wanted)
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    P4Info(#[from] p4rt::error::P4InfoError),
    #[error(transparent)]
    Switch(#[from] p4rt::Error),
    #[error(transparent)]
    Write(#[from] p4rt::WriteError),
}

/// Read, diff and apply. Returns what was changed.
pub async fn reconcile(
    switch: &Switch,
    info: &P4Info,
    intended: &Resolved,
    batch_size: usize,
) -> Result<Diff, ReconcileError> {
    let actual = switch.read(owned_selectors(info)?).await?;
    let diff = diff(intended, actual);
    apply(switch, &diff, intended, batch_size).await?;
    Ok(diff)
}

/// Apply a diff: inserts and modifies in key order (members, groups, then
/// table entries), deletes in reverse order (entries before the groups and
/// members they use), then the default entries.
pub async fn apply(
    switch: &Switch,
    diff: &Diff,
    intended: &Resolved,
    batch_size: usize,
) -> Result<(), ReconcileError> {
    use p4::update::Type;
    let mut upserts: Vec<(&Key, p4::Update)> = diff
        .insert
        .iter()
        .map(|(k, e)| (k, p4rt::switch::update(Type::Insert, e.clone())))
        .chain(
            diff.modify
                .iter()
                .map(|(k, e)| (k, p4rt::switch::update(Type::Modify, e.clone()))),
        )
        .collect();
    upserts.sort_by(|a, b| a.0.cmp(b.0));
    // Members and groups must exist before the entries that point at them:
    // write them in their own requests first.
    let (profile, tables): (Vec<_>, Vec<_>) = upserts
        .into_iter()
        .partition(|(k, _)| !matches!(k, Key::Table(_)));
    let (members, groups): (Vec<_>, Vec<_>) = profile
        .into_iter()
        .partition(|(k, _)| matches!(k, Key::Member { .. }));
    for phase in [members, groups, tables] {
        switch
            .write_batched(phase.into_iter().map(|(_, u)| u).collect(), batch_size)
            .await?;
    }
    let (table_deletes, profile_deletes): (Vec<_>, Vec<_>) = diff
        .delete
        .iter()
        .partition(|(k, _)| matches!(k, Key::Table(_)));
    let (group_deletes, member_deletes): (Vec<_>, Vec<_>) = profile_deletes
        .into_iter()
        .partition(|(k, _)| matches!(k, Key::Group { .. }));
    for phase in [table_deletes, group_deletes, member_deletes] {
        let updates = phase
            .into_iter()
            .map(|(_, e)| p4rt::switch::update(Type::Delete, e.clone()))
            .collect();
        switch.write_batched(updates, batch_size).await?;
    }
    let defaults = intended
        .defaults
        .iter()
        .map(|e| p4rt::switch::update(Type::Modify, e.clone().into()))
        .collect();
    switch.write_batched(defaults, batch_size).await?;
    Ok(())
}
