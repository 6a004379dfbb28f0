//! One task per switch. Each owns its P4Runtime session and what it last
//! wrote, and runs: connect (retrying) → become primary → make sure the
//! switch runs the Foresight pipeline (pushed only if it does not: pushing
//! wipes the switch) → reconcile (read what it holds, diff against the
//! intended state, apply the minimal changes) → then apply each new
//! intended state as the diff from the last one, without reading back.
//! A lost session (switch restart) or regained mastership starts over at
//! connect or reconcile; intended states that arrive meanwhile are kept
//! and reconciled when the switch is back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use installer::intent::Resolved;
use installer::layered::{diff_layered, Layered};
use installer::reconcile::{apply_diff, reconcile, Diff};
use p4rt::proto::p4::v1 as p4;
use p4rt::{Mastership, Switch, SwitchOptions};
use tokio::sync::{mpsc, oneshot, watch};

use crate::daemon::monitoring::metrics::Metrics;
use crate::daemon::monitoring::switch_status::{ReconcileReport, SwitchStatus};
use crate::fabric::{Endpoint, Pipeline};

/// Updates per Write RPC.
const BATCH: usize = 1000;

enum Command {
    Apply {
        state: Arc<Layered>,
        done: oneshot::Sender<Result<usize, String>>,
    },
    Read {
        /// What to read; `None`: everything the controller writes.
        entities: Option<Vec<p4::Entity>>,
        done: oneshot::Sender<Result<Vec<p4::Entity>, String>>,
    },
}

/// The handle of a switch task.
pub struct SwitchHandle {
    pub name: String,
    pub endpoint: Endpoint,
    tx: mpsc::UnboundedSender<Command>,
    pub status: watch::Receiver<SwitchStatus>,
}

impl SwitchHandle {
    /// Start the task; it reconciles the switch with `initial` once connected.
    pub fn spawn(
        name: String,
        endpoint: Endpoint,
        pipeline: Pipeline,
        election_id: u128,
        initial: Arc<Layered>,
        metrics: Arc<Metrics>,
    ) -> SwitchHandle {
        let (tx, rx) = mpsc::unbounded_channel();
        let (status_tx, status) = watch::channel(SwitchStatus::default());
        let actor = Actor {
            name: name.clone(),
            options: SwitchOptions::new(&endpoint.addr, endpoint.device_id)
                .election_id(election_id)
                .tls(endpoint.tls.clone()),
            pipeline,
            latest: initial,
            applied: None,
            rx,
            status: status_tx,
            metrics,
        };
        tokio::spawn(actor.run());
        SwitchHandle {
            name,
            endpoint,
            tx,
            status,
        }
    }

    /// Send a new intended state; the receiver says how many entities
    /// changed once the switch acknowledged (or why not).
    pub fn apply(&self, state: Arc<Layered>) -> oneshot::Receiver<Result<usize, String>> {
        let (done, rx) = oneshot::channel();
        if self.tx.send(Command::Apply { state, done }).is_err() {
            tracing::error!(switch = %self.name, "switch task is gone");
        }
        rx
    }

    /// Everything the switch holds (all tables, ECMP members and groups,
    /// the INT clone session).
    pub async fn read(&self) -> Result<Vec<p4::Entity>, String> {
        self.read_some(None).await
    }

    /// These entities (wildcards allowed), as the switch holds them now:
    /// counters, for instance. Served by the switch task between writes.
    pub async fn read_entities(
        &self,
        entities: Vec<p4::Entity>,
    ) -> Result<Vec<p4::Entity>, String> {
        self.read_some(Some(entities)).await
    }

    async fn read_some(
        &self,
        entities: Option<Vec<p4::Entity>>,
    ) -> Result<Vec<p4::Entity>, String> {
        let (done, rx) = oneshot::channel();
        self.tx
            .send(Command::Read { entities, done })
            .map_err(|_| "switch task is gone".to_string())?;
        rx.await.map_err(|_| "switch task is gone".to_string())?
    }

    /// Wait until the switch holds the last intended state (or `timeout`).
    pub async fn wait_in_sync(&self, timeout: Duration) -> bool {
        let mut status = self.status.clone();
        tokio::time::timeout(timeout, status.wait_for(|s| s.in_sync))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

struct Actor {
    name: String,
    options: SwitchOptions,
    pipeline: Pipeline,
    /// The last intended state received.
    latest: Arc<Layered>,
    /// What the switch holds by our account (after a reconcile or apply).
    applied: Option<Arc<Layered>>,
    rx: mpsc::UnboundedReceiver<Command>,
    status: watch::Sender<SwitchStatus>,
    metrics: Arc<Metrics>,
}

enum Next {
    Reconnect,
    Resync,
    Stop,
}

impl Actor {
    async fn run(mut self) {
        loop {
            let Some(switch) = self.connect().await else {
                return;
            };
            let switch = Arc::new(switch);
            loop {
                match self.session(&switch).await {
                    Next::Resync => continue,
                    Next::Reconnect => break,
                    Next::Stop => return,
                }
            }
            self.applied = None;
            self.status.send_modify(|s| {
                s.connected = false;
                s.primary = false;
                s.in_sync = false;
            });
            tracing::warn!(switch = %self.name, "session lost; reconnecting");
        }
    }

    fn set_error(&self, err: impl std::fmt::Display) {
        let text = err.to_string();
        self.status.send_modify(|s| s.last_error = Some(text));
    }

    /// Commands while the switch cannot be written: keep the newest state.
    fn offline(&mut self, cmd: Command, why: &str) {
        match cmd {
            Command::Apply { state, done } => {
                self.latest = state;
                self.status.send_modify(|s| s.in_sync = false);
                let _ = done.send(Err(format!(
                    "switch {} {why}; its intended state will be reconciled when it is back",
                    self.name
                )));
            }
            Command::Read { done, .. } => {
                let _ = done.send(Err(format!("switch {} {why}", self.name)));
            }
        }
    }

    /// Connect (retrying forever), serving commands meanwhile.
    async fn connect(&mut self) -> Option<Switch> {
        let options = self.options.clone();
        let name = self.name.clone();
        let status = self.status.clone();
        let attempt = async move {
            let mut delay = Duration::from_millis(100);
            loop {
                match Switch::connect_with_retry(options.clone(), Duration::from_secs(5)).await {
                    Ok(sw) => return sw,
                    Err(e) => {
                        tracing::warn!(switch = %name, addr = %options.addr, %e, "cannot connect");
                        let text = format!("cannot connect to {}: {e}", options.addr);
                        status.send_modify(|s| s.last_error = Some(text));
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(2));
                    }
                }
            }
        };
        tokio::pin!(attempt);
        loop {
            tokio::select! {
                sw = &mut attempt => {
                    tracing::info!(switch = %self.name, addr = %self.options.addr, "connected");
                    self.status.send_modify(|s| s.connected = true);
                    return Some(sw);
                }
                cmd = self.rx.recv() => match cmd {
                    Some(cmd) => self.offline(cmd, "is not connected"),
                    None => return None,
                }
            }
        }
    }

    fn mastership_status(&self, switch: &Switch) -> bool {
        let m = switch.mastership().borrow().clone();
        self.status.send_modify(|s| {
            s.primary = m.is_primary && m.connected;
            s.primary_election_id = m.primary_election_id.map(|e| e.to_string());
            s.connected = m.connected;
        });
        m.is_primary && m.connected
    }

    /// One pass: wait for primary, make sure of the pipeline, reconcile,
    /// then apply intended states until something needs a resync.
    async fn session(&mut self, switch: &Arc<Switch>) -> Next {
        let mut mastership = switch.mastership();
        if let Err(next) = self.wait_for_primary(switch, &mut mastership).await {
            return next;
        }
        let intended = match self.reconcile_switch(switch, &mastership).await {
            Ok(intended) => intended,
            Err(next) => return next,
        };
        // States that arrived during the reconcile.
        if !Arc::ptr_eq(&intended, &self.latest) {
            return Next::Resync;
        }
        self.apply_updates(switch, &mut mastership).await
    }

    /// As a backup: serve reads and keep intended states until this
    /// controller is the switch's primary client.
    async fn wait_for_primary(
        &mut self,
        switch: &Switch,
        mastership: &mut watch::Receiver<Mastership>,
    ) -> Result<(), Next> {
        while !self.mastership_status(switch) {
            if !mastership.borrow().connected {
                return Err(Next::Reconnect);
            }
            tokio::select! {
                changed = mastership.changed() => if changed.is_err() { return Err(Next::Reconnect) },
                cmd = self.rx.recv() => match cmd {
                    Some(Command::Read { entities, done }) => { let _ = done.send(read(switch, &self.pipeline, entities).await); }
                    Some(cmd) => self.offline(cmd, "has another primary controller (we are backup)"),
                    None => return Err(Next::Stop),
                }
            }
        }
        Ok(())
    }

    /// Make sure of the pipeline, then bring the switch to the latest
    /// intended state from what it holds; the state it now holds.
    async fn reconcile_switch(
        &mut self,
        switch: &Switch,
        mastership: &watch::Receiver<Mastership>,
    ) -> Result<Arc<Layered>, Next> {
        let started = Instant::now();
        let pipeline = match ensure_pipeline(switch, &self.pipeline).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(switch = %self.name, %e, "pipeline");
                self.set_error(format!("pipeline: {e:#}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                return Err(retry(mastership));
            }
        };
        let intended = self.latest.clone();
        let diff = match reconcile(switch, &self.pipeline.info, &intended.whole(), BATCH).await {
            Ok(diff) => diff,
            Err(e) => {
                tracing::error!(switch = %self.name, %e, "reconcile failed");
                self.set_error(format!("reconcile: {e}"));
                tokio::time::sleep(Duration::from_millis(500)).await;
                return Err(retry(mastership));
            }
        };
        let report = ReconcileReport {
            inserted: diff.insert.len(),
            modified: diff.modify.len(),
            deleted: diff.delete.len(),
            millis: started.elapsed().as_secs_f64() * 1e3,
            pipeline: pipeline.to_string(),
        };
        tracing::info!(switch = %self.name, inserted = report.inserted, modified = report.modified,
            deleted = report.deleted, millis = report.millis, pipeline, "reconciled");
        self.metrics.reconciled(&self.name, &report);
        self.applied = Some(intended.clone());
        self.status.send_modify(|s| {
            s.reconciles += 1;
            s.last_reconcile = Some(report);
            s.entities = intended.len();
            s.in_sync = Arc::ptr_eq(&intended, &self.latest);
            s.last_error = None;
        });
        Ok(intended)
    }

    /// As primary on a reconciled switch: write each new intended state as
    /// the diff from the last, until mastership changes or a write fails.
    async fn apply_updates(
        &mut self,
        switch: &Switch,
        mastership: &mut watch::Receiver<Mastership>,
    ) -> Next {
        loop {
            tokio::select! {
                changed = mastership.changed() => {
                    if changed.is_err() || !mastership.borrow().connected {
                        return Next::Reconnect;
                    }
                    if !self.mastership_status(switch) {
                        tracing::warn!(switch = %self.name, "lost mastership (backup now)");
                        return Next::Resync;
                    }
                }
                cmd = self.rx.recv() => match cmd {
                    None => return Next::Stop,
                    Some(Command::Read { entities, done }) => { let _ = done.send(read(switch, &self.pipeline, entities).await); }
                    Some(Command::Apply { state, done }) => {
                        if let Err(e) = self.apply(switch, state, done).await {
                            tracing::error!(switch = %self.name, %e, "write failed; re-reading the switch");
                            return retry(mastership);
                        }
                    }
                }
            }
        }
    }

    /// Write the diff from what the switch holds to `state`; `done` gets
    /// the number of changes or the error (also returned: the switch must
    /// then be re-read).
    async fn apply(
        &mut self,
        switch: &Switch,
        state: Arc<Layered>,
        done: oneshot::Sender<Result<usize, String>>,
    ) -> Result<(), String> {
        self.latest = state.clone();
        let applied = self.applied.clone().expect("reconciled");
        let diff = diff_layered(&applied, &state);
        let changes = diff.insert.len() + diff.modify.len() + diff.delete.len();
        if changes == 0 {
            self.applied = Some(state);
            let _ = done.send(Ok(0));
            return Ok(());
        }
        let t0 = Instant::now();
        match apply_diff(switch, &diff, BATCH).await {
            Ok(()) => {
                self.metrics.applied(&self.name, &diff, t0.elapsed());
                self.status.send_modify(|s| {
                    s.entities = state.len();
                    s.in_sync = true;
                });
                self.applied = Some(state);
                let _ = done.send(Ok(changes));
                Ok(())
            }
            Err(e) => {
                let text = e.to_string();
                self.set_error(format!("write: {text}"));
                self.status.send_modify(|s| s.in_sync = false);
                let _ = done.send(Err(format!("switch {}: {text}", self.name)));
                Err(text)
            }
        }
    }
}

/// After a failure: read the switch again if the session is up, else
/// connect again.
fn retry(mastership: &watch::Receiver<Mastership>) -> Next {
    if mastership.borrow().connected {
        Next::Resync
    } else {
        Next::Reconnect
    }
}

/// Make sure the switch runs our pipeline: compare its P4Info and push
/// only when it differs (a push resets the switch's tables).
async fn ensure_pipeline(switch: &Switch, pipeline: &Pipeline) -> anyhow::Result<&'static str> {
    use p4::get_forwarding_pipeline_config_request::ResponseType;
    let current = switch
        .get_pipeline(ResponseType::P4infoAndCookie)
        .await
        .ok()
        .flatten();
    let same = current
        .and_then(|c| c.p4info)
        .is_some_and(|i| &i == pipeline.info.raw());
    if same {
        return Ok("kept");
    }
    installer::pipeline::push(switch, &pipeline.info, pipeline.device_config.to_vec()).await?;
    Ok("pushed")
}

/// Everything a switch holds that the pipeline lets us read.
/// `entities` if given, else everything (`read_all`).
async fn read(
    switch: &Switch,
    pipeline: &Pipeline,
    entities: Option<Vec<p4::Entity>>,
) -> Result<Vec<p4::Entity>, String> {
    match entities {
        Some(e) => switch.read(e).await.map_err(|e| e.to_string()),
        None => read_all(switch, pipeline).await,
    }
}

async fn read_all(switch: &Switch, pipeline: &Pipeline) -> Result<Vec<p4::Entity>, String> {
    let info = pipeline.info.raw();
    let mut wanted: Vec<p4::Entity> = info
        .tables
        .iter()
        .map(|t| {
            p4rt::entity::table_wildcard(&pipeline.info, t.preamble.as_ref().map_or(0, |p| p.id))
        })
        .collect();
    for profile in &info.action_profiles {
        let id = profile.preamble.as_ref().map_or(0, |p| p.id);
        wanted.push(
            p4::ActionProfileMember {
                action_profile_id: id,
                ..Default::default()
            }
            .into(),
        );
        wanted.push(
            p4::ActionProfileGroup {
                action_profile_id: id,
                ..Default::default()
            }
            .into(),
        );
    }
    let mut out = switch.read(wanted).await.map_err(|e| e.to_string())?;
    out.extend(
        installer::reconcile::read_clone_sessions(
            switch,
            &[installer::names::INT_REPORT_CLONE_SESSION],
        )
        .await,
    );
    Ok(out)
}

/// How what a switch reports differs from `intended` (for drift reports).
pub fn drift(intended: &Resolved, actual: Vec<p4::Entity>) -> Diff {
    installer::reconcile::diff(intended, actual)
}
