//! The prediction loop (learned periodic schedules): every tick, learning
//! closes the jobs' quiet iterations and says what to reserve ahead and
//! what to withdraw; the loop does it through `transact`. Also what keeps
//! learning fed: the registered jobs and their watched host pairs (with
//! `--learn-from counters` their counters are polled, `watch_counters`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use crate::daemon::control::controller::{Controller, Inner, Mutation};
use crate::daemon::control::events::Event;
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::inputs::learning::Step;
use crate::daemon::inputs::requests;
use crate::daemon::persistence::state_records;

impl Controller {
    /// Bring learning's job list and the INT watch of their host pairs in
    /// line with the registered jobs (after a registration or a cancel).
    pub(in crate::daemon) fn sync_jobs(&self, inner: &mut Inner) {
        let Some(learning) = &self.learning else {
            return;
        };
        let pairs = {
            let mut l = learning.lock().expect("learning lock");
            l.set_jobs(inner.engine.job_hosts());
            l.watched_pairs()
        };
        match inner.compiler.set_watched_pairs(&pairs) {
            Ok(leaves) => *self.watched_leaves.lock().expect("leaves lock") = leaves,
            Err(e) => tracing::error!(%e, "cannot watch the jobs' host pairs"),
        }
    }

    /// The prediction loop: close the jobs' quiet iterations, reserve what
    /// the learners predict, withdraw what stopped matching.
    pub(in crate::daemon) async fn learn(self: Arc<Self>, idle_ns: u64) {
        let Some(learning) = self.learning.clone() else {
            return;
        };
        let period = Duration::from_nanos((idle_ns / 4).clamp(1_000_000, 50_000_000));
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let steps = learning.lock().expect("learning lock").tick(now_unix_ns());
            if steps.is_empty() {
                continue;
            }
            let Ok(((), done)) = self
                .transact(|inner, now| Ok::<_, Infallible>(self.take_steps(inner, steps, now)))
                .await;
            for e in done.errors {
                tracing::warn!(%e, "predicted change not applied now; will be reconciled");
            }
        }
    }

    /// Reserve and withdraw what learning asks; the events say what was
    /// withdrawn (first), then every reservation that changed.
    fn take_steps(&self, inner: &mut Inner, steps: Vec<Step>, now: u64) -> Mutation<()> {
        let mut changed = Vec::new();
        let mut withdrawn = Vec::new();
        for step in steps {
            match step {
                Step::Reserve {
                    tenant,
                    job_id,
                    iteration,
                    demands,
                } => {
                    let (batch, keys) = requests::predicted_batch(&tenant, &job_id, &demands);
                    match inner.engine.submit_predicted(&batch, &keys, now) {
                        Ok(planned) => {
                            let records = planned.records;
                            for r in &records {
                                self.metrics.outcome(r.status.name());
                            }
                            tracing::info!(%tenant, job = %job_id, iteration,
                                flows = demands.len(), granted = %granted(&records),
                                "predicted iteration reserved");
                            changed.extend(records);
                            // Reservations moved to make room.
                            changed.extend(planned.moved);
                        }
                        Err(e) => tracing::warn!(%tenant, job = %job_id, iteration,
                            message = %e, "predicted iteration not reserved"),
                    }
                }
                Step::Withdraw {
                    tenant,
                    job_id,
                    reason,
                } => {
                    let records = inner.engine.withdraw_predicted(&tenant, &job_id, now);
                    tracing::info!(%tenant, job = %job_id, %reason,
                        withdrawn = records.len(), "predictions withdrawn");
                    withdrawn.push(Event::PredictionWithdrawn {
                        tenant,
                        job_id,
                        reason,
                        reservation_ids: records.iter().map(|r| r.id.clone()).collect(),
                    });
                    changed.extend(records);
                }
            }
        }
        withdrawn.extend(changed.into_iter().map(Event::reservation));
        Mutation::changed((), withdrawn)
    }
}

/// What each flow of some reservations got, for the log: `src>dst
/// status rate path` per flow (`;`-separated), e.g. `10.0.1.1>10.0.2.1
/// admitted 4.0Mb/s leaf1:5,spine1:2,leaf2:3`.
fn granted(records: &[Arc<state_records::Reservation>]) -> String {
    let flows = records.iter().flat_map(|r| &r.flows);
    flows
        .map(|f| {
            let path: Vec<String> = f
                .hops
                .iter()
                .map(|h| format!("{}:{}", h.switch, h.port))
                .collect();
            format!(
                "{}>{} {} {:.1}Mb/s {}",
                f.src_ip,
                f.dst_ip,
                f.status.name(),
                f.accepted_bps as f64 / 1e6,
                path.join(",")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
