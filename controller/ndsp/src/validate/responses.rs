//! The responses and watch events a controller sends, validated on the
//! client.

use std::collections::HashMap;

use crate::limits::*;
use crate::proto;
use crate::types::*;

use super::fields::{
    check_unique, client_id, controller_id, ipv4_unicast, nonzero, optional_client_id, positive,
    protocol_version, queue_pair, rank_number, rate_bps, required, required_name, text, FromWire,
    Quoted,
};
use super::path::{Path, ROOT};
use super::requests::kind_name;
use super::{Result, Validate};

impl Validate for proto::HandshakeResponse {
    type Output = ServerHello;

    fn validate(&self) -> Result<ServerHello> {
        let server_version = protocol_version(ROOT.field("server_version"), &self.server_version)?;
        let server_time_unix_ns =
            positive(ROOT.field("server_time_unix_ns"), self.server_time_unix_ns)?;
        let mut kinds = Vec::with_capacity(self.supported_collective_kinds.len());
        let mut seen = HashMap::new();
        for (i, &k) in self.supported_collective_kinds.iter().enumerate() {
            let kp = ROOT.index("supported_collective_kinds", i);
            let kind = CollectiveKind::from_wire(kp, k)?;
            check_unique(
                &mut seen,
                kind_name(kind),
                i,
                kp,
                "supported_collective_kinds",
                "kind",
            )?;
            kinds.push(kind);
        }
        if self.max_demands_per_request == 0 {
            return ROOT
                .field("max_demands_per_request")
                .err("must be greater than 0");
        }
        if self.max_label_stack_depth as usize > MAX_LABEL_STACK_DEPTH {
            return ROOT.field("max_label_stack_depth").err(format!(
                "{} is deeper than the protocol's {MAX_LABEL_STACK_DEPTH}",
                self.max_label_stack_depth
            ));
        }
        Ok(ServerHello {
            server_version,
            server_time_unix_ns,
            supported_collective_kinds: kinds,
            max_demands_per_request: self.max_demands_per_request,
            max_label_stack_depth: self.max_label_stack_depth,
        })
    }
}

impl Validate for proto::RegisterTopologyResponse {
    type Output = TopologyRegistration;

    fn validate(&self) -> Result<TopologyRegistration> {
        let job_id = client_id(ROOT.field("job_id"), &self.job_id)?;
        let generation = positive(ROOT.field("generation"), self.generation)?;
        let mut warnings = Vec::with_capacity(self.warnings.len());
        for (i, w) in self.warnings.iter().enumerate() {
            let wp = ROOT.index("warnings", i);
            warnings.push(text(wp, w, MAX_TEXT_LEN)?.ok_or_else(|| wp.error("is empty"))?);
        }
        Ok(TopologyRegistration {
            job_id,
            registered_ranks: self.registered_ranks,
            generation,
            warnings,
        })
    }
}

impl Validate for proto::CancelResponse {
    type Output = Vec<String>;

    fn validate(&self) -> Result<Vec<String>> {
        id_list(
            ROOT,
            &self.cancelled_reservation_ids,
            "cancelled_reservation_ids",
        )
    }
}

fn id_list(parent: Path<'_>, ids: &[String], list: &'static str) -> Result<Vec<String>> {
    let mut out = Vec::with_capacity(ids.len());
    let mut seen = HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let p = parent.index(list, i);
        out.push(controller_id(p, id)?);
        check_unique(&mut seen, Quoted(id), i, p, list, "id")?;
    }
    Ok(out)
}

fn reservation_list(
    list: &'static str,
    rs: &[proto::Reservation],
) -> Result<Vec<ValidatedReservation>> {
    rs.iter()
        .enumerate()
        .map(|(i, r)| reservation(ROOT.index(list, i), r))
        .collect()
}

impl Validate for proto::SubmitDemandResponse {
    type Output = Vec<ValidatedReservation>;

    fn validate(&self) -> Result<Vec<ValidatedReservation>> {
        reservation_list("reservations", &self.reservations)
    }
}

impl Validate for proto::SubmitCollectiveResponse {
    type Output = ValidatedReservation;

    fn validate(&self) -> Result<ValidatedReservation> {
        let p = ROOT.field("reservation");
        reservation(p, required(p, &self.reservation)?)
    }
}

impl Validate for proto::ReportDeviationResponse {
    type Output = Vec<ValidatedReservation>;

    fn validate(&self) -> Result<Vec<ValidatedReservation>> {
        reservation_list("updated_reservations", &self.updated_reservations)
    }
}

impl Validate for proto::GetReservationResponse {
    type Output = ValidatedReservation;

    fn validate(&self) -> Result<ValidatedReservation> {
        let p = ROOT.field("reservation");
        reservation(p, required(p, &self.reservation)?)
    }
}

impl Validate for proto::ListReservationsResponse {
    type Output = ReservationPage;

    fn validate(&self) -> Result<ReservationPage> {
        Ok(ReservationPage {
            reservations: reservation_list("reservations", &self.reservations)?,
            next_page_token: text(
                ROOT.field("next_page_token"),
                &self.next_page_token,
                MAX_PAGE_TOKEN_LEN,
            )?,
        })
    }
}

impl Validate for proto::Reservation {
    type Output = ValidatedReservation;

    fn validate(&self) -> Result<ValidatedReservation> {
        reservation(ROOT, self)
    }
}

fn reservation(p: Path<'_>, r: &proto::Reservation) -> Result<ValidatedReservation> {
    use proto::reservation::Subject;

    let reservation_id = controller_id(p.field("reservation_id"), &r.reservation_id)?;
    let subject = match &r.subject {
        None => {
            return p
                .field("subject")
                .err("is required: set demand_id or collective_id")
        }
        // A predicted reservation answers a demand the controller made
        // itself, whose id carries the controller's "/".
        Some(Subject::DemandId(id)) if r.predicted => {
            ReservationSubject::Demand(controller_id(p.field("demand_id"), id)?)
        }
        Some(Subject::DemandId(id)) => {
            ReservationSubject::Demand(client_id(p.field("demand_id"), id)?)
        }
        Some(Subject::CollectiveId(id)) => {
            ReservationSubject::Collective(client_id(p.field("collective_id"), id)?)
        }
    };
    let job_id = optional_client_id(p.field("job_id"), &r.job_id)?;
    let status = ReservationStatus::from_wire(p.field("status"), r.status)?;
    let reason = ReasonCode::from_wire(p.field("reason"), r.reason)?;
    if status.needs_explanation() && reason == ReasonCode::None {
        return p.field("reason").err(format!(
            "is required when the status is {}",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }
    let advisory = text(p.field("advisory"), &r.advisory, MAX_TEXT_LEN)?;
    if status.needs_explanation() && advisory.is_none() {
        return p.field("advisory").err(format!(
            "is required when the status is {}",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }
    let revision = positive(p.field("revision"), r.revision)?;

    let quiet = matches!(
        status,
        ReservationStatus::Rejected | ReservationStatus::Cancelled
    );
    if r.flows.is_empty() && !quiet {
        return p.field("flows").err(format!(
            "at least one flow is required when the status is {}",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }
    if status.reserves() && r.end_unix_ns <= r.start_unix_ns {
        return p.field("end_unix_ns").err(format!(
            "end {} ns is not after the start {} ns",
            r.end_unix_ns, r.start_unix_ns
        ));
    }

    let mut flows = Vec::with_capacity(r.flows.len());
    let mut seen = HashMap::with_capacity(r.flows.len());
    for (i, f) in r.flows.iter().enumerate() {
        let fp = p.index("flows", i);
        let flow = flow_reservation(fp, f)?;
        check_unique(
            &mut seen,
            Quoted(&f.flow_id),
            i,
            fp.field("flow_id"),
            "flows",
            "flow id",
        )?;
        if flow.status.reserves()
            && (flow.start_unix_ns < r.start_unix_ns || flow.end_unix_ns > r.end_unix_ns)
        {
            return fp.err(format!(
                "window {}..{} ns lies outside the reservation's {}..{} ns",
                flow.start_unix_ns, flow.end_unix_ns, r.start_unix_ns, r.end_unix_ns
            ));
        }
        let consistent = match status {
            ReservationStatus::Admitted => flow.status == ReservationStatus::Admitted,
            ReservationStatus::Cancelled => flow.status == ReservationStatus::Cancelled,
            _ => true,
        };
        if !consistent {
            return fp.field("status").err(format!(
                "is {} but the reservation is {}",
                proto::ReservationStatus::from(flow.status).as_str_name(),
                proto::ReservationStatus::from(status).as_str_name()
            ));
        }
        flows.push(flow);
    }
    if !matches!(
        status,
        ReservationStatus::Admitted | ReservationStatus::Cancelled
    ) && !flows.is_empty()
        && flows
            .iter()
            .all(|f| f.status == ReservationStatus::Admitted)
    {
        return p.field("status").err(format!(
            "is {} but every flow is ADMITTED",
            proto::ReservationStatus::from(status).as_str_name()
        ));
    }

    Ok(ValidatedReservation {
        reservation_id,
        subject,
        job_id,
        status,
        reason,
        advisory,
        start_unix_ns: r.start_unix_ns,
        end_unix_ns: r.end_unix_ns,
        flows,
        revision,
        predicted: r.predicted,
    })
}

fn flow_reservation(p: Path<'_>, f: &proto::FlowReservation) -> Result<FlowReservation> {
    let flow_id = controller_id(p.field("flow_id"), &f.flow_id)?;
    let source_address = ipv4_unicast(p.field("source_address"), &f.source_address)?;
    let destination_address = ipv4_unicast(p.field("destination_address"), &f.destination_address)?;
    if source_address == destination_address {
        return p
            .field("destination_address")
            .err("is the same as source_address");
    }
    let source_rank = f
        .source_rank
        .map(|r| rank_number(p.field("source_rank"), r))
        .transpose()?;
    let destination_rank = f
        .destination_rank
        .map(|r| rank_number(p.field("destination_rank"), r))
        .transpose()?;
    let dest_qp = f
        .dest_qp
        .map(|q| queue_pair(p.field("dest_qp"), q))
        .transpose()?;
    let status = ReservationStatus::from_wire(p.field("status"), f.status)?;
    let reason = ReasonCode::from_wire(p.field("reason"), f.reason)?;
    let requested_bps = rate_bps(p.field("requested_bps"), f.requested_bps)?;
    let accepted = f.accepted_bps;
    let ap = p.field("accepted_bps");
    let status_name = proto::ReservationStatus::from(status).as_str_name();
    match status {
        ReservationStatus::Admitted | ReservationStatus::Deferred if accepted != requested_bps => {
            return ap.err(format!(
                "{accepted} bit/s but {status_name} means the requested {requested_bps} bit/s is reserved"
            ))
        }
        ReservationStatus::Partial if accepted == 0 || accepted >= requested_bps => {
            return ap.err(format!(
                "{accepted} bit/s but {status_name} means between 0 and the requested {requested_bps} bit/s, exclusive"
            ))
        }
        ReservationStatus::FallbackEcmp | ReservationStatus::Rejected | ReservationStatus::Cancelled
            if accepted != 0 =>
        {
            return ap.err(format!(
                "{accepted} bit/s but {status_name} reserves nothing"
            ))
        }
        _ => {}
    }
    if status.needs_explanation() && reason == ReasonCode::None {
        return p
            .field("reason")
            .err(format!("is required when the status is {status_name}"));
    }
    if status.reserves() {
        positive(p.field("start_unix_ns"), f.start_unix_ns)?;
        if f.end_unix_ns <= f.start_unix_ns {
            return p.field("end_unix_ns").err(format!(
                "end {} ns is not after the start {} ns",
                f.end_unix_ns, f.start_unix_ns
            ));
        }
    } else if !f.sr_label_stack.is_empty() || !f.hops.is_empty() {
        let field = if f.sr_label_stack.is_empty() {
            "hops"
        } else {
            "sr_label_stack"
        };
        return p
            .field(field)
            .err(format!("must be empty when the status is {status_name}"));
    }

    if f.sr_label_stack.len() > MAX_LABEL_STACK_DEPTH {
        return p.field("sr_label_stack").err(format!(
            "{} labels; the protocol carries at most {MAX_LABEL_STACK_DEPTH}",
            f.sr_label_stack.len()
        ));
    }
    for (i, &label) in f.sr_label_stack.iter().enumerate() {
        let lp = p.index("sr_label_stack", i);
        if label > MPLS_LABEL_MAX {
            return lp.err(format!(
                "label {label} does not fit in 20 bits (at most {MPLS_LABEL_MAX})"
            ));
        }
        if label < MPLS_FIRST_UNRESERVED_LABEL {
            return lp.err(format!(
                "label {label} is a special-purpose label (0 to 15)"
            ));
        }
    }
    let mut hops = Vec::with_capacity(f.hops.len());
    for (i, h) in f.hops.iter().enumerate() {
        let hp = p.index("hops", i);
        hops.push(PathHop {
            node: required_name(hp.field("node"), &h.node, MAX_NODE_NAME_LEN)?,
            egress_port: h.egress_port,
        });
    }
    let advisory = text(p.field("advisory"), &f.advisory, MAX_TEXT_LEN)?;
    let udp_src_port = match f.udp_src_port {
        None => None,
        Some(_) if !status.reserves() => {
            return p
                .field("udp_src_port")
                .err(format!("must be absent when the status is {status_name}"))
        }
        Some(_) if !f.sr_label_stack.is_empty() => {
            return p
                .field("udp_src_port")
                .err("and sr_label_stack are both set: a flow is steered by its source port or by labels, not both")
        }
        Some(port) => match u16::try_from(port) {
            Ok(port) if port > 0 => Some(port),
            _ => {
                return p
                    .field("udp_src_port")
                    .err(format!("{port} is not a UDP source port (1 to 65535)"))
            }
        },
    };
    Ok(FlowReservation {
        flow_id,
        source_address,
        destination_address,
        source_rank,
        destination_rank,
        dest_qp,
        status,
        reason,
        requested_bps,
        accepted_bps: accepted,
        start_unix_ns: f.start_unix_ns,
        end_unix_ns: f.end_unix_ns,
        sr_label_stack: f.sr_label_stack.clone(),
        hops,
        advisory,
        udp_src_port,
    })
}

impl Validate for proto::WatchEvent {
    type Output = ValidatedWatchEvent;

    fn validate(&self) -> Result<ValidatedWatchEvent> {
        use proto::watch_event::Event;

        let sequence = positive(ROOT.field("sequence"), self.sequence)?;
        let emitted_unix_ns = positive(ROOT.field("emitted_unix_ns"), self.emitted_unix_ns)?;
        let body = match &self.event {
            None => {
                return ROOT
                    .field("event")
                    .err("is required: set telemetry or deviation")
            }
            Some(Event::Telemetry(t)) => {
                WatchEventBody::Telemetry(telemetry(ROOT.field("telemetry"), t)?)
            }
            Some(Event::Deviation(d)) => {
                WatchEventBody::Deviation(network_deviation(ROOT.field("deviation"), d)?)
            }
        };
        Ok(ValidatedWatchEvent {
            sequence,
            emitted_unix_ns,
            body,
        })
    }
}

fn link_id(p: Path<'_>, l: &Option<proto::LinkId>) -> Result<LinkId> {
    let l = required(p, l)?;
    let from_node = required_name(p.field("from_node"), &l.from_node, MAX_NODE_NAME_LEN)?;
    let to_node = required_name(p.field("to_node"), &l.to_node, MAX_NODE_NAME_LEN)?;
    if from_node == to_node {
        return p.field("to_node").err("is the same as from_node");
    }
    Ok(LinkId {
        from_node,
        from_port: l.from_port,
        to_node,
        to_port: l.to_port,
    })
}

pub(super) fn telemetry(p: Path<'_>, t: &proto::TelemetrySnapshot) -> Result<TelemetrySnapshot> {
    let as_of_unix_ns = positive(p.field("as_of_unix_ns"), t.as_of_unix_ns)?;
    let interval_ns = positive(p.field("interval_ns"), t.interval_ns)?;
    let mut links = Vec::with_capacity(t.links.len());
    for (i, l) in t.links.iter().enumerate() {
        let lp = p.index("links", i);
        let link = link_id(lp.field("link"), &l.link)?;
        let capacity_bps = positive(lp.field("capacity_bps"), l.capacity_bps)?;
        if l.reserved_bps > capacity_bps {
            return lp.field("reserved_bps").err(format!(
                "{} bit/s exceeds the capacity {capacity_bps} bit/s",
                l.reserved_bps
            ));
        }
        links.push(LinkUtilization {
            link,
            capacity_bps,
            measured_bps: l.measured_bps,
            reserved_bps: l.reserved_bps,
            peak_queue_bytes: l.peak_queue_bytes,
        });
    }
    let mut congestion_events = Vec::with_capacity(t.congestion_events.len());
    for (i, c) in t.congestion_events.iter().enumerate() {
        let cp = p.index("congestion_events", i);
        congestion_events.push(CongestionEvent {
            link: link_id(cp.field("link"), &c.link)?,
            kind: CongestionKind::from_wire(cp.field("kind"), c.kind)?,
            start_unix_ns: positive(cp.field("start_unix_ns"), c.start_unix_ns)?,
            duration_ns: c.duration_ns,
            peak_queue_bytes: c.peak_queue_bytes,
            affected_packets: c.affected_packets,
        });
    }
    let mut paths = Vec::with_capacity(t.paths.len());
    for (i, a) in t.paths.iter().enumerate() {
        let ap = p.index("paths", i);
        let source_address = ipv4_unicast(ap.field("source_address"), &a.source_address)?;
        let destination_address =
            ipv4_unicast(ap.field("destination_address"), &a.destination_address)?;
        if source_address == destination_address {
            return ap
                .field("destination_address")
                .err("is the same as source_address");
        }
        if a.available_paths > a.equal_cost_paths {
            return ap.field("available_paths").err(format!(
                "{} is more than the {} equal-cost paths",
                a.available_paths, a.equal_cost_paths
            ));
        }
        paths.push(PathAvailability {
            source_address,
            destination_address,
            equal_cost_paths: a.equal_cost_paths,
            available_paths: a.available_paths,
            max_reservable_bps: a.max_reservable_bps,
        });
    }
    Ok(TelemetrySnapshot {
        as_of_unix_ns,
        interval_ns,
        links,
        congestion_events,
        paths,
    })
}

fn network_deviation(p: Path<'_>, d: &proto::NetworkDeviation) -> Result<NetworkDeviation> {
    use proto::network_deviation::Kind;

    let observed_unix_ns = positive(p.field("observed_unix_ns"), d.observed_unix_ns)?;
    let affected_reservation_ids =
        id_list(p, &d.affected_reservation_ids, "affected_reservation_ids")?;
    let change = match &d.kind {
        None => {
            return p.field("kind").err(
"is required: set link_down, link_up, reservation_changed, forecast_mismatch or prediction_withdrawn",
            )
        }
        Some(Kind::LinkDown(l)) => {
            let lp = p.field("link_down");
            NetworkChange::LinkDown(link_id(lp.field("link"), &l.link)?)
        }
        Some(Kind::LinkUp(l)) => {
            let lp = p.field("link_up");
            NetworkChange::LinkUp(link_id(lp.field("link"), &l.link)?)
        }
        Some(Kind::ReservationChanged(r)) => NetworkChange::ReservationChanged(Box::new(
            reservation(p.field("reservation_changed"), r)?,
        )),
        Some(Kind::ForecastMismatch(m)) => {
            let mp = p.field("forecast_mismatch");
            NetworkChange::ForecastMismatch(ForecastMismatch {
                reservation_id: controller_id(mp.field("reservation_id"), &m.reservation_id)?,
                flow_id: controller_id(mp.field("flow_id"), &m.flow_id)?,
                expected_start_unix_ns: positive(
                    mp.field("expected_start_unix_ns"),
                    m.expected_start_unix_ns,
                )?,
                observed_start_unix_ns: nonzero(m.observed_start_unix_ns),
                expected_bps: m.expected_bps,
                observed_bps: m.observed_bps,
            })
        }
        Some(Kind::PredictionWithdrawn(w)) => {
            let wp = p.field("prediction_withdrawn");
            let job_id = client_id(wp.field("job_id"), &w.job_id)?;
            let reason = text(wp.field("reason"), &w.reason, 1024)?
                .ok_or_else(|| wp.field("reason").error("is required"))?;
            NetworkChange::PredictionWithdrawn { job_id, reason }
        }
    };
    Ok(NetworkDeviation {
        observed_unix_ns,
        affected_reservation_ids,
        change,
    })
}
