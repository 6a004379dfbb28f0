//! The session: one replica's connection to etcd and the lease it holds
//! (kept alive in the background). Everything a replica owns in etcd (its
//! campaign, its leader key) lives as long as this lease, so ending the
//! session (a clean `leave`, or the lease lost) ends them too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use etcd_client::{Client, ConnectOptions};

/// TTLs without reaching etcd after which a replica gives its lease up.
const UNREACHABLE_TTLS: u32 = 5;

/// How long one etcd call (other than a campaign) may take.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Where the replicas meet.
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// etcd client endpoints (`host:port`).
    pub endpoints: Vec<String>,
    /// Key prefix of this controller cluster (one per fabric).
    pub prefix: String,
    /// This replica's name, unique in the cluster.
    pub replica: String,
    /// Lease TTL (whole seconds, etcd's unit): how long a dead leader
    /// keeps the leadership.
    pub lease_ttl_s: i64,
}

/// A replica's connection to etcd, before and after it wins.
pub struct Replica {
    pub(super) client: Client,
    pub(super) config: HaConfig,
    pub(super) lease: i64,
    /// Receives `true` once the lease is lost.
    pub(super) lost: tokio::sync::watch::Receiver<bool>,
    /// Set by [`Replica::leave`]: the lease ends on purpose, which is not
    /// a loss to step down for.
    leaving: Arc<AtomicBool>,
}

/// Connect to etcd and take a lease kept alive in the background.
pub async fn join(config: HaConfig) -> anyhow::Result<Replica> {
    // No blanket request timeout: a follower's campaign waits as long as
    // the leader lives. Other calls have their own.
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_millis(500), Duration::from_secs(1));
    let client = Client::connect(&config.endpoints, Some(options))
        .await
        .with_context(|| format!("--etcd {}: cannot connect", config.endpoints.join(",")))?;
    let lease = tokio::time::timeout(
        CALL_TIMEOUT,
        client.lease_client().grant(config.lease_ttl_s, None),
    )
    .await
    .map_err(|_| anyhow::anyhow!("etcd: no answer to a lease grant in {CALL_TIMEOUT:?}"))?
    .context("etcd: cannot grant a lease")?
    .id();
    let (lost_tx, lost) = tokio::sync::watch::channel(false);
    let leaving = Arc::new(AtomicBool::new(false));
    tokio::spawn(keep_alive(
        client.clone(),
        lease,
        Duration::from_secs(config.lease_ttl_s as u64),
        lost_tx,
        leaving.clone(),
    ));
    Ok(Replica {
        client,
        config,
        lease,
        lost,
        leaving,
    })
}

/// Renew the lease every third of its TTL; report it lost when etcd says
/// it expired, or after `UNREACHABLE_TTLS` TTLs without a renewal. Not
/// sooner: an etcd leader election (a member lost) can hold renewals back
/// for about a TTL while etcd keeps the lease, and stepping down early is
/// not what keeps a late leader harmless; the fences are (its commits are
/// refused, and switches prefer the newer leader's election id).
async fn keep_alive(
    client: Client,
    lease: i64,
    ttl: Duration,
    lost: tokio::sync::watch::Sender<bool>,
    leaving: Arc<AtomicBool>,
) {
    let mut last_ok = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(ttl / 3);
    let mut stream = None;
    loop {
        tick.tick().await;
        if last_ok.elapsed() >= ttl * UNREACHABLE_TTLS {
            let _ = lost.send(true);
            return;
        }
        if stream.is_none() {
            let mut leases = client.lease_client();
            stream = tokio::time::timeout(ttl / 3, leases.keep_alive(lease))
                .await
                .ok()
                .and_then(Result::ok);
        }
        let Some((keeper, responses)) = stream.as_mut() else {
            continue;
        };
        let renewed = async {
            keeper.keep_alive().await.ok()?;
            responses.message().await.ok()?
        };
        match tokio::time::timeout(ttl / 3, renewed).await {
            Ok(Some(r)) if r.ttl() > 0 => last_ok = tokio::time::Instant::now(),
            Ok(Some(_)) if leaving.load(Ordering::SeqCst) => return,
            Ok(Some(_)) => {
                tracing::error!(lease, "etcd: the lease expired");
                let _ = lost.send(true);
                return;
            }
            _ => stream = None,
        }
    }
}

impl Replica {
    /// Give up the lease now (a clean shutdown): the leader key goes with
    /// it, so another replica leads without waiting for the TTL.
    pub async fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        let mut leases = self.client.lease_client();
        match tokio::time::timeout(CALL_TIMEOUT, leases.revoke(self.lease)).await {
            Ok(Ok(_)) => tracing::info!(lease = self.lease, "etcd: lease revoked"),
            _ => tracing::warn!(
                lease = self.lease,
                "etcd: could not revoke the lease; it expires on its own"
            ),
        }
    }
}

/// Wait until the lease is reported lost (`true`). `false` when the
/// keep-alive ends without that, which it does only on a clean `leave`:
/// a leader stopped on purpose must exit 0, not as if it had lost etcd.
pub(super) async fn lease_lost(mut lost: tokio::sync::watch::Receiver<bool>) -> bool {
    lost.wait_for(|l| *l).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::lease_lost;

    #[tokio::test]
    async fn a_clean_leave_is_not_a_lost_lease() {
        // The keep-alive ends (its sender dropped) after `leave`: no step-down.
        let (tx, rx) = tokio::sync::watch::channel(false);
        drop(tx);
        assert!(!lease_lost(rx).await);
    }

    #[tokio::test]
    async fn a_lost_lease_is_seen_even_after_the_keep_alive_ended() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tx.send(true).unwrap();
        drop(tx);
        assert!(lease_lost(rx).await);
    }
}
