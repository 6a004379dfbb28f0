//! Read-only views of the controller: the status (`GET /v1/status`, and
//! the watchers' telemetry snapshots), what a switch holds with its drift
//! from the intended state (`GET /v1/entries/<switch>`), and path
//! availability. Nothing here changes the state.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::daemon::control::controller::Controller;
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::monitoring::api::{
    self, ControllerView, EntriesView, LinkView, ReservationSummary, ReservationsView, StatusView,
    SwitchView,
};
use crate::daemon::persistence::state_records::{Lifecycle, Reservation};
use crate::daemon::southbound::switches;

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
