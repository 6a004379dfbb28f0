//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use std::fmt::Debug;
use std::net::Ipv4Addr;

use super::*;
use crate::limits::*;
use crate::types::*;

use crate::proto::{self, cancel_request, collective, demand_signal, endpoint, reservation};

mod fields;
mod path;
mod registered;
mod requests;
mod responses;

// ---------------------------------------------------------------------------
// Valid base messages
// ---------------------------------------------------------------------------

const MS: u64 = 1_000_000;

fn header() -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(proto::ProtocolVersion { major: 1, minor: 0 }),
        tenant: "acme".into(),
    })
}

fn rank_endpoint(rank: u32, host: &str, nic: &str, first_qp: u32) -> proto::RankEndpoint {
    proto::RankEndpoint {
        rank,
        device_id: format!("GPU-{rank}"),
        host_address: host.into(),
        nic: nic.into(),
        qp_range: Some(proto::QpRange {
            first_qp,
            count: 64,
        }),
    }
}

fn topology() -> proto::RegisterTopologyRequest {
    proto::RegisterTopologyRequest {
        header: header(),
        topology: Some(proto::Topology {
            job_id: "llm-train".into(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: 4,
            ranks: vec![
                rank_endpoint(0, "10.0.1.1", "mlx5_0", 0x100),
                rank_endpoint(1, "10.0.1.1", "mlx5_0", 0x200),
                rank_endpoint(2, "10.0.2.1", "mlx5_0", 0x100),
                rank_endpoint(3, "10.0.2.1", "mlx5_1", 0x100),
            ],
            library: proto::CollectiveLibrary::Nccl as i32,
            library_version: "2.21.5".into(),
            algorithms: vec![
                proto::CollectiveAlgorithm::Ring as i32,
                proto::CollectiveAlgorithm::Tree as i32,
            ],
        }),
    }
}

fn rank(r: u32) -> Option<proto::Endpoint> {
    Some(proto::Endpoint {
        address: Some(endpoint::Address::Rank(r)),
    })
}

fn host(a: &str) -> Option<proto::Endpoint> {
    Some(proto::Endpoint {
        address: Some(endpoint::Address::HostAddress(a.into())),
    })
}

fn demand(id: &str) -> proto::DemandSignal {
    proto::DemandSignal {
        demand_id: id.into(),
        job_id: "llm-train".into(),
        source: rank(0),
        destination: rank(2),
        start: Some(demand_signal::Start::StartOffsetNs(5 * MS)),
        size_bytes: 64 << 20,
        pacing: Some(demand_signal::Pacing::DurationNs(10 * MS)),
        priority: proto::PriorityClass::IterationBlocking as i32,
        elasticity: proto::Elasticity::Inelastic as i32,
        deadline: Some(demand_signal::Deadline::DeadlineOffsetNs(20 * MS)),
        dest_qp: Some(0x100),
        recurrence: Some(proto::Recurrence {
            period_ns: 100 * MS,
            occurrences: 10,
        }),
        dest_qp_choices: None,
    }
}

fn demands() -> proto::SubmitDemandRequest {
    proto::SubmitDemandRequest {
        header: header(),
        reference_unix_ns: 1_700_000_000_000_000_000,
        demands: vec![demand("d0"), demand("d1")],
    }
}

fn with_demand(
    f: impl FnOnce(&mut proto::DemandSignal),
) -> impl FnOnce(&mut proto::SubmitDemandRequest) {
    move |r| f(&mut r.demands[1])
}

fn ring() -> proto::SubmitCollectiveRequest {
    proto::SubmitCollectiveRequest {
        header: header(),
        reference_unix_ns: 0,
        collective: Some(proto::Collective {
            collective_id: "step-17-grads".into(),
            job_id: "llm-train".into(),
            kind: proto::CollectiveKind::RingAllReduce as i32,
            ranks: vec![0, 1, 2, 3],
            peer_ranks: vec![],
            size_bytes: 1 << 30,
            channels: 2,
            start: Some(collective::Start::StartOffsetNs(MS)),
            pacing: Some(collective::Pacing::DurationNs(50 * MS)),
            priority: proto::PriorityClass::IterationBlocking as i32,
            elasticity: proto::Elasticity::Inelastic as i32,
            deadline: Some(collective::Deadline::DeadlineOffsetNs(60 * MS)),
            recurrence: Some(proto::Recurrence {
                period_ns: 200 * MS,
                occurrences: 100,
            }),
        }),
    }
}

fn kv() -> proto::SubmitCollectiveRequest {
    let mut r = ring();
    let c = r.collective.as_mut().unwrap();
    c.collective_id = "req-9-kv".into();
    c.kind = proto::CollectiveKind::KvCacheTransfer as i32;
    c.ranks = vec![0, 1];
    c.peer_ranks = vec![2, 3];
    c.priority = proto::PriorityClass::LatencyCritical as i32;
    c.recurrence = None;
    r
}

fn with_collective(
    f: impl FnOnce(&mut proto::Collective),
) -> impl FnOnce(&mut proto::SubmitCollectiveRequest) {
    move |r| f(r.collective.as_mut().unwrap())
}

fn admitted_flow() -> proto::FlowReservation {
    proto::FlowReservation {
        flow_id: "d0".into(),
        source_address: "10.0.1.1".into(),
        destination_address: "10.0.2.1".into(),
        source_rank: Some(0),
        destination_rank: Some(2),
        dest_qp: Some(0x100),
        status: proto::ReservationStatus::Admitted as i32,
        reason: proto::ReasonCode::Unspecified as i32,
        requested_bps: 100_000_000_000,
        accepted_bps: 100_000_000_000,
        start_unix_ns: 1_000,
        end_unix_ns: 2_000,
        sr_label_stack: vec![1002, 1001, 1003],
        hops: vec![
            proto::PathHop {
                node: "leaf1".into(),
                egress_port: 2,
            },
            proto::PathHop {
                node: "spine1".into(),
                egress_port: 1,
            },
            proto::PathHop {
                node: "leaf2".into(),
                egress_port: 3,
            },
        ],
        advisory: String::new(),
        udp_src_port: None,
    }
}

fn admitted() -> proto::Reservation {
    proto::Reservation {
        reservation_id: "r-1".into(),
        subject: Some(reservation::Subject::DemandId("d0".into())),
        job_id: "llm-train".into(),
        status: proto::ReservationStatus::Admitted as i32,
        reason: proto::ReasonCode::Unspecified as i32,
        advisory: String::new(),
        start_unix_ns: 1_000,
        end_unix_ns: 2_000,
        flows: vec![admitted_flow()],
        revision: 1,
        predicted: false,
    }
}

fn partial() -> proto::Reservation {
    let mut r = admitted();
    r.status = proto::ReservationStatus::Partial as i32;
    r.reason = proto::ReasonCode::InsufficientCapacity as i32;
    r.advisory = "spine1-leaf2 carries another reservation; 60 of 100 Gbit/s reserved".into();
    r.end_unix_ns = 3_000;
    let f = &mut r.flows[0];
    f.status = proto::ReservationStatus::Partial as i32;
    f.reason = proto::ReasonCode::InsufficientCapacity as i32;
    f.accepted_bps = 60_000_000_000;
    f.end_unix_ns = 3_000;
    r
}

fn fallback() -> proto::Reservation {
    let mut r = admitted();
    r.status = proto::ReservationStatus::FallbackEcmp as i32;
    r.reason = proto::ReasonCode::NoPath as i32;
    r.advisory = "no steerable path; ECMP with DCQCN".into();
    let f = &mut r.flows[0];
    f.status = proto::ReservationStatus::FallbackEcmp as i32;
    f.reason = proto::ReasonCode::NoPath as i32;
    f.accepted_bps = 0;
    f.sr_label_stack.clear();
    f.hops.clear();
    r
}

fn with_flow(f: impl FnOnce(&mut proto::FlowReservation)) -> impl FnOnce(&mut proto::Reservation) {
    move |r| f(&mut r.flows[0])
}

fn link(from: &str, to: &str) -> Option<proto::LinkId> {
    Some(proto::LinkId {
        from_node: from.into(),
        from_port: 1,
        to_node: to.into(),
        to_port: 3,
    })
}

fn telemetry_event() -> proto::WatchEvent {
    proto::WatchEvent {
        sequence: 1,
        emitted_unix_ns: 5_000,
        event: Some(proto::watch_event::Event::Telemetry(
            proto::TelemetrySnapshot {
                as_of_unix_ns: 5_000,
                interval_ns: 100 * MS,
                links: vec![proto::LinkUtilization {
                    link: link("leaf1", "spine1"),
                    capacity_bps: 100_000_000_000,
                    measured_bps: 40_000_000_000,
                    reserved_bps: 60_000_000_000,
                    peak_queue_bytes: 30_000,
                }],
                congestion_events: vec![proto::CongestionEvent {
                    link: link("spine1", "leaf2"),
                    kind: proto::CongestionKind::EcnMarking as i32,
                    start_unix_ns: 4_000,
                    duration_ns: 200,
                    peak_queue_bytes: 90_000,
                    affected_packets: 17,
                }],
                paths: vec![proto::PathAvailability {
                    source_address: "10.0.1.1".into(),
                    destination_address: "10.0.2.1".into(),
                    equal_cost_paths: 4,
                    available_paths: 3,
                    max_reservable_bps: 40_000_000_000,
                }],
            },
        )),
    }
}

fn deviation_event(kind: proto::network_deviation::Kind) -> proto::WatchEvent {
    proto::WatchEvent {
        sequence: 2,
        emitted_unix_ns: 6_000,
        event: Some(proto::watch_event::Event::Deviation(
            proto::NetworkDeviation {
                observed_unix_ns: 5_900,
                affected_reservation_ids: vec!["r-1".into()],
                kind: Some(kind),
            },
        )),
    }
}

fn link_down_event() -> proto::WatchEvent {
    deviation_event(proto::network_deviation::Kind::LinkDown(
        proto::LinkStateChange {
            link: link("spine1", "leaf2"),
        },
    ))
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

#[track_caller]
fn accepts<M: Validate>(m: &M) -> M::Output
where
    M::Output: Debug,
{
    match m.validate() {
        Ok(v) => v,
        Err(e) => panic!("rejected a valid message: {e}"),
    }
}

/// Breaks `base` with `mutate` and expects an error on `field` whose
/// reason contains `reason`.
#[track_caller]
fn rejects<M: Validate + Clone>(base: &M, mutate: impl FnOnce(&mut M), field: &str, reason: &str)
where
    M::Output: Debug,
{
    let mut m = base.clone();
    mutate(&mut m);
    match m.validate() {
        Ok(v) => panic!("accepted; expected `{field}: ...{reason}...`; got {v:?}"),
        Err(e) => {
            assert_eq!(e.field, field, "wrong field in `{e}`");
            assert!(
                e.reason.contains(reason),
                "reason of `{e}` lacks {reason:?}"
            );
        }
    }
}

#[test]
fn base_messages_are_valid() {
    accepts(&topology());
    accepts(&demands());
    accepts(&ring());
    accepts(&kv());
    accepts(&admitted());
    accepts(&partial());
    accepts(&fallback());
    accepts(&telemetry_event());
    accepts(&link_down_event());
}

// ---------------------------------------------------------------------------
// Error model
// ---------------------------------------------------------------------------

#[test]
fn error_becomes_invalid_argument_naming_the_field() {
    let mut r = demands();
    r.demands[1].size_bytes = 0;
    let status: tonic::Status = r.validate().unwrap_err().into();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "demands[1].size_bytes: must be greater than 0"
    );
    assert_eq!(
        status.metadata().get(FIELD_METADATA_KEY).unwrap(),
        "demands[1].size_bytes"
    );
}
