//! The controller: the engine and the switch compiler behind one lock,
//! the switch tasks, and [`Controller::transact`], the one way a change
//! reaches the switches and the watchers: lock, mutate, commit (derive
//! every switch's intended state, send it, persist meanwhile), wake the scheduler,
//! wait for the switches' acknowledgements, publish the events. The NDSP
//! service, the scheduler, the prediction loop and the operator's link
//! command all change the state through it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use p4rt::P4Info;
use planner::Topology;
use tokio::sync::{broadcast, oneshot, watch, Notify};

use super::events::Event;
use super::limits::TenantLimits;
use crate::daemon::engine::{Engine, Restored};
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::inputs::learning::Learning;
use crate::daemon::inputs::telemetry::LinkLoads;
use crate::daemon::monitoring::metrics::Metrics;
use crate::daemon::persistence::store::Store;
use crate::daemon::southbound::desired::Compiler;
use crate::daemon::southbound::switches::SwitchHandle;

/// What the lock guards: the decisions and the switch state derived from
/// them, changed together.
pub struct Inner {
    pub engine: Engine,
    pub compiler: Compiler,
}

pub struct Controller {
    pub(in crate::daemon) inner: tokio::sync::Mutex<Inner>,
    pub switches: BTreeMap<String, SwitchHandle>,
    pub metrics: Arc<Metrics>,
    pub loads: Arc<LinkLoads>,
    pub events: broadcast::Sender<Event>,
    /// Counts the commits the switches acknowledged that changed anything
    /// (an admission, an install, an expiry): the operator's page follows
    /// it to redraw without polling, whatever the change was.
    pub settled: watch::Sender<u64>,
    pub(in crate::daemon) wake: Notify,
    pub topo: &'static Topology,
    pub(in crate::daemon) info: Arc<P4Info>,
    pub(in crate::daemon) store: Store,
    pub lead_ns: u64,
    pub(in crate::daemon) started: Instant,
    pub(in crate::daemon) restored: Restored,
    pub(in crate::daemon) startup_reconcile_ms: StdMutex<Option<f64>>,
    pub(in crate::daemon) ndsp_addr: SocketAddr,
    pub(in crate::daemon) http_addr: SocketAddr,
    pub(in crate::daemon) election_id: u128,
    /// Learned periodic schedules, when on.
    pub learning: Option<Arc<StdMutex<Learning>>>,
    /// Leaves that hold the watch entries of learned jobs.
    pub(in crate::daemon) watched_leaves: StdMutex<BTreeSet<String>>,
    /// Per-tenant limits and request rates.
    pub admission: TenantLimits,
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

/// What a mutation hands back to [`Controller::transact`].
pub struct Mutation<T> {
    /// The mutation's own result, for its caller.
    pub value: T,
    /// Whether the state changed (it is then persisted before anything
    /// is answered).
    pub changed: bool,
    /// Published once the switches acknowledged.
    pub events: Vec<Event>,
}

impl<T> Mutation<T> {
    /// A change of the state, with the events that tell of it.
    pub fn changed(value: T, events: Vec<Event>) -> Mutation<T> {
        Mutation {
            value,
            changed: true,
            events,
        }
    }
}

impl Controller {
    /// One change: lock the engine, `mutate` it (given the time, read
    /// once the lock is held), commit, wake the scheduler, wait for every
    /// switch's acknowledgement, publish the mutation's events. A mutation
    /// that fails changes nothing and nothing is sent. Returns the
    /// mutation's value and what the switches did.
    pub async fn transact<T, E>(
        &self,
        mutate: impl FnOnce(&mut Inner, u64) -> Result<Mutation<T>, E>,
    ) -> Result<(T, Committed), E> {
        let (mutation, acks) = {
            let mut inner = self.inner.lock().await;
            let now = now_unix_ns();
            let mutation = mutate(&mut inner, now)?;
            let acks = self.commit(&mut inner, now, mutation.changed).await;
            (mutation, acks)
        };
        self.reschedule();
        let done = acknowledged(acks).await;
        if mutation.changed || done.changes > 0 {
            self.settled.send_modify(|n| *n += 1);
        }
        for event in mutation.events {
            let _ = self.events.send(event);
        }
        Ok((mutation.value, done))
    }

    /// Derive the intended state at `now` of every switch whose state it
    /// changes, send it there, and persist (when `changed`) while the
    /// switches write: the commit costs the slower of the two, not their
    /// sum. Nothing is answered before both are done; a crash in between
    /// leaves entries on the switches that no record holds, which the
    /// restart's (or the next leader's) reconciliation removes, and the
    /// unanswered request is resent. Call with the engine locked; await
    /// the acks after unlocking (switch tasks apply states in the order
    /// they were sent).
    pub(in crate::daemon) async fn commit(
        &self,
        inner: &mut Inner,
        now: u64,
        changed: bool,
    ) -> Acks {
        let acks = match inner.compiler.changes(&inner.engine.state, now) {
            Ok(desired) => desired
                .into_iter()
                .filter_map(|(name, state)| {
                    let handle = self.switches.get(&name)?;
                    Some((name, handle.apply(Arc::new(state))))
                })
                .collect(),
            Err(e) => {
                tracing::error!(%e, "cannot derive the intended switch state");
                Vec::new()
            }
        };
        if changed && self.store.save(&inner.engine.state, &self.metrics).await {
            inner.engine.state.reservations.committed();
        }
        acks
    }

    /// Wake the scheduler (the next install or expiry may have changed).
    fn reschedule(&self) {
        self.wake.notify_one();
    }
}
