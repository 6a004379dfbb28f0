//! The election: replicas campaign on `<prefix>/leader` with their
//! addresses as the value; the winner's leader key, and its create
//! revision, are what `fence` guards every commit and every
//! switch write with. A campaigning replica also watches the leader's
//! NDSP port and revokes the lease of one whose process is gone, so a
//! crash is taken over in a fraction of the lease TTL.

use std::time::Duration;

use etcd_client::Client;
use serde::{Deserialize, Serialize};

use super::fence::Leadership;
use super::session::{lease_lost, Replica, CALL_TIMEOUT};

/// How often a campaigning replica checks that the leader's process is
/// still there.
const LEADER_PROBE: Duration = Duration::from_millis(100);

/// Refused connections in a row after which the leader counts as dead.
const REFUSED_PROBES: u32 = 2;

/// What a leader publishes about itself (the election value).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaderInfo {
    pub replica: String,
    /// NDSP address clients should use.
    pub ndsp: String,
    pub http: String,
}

/// The election's key: `<prefix>/leader`.
fn election_key(replica: &Replica) -> String {
    format!("{}/leader", replica.config.prefix)
}

impl Replica {
    /// The current leader, if there is one.
    pub async fn leader(&self) -> Option<LeaderInfo> {
        let mut election = self.client.election_client();
        let answer =
            tokio::time::timeout(Duration::from_secs(1), election.leader(election_key(self)))
                .await
                .ok()?
                .ok()?;
        serde_json::from_slice(answer.kv()?.value()).ok()
    }

    /// Wait until this replica is the leader.
    pub async fn campaign(&self, me: &LeaderInfo) -> anyhow::Result<Leadership> {
        let value = serde_json::to_vec(me)?;
        let mut election = self.client.election_client();
        // A campaign survives etcd hiccups: retried until won or the lease is lost.
        let key = loop {
            if *self.lost.borrow() {
                anyhow::bail!("etcd: lease lost while campaigning");
            }
            let campaign = election.campaign(election_key(self), value.clone(), self.lease);
            let outcome = tokio::select! {
                outcome = campaign => outcome,
                true = lease_lost(self.lost.clone()) => anyhow::bail!("etcd: lease lost while campaigning"),
                never = revoke_dead_leader(self.client.clone(), election_key(self), self.lease) => match never {},
            };
            match outcome {
                Ok(mut won) => match won.take_leader() {
                    Some(key) => break key,
                    None => anyhow::bail!("etcd: campaign answered without a leader key"),
                },
                Err(e) => {
                    tracing::warn!(%e, "etcd: campaign failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        tracing::info!(replica = %me.replica, revision = key.rev(), "elected leader");
        Ok(Leadership::new(
            self.client.clone(),
            key.key().to_vec(),
            key.rev(),
            format!("{}/state/", self.config.prefix),
            self.lost.clone(),
        ))
    }
}

/// Revoke the leader's lease once its NDSP port refuses connections
/// `REFUSED_PROBES` times in a row (never returns; dropped when the
/// campaign ends). A leader that listens on an unspecified address
/// (`0.0.0.0`) cannot be probed from here and is left to its TTL.
async fn revoke_dead_leader(
    client: Client,
    election: String,
    own_lease: i64,
) -> std::convert::Infallible {
    let mut tick = tokio::time::interval(LEADER_PROBE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut refused = (0_i64, 0_u32); // (lease, probes refused in a row)
    loop {
        tick.tick().await;
        let mut elections = client.election_client();
        let leader = tokio::time::timeout(CALL_TIMEOUT, elections.leader(election.clone())).await;
        let Some(kv) = leader
            .ok()
            .and_then(Result::ok)
            .and_then(|mut l| l.take_kv())
        else {
            continue;
        };
        let lease = kv.lease();
        let info = serde_json::from_slice::<LeaderInfo>(kv.value()).ok();
        let addr = info
            .as_ref()
            .and_then(|i| i.ndsp.parse::<std::net::SocketAddr>().ok());
        let Some(addr) = addr.filter(|a| !a.ip().is_unspecified() && lease != own_lease) else {
            continue;
        };
        let probe = tokio::time::timeout(LEADER_PROBE, tokio::net::TcpStream::connect(addr)).await;
        let is_refused =
            matches!(probe, Ok(Err(ref e)) if e.kind() == std::io::ErrorKind::ConnectionRefused);
        refused = match (is_refused, refused) {
            (false, _) => (lease, 0),
            (true, (l, n)) if l == lease => (lease, n + 1),
            (true, _) => (lease, 1),
        };
        if refused.1 >= REFUSED_PROBES {
            // In a task of its own: the revoke ends the campaign, which drops
            // this future, possibly before the answer is logged.
            let mut leases = client.lease_client();
            let revoke = tokio::spawn(async move {
                if let Ok(Ok(_)) = tokio::time::timeout(CALL_TIMEOUT, leases.revoke(lease)).await {
                    let name = info.map(|i| i.replica).unwrap_or_default();
                    tracing::warn!(leader = %name, lease, %addr,
                        "the leader's NDSP port refuses connections: its lease revoked");
                }
            });
            let _ = revoke.await;
            refused = (lease, 0);
        }
    }
}
