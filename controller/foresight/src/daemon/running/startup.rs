//! Start-up and shutdown of the daemon, step by step, in the order they
//! must happen: the switches' endpoints (BMv2 started if asked); the
//! listeners; NDSP and the admin endpoint served at once (a follower
//! answers where the leader is); where the state survives (with
//! replicas, after winning the election); the engine over the reloaded
//! state; learning and the INT collector; one task per switch; the
//! controller and its loops; the start-up reconciliation; then serving
//! until SIGINT/SIGTERM.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use installer::Devices;
use planner::Topology;
use serde::Serialize;
use tokio::sync::{broadcast, Notify};

use super::config::{Config, EntropyConfig, ReoptimizeMode, Switches};
use crate::daemon::control::controller::{Controller, Inner};
use crate::daemon::control::limits::TenantLimits;
use crate::daemon::engine::{Engine, EntropySteering, Reoptimization, Restored};
use crate::daemon::feedback::watch_counters::WatchCounters;
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::inputs::learning::{LearnFrom, Learning, LearningConfig};
use crate::daemon::inputs::requests;
use crate::daemon::inputs::telemetry::{self, LinkLoads};
use crate::daemon::monitoring::metrics::Metrics;
use crate::daemon::northbound::http;
use crate::daemon::northbound::identity::Mtls;
use crate::daemon::northbound::leader_gate::LeaderGate;
use crate::daemon::northbound::service;
use crate::daemon::persistence::ha;
use crate::daemon::persistence::state::State;
use crate::daemon::persistence::store::Store;
use crate::daemon::southbound::desired::{Compiler, Policy};
use crate::daemon::southbound::switches::SwitchHandle;
use crate::fabric::{Endpoint, Pipeline};

/// The NDSP server task: ends on SIGINT/SIGTERM.
type Server = tokio::task::JoinHandle<Result<(), tonic::transport::Error>>;

/// What the admin port serves: swapped from the starting routes to a
/// follower's, then to the leader's.
type AdminRoutes = tokio::sync::watch::Sender<axum::Router>;

/// Run the daemon until SIGINT/SIGTERM.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let topo: &'static Topology = Box::leak(Box::new(config.topology));
    let started = Instant::now();
    if config.ha.is_some() && matches!(config.switches, Switches::Bmv2) {
        anyhow::bail!("--etcd needs --switches: replicas share the switches, they cannot each start their own");
    }
    let (endpoints, processes) = switch_endpoints(config.switches, topo)?;
    let (ndsp_listener, http_listener) = listen(
        config.ndsp_listen,
        config.http_listen,
        config.admin_token.is_some() || config.mtls.is_some(),
    )
    .await?;
    let ndsp_addr = ndsp_listener.local_addr()?;
    let http_addr = http_listener.local_addr()?;

    // NDSP is served from now on: followers answer where the leader is.
    let (gate, mut server) =
        serve_ndsp(ndsp_listener, config.mtls.clone(), config.max_request_bytes)?;
    // The admin port answers from now on; a follower's routes until it leads.
    let (http_apps, apps) = tokio::sync::watch::channel(http::starting());
    tokio::spawn(http::serve(http_listener, apps, config.mtls.clone()));

    let addrs = Addrs {
        ndsp: ndsp_addr,
        http: http_addr,
    };
    // Alone, the state file (replicas keep the state in etcd).
    let file = match (&config.ha, &config.state_file) {
        (None, Some(path)) => Some(Store::file(path, topo.name())?),
        _ => None,
    };
    let Some(mut leading) = take_the_lead(
        config.ha,
        file,
        config.election_id,
        addrs,
        &gate,
        &http_apps,
        &mut server,
    )
    .await?
    else {
        tracing::info!("shutting down (was following)");
        return Ok(());
    };
    let lead_ns = config.policy.lead_ns;
    let reoptimization = Reoptimization {
        pending: config.reoptimize != ReoptimizeMode::Off,
        installed_not_started: config.reoptimize == ReoptimizeMode::NotStarted,
        lead_ns,
    };
    let now = now_unix_ns();
    let Restart {
        mut engine,
        restored,
        expired,
        reloaded,
    } = restore_engine(
        topo,
        &mut leading,
        now,
        config.planner.clone(),
        config.tenant_shares,
        reoptimization,
        config.steering,
    )
    .await?;
    engine.set_standing_patterns(config.standing_patterns);
    let devices = Arc::new(config.devices);
    let mut compiler = switch_compiler(
        topo,
        &config.pipeline,
        devices.clone(),
        config.policy,
        &engine,
    )?;

    let metrics = Arc::new(Metrics::default());
    let learning = learner(
        config.learning,
        config.int_listen,
        topo,
        config.planner.headroom,
    )?;
    let loads = Arc::new(LinkLoads::with_config(topo, &devices, config.telemetry));
    if let Some(addr) = config.int_listen {
        // INT reports feed learning only when it learns from them.
        let learning = learning
            .clone()
            .filter(|_| config.learning.is_some_and(|l| l.from == LearnFrom::Int));
        collect_int(addr, loads.clone(), metrics.clone(), learning).await?;
    }

    let handles = spawn_switches(
        &endpoints,
        &config.pipeline,
        leading.election_id,
        compiler.desired(&engine.state, now)?,
        &metrics,
    );
    if reloaded
        && (!expired.is_empty() || !restored.diverged.is_empty())
        && leading.store.save(&engine.state, &metrics).await
    {
        engine.state.reservations.committed();
    }
    if let Some(lost) = leading.lost {
        let statuses = handles
            .iter()
            .map(|(name, h): (&String, &SwitchHandle)| (name.clone(), h.status.clone()))
            .collect();
        ha::watch_fences(lost, statuses, leading.election_id);
    }

    let (events, _) = broadcast::channel(1024);
    let controller = Arc::new(Controller {
        inner: tokio::sync::Mutex::new(Inner { engine, compiler }),
        switches: handles,
        metrics,
        loads,
        events,
        settled: tokio::sync::watch::channel(0).0,
        wake: Notify::new(),
        topo,
        info: config.pipeline.info.clone(),
        store: leading.store,
        lead_ns,
        started,
        restored,
        startup_reconcile_ms: StdMutex::new(None),
        ndsp_addr,
        http_addr,
        election_id: leading.election_id,
        learning,
        watched_leaves: StdMutex::new(BTreeSet::new()),
        admission: TenantLimits::new(config.limits),
    });
    if let Some(l) = config.learning {
        start_predictions(&controller, l).await?;
    }
    if let Some(f) = config.follow {
        crate::daemon::feedback::follow::start(&controller, f)?;
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
    reconcile_at_startup(
        controller.clone(),
        &endpoints,
        &processes,
        config.ready_file.clone(),
        config.switch_wait,
    );

    tracing::info!(ndsp = %ndsp_addr, http = %http_addr, fabric = topo.name(), switches = endpoints.len(), election_id = %leading.election_id, "controller running");
    eprintln!("foresight controller: NDSP on {ndsp_addr}, metrics and admin on http://{http_addr} ({} switches)", endpoints.len());
    gate.promote(service::Ndsp::new(controller.clone()));
    server
        .await
        .context("NDSP server task")?
        .context("NDSP server")?;
    tracing::info!("shutting down");
    if let Some(r) = leading.replica {
        // A leader that stops on purpose hands over at once, not a lease later.
        r.leave().await;
    }
    drop(processes);
    Ok(())
}

/// Where this controller answers.
#[derive(Clone, Copy)]
struct Addrs {
    ndsp: SocketAddr,
    http: SocketAddr,
}

/// The switches' endpoints: given, or of the BMv2 processes started here
/// (stopped when they are dropped). Every topology switch must have one,
/// and every endpoint must be a topology switch.
fn switch_endpoints(
    switches: Switches,
    topo: &Topology,
) -> anyhow::Result<(BTreeMap<String, Endpoint>, Vec<bmv2::Bmv2Switch>)> {
    let mut processes = Vec::new();
    let endpoints = match switches {
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
    Ok((endpoints, processes))
}

/// Bind the NDSP and admin ports. The admin port's write needs a token or
/// mutual TLS (an operator's certificate) unless it listens on loopback only.
async fn listen(
    ndsp: SocketAddr,
    http: SocketAddr,
    write_is_guarded: bool,
) -> anyhow::Result<(tokio::net::TcpListener, tokio::net::TcpListener)> {
    let ndsp_listener = tokio::net::TcpListener::bind(ndsp)
        .await
        .with_context(|| format!("NDSP: cannot listen on {ndsp} (in use? pass --ndsp ADDR)"))?;
    if !write_is_guarded && !http.ip().is_loopback() {
        anyhow::bail!(
            "--http {http} is not a loopback address: the admin write (POST /v1/links) would be open to the network; pass --admin-token-file FILE (or serve it with mutual TLS: --tls-cert, --tls-key, --tls-client-ca)"
        );
    }
    let http_listener = tokio::net::TcpListener::bind(http)
        .await
        .with_context(|| format!("HTTP: cannot listen on {http} (in use? pass --http ADDR)"))?;
    Ok((ndsp_listener, http_listener))
}

/// Serve NDSP behind the leader gate (which answers where the leader is
/// until this controller leads), until SIGINT/SIGTERM.
fn serve_ndsp(
    listener: tokio::net::TcpListener,
    mtls: Option<Mtls>,
    max_request_bytes: usize,
) -> anyhow::Result<(Arc<LeaderGate>, Server)> {
    let gate = Arc::new(LeaderGate::new(mtls.clone()));
    let service =
        ndsp::proto::demand_signaling_server::DemandSignalingServer::from_arc(gate.clone())
            .max_decoding_message_size(max_request_bytes);
    // TCP_NODELAY: answers are several small writes; with Nagle and the
    // peer's delayed ACK each RPC would wait ~40 ms.
    let incoming = tokio_stream::StreamExt::map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        |s| {
            s.inspect(|s| {
                let _ = s.set_nodelay(true);
            })
        },
    );
    let mut builder = tonic::transport::Server::builder();
    if let Some(mtls) = &mtls {
        builder = builder
            .tls_config(mtls.server.clone())
            .context("NDSP: the TLS certificate, key or client CA is not usable")?;
    }
    let server = tokio::spawn(
        builder
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown_signal()),
    );
    Ok((gate, server))
}

/// What leading gives: where the state survives and the election id the
/// switches are written with; with replicas, the replica and the signal
/// that its lease was lost.
struct Leading {
    store: Store,
    /// What the state file held when it was opened (etcd is read later).
    saved: Option<State>,
    election_id: u128,
    lost: Option<tokio::sync::watch::Receiver<bool>>,
    replica: Option<Arc<ha::Replica>>,
}

/// Where the state survives. Alone: the state file (or memory). With
/// replicas: follow until this replica wins the election, then the state
/// in etcd, fenced by the leadership. `None` when the daemon is stopped
/// while following.
async fn take_the_lead(
    ha: Option<ha::HaConfig>,
    file: Option<(Store, Option<State>)>,
    election_id: u128,
    addrs: Addrs,
    gate: &LeaderGate,
    http_apps: &AdminRoutes,
    server: &mut Server,
) -> anyhow::Result<Option<Leading>> {
    let Some(ha) = ha else {
        let (store, saved) = file.unwrap_or((Store::Memory, None));
        return Ok(Some(Leading {
            store,
            saved,
            election_id,
            lost: None,
            replica: None,
        }));
    };
    let ndsp_addr = addrs.ndsp;
    let me = ha::LeaderInfo {
        replica: ha.replica.clone(),
        ndsp: ndsp_addr.to_string(),
        http: addrs.http.to_string(),
    };
    let joined = Arc::new(ha::join(ha).await?);
    gate.follow(joined.clone());
    let _ = http_apps.send(http::following(joined.clone()));
    eprintln!(
        "foresight controller: replica {} following on {ndsp_addr}; campaigning",
        me.replica
    );
    // SIGTERM while following ends the campaign (and the lease).
    let leadership = tokio::select! {
        won = joined.campaign(&me) => won?,
        done = server => {
            joined.leave().await;
            done.context("NDSP server task")?.context("NDSP server")?;
            return Ok(None);
        }
    };
    let election_id = leadership.election_id();
    let lost = leadership.lost.clone();
    Ok(Some(Leading {
        store: Store::Etcd(Box::new(leadership)),
        saved: None,
        election_id,
        lost: Some(lost),
        replica: Some(joined),
    }))
}

/// The engine over the state the store holds (or a fresh one), with what
/// expired while the controller was down retired.
struct Restart {
    engine: Engine,
    restored: Restored,
    expired: Vec<String>,
    /// A saved state was found.
    reloaded: bool,
}

async fn restore_engine(
    topo: &'static Topology,
    leading: &mut Leading,
    now: u64,
    planner: planner::PlannerConfig,
    shares: planner::shares::TenantShares,
    reoptimization: Reoptimization,
    steering: Option<EntropyConfig>,
) -> anyhow::Result<Restart> {
    let state = match &leading.store {
        Store::Etcd(l) => l.load(topo.name()).await?,
        Store::Memory | Store::File(_) => leading.saved.take(),
    };
    let reloaded = state.is_some();
    let state = state.unwrap_or_else(|| State::new(topo.name(), now));
    let jobs = requests::registered_jobs(&state)?;
    let entropy = steering.map(|s| EntropySteering::new(topo, &planner, s.ports, s.fallback_sr));
    let (mut engine, restored) = Engine::new(topo, planner, shares, state, jobs)?;
    engine.reoptimization = reoptimization;
    engine.steering = entropy;
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
    Ok(Restart {
        engine,
        restored,
        expired,
        reloaded,
    })
}

/// The switch state compiler, with the links the restored state has down.
fn switch_compiler(
    topo: &'static Topology,
    pipeline: &Pipeline,
    devices: Arc<Devices>,
    policy: Policy,
    engine: &Engine,
) -> anyhow::Result<Compiler> {
    let mut compiler = Compiler::new(topo, pipeline.info.clone(), devices, policy)?;
    if !engine.state.links_down.is_empty() {
        compiler.set_down_edges(&engine.down_edges())?;
        for l in &engine.state.links_down {
            tracing::warn!(link = %l, "link is down (restored from the saved state)");
        }
    }
    Ok(compiler)
}

/// Learning, when asked for, with what the planner lets one NIC reserve
/// (its headroom kept). Learning from INT needs the INT collector.
fn learner(
    config: Option<LearningConfig>,
    int_listen: Option<SocketAddr>,
    topo: &Topology,
    headroom: f64,
) -> anyhow::Result<Option<Arc<StdMutex<Learning>>>> {
    if config.is_some_and(|l| l.from == LearnFrom::Int) && int_listen.is_none() {
        anyhow::bail!(
            "learning iterations (T+5) from INT needs the INT collector: pass --int-listen"
        );
    }
    Ok(config.map(|l| {
        let nic = topo
            .hosts()
            .iter()
            .map(|h| (h.ip, (h.capacity_bps as f64 * headroom) as u64))
            .collect();
        Arc::new(StdMutex::new(Learning::new(l, nic)))
    }))
}

/// Listen for INT reports on `addr`: link loads, and `learning` when it
/// learns from them.
async fn collect_int(
    addr: SocketAddr,
    loads: Arc<LinkLoads>,
    metrics: Arc<Metrics>,
    learning: Option<Arc<StdMutex<Learning>>>,
) -> anyhow::Result<()> {
    let socket = tokio::net::UdpSocket::bind(addr)
        .await
        .with_context(|| format!("INT collector: cannot listen on UDP {addr}"))?;
    tracing::info!(addr = %socket.local_addr()?, "INT collector listening");
    tokio::spawn(telemetry::collect(socket, loads, metrics, learning));
    Ok(())
}

/// One task per switch, each given its intended state from `initial`.
fn spawn_switches(
    endpoints: &BTreeMap<String, Endpoint>,
    pipeline: &Pipeline,
    election_id: u128,
    initial: BTreeMap<String, installer::intent::Resolved>,
    metrics: &Arc<Metrics>,
) -> BTreeMap<String, SwitchHandle> {
    let mut handles = BTreeMap::new();
    for (name, ep) in endpoints {
        let state = Arc::new(installer::layered::Layered::flat(Arc::new(
            initial.get(name).cloned().unwrap_or_default(),
        )));
        let handle = SwitchHandle::spawn(
            name.clone(),
            ep.clone(),
            pipeline.clone(),
            election_id,
            state,
            metrics.clone(),
        );
        handles.insert(name.clone(), handle);
    }
    handles
}

/// The prediction loop, and with `--learn-from counters` the poll of the
/// watch counters. Jobs restored from the state are watched from the start.
async fn start_predictions(controller: &Arc<Controller>, l: LearningConfig) -> anyhow::Result<()> {
    {
        let mut inner = controller.inner.lock().await;
        controller.sync_jobs(&mut inner);
        drop(controller.commit(&mut inner, now_unix_ns(), false).await);
    }
    tokio::spawn(controller.clone().learn(l.idle_ns));
    if let (LearnFrom::Counters { poll_ns }, Some(learning)) = (l.from, &controller.learning) {
        let counters = WatchCounters::new(&controller.info)?;
        let learning = learning.clone();
        tokio::spawn(controller.clone().poll_watch_counters(
            counters,
            poll_ns,
            |c| {
                c.watched_leaves
                    .lock()
                    .expect("leaves lock")
                    .iter()
                    .cloned()
                    .collect()
            },
            move |src, dst, bytes, at| {
                learning
                    .lock()
                    .expect("learning lock")
                    .record(src, dst, bytes, at)
            },
        ));
    }
    Ok(())
}

/// What the ready file says (JSON), once every switch is reconciled or
/// the wait is over.
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

/// Start-up reconciliation, in the background: wait until every switch
/// holds the intended state (at most `switch_wait`), record how long it
/// took, and write the ready file.
fn reconcile_at_startup(
    c: Arc<Controller>,
    endpoints: &BTreeMap<String, Endpoint>,
    processes: &[bmv2::Bmv2Switch],
    ready_file: Option<PathBuf>,
    switch_wait: Duration,
) {
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
        let ms = c.started.elapsed().as_secs_f64() * 1e3;
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
