//! Forecast mismatches: a loop that compares every installed reserved
//! flow with what INT reports show of it (when it started, at what rate)
//! and tells the flow's watchers once per flow, revision and kind when
//! the traffic differs from what was announced.

use std::sync::Arc;
use std::time::Duration;

use crate::daemon::control::controller::Controller;
use crate::daemon::control::events::Event;
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::inputs::telemetry::{self, MismatchKind, MismatchTolerance};

impl Controller {
    /// Compare every installed reserved flow with what INT reports show
    /// of it (first seen, rate of its ingress port) and publish a forecast
    /// mismatch once per flow, revision and kind.
    pub(in crate::daemon) async fn forecast_watch(self: Arc<Self>, tol: MismatchTolerance) {
        let period = Duration::from_nanos((tol.start_ns / 4).clamp(5_000_000, 100_000_000));
        let mut sent: std::collections::HashSet<(String, u64, usize, MismatchKind)> =
            std::collections::HashSet::new();
        loop {
            tokio::time::sleep(period).await;
            let now = now_unix_ns();
            let mut flows = Vec::new();
            {
                let inner = self.inner.lock().await;
                let live = &inner.engine.state.reservations;
                for r in live.starting_by(now.saturating_add(self.lead_ns)) {
                    for (i, f) in r.flows.iter().enumerate() {
                        if f.active(now, self.lead_ns) {
                            flows.push((
                                r.id.clone(),
                                r.revision,
                                i,
                                r.tenant.clone(),
                                r.job_id.clone(),
                                f.clone(),
                            ));
                        }
                    }
                }
            }
            let live: std::collections::HashSet<(String, u64)> =
                flows.iter().map(|f| (f.0.clone(), f.1)).collect();
            sent.retain(|k| live.contains(&(k.0.clone(), k.1)));
            for (id, revision, i, tenant, job_id, f) in flows {
                let seen = self.loads.flow(f.src_ip, f.dst_ip, f.dst_qp());
                for (kind, observed_start, observed_bps) in telemetry::mismatches(
                    f.start_unix_ns,
                    f.end_unix_ns,
                    f.rate_bps,
                    seen,
                    now,
                    tol,
                ) {
                    if !sent.insert((id.clone(), revision, i, kind)) {
                        continue;
                    }
                    tracing::info!(reservation = %id, flow = %f.flow_id, ?kind, "traffic differs from its forecast");
                    let _ = self.events.send(Event::Mismatch {
                        tenant: tenant.clone(),
                        job_id: job_id.clone(),
                        mismatch: ndsp::types::ForecastMismatch {
                            reservation_id: id.clone(),
                            flow_id: f.flow_id.clone(),
                            expected_start_unix_ns: f.start_unix_ns,
                            observed_start_unix_ns: observed_start,
                            expected_bps: f.rate_bps,
                            observed_bps,
                        },
                    });
                }
            }
        }
    }
}
