//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use super::*;

// ---------------------------------------------------------------------------
// Reservations (client side)
// ---------------------------------------------------------------------------

#[test]
fn label_must_fit_in_20_bits() {
    rejects(
        &admitted(),
        with_flow(|f| f.sr_label_stack[1] = 1 << 20),
        "flows[0].sr_label_stack[1]",
        "does not fit in 20 bits",
    );
    let mut r = admitted();
    r.flows[0].sr_label_stack[1] = MPLS_LABEL_MAX;
    accepts(&r);
}

#[test]
fn special_purpose_labels_are_rejected() {
    rejects(
        &admitted(),
        with_flow(|f| f.sr_label_stack[0] = 3),
        "flows[0].sr_label_stack[0]",
        "special-purpose",
    );
}

#[test]
fn label_stack_depth_is_bounded() {
    rejects(
        &admitted(),
        with_flow(|f| f.sr_label_stack = vec![1000; MAX_LABEL_STACK_DEPTH + 1]),
        "flows[0].sr_label_stack",
        "at most 16",
    );
}

#[test]
fn reservation_id_subject_and_revision_are_required() {
    rejects(
        &admitted(),
        |r| r.reservation_id.clear(),
        "reservation_id",
        "is required",
    );
    rejects(&admitted(), |r| r.subject = None, "subject", "is required");
    rejects(
        &admitted(),
        |r| r.revision = 0,
        "revision",
        "greater than 0",
    );
    rejects(
        &admitted(),
        |r| r.status = 0,
        "status",
        "RESERVATION_STATUS_UNSPECIFIED",
    );
    rejects(
        &admitted(),
        |r| r.reason = 77,
        "reason",
        "unknown ReasonCode value 77",
    );
}

#[test]
fn admitted_flow_gets_the_requested_rate() {
    rejects(
        &admitted(),
        with_flow(|f| f.accepted_bps -= 1),
        "flows[0].accepted_bps",
        "requested",
    );
    rejects(
        &admitted(),
        with_flow(|f| f.requested_bps = 0),
        "flows[0].requested_bps",
        "greater than 0",
    );
}

#[test]
fn partial_flow_gets_less_but_something() {
    rejects(
        &partial(),
        with_flow(|f| f.accepted_bps = 0),
        "flows[0].accepted_bps",
        "exclusive",
    );
    rejects(
        &partial(),
        with_flow(|f| f.accepted_bps = f.requested_bps),
        "flows[0].accepted_bps",
        "exclusive",
    );
}

#[test]
fn unreserved_flow_reserves_nothing_and_has_no_path() {
    rejects(
        &fallback(),
        with_flow(|f| f.accepted_bps = 1),
        "flows[0].accepted_bps",
        "reserves nothing",
    );
    rejects(
        &fallback(),
        with_flow(|f| f.sr_label_stack = vec![1001]),
        "flows[0].sr_label_stack",
        "must be empty",
    );
    rejects(
        &fallback(),
        with_flow(|f| {
            f.hops = vec![proto::PathHop {
                node: "leaf1".into(),
                egress_port: 1,
            }]
        }),
        "flows[0].hops",
        "must be empty",
    );
}

#[test]
fn non_admitted_outcome_needs_reason_and_advisory() {
    rejects(
        &partial(),
        |r| r.advisory.clear(),
        "advisory",
        "is required when the status is RESERVATION_STATUS_PARTIAL",
    );
    rejects(
        &fallback(),
        |r| r.reason = 0,
        "reason",
        "RESERVATION_STATUS_FALLBACK_ECMP",
    );
    rejects(
        &partial(),
        with_flow(|f| f.reason = 0),
        "flows[0].reason",
        "is required",
    );
}

#[test]
fn reserved_window_must_be_nonempty() {
    rejects(
        &admitted(),
        |r| r.end_unix_ns = r.start_unix_ns,
        "end_unix_ns",
        "not after the start",
    );
    rejects(
        &admitted(),
        with_flow(|f| f.end_unix_ns = f.start_unix_ns),
        "flows[0].end_unix_ns",
        "not after the start",
    );
    rejects(
        &admitted(),
        with_flow(|f| f.start_unix_ns = 0),
        "flows[0].start_unix_ns",
        "greater than 0",
    );
}

#[test]
fn flow_window_lies_within_the_reservation() {
    rejects(
        &admitted(),
        with_flow(|f| f.end_unix_ns = 2_001),
        "flows[0]",
        "outside the reservation",
    );
}

#[test]
fn reserving_statuses_need_flows() {
    rejects(
        &admitted(),
        |r| r.flows.clear(),
        "flows",
        "at least one flow",
    );
    let mut r = admitted();
    r.status = proto::ReservationStatus::Rejected as i32;
    r.reason = proto::ReasonCode::DeadlineUnmeetable as i32;
    r.advisory = "deadline cannot be met".into();
    r.flows.clear();
    accepts(&r);
}

#[test]
fn overall_status_agrees_with_flows() {
    // ADMITTED overall but a flow is partial.
    let mut base = partial();
    base.flows.push(admitted_flow());
    base.flows[1].flow_id = "d0-b".into();
    accepts(&base);
    rejects(
        &base,
        |r| {
            r.status = proto::ReservationStatus::Admitted as i32;
        },
        "flows[0].status",
        "is RESERVATION_STATUS_PARTIAL but the reservation is RESERVATION_STATUS_ADMITTED",
    );
    // PARTIAL overall but every flow is admitted.
    rejects(
        &admitted(),
        |r| {
            r.status = proto::ReservationStatus::Partial as i32;
            r.reason = proto::ReasonCode::InsufficientCapacity as i32;
            r.advisory = "x".into();
        },
        "status",
        "every flow is ADMITTED",
    );
}

#[test]
fn flow_ids_are_unique() {
    let mut base = admitted();
    base.flows.push(admitted_flow());
    rejects(
        &base,
        |_| {},
        "flows[1].flow_id",
        "duplicate flow id \"d0\"",
    );
}

#[test]
fn flow_addresses_are_distinct_unicast() {
    rejects(
        &admitted(),
        with_flow(|f| f.destination_address = f.source_address.clone()),
        "flows[0].destination_address",
        "same as source_address",
    );
    rejects(
        &admitted(),
        with_flow(|f| f.source_address = "10.1.1".into()),
        "flows[0].source_address",
        "not an IPv4 address",
    );
}

#[test]
fn flow_hops_need_names() {
    rejects(
        &admitted(),
        with_flow(|f| f.hops[1].node.clear()),
        "flows[0].hops[1].node",
        "is required",
    );
}

#[test]
fn flow_dest_qp_is_24_bit() {
    rejects(
        &admitted(),
        with_flow(|f| f.dest_qp = Some(1 << 24)),
        "flows[0].dest_qp",
        "24 bits",
    );
}

#[test]
fn a_source_port_holds_a_reserved_flow_without_labels() {
    let by_port = |f: &mut proto::FlowReservation| {
        f.sr_label_stack.clear();
        f.udp_src_port = Some(51_234);
    };
    let mut r = admitted();
    by_port(&mut r.flows[0]);
    accepts(&r);
    rejects(
        &admitted(),
        with_flow(|f| f.udp_src_port = Some(51_234)),
        "flows[0].udp_src_port",
        "not both",
    );
    for bad in [0, 65_536] {
        rejects(
            &admitted(),
            with_flow(move |f| {
                by_port(f);
                f.udp_src_port = Some(bad);
            }),
            "flows[0].udp_src_port",
            "is not a UDP source port",
        );
    }
    accepts(&fallback());
    rejects(
        &fallback(),
        with_flow(|f| f.udp_src_port = Some(51_234)),
        "flows[0].udp_src_port",
        "must be absent",
    );
}

#[test]
fn nested_reservation_paths_are_prefixed() {
    let resp = proto::SubmitDemandResponse {
        reservations: vec![admitted(), {
            let mut r = admitted();
            r.flows[0].sr_label_stack[2] = 1 << 21;
            r
        }],
    };
    let e = resp.validate().unwrap_err();
    assert_eq!(e.field, "reservations[1].flows[0].sr_label_stack[2]");
    let resp = proto::GetReservationResponse { reservation: None };
    assert_eq!(resp.validate().unwrap_err().field, "reservation");
}

// ---------------------------------------------------------------------------
// Handshake response and watch events (client side)
// ---------------------------------------------------------------------------

fn hello() -> proto::HandshakeResponse {
    proto::HandshakeResponse {
        server_version: Some(proto::ProtocolVersion { major: 1, minor: 0 }),
        server_time_unix_ns: 1,
        supported_collective_kinds: vec![proto::CollectiveKind::RingAllReduce as i32],
        max_demands_per_request: 4096,
        max_label_stack_depth: 4,
    }
}

#[test]
fn server_version_must_match_major() {
    accepts(&hello());
    rejects(
        &hello(),
        |h| h.server_version = Some(proto::ProtocolVersion { major: 2, minor: 1 }),
        "server_version.major",
        "unsupported protocol version 2.1",
    );
}

#[test]
fn server_limits_are_sane() {
    rejects(
        &hello(),
        |h| h.max_label_stack_depth = 17,
        "max_label_stack_depth",
        "deeper",
    );
    rejects(
        &hello(),
        |h| h.max_demands_per_request = 0,
        "max_demands_per_request",
        "greater than 0",
    );
    rejects(
        &hello(),
        |h| {
            h.supported_collective_kinds
                .push(proto::CollectiveKind::RingAllReduce as i32)
        },
        "supported_collective_kinds[1]",
        "duplicate kind",
    );
}

#[test]
fn watch_event_envelope_is_checked() {
    rejects(
        &telemetry_event(),
        |e| e.sequence = 0,
        "sequence",
        "greater than 0",
    );
    rejects(
        &telemetry_event(),
        |e| e.event = None,
        "event",
        "is required",
    );
}

fn with_snapshot(
    f: impl FnOnce(&mut proto::TelemetrySnapshot),
) -> impl FnOnce(&mut proto::WatchEvent) {
    move |e| match e.event.as_mut().unwrap() {
        proto::watch_event::Event::Telemetry(t) => f(t),
        _ => unreachable!(),
    }
}

#[test]
fn telemetry_values_are_consistent() {
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.links[0].reserved_bps = t.links[0].capacity_bps + 1),
        "telemetry.links[0].reserved_bps",
        "exceeds the capacity",
    );
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.links[0].capacity_bps = 0),
        "telemetry.links[0].capacity_bps",
        "greater than 0",
    );
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.paths[0].available_paths = 5),
        "telemetry.paths[0].available_paths",
        "more than the 4 equal-cost paths",
    );
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.congestion_events[0].kind = 0),
        "telemetry.congestion_events[0].kind",
        "is required",
    );
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.interval_ns = 0),
        "telemetry.interval_ns",
        "greater than 0",
    );
}

#[test]
fn link_ids_join_two_named_nodes() {
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.links[0].link = link("leaf1", "leaf1")),
        "telemetry.links[0].link.to_node",
        "same as from_node",
    );
    rejects(
        &telemetry_event(),
        with_snapshot(|t| t.links[0].link = None),
        "telemetry.links[0].link",
        "is required",
    );
    rejects(
        &link_down_event(),
        |e| {
            if let Some(proto::watch_event::Event::Deviation(d)) = &mut e.event {
                d.kind = Some(proto::network_deviation::Kind::LinkDown(
                    proto::LinkStateChange {
                        link: link("", "leaf2"),
                    },
                ));
            }
        },
        "deviation.link_down.link.from_node",
        "is required",
    );
}

#[test]
fn network_deviation_is_checked() {
    rejects(
        &link_down_event(),
        |e| {
            if let Some(proto::watch_event::Event::Deviation(d)) = &mut e.event {
                d.kind = None;
            }
        },
        "deviation.kind",
        "is required",
    );
    rejects(
        &link_down_event(),
        |e| {
            if let Some(proto::watch_event::Event::Deviation(d)) = &mut e.event {
                d.affected_reservation_ids.push("r-1".into());
            }
        },
        "deviation.affected_reservation_ids[1]",
        "duplicate id",
    );
    // A changed reservation is validated in full, with its path prefixed.
    let mut bad = admitted();
    bad.flows[0].sr_label_stack[0] = 2_000_000;
    let e = deviation_event(proto::network_deviation::Kind::ReservationChanged(bad))
        .validate()
        .unwrap_err();
    assert_eq!(
        e.field,
        "deviation.reservation_changed.flows[0].sr_label_stack[0]"
    );
    // A withdrawn prediction names its job and says why.
    let withdrawn = |job: &str, reason: &str| {
        deviation_event(proto::network_deviation::Kind::PredictionWithdrawn(
            proto::PredictionWithdrawn {
                job_id: job.into(),
                reason: reason.into(),
            },
        ))
        .validate()
    };
    assert!(withdrawn("job-1", "no iteration by the window").is_ok());
    let e = withdrawn("job-1", "").unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.reason.as_str()),
        ("deviation.prediction_withdrawn.reason", "is required")
    );
    let e = withdrawn("a/b", "why").unwrap_err();
    assert_eq!(e.field, "deviation.prediction_withdrawn.job_id");
}

#[test]
fn only_a_predicted_reservation_answers_a_controller_made_demand_id() {
    let mut r = admitted();
    r.subject = Some(proto::reservation::Subject::DemandId("t5/job/4/0".into()));
    let e = r.validate().unwrap_err();
    assert_eq!(e.field, "demand_id");
    r.predicted = true;
    let v = r.validate().unwrap();
    assert!(v.predicted);
    assert_eq!(
        v.subject,
        ReservationSubject::Demand("t5/job/4/0".to_string())
    );
}
