//! The NDSP gRPC service. Every request is validated as a whole first
//! (`ndsp::validate`: a bad field is `INVALID_ARGUMENT` naming it, and
//! nothing changes); then the engine decides, the commit persists the
//! state and sends every switch its new intended state, and the answer
//! goes back once the switches acknowledged what was due now. The time
//! from receipt to that acknowledgement is the control-loop latency: it is
//! observed in `foresight_install_latency_seconds` and returned in the
//! `foresight-install-us` response metadata.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use ndsp::proto::{self, demand_signaling_server::DemandSignaling};
use ndsp::types as nt;
use ndsp::Validate;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use crate::daemon::control::controller::{Controller, Inner, Mutation};
use crate::daemon::control::events::Event;
use crate::daemon::engine::{to_ndsp, PlanTiming, Planned, Refusal};
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::inputs::learning::announced_iteration;
use crate::daemon::inputs::requests::{collective_key, demand_keys, recorded_registration};
use crate::daemon::inputs::telemetry::BYTES_PER_QUEUED_PACKET;
use crate::daemon::persistence::state_records::Reservation;

/// Response metadata: microseconds from receipt to every due entry acknowledged.
pub const INSTALL_US_METADATA: &str = "foresight-install-us";
/// Response metadata: entity changes the switches acknowledged.
pub const CHANGES_METADATA: &str = "foresight-switch-changes";

pub struct Ndsp {
    c: Arc<Controller>,
}

impl Ndsp {
    pub fn new(c: Arc<Controller>) -> Ndsp {
        Ndsp { c }
    }

    fn count<T>(&self, rpc: &str, r: Result<T, Status>) -> Result<T, Status> {
        match &r {
            Ok(_) => self.c.metrics.request(rpc, tonic::Code::Ok),
            Err(s) => {
                self.c.metrics.request(rpc, s.code());
                tracing::info!(rpc, code = ?s.code(), message = s.message(), "request refused");
            }
        }
        r
    }

    fn observe(&self, timing: PlanTiming, records: &[Arc<Reservation>]) {
        if timing.planner_secs > 0.0 {
            self.c.metrics.planner_time.observe(timing.planner_secs);
        }
        for r in records {
            self.c.metrics.outcome(r.status.name());
            tracing::info!(reservation = %r.id, tenant = %r.tenant, subject = r.subject.id(), status = r.status.name(),
                flows = r.flows.len(), reserved = r.installing().count(), "planned");
        }
    }

    /// One change through [`Controller::transact`]: `change` mutates the
    /// locked engine and says what to publish once the switches
    /// acknowledged; returns its value, the latency from receipt to those
    /// acknowledgements, and the changes the switches made.
    async fn change<T>(
        &self,
        received: Instant,
        change: impl FnOnce(&mut Inner, u64) -> Result<(T, Vec<Event>), Status>,
    ) -> Result<(T, std::time::Duration, usize), Status> {
        let (value, done) = self
            .c
            .transact(|inner, now| {
                let (value, events) = change(inner, now)?;
                Ok::<_, Status>(Mutation::changed(value, events))
            })
            .await?;
        for e in &done.errors {
            tracing::warn!(%e, "not installed now; will be reconciled");
        }
        Ok((value, received.elapsed(), done.changes))
    }

    fn respond<T>(
        &self,
        body: T,
        took: std::time::Duration,
        changes: usize,
        installed_now: bool,
    ) -> Response<T> {
        if installed_now {
            self.c.metrics.install_latency.observe(took.as_secs_f64());
        }
        let mut response = Response::new(body);
        let md = response.metadata_mut();
        if let Ok(v) = (took.as_micros() as u64).to_string().parse() {
            md.insert(INSTALL_US_METADATA, v);
        }
        if let Ok(v) = changes.to_string().parse() {
            md.insert(CHANGES_METADATA, v);
        }
        response
    }

    fn installed_now(&self, records: &[Arc<Reservation>], now: u64) -> bool {
        records
            .iter()
            .any(|r| r.flows.iter().any(|f| f.active(now, self.c.lead_ns)))
    }

    /// After an announcement was planned: the announced iterations handed
    /// to learning (learned periodic schedules), per job.
    fn announced(&self, records: &[Arc<Reservation>]) {
        if let Some(learning) = &self.c.learning {
            let mut by_job: BTreeMap<(&str, &str), Vec<&Reservation>> = BTreeMap::new();
            for r in records.iter().filter(|r| !r.predicted) {
                if let Some(job) = &r.job_id {
                    by_job.entry((&r.tenant, job)).or_default().push(&**r);
                }
            }
            let mut l = learning.lock().expect("learning lock");
            for ((tenant, job), rs) in by_job {
                if let Some(obs) = announced_iteration(rs.iter().flat_map(|r| &r.flows)) {
                    l.announced(tenant, job, obs);
                }
            }
        }
    }
}

/// What a submission tells the watchers: the reservations moved for it,
/// then each prediction it took over and the records withdrawn (taken out
/// of `planned`, which keeps its records).
fn submission_events(planned: &mut Planned) -> Vec<Event> {
    let mut events = changed(std::mem::take(&mut planned.moved));
    for s in std::mem::take(&mut planned.superseded) {
        events.push(Event::PredictionWithdrawn {
            tenant: s.tenant,
            job_id: s.job_id,
            reason: "the job announced the iteration itself".into(),
            reservation_ids: s.withdrawn.iter().map(|r| r.id.clone()).collect(),
        });
        events.extend(changed(s.withdrawn));
    }
    events
}

/// One reservation change event per record.
fn changed(records: Vec<Arc<Reservation>>) -> Vec<Event> {
    records.into_iter().map(Event::reservation).collect()
}

/// The engine's refusals as NDSP status codes.
impl From<Refusal> for Status {
    fn from(r: Refusal) -> Status {
        match r {
            Refusal::Invalid(e) => Status::from(e),
            Refusal::AlreadyExists(m) => Status::already_exists(m),
            Refusal::NotFound(m) => Status::not_found(m),
            Refusal::Internal(m) => Status::internal(m),
        }
    }
}

pub type EventStream = Pin<Box<dyn Stream<Item = Result<proto::WatchEvent, Status>> + Send>>;

#[tonic::async_trait]
impl DemandSignaling for Ndsp {
    async fn handshake(
        &self,
        request: Request<proto::HandshakeRequest>,
    ) -> Result<Response<proto::HandshakeResponse>, Status> {
        let r = request.get_ref().validate().map_err(Status::from).map(|_| {
            Response::new(
                (&nt::ServerHello {
                    server_version: ndsp::PROTOCOL_VERSION,
                    server_time_unix_ns: now_unix_ns(),
                    supported_collective_kinds: vec![
                        nt::CollectiveKind::RingAllReduce,
                        nt::CollectiveKind::TreeAllReduce,
                        nt::CollectiveKind::AllGather,
                        nt::CollectiveKind::ReduceScatter,
                        nt::CollectiveKind::AllToAll,
                        nt::CollectiveKind::PipelineSend,
                        nt::CollectiveKind::KvCacheTransfer,
                    ],
                    max_demands_per_request: ndsp::limits::MAX_DEMANDS_PER_REQUEST as u32,
                    max_label_stack_depth: installer::names::SR_PUSH.len() as u32,
                })
                    .into(),
            )
        });
        self.count("Handshake", r)
    }

    async fn register_topology(
        &self,
        request: Request<proto::RegisterTopologyRequest>,
    ) -> Result<Response<proto::RegisterTopologyResponse>, Status> {
        let r = async {
            let topo = request.get_ref().validate()?;
            let recorded = recorded_registration(request.get_ref());
            self.c.admission.request(&topo.ctx.tenant, Instant::now())?;
            let job_id = topo.job_id.clone();
            let ranks = topo.ranks.len() as u32;
            let ((generation, warnings), _, _) = self
                .change(Instant::now(), |inner, _| {
                    let registered = inner.engine.register(topo, recorded);
                    self.c.sync_jobs(inner);
                    Ok((registered, Vec::new()))
                })
                .await?;
            Ok(Response::new(
                (&nt::TopologyRegistration {
                    job_id,
                    registered_ranks: ranks,
                    generation,
                    warnings,
                })
                    .into(),
            ))
        }
        .await;
        self.count("RegisterTopology", r)
    }

    async fn submit_demand(
        &self,
        request: Request<proto::SubmitDemandRequest>,
    ) -> Result<Response<proto::SubmitDemandResponse>, Status> {
        let received = Instant::now();
        let r = async {
            let batch = request.get_ref().validate()?;
            let keys = demand_keys(request.get_ref());
            self.c.admission.request(&batch.ctx.tenant, received)?;
            let ((planned, now), took, changes) = self
                .change(received, |inner, now| {
                    let tenant = &batch.ctx.tenant;
                    self.c.admission.reservations(
                        tenant,
                        inner.engine.live_count(tenant),
                        inner.engine.new_demands(&batch),
                    )?;
                    let mut planned = inner.engine.submit_demands(&batch, &keys, now)?;
                    self.announced(&planned.records);
                    let events = submission_events(&mut planned);
                    Ok(((planned, now), events))
                })
                .await?;
            self.observe(planned.timing, &planned.records);
            let records = planned.records;
            let body = proto::SubmitDemandResponse {
                reservations: records.iter().map(|r| to_ndsp(r).into()).collect(),
            };
            Ok(self.respond(body, took, changes, self.installed_now(&records, now)))
        }
        .await;
        self.count("SubmitDemand", r)
    }

    async fn submit_collective(
        &self,
        request: Request<proto::SubmitCollectiveRequest>,
    ) -> Result<Response<proto::SubmitCollectiveResponse>, Status> {
        let received = Instant::now();
        let r = async {
            let collective = request.get_ref().validate()?;
            let key = collective_key(request.get_ref());
            self.c.admission.request(&collective.ctx.tenant, received)?;
            let ((planned, now), took, changes) = self
                .change(received, |inner, now| {
                    let tenant = &collective.ctx.tenant;
                    self.c
                        .admission
                        .reservations(tenant, inner.engine.live_count(tenant), 1)?;
                    let mut planned = inner.engine.submit_collective(&collective, key, now)?;
                    self.announced(&planned.records);
                    let events = submission_events(&mut planned);
                    Ok(((planned, now), events))
                })
                .await?;
            self.observe(planned.timing, &planned.records);
            let records = planned.records;
            let body = proto::SubmitCollectiveResponse {
                reservation: records.first().map(|r| to_ndsp(r).into()),
            };
            Ok(self.respond(body, took, changes, self.installed_now(&records, now)))
        }
        .await;
        self.count("SubmitCollective", r)
    }

    async fn cancel(
        &self,
        request: Request<proto::CancelRequest>,
    ) -> Result<Response<proto::CancelResponse>, Status> {
        let received = Instant::now();
        let r = async {
            let cancel = request.get_ref().validate()?;
            self.c.admission.request(&cancel.ctx.tenant, received)?;
            let (records, took, changes) = self
                .change(received, |inner, now| {
                    let records = inner.engine.cancel(&cancel)?;
                    if matches!(cancel.target, nt::CancelTarget::Job(_)) {
                        self.c.sync_jobs(inner);
                    }
                    // The freed capacity may lower the peak of what has not
                    // been installed yet.
                    let moved = inner.engine.reoptimize_pending(now, &records);
                    let mut events = changed(records.clone());
                    events.extend(changed(moved));
                    Ok((records, events))
                })
                .await?;
            for r in &records {
                tracing::info!(reservation = %r.id, "cancelled");
            }
            let body = proto::CancelResponse {
                cancelled_reservation_ids: records.iter().map(|r| r.id.clone()).collect(),
            };
            Ok(self.respond(body, took, changes, false))
        }
        .await;
        self.count("Cancel", r)
    }

    async fn report_deviation(
        &self,
        request: Request<proto::ReportDeviationRequest>,
    ) -> Result<Response<proto::ReportDeviationResponse>, Status> {
        let received = Instant::now();
        let r = async {
            let deviation = request.get_ref().validate()?;
            self.c.admission.request(&deviation.ctx.tenant, received)?;
            let (planned, took, changes) = self
                .change(received, |inner, now| {
                    let planned = inner.engine.deviation(&deviation, now)?;
                    let events = changed(planned.records.clone());
                    Ok((planned, events))
                })
                .await?;
            self.observe(planned.timing, &planned.records);
            let records = planned.records;
            let body = proto::ReportDeviationResponse {
                updated_reservations: records.iter().map(|r| to_ndsp(r).into()).collect(),
            };
            Ok(self.respond(body, took, changes, false))
        }
        .await;
        self.count("ReportDeviation", r)
    }

    type WatchEventsStream = EventStream;

    async fn watch_events(
        &self,
        request: Request<proto::WatchEventsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let r = request.get_ref().validate().map_err(Status::from);
        let watch = self.count("WatchEvents", r)?;
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        let c = self.c.clone();
        tokio::spawn(watch_task(c, watch, tx));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_reservation(
        &self,
        request: Request<proto::GetReservationRequest>,
    ) -> Result<Response<proto::GetReservationResponse>, Status> {
        let r = async {
            let get = request.get_ref().validate()?;
            let inner = self.c.inner.lock().await;
            let found = inner
                .engine
                .state
                .find(&get.reservation_id)
                .filter(|r| r.tenant == get.ctx.tenant);
            match found {
                Some(r) => Ok(Response::new(proto::GetReservationResponse {
                    reservation: Some(to_ndsp(r).into()),
                })),
                None => Err(Status::not_found(format!(
                    "reservation_id: no reservation {:?} of tenant {:?}",
                    get.reservation_id, get.ctx.tenant
                ))),
            }
        }
        .await;
        self.count("GetReservation", r)
    }

    async fn list_reservations(
        &self,
        request: Request<proto::ListReservationsRequest>,
    ) -> Result<Response<proto::ListReservationsResponse>, Status> {
        let r = async {
            let list = request.get_ref().validate()?;
            let offset: usize = match &list.page_token {
                None => 0,
                Some(t) => t.parse().map_err(|_| {
                    Status::from(ndsp::ValidationError::new(
                        "page_token",
                        format!("{t:?} is not a token this controller issued"),
                    ))
                })?,
            };
            let inner = self.c.inner.lock().await;
            let all = inner.engine.list(&list.ctx.tenant, list.job_id.as_deref());
            let page: Vec<proto::Reservation> = all
                .iter()
                .skip(offset)
                .take(list.page_size as usize)
                .map(|r| to_ndsp(r).into())
                .collect();
            let next = offset + page.len();
            Ok(Response::new(proto::ListReservationsResponse {
                reservations: page,
                next_page_token: if next < all.len() {
                    next.to_string()
                } else {
                    String::new()
                },
            }))
        }
        .await;
        self.count("ListReservations", r)
    }
}

/// Feed one `WatchEvents` stream: reservation changes of the tenant's
/// (watched) jobs, and telemetry snapshots every interval.
async fn watch_task(
    c: Arc<Controller>,
    watch: nt::ValidatedWatch,
    tx: tokio::sync::mpsc::Sender<Result<proto::WatchEvent, Status>>,
) {
    let mut events = c.events.subscribe();
    let mut seq = 0u64;
    let interval = watch
        .telemetry_interval_ns
        .map(std::time::Duration::from_nanos);
    let mut ticker = interval.map(tokio::time::interval);
    // Congestion episodes: those that end after the watch began.
    let (_, mut congestion_after) = c.loads.congestion_since(0, now_unix_ns());
    if let Some(t) = ticker.as_mut() {
        t.tick().await;
    }
    let wanted_job = |job: Option<&String>| {
        watch.job_ids.is_empty() || job.is_some_and(|j| watch.job_ids.contains(j))
    };
    let wanted = |r: &Reservation| wanted_job(r.job_id.as_ref());
    loop {
        let body = tokio::select! {
            _ = tx.closed() => return,
            ev = events.recv() => match ev {
                Ok(Event::Reservation(ch)) if ch.tenant == watch.ctx.tenant && wanted(&ch.reservation) => {
                    nt::WatchEventBody::Deviation(nt::NetworkDeviation {
                        observed_unix_ns: now_unix_ns(),
                        affected_reservation_ids: vec![ch.reservation.id.clone()],
                        change: nt::NetworkChange::ReservationChanged(Box::new(to_ndsp(&ch.reservation))),
                    })
                }
                // Link state is fabric-wide: every watcher hears of it,
                // with the affected reservations it may see.
                Ok(Event::Link { down, link, observed_unix_ns, affected }) => {
                    let mut ids: Vec<String> = affected
                        .into_iter()
                        .filter(|a| a.tenant == watch.ctx.tenant && wanted_job(a.job_id.as_ref()))
                        .map(|a| a.reservation_id)
                        .collect();
                    ids.dedup();
                    nt::WatchEventBody::Deviation(nt::NetworkDeviation {
                        observed_unix_ns,
                        affected_reservation_ids: ids,
                        change: if down {
                            nt::NetworkChange::LinkDown(link)
                        } else {
                            nt::NetworkChange::LinkUp(link)
                        },
                    })
                }
                Ok(Event::PredictionWithdrawn { tenant, job_id, reason, reservation_ids }) if tenant == watch.ctx.tenant && wanted_job(Some(&job_id)) => {
                    nt::WatchEventBody::Deviation(nt::NetworkDeviation {
                        observed_unix_ns: now_unix_ns(),
                        affected_reservation_ids: reservation_ids,
                        change: nt::NetworkChange::PredictionWithdrawn { job_id, reason },
                    })
                }
                Ok(Event::Mismatch { tenant, job_id, mismatch }) if tenant == watch.ctx.tenant && wanted_job(job_id.as_ref()) => {
                    nt::WatchEventBody::Deviation(nt::NetworkDeviation {
                        observed_unix_ns: now_unix_ns(),
                        affected_reservation_ids: vec![mismatch.reservation_id.clone()],
                        change: nt::NetworkChange::ForecastMismatch(mismatch),
                    })
                }
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => return,
            },
            _ = async { match ticker.as_mut() { Some(t) => { t.tick().await; } None => std::future::pending().await } } => {
                nt::WatchEventBody::Telemetry(
                    snapshot(&c, interval.unwrap_or_default(), &watch, &mut congestion_after).await,
                )
            }
        };
        seq += 1;
        let event = nt::ValidatedWatchEvent {
            sequence: seq,
            emitted_unix_ns: now_unix_ns(),
            body,
        };
        if tx.send(Ok((&event).into())).await.is_err() {
            return;
        }
    }
}

/// Link id of a directed edge.
fn link_id(topo: &planner::Topology, e: u32) -> nt::LinkId {
    let l = topo.edge(e);
    nt::LinkId {
        from_node: topo.node_name(l.from).to_string(),
        from_port: u32::from(l.from_port),
        to_node: topo.node_name(l.to).to_string(),
        to_port: u32::from(l.to_port),
    }
}

/// One telemetry snapshot for a watcher: link loads, the congestion
/// episodes since its previous snapshot (and those still going on, with
/// duration 0), and path availability between the hosts of its
/// reservations.
async fn snapshot(
    c: &Controller,
    interval: std::time::Duration,
    watch: &nt::ValidatedWatch,
    congestion_after: &mut u64,
) -> nt::TelemetrySnapshot {
    let status = c.status().await;
    let topo = c.topo;
    let now = now_unix_ns();
    let (episodes, resume) = c.loads.congestion_since(*congestion_after, now);
    *congestion_after = resume;
    let congestion_events = episodes
        .iter()
        .map(|e| nt::CongestionEvent {
            link: link_id(topo, e.edge),
            kind: nt::CongestionKind::QueueBuildup,
            start_unix_ns: e.start_unix_ns,
            duration_ns: if e.open {
                0
            } else {
                (e.last_unix_ns - e.start_unix_ns).max(1)
            },
            peak_queue_bytes: u64::from(e.peak_queue_packets) * BYTES_PER_QUEUED_PACKET,
            affected_packets: e.packets,
        })
        .collect();
    let paths = c.path_availability(&watch.ctx.tenant, &watch.job_ids).await;
    let mut links = Vec::new();
    for e in 0..topo.edge_count() as u32 {
        let l = topo.edge(e);
        let name = topo.describe_edge(e);
        let Some(view) = status.links.iter().find(|v| v.link == name) else {
            continue;
        };
        links.push(nt::LinkUtilization {
            link: nt::LinkId {
                from_node: topo.node_name(l.from).to_string(),
                from_port: u32::from(l.from_port),
                to_node: topo.node_name(l.to).to_string(),
                to_port: u32::from(l.to_port),
            },
            capacity_bps: l.capacity_bps,
            measured_bps: view.measured_bps.unwrap_or(0),
            reserved_bps: view.reserved_bps.min(l.capacity_bps),
            peak_queue_bytes: u64::from(view.queue_packets.unwrap_or(0)) * BYTES_PER_QUEUED_PACKET,
        });
    }
    nt::TelemetrySnapshot {
        as_of_unix_ns: now,
        interval_ns: interval.as_nanos().max(1) as u64,
        links,
        congestion_events,
        paths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal of the engine reaches the client with the status code
    /// NDSP defines for it, and a wrong field is named in the metadata too.
    #[test]
    fn refusals_are_ndsp_status_codes() {
        let invalid = Status::from(Refusal::Invalid(ndsp::ValidationError::new(
            "collective.ranks",
            "split",
        )));
        assert_eq!(invalid.code(), tonic::Code::InvalidArgument);
        assert_eq!(invalid.message(), "collective.ranks: split");
        assert_eq!(
            invalid
                .metadata()
                .get(ndsp::validate::FIELD_METADATA_KEY)
                .unwrap(),
            "collective.ranks"
        );
        for (refusal, code) in [
            (
                Refusal::AlreadyExists("a".into()),
                tonic::Code::AlreadyExists,
            ),
            (Refusal::NotFound("n".into()), tonic::Code::NotFound),
            (Refusal::Internal("i".into()), tonic::Code::Internal),
        ] {
            let message = refusal.message();
            let status = Status::from(refusal);
            assert_eq!(status.code(), code);
            assert_eq!(status.message(), message);
        }
    }
}
