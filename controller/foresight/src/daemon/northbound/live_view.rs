//! What the operator's web page (`/ui`) reads besides `/v1/status`: the
//! fabric's layout (`GET /v1/fabric`: switches by tier, hosts, directed
//! links) and the reservations over a window of time with the links each
//! flow holds (`GET /v1/timeline`), live and finished, with the jobs and
//! what learning knows of them. Read-only, scoped to a tenant like the
//! status.

use std::collections::HashMap;

use planner::topology::NodeRef;
use serde::Serialize;

use crate::daemon::control::controller::Controller;
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::inputs::learning::LearnedJob;
use crate::daemon::persistence::state_records::{FlowRecord, Reservation};

/// The fabric as drawn: switches by tier, hosts under their leaves, links.
#[derive(Debug, Serialize)]
pub struct FabricView {
    pub fabric: String,
    pub switches: Vec<SwitchNode>,
    pub hosts: Vec<HostNode>,
    /// Directed links, both directions of every cable.
    pub links: Vec<LinkEdge>,
}

#[derive(Debug, Serialize)]
pub struct SwitchNode {
    pub name: String,
    pub role: String,
    /// 1 leaves, 2 spines, 3 super-spines.
    pub tier: u8,
    pub pod: u32,
}

#[derive(Debug, Serialize)]
pub struct HostNode {
    pub name: String,
    pub ip: String,
    pub leaf: String,
    pub port: u16,
}

#[derive(Debug, Serialize)]
pub struct LinkEdge {
    /// As `/v1/status` and the metrics name it (`leaf1:3 -> spine1:1`).
    pub id: String,
    pub from: String,
    pub from_port: u16,
    pub to: String,
    pub to_port: u16,
    pub capacity_bps: u64,
}

/// Reservations overlapping `[from, to]`, and the jobs.
#[derive(Debug, Serialize)]
pub struct TimelineView {
    /// Whose reservations these are: the viewer's tenant, or None (every
    /// tenant's), as in the status.
    pub tenant: Option<String>,
    pub now_unix_ns: u64,
    pub from_unix_ns: u64,
    pub to_unix_ns: u64,
    pub reservations: Vec<TimelineReservation>,
    pub jobs: Vec<JobView>,
    /// Links an operator took down.
    pub links_down: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct TimelineReservation {
    pub id: String,
    pub tenant: String,
    pub job_id: Option<String>,
    /// `demand:<id>` or `collective:<id>`.
    pub subject: String,
    pub status: String,
    /// The lifecycle now: `scheduled`, `installed`, `running`, `expired`,
    /// `cancelled`, `fallback`.
    pub state: String,
    /// Made by the controller from a learned job (T+5).
    pub predicted: bool,
    /// Revisions after the first: re-optimized, re-planned or re-steered.
    pub revision: u64,
    pub advisory: Option<String>,
    pub install_unix_ns: Option<u64>,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub flows: Vec<TimelineFlow>,
}

#[derive(Debug, Serialize)]
pub struct TimelineFlow {
    pub flow_id: String,
    pub src: String,
    pub dst: String,
    pub status: String,
    pub accepted_bps: u64,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// The directed links of its path, leaf to leaf (ids as in `FabricView`).
    pub links: Vec<String>,
    /// `labels`, `port <n>` (entropy steering) or `ecmp`.
    pub held_by: String,
}

#[derive(Debug, Serialize)]
pub struct JobView {
    pub tenant: String,
    pub job_id: String,
    pub generation: u64,
    /// What learning knows of it (when the controller learns).
    pub learning: Option<LearnedJob>,
}

/// Longest window a timeline request may ask for, either way.
pub const MAX_WINDOW_S: f64 = 3600.0;

impl Controller {
    /// The fabric's layout.
    pub fn fabric_view(&self) -> FabricView {
        let topo = self.topo;
        let node = |n: NodeRef| match n {
            NodeRef::Switch(s) => topo.switches()[s as usize].name.clone(),
            NodeRef::Host(h) => topo.hosts()[h as usize].name.clone(),
        };
        FabricView {
            fabric: topo.name().to_string(),
            switches: topo
                .switches()
                .iter()
                .map(|s| SwitchNode {
                    name: s.name.clone(),
                    role: s.role.to_string(),
                    tier: s.role.tier(),
                    pod: s.pod,
                })
                .collect(),
            hosts: topo
                .hosts()
                .iter()
                .map(|h| HostNode {
                    name: h.name.clone(),
                    ip: h.ip.to_string(),
                    leaf: topo.switches()[h.leaf as usize].name.clone(),
                    port: h.port,
                })
                .collect(),
            links: (0..topo.edge_count() as u32)
                .map(|e| {
                    let l = topo.edge(e);
                    LinkEdge {
                        id: topo.describe_edge(e),
                        from: node(l.from),
                        from_port: l.from_port,
                        to: node(l.to),
                        to_port: l.to_port,
                        capacity_bps: l.capacity_bps,
                    }
                })
                .collect(),
        }
    }

    /// Reservations that overlap the last `past_s` and the next `ahead_s`
    /// seconds (live ones and the finished ones still kept), of `tenant`'s
    /// when given, with the jobs.
    pub async fn timeline(&self, tenant: Option<&str>, past_s: f64, ahead_s: f64) -> TimelineView {
        let now = now_unix_ns();
        let from = now.saturating_sub((past_s * 1e9) as u64);
        let to = now.saturating_add((ahead_s * 1e9) as u64);
        let link_of = self.link_ids();
        let sees = |r: &&Reservation| tenant.is_none_or(|t| r.tenant == t);
        let overlaps = |r: &&Reservation| r.start_unix_ns() <= to && r.end_unix_ns() >= from;
        let inner = self.inner.lock().await;
        let state = &inner.engine.state;
        let reservations = state
            .history
            .iter()
            .filter(overlaps)
            .chain(state.reservations.overlapping(from, to))
            .filter(sees)
            .map(|r| self.timeline_reservation(r, now, &link_of))
            .collect();
        let learned: HashMap<(String, String), LearnedJob> = match &self.learning {
            Some(l) => l
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .jobs_view()
                .into_iter()
                .map(|j| ((j.tenant.clone(), j.job_id.clone()), j))
                .collect(),
            None => HashMap::new(),
        };
        let jobs = state
            .jobs
            .iter()
            .filter(|j| tenant.is_none_or(|t| j.tenant == t))
            .map(|j| JobView {
                tenant: j.tenant.clone(),
                job_id: j.job_id.clone(),
                generation: j.generation,
                learning: learned.get(&(j.tenant.clone(), j.job_id.clone())).cloned(),
            })
            .collect();
        TimelineView {
            tenant: tenant.map(str::to_string),
            now_unix_ns: now,
            from_unix_ns: from,
            to_unix_ns: to,
            reservations,
            jobs,
            links_down: state.links_down.iter().map(|l| l.to_string()).collect(),
        }
    }

    fn timeline_reservation(
        &self,
        r: &Reservation,
        now: u64,
        link_of: &HashMap<(String, u16), String>,
    ) -> TimelineReservation {
        let lifecycle = r.lifecycle(now, self.lead_ns).name();
        let running = lifecycle == "installed" && r.start_unix_ns() <= now;
        TimelineReservation {
            id: r.id.clone(),
            tenant: r.tenant.clone(),
            job_id: r.job_id.clone(),
            subject: format!("{}:{}", r.subject.kind(), r.subject.id()),
            status: r.status.name().to_string(),
            state: if running { "running" } else { lifecycle }.to_string(),
            predicted: r.predicted,
            revision: r.revision,
            advisory: r.advisory.clone(),
            install_unix_ns: r.install_unix_ns(self.lead_ns),
            start_unix_ns: r.start_unix_ns(),
            end_unix_ns: r.end_unix_ns(),
            flows: r.flows.iter().map(|f| timeline_flow(f, link_of)).collect(),
        }
    }

    /// Directed link ids by (sending switch, egress port).
    fn link_ids(&self) -> HashMap<(String, u16), String> {
        let topo = self.topo;
        (0..topo.edge_count() as u32)
            .filter_map(|e| {
                let l = topo.edge(e);
                let NodeRef::Switch(s) = l.from else {
                    return None;
                };
                let name = topo.switches()[s as usize].name.clone();
                Some(((name, l.from_port), topo.describe_edge(e)))
            })
            .collect()
    }
}

fn timeline_flow(f: &FlowRecord, link_of: &HashMap<(String, u16), String>) -> TimelineFlow {
    let held_by = match (f.udp_src_port, f.labels.is_empty(), f.status.reserves()) {
        (Some(p), _, _) => format!("port {p}"),
        (None, false, _) => "labels".to_string(),
        (None, true, true) => "routing".to_string(),
        (None, true, false) => "ecmp".to_string(),
    };
    TimelineFlow {
        flow_id: f.flow_id.clone(),
        src: f.src.clone(),
        dst: f.dst.clone(),
        status: f.status.name().to_string(),
        accepted_bps: f.accepted_bps,
        start_unix_ns: f.start_unix_ns,
        end_unix_ns: f.end_unix_ns,
        links: f
            .hops
            .iter()
            .filter_map(|h| link_of.get(&(h.switch.clone(), h.port)).cloned())
            .collect(),
        held_by,
    }
}
