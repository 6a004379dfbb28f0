//! Domain types back to NDSP messages: what the controller sends
//! (reservations, watch events, handshake and registration responses) and
//! what a Rust client sends (requests).
//!
//! For a message in canonical form, encoding the validated value gives the
//! message back: `proto == (&proto.validate()?).into()`. Non-canonical wire
//! values come back canonical (`channels` 0 as 1, `page_size` 0 as 100).

use crate::proto;
use crate::types::*;

fn opt_string(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

fn header(ctx: &RequestContext) -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ctx.client_version.into()),
        tenant: ctx.tenant.clone(),
    })
}

impl From<Version> for proto::ProtocolVersion {
    fn from(v: Version) -> Self {
        proto::ProtocolVersion {
            major: v.major,
            minor: v.minor,
        }
    }
}

impl From<Endpoint> for proto::Endpoint {
    fn from(e: Endpoint) -> Self {
        use proto::endpoint::Address;
        proto::Endpoint {
            address: Some(match e {
                Endpoint::Rank(r) => Address::Rank(r),
                Endpoint::Host(a) => Address::HostAddress(a.to_string()),
            }),
        }
    }
}

impl From<Recurrence> for proto::Recurrence {
    fn from(r: Recurrence) -> Self {
        proto::Recurrence {
            period_ns: r.period_ns,
            occurrences: r.occurrences,
        }
    }
}

impl From<&ValidatedHandshake> for proto::HandshakeRequest {
    fn from(v: &ValidatedHandshake) -> Self {
        proto::HandshakeRequest {
            header: header(&v.ctx),
            client_name: opt_string(&v.client_name),
        }
    }
}

impl From<&ValidatedTopology> for proto::RegisterTopologyRequest {
    fn from(v: &ValidatedTopology) -> Self {
        let ranks = v
            .ranks
            .iter()
            .map(|r| proto::RankEndpoint {
                rank: r.rank,
                device_id: opt_string(&r.device_id),
                host_address: r.host_address.to_string(),
                nic: opt_string(&r.nic),
                qp_range: r.qp_range.map(|q| proto::QpRange {
                    first_qp: q.first_qp,
                    count: q.count,
                }),
            })
            .collect();
        proto::RegisterTopologyRequest {
            header: header(&v.ctx),
            topology: Some(proto::Topology {
                job_id: v.job_id.clone(),
                workload_kind: proto::WorkloadKind::from(v.workload_kind).into(),
                world_size: v.world_size,
                ranks,
                library: proto::CollectiveLibrary::from(v.library).into(),
                library_version: opt_string(&v.library_version),
                algorithms: v
                    .algorithms
                    .iter()
                    .map(|&a| proto::CollectiveAlgorithm::from(a).into())
                    .collect(),
            }),
        }
    }
}

impl From<&ValidatedDemand> for proto::DemandSignal {
    fn from(d: &ValidatedDemand) -> Self {
        use proto::demand_signal::{Deadline, Pacing as WirePacing, Start};
        proto::DemandSignal {
            demand_id: d.demand_id.clone(),
            job_id: opt_string(&d.job_id),
            source: Some(d.source.into()),
            destination: Some(d.destination.into()),
            start: Some(match d.start {
                TimePoint::OffsetNs(t) => Start::StartOffsetNs(t),
                TimePoint::UnixNs(t) => Start::StartUnixNs(t),
            }),
            size_bytes: d.size_bytes,
            pacing: Some(match d.pacing {
                Pacing::DurationNs(t) => WirePacing::DurationNs(t),
                Pacing::RateBps(r) => WirePacing::RateBps(r),
            }),
            priority: proto::PriorityClass::from(d.priority).into(),
            elasticity: proto::Elasticity::from(d.elasticity).into(),
            deadline: d.deadline.map(|t| match t {
                TimePoint::OffsetNs(t) => Deadline::DeadlineOffsetNs(t),
                TimePoint::UnixNs(t) => Deadline::DeadlineUnixNs(t),
            }),
            dest_qp: d.dest_qp,
            recurrence: d.recurrence.map(Into::into),
            dest_qp_choices: d.dest_qp_choices.map(|q| proto::QpRange {
                first_qp: q.first_qp,
                count: q.count,
            }),
        }
    }
}

impl From<&ValidatedDemandBatch> for proto::SubmitDemandRequest {
    fn from(b: &ValidatedDemandBatch) -> Self {
        proto::SubmitDemandRequest {
            header: header(&b.ctx),
            reference_unix_ns: b.reference_unix_ns.unwrap_or(0),
            demands: b.demands.iter().map(Into::into).collect(),
        }
    }
}

impl From<&ValidatedCollective> for proto::SubmitCollectiveRequest {
    fn from(c: &ValidatedCollective) -> Self {
        use proto::collective::{Deadline, Pacing as WirePacing, Start};
        proto::SubmitCollectiveRequest {
            header: header(&c.ctx),
            reference_unix_ns: c.reference_unix_ns.unwrap_or(0),
            collective: Some(proto::Collective {
                collective_id: c.collective_id.clone(),
                job_id: c.job_id.clone(),
                kind: proto::CollectiveKind::from(c.kind).into(),
                ranks: c.ranks.clone(),
                peer_ranks: c.peer_ranks.clone(),
                size_bytes: c.size_bytes,
                channels: c.channels,
                start: Some(match c.start {
                    TimePoint::OffsetNs(t) => Start::StartOffsetNs(t),
                    TimePoint::UnixNs(t) => Start::StartUnixNs(t),
                }),
                pacing: Some(match c.pacing {
                    CollectivePacing::DurationNs(t) => WirePacing::DurationNs(t),
                    CollectivePacing::FlowRateBps(r) => WirePacing::FlowRateBps(r),
                }),
                priority: proto::PriorityClass::from(c.priority).into(),
                elasticity: proto::Elasticity::from(c.elasticity).into(),
                deadline: c.deadline.map(|t| match t {
                    TimePoint::OffsetNs(t) => Deadline::DeadlineOffsetNs(t),
                    TimePoint::UnixNs(t) => Deadline::DeadlineUnixNs(t),
                }),
                recurrence: c.recurrence.map(Into::into),
            }),
        }
    }
}

impl From<&ValidatedCancel> for proto::CancelRequest {
    fn from(c: &ValidatedCancel) -> Self {
        use proto::cancel_request::Target;
        proto::CancelRequest {
            header: header(&c.ctx),
            target: Some(match &c.target {
                CancelTarget::Demand(id) => Target::DemandId(id.clone()),
                CancelTarget::Collective(id) => Target::CollectiveId(id.clone()),
                CancelTarget::Reservation(id) => Target::ReservationId(id.clone()),
                CancelTarget::Job(id) => Target::JobId(id.clone()),
            }),
        }
    }
}

fn start_change(t: TimePoint) -> proto::StartChange {
    use proto::start_change::Start;
    proto::StartChange {
        start: Some(match t {
            TimePoint::OffsetNs(t) => Start::StartOffsetNs(t),
            TimePoint::UnixNs(t) => Start::StartUnixNs(t),
        }),
    }
}

impl From<&ValidatedDeviation> for proto::ReportDeviationRequest {
    fn from(d: &ValidatedDeviation) -> Self {
        use proto::workload_deviation::{Change, Target};
        proto::ReportDeviationRequest {
            header: header(&d.ctx),
            reference_unix_ns: d.reference_unix_ns.unwrap_or(0),
            deviation: Some(proto::WorkloadDeviation {
                target: Some(match &d.target {
                    DeviationTarget::Demand(id) => Target::DemandId(id.clone()),
                    DeviationTarget::Collective(id) => Target::CollectiveId(id.clone()),
                }),
                change: Some(match &d.change {
                    WorkloadChange::EarlyStart(t) => Change::EarlyStart(start_change(*t)),
                    WorkloadChange::LateStart(t) => Change::LateStart(start_change(*t)),
                    WorkloadChange::SizeChange { new_size_bytes } => {
                        Change::SizeChange(proto::SizeChange {
                            new_size_bytes: *new_size_bytes,
                        })
                    }
                    WorkloadChange::Completed { completed_unix_ns } => {
                        Change::Completed(proto::Completion {
                            completed_unix_ns: completed_unix_ns.unwrap_or(0),
                        })
                    }
                    WorkloadChange::Aborted { reason } => Change::Aborted(proto::Abort {
                        reason: opt_string(reason),
                    }),
                }),
                observed_unix_ns: d.observed_unix_ns.unwrap_or(0),
            }),
        }
    }
}

impl From<&ValidatedWatch> for proto::WatchEventsRequest {
    fn from(w: &ValidatedWatch) -> Self {
        proto::WatchEventsRequest {
            header: header(&w.ctx),
            job_ids: w.job_ids.clone(),
            telemetry_interval_ns: w.telemetry_interval_ns.unwrap_or(0),
        }
    }
}

impl From<&ValidatedGetReservation> for proto::GetReservationRequest {
    fn from(g: &ValidatedGetReservation) -> Self {
        proto::GetReservationRequest {
            header: header(&g.ctx),
            reservation_id: g.reservation_id.clone(),
        }
    }
}

impl From<&ValidatedListReservations> for proto::ListReservationsRequest {
    fn from(l: &ValidatedListReservations) -> Self {
        proto::ListReservationsRequest {
            header: header(&l.ctx),
            job_id: opt_string(&l.job_id),
            page_size: l.page_size,
            page_token: opt_string(&l.page_token),
        }
    }
}

// ---------------------------------------------------------------------------
// Controller -> workload
// ---------------------------------------------------------------------------

impl From<&ServerHello> for proto::HandshakeResponse {
    fn from(h: &ServerHello) -> Self {
        proto::HandshakeResponse {
            server_version: Some(h.server_version.into()),
            server_time_unix_ns: h.server_time_unix_ns,
            supported_collective_kinds: h
                .supported_collective_kinds
                .iter()
                .map(|&k| proto::CollectiveKind::from(k).into())
                .collect(),
            max_demands_per_request: h.max_demands_per_request,
            max_label_stack_depth: h.max_label_stack_depth,
        }
    }
}

impl From<&TopologyRegistration> for proto::RegisterTopologyResponse {
    fn from(r: &TopologyRegistration) -> Self {
        proto::RegisterTopologyResponse {
            job_id: r.job_id.clone(),
            registered_ranks: r.registered_ranks,
            generation: r.generation,
            warnings: r.warnings.clone(),
        }
    }
}

/// Consumes the domain type so that its strings move into the message: the
/// controller answers every submission with freshly built records, and
/// cloning each flow's names and labels a second time showed in its profile.
impl From<FlowReservation> for proto::FlowReservation {
    fn from(f: FlowReservation) -> Self {
        proto::FlowReservation {
            flow_id: f.flow_id,
            source_address: f.source_address.to_string(),
            destination_address: f.destination_address.to_string(),
            source_rank: f.source_rank,
            destination_rank: f.destination_rank,
            dest_qp: f.dest_qp,
            status: proto::ReservationStatus::from(f.status).into(),
            reason: proto::ReasonCode::from(f.reason).into(),
            requested_bps: f.requested_bps,
            accepted_bps: f.accepted_bps,
            start_unix_ns: f.start_unix_ns,
            end_unix_ns: f.end_unix_ns,
            sr_label_stack: f.sr_label_stack,
            hops: f
                .hops
                .into_iter()
                .map(|h| proto::PathHop {
                    node: h.node,
                    egress_port: h.egress_port,
                })
                .collect(),
            advisory: f.advisory.unwrap_or_default(),
            udp_src_port: f.udp_src_port.map(u32::from),
        }
    }
}

impl From<&FlowReservation> for proto::FlowReservation {
    fn from(f: &FlowReservation) -> Self {
        f.clone().into()
    }
}

/// Consumes the domain type (see the flow's conversion for why).
impl From<ValidatedReservation> for proto::Reservation {
    fn from(r: ValidatedReservation) -> Self {
        use proto::reservation::Subject;
        proto::Reservation {
            reservation_id: r.reservation_id,
            subject: Some(match r.subject {
                ReservationSubject::Demand(id) => Subject::DemandId(id),
                ReservationSubject::Collective(id) => Subject::CollectiveId(id),
            }),
            job_id: r.job_id.unwrap_or_default(),
            status: proto::ReservationStatus::from(r.status).into(),
            reason: proto::ReasonCode::from(r.reason).into(),
            advisory: r.advisory.unwrap_or_default(),
            start_unix_ns: r.start_unix_ns,
            end_unix_ns: r.end_unix_ns,
            flows: r.flows.into_iter().map(Into::into).collect(),
            revision: r.revision,
            predicted: r.predicted,
        }
    }
}

impl From<&ValidatedReservation> for proto::Reservation {
    fn from(r: &ValidatedReservation) -> Self {
        r.clone().into()
    }
}

impl From<&ReservationPage> for proto::ListReservationsResponse {
    fn from(p: &ReservationPage) -> Self {
        proto::ListReservationsResponse {
            reservations: p.reservations.iter().map(Into::into).collect(),
            next_page_token: opt_string(&p.next_page_token),
        }
    }
}

impl From<&LinkId> for proto::LinkId {
    fn from(l: &LinkId) -> Self {
        proto::LinkId {
            from_node: l.from_node.clone(),
            from_port: l.from_port,
            to_node: l.to_node.clone(),
            to_port: l.to_port,
        }
    }
}

impl From<&TelemetrySnapshot> for proto::TelemetrySnapshot {
    fn from(t: &TelemetrySnapshot) -> Self {
        proto::TelemetrySnapshot {
            as_of_unix_ns: t.as_of_unix_ns,
            interval_ns: t.interval_ns,
            links: t
                .links
                .iter()
                .map(|l| proto::LinkUtilization {
                    link: Some((&l.link).into()),
                    capacity_bps: l.capacity_bps,
                    measured_bps: l.measured_bps,
                    reserved_bps: l.reserved_bps,
                    peak_queue_bytes: l.peak_queue_bytes,
                })
                .collect(),
            congestion_events: t
                .congestion_events
                .iter()
                .map(|c| proto::CongestionEvent {
                    link: Some((&c.link).into()),
                    kind: proto::CongestionKind::from(c.kind).into(),
                    start_unix_ns: c.start_unix_ns,
                    duration_ns: c.duration_ns,
                    peak_queue_bytes: c.peak_queue_bytes,
                    affected_packets: c.affected_packets,
                })
                .collect(),
            paths: t
                .paths
                .iter()
                .map(|p| proto::PathAvailability {
                    source_address: p.source_address.to_string(),
                    destination_address: p.destination_address.to_string(),
                    equal_cost_paths: p.equal_cost_paths,
                    available_paths: p.available_paths,
                    max_reservable_bps: p.max_reservable_bps,
                })
                .collect(),
        }
    }
}

impl From<&NetworkDeviation> for proto::NetworkDeviation {
    fn from(d: &NetworkDeviation) -> Self {
        use proto::network_deviation::Kind;
        proto::NetworkDeviation {
            observed_unix_ns: d.observed_unix_ns,
            affected_reservation_ids: d.affected_reservation_ids.clone(),
            kind: Some(match &d.change {
                NetworkChange::LinkDown(l) => Kind::LinkDown(proto::LinkStateChange {
                    link: Some(l.into()),
                }),
                NetworkChange::LinkUp(l) => Kind::LinkUp(proto::LinkStateChange {
                    link: Some(l.into()),
                }),
                NetworkChange::ReservationChanged(r) => Kind::ReservationChanged(r.as_ref().into()),
                NetworkChange::ForecastMismatch(m) => {
                    Kind::ForecastMismatch(proto::ForecastMismatch {
                        reservation_id: m.reservation_id.clone(),
                        flow_id: m.flow_id.clone(),
                        expected_start_unix_ns: m.expected_start_unix_ns,
                        observed_start_unix_ns: m.observed_start_unix_ns.unwrap_or(0),
                        expected_bps: m.expected_bps,
                        observed_bps: m.observed_bps,
                    })
                }
                NetworkChange::PredictionWithdrawn { job_id, reason } => {
                    Kind::PredictionWithdrawn(proto::PredictionWithdrawn {
                        job_id: job_id.clone(),
                        reason: reason.clone(),
                    })
                }
            }),
        }
    }
}

impl From<&ValidatedWatchEvent> for proto::WatchEvent {
    fn from(e: &ValidatedWatchEvent) -> Self {
        use proto::watch_event::Event;
        proto::WatchEvent {
            sequence: e.sequence,
            emitted_unix_ns: e.emitted_unix_ns,
            event: Some(match &e.body {
                WatchEventBody::Telemetry(t) => Event::Telemetry(t.into()),
                WatchEventBody::Deviation(d) => Event::Deviation(d.into()),
            }),
        }
    }
}
