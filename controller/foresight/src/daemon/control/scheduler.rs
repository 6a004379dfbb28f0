//! The install/expiry scheduler: reservations' entries go in a lead time
//! before their flows start and come out when they end, so the intended
//! switch state changes at known moments. The scheduler sleeps until the
//! next one (or until a change wakes it), retires what expired, and
//! commits through `transact`.

use std::sync::Arc;
use std::time::Duration;

use super::controller::{Controller, Mutation};
use crate::daemon::inputs::clock::now_unix_ns;

impl Controller {
    /// The install/expiry loop: sleeps until the next moment the intended
    /// state changes, retires what expired, and commits. Its own commit
    /// wakes it too, which only makes it read the next moment again.
    pub(in crate::daemon) async fn scheduler(self: Arc<Self>) {
        // Events are looked for after the last commit, not after "now":
        // one that falls due while a commit is in flight is not skipped.
        let mut last = now_unix_ns();
        loop {
            let next = {
                self.inner
                    .lock()
                    .await
                    .engine
                    .next_event(last, self.lead_ns)
            };
            let now = now_unix_ns();
            let wait = next
                .map_or(Duration::from_secs(60), |t| {
                    Duration::from_nanos(t.saturating_sub(now))
                })
                .min(Duration::from_secs(60));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.wake.notified() => continue,
            }
            let Ok((now, done)) = self
                .transact(|inner, now| {
                    let expired = inner.engine.expire(now);
                    for id in &expired {
                        tracing::info!(reservation = %id, "expired; entries withdrawn");
                    }
                    Ok::<_, std::convert::Infallible>(Mutation {
                        value: now,
                        changed: !expired.is_empty(),
                        events: Vec::new(),
                    })
                })
                .await;
            last = now;
            if done.changes > 0 {
                tracing::debug!(
                    changes = done.changes,
                    "scheduled install/removal acknowledged"
                );
            }
            for e in done.errors {
                tracing::warn!(%e, "scheduled change not applied");
            }
        }
    }
}
