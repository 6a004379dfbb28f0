//! Read-only views of the controller: what the watchers' telemetry
//! snapshots show of path availability. Nothing here changes the state.

use super::clock::now_unix_ns;
use super::controller::Controller;

impl Controller {
    /// Path availability between the hosts of the tenant's live
    /// reservations (of `jobs`, when not empty), at most 256 pairs.
    pub async fn path_availability(
        &self,
        tenant: &str,
        jobs: &[String],
    ) -> Vec<ndsp::types::PathAvailability> {
        let now = now_unix_ns();
        let inner = self.inner.lock().await;
        let mut pairs = std::collections::BTreeSet::new();
        for r in &inner.engine.state.reservations {
            if r.tenant != tenant
                || !(jobs.is_empty() || r.job_id.as_ref().is_some_and(|j| jobs.contains(j)))
            {
                continue;
            }
            for f in &r.flows {
                if pairs.len() < 256 {
                    pairs.insert((f.src_ip, f.dst_ip));
                }
            }
        }
        pairs
            .into_iter()
            .filter_map(|(s, d)| inner.engine.path_availability(tenant, s, d, now))
            .collect()
    }
}
