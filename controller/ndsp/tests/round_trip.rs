//! Round trips: a fully populated message goes over the wire (prost encode
//! and decode), is validated, and every field shows up in the domain value;
//! encoding the domain value gives the original message back.

use std::fmt::Debug;
use std::net::Ipv4Addr;

use ndsp::proto::{self, collective, demand_signal, endpoint, workload_deviation};
use ndsp::types::*;
use ndsp::{Validate, PROTOCOL_VERSION};
use prost::Message;

/// Wire trip, validation, and re-encoding; returns the domain value.
fn round_trip<M>(msg: &M) -> M::Output
where
    M: Validate + Message + Default + PartialEq + Debug,
    for<'a> M: From<&'a M::Output>,
{
    let decoded = M::decode(msg.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!(&decoded, msg);
    let domain = decoded
        .validate()
        .unwrap_or_else(|e| panic!("rejected: {e}"));
    let back = M::from(&domain);
    assert_eq!(&back, msg, "re-encoding lost or changed a field");
    domain
}

fn header() -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(proto::ProtocolVersion { major: 1, minor: 3 }),
        tenant: "acme".into(),
    })
}

fn ctx() -> RequestContext {
    RequestContext {
        tenant: "acme".into(),
        client_version: Version { major: 1, minor: 3 },
    }
}

#[test]
fn topology_round_trip() {
    let msg = proto::RegisterTopologyRequest {
        header: header(),
        topology: Some(proto::Topology {
            job_id: "llm-train".into(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: 16,
            ranks: vec![
                proto::RankEndpoint {
                    rank: 0,
                    device_id: "GPU-0".into(),
                    host_address: "10.0.1.1".into(),
                    nic: "mlx5_0".into(),
                    qp_range: Some(proto::QpRange {
                        first_qp: 0x100,
                        count: 32,
                    }),
                },
                proto::RankEndpoint {
                    rank: 9,
                    device_id: String::new(),
                    host_address: "10.0.2.1".into(),
                    nic: String::new(),
                    qp_range: None,
                },
            ],
            library: proto::CollectiveLibrary::Nccl as i32,
            library_version: "2.21.5".into(),
            algorithms: vec![
                proto::CollectiveAlgorithm::Tree as i32,
                proto::CollectiveAlgorithm::Ring as i32,
            ],
        }),
    };
    let t = round_trip(&msg);
    assert_eq!(
        t,
        ValidatedTopology {
            ctx: ctx(),
            job_id: "llm-train".into(),
            workload_kind: WorkloadKind::Training,
            world_size: 16,
            ranks: vec![
                RankEndpoint {
                    rank: 0,
                    device_id: Some("GPU-0".into()),
                    host_address: Ipv4Addr::new(10, 0, 1, 1),
                    nic: Some("mlx5_0".into()),
                    qp_range: Some(QpRange {
                        first_qp: 0x100,
                        count: 32
                    }),
                },
                RankEndpoint {
                    rank: 9,
                    device_id: None,
                    host_address: Ipv4Addr::new(10, 0, 2, 1),
                    nic: None,
                    qp_range: None,
                },
            ],
            library: CollectiveLibrary::Nccl,
            library_version: Some("2.21.5".into()),
            algorithms: vec![CollectiveAlgorithm::Tree, CollectiveAlgorithm::Ring],
        }
    );
}

#[test]
fn demand_round_trip() {
    let msg = proto::SubmitDemandRequest {
        header: header(),
        reference_unix_ns: 1_700_000_000_000_000_000,
        demands: vec![
            proto::DemandSignal {
                demand_id: "kv-77".into(),
                job_id: "serve".into(),
                source: Some(proto::Endpoint {
                    address: Some(endpoint::Address::Rank(3)),
                }),
                destination: Some(proto::Endpoint {
                    address: Some(endpoint::Address::HostAddress("10.0.4.2".into())),
                }),
                start: Some(demand_signal::Start::StartOffsetNs(50_000_000)),
                size_bytes: 20 << 30,
                pacing: Some(demand_signal::Pacing::RateBps(400_000_000_000)),
                priority: proto::PriorityClass::LatencyCritical as i32,
                elasticity: proto::Elasticity::Elastic as i32,
                deadline: Some(demand_signal::Deadline::DeadlineOffsetNs(2_000_000_000)),
                dest_qp: Some(0x1234),
                recurrence: Some(proto::Recurrence {
                    period_ns: 3_000_000_000,
                    occurrences: 5,
                }),
                dest_qp_choices: None,
            },
            proto::DemandSignal {
                demand_id: "ckpt".into(),
                job_id: String::new(),
                source: Some(proto::Endpoint {
                    address: Some(endpoint::Address::HostAddress("10.0.1.1".into())),
                }),
                destination: Some(proto::Endpoint {
                    address: Some(endpoint::Address::HostAddress("10.9.0.1".into())),
                }),
                start: Some(demand_signal::Start::StartUnixNs(1_700_000_001_000_000_000)),
                size_bytes: 1 << 30,
                pacing: Some(demand_signal::Pacing::DurationNs(1_000_000_000)),
                priority: proto::PriorityClass::Background as i32,
                elasticity: proto::Elasticity::Elastic as i32,
                deadline: None,
                dest_qp: None,
                recurrence: None,
                dest_qp_choices: None,
            },
        ],
    };
    let b = round_trip(&msg);
    assert_eq!(b.ctx, ctx());
    assert_eq!(b.reference_unix_ns, Some(1_700_000_000_000_000_000));
    assert_eq!(
        b.demands[0],
        ValidatedDemand {
            tenant: "acme".into(),
            demand_id: "kv-77".into(),
            job_id: Some("serve".into()),
            source: Endpoint::Rank(3),
            destination: Endpoint::Host(Ipv4Addr::new(10, 0, 4, 2)),
            start: TimePoint::OffsetNs(50_000_000),
            size_bytes: 20 << 30,
            pacing: Pacing::RateBps(400_000_000_000),
            priority: Priority::LatencyCritical,
            elasticity: Elasticity::Elastic,
            deadline: Some(TimePoint::OffsetNs(2_000_000_000)),
            dest_qp: Some(0x1234),
            recurrence: Some(Recurrence {
                period_ns: 3_000_000_000,
                occurrences: 5
            }),
            dest_qp_choices: None,
        }
    );
    let d = &b.demands[1];
    assert_eq!(d.job_id, None);
    assert_eq!(d.start, TimePoint::UnixNs(1_700_000_001_000_000_000));
    assert_eq!(d.rate_bps(), 8 * (1 << 30));
    assert_eq!(d.deadline, None);
}

#[test]
fn collective_round_trip() {
    for (kind, ranks, peers, expected) in [
        (
            proto::CollectiveKind::RingAllReduce,
            vec![0, 1, 2, 3],
            vec![],
            CollectiveKind::RingAllReduce,
        ),
        (
            proto::CollectiveKind::TreeAllReduce,
            vec![2, 0, 1],
            vec![],
            CollectiveKind::TreeAllReduce,
        ),
        (
            proto::CollectiveKind::AllGather,
            vec![0, 1],
            vec![],
            CollectiveKind::AllGather,
        ),
        (
            proto::CollectiveKind::ReduceScatter,
            vec![0, 1],
            vec![],
            CollectiveKind::ReduceScatter,
        ),
        (
            proto::CollectiveKind::AllToAll,
            vec![0, 1, 2],
            vec![],
            CollectiveKind::AllToAll,
        ),
        (
            proto::CollectiveKind::PipelineSend,
            vec![0, 4, 8, 12],
            vec![],
            CollectiveKind::PipelineSend,
        ),
        (
            proto::CollectiveKind::KvCacheTransfer,
            vec![0, 1],
            vec![8, 9],
            CollectiveKind::KvCacheTransfer,
        ),
    ] {
        let msg = proto::SubmitCollectiveRequest {
            header: header(),
            reference_unix_ns: 0,
            collective: Some(proto::Collective {
                collective_id: "op-1".into(),
                job_id: "llm-train".into(),
                kind: kind as i32,
                ranks: ranks.clone(),
                peer_ranks: peers.clone(),
                size_bytes: 256 << 20,
                channels: 4,
                start: Some(collective::Start::StartUnixNs(1_700_000_000_000_000_000)),
                pacing: Some(collective::Pacing::FlowRateBps(200_000_000_000)),
                priority: proto::PriorityClass::IterationBlocking as i32,
                elasticity: proto::Elasticity::Inelastic as i32,
                deadline: Some(collective::Deadline::DeadlineUnixNs(
                    1_700_000_000_100_000_000,
                )),
                recurrence: Some(proto::Recurrence {
                    period_ns: 500_000_000,
                    occurrences: 1000,
                }),
            }),
        };
        let c = round_trip(&msg);
        assert_eq!(
            c,
            ValidatedCollective {
                ctx: ctx(),
                reference_unix_ns: None,
                collective_id: "op-1".into(),
                job_id: "llm-train".into(),
                kind: expected,
                ranks,
                peer_ranks: peers,
                size_bytes: 256 << 20,
                channels: 4,
                start: TimePoint::UnixNs(1_700_000_000_000_000_000),
                pacing: CollectivePacing::FlowRateBps(200_000_000_000),
                priority: Priority::IterationBlocking,
                elasticity: Elasticity::Inelastic,
                deadline: Some(TimePoint::UnixNs(1_700_000_000_100_000_000)),
                recurrence: Some(Recurrence {
                    period_ns: 500_000_000,
                    occurrences: 1000
                }),
            }
        );
    }
}

#[test]
fn cancel_deviation_watch_and_queries_round_trip() {
    use proto::cancel_request::Target;
    for (target, expected) in [
        (
            Target::DemandId("d".into()),
            CancelTarget::Demand("d".into()),
        ),
        (
            Target::CollectiveId("c".into()),
            CancelTarget::Collective("c".into()),
        ),
        (
            Target::ReservationId("r/1".into()),
            CancelTarget::Reservation("r/1".into()),
        ),
        (Target::JobId("j".into()), CancelTarget::Job("j".into())),
    ] {
        let v = round_trip(&proto::CancelRequest {
            header: header(),
            target: Some(target),
        });
        assert_eq!(v.target, expected);
    }

    use workload_deviation::Change;
    let start = |t| proto::StartChange {
        start: Some(proto::start_change::Start::StartOffsetNs(t)),
    };
    for (change, expected) in [
        (
            Change::EarlyStart(start(7)),
            WorkloadChange::EarlyStart(TimePoint::OffsetNs(7)),
        ),
        (
            Change::LateStart(start(9)),
            WorkloadChange::LateStart(TimePoint::OffsetNs(9)),
        ),
        (
            Change::SizeChange(proto::SizeChange { new_size_bytes: 99 }),
            WorkloadChange::SizeChange { new_size_bytes: 99 },
        ),
        (
            Change::Completed(proto::Completion {
                completed_unix_ns: 5,
            }),
            WorkloadChange::Completed {
                completed_unix_ns: Some(5),
            },
        ),
        (
            Change::Aborted(proto::Abort {
                reason: "rank 3 died".into(),
            }),
            WorkloadChange::Aborted {
                reason: Some("rank 3 died".into()),
            },
        ),
    ] {
        let v = round_trip(&proto::ReportDeviationRequest {
            header: header(),
            reference_unix_ns: 11,
            deviation: Some(proto::WorkloadDeviation {
                target: Some(workload_deviation::Target::DemandId("kv-77".into())),
                change: Some(change),
                observed_unix_ns: 10,
            }),
        });
        assert_eq!(
            v,
            ValidatedDeviation {
                ctx: ctx(),
                reference_unix_ns: Some(11),
                target: DeviationTarget::Demand("kv-77".into()),
                change: expected,
                observed_unix_ns: Some(10),
            }
        );
    }

    let w = round_trip(&proto::WatchEventsRequest {
        header: header(),
        job_ids: vec!["a".into(), "b".into()],
        telemetry_interval_ns: 50_000_000,
    });
    assert_eq!(w.job_ids, ["a", "b"]);
    assert_eq!(w.telemetry_interval_ns, Some(50_000_000));

    let g = round_trip(&proto::GetReservationRequest {
        header: header(),
        reservation_id: "r-1".into(),
    });
    assert_eq!(g.reservation_id, "r-1");

    let l = round_trip(&proto::ListReservationsRequest {
        header: header(),
        job_id: "j".into(),
        page_size: 10,
        page_token: "abc".into(),
    });
    assert_eq!(
        (l.job_id.as_deref(), l.page_size, l.page_token.as_deref()),
        (Some("j"), 10, Some("abc"))
    );

    let h = round_trip(&proto::HandshakeRequest {
        header: header(),
        client_name: "bench".into(),
    });
    assert_eq!(h.client_name.as_deref(), Some("bench"));
}

fn sample_reservation() -> ValidatedReservation {
    let flow = |id: &str, status, accepted, labels: Vec<u32>| FlowReservation {
        flow_id: id.into(),
        source_address: Ipv4Addr::new(10, 0, 1, 1),
        destination_address: Ipv4Addr::new(10, 0, 2, 1),
        source_rank: Some(0),
        destination_rank: Some(1),
        dest_qp: Some(0x100),
        status,
        reason: if status == ReservationStatus::Admitted {
            ReasonCode::None
        } else {
            ReasonCode::InsufficientCapacity
        },
        requested_bps: 100_000_000_000,
        accepted_bps: accepted,
        start_unix_ns: 1_000,
        end_unix_ns: 3_000,
        hops: labels
            .iter()
            .enumerate()
            .map(|(i, l)| PathHop {
                node: format!("sw{i}"),
                egress_port: l - 1000,
            })
            .collect(),
        sr_label_stack: labels,
        advisory: None,
        udp_src_port: None,
    };
    ValidatedReservation {
        reservation_id: "r-7".into(),
        subject: ReservationSubject::Collective("op-1".into()),
        job_id: Some("llm-train".into()),
        status: ReservationStatus::Partial,
        reason: ReasonCode::InsufficientCapacity,
        advisory: Some("spine2 busy; 1 of 2 flows at 60%".into()),
        start_unix_ns: 1_000,
        end_unix_ns: 3_000,
        flows: vec![
            flow(
                "op-1/0",
                ReservationStatus::Admitted,
                100_000_000_000,
                vec![1002, 1001, 1004],
            ),
            flow(
                "op-1/1",
                ReservationStatus::Partial,
                60_000_000_000,
                vec![1003, 1002],
            ),
            // Held by its source port (entropy steering): hops, no labels.
            FlowReservation {
                sr_label_stack: vec![],
                udp_src_port: Some(51_234),
                hops: vec![PathHop {
                    node: "leaf1".into(),
                    egress_port: 3,
                }],
                ..flow(
                    "op-1/2",
                    ReservationStatus::Admitted,
                    100_000_000_000,
                    vec![],
                )
            },
        ],
        revision: 3,
        predicted: true,
    }
}

#[test]
fn reservation_round_trip_from_domain() {
    let domain = sample_reservation();
    let msg = proto::Reservation::from(&domain);
    assert_eq!(msg.flows[0].sr_label_stack, [1002, 1001, 1004]);
    assert_eq!(round_trip(&msg), domain);
    let page = ReservationPage {
        reservations: vec![domain.clone()],
        next_page_token: Some("next".into()),
    };
    assert_eq!(
        round_trip(&proto::ListReservationsResponse::from(&page)),
        page
    );
}

#[test]
fn watch_events_round_trip_from_domain() {
    let link = LinkId {
        from_node: "leaf1".into(),
        from_port: 3,
        to_node: "spine2".into(),
        to_port: 1,
    };
    let events = [
        ValidatedWatchEvent {
            sequence: 1,
            emitted_unix_ns: 10,
            body: WatchEventBody::Telemetry(TelemetrySnapshot {
                as_of_unix_ns: 10,
                interval_ns: 100_000_000,
                links: vec![LinkUtilization {
                    link: link.clone(),
                    capacity_bps: 100_000_000_000,
                    measured_bps: 97_000_000_000,
                    reserved_bps: 80_000_000_000,
                    peak_queue_bytes: 120_000,
                }],
                congestion_events: vec![CongestionEvent {
                    link: link.clone(),
                    kind: CongestionKind::PfcPause,
                    start_unix_ns: 9,
                    duration_ns: 0,
                    peak_queue_bytes: 200_000,
                    affected_packets: 40,
                }],
                paths: vec![PathAvailability {
                    source_address: Ipv4Addr::new(10, 0, 1, 1),
                    destination_address: Ipv4Addr::new(10, 0, 2, 1),
                    equal_cost_paths: 4,
                    available_paths: 3,
                    max_reservable_bps: 20_000_000_000,
                }],
            }),
        },
        ValidatedWatchEvent {
            sequence: 2,
            emitted_unix_ns: 11,
            body: WatchEventBody::Deviation(NetworkDeviation {
                observed_unix_ns: 11,
                affected_reservation_ids: vec!["r-7".into()],
                change: NetworkChange::LinkDown(link.clone()),
            }),
        },
        ValidatedWatchEvent {
            sequence: 3,
            emitted_unix_ns: 12,
            body: WatchEventBody::Deviation(NetworkDeviation {
                observed_unix_ns: 12,
                affected_reservation_ids: vec!["r-7".into()],
                change: NetworkChange::ReservationChanged(Box::new(sample_reservation())),
            }),
        },
        ValidatedWatchEvent {
            sequence: 4,
            emitted_unix_ns: 13,
            body: WatchEventBody::Deviation(NetworkDeviation {
                observed_unix_ns: 13,
                affected_reservation_ids: vec![],
                change: NetworkChange::ForecastMismatch(ForecastMismatch {
                    reservation_id: "r-7".into(),
                    flow_id: "op-1/1".into(),
                    expected_start_unix_ns: 1_000,
                    observed_start_unix_ns: Some(900),
                    expected_bps: 100,
                    observed_bps: 120,
                }),
            }),
        },
        ValidatedWatchEvent {
            sequence: 5,
            emitted_unix_ns: 14,
            body: WatchEventBody::Deviation(NetworkDeviation {
                observed_unix_ns: 14,
                affected_reservation_ids: vec![],
                change: NetworkChange::LinkUp(link),
            }),
        },
        ValidatedWatchEvent {
            sequence: 6,
            emitted_unix_ns: 15,
            body: WatchEventBody::Deviation(NetworkDeviation {
                observed_unix_ns: 15,
                affected_reservation_ids: vec!["r-8".into(), "r-9".into()],
                change: NetworkChange::PredictionWithdrawn {
                    job_id: "llm-train".into(),
                    reason: "no iteration by the window around 1000 ns".into(),
                },
            }),
        },
    ];
    for e in events {
        assert_eq!(round_trip(&proto::WatchEvent::from(&e)), e);
    }
}

#[test]
fn handshake_and_registration_responses_round_trip() {
    let hello = ServerHello {
        server_version: PROTOCOL_VERSION,
        server_time_unix_ns: 42,
        supported_collective_kinds: vec![
            CollectiveKind::RingAllReduce,
            CollectiveKind::KvCacheTransfer,
        ],
        max_demands_per_request: 4096,
        max_label_stack_depth: 4,
    };
    assert_eq!(round_trip(&proto::HandshakeResponse::from(&hello)), hello);
    let reg = TopologyRegistration {
        job_id: "llm-train".into(),
        registered_ranks: 16,
        generation: 2,
        warnings: vec!["10.0.9.9 is not attached to the fabric yet".into()],
    };
    assert_eq!(
        round_trip(&proto::RegisterTopologyResponse::from(&reg)),
        reg
    );
}

#[test]
fn descriptor_set_names_the_service() {
    // Binary protobuf; the package and service names appear verbatim.
    let text = String::from_utf8_lossy(ndsp::FILE_DESCRIPTOR_SET);
    assert!(text.contains("foresight.ndsp.v1"));
    assert!(text.contains("DemandSignaling"));
}
