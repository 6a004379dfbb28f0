//! The controller daemon (`foresight controller`). This file is only its
//! map: the modules, and the names the rest of the crate uses.
//!
//! Running it:
//! * [`config`] — what the command line becomes;
//! * [`controller`] — the controller and `transact`, the one way a change
//!   reaches the switches (lock, mutate, commit, reschedule, acknowledge,
//!   publish);
//! * [`clock`] — Unix time in ns;
//! * [`events`] — what `WatchEvents` streams relay.
//!
//! Deciding:
//! * [`engine`] — NDSP requests → planner → reservation records (no I/O);
//! * [`requests`] — what the engine is handed beside a validated request
//!   (idempotency keys, recorded registrations, predicted batches);
//! * [`state`] — intended state (jobs, reservations), the JSON state file;
//! * [`store`], [`ha`] — where it survives: a file, or etcd for replicas
//!   that elect a leader;
//! * [`limits`] — what one tenant may ask (reservations, requests/s).
//!
//! Loops and commands that change the state through `transact`:
//! * [`service`] — the NDSP gRPC service ([`leader_gate`] in front of it);
//! * [`scheduler`] — installs and expiries at their moments;
//! * [`predictions`] — reserving what learning predicts ([`learning`],
//!   fed by [`telemetry`] or [`watch_counters`]);
//! * [`link_state`] — the operator's link down/up.
//!
//! The switches:
//! * [`desired`] — what every switch should hold at a given moment;
//! * [`switches`] — one task per switch: session, pipeline, reconcile, writes;
//! * [`switch_status`] — what each switch task publishes about its switch.
//!
//! Watching and reading:
//! * [`telemetry`] — INT report collector and link loads;
//! * [`forecast_mismatches`] — traffic that differs from its forecast;
//! * [`views`] — read-only views (status, a switch's entries, paths);
//! * [`metrics`], [`http`], [`api`], [`admin_token`], [`identity`] —
//!   Prometheus, the admin endpoint, and who may call what.

pub mod admin_token;
pub mod api;
pub mod clock;
pub mod config;
pub mod controller;
pub mod desired;
pub mod engine;
pub mod events;
pub mod forecast_mismatches;
pub mod ha;
pub mod http;
pub mod identity;
pub mod leader_gate;
pub mod learning;
pub mod limits;
pub mod link_state;
pub mod metrics;
pub mod predictions;
pub mod requests;
pub mod scheduler;
pub mod service;
pub mod state;
pub mod store;
pub mod switch_status;
pub mod switches;
pub mod telemetry;
pub mod views;
pub mod watch_counters;

pub use clock::now_unix_ns;
pub use config::{Config, ReoptimizeMode, Switches};
pub use controller::Controller;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use planner::Topology;
use serde::Serialize;
use tokio::sync::{broadcast, Notify};

use self::api::{
    ControllerView, EntriesView, LinkView, ReservationSummary, ReservationsView, StatusView,
    SwitchView,
};
use self::controller::Inner;
use self::desired::Compiler;
use self::engine::{Engine, Reoptimization};
use self::leader_gate::LeaderGate;
use self::learning::{LearnFrom, Learning};
use self::limits::Admission;
use self::metrics::Metrics;
use self::state::{Lifecycle, Reservation, State};
use self::store::Store;
use self::switches::SwitchHandle;
use self::telemetry::LinkLoads;
use self::watch_counters::WatchCounters;
use crate::fabric::Endpoint;

impl Controller {
    /// The status view.
    pub async fn status(&self) -> StatusView {
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
        for r in &engine.state.reservations {
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
        for r in engine.state.history.iter().rev().take(20) {
            list.push(summary(r));
        }
        *by_state
            .entry(Lifecycle::Expired.name().into())
            .or_default() += engine.state.history.iter().filter(|r| !r.cancelled).count();
        *by_state
            .entry(Lifecycle::Cancelled.name().into())
            .or_default() += engine.state.history.iter().filter(|r| r.cancelled).count();
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
            restored_diverged: self.restored.diverged.clone(),
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
        StatusView {
            controller,
            switches,
            reservations: ReservationsView {
                by_state,
                installed_flows,
                list,
            },
            links,
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
    if config.admin_token.is_none() && !config.http_listen.ip().is_loopback() {
        anyhow::bail!(
            "--http {} is not a loopback address: the admin write (POST /v1/links) would be open to the network; pass --admin-token-file FILE",
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
    let jobs = requests::registered_jobs(&state)?;
    let (mut engine, restored) = Engine::new(
        topo,
        config.planner.clone(),
        config.tenant_shares.clone(),
        state,
        jobs,
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
