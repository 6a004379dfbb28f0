//! The controller daemon (`foresight controller`).
//!
//! * [`state`] — intended state (jobs, reservations), the JSON state file;
//! * [`store`], [`ha`] — where it survives: a file, or etcd for replicas
//!   that elect a leader;
//! * [`engine`] — NDSP requests → planner → reservation records (no I/O);
//! * [`desired`] — what every switch should hold at a given moment;
//! * [`switches`] — one task per switch: session, pipeline, reconcile, writes;
//! * [`switch_status`] — what each switch task publishes about its switch;
//! * [`service`] — the NDSP gRPC service;
//! * [`telemetry`] — INT report collector and link loads;
//! * [`learning`] — T+5: jobs' iterations learned, reserved ahead;
//! * [`watch_counters`] — what learning sees of TCP and UDP traffic;
//! * [`limits`] — what one tenant may ask (reservations, requests/s);
//! * [`metrics`], [`http`], [`api`] — Prometheus and the admin endpoint.
//!
//! Here: start-up (reload state, start the switch tasks, reconcile), the
//! commit step every change goes through (persist, derive, send to every
//! switch, wait for acknowledgements), the install/expiry scheduler, and
//! the status and entries views.

pub mod admin_token;
pub mod api;
pub mod desired;
pub mod engine;
pub mod ha;
pub mod http;
pub mod identity;
pub mod leader_gate;
pub mod learning;
pub mod limits;
pub mod metrics;
pub mod service;
pub mod state;
pub mod store;
pub mod switch_status;
pub mod switches;
pub mod telemetry;
pub mod watch_counters;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use installer::Devices;
use p4rt::P4Info;
use planner::{PlannerConfig, Topology};
use serde::Serialize;
use tokio::sync::{broadcast, oneshot, Notify};

use self::api::{
    ControllerView, EntriesView, LinkView, ReservationSummary, ReservationsView, StatusView,
    SwitchView,
};
use self::desired::{Compiler, Policy};
use self::engine::{Engine, Reoptimization, Restored};
use self::leader_gate::LeaderGate;
use self::learning::{LearnFrom, Learning, LearningConfig, Step};
use self::limits::{Admission, Limits};
use self::metrics::Metrics;
use self::state::{Lifecycle, Reservation, State};
use self::store::Store;
use self::switches::SwitchHandle;
use self::telemetry::{LinkLoads, MismatchKind, MismatchTolerance, TelemetryConfig};
use self::watch_counters::WatchCounters;
use crate::fabric::{Endpoint, Pipeline};

/// Unix time in ns.
pub fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Where the switches are.
pub enum Switches {
    /// Given endpoints, by switch name.
    Endpoints(BTreeMap<String, Endpoint>),
    /// Start one BMv2 per topology switch (stopped when the daemon exits).
    Bmv2,
}

/// Which earlier reservations a new demand, a failed link or a
/// cancellation may move to other paths (windows and rates never change;
/// every move is a `WatchEvents` reservation change saying what and why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReoptimizeMode {
    /// None: each reservation keeps the paths it was given.
    Off,
    /// Those none of whose entries are on the switches yet.
    Pending,
    /// Also those installed but not started.
    NotStarted,
}

pub struct Config {
    pub topology: Topology,
    pub pipeline: Pipeline,
    /// The switches' target and port numbering.
    pub devices: Devices,
    pub switches: Switches,
    pub ndsp_listen: SocketAddr,
    pub http_listen: SocketAddr,
    /// The operator's token for the admin endpoint's writes; required when
    /// `http_listen` is not a loopback address.
    pub admin_token: Option<admin_token::AdminToken>,
    pub int_listen: Option<SocketAddr>,
    pub state_file: Option<PathBuf>,
    pub election_id: u128,
    /// Mutual TLS on NDSP (the tenant is the client certificate's).
    pub mtls: Option<identity::Mtls>,
    /// Replicas on etcd (the state lives there, not in `state_file`, and
    /// the election id comes from the leadership).
    pub ha: Option<ha::HaConfig>,
    pub planner: PlannerConfig,
    pub policy: Policy,
    /// Which reservations planning may move before they are installed.
    pub reoptimize: ReoptimizeMode,
    /// Congestion episodes from INT reports.
    pub telemetry: TelemetryConfig,
    /// When observed traffic is a forecast mismatch.
    pub mismatch: MismatchTolerance,
    /// Written (JSON: addresses, pid) once every switch is reconciled,
    /// or `switch_wait` has passed.
    pub ready_file: Option<PathBuf>,
    pub switch_wait: Duration,
    /// Learn registered jobs' iterations and reserve them ahead (T+5);
    /// learning from INT needs the INT collector.
    pub learning: Option<LearningConfig>,
    /// Per-tenant limits.
    pub limits: Limits,
    /// Largest NDSP request the server decodes, bytes.
    pub max_request_bytes: usize,
    /// Each tenant's share of every link (planner admission).
    pub tenant_shares: planner::shares::TenantShares,
}

/// A reservation changed (cancelled, re-planned): for `WatchEvents`.
#[derive(Clone, Debug)]
pub struct Changed {
    pub tenant: String,
    pub reservation: Reservation,
}

/// A reservation a network event affects: who may see it.
#[derive(Clone, Debug)]
pub struct Affected {
    pub tenant: String,
    pub job_id: Option<String>,
    pub reservation_id: String,
}

/// What `WatchEvents` streams relay (each stream filters by tenant and job).
#[derive(Clone, Debug)]
pub enum Event {
    /// A reservation changed.
    Reservation(Changed),
    /// A fabric link went down or came up; sent before the
    /// `Reservation` events of the reservations it re-planned.
    Link {
        down: bool,
        /// The link in the direction the operator named it.
        link: ndsp::types::LinkId,
        observed_unix_ns: u64,
        affected: Vec<Affected>,
    },
    /// A job's predicted reservations were withdrawn (T+5).
    PredictionWithdrawn {
        tenant: String,
        job_id: String,
        reason: String,
        reservation_ids: Vec<String>,
    },
    /// Observed traffic of a reserved flow differs from its forecast.
    Mismatch {
        tenant: String,
        job_id: Option<String>,
        mismatch: ndsp::types::ForecastMismatch,
    },
}

struct Inner {
    engine: Engine,
    compiler: Compiler,
}

pub struct Controller {
    inner: tokio::sync::Mutex<Inner>,
    pub switches: BTreeMap<String, SwitchHandle>,
    pub metrics: Arc<Metrics>,
    pub loads: Arc<LinkLoads>,
    pub events: broadcast::Sender<Event>,
    wake: Notify,
    pub topo: &'static Topology,
    info: Arc<P4Info>,
    store: store::Store,
    pub lead_ns: u64,
    started: Instant,
    restored: Restored,
    startup_reconcile_ms: StdMutex<Option<f64>>,
    ndsp_addr: SocketAddr,
    http_addr: SocketAddr,
    election_id: u128,
    /// T+5 learning, when on.
    pub learning: Option<Arc<StdMutex<Learning>>>,
    /// Leaves that hold the watch entries of learned jobs (T+5).
    watched_leaves: StdMutex<BTreeSet<String>>,
    /// Per-tenant limits and request rates.
    pub admission: Admission,
}

/// Acknowledgements of one commit, by switch.
pub type Acks = Vec<(String, oneshot::Receiver<Result<usize, String>>)>;

/// What a commit changed on the switches.
#[derive(Debug, Default, Clone)]
pub struct Committed {
    pub changes: usize,
    pub errors: Vec<String>,
}

/// Wait for every switch's acknowledgement.
pub async fn acknowledged(acks: Acks) -> Committed {
    let mut out = Committed::default();
    for (name, rx) in acks {
        match rx.await {
            Ok(Ok(n)) => out.changes += n,
            Ok(Err(e)) => out.errors.push(e),
            Err(_) => out.errors.push(format!("switch {name}: task gone")),
        }
    }
    out
}

impl Controller {
    /// Persist (when `changed`), derive every switch's intended state at
    /// `now` and send it. Call with the engine locked; await the acks after
    /// unlocking (switch tasks apply states in the order they were sent).
    async fn commit(&self, inner: &mut Inner, now: u64, changed: bool) -> Acks {
        if changed {
            self.store.save(&inner.engine.state, &self.metrics).await;
        }
        let desired = match inner.compiler.desired(&inner.engine.state, now) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(%e, "cannot derive the intended switch state");
                return Vec::new();
            }
        };
        desired
            .into_iter()
            .filter_map(|(name, state)| {
                let handle = self.switches.get(&name)?;
                Some((name, handle.apply(Arc::new(state))))
            })
            .collect()
    }

    /// Wake the scheduler (the next install or expiry may have changed).
    fn reschedule(&self) {
        self.wake.notify_one();
    }

    /// The install/expiry loop: sleeps until the next moment the intended
    /// state changes, retires what expired, and commits.
    async fn scheduler(self: Arc<Self>) {
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
            let now = now_unix_ns();
            let acks = {
                let mut inner = self.inner.lock().await;
                let expired = inner.engine.expire(now);
                for id in &expired {
                    tracing::info!(reservation = %id, "expired; entries withdrawn");
                }
                self.commit(&mut inner, now, !expired.is_empty()).await
            };
            last = now;
            let done = acknowledged(acks).await;
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

    /// Bring learning's job list and the INT watch of their host pairs in
    /// line with the registered jobs (after a registration or a cancel).
    fn sync_jobs(&self, inner: &mut Inner) {
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

    /// What learning sees with `--learn-from counters`: every `poll_ns`,
    /// the watch counters of the leaves that hold learned jobs' hosts, as
    /// bytes per host pair since the last read.
    async fn poll_watch_counters(self: Arc<Self>, mut counters: WatchCounters, poll_ns: u64) {
        let Some(learning) = self.learning.clone() else {
            return;
        };
        let mut ticker = tokio::time::interval(Duration::from_nanos(poll_ns));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let request = counters.request();
        loop {
            ticker.tick().await;
            let leaves: Vec<String> = self
                .watched_leaves
                .lock()
                .expect("leaves lock")
                .iter()
                .cloned()
                .collect();
            let reads = leaves.iter().filter_map(|leaf| {
                let switch = self.switches.get(leaf)?;
                let request = request.clone();
                Some(async move { (leaf, switch.read_entities(vec![request]).await) })
            });
            for (leaf, read) in futures::future::join_all(reads).await {
                let now = now_unix_ns();
                match read {
                    Ok(entities) => {
                        let grew = counters.increments(leaf, &entities);
                        let mut l = learning.lock().expect("learning lock");
                        for ((src, dst), bytes) in grew {
                            l.record(src, dst, bytes, now);
                        }
                    }
                    Err(e) => tracing::debug!(switch = %leaf, %e, "watch counters not read"),
                }
            }
        }
    }

    /// The T+5 loop: close the jobs' quiet iterations, reserve what the
    /// learners predict, withdraw what stopped matching.
    async fn learn(self: Arc<Self>, idle_ns: u64) {
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
            let mut changed = Vec::new();
            let mut withdrawn = Vec::new();
            let acks = {
                let mut inner = self.inner.lock().await;
                let now = now_unix_ns();
                for step in steps {
                    match step {
                        Step::Reserve {
                            tenant,
                            job_id,
                            iteration,
                            demands,
                        } => {
                            match inner
                                .engine
                                .submit_predicted(&tenant, &job_id, &demands, now)
                            {
                                Ok(records) => {
                                    for r in &records {
                                        self.metrics.outcome(r.status.name());
                                    }
                                    tracing::info!(%tenant, job = %job_id, iteration,
                                        flows = demands.len(), granted = %granted(&records),
                                        "predicted iteration reserved");
                                    changed.extend(records);
                                }
                                Err(e) => tracing::warn!(%tenant, job = %job_id, iteration,
                                    message = e.message(), "predicted iteration not reserved"),
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
                            withdrawn.push((
                                tenant,
                                job_id,
                                reason,
                                records.iter().map(|r| r.id.clone()).collect(),
                            ));
                            changed.extend(records);
                        }
                    }
                }
                self.commit(&mut inner, now, true).await
            };
            self.reschedule();
            for (tenant, job_id, reason, reservation_ids) in withdrawn {
                let _ = self.events.send(Event::PredictionWithdrawn {
                    tenant,
                    job_id,
                    reason,
                    reservation_ids,
                });
            }
            for r in changed {
                let _ = self.events.send(Event::Reservation(Changed {
                    tenant: r.tenant.clone(),
                    reservation: r,
                }));
            }
            for e in acknowledged(acks).await.errors {
                tracing::warn!(%e, "predicted change not applied now; will be reconciled");
            }
        }
    }

    /// Take a fabric link down or bring it up (operator command): re-plan
    /// the reservations on it, move routes and ECMP groups, persist, send
    /// the new state to every switch, then publish the link event and the
    /// re-planned reservations. Bad input changes nothing.
    pub async fn set_link(
        &self,
        node: &str,
        port: u32,
        down: bool,
    ) -> Result<api::LinkChangeView, (u16, String)> {
        let now = now_unix_ns();
        let (change, acks, links_down) = {
            let mut inner = self.inner.lock().await;
            let inner = &mut *inner;
            let change = inner
                .engine
                .set_link(node, port, down, now)
                .map_err(|e| (400, e))?;
            if change.changed {
                let edges = inner.engine.down_edges();
                inner
                    .compiler
                    .set_down_edges(&edges)
                    .map_err(|e| (500, e.to_string()))?;
            }
            let acks = self.commit(inner, now, change.changed).await;
            let links_down: Vec<String> = inner
                .engine
                .state
                .links_down
                .iter()
                .map(|l| l.to_string())
                .collect();
            (change, acks, links_down)
        };
        self.reschedule();
        let done = acknowledged(acks).await;
        if change.changed {
            tracing::warn!(link = %change.link, down, replanned = change.affected.len(), "link state changed by the operator");
            let l = self.topo.edge(change.edges[0]);
            let _ = self.events.send(Event::Link {
                down,
                link: ndsp::types::LinkId {
                    from_node: self.topo.node_name(l.from).to_string(),
                    from_port: u32::from(l.from_port),
                    to_node: self.topo.node_name(l.to).to_string(),
                    to_port: u32::from(l.to_port),
                },
                observed_unix_ns: now,
                affected: change
                    .affected
                    .iter()
                    .map(|r| Affected {
                        tenant: r.tenant.clone(),
                        job_id: r.job_id.clone(),
                        reservation_id: r.id.clone(),
                    })
                    .collect(),
            });
            for r in &change.affected {
                let _ = self.events.send(Event::Reservation(Changed {
                    tenant: r.tenant.clone(),
                    reservation: r.clone(),
                }));
            }
        }
        Ok(api::LinkChangeView {
            link: change.link.to_string(),
            state: if down { "down" } else { "up" }.to_string(),
            changed: change.changed,
            replanned: change
                .affected
                .iter()
                .map(|r| api::ReplannedView {
                    id: r.id.clone(),
                    status: r.status.name().to_string(),
                    advisory: r.advisory.clone(),
                    revision: r.revision,
                })
                .collect(),
            switch_changes: done.changes,
            switch_errors: done.errors,
            links_down,
        })
    }

    /// Compare every installed reserved flow with what INT reports show
    /// of it (first seen, rate of its ingress port) and publish a forecast
    /// mismatch once per flow, revision and kind.
    async fn forecast_watch(self: Arc<Self>, tol: MismatchTolerance) {
        let period = Duration::from_nanos((tol.start_ns / 4).clamp(5_000_000, 100_000_000));
        let mut sent: std::collections::HashSet<(String, u64, usize, MismatchKind)> =
            std::collections::HashSet::new();
        loop {
            tokio::time::sleep(period).await;
            let now = now_unix_ns();
            let mut flows = Vec::new();
            {
                let inner = self.inner.lock().await;
                for r in &inner.engine.state.reservations {
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

    /// The status view, of every tenant's reservations.
    pub async fn status(&self) -> StatusView {
        self.status_for(None).await
    }

    /// The status view; with `tenant`, of that tenant's reservations only
    /// (link loads stay fabric-wide; see `api::StatusView::scope_to`).
    pub async fn status_for(&self, tenant: Option<&str>) -> StatusView {
        let sees = |r: &&Reservation| tenant.is_none_or(|t| r.tenant == t);
        let now = now_unix_ns();
        let inner = self.inner.lock().await;
        let engine = &inner.engine;
        let mut by_state: BTreeMap<String, usize> = Lifecycle::ALL
            .iter()
            .map(|l| (l.name().to_string(), 0))
            .collect();
        let mut installed_flows = 0;
        let mut list = Vec::new();
        let summary = |r: &Reservation| {
            let state = r.lifecycle(now, self.lead_ns);
            ReservationSummary {
                id: r.id.clone(),
                tenant: r.tenant.clone(),
                subject: format!("{}:{}", r.subject.kind(), r.subject.id()),
                job_id: r.job_id.clone(),
                status: r.status.name().to_string(),
                state: state.name().to_string(),
                flows: r.flows.len(),
                reserved_flows: r.installing().count(),
                start_unix_ns: r.start_unix_ns(),
                end_unix_ns: r.end_unix_ns(),
                install_unix_ns: r.install_unix_ns(self.lead_ns),
                revision: r.revision,
                predicted: r.predicted,
            }
        };
        for r in engine.state.reservations.iter().filter(sees) {
            *by_state
                .entry(r.lifecycle(now, self.lead_ns).name().to_string())
                .or_default() += 1;
            installed_flows += r
                .flows
                .iter()
                .filter(|f| f.active(now, self.lead_ns))
                .count();
            list.push(summary(r));
        }
        let history = || engine.state.history.iter().filter(sees);
        for r in history().rev().take(20) {
            list.push(summary(r));
        }
        *by_state
            .entry(Lifecycle::Expired.name().into())
            .or_default() += history().filter(|r| !r.cancelled).count();
        *by_state
            .entry(Lifecycle::Cancelled.name().into())
            .or_default() += history().filter(|r| r.cancelled).count();
        let diverged = self
            .restored
            .diverged
            .iter()
            .filter(|id| tenant.is_none() || engine.state.find(id).as_ref().is_some_and(sees));
        let reserved: BTreeMap<u32, u64> = engine.reserved_now(now).into_iter().collect();
        let mut links = Vec::new();
        for e in 0..self.topo.edge_count() as u32 {
            let l = self.topo.edge(e);
            let measured = match l.from {
                planner::topology::NodeRef::Switch(s) => self.loads.load(
                    self.topo.switches()[s as usize].id,
                    l.from_port,
                    Duration::from_secs(5),
                ),
                planner::topology::NodeRef::Host(_) => None,
            };
            let reserved_bps = reserved.get(&e).copied().unwrap_or(0);
            if reserved_bps == 0 && measured.is_none() {
                continue;
            }
            links.push(LinkView {
                link: self.topo.describe_edge(e),
                capacity_bps: l.capacity_bps,
                reserved_bps,
                measured_bps: measured.map(|m| m.rate_bps as u64),
                utilization: measured.map(|m| m.rate_bps / l.capacity_bps.max(1) as f64),
                queue_packets: measured.map(|m| m.queue_packets),
            });
        }
        let controller = ControllerView {
            version: env!("CARGO_PKG_VERSION").to_string(),
            fabric: self.topo.name().to_string(),
            ndsp_addr: self.ndsp_addr.to_string(),
            http_addr: self.http_addr.to_string(),
            election_id: self.election_id.to_string(),
            lead_time_ms: self.lead_ns as f64 / 1e6,
            state_file: self.store.describe(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            now_unix_ns: now,
            restored_reservations: self.restored.reservations,
            restored_diverged: diverged.cloned().collect(),
            links_down: engine
                .state
                .links_down
                .iter()
                .map(|l| l.to_string())
                .collect(),
            startup_reconcile_ms: *self.startup_reconcile_ms.lock().expect("lock"),
        };
        drop(inner);
        let switches = self
            .switches
            .values()
            .map(|h| {
                let status = h.status.borrow().clone();
                let role = match (status.connected, status.primary) {
                    (true, true) => "primary",
                    (true, false) => "backup",
                    _ => "disconnected",
                };
                SwitchView {
                    name: h.name.clone(),
                    addr: h.endpoint.addr.clone(),
                    device_id: h.endpoint.device_id,
                    role: role.to_string(),
                    status,
                }
            })
            .collect();
        let view = StatusView {
            controller,
            switches,
            reservations: ReservationsView {
                by_state,
                installed_flows,
                list,
            },
            links,
            tenant: None,
        };
        match tenant {
            Some(t) => view.scope_to(t),
            None => view,
        }
    }

    /// What a switch holds, decoded, with its drift from the intended state.
    pub async fn entries(&self, switch: &str) -> Result<EntriesView, (u16, String)> {
        let Some(handle) = self.switches.get(switch) else {
            let known: Vec<&str> = self.switches.keys().map(String::as_str).collect();
            return Err((
                404,
                format!(
                    "no switch {switch:?} in fabric {}; switches: {}",
                    self.topo.name(),
                    known.join(", ")
                ),
            ));
        };
        let actual = handle.read().await.map_err(|e| (503, e))?;
        let intended = {
            let mut inner = self.inner.lock().await;
            let inner = &mut *inner;
            let mut desired = inner
                .compiler
                .desired(&inner.engine.state, now_unix_ns())
                .map_err(|e| (500, e.to_string()))?;
            desired.remove(switch).unwrap_or_default()
        };
        let diff = switches::drift(&intended, actual.clone());
        let line = |e: &p4rt::proto::p4::v1::Entity| api::decode(&self.info, e).line();
        Ok(EntriesView {
            switch: switch.to_string(),
            addr: handle.endpoint.addr.clone(),
            entities: actual.iter().map(|e| api::decode(&self.info, e)).collect(),
            drift: api::DriftView {
                missing: diff.insert.iter().map(|(_, e)| line(e)).collect(),
                unexpected: diff.delete.iter().map(|(_, e)| line(e)).collect(),
                different: diff.modify.iter().map(|(_, e)| line(e)).collect(),
            },
        })
    }
}

#[derive(Serialize)]
struct Ready<'a> {
    pid: u32,
    ndsp: String,
    http: String,
    switches: BTreeMap<&'a str, &'a str>,
    /// PIDs of the BMv2 processes the controller started (`--bmv2`).
    switch_pids: BTreeMap<String, u32>,
    reconcile_ms: Option<f64>,
    restored_reservations: usize,
}

/// Run the daemon until SIGINT/SIGTERM.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let topo: &'static Topology = Box::leak(Box::new(config.topology));
    let started = Instant::now();
    if config.ha.is_some() && matches!(config.switches, Switches::Bmv2) {
        anyhow::bail!("--etcd needs --switches: replicas share the switches, they cannot each start their own");
    }

    // Switch endpoints (starting BMv2 processes if asked).
    let mut processes = Vec::new();
    let endpoints = match config.switches {
        Switches::Endpoints(e) => e,
        Switches::Bmv2 => {
            let tools = bmv2::Toolchain::find().map_err(|e| anyhow::anyhow!("--bmv2: {e}"))?;
            let mut e = BTreeMap::new();
            for sw in topo.switches() {
                let spec = bmv2::SwitchSpec::new(&sw.name, u64::from(sw.id))
                    .target_arg("--priority-queues")
                    .target_arg("8");
                let p = bmv2::Bmv2Switch::start(&tools, spec)
                    .with_context(|| format!("starting BMv2 for {}", sw.name))?;
                e.insert(
                    sw.name.clone(),
                    Endpoint {
                        addr: p.grpc_addr(),
                        device_id: u64::from(sw.id),
                        tls: None,
                    },
                );
                processes.push(p);
            }
            e
        }
    };
    for sw in topo.switches() {
        if !endpoints.contains_key(&sw.name) {
            anyhow::bail!(
                "switch {} of fabric {} has no endpoint in the switches file",
                sw.name,
                topo.name()
            );
        }
    }
    for name in endpoints.keys() {
        if topo.switch_by_name(name).is_none() {
            anyhow::bail!(
                "switches file names {name}, which is not a switch of fabric {}",
                topo.name()
            );
        }
    }

    let ndsp_listener = tokio::net::TcpListener::bind(config.ndsp_listen)
        .await
        .with_context(|| {
            format!(
                "NDSP: cannot listen on {} (in use? pass --ndsp ADDR)",
                config.ndsp_listen
            )
        })?;
    // With mutual TLS the write needs an operator's certificate already.
    if config.admin_token.is_none()
        && config.mtls.is_none()
        && !config.http_listen.ip().is_loopback()
    {
        anyhow::bail!(
            "--http {} is not a loopback address: the admin write (POST /v1/links) would be open to the network; pass --admin-token-file FILE (or serve it with mutual TLS: --tls-cert, --tls-key, --tls-client-ca)",
            config.http_listen
        );
    }
    let http_listener = tokio::net::TcpListener::bind(config.http_listen)
        .await
        .with_context(|| {
            format!(
                "HTTP: cannot listen on {} (in use? pass --http ADDR)",
                config.http_listen
            )
        })?;
    let ndsp_addr = ndsp_listener.local_addr()?;
    let http_addr = http_listener.local_addr()?;

    // NDSP is served from now on: followers answer where the leader is.
    let gate = Arc::new(LeaderGate::new(config.mtls.clone()));
    let service =
        ndsp::proto::demand_signaling_server::DemandSignalingServer::from_arc(gate.clone())
            .max_decoding_message_size(config.max_request_bytes);
    // TCP_NODELAY: answers are several small writes; with Nagle and the
    // peer's delayed ACK each RPC would wait ~40 ms.
    let incoming = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(ndsp_listener),
        |s| {
            s.inspect(|s| {
                let _ = s.set_nodelay(true);
            })
        },
    );
    let mut builder = tonic::transport::Server::builder();
    if let Some(mtls) = &config.mtls {
        builder = builder
            .tls_config(mtls.server.clone())
            .context("NDSP: the TLS certificate, key or client CA is not usable")?;
    }
    let mut server = tokio::spawn(
        builder
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown_signal()),
    );

    // The admin port answers from now on; a follower's routes until it leads.
    let (http_apps, apps) = tokio::sync::watch::channel(http::starting());
    tokio::spawn(http::serve(http_listener, apps, config.mtls.clone()));

    // Where the state survives; with replicas, wait to lead first.
    let mut replica = None;
    let (store, election_id, lost) = match config.ha.clone() {
        None => match &config.state_file {
            Some(path) => (Store::File(path.clone()), config.election_id, None),
            None => (Store::Memory, config.election_id, None),
        },
        Some(ha) => {
            let me = ha::LeaderInfo {
                replica: ha.replica.clone(),
                ndsp: ndsp_addr.to_string(),
                http: http_addr.to_string(),
            };
            let joined = Arc::new(ha::join(ha).await?);
            replica = Some(joined.clone());
            gate.follow(joined.clone());
            let _ = http_apps.send(http::following(joined.clone()));
            eprintln!(
                "foresight controller: replica {} following on {ndsp_addr}; campaigning",
                me.replica
            );
            // SIGTERM while following ends the campaign (and the lease).
            let leadership = tokio::select! {
                won = joined.campaign(&me) => won?,
                done = &mut server => {
                    joined.leave().await;
                    done.context("NDSP server task")?.context("NDSP server")?;
                    tracing::info!("shutting down (was following)");
                    return Ok(());
                }
            };
            let id = leadership.election_id();
            let lost = leadership.lost.clone();
            (Store::Etcd(Box::new(leadership)), id, Some(lost))
        }
    };
    let now = now_unix_ns();
    let state = match &store {
        Store::Memory => None,
        Store::File(path) => State::load(path, topo.name())?,
        Store::Etcd(l) => l.load(topo.name()).await?,
    };
    let reloaded = state.is_some();
    let state = state.unwrap_or_else(|| State::new(topo.name(), now));
    let (mut engine, restored) = Engine::new(
        topo,
        config.planner.clone(),
        config.tenant_shares.clone(),
        state,
    )?;
    engine.reoptimization = Reoptimization {
        pending: config.reoptimize != ReoptimizeMode::Off,
        installed_not_started: config.reoptimize == ReoptimizeMode::NotStarted,
        lead_ns: config.policy.lead_ns,
    };
    let expired = engine.expire(now);
    if reloaded {
        tracing::info!(
            live = restored.reservations,
            expired_while_down = expired.len(),
            diverged = restored.diverged.len(),
            "state reloaded"
        );
        for id in &restored.diverged {
            tracing::warn!(reservation = %id, "recorded path crosses a link that is down; re-planned");
        }
    }
    let devices = Arc::new(config.devices);
    let mut compiler = Compiler::new(
        topo,
        config.pipeline.info.clone(),
        devices.clone(),
        config.policy,
    )?;
    if !engine.state.links_down.is_empty() {
        compiler.set_down_edges(&engine.down_edges())?;
        for l in &engine.state.links_down {
            tracing::warn!(link = %l, "link is down (restored from the saved state)");
        }
    }

    let metrics = Arc::new(Metrics::default());
    if config.learning.is_some_and(|l| l.from == LearnFrom::Int) && config.int_listen.is_none() {
        anyhow::bail!(
            "learning iterations (T+5) from INT needs the INT collector: pass --int-listen"
        );
    }
    let learning = config.learning.map(|l| {
        // What the planner lets one NIC reserve (its headroom kept).
        let headroom = config.planner.headroom;
        let nic = topo
            .hosts()
            .iter()
            .map(|h| (h.ip, (h.capacity_bps as f64 * headroom) as u64))
            .collect();
        Arc::new(StdMutex::new(Learning::new(l, nic)))
    });
    let loads = Arc::new(LinkLoads::with_config(topo, &devices, config.telemetry));
    if let Some(addr) = config.int_listen {
        let socket = tokio::net::UdpSocket::bind(addr)
            .await
            .with_context(|| format!("INT collector: cannot listen on UDP {addr}"))?;
        tracing::info!(addr = %socket.local_addr()?, "INT collector listening");
        // INT reports feed learning only when it learns from them.
        let learning = learning
            .clone()
            .filter(|_| config.learning.is_some_and(|l| l.from == LearnFrom::Int));
        tokio::spawn(telemetry::collect(
            socket,
            loads.clone(),
            metrics.clone(),
            learning,
        ));
    }

    let initial = compiler.desired(&engine.state, now)?;
    let mut handles = BTreeMap::new();
    for (name, ep) in &endpoints {
        let state = Arc::new(initial.get(name).cloned().unwrap_or_default());
        let handle = SwitchHandle::spawn(
            name.clone(),
            ep.clone(),
            config.pipeline.clone(),
            election_id,
            state,
            metrics.clone(),
        );
        handles.insert(name.clone(), handle);
    }
    if reloaded && (!expired.is_empty() || !restored.diverged.is_empty()) {
        store.save(&engine.state, &metrics).await;
    }
    if let Some(lost) = lost {
        let statuses = handles
            .iter()
            .map(|(name, h): (&String, &SwitchHandle)| (name.clone(), h.status.clone()))
            .collect();
        ha::watch_fences(lost, statuses, election_id);
    }

    let (events, _) = broadcast::channel(1024);
    let controller = Arc::new(Controller {
        inner: tokio::sync::Mutex::new(Inner { engine, compiler }),
        switches: handles,
        metrics,
        loads,
        events,
        wake: Notify::new(),
        topo,
        info: config.pipeline.info.clone(),
        store,
        lead_ns: config.policy.lead_ns,
        started,
        restored,
        startup_reconcile_ms: StdMutex::new(None),
        ndsp_addr,
        http_addr,
        election_id,
        learning,
        watched_leaves: StdMutex::new(BTreeSet::new()),
        admission: Admission::new(config.limits),
    });
    if let Some(l) = config.learning {
        {
            // Jobs restored from the state file are watched from the start.
            let mut inner = controller.inner.lock().await;
            controller.sync_jobs(&mut inner);
            drop(controller.commit(&mut inner, now_unix_ns(), false).await);
        }
        tokio::spawn(controller.clone().learn(l.idle_ns));
        if let LearnFrom::Counters { poll_ns } = l.from {
            let counters = WatchCounters::new(&controller.info)?;
            tokio::spawn(controller.clone().poll_watch_counters(counters, poll_ns));
        }
    }
    // The admin port now serves the leader's routes (a follower's until now).
    let _ = http_apps.send(http::router(
        controller.clone(),
        config.admin_token.clone(),
        config.mtls.is_some(),
    ));
    tokio::spawn(controller.clone().scheduler());
    if config.int_listen.is_some() {
        tokio::spawn(controller.clone().forecast_watch(config.mismatch));
    }

    // Start-up reconciliation: every switch holds the intended state.
    {
        let c = controller.clone();
        let ready_file = config.ready_file.clone();
        let switch_wait = config.switch_wait;
        let endpoints = endpoints.clone();
        let switch_pids: BTreeMap<String, u32> = processes
            .iter()
            .map(|p: &bmv2::Bmv2Switch| (p.name().to_string(), p.pid()))
            .collect();
        tokio::spawn(async move {
            let mut all = true;
            let deadline = Instant::now() + switch_wait;
            for h in c.switches.values() {
                let left = deadline.saturating_duration_since(Instant::now());
                if !h.wait_in_sync(left).await {
                    tracing::warn!(switch = %h.name, waited_s = switch_wait.as_secs_f64(),
                        "not reconciled at start-up; still trying (ready without it)");
                    all = false;
                }
            }
            let ms = started.elapsed().as_secs_f64() * 1e3;
            if all {
                *c.startup_reconcile_ms.lock().expect("lock") = Some(ms);
                tracing::info!(
                    millis = ms,
                    switches = c.switches.len(),
                    "every switch reconciled"
                );
            }
            if let Some(path) = ready_file {
                let ready = Ready {
                    pid: std::process::id(),
                    ndsp: c.ndsp_addr.to_string(),
                    http: c.http_addr.to_string(),
                    switches: endpoints
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.addr.as_str()))
                        .collect(),
                    switch_pids,
                    reconcile_ms: all.then_some(ms),
                    restored_reservations: c.restored.reservations,
                };
                let tmp = path.with_extension("tmp");
                let ok = std::fs::write(&tmp, serde_json::to_vec(&ready).unwrap_or_default())
                    .and_then(|_| std::fs::rename(&tmp, &path));
                if let Err(e) = ok {
                    tracing::error!(%e, path = %path.display(), "cannot write the ready file");
                }
            }
        });
    }

    tracing::info!(ndsp = %ndsp_addr, http = %http_addr, fabric = topo.name(), switches = endpoints.len(), election_id = %election_id, "controller running");
    eprintln!("foresight controller: NDSP on {ndsp_addr}, metrics and admin on http://{http_addr} ({} switches)", endpoints.len());
    gate.promote(service::Ndsp::new(controller.clone()));
    server
        .await
        .context("NDSP server task")?
        .context("NDSP server")?;
    tracing::info!("shutting down");
    if let Some(r) = replica {
        // A leader that stops on purpose hands over at once, not a lease later.
        r.leave().await;
    }
    drop(processes);
    Ok(())
}

/// What each flow of some reservations got, for the log: `src>dst
/// status rate path` per flow (`;`-separated), e.g. `10.0.1.1>10.0.2.1
/// admitted 4.0Mb/s leaf1:5,spine1:2,leaf2:3`.
fn granted(records: &[state::Reservation]) -> String {
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

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
