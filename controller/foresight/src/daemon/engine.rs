//! The controller's decisions, without I/O: NDSP requests (already
//! validated by `ndsp::validate`) become planner demands, the planner
//! reserves them, and the outcome becomes reservation records in the
//! [`State`]. Cancels, deviations (re-planning) and expiry change records;
//! the desired switch state is derived from the records elsewhere.
//!
//! Errors are gRPC statuses: `INVALID_ARGUMENT` naming the field (checks
//! that need controller state: registered jobs, whole servers), and
//! `ALREADY_EXISTS` / `NOT_FOUND` as NDSP defines them. A rejected request
//! changes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::time::Instant;

use ndsp::proto;
use ndsp::types::{self as nt, CancelTarget, DeviationTarget, WorkloadChange};
use ndsp::{Validate, ValidationError};
use planner::admission::{DemandPlan, Outcome, Reason as PlanReason};
use planner::collectives::{self, Collective, CollectiveKind};
use planner::conventions::{transfer_ns, FIRST_QP, QP_MASK};
use planner::demand::{Demand, DemandKind, Flow};
use planner::shares::{SharedPlanner, TenantShares};
use planner::topology::HostIdx;
use planner::{PlannerConfig, Topology};
use prost::Message;
use tonic::Status as GrpcStatus;

use super::state::{
    from_hex, to_hex, FlowRecord, Hop, Job, Lifecycle, LinkRef, Reason, Reservation, State, Status,
    Subject,
};

/// Most flows one reservation may expand to (collective flows times
/// recurrence occurrences).
pub const MAX_FLOWS_PER_RESERVATION: usize = 65_536;

/// Planner priority of each NDSP priority class (higher is planned first).
fn planner_priority(p: nt::Priority) -> u8 {
    match p {
        nt::Priority::Background => super::desired::BACKGROUND_PRIORITY,
        nt::Priority::Standard => 64,
        nt::Priority::IterationBlocking => 128,
        nt::Priority::LatencyCritical => 192,
    }
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> GrpcStatus {
    ValidationError::new(field, reason).into()
}

/// Refuse an announcement whose every occurrence has already ended when
/// the controller receives it (a stale forecast: a retry long after the
/// fact, an iteration announced after it ran); reserving it would hold
/// capacity for traffic that is over. `end_of_first` is the first
/// occurrence's end (its latest possible end where only rates are known).
fn refuse_stale(
    field: &str,
    end_of_first: u64,
    recurrence: Option<nt::Recurrence>,
    now: u64,
) -> Result<(), GrpcStatus> {
    let last_end = recurrence.map_or(end_of_first, |r| {
        end_of_first.saturating_add(r.period_ns.saturating_mul(u64::from(r.occurrences) - 1))
    });
    if last_end < now {
        return Err(invalid(
            field,
            format!(
                "the announced traffic ended {:.3} ms before the controller received it (a stale announcement); nothing was reserved",
                (now - last_end) as f64 / 1e6
            ),
        ));
    }
    Ok(())
}

/// What a planning call took, for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanTiming {
    pub planner_secs: f64,
}

/// How the planner's ledger was rebuilt after a restart: from the
/// recorded paths of the live reservations (what the switches carry), so
/// the ledger and the switches agree.
#[derive(Debug, Clone, Default)]
pub struct Restored {
    pub reservations: usize,
    /// Reservations whose recorded path crossed a link that is down in the
    /// restored link state; they were re-planned at start-up.
    pub diverged: Vec<String>,
}

/// What a link state change did.
#[derive(Debug, Clone)]
pub struct LinkChange {
    pub link: LinkRef,
    /// The link's two directions, the named end's first.
    pub edges: [planner::topology::EdgeId; 2],
    /// False when the link already was in the requested state.
    pub changed: bool,
    /// The reservations re-planned, as they are now.
    pub affected: Vec<Reservation>,
}

/// Flow metadata kept beside a planner flow until the record is built.
struct FlowMeta {
    flow_id: String,
    src_rank: Option<u32>,
    dst_rank: Option<u32>,
    steer_qp: bool,
}

/// A reservation about to be planned.
struct Pending {
    record: Reservation,
    demand: Demand,
    meta: Vec<FlowMeta>,
}

pub struct Engine {
    pub topo: &'static Topology,
    by_ip: HashMap<Ipv4Addr, HostIdx>,
    /// One planner per tenant share group (one in all without shares).
    planner: SharedPlanner<'static>,
    pub state: State,
    /// Validated topologies of registered jobs, by (tenant, job).
    jobs: HashMap<(String, String), nt::ValidatedTopology>,
    /// Which earlier reservations a planning call may move.
    pub reoptimization: Reoptimization,
    /// Ids of reservations moved since [`Engine::take_moved`] last ran.
    moved: Vec<String>,
    /// Predicted reservations an announcement took over since
    /// [`Engine::take_superseded`] last ran, by (tenant, job).
    superseded: Vec<Superseded>,
}

/// A job's predicted reservations withdrawn because the job announced.
#[derive(Debug, Clone)]
pub struct Superseded {
    pub tenant: String,
    pub job_id: String,
    pub withdrawn: Vec<Reservation>,
}

/// Which earlier reservations planning may re-place (paths only, never
/// windows or rates) when that admits a new demand or lowers the peak.
/// Installed reservations whose flows have started never move.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reoptimization {
    /// Reservations none of whose entries are on the switches yet.
    pub pending: bool,
    /// Also reservations installed but not started (the switches then get
    /// the new entries before the first packet).
    pub installed_not_started: bool,
    /// How long before a flow starts its entries go in, ns.
    pub lead_ns: u64,
}

impl Engine {
    /// An engine over `state` (fresh or reloaded). The planner's ledger is
    /// rebuilt from the recorded paths, windows and rates of the live
    /// reservations — what the switches carry — not by planning them again
    /// (a re-plan could choose other paths than the installed ones). Links
    /// recorded down are down again; a reservation still recorded across
    /// one is re-planned (listed in [`Restored::diverged`]).
    /// Each tenant plans within its `shares` of every link (see
    /// [`planner::shares`]; the default is one pool).
    pub fn new(
        topo: &'static Topology,
        config: PlannerConfig,
        shares: TenantShares,
        state: State,
    ) -> anyhow::Result<(Engine, Restored)> {
        let by_ip = topo
            .hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| (h.ip, i as HostIdx))
            .collect();
        let mut engine = Engine {
            topo,
            by_ip,
            planner: SharedPlanner::new(topo, config, shares),
            state,
            jobs: HashMap::new(),
            reoptimization: Reoptimization::default(),
            moved: Vec::new(),
            superseded: Vec::new(),
        };
        for job in &engine.state.jobs {
            let bytes = from_hex(&job.request)?;
            let request = proto::RegisterTopologyRequest::decode(bytes.as_slice())?;
            let validated = request
                .validate()
                .map_err(|e| anyhow::anyhow!("state file, job {}: {e}", job.job_id))?;
            engine
                .jobs
                .insert((job.tenant.clone(), job.job_id.clone()), validated);
        }
        let mut restored = Restored::default();
        for r in &engine.state.reservations {
            let mut flows = Vec::new();
            for (i, f) in r.flows.iter().enumerate() {
                for (j, h) in f.hops.iter().enumerate() {
                    if topo.switch_by_name(&h.switch).is_none() {
                        anyhow::bail!(
                            "state file: reservations[{}] ({}) flows[{i}].hops[{j}].switch: {:?} is not a switch of fabric {}; \
                             use the topology the state was written with, or move the state file away",
                            r.seq, r.id, h.switch, topo.name()
                        );
                    }
                }
                if !f.status.reserves() || f.accepted_bps == 0 {
                    // Kept as a placeholder so the planner's flow indices
                    // are the record's (it reserves nothing).
                    flows.push((0, planner::Path::EMPTY, planner::Window::new(0, 1), 0));
                    continue;
                }
                let src = engine.host(&f.src)?;
                let path = engine.path_of(&f.hops).ok_or_else(|| {
                    anyhow::anyhow!(
                        "state file: reservations[{}] ({}) flows[{i}].hops: {:?} is not a path of fabric {} to {}",
                        r.seq, r.id, f.hops, topo.name(), f.dst
                    )
                })?;
                let w = planner::Window::new(
                    engine.to_planner_ns(f.start_unix_ns),
                    engine.to_planner_ns(f.end_unix_ns),
                );
                flows.push((src, path, w, f.accepted_bps));
            }
            restored.reservations += 1;
            // The ledger holds exactly what the switches carry: the
            // recorded paths, not a re-plan (which could choose others).
            engine.planner.restore(&r.tenant, &r.id, &flows);
        }
        // Links that were down stay down; a reservation still recorded on
        // one (a state written by an older controller) is re-planned.
        for (i, l) in engine.state.links_down.clone().iter().enumerate() {
            let (_, edges) = engine
                .resolve_link(&l.a, u32::from(l.a_port))
                .map_err(|e| anyhow::anyhow!("state file: links_down[{i}] ({l}): {e}"))?;
            for e in edges {
                engine.planner.set_edge_down(e, true);
            }
        }
        if !engine.state.links_down.is_empty() {
            let down = engine.down_edges();
            for idx in engine.crossing(&down, 0) {
                let id = engine.state.reservations[idx].id.clone();
                engine.replan_for_links(idx, &down, None)?;
                restored.diverged.push(id);
            }
        }
        Ok((engine, restored))
    }

    fn to_planner_ns(&self, unix_ns: u64) -> u64 {
        unix_ns.saturating_sub(self.state.epoch_unix_ns)
    }

    fn to_unix_ns(&self, planner_ns: u64) -> u64 {
        planner_ns + self.state.epoch_unix_ns
    }

    fn host(&self, name: &str) -> anyhow::Result<HostIdx> {
        self.topo
            .host_by_name(name)
            .ok_or_else(|| anyhow::anyhow!("host {name} of a reservation is not in the topology"))
    }

    /// The edge a hop leaves its switch by.
    pub fn edge_of(&self, hop: &Hop) -> Option<planner::topology::EdgeId> {
        let s = self.topo.switch_by_name(&hop.switch)?;
        let port = |e: &planner::topology::EdgeId| self.topo.edge(*e).from_port == hop.port;
        if let Some(&e) = self.topo.switch_out_edges(s).iter().find(|e| port(e)) {
            return Some(e);
        }
        (0..self.topo.hosts().len() as HostIdx)
            .map(|h| self.topo.host_down_edge(h))
            .find(|e| {
                port(e)
                    && matches!(self.topo.edge(*e).from, planner::topology::NodeRef::Switch(x) if x == s)
            })
    }

    /// The planner path of recorded hops, if they form one.
    fn path_of(&self, hops: &[Hop]) -> Option<planner::Path> {
        if hops.is_empty() || hops.len() > planner::paths::MAX_PATH_EDGES {
            return None;
        }
        let mut path = planner::Path::EMPTY;
        for h in hops {
            path.push(self.edge_of(h)?);
        }
        Some(path)
    }

    fn hops_of(&self, path: &planner::Path) -> Vec<Hop> {
        installer::reservations::path_hops(self.topo, path)
            .into_iter()
            .map(|(s, port)| Hop {
                switch: self.topo.switches()[s as usize].name.clone(),
                port,
            })
            .collect()
    }

    /// The planner demand of a record (for re-planning).
    fn demand_of(&self, r: &Reservation) -> anyhow::Result<Demand> {
        let mut flows = Vec::with_capacity(r.flows.len());
        for f in &r.flows {
            flows.push(Flow::with_duration(
                self.topo,
                self.host(&f.src)?,
                self.host(&f.dst)?,
                f.qp,
                self.to_planner_ns(f.requested_start_unix_ns),
                f.bytes,
                f.rate_bps,
                f.duration_ns,
            ));
        }
        Ok(Demand {
            id: r.id.clone(),
            tenant: r.tenant.clone(),
            priority: r.priority,
            elastic: r.elastic,
            deadline_ns: r.deadline_unix_ns.map(|d| self.to_planner_ns(d)),
            kind: match r.subject {
                Subject::Demand(_) => DemandKind::Transfer,
                Subject::Collective(_) => DemandKind::Collective(CollectiveKind::RingAllreduce),
            },
            flows,
        })
    }

    fn alloc_qp(&mut self, dst: HostIdx) -> u32 {
        let name = self.topo.hosts()[dst as usize].name.clone();
        let next = self.state.next_qp.entry(name).or_insert(FIRST_QP);
        let q = *next;
        *next = if q >= QP_MASK { FIRST_QP } else { q + 1 };
        q
    }

    fn next_id(&mut self, subject: &str) -> (String, u64) {
        let seq = self.state.next_seq;
        self.state.next_seq += 1;
        (format!("r{seq}/{subject}"), seq)
    }

    fn live_index(&self, tenant: &str, subject: &Subject) -> Option<usize> {
        self.state
            .reservations
            .iter()
            .position(|r| r.tenant == tenant && &r.subject == subject)
    }

    // -----------------------------------------------------------------
    // Jobs
    // -----------------------------------------------------------------

    /// Register (or replace) a job's rank map. Returns (generation, warnings).
    pub fn register(
        &mut self,
        request: &proto::RegisterTopologyRequest,
        topo: nt::ValidatedTopology,
    ) -> (u64, Vec<String>) {
        let key = (topo.ctx.tenant.clone(), topo.job_id.clone());
        let mut warnings = Vec::new();
        for r in &topo.ranks {
            if !self.by_ip.contains_key(&r.host_address) {
                warnings.push(format!(
                    "rank {}: host address {} is not attached to the fabric; its traffic will be routed by ECMP",
                    r.rank, r.host_address
                ));
            }
        }
        let generation = match self
            .state
            .jobs
            .iter_mut()
            .find(|j| j.tenant == key.0 && j.job_id == key.1)
        {
            Some(job) => {
                job.generation += 1;
                job.request = to_hex(&request.encode_to_vec());
                job.generation
            }
            None => {
                self.state.jobs.push(Job {
                    tenant: key.0.clone(),
                    job_id: key.1.clone(),
                    generation: 1,
                    request: to_hex(&request.encode_to_vec()),
                });
                1
            }
        };
        self.jobs.insert(key, topo);
        warnings.truncate(16);
        (generation, warnings)
    }

    /// Live reservations of `tenant`.
    pub fn live_count(&self, tenant: &str) -> usize {
        self.state
            .reservations
            .iter()
            .filter(|r| r.tenant == tenant)
            .count()
    }

    /// Demands of `batch` that are not live already (an identical
    /// resubmission creates nothing).
    pub fn new_demands(&self, batch: &nt::ValidatedDemandBatch) -> usize {
        let tenant = &batch.ctx.tenant;
        batch
            .demands
            .iter()
            .filter(|d| {
                self.live_index(tenant, &Subject::Demand(d.demand_id.clone()))
                    .is_none()
            })
            .count()
    }

    /// The registered jobs' hosts and ranks, for learning (T+5).
    pub fn job_hosts(&self) -> Vec<super::learning::JobHosts> {
        let mut out: Vec<_> = self
            .jobs
            .iter()
            .map(|((tenant, job_id), topo)| {
                let mut ranks = BTreeMap::new();
                for r in &topo.ranks {
                    let rank = ranks.entry(r.host_address).or_insert(r.rank);
                    *rank = (*rank).min(r.rank);
                }
                super::learning::JobHosts {
                    tenant: tenant.clone(),
                    job_id: job_id.clone(),
                    ranks,
                }
            })
            .collect();
        out.sort_by(|a, b| (&a.tenant, &a.job_id).cmp(&(&b.tenant, &b.job_id)));
        out
    }

    /// Reserve one iteration the controller predicted for a job (T+5): the
    /// demands go through the same planning as announced ones, and the
    /// records are marked predicted. Ids already live are answered as
    /// they are (a prediction is made once per iteration).
    pub fn submit_predicted(
        &mut self,
        tenant: &str,
        job_id: &str,
        demands: &[super::learning::PredictedDemand],
        now: u64,
    ) -> Result<Vec<Reservation>, GrpcStatus> {
        let header = proto::RequestHeader {
            protocol_version: Some(proto::ProtocolVersion {
                major: ndsp::PROTOCOL_VERSION.major,
                minor: ndsp::PROTOCOL_VERSION.minor,
            }),
            tenant: tenant.to_string(),
        };
        let request = proto::SubmitDemandRequest {
            header: Some(header),
            reference_unix_ns: 0,
            demands: demands
                .iter()
                .map(|d| proto::DemandSignal {
                    demand_id: d.demand_id.clone(),
                    job_id: job_id.to_string(),
                    source: Some(proto::Endpoint {
                        address: Some(proto::endpoint::Address::Rank(d.src_rank)),
                    }),
                    destination: Some(proto::Endpoint {
                        address: Some(proto::endpoint::Address::Rank(d.dst_rank)),
                    }),
                    start: Some(proto::demand_signal::Start::StartUnixNs(d.start_unix_ns)),
                    size_bytes: d.size_bytes,
                    pacing: Some(proto::demand_signal::Pacing::RateBps(d.rate_bps)),
                    priority: proto::PriorityClass::IterationBlocking as i32,
                    elasticity: proto::Elasticity::Inelastic as i32,
                    ..Default::default()
                })
                .collect(),
        };
        // Built here, not decoded: the ids carry the controller's "/".
        let batch = nt::ValidatedDemandBatch {
            ctx: nt::RequestContext {
                tenant: tenant.to_string(),
                client_version: ndsp::PROTOCOL_VERSION,
            },
            reference_unix_ns: None,
            demands: demands
                .iter()
                .map(|d| nt::ValidatedDemand {
                    tenant: tenant.to_string(),
                    demand_id: d.demand_id.clone(),
                    job_id: Some(job_id.to_string()),
                    source: nt::Endpoint::Rank(d.src_rank),
                    destination: nt::Endpoint::Rank(d.dst_rank),
                    start: nt::TimePoint::UnixNs(d.start_unix_ns),
                    size_bytes: d.size_bytes,
                    pacing: nt::Pacing::RateBps(d.rate_bps),
                    priority: nt::Priority::IterationBlocking,
                    elasticity: nt::Elasticity::Inelastic,
                    deadline: None,
                    dest_qp: None,
                    recurrence: None,
                })
                .collect(),
        };
        let (mut records, _) = self.plan_demands(&request, &batch, now, false)?;
        let ids: BTreeSet<&str> = records.iter().map(|r| r.id.as_str()).collect();
        for r in self.state.reservations.iter_mut() {
            if ids.contains(r.id.as_str()) {
                r.predicted = true;
            }
        }
        for r in &mut records {
            r.predicted = true;
        }
        Ok(records)
    }

    /// Cancel a job's predicted reservations that have not ended by `now`.
    pub fn withdraw_predicted(&mut self, tenant: &str, job_id: &str, now: u64) -> Vec<Reservation> {
        let ids: Vec<String> = self
            .state
            .reservations
            .iter()
            .filter(|r| {
                r.predicted
                    && r.tenant == tenant
                    && r.job_id.as_deref() == Some(job_id)
                    && r.end_unix_ns() > now
            })
            .map(|r| r.id.clone())
            .collect();
        let mut out = Vec::new();
        for id in ids {
            if let Some(idx) = self.state.reservations.iter().position(|r| r.id == id) {
                let id = self.cancel_at(idx);
                out.push(self.state.find(&id).expect("retired").clone());
            }
        }
        out
    }

    // -----------------------------------------------------------------
    // Demands
    // -----------------------------------------------------------------

    /// Plan a batch of announced demands: all are accepted for planning or
    /// none.
    pub fn submit_demands(
        &mut self,
        request: &proto::SubmitDemandRequest,
        batch: &nt::ValidatedDemandBatch,
        now: u64,
    ) -> Result<(Vec<Reservation>, PlanTiming), GrpcStatus> {
        self.plan_demands(request, batch, now, true)
    }

    /// `announced`: by a client (its jobs' predictions give way), not
    /// predicted by learning.
    fn plan_demands(
        &mut self,
        request: &proto::SubmitDemandRequest,
        batch: &nt::ValidatedDemandBatch,
        now: u64,
        announced: bool,
    ) -> Result<(Vec<Reservation>, PlanTiming), GrpcStatus> {
        let tenant = &batch.ctx.tenant;
        batch.check_ranks(|job| self.jobs.get(&(tenant.clone(), job.to_string())))?;
        let reference = batch.reference_unix_ns.unwrap_or(now);

        // Existing ids first: identical resubmissions answer with the live
        // reservation, different contents are refused; nothing changes yet.
        let mut answers: Vec<Option<Reservation>> = vec![None; batch.demands.len()];
        for (i, d) in batch.demands.iter().enumerate() {
            let subject = Subject::Demand(d.demand_id.clone());
            if let Some(idx) = self.live_index(tenant, &subject) {
                let existing = &self.state.reservations[idx];
                if existing.request == to_hex(&request.demands[i].encode_to_vec()) {
                    answers[i] = Some(existing.clone());
                } else {
                    return Err(GrpcStatus::already_exists(format!(
                        "demands[{i}].demand_id: demand {:?} is live (reservation {}) with different contents; cancel it first or use another id",
                        d.demand_id, existing.id
                    )));
                }
            }
        }
        // Stale announcements before anything is allocated.
        for (i, d) in batch.demands.iter().enumerate() {
            if answers[i].is_none() {
                let end = d.start.resolve(reference).saturating_add(d.duration_ns());
                let field = match d.start {
                    nt::TimePoint::OffsetNs(_) => format!("demands[{i}].start_offset_ns"),
                    nt::TimePoint::UnixNs(_) => format!("demands[{i}].start_unix_ns"),
                };
                refuse_stale(&field, end, d.recurrence, now)?;
            }
        }
        // Flow counts before anything is allocated.
        for (i, d) in batch.demands.iter().enumerate() {
            let occurrences = d.recurrence.map_or(1, |r| r.occurrences as usize);
            if answers[i].is_none() && occurrences > MAX_FLOWS_PER_RESERVATION {
                return Err(invalid(
                    format!("demands[{i}].recurrence.occurrences"),
                    format!("{occurrences} occurrences; the controller plans at most {MAX_FLOWS_PER_RESERVATION} flows per reservation"),
                ));
            }
        }

        let announcing: BTreeSet<&str> = batch
            .demands
            .iter()
            .zip(&answers)
            .filter(|(_, a)| announced && a.is_none())
            .filter_map(|(d, _)| d.job_id.as_deref())
            .collect();
        for job in announcing {
            self.supersede_predictions(tenant, job, now);
        }
        let mut pending = Vec::new();
        let mut fallback = Vec::new();
        for (i, d) in batch.demands.iter().enumerate() {
            if answers[i].is_some() {
                continue;
            }
            let encoded = to_hex(&request.demands[i].encode_to_vec());
            match self.demand_pending(tenant, d, encoded, reference, now) {
                Ok(p) => pending.push((i, p)),
                Err(record) => fallback.push((i, record)),
            }
        }
        let timing = self.plan_pending(&mut pending, Some(now));
        for (i, p) in pending {
            self.state.reservations.push(p.record.clone());
            answers[i] = Some(p.record);
        }
        for (i, r) in fallback {
            self.state.reservations.push((*r).clone());
            answers[i] = Some(*r);
        }
        self.state.reservations.sort_by_key(|r| r.seq);
        Ok((
            answers
                .into_iter()
                .map(|a| a.expect("every demand answered"))
                .collect(),
            timing,
        ))
    }

    /// A demand as a pending reservation, or (unknown endpoint) a final
    /// ECMP-fallback record.
    fn demand_pending(
        &mut self,
        tenant: &str,
        d: &nt::ValidatedDemand,
        encoded: String,
        reference: u64,
        now: u64,
    ) -> Result<Pending, Box<Reservation>> {
        let job = d
            .job_id
            .as_ref()
            .and_then(|j| self.jobs.get(&(tenant.to_string(), j.clone())));
        let resolve = |e: nt::Endpoint| -> (Ipv4Addr, Option<u32>) {
            match e {
                nt::Endpoint::Host(a) => (a, None),
                nt::Endpoint::Rank(r) => {
                    let ep = job.and_then(|t| t.endpoint(r)).expect("ranks checked");
                    (ep.host_address, Some(r))
                }
            }
        };
        let (src_ip, src_rank) = resolve(d.source);
        let (dst_ip, dst_rank) = resolve(d.destination);
        let start = d.start.resolve(reference).max(now);
        let duration = d.duration_ns();
        let rate = d.rate_bps();
        let occurrences = d.recurrence.map_or(1, |r| r.occurrences as u64);
        let period = d.recurrence.map_or(0, |r| r.period_ns);
        let (id, seq) = self.next_id(&d.demand_id);
        let deadline = d
            .deadline
            .map(|dl| dl.resolve(reference) + period * (occurrences - 1));
        let mut record = Reservation {
            id,
            seq,
            tenant: tenant.to_string(),
            subject: Subject::Demand(d.demand_id.clone()),
            job_id: d.job_id.clone(),
            request: encoded,
            priority: planner_priority(d.priority),
            elastic: d.elasticity == nt::Elasticity::Elastic,
            deadline_unix_ns: deadline,
            status: Status::FallbackEcmp,
            reason: Reason::None,
            advisory: None,
            revision: 1,
            flows: Vec::new(),
            cancelled: false,
            predicted: false,
        };
        let flow_id = |k: u64| {
            if occurrences == 1 {
                d.demand_id.clone()
            } else {
                format!("{}/{k}", d.demand_id)
            }
        };
        let (Some(&src), Some(&dst)) = (self.by_ip.get(&src_ip), self.by_ip.get(&dst_ip)) else {
            let unknown = if self.by_ip.contains_key(&src_ip) {
                dst_ip
            } else {
                src_ip
            };
            record.reason = Reason::UnknownEndpoint;
            record.advisory = Some(format!(
                "host {unknown} is not attached to the fabric; the traffic is routed by ECMP"
            ));
            for k in 0..occurrences {
                let s = start + k * period;
                record.flows.push(FlowRecord {
                    flow_id: flow_id(k),
                    src: src_ip.to_string(),
                    dst: dst_ip.to_string(),
                    src_ip,
                    dst_ip,
                    src_rank,
                    dst_rank,
                    qp: d.dest_qp.unwrap_or(0),
                    steer_qp: d.dest_qp.is_some(),
                    bytes: d.size_bytes,
                    rate_bps: rate,
                    duration_ns: duration,
                    requested_start_unix_ns: s,
                    status: Status::FallbackEcmp,
                    reason: Reason::UnknownEndpoint,
                    accepted_bps: 0,
                    start_unix_ns: s,
                    end_unix_ns: s + duration,
                    labels: Vec::new(),
                    hops: Vec::new(),
                });
            }
            return Err(Box::new(record));
        };
        let qp = match d.dest_qp {
            Some(q) => q,
            None => self.alloc_qp(dst),
        };
        let mut flows = Vec::new();
        let mut meta = Vec::new();
        for k in 0..occurrences {
            let s = self.to_planner_ns(start + k * period);
            flows.push(Flow::with_duration(
                self.topo,
                src,
                dst,
                qp,
                s,
                d.size_bytes,
                rate,
                duration,
            ));
            meta.push(FlowMeta {
                flow_id: flow_id(k),
                src_rank,
                dst_rank,
                steer_qp: d.dest_qp.is_some(),
            });
        }
        let demand = Demand {
            id: record.id.clone(),
            tenant: tenant.to_string(),
            priority: record.priority,
            elastic: record.elastic,
            deadline_ns: deadline.map(|dl| self.to_planner_ns(dl)),
            kind: DemandKind::Transfer,
            flows,
        };
        Ok(Pending {
            record,
            demand,
            meta,
        })
    }

    /// Plan pending reservations together and fill in their outcomes.
    /// Plans a single demand (a new collective, or a re-plan after a
    /// deviation) through the same path as a batch.
    fn plan_one(&mut self, pending: Pending, now: Option<u64>) -> (Pending, PlanTiming) {
        let mut batch = [(0, pending)];
        let timing = self.plan_pending(&mut batch, now);
        let [(_, p)] = batch;
        (p, timing)
    }

    /// Plans the pending reservations as one set. With `now`, the
    /// reservations [`Engine::reoptimization`] allows may move for them.
    fn plan_pending(&mut self, pending: &mut [(usize, Pending)], now: Option<u64>) -> PlanTiming {
        if pending.is_empty() {
            return PlanTiming::default();
        }
        let demands: Vec<Demand> = pending.iter().map(|(_, p)| p.demand.clone()).collect();
        let movable = now.map_or_else(Vec::new, |n| self.movable(n));
        let movable: Vec<&str> = movable.iter().map(String::as_str).collect();
        let t0 = Instant::now();
        let plan = self.planner.plan_moving(&demands, &movable);
        let planner_secs = t0.elapsed().as_secs_f64();
        for (dp, (_, p)) in plan.demands.iter().zip(pending.iter_mut()) {
            self.fill_outcome(&mut p.record, &p.demand, dp, &p.meta);
        }
        self.apply_moves(&plan.moved);
        PlanTiming { planner_secs }
    }

    /// Live reservations that may move at `now` (see [`Reoptimization`]):
    /// every flow reserved in full, and nothing installed yet (or, if
    /// allowed, installed but not started).
    fn movable(&self, now: u64) -> Vec<String> {
        let policy = self.reoptimization;
        if !policy.pending {
            return Vec::new();
        }
        self.state
            .reservations
            .iter()
            .filter(|r| {
                r.flows
                    .iter()
                    .all(|f| matches!(f.status, Status::Admitted | Status::Deferred))
            })
            .filter(|r| match r.lifecycle(now, policy.lead_ns) {
                Lifecycle::Scheduled => true,
                Lifecycle::Installed => policy.installed_not_started && now < r.start_unix_ns(),
                _ => false,
            })
            .map(|r| r.id.clone())
            .collect()
    }

    /// Writes the planner's moves into the reservation records (hops and
    /// labels of the moved flows, a new revision, an advisory saying what
    /// moved and why) and remembers them for [`Engine::take_moved`].
    fn apply_moves(&mut self, moved: &[planner::admission::Moved]) {
        for m in moved {
            let Some(idx) = self.state.reservations.iter().position(|r| r.id == m.id) else {
                continue;
            };
            let paths: Vec<(usize, Vec<Hop>, Vec<u32>)> = m
                .flows
                .iter()
                .map(|f| {
                    let labels = f.to.label_stack(self.topo).unwrap_or_default();
                    (f.index, self.hops_of(&f.to), labels)
                })
                .collect();
            let r = &mut self.state.reservations[idx];
            for (i, hops, labels) in paths {
                if let Some(f) = r.flows.get_mut(i) {
                    f.hops = hops;
                    f.labels = labels;
                }
            }
            r.revision += 1;
            let why: Vec<String> = m.causes.iter().map(|c| c.to_string()).collect();
            r.advisory = Some(truncate(
                format!(
                    "re-optimized before installation: {} of {} flows moved to other paths ({}); windows and rates unchanged",
                    m.flows.len(),
                    r.flows.len(),
                    why.join("; ")
                ),
                1000,
            ));
            if !self.moved.contains(&m.id) {
                self.moved.push(m.id.clone());
            }
        }
    }

    /// The reservations moved since the last call, as they are now (for
    /// `WatchEvents`); live ones only.
    /// An announcement takes over: the job's predicted reservations that
    /// have not ended are withdrawn before it is planned (they would hold
    /// the capacity it needs), and learning predicts again from it.
    fn supersede_predictions(&mut self, tenant: &str, job_id: &str, now: u64) {
        let withdrawn = self.withdraw_predicted(tenant, job_id, now);
        if !withdrawn.is_empty() {
            self.superseded.push(Superseded {
                tenant: tenant.to_string(),
                job_id: job_id.to_string(),
                withdrawn,
            });
        }
    }

    /// Predictions withdrawn by announcements since the last call.
    pub fn take_superseded(&mut self) -> Vec<Superseded> {
        std::mem::take(&mut self.superseded)
    }

    pub fn take_moved(&mut self) -> Vec<Reservation> {
        let ids = std::mem::take(&mut self.moved);
        ids.iter()
            .filter_map(|id| self.state.reservations.iter().find(|r| &r.id == id))
            .cloned()
            .collect()
    }

    /// After a cancellation: re-places the reservations that may move when
    /// that lowers their peak; returns how many moved.
    pub fn reoptimize_pending(&mut self, now: u64) -> usize {
        let movable = self.movable(now);
        if movable.is_empty() {
            return 0;
        }
        let ids: Vec<&str> = movable.iter().map(String::as_str).collect();
        let moved = self.planner.reoptimize(&ids);
        self.apply_moves(&moved);
        moved.len()
    }

    fn fill_outcome(
        &self,
        record: &mut Reservation,
        demand: &Demand,
        dp: &DemandPlan,
        meta: &[FlowMeta],
    ) {
        let (plan_reason, advisory) = match &dp.outcome {
            Outcome::Admitted => (Reason::None, None),
            Outcome::Deferred {
                requested_start_ns,
                start_ns,
            } => (
                Reason::InsufficientCapacity,
                Some(format!(
                    "deferred by {:.3} ms: capacity is reserved by others at the requested start",
                    (start_ns - requested_start_ns) as f64 / 1e6
                )),
            ),
            Outcome::Partial { reason, .. } | Outcome::Rejected { reason } => (
                reason_code(reason),
                Some(truncate(reason.to_string(), 1000)),
            ),
        };
        // Under shares, "free" and "reserved by others" are the tenant's slice.
        let advisory = advisory.map(|a| match self.planner.shares().describe(&demand.tenant) {
            Some(slice) => truncate(format!("{a} ({slice})"), 1000),
            None => a,
        });
        record.flows.clear();
        for ((flow, fp), m) in demand.flows.iter().zip(&dp.flows).zip(meta) {
            let hops = self.hops_of(&fp.path);
            let labels = if fp.reserved_bps > 0 {
                fp.path
                    .label_stack(self.topo)
                    .ok()
                    .filter(|l| !l.is_empty() && l.len() <= installer::names::SR_PUSH.len())
            } else {
                None
            };
            let (status, reason, accepted, labels) = match (fp.reserved_bps, labels) {
                (0, _) => (
                    Status::FallbackEcmp,
                    plan_reason_or(plan_reason),
                    0,
                    Vec::new(),
                ),
                (_, None) => (
                    Status::FallbackEcmp,
                    Reason::LabelStackTooDeep,
                    0,
                    Vec::new(),
                ),
                (r, Some(l)) if r >= flow.rate_bps && dp.shift_ns > 0 => (
                    Status::Deferred,
                    Reason::InsufficientCapacity,
                    flow.rate_bps,
                    l,
                ),
                (r, Some(l)) if r >= flow.rate_bps => {
                    (Status::Admitted, Reason::None, flow.rate_bps, l)
                }
                (r, Some(l)) => (Status::Partial, plan_reason_or(plan_reason), r, l),
            };
            let start = self.to_unix_ns(fp.start_ns);
            record.flows.push(FlowRecord {
                flow_id: m.flow_id.clone(),
                src: self.topo.hosts()[flow.src as usize].name.clone(),
                dst: self.topo.hosts()[flow.dst as usize].name.clone(),
                src_ip: flow.src_ip,
                dst_ip: flow.dst_ip,
                src_rank: m.src_rank,
                dst_rank: m.dst_rank,
                qp: flow.dest_qp,
                steer_qp: m.steer_qp,
                bytes: flow.bytes,
                rate_bps: flow.rate_bps,
                duration_ns: flow.duration_ns,
                requested_start_unix_ns: self.to_unix_ns(flow.start_ns),
                status,
                reason,
                accepted_bps: accepted,
                start_unix_ns: start,
                end_unix_ns: start + flow.duration_ns,
                labels,
                hops,
            });
        }
        let all = |s: Status| record.flows.iter().all(|f| f.status == s);
        let any_reserved = record.flows.iter().any(|f| f.status.reserves());
        let (status, reason) = if all(Status::Admitted) {
            (Status::Admitted, Reason::None)
        } else if record
            .flows
            .iter()
            .all(|f| matches!(f.status, Status::Admitted | Status::Deferred))
        {
            (Status::Deferred, Reason::InsufficientCapacity)
        } else if any_reserved {
            let r = record
                .flows
                .iter()
                .map(|f| f.reason)
                .find(|r| *r != Reason::None);
            (Status::Partial, r.unwrap_or(Reason::InsufficientCapacity))
        } else if plan_reason == Reason::DeadlineUnmeetable {
            (Status::Rejected, Reason::DeadlineUnmeetable)
        } else {
            let r = record
                .flows
                .iter()
                .map(|f| f.reason)
                .find(|r| *r != Reason::None);
            (
                Status::FallbackEcmp,
                r.unwrap_or(Reason::InsufficientCapacity),
            )
        };
        record.status = status;
        record.reason = reason;
        record.advisory = match status {
            Status::Admitted => None,
            _ => Some(advisory.unwrap_or_else(|| {
                let stuck = record.flows.iter().filter(|f| !f.status.reserves()).count();
                format!("{stuck} of {} flows fall back to ECMP", record.flows.len())
            })),
        };
    }

    // -----------------------------------------------------------------
    // Collectives
    // -----------------------------------------------------------------

    /// Expand and plan a collective over whole servers of the fabric.
    pub fn submit_collective(
        &mut self,
        request: &proto::SubmitCollectiveRequest,
        c: &nt::ValidatedCollective,
        now: u64,
    ) -> Result<(Reservation, PlanTiming), GrpcStatus> {
        let tenant = c.ctx.tenant.clone();
        let job = self
            .jobs
            .get(&(tenant.clone(), c.job_id.clone()))
            .cloned()
            .ok_or_else(|| {
                invalid(
                    "collective.job_id",
                    format!(
                        "job {:?} has no registered topology; call RegisterTopology first",
                        c.job_id
                    ),
                )
            })?;
        c.check_ranks(&job)?;
        let encoded = to_hex(
            &request
                .collective
                .as_ref()
                .map(|c| c.encode_to_vec())
                .unwrap_or_default(),
        );
        let subject = Subject::Collective(c.collective_id.clone());
        if let Some(idx) = self.live_index(&tenant, &subject) {
            let existing = &self.state.reservations[idx];
            if existing.request == encoded {
                return Ok((existing.clone(), PlanTiming::default()));
            }
            return Err(GrpcStatus::already_exists(format!(
                "collective.collective_id: collective {:?} is live (reservation {}) with different contents; cancel it first or use another id",
                c.collective_id, existing.id
            )));
        }

        // Ranks -> hosts -> whole servers, in rank order.
        let all_ranks: Vec<u32> = c.ranks.iter().chain(&c.peer_ranks).copied().collect();
        let mut servers: Vec<u32> = Vec::new();
        let mut count: HashMap<u32, u32> = HashMap::new();
        let mut unknown = None;
        for (i, &r) in all_ranks.iter().enumerate() {
            let ep = job.endpoint(r).expect("ranks checked");
            let Some(&h) = self.by_ip.get(&ep.host_address) else {
                unknown = Some(ep.host_address);
                continue;
            };
            let server = self.topo.hosts()[h as usize].server;
            if servers.last() != Some(&server) {
                if servers.contains(&server) {
                    let field = if i < c.ranks.len() {
                        format!("collective.ranks[{i}]")
                    } else {
                        format!("collective.peer_ranks[{}]", i - c.ranks.len())
                    };
                    return Err(invalid(
                        field,
                        format!(
                            "rank {r} is on server {} again after other servers; the controller plans collectives over whole servers with their ranks listed together",
                            self.topo.servers()[server as usize].name
                        ),
                    ));
                }
                servers.push(server);
            }
            *count.entry(server).or_default() += 1;
        }
        if unknown.is_none() {
            for &s in &servers {
                let (have, gpus) = (count[&s], self.topo.servers()[s as usize].gpus);
                if have != gpus {
                    return Err(invalid(
                        "collective.ranks",
                        format!(
                            "{have} ranks on server {} which has {gpus} GPUs; the controller plans collectives over whole servers (one rank per GPU)",
                            self.topo.servers()[s as usize].name
                        ),
                    ));
                }
            }
        }
        let reference = c.reference_unix_ns.unwrap_or(now);
        // With only a flow rate known, no flow carries more than the whole
        // buffer: that bounds the end.
        let longest_ns = match c.pacing {
            nt::CollectivePacing::DurationNs(d) => d,
            nt::CollectivePacing::FlowRateBps(r) => transfer_ns(c.size_bytes, r),
        };
        let field = match c.start {
            nt::TimePoint::OffsetNs(_) => "collective.start_offset_ns",
            nt::TimePoint::UnixNs(_) => "collective.start_unix_ns",
        };
        refuse_stale(
            field,
            c.start.resolve(reference).saturating_add(longest_ns),
            c.recurrence,
            now,
        )?;
        let start = c.start.resolve(reference).max(now);
        let occurrences = c.recurrence.map_or(1, |r| r.occurrences as u64);
        let period = c.recurrence.map_or(0, |r| r.period_ns);
        let deadline = c
            .deadline
            .map(|dl| dl.resolve(reference) + period * (occurrences - 1));
        self.supersede_predictions(&tenant, &c.job_id, now);
        let (id, seq) = self.next_id(&c.collective_id);
        let mut record = Reservation {
            id,
            seq,
            tenant: tenant.clone(),
            subject,
            job_id: Some(c.job_id.clone()),
            request: encoded,
            priority: planner_priority(c.priority),
            elastic: c.elasticity == nt::Elasticity::Elastic,
            deadline_unix_ns: deadline,
            status: Status::Rejected,
            reason: Reason::UnknownEndpoint,
            advisory: None,
            revision: 1,
            flows: Vec::new(),
            cancelled: false,
            predicted: false,
        };
        if let Some(addr) = unknown {
            record.advisory = Some(format!(
                "host {addr} of the job is not attached to the fabric; the collective's traffic is routed by ECMP"
            ));
            self.state.reservations.push(record.clone());
            return Ok((record, PlanTiming::default()));
        }

        let kind = match c.kind {
            nt::CollectiveKind::RingAllReduce => CollectiveKind::RingAllreduce,
            nt::CollectiveKind::TreeAllReduce => CollectiveKind::TreeAllreduce,
            nt::CollectiveKind::AllGather => CollectiveKind::AllGather,
            nt::CollectiveKind::ReduceScatter => CollectiveKind::ReduceScatter,
            nt::CollectiveKind::AllToAll => CollectiveKind::AllToAll,
            nt::CollectiveKind::PipelineSend => CollectiveKind::Pipeline,
            nt::CollectiveKind::KvCacheTransfer => CollectiveKind::KvTransfer,
        };
        let mut spec = Collective::new(kind, servers.clone(), c.size_bytes);
        spec.channels = c.channels;
        spec.start_ns = self.to_planner_ns(start);
        match kind {
            CollectiveKind::Pipeline => {
                spec.stages = servers.len() as u32;
                spec.microbatches = 1;
            }
            CollectiveKind::KvTransfer => {
                let prefill: std::collections::HashSet<u32> = c
                    .ranks
                    .iter()
                    .filter_map(|r| job.endpoint(*r))
                    .filter_map(|e| self.by_ip.get(&e.host_address))
                    .map(|h| self.topo.hosts()[*h as usize].server)
                    .collect();
                spec.prefill_servers = Some(prefill.len() as u32);
            }
            _ => {}
        }
        if let nt::CollectivePacing::FlowRateBps(r) = c.pacing {
            spec.rate_bps = Some(r);
        }
        let mut qps = planner::demand::QpAllocator::new(self.topo);
        let expanded = collectives::expand(self.topo, &spec, &mut qps)
            .map_err(|e| invalid("collective", format!("cannot expand: {e}")))?;
        if expanded.is_empty() {
            return Err(invalid(
                "collective.ranks",
                "every rank is on one server: the traffic stays on NVLink and never reaches the fabric",
            ));
        }
        let total = expanded.len() as u64 * occurrences;
        if total > MAX_FLOWS_PER_RESERVATION as u64 {
            return Err(invalid(
                "collective.recurrence.occurrences",
                format!("{total} flows; the controller plans at most {MAX_FLOWS_PER_RESERVATION} flows per reservation"),
            ));
        }
        // Durations: a collective duration stretches each connection's flow
        // to end with the collective.
        let collective_end = expanded
            .iter()
            .map(|f| f.end_ns())
            .max()
            .unwrap_or(spec.start_ns);
        let scale_to = match c.pacing {
            nt::CollectivePacing::DurationNs(d) => Some(d),
            nt::CollectivePacing::FlowRateBps(_) => None,
        };
        // Controller-wide QPs so collectives never share a (src, dst, QP).
        let mut qp_map: HashMap<(HostIdx, u32), u32> = HashMap::new();
        let mut flows = Vec::new();
        let mut meta = Vec::new();
        for k in 0..occurrences {
            for f in &expanded {
                let qp = match qp_map.get(&(f.dst, f.dest_qp)) {
                    Some(q) => *q,
                    None => {
                        let q = self.alloc_qp(f.dst);
                        qp_map.insert((f.dst, f.dest_qp), q);
                        q
                    }
                };
                match scale_to {
                    Some(d) => {
                        let offset = f.start_ns - spec.start_ns;
                        let span = collective_end - spec.start_ns;
                        // Keep the flow's place in the schedule, scaled to d.
                        let s_off = (offset as u128 * d as u128 / span.max(1) as u128) as u64;
                        let dur = ((f.duration_ns as u128 * d as u128) / span.max(1) as u128).max(1)
                            as u64;
                        let rate = nt::rate_for(f.bytes, dur);
                        let start = spec.start_ns + s_off + k * period;
                        flows.push(Flow::with_duration(
                            self.topo, f.src, f.dst, qp, start, f.bytes, rate, dur,
                        ));
                    }
                    None => {
                        flows.push(Flow::with_duration(
                            self.topo,
                            f.src,
                            f.dst,
                            qp,
                            f.start_ns + k * period,
                            f.bytes,
                            f.rate_bps,
                            f.duration_ns,
                        ));
                    }
                }
                meta.push(FlowMeta {
                    flow_id: format!("{}/{}", c.collective_id, meta.len()),
                    src_rank: None,
                    dst_rank: None,
                    // Entries match the controller's QP only where the
                    // library has QPs; a TCP job's match its host pairs.
                    steer_qp: job.library.uses_queue_pairs(),
                });
            }
        }
        let demand = Demand {
            id: record.id.clone(),
            tenant: tenant.clone(),
            priority: record.priority,
            elastic: record.elastic,
            deadline_ns: deadline.map(|d| self.to_planner_ns(d)),
            kind: DemandKind::Collective(kind),
            flows,
        };
        let (p, timing) = self.plan_one(
            Pending {
                record,
                demand,
                meta,
            },
            Some(now),
        );
        self.state.reservations.push(p.record.clone());
        Ok((p.record, timing))
    }

    // -----------------------------------------------------------------
    // Cancel, deviation, expiry
    // -----------------------------------------------------------------

    fn cancel_at(&mut self, idx: usize) -> String {
        let r = &mut self.state.reservations[idx];
        self.planner.release(&r.id);
        r.cancelled = true;
        r.status = Status::Cancelled;
        r.reason = Reason::None;
        r.advisory = None;
        r.revision += 1;
        for f in &mut r.flows {
            f.status = Status::Cancelled;
            f.reason = Reason::None;
            f.accepted_bps = 0;
            f.labels.clear();
            f.hops.clear();
        }
        let id = r.id.clone();
        self.state.retire(idx);
        id
    }

    /// Cancel a demand, collective, reservation or job of the tenant.
    pub fn cancel(&mut self, c: &nt::ValidatedCancel) -> Result<Vec<Reservation>, GrpcStatus> {
        let tenant = &c.ctx.tenant;
        let matches: Vec<usize> = self
            .state
            .reservations
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                &r.tenant == tenant
                    && match &c.target {
                        CancelTarget::Demand(id) => r.subject == Subject::Demand(id.clone()),
                        CancelTarget::Collective(id) => {
                            r.subject == Subject::Collective(id.clone())
                        }
                        CancelTarget::Reservation(id) => &r.id == id,
                        CancelTarget::Job(id) => r.job_id.as_ref() == Some(id),
                    }
            })
            .map(|(i, _)| i)
            .collect();
        let job_known = match &c.target {
            CancelTarget::Job(id) => self.jobs.contains_key(&(tenant.clone(), id.clone())),
            _ => false,
        };
        if matches.is_empty() && !job_known {
            let (field, what) = match &c.target {
                CancelTarget::Demand(id) => ("demand_id", format!("demand {id:?}")),
                CancelTarget::Collective(id) => ("collective_id", format!("collective {id:?}")),
                CancelTarget::Reservation(id) => ("reservation_id", format!("reservation {id:?}")),
                CancelTarget::Job(id) => ("job_id", format!("job {id:?}")),
            };
            return Err(GrpcStatus::not_found(format!(
                "{field}: no live {what} of tenant {tenant:?}"
            )));
        }
        let mut out = Vec::new();
        for idx in matches.into_iter().rev() {
            let id = self.cancel_at(idx);
            out.push(self.state.find(&id).expect("retired").clone());
        }
        out.reverse();
        if let CancelTarget::Job(id) = &c.target {
            self.jobs.remove(&(tenant.clone(), id.clone()));
            self.state
                .jobs
                .retain(|j| !(&j.tenant == tenant && &j.job_id == id));
        }
        Ok(out)
    }

    /// Re-plan after a workload deviation.
    pub fn deviation(
        &mut self,
        d: &nt::ValidatedDeviation,
        now: u64,
    ) -> Result<(Vec<Reservation>, PlanTiming), GrpcStatus> {
        let tenant = &d.ctx.tenant;
        let (subject, field) = match &d.target {
            DeviationTarget::Demand(id) => (Subject::Demand(id.clone()), "deviation.demand_id"),
            DeviationTarget::Collective(id) => {
                (Subject::Collective(id.clone()), "deviation.collective_id")
            }
        };
        let Some(idx) = self.live_index(tenant, &subject) else {
            return Err(GrpcStatus::not_found(format!(
                "{field}: no live {} {:?} of tenant {tenant:?}",
                subject.kind(),
                subject.id()
            )));
        };
        let reference = d.reference_unix_ns.unwrap_or(now);
        let old = self.state.reservations[idx].clone();
        let mut flows = old.flows.clone();
        match &d.change {
            WorkloadChange::Completed { .. } | WorkloadChange::Aborted { .. } => {
                let id = self.cancel_at(idx);
                return Ok((
                    vec![self.state.find(&id).expect("retired").clone()],
                    PlanTiming::default(),
                ));
            }
            WorkloadChange::EarlyStart(t) | WorkloadChange::LateStart(t) => {
                let new_start = t.resolve(reference).max(now);
                let old_start = flows
                    .iter()
                    .map(|f| f.requested_start_unix_ns)
                    .min()
                    .unwrap_or(new_start);
                // Every flow moves with the start; the deadline stays (a
                // late start that misses it is rejected by the planner).
                for f in &mut flows {
                    f.requested_start_unix_ns = f.requested_start_unix_ns - old_start + new_start;
                }
            }
            WorkloadChange::SizeChange { new_size_bytes } => {
                let old_total: u128 = flows.iter().map(|f| f.bytes as u128).sum::<u128>().max(1);
                for f in &mut flows {
                    f.bytes =
                        ((f.bytes as u128 * *new_size_bytes as u128) / old_total).max(1) as u64;
                    f.duration_ns = transfer_ns(f.bytes, f.rate_bps).max(1);
                }
            }
        }
        let mut record = old.clone();
        record.flows = flows;
        let demand = self
            .demand_of(&record)
            .map_err(|e| GrpcStatus::internal(e.to_string()))?;
        self.planner.release(&old.id);
        let meta: Vec<FlowMeta> = record
            .flows
            .iter()
            .map(|f| FlowMeta {
                flow_id: f.flow_id.clone(),
                src_rank: f.src_rank,
                dst_rank: f.dst_rank,
                steer_qp: f.steer_qp,
            })
            .collect();
        record.revision += 1;
        let (mut p, timing) = self.plan_one(
            Pending {
                record,
                demand,
                meta,
            },
            None,
        );
        if p.record.status != Status::Admitted && p.record.reason == Reason::None {
            p.record.reason = Reason::WorkloadDeviation;
        }
        self.state.reservations[idx] = p.record.clone();
        Ok((vec![p.record], timing))
    }

    // -----------------------------------------------------------------
    // Link state (network-side deviations)
    // -----------------------------------------------------------------

    /// The fabric link at `node:port` (a port of a switch that leads to
    /// another switch) and its two directed edges, or why not.
    pub fn resolve_link(
        &self,
        node: &str,
        port: u32,
    ) -> Result<(LinkRef, [planner::topology::EdgeId; 2]), String> {
        use planner::topology::NodeRef;
        let topo = self.topo;
        let Some(s) = topo.switch_by_name(node) else {
            if topo.host_by_name(node).is_some() {
                return Err(format!(
                    "{node} is a host, not a switch: name the link by a switch end (a fabric link joins two switches)"
                ));
            }
            let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "no switch {node:?} in fabric {}; switches: {}",
                topo.name(),
                names.join(", ")
            ));
        };
        let fabric_ports = || {
            let mut p: Vec<String> = topo
                .switch_out_edges(s)
                .iter()
                .map(|&e| topo.edge(e).from_port.to_string())
                .collect();
            p.sort_by_key(|x| x.parse::<u32>().unwrap_or(0));
            p.join(", ")
        };
        let hop = Hop {
            switch: node.to_string(),
            port: u16::try_from(port).map_err(|_| {
                format!(
                    "{node}:{port}: no such port; fabric ports of {node}: {}",
                    fabric_ports()
                )
            })?,
        };
        let Some(e) = self.edge_of(&hop) else {
            return Err(format!(
                "{node}:{port}: nothing is attached to that port; fabric ports of {node}: {}",
                fabric_ports()
            ));
        };
        let l = topo.edge(e);
        let NodeRef::Switch(peer) = l.to else {
            return Err(format!(
                "{node}:{port} connects host {}, not another switch: not a fabric link (fabric ports of {node}: {})",
                topo.node_name(l.to),
                fabric_ports()
            ));
        };
        let reverse = topo
            .switch_out_edges(peer)
            .iter()
            .copied()
            .find(|&r| topo.edge(r).to == l.from && topo.edge(r).from_port == l.to_port)
            .ok_or_else(|| {
                format!("{node}:{port}: the fabric has no reverse direction of this link")
            })?;
        let me = (node.to_string(), hop.port);
        let other = (topo.switches()[peer as usize].name.clone(), l.to_port);
        let (a, b) = if me <= other {
            (me, other)
        } else {
            (other, me)
        };
        Ok((
            LinkRef {
                a: a.0,
                a_port: a.1,
                b: b.0,
                b_port: b.1,
            },
            [e, reverse],
        ))
    }

    /// Every directed edge that is down.
    pub fn down_edges(&self) -> BTreeSet<planner::topology::EdgeId> {
        (0..self.topo.edge_count() as u32)
            .filter(|&e| self.planner.is_edge_down(e))
            .collect()
    }

    /// Indices of live reservations with a flow, not over at `now`, whose
    /// recorded hops cross an edge in `edges`.
    fn crossing(&self, edges: &BTreeSet<planner::topology::EdgeId>, now: u64) -> Vec<usize> {
        self.state
            .reservations
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.flows.iter().any(|f| {
                    now < f.end_unix_ns
                        && f.hops
                            .iter()
                            .any(|h| self.edge_of(h).is_some_and(|e| edges.contains(&e)))
                })
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Re-plan reservation `idx` on the current link state; flows left
    /// without a reservation while a link is down get reason LINK_DOWN.
    fn replan_for_links(
        &mut self,
        idx: usize,
        down: &BTreeSet<planner::topology::EdgeId>,
        now: Option<u64>,
    ) -> anyhow::Result<Reservation> {
        let old = self.state.reservations[idx].clone();
        let demand = self.demand_of(&old)?;
        self.planner.release(&old.id);
        let meta: Vec<FlowMeta> = old
            .flows
            .iter()
            .map(|f| FlowMeta {
                flow_id: f.flow_id.clone(),
                src_rank: f.src_rank,
                dst_rank: f.dst_rank,
                steer_qp: f.steer_qp,
            })
            .collect();
        let mut record = old.clone();
        record.revision += 1;
        let (mut p, _) = self.plan_one(
            Pending {
                record,
                demand,
                meta,
            },
            now,
        );
        if !down.is_empty() {
            let mut lost = 0;
            for f in &mut p.record.flows {
                if !f.status.reserves() {
                    f.reason = Reason::LinkDown;
                    lost += 1;
                }
            }
            if lost > 0 {
                p.record.reason = Reason::LinkDown;
                let links: Vec<String> = self
                    .state
                    .links_down
                    .iter()
                    .map(|l| l.to_string())
                    .collect();
                p.record.advisory = Some(truncate(
                    format!(
                        "link down ({}): {lost} of {} flows have no reserved path and fall back to ECMP",
                        links.join(", "),
                        p.record.flows.len()
                    ),
                    1000,
                ));
            }
        }
        self.state.reservations[idx] = p.record.clone();
        Ok(p.record)
    }

    /// Take the fabric link at `node:port` down (`down`) or bring it up.
    /// Down: both directions leave the planner's view and every live
    /// reservation recorded on the link is re-planned (other paths, or
    /// ECMP fallback with reason LINK_DOWN). Up: the link is usable again
    /// and reservations that lost their path to a down link are re-planned.
    /// A request for the state the link is already in changes nothing.
    /// Bad input (unknown switch or port, a host port) changes nothing.
    pub fn set_link(
        &mut self,
        node: &str,
        port: u32,
        down: bool,
        now: u64,
    ) -> Result<LinkChange, String> {
        let (link, edges) = self.resolve_link(node, port)?;
        let was_down = self.state.links_down.contains(&link);
        let mut change = LinkChange {
            link: link.clone(),
            edges,
            changed: was_down != down,
            affected: Vec::new(),
        };
        if !change.changed {
            return Ok(change);
        }
        for e in edges {
            self.planner.set_edge_down(e, down);
        }
        let targets: Vec<usize> = if down {
            self.state.links_down.push(link);
            self.state.links_down.sort();
            self.crossing(&edges.into_iter().collect(), now)
        } else {
            self.state.links_down.retain(|l| l != &link);
            self.state
                .reservations
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    r.reason == Reason::LinkDown
                        || r.flows.iter().any(|f| f.reason == Reason::LinkDown)
                })
                .map(|(i, _)| i)
                .collect()
        };
        let all_down = self.down_edges();
        for idx in targets {
            let r = self
                .replan_for_links(idx, &all_down, Some(now))
                .map_err(|e| format!("re-planning: {e}"))?;
            change.affected.push(r);
        }
        // Reservations moved to make room are affected too, as they are now.
        for r in self.take_moved() {
            match change.affected.iter_mut().find(|a| a.id == r.id) {
                Some(a) => *a = r,
                None => change.affected.push(r),
            }
        }
        Ok(change)
    }

    /// Paths between two fabric hosts at `now`: equal-cost paths, those
    /// with every link up, and the largest rate one of those could still
    /// reserve (headroom minus the ledger, source NIC included; within
    /// `tenant`'s share when shares are set). `None` when a host is not
    /// attached to the fabric.
    pub fn path_availability(
        &self,
        tenant: &str,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        now: u64,
    ) -> Option<nt::PathAvailability> {
        let (&s, &d) = (self.by_ip.get(&src)?, self.by_ip.get(&dst)?);
        if s == d {
            return None;
        }
        let paths = planner::paths::all_paths(self.topo, s, d, 1024);
        let t = self.to_planner_ns(now);
        let w = planner::Window::new(t, t + 1);
        let up: Vec<&planner::Path> = paths
            .iter()
            .filter(|p| {
                p.reserved_edges(self.topo, s)
                    .all(|e| !self.planner.is_edge_down(e))
            })
            .collect();
        let max_reservable_bps = up
            .iter()
            .map(|p| {
                p.reserved_edges(self.topo, s)
                    .map(|e| self.planner.free_bps(tenant, e, w))
                    .min()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        Some(nt::PathAvailability {
            source_address: src,
            destination_address: dst,
            equal_cost_paths: paths.len() as u32,
            available_paths: up.len() as u32,
            max_reservable_bps,
        })
    }

    /// Retire reservations whose every flow window is over; returns them.
    pub fn expire(&mut self, now: u64) -> Vec<String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.state.reservations.len() {
            if now >= self.state.reservations[i].end_unix_ns() {
                let id = self.state.reservations[i].id.clone();
                self.planner.release(&id);
                self.state.retire(i);
                out.push(id);
            } else {
                i += 1;
            }
        }
        out
    }

    /// The next moment the desired switch state changes (an install, an
    /// expiry), after `now`.
    pub fn next_event(&self, now: u64, lead_ns: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| {
            if t > now && next.is_none_or(|n| t < n) {
                next = Some(t);
            }
        };
        for r in &self.state.reservations {
            consider(r.end_unix_ns());
            for f in r.installing() {
                consider(f.install_unix_ns(lead_ns));
                consider(f.end_unix_ns);
            }
        }
        next
    }

    /// Reserved rate on each directed link at `now` (planner ledger).
    pub fn reserved_now(&self, now: u64) -> Vec<(planner::topology::EdgeId, u64)> {
        let t = self.to_planner_ns(now);
        (0..self.topo.edge_count() as u32)
            .map(|e| (e, self.planner.reserved_at(e, t)))
            .filter(|(_, b)| *b > 0)
            .collect()
    }

    /// The tenant's reservations (live, then finished), optionally of one job.
    pub fn list(&self, tenant: &str, job: Option<&str>) -> Vec<&Reservation> {
        self.state
            .reservations
            .iter()
            .chain(self.state.history.iter())
            .filter(|r| r.tenant == tenant && job.is_none_or(|j| r.job_id.as_deref() == Some(j)))
            .collect()
    }
}

fn plan_reason_or(r: Reason) -> Reason {
    if r == Reason::None {
        Reason::InsufficientCapacity
    } else {
        r
    }
}

fn reason_code(r: &PlanReason) -> Reason {
    match r {
        PlanReason::Bottleneck { .. } | PlanReason::ExceedsNic { .. } => {
            Reason::InsufficientCapacity
        }
        PlanReason::DeadlineBeforeCompletion { .. } => Reason::DeadlineUnmeetable,
        PlanReason::NoStartBeforeDeadline {
            deadline_ns,
            blocked_by,
            ..
        } => {
            if deadline_ns.is_some() {
                Reason::DeadlineUnmeetable
            } else {
                reason_code(blocked_by)
            }
        }
        PlanReason::DoesNotFit { blocked_by } => reason_code(blocked_by),
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// A reservation record as the NDSP domain type (for encoding).
pub fn to_ndsp(r: &Reservation) -> nt::ValidatedReservation {
    let reserves = |s: Status| s.reserves();
    let flows: Vec<nt::FlowReservation> = r
        .flows
        .iter()
        .map(|f| nt::FlowReservation {
            flow_id: f.flow_id.clone(),
            source_address: f.src_ip,
            destination_address: f.dst_ip,
            source_rank: f.src_rank,
            destination_rank: f.dst_rank,
            dest_qp: f.steer_qp.then_some(f.qp),
            status: f.status.into(),
            reason: f.reason.into(),
            requested_bps: f.rate_bps,
            accepted_bps: f.accepted_bps,
            start_unix_ns: f.start_unix_ns,
            end_unix_ns: f.end_unix_ns,
            sr_label_stack: if reserves(f.status) {
                f.labels.clone()
            } else {
                Vec::new()
            },
            hops: if reserves(f.status) {
                f.hops
                    .iter()
                    .map(|h| nt::PathHop {
                        node: h.switch.clone(),
                        egress_port: u32::from(h.port),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            advisory: None,
        })
        .collect();
    nt::ValidatedReservation {
        reservation_id: r.id.clone(),
        subject: match &r.subject {
            Subject::Demand(id) => nt::ReservationSubject::Demand(id.clone()),
            Subject::Collective(id) => nt::ReservationSubject::Collective(id.clone()),
        },
        job_id: r.job_id.clone(),
        status: r.status.into(),
        reason: r.reason.into(),
        advisory: r.advisory.clone(),
        start_unix_ns: r.start_unix_ns(),
        end_unix_ns: r.end_unix_ns(),
        flows,
        revision: r.revision,
        predicted: r.predicted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::desired::{Compiler, Policy};
    use installer::ecn::EcnProfile;
    use ndsp::proto::collective;
    use testkit::requests::{demand, header};

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_000_000_000_000_000_000;

    fn topo() -> &'static Topology {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
        );
        Box::leak(Box::new(planner::topology::yaml::load_file(path).unwrap()))
    }

    /// An engine over `state` (fresh, or a restart's reload) without shares.
    fn restart(topo: &'static Topology, state: State) -> (Engine, Restored) {
        Engine::new(
            topo,
            PlannerConfig::default(),
            TenantShares::default(),
            state,
        )
        .unwrap()
    }

    fn engine() -> Engine {
        let topo = topo();
        restart(topo, State::new(topo.name(), T0)).0
    }

    fn compiler(topo: &'static Topology, lead_ns: u64) -> Compiler {
        seeded_compiler(topo, lead_ns, planner::ecmp::SeedPolicy::PerSwitch)
    }

    fn seeded_compiler(
        topo: &'static Topology,
        lead_ns: u64,
        seeds: planner::ecmp::SeedPolicy,
    ) -> Compiler {
        policy_compiler(topo, lead_ns, seeds, 1)
    }

    fn policy_compiler(
        topo: &'static Topology,
        lead_ns: u64,
        seeds: planner::ecmp::SeedPolicy,
        background_tc: u8,
    ) -> Compiler {
        let pipeline = crate::fabric::Pipeline::embedded().unwrap();
        let policy = Policy {
            lead_ns,
            ecn: EcnProfile::default(),
            lowered: EcnProfile::lowered(),
            predrain_probability: 0xffff,
            collector: None,
            ecmp_hash: planner::ecmp::HashMode::QpAware.into(),
            ecmp_seeds: seeds,
            reserved_tc: installer::reservations::RESERVED_TC,
            background_tc,
            int_mtu: None,
        };
        let devices = std::sync::Arc::new(installer::Devices::bmv2());
        Compiler::new(topo, pipeline.info, devices, policy).unwrap()
    }

    fn submit(
        e: &mut Engine,
        demands: Vec<proto::DemandSignal>,
        now: u64,
    ) -> Result<Vec<Reservation>, GrpcStatus> {
        let req = proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: now,
            demands,
        };
        let batch = req.validate().unwrap();
        e.submit_demands(&req, &batch, now).map(|(r, _)| r)
    }

    fn register(e: &mut Engine, hosts: &[&str]) {
        let req = testkit::requests::register("job", hosts);
        let t = req.validate().unwrap();
        e.register(&req, t);
    }

    fn ring(id: &str, ranks: u32, start: u64, dur: u64) -> proto::SubmitCollectiveRequest {
        proto::SubmitCollectiveRequest {
            header: header(),
            reference_unix_ns: T0,
            collective: Some(proto::Collective {
                collective_id: id.into(),
                job_id: "job".into(),
                kind: proto::CollectiveKind::RingAllReduce as i32,
                ranks: (0..ranks).collect(),
                peer_ranks: vec![],
                size_bytes: 256 << 20,
                channels: 8,
                start: Some(collective::Start::StartOffsetNs(start)),
                pacing: Some(collective::Pacing::DurationNs(dur)),
                priority: proto::PriorityClass::IterationBlocking as i32,
                elasticity: proto::Elasticity::Inelastic as i32,
                deadline: None,
                recurrence: None,
            }),
        }
    }

    /// The record as a client would receive and validate it.
    fn wire(r: &Reservation) -> nt::ValidatedReservation {
        let p: proto::Reservation = (&to_ndsp(r)).into();
        p.validate()
            .unwrap_or_else(|e| panic!("controller answer does not validate: {e}\n{r:?}"))
    }

    /// The entries of `table` the switches (or only `switch`) should hold.
    fn entries_of(
        d: &std::collections::BTreeMap<String, installer::intent::Resolved>,
        switch: Option<&str>,
        table: &str,
    ) -> Vec<p4rt::proto::p4::v1::TableEntry> {
        let info = crate::fabric::Pipeline::embedded().unwrap().info;
        let id = info.table(table).unwrap().preamble.as_ref().unwrap().id;
        d.iter()
            .filter(|(name, _)| switch.is_none_or(|s| s == name.as_str()))
            .flat_map(|(_, r)| r.entities.values())
            .filter_map(|x| match &x.entity {
                Some(p4rt::proto::p4::v1::entity::Entity::TableEntry(t)) if t.table_id == id => {
                    Some(t.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// The SR reservation entries leaf1 should hold.
    fn leaf1_sr_entries(
        d: &std::collections::BTreeMap<String, installer::intent::Resolved>,
    ) -> Vec<p4rt::proto::p4::v1::TableEntry> {
        entries_of(d, Some("leaf1"), installer::names::SR_RESERVATION)
    }

    fn tables(
        d: &std::collections::BTreeMap<String, installer::intent::Resolved>,
        table: &str,
    ) -> usize {
        entries_of(d, None, table).len()
    }

    /// The static state gives every switch one `hash_seed` default entry
    /// carrying its seed under the policy.
    #[test]
    fn every_switch_is_given_its_hash_seed() {
        use p4rt::proto::p4::v1::table_action::Type;
        use planner::ecmp::SeedPolicy;
        let topo = topo();
        let info = crate::fabric::Pipeline::embedded().unwrap().info;
        let table = info
            .table(installer::names::HASH_SEED)
            .unwrap()
            .preamble
            .as_ref()
            .unwrap()
            .id;
        let state = State::new(topo.name(), T0);
        for seeds in [SeedPolicy::PerSwitch, SeedPolicy::Same(7)] {
            let desired = seeded_compiler(topo, 0, seeds).desired(&state, T0).unwrap();
            assert_eq!(desired.len(), topo.switches().len());
            for (name, r) in &desired {
                let entries: Vec<_> = r.defaults.iter().filter(|t| t.table_id == table).collect();
                assert_eq!(entries.len(), 1, "{name}");
                let Some(Type::Action(a)) =
                    entries[0].action.as_ref().and_then(|a| a.r#type.as_ref())
                else {
                    panic!("{name}: hash_seed default without an action");
                };
                let seed = a.params[0]
                    .value
                    .iter()
                    .fold(0u32, |v, b| (v << 8) | u32::from(*b));
                assert_eq!(seed, seeds.seed(name), "{name} under {seeds}");
            }
        }
    }

    #[test]
    fn a_collective_is_planned_over_whole_servers_and_installed_in_its_window() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 16, 100 * MS, 200 * MS);
        let c = req.validate().unwrap();
        let (r, _) = e.submit_collective(&req, &c, T0).unwrap();
        assert_eq!(r.status, Status::Admitted);
        assert_eq!(r.flows.len(), 16, "2 servers x 8 channels x 2 directions");
        let v = wire(&r);
        assert_eq!(v.start_unix_ns, T0 + 100 * MS);
        assert_eq!(v.end_unix_ns, T0 + 300 * MS);
        // Distinct (src, dst, QP): every flow gets its own entries.
        let keys: std::collections::BTreeSet<_> =
            r.flows.iter().map(|f| (f.src_ip, f.dst_ip, f.qp)).collect();
        assert_eq!(keys.len(), 16);

        let lead = 10 * MS;
        let mut comp = compiler(e.topo, lead);
        let at = |comp: &mut Compiler, t: u64| comp.desired(&e.state, t).unwrap();
        let sr = installer::names::SR_RESERVATION;
        assert_eq!(
            tables(&at(&mut comp, T0 + 89 * MS), sr),
            0,
            "not before start - lead"
        );
        let during = at(&mut comp, T0 + 90 * MS);
        assert_eq!(tables(&during, sr), 16);
        assert_eq!(tables(&during, installer::names::INT_WATCHLIST), 16);
        assert_eq!(tables(&at(&mut comp, T0 + 299 * MS), sr), 16);
        assert_eq!(
            tables(&at(&mut comp, T0 + 300 * MS), sr),
            0,
            "gone at expiry"
        );
        assert_eq!(e.next_event(T0, lead), Some(T0 + 90 * MS));
        assert_eq!(e.next_event(T0 + 90 * MS, lead), Some(T0 + 300 * MS));
        assert_eq!(e.expire(T0 + 300 * MS), vec![r.id.clone()]);
        assert!(e.state.reservations.is_empty());
    }

    /// NCCL's connections are queue pairs the entries can match; gloo's are
    /// TCP connections on ephemeral ports, so its entries match the host pair.
    #[test]
    fn a_tcp_library_s_collective_matches_host_pairs_not_qps() {
        for (library, steers) in [
            (proto::CollectiveLibrary::Nccl, true),
            (proto::CollectiveLibrary::Gloo, false),
        ] {
            let mut e = engine();
            let mut req = testkit::requests::register("job", &["10.0.1.1", "10.0.2.1"]);
            req.topology.as_mut().unwrap().library = library as i32;
            let t = req.validate().unwrap();
            e.register(&req, t);
            let req = ring("ar", 16, 100 * MS, 200 * MS);
            let (r, _) = e
                .submit_collective(&req, &req.validate().unwrap(), T0)
                .unwrap();
            assert_eq!(r.status, Status::Admitted, "{library:?}");
            for f in &r.flows {
                assert_eq!(f.dst_qp().is_some(), steers, "{library:?}: {f:?}");
            }
        }
    }

    #[test]
    fn collectives_that_split_servers_are_refused_naming_the_field() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 12, 0, 20 * MS);
        let err = e
            .submit_collective(&req, &req.validate().unwrap(), T0)
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().starts_with("collective.ranks: "),
            "{}",
            err.message()
        );
        assert!(e.state.reservations.is_empty());
    }

    #[test]
    fn resubmission_is_idempotent_and_a_changed_demand_is_refused() {
        let mut e = engine();
        let d = demand(
            "d",
            "10.0.1.1",
            "10.0.2.1",
            0,
            10 * MS,
            10_000_000_000,
            Some(500),
        );
        let first = submit(&mut e, vec![d.clone()], T0).unwrap();
        let again = submit(&mut e, vec![d.clone()], T0 + MS).unwrap();
        assert_eq!(first[0].id, again[0].id);
        assert_eq!(e.state.reservations.len(), 1);
        let mut changed = d;
        changed.size_bytes += 1;
        let err = submit(&mut e, vec![changed], T0).unwrap_err();
        assert_eq!(err.code(), tonic::Code::AlreadyExists);
        assert!(
            err.message().starts_with("demands[0].demand_id: "),
            "{}",
            err.message()
        );
    }

    #[test]
    fn stale_announcements_are_refused_and_change_nothing() {
        let mut e = engine();
        let fresh = demand(
            "fresh",
            "10.0.1.1",
            "10.0.2.1",
            0,
            10 * MS,
            10_000_000_000,
            None,
        );
        // Announced for T0, 10 ms long, received a second later.
        let req = proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: T0,
            demands: vec![
                demand(
                    "late",
                    "10.0.1.2",
                    "10.0.2.2",
                    0,
                    10 * MS,
                    10_000_000_000,
                    None,
                ),
                fresh.clone(),
            ],
        };
        let batch = req.validate().unwrap();
        let err = e.submit_demands(&req, &batch, T0 + 1_000 * MS).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().starts_with(
                "demands[0].start_offset_ns: the announced traffic ended 990.000 ms before"
            ),
            "{}",
            err.message()
        );
        assert!(e.state.reservations.is_empty(), "all or nothing");
        // A recurrence whose later occurrences are still ahead is not stale.
        let mut recurring = req.demands[0].clone();
        recurring.recurrence = Some(proto::Recurrence {
            period_ns: 600 * MS,
            occurrences: 3,
        });
        let req = proto::SubmitDemandRequest {
            demands: vec![recurring],
            ..req
        };
        let batch = req.validate().unwrap();
        assert!(e.submit_demands(&req, &batch, T0 + 1_000 * MS).is_ok());
        // A collective whose window ended is refused too.
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 16, 100 * MS, 200 * MS);
        let c = req.validate().unwrap();
        let err = e.submit_collective(&req, &c, T0 + 500 * MS).unwrap_err();
        assert!(
            err.message()
                .starts_with("collective.start_offset_ns: the announced traffic ended 200.000 ms"),
            "{}",
            err.message()
        );
        assert_eq!(e.state.reservations.len(), 1);
    }

    #[test]
    fn cancel_releases_capacity_and_deviation_replans() {
        let mut e = engine();
        let big = demand(
            "big",
            "10.0.1.1",
            "10.0.2.1",
            0,
            100 * MS,
            85_000_000_000,
            Some(500),
        );
        let r = submit(&mut e, vec![big.clone()], T0).unwrap();
        assert_eq!(r[0].status, Status::Admitted);
        let other = demand(
            "other",
            "10.0.1.1",
            "10.0.2.2",
            0,
            100 * MS,
            85_000_000_000,
            Some(501),
        );
        let r2 = submit(&mut e, vec![other.clone()], T0).unwrap();
        assert_eq!(r2[0].status, Status::FallbackEcmp, "h1's NIC is full");
        wire(&r2[0]);
        let cancel = proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::DemandId("big".into())),
        };
        let out = e.cancel(&cancel.validate().unwrap()).unwrap();
        assert_eq!(out[0].status, Status::Cancelled);
        wire(&out[0]);
        assert!(
            e.cancel(&cancel.validate().unwrap()).is_err(),
            "already cancelled"
        );
        // The capacity is free again: a late start of `other` now fits.
        let dev = proto::ReportDeviationRequest {
            header: header(),
            reference_unix_ns: T0,
            deviation: Some(proto::WorkloadDeviation {
                target: Some(proto::workload_deviation::Target::DemandId("other".into())),
                change: Some(proto::workload_deviation::Change::LateStart(
                    proto::StartChange {
                        start: Some(proto::start_change::Start::StartOffsetNs(50 * MS)),
                    },
                )),
                observed_unix_ns: 0,
            }),
        };
        let (updated, _) = e.deviation(&dev.validate().unwrap(), T0).unwrap();
        let u = &updated[0];
        assert_eq!(u.status, Status::Admitted);
        assert_eq!(u.revision, 2);
        assert_eq!(u.start_unix_ns(), T0 + 50 * MS);
        wire(u);
    }

    /// h2 -> h4 "a" at 85 G, which is reserved, and a second 85 G flow
    /// h2 -> h4 "b", which falls back to ECMP, both of class `priority`.
    fn competing_pair(priority: proto::PriorityClass) -> Vec<proto::DemandSignal> {
        ["a", "b"]
            .into_iter()
            .zip([700, 701])
            .map(|(id, qp)| {
                let mut d = demand(
                    id,
                    "10.0.1.2",
                    "10.0.2.2",
                    10 * MS,
                    100 * MS,
                    85_000_000_000,
                    Some(qp),
                );
                d.priority = priority as i32;
                d
            })
            .collect()
    }

    #[test]
    fn competing_fallback_flows_are_predrained_only_on_reserved_ports() {
        let mut e = engine();
        let r = submit(&mut e, competing_pair(proto::PriorityClass::Standard), T0).unwrap();
        assert_eq!(
            (r[0].status, r[1].status),
            (Status::Admitted, Status::FallbackEcmp)
        );
        let mut comp = compiler(e.topo, 5 * MS);
        let predrain = installer::names::PREDRAIN;
        assert_eq!(
            tables(&comp.desired(&e.state, T0).unwrap(), predrain),
            0,
            "before a's install"
        );
        let during = comp.desired(&e.state, T0 + 5 * MS).unwrap();
        let shared = r[1].flows[0]
            .hops
            .iter()
            .filter(|h| r[0].flows[0].hops.contains(h))
            .count();
        assert!(
            shared >= 1,
            "b's ECMP path shares at least h4's port with a"
        );
        assert_eq!(tables(&during, predrain), shared);
        assert_eq!(
            tables(&comp.desired(&e.state, T0 + 110 * MS).unwrap(), predrain),
            0
        );
    }

    /// A reserved background flow keeps its path in the background queue
    /// and clears the way for nothing (no lowered DCQCN profile, no
    /// pre-drain of the flow that fell back); with the background queue
    /// set to the reserved one, it is reserved traffic like any other.
    #[test]
    fn reserved_background_traffic_yields() {
        use p4rt::proto::p4::v1::table_action::Type;
        let mut e = engine();
        let r = submit(&mut e, competing_pair(proto::PriorityClass::Background), T0).unwrap();
        assert_eq!(
            (r[0].status, r[1].status),
            (Status::Admitted, Status::FallbackEcmp)
        );
        let sr_tc = |d: &std::collections::BTreeMap<String, installer::intent::Resolved>| {
            let entries = leaf1_sr_entries(d);
            match entries[0].action.as_ref().and_then(|a| a.r#type.as_ref()) {
                Some(Type::Action(a)) => a.params[0].value.clone(),
                other => panic!("a's SR entry has no action: {other:?}"),
            }
        };
        let during = |comp: &mut Compiler| comp.desired(&e.state, T0 + 20 * MS).unwrap();
        let mut comp = compiler(e.topo, 5 * MS);
        let at_rest = tables(
            &comp.desired(&e.state, T0).unwrap(),
            installer::names::DCQCN_PORT,
        );
        let d = during(&mut comp);
        assert_eq!(sr_tc(&d), vec![1], "the background queue");
        assert_eq!(tables(&d, installer::names::DCQCN_PORT), at_rest);
        assert_eq!(tables(&d, installer::names::PREDRAIN), 0);
        // The background queue is the reserved one: the way is cleared.
        let mut comp = policy_compiler(
            e.topo,
            5 * MS,
            planner::ecmp::SeedPolicy::PerSwitch,
            installer::reservations::RESERVED_TC,
        );
        let d = during(&mut comp);
        assert_eq!(sr_tc(&d), vec![installer::reservations::RESERVED_TC]);
        assert!(tables(&d, installer::names::DCQCN_PORT) > at_rest);
        assert!(tables(&d, installer::names::PREDRAIN) > 0);
    }

    #[test]
    fn the_earlier_reservation_keeps_a_shared_entry_until_it_ends() {
        let mut e = engine();
        let a = demand(
            "a",
            "10.0.1.1",
            "10.0.2.1",
            0,
            100 * MS,
            1_000_000_000,
            Some(900),
        );
        let b = demand(
            "b",
            "10.0.1.1",
            "10.0.2.1",
            50 * MS,
            100 * MS,
            1_000_000_000,
            Some(900),
        );
        let r = submit(&mut e, vec![a, b], T0).unwrap();
        let mut comp = compiler(e.topo, 0);
        let leaf =
            |comp: &mut Compiler, t: u64| leaf1_sr_entries(&comp.desired(&e.state, t).unwrap());
        assert_eq!(leaf(&mut comp, T0 + 60 * MS).len(), 1, "one key, one entry");
        let first = leaf(&mut comp, T0 + 60 * MS);
        let later = leaf(&mut comp, T0 + 120 * MS);
        assert_eq!(later.len(), 1);
        if r[0].flows[0].labels != r[1].flows[0].labels {
            assert_ne!(first[0].action, later[0].action, "b takes over when a ends");
        }
    }

    #[test]
    fn a_link_down_replans_the_reservations_on_it_and_bad_names_change_nothing() {
        let mut e = engine();
        let d = demand(
            "d",
            "10.0.1.1",
            "10.0.2.1",
            0,
            50 * MS,
            40_000_000_000,
            Some(600),
        );
        let r = submit(&mut e, vec![d], T0).unwrap();
        let first = r[0].flows[0].hops[0].clone();
        assert_eq!(first.switch, "leaf1");
        let before = serde_json::to_string(&e.state).unwrap();
        for (node, port, why) in [
            ("leaf9", 3, "no switch \"leaf9\""),
            ("h1", 1, "is a host"),
            ("leaf1", 1, "connects host h1"),
            ("leaf1", 9, "nothing is attached"),
            ("leaf1", 70000, "no such port"),
        ] {
            let err = e.set_link(node, port, true, T0).unwrap_err();
            assert!(err.contains(why), "{node}:{port}: {err}");
        }
        assert_eq!(
            serde_json::to_string(&e.state).unwrap(),
            before,
            "changed nothing"
        );

        // Down by its far end: the same link.
        let (link, _) = e.resolve_link("leaf1", u32::from(first.port)).unwrap();
        let change = e
            .set_link(&link.b, u32::from(link.b_port), true, T0 + MS)
            .unwrap();
        assert!(change.changed);
        assert_eq!(change.link, link);
        assert_eq!(e.state.links_down, vec![link.clone()]);
        assert_eq!(change.affected.len(), 1);
        let moved = e.state.reservations[0].clone();
        assert_eq!(moved.revision, 2);
        assert_eq!(moved.status, Status::Admitted, "the other spine has room");
        assert_ne!(moved.flows[0].hops[0], first, "off the failed link");
        assert!(moved.flows[0]
            .hops
            .iter()
            .all(|h| e.edge_of(h).is_some_and(|x| !change.edges.contains(&x))));
        wire(&moved);
        // Again: already down, nothing changes.
        assert!(
            !e.set_link("leaf1", u32::from(first.port), true, T0)
                .unwrap()
                .changed
        );

        // A second demand between the same leaves no longer fits beside the
        // first on the one remaining uplink: fallback with reason LINK_DOWN
        // once the other uplink is down too.
        let other = e
            .resolve_link("leaf1", u32::from(moved.flows[0].hops[0].port))
            .unwrap()
            .0;
        let change = e
            .set_link(&other.a, u32::from(other.a_port), true, T0 + MS)
            .unwrap();
        let lost = &change.affected[0];
        assert_eq!(lost.status, Status::FallbackEcmp);
        assert_eq!(lost.reason, Reason::LinkDown);
        assert!(
            lost.advisory.as_deref().unwrap().contains("link down"),
            "{lost:?}"
        );
        wire(lost);
        // Up again: the reservation that lost its path gets one back.
        let change = e
            .set_link(&other.a, u32::from(other.a_port), false, T0 + MS)
            .unwrap();
        assert_eq!(change.affected.len(), 1);
        assert_eq!(e.state.reservations[0].status, Status::Admitted);
        assert_eq!(e.state.links_down, vec![link]);
        let pa = e
            .path_availability(
                "t",
                "10.0.1.1".parse().unwrap(),
                "10.0.2.1".parse().unwrap(),
                T0 + MS,
            )
            .unwrap();
        assert_eq!((pa.equal_cost_paths, pa.available_paths), (2, 1), "{pa:?}");
        // 90 % of 100 G on the remaining path, 40 G of it reserved.
        assert_eq!(pa.max_reservable_bps, 50_000_000_000);
        // The link state survives a reload: still down, nothing on it.
        let saved: State = serde_json::from_str(&serde_json::to_string(&e.state).unwrap()).unwrap();
        let mut stale = saved.clone();
        let (again, restored) = restart(e.topo, saved);
        assert!(restored.diverged.is_empty());
        assert_eq!(again.down_edges().len(), 2);
        // A state recording a reservation across a down link (written by
        // an older controller): re-planned at load, and listed.
        stale.links_down.push(other);
        stale.links_down.sort();
        let (again, restored) = restart(e.topo, stale);
        assert_eq!(
            restored.diverged,
            vec![again.state.reservations[0].id.clone()]
        );
        assert_eq!(again.state.reservations[0].status, Status::FallbackEcmp);
        assert_eq!(again.state.reservations[0].reason, Reason::LinkDown);
        assert!(
            again.reserved_now(T0 + MS).is_empty(),
            "nothing reserved across a down link"
        );
    }

    #[test]
    fn a_reloaded_state_keeps_the_recorded_paths_in_the_ledger() {
        let mut e = engine();
        let d = demand(
            "d",
            "10.0.1.1",
            "10.0.2.1",
            0,
            50 * MS,
            40_000_000_000,
            Some(600),
        );
        let r = submit(&mut e, vec![d], T0).unwrap();
        assert_eq!(r[0].status, Status::Admitted);
        // The switches carry the other spine's path (installed by an
        // earlier run whose ledger differed): what a re-plan would not pick.
        let mut saved: State =
            serde_json::from_str(&serde_json::to_string(&e.state).unwrap()).unwrap();
        let (src, dst) = (
            e.topo.host_by_name("h1").unwrap(),
            e.topo.host_by_name("h3").unwrap(),
        );
        let planned = e.path_of(&saved.reservations[0].flows[0].hops).unwrap();
        let other = planner::paths::all_paths(e.topo, src, dst, 8)
            .into_iter()
            .find(|p| p.edges() != planned.edges())
            .expect("two spines");
        let f = &mut saved.reservations[0].flows[0];
        f.hops = e.hops_of(&other);
        f.labels = other.label_stack(e.topo).unwrap();
        let recorded = f.hops.clone();
        let (again, restored) = restart(e.topo, saved);
        assert_eq!(restored.reservations, 1);
        assert!(restored.diverged.is_empty());
        assert_eq!(again.state.reservations[0].flows[0].hops, recorded);
        let reserved: std::collections::BTreeMap<u32, u64> =
            again.reserved_now(T0 + MS).into_iter().collect();
        for edge in other.reserved_edges(e.topo, src) {
            assert_eq!(
                reserved.get(&edge),
                Some(&40_000_000_000),
                "recorded edge {edge}"
            );
        }
        assert_eq!(
            reserved.get(&planned.edges()[0]),
            None,
            "nothing on the path a re-plan would have chosen"
        );
    }

    #[test]
    fn a_reloaded_state_replans_to_the_same_paths() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 16, 0, 200 * MS);
        e.submit_collective(&req, &req.validate().unwrap(), T0)
            .unwrap();
        submit(
            &mut e,
            vec![demand(
                "d",
                "10.0.1.2",
                "10.0.2.2",
                0,
                50 * MS,
                40_000_000_000,
                None,
            )],
            T0,
        )
        .unwrap();
        let saved: State = serde_json::from_str(&serde_json::to_string(&e.state).unwrap()).unwrap();
        let (again, restored) = restart(e.topo, saved);
        assert_eq!(restored.reservations, 2);
        assert!(restored.diverged.is_empty(), "{:?}", restored.diverged);
        assert_eq!(again.state.reservations.len(), 2);
        assert_eq!(
            again.reserved_now(T0 + MS),
            e.reserved_now(T0 + MS),
            "same ledger"
        );
    }

    const G: u64 = 1_000_000_000;

    /// 2 leaves x 5 hosts, 2 spines, 100G: room for three cross-leaf
    /// transfers on distinct NICs.
    fn wide_engine(reoptimization: Reoptimization) -> Engine {
        let spec =
            planner::topology::generate::leaf_spine(&planner::topology::generate::LeafSpine {
                hosts_per_leaf: 5,
                ..Default::default()
            })
            .unwrap();
        let topo: &'static Topology = Box::leak(Box::new(Topology::from_spec(spec).unwrap()));
        let mut e = restart(topo, State::new(topo.name(), T0)).0;
        e.reoptimization = reoptimization;
        e
    }

    fn ip(e: &Engine, host: usize) -> String {
        e.topo.hosts()[host].ip.to_string()
    }

    /// x and y (45G) planned together sit on different spines; z (50G,
    /// same window) fits only with x and y on one spine (90 = headroom).
    fn x_y_then_z(e: &mut Engine, now_z: u64) -> (Vec<Reservation>, Reservation) {
        let (h1, h2, h3, h6, h7, h8) = (ip(e, 0), ip(e, 1), ip(e, 2), ip(e, 5), ip(e, 6), ip(e, 7));
        let first = submit(
            e,
            vec![
                demand("x", &h1, &h6, 100 * MS, 10 * MS, 45 * G, None),
                demand("y", &h2, &h7, 100 * MS, 10 * MS, 45 * G, None),
            ],
            T0,
        )
        .unwrap();
        assert_ne!(first[0].flows[0].hops[0], first[1].flows[0].hops[0]);
        let start = T0 + 100 * MS - now_z;
        let z = submit(
            e,
            vec![demand("z", &h3, &h8, start, 10 * MS, 50 * G, None)],
            now_z,
        )
        .unwrap();
        (first, z.into_iter().next().unwrap())
    }

    #[test]
    fn pending_reservations_move_to_admit_a_new_demand_and_say_so() {
        let lead = 10 * MS;
        let mut e = wide_engine(Reoptimization {
            pending: true,
            installed_not_started: false,
            lead_ns: lead,
        });
        let (first, z) = x_y_then_z(&mut e, T0 + MS);
        assert_eq!(z.status, Status::Admitted, "{:?}", z.advisory);
        let moved = e.take_moved();
        assert_eq!(moved.len(), 1);
        let m = &moved[0];
        let before = first.iter().find(|r| r.id == m.id).unwrap();
        assert_eq!(m.revision, before.revision + 1);
        assert_ne!(m.flows[0].hops, before.flows[0].hops);
        assert_eq!(m.flows[0].start_unix_ns, before.flows[0].start_unix_ns);
        assert_eq!(m.flows[0].accepted_bps, before.flows[0].accepted_bps);
        let advisory = m.advisory.as_deref().unwrap();
        assert!(
            advisory.contains("moved to admit") && advisory.contains(&z.id),
            "{advisory}"
        );
        // The state holds the moved record; nothing is left to report.
        assert_eq!(
            e.state
                .reservations
                .iter()
                .find(|r| r.id == m.id)
                .unwrap()
                .flows[0]
                .hops,
            m.flows[0].hops
        );
        assert!(e.take_moved().is_empty());
        // x, y and z now share the two spines 90 / 50: the ledger agrees
        // with the records (restart rebuilds the same reservations).
        let mut reserved = e.reserved_now(T0 + 105 * MS);
        reserved.sort();
        let (again, _) = restart(e.topo, e.state.clone());
        let mut restored = again.reserved_now(T0 + 105 * MS);
        restored.sort();
        assert_eq!(reserved, restored);
    }

    #[test]
    fn nothing_moves_when_off_or_once_installed() {
        let lead = 10 * MS;
        // Off: z gets what is left.
        let mut off = wide_engine(Reoptimization::default());
        let (_, z) = x_y_then_z(&mut off, T0 + MS);
        assert_eq!(z.status, Status::Partial);
        assert!(off.take_moved().is_empty());
        // Pending only, but x and y are installed (past their install
        // time, before their start): they stay.
        let pending = Reoptimization {
            pending: true,
            installed_not_started: false,
            lead_ns: lead,
        };
        let mut installed = wide_engine(pending);
        let (_, z) = x_y_then_z(&mut installed, T0 + 95 * MS);
        assert_eq!(z.status, Status::Partial);
        assert!(installed.take_moved().is_empty());
        // Allowed to move installed-but-not-started ones: z is admitted.
        let mut not_started = wide_engine(Reoptimization {
            installed_not_started: true,
            ..pending
        });
        let (_, z) = x_y_then_z(&mut not_started, T0 + 95 * MS);
        assert_eq!(z.status, Status::Admitted);
        assert_eq!(not_started.take_moved().len(), 1);
    }

    /// Five transfers leaf1 -> leaf2 (30, 30, 20, 20, 20G) planned as one
    /// batch sit 60 / 60 on the spines; cancelling a 20G one leaves 60 / 40
    /// until the pending reservations are re-placed: a 30G and a 20G one
    /// swap spines, 50 / 50.
    #[test]
    fn a_cancellation_lets_pending_reservations_spread_out() {
        let mut e = wide_engine(Reoptimization {
            pending: true,
            installed_not_started: false,
            lead_ns: 10 * MS,
        });
        let rates = [("a", 30), ("b", 30), ("c", 20), ("d", 20), ("f", 20)];
        let signals: Vec<proto::DemandSignal> = rates
            .iter()
            .enumerate()
            .map(|(i, (id, g))| {
                let (src, dst) = (ip(&e, i), ip(&e, 5 + i));
                demand(id, &src, &dst, 100 * MS, 10 * MS, g * G, None)
            })
            .collect();
        let planned = submit(&mut e, signals, T0).unwrap();
        assert!(planned.iter().all(|r| r.status == Status::Admitted));
        let peak = |e: &Engine| {
            e.reserved_now(T0 + 105 * MS)
                .iter()
                .filter(|(edge, _)| {
                    matches!(
                        (e.topo.edge(*edge).from, e.topo.edge(*edge).to),
                        (
                            planner::topology::NodeRef::Switch(_),
                            planner::topology::NodeRef::Switch(_)
                        )
                    )
                })
                .map(|(_, bps)| *bps)
                .max()
                .unwrap()
        };
        assert_eq!(peak(&e), 60 * G);
        let cancel = proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::DemandId("f".into())),
        };
        e.cancel(&cancel.validate().unwrap()).unwrap();
        assert_eq!(peak(&e), 60 * G, "cancelling alone moves nothing");
        assert_eq!(e.reoptimize_pending(T0 + MS), 2);
        assert_eq!(peak(&e), 50 * G);
        let moved = e.take_moved();
        assert_eq!(moved.len(), 2);
        for m in &moved {
            let advisory = m.advisory.as_deref().unwrap();
            assert!(
                advisory.contains("lower the peak utilisation from 0.6000 to 0.5000"),
                "{advisory}"
            );
        }
        // Once installed, nothing moves any more.
        let again = e.reoptimize_pending(T0 + 95 * MS);
        assert_eq!(again, 0);
    }
}
