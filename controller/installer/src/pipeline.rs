//! Pushing a pipeline without leaving packet replication state behind.

use p4rt::proto::p4::v1 as p4;
use p4rt::{P4Info, Switch};

use crate::names;
use crate::reconcile::{read_clone_sessions, ReconcileError};

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
