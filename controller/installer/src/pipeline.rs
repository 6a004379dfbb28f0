//! Pushing a pipeline without leaving packet replication state behind.

use std::sync::Arc;

use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, Switch};

use crate::intent::{key_of, normal_form, Key};
use crate::names;
use crate::reconcile::{apply_diff, read_clone_sessions, Diff, ReconcileError};

/// Push `device_config` with `info` (VERIFY_AND_COMMIT), which resets the
/// switch's tables. BMv2 keeps its clone (mirroring) sessions across a push
/// while PI forgets them, so a session inserted again after the push would
/// replicate every packet twice. The clone sessions the controller owns are
/// therefore deleted first, while PI still knows them (a switch with no
/// pipeline yet has none to delete). Returns how many were deleted.
pub async fn push(
    switch: &Switch,
    info: &P4Info,
    device_config: Vec<u8>,
) -> Result<usize, ReconcileError> {
    let sessions = read_clone_sessions(switch, &[names::INT_REPORT_CLONE_SESSION]).await;
    let deleted = sessions.len();
    if deleted > 0 {
        let deletes = sessions
            .into_iter()
            .map(|e| p4rt::switch::update(p4::update::Type::Delete, e))
            .collect();
        switch.write(deletes).await?;
    }
    switch
        .set_pipeline(
            info,
            device_config,
            p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit,
        )
        .await?;
    Ok(deleted)
}

/// What [`push_keeping_entries`] put back after the push.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub table_entries: usize,
    pub default_entries: usize,
    pub members: usize,
    pub groups: usize,
    pub clone_sessions: usize,
}

/// Push the pipeline and put back what the switch held: every table entry,
/// the default entries the program lets a controller change, ECMP members
/// and groups, and the controller's clone sessions, read just before the
/// push. Counters and registers start from zero.
///
/// P4Runtime's RECONCILE_AND_COMMIT would do this in the switch, but PI
/// (BMv2's P4Runtime server) implements it by reading the state and
/// inserting it back, fails on this program ("Error when reconciling
/// config") and leaves the device half-updated; the controller's own replay
/// works on every target.
pub async fn push_keeping_entries(
    switch: &Switch,
    info: &P4Info,
    device_config: Vec<u8>,
) -> Result<Kept, ReconcileError> {
    let raw = info.raw();
    let mut selectors: Vec<p4::Entity> = Vec::new();
    let mut defaults: Vec<p4::Entity> = Vec::new();
    for table in &raw.tables {
        let table_id = table.preamble.as_ref().map_or(0, |p| p.id);
        selectors.push(
            p4::TableEntry {
                table_id,
                ..Default::default()
            }
            .into(),
        );
        // A const default cannot change, nor can an action profile table's.
        if table.const_default_action_id == 0
            && !table.is_const_table
            && table.implementation_id == 0
        {
            defaults.push(
                p4::TableEntry {
                    table_id,
                    is_default_action: true,
                    ..Default::default()
                }
                .into(),
            );
        }
    }
    for profile in &raw.action_profiles {
        let action_profile_id = profile.preamble.as_ref().map_or(0, |p| p.id);
        selectors.push(
            p4::ActionProfileMember {
                action_profile_id,
                ..Default::default()
            }
            .into(),
        );
        selectors.push(
            p4::ActionProfileGroup {
                action_profile_id,
                ..Default::default()
            }
            .into(),
        );
    }
    let held = switch.read(selectors).await?;
    let held_defaults = if defaults.is_empty() {
        Vec::new()
    } else {
        switch.read(defaults).await?
    };
    let sessions = read_clone_sessions(switch, &[names::INT_REPORT_CLONE_SESSION]).await;

    push(switch, info, device_config).await?;

    // Put back through the reconciler's dependency order (sessions,
    // members, groups, entries), as inserts into the now empty switch.
    let mut kept = Kept::default();
    let mut diff = Diff::default();
    for e in sessions.into_iter().chain(held) {
        let e = normal_form(e);
        let Some(key) = key_of(&e) else { continue };
        match key {
            Key::CloneSession { .. } => kept.clone_sessions += 1,
            Key::Member { .. } => kept.members += 1,
            Key::Group { .. } => kept.groups += 1,
            Key::Table(_) => kept.table_entries += 1,
        }
        diff.insert.push((key, Arc::new(e.into())));
    }
    apply_diff(switch, &diff, usize::MAX).await?;
    let modified: Vec<p4::Update> = held_defaults
        .into_iter()
        .map(|e| p4rt::switch::update(p4::update::Type::Modify, e))
        .collect();
    kept.default_entries = modified.len();
    if !modified.is_empty() {
        switch.write(modified).await?;
    }
    Ok(kept)
}
