//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use std::fmt::Debug;

use super::*;
use crate::proto::{self, cancel_request, collective, demand_signal, endpoint, reservation};

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
// Header and version
// ---------------------------------------------------------------------------

#[test]
fn header_is_required() {
    rejects(&demands(), |r| r.header = None, "header", "is required");
}

#[test]
fn protocol_version_is_required() {
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().protocol_version = None,
        "header.protocol_version",
        "is required",
    );
}

#[test]
fn other_major_version_is_rejected() {
    rejects(
        &demands(),
        |r| {
            r.header.as_mut().unwrap().protocol_version =
                Some(proto::ProtocolVersion { major: 2, minor: 0 })
        },
        "header.protocol_version.major",
        "unsupported protocol version 2.0",
    );
    rejects(
        &topology(),
        |r| r.header.as_mut().unwrap().protocol_version = Some(proto::ProtocolVersion::default()),
        "header.protocol_version.major",
        "unsupported protocol version 0.0",
    );
}

#[test]
fn newer_minor_version_is_accepted() {
    let mut r = demands();
    r.header.as_mut().unwrap().protocol_version =
        Some(proto::ProtocolVersion { major: 1, minor: 7 });
    let v = accepts(&r);
    assert_eq!(v.ctx.client_version, Version { major: 1, minor: 7 });
}

#[test]
fn version_is_checked_before_other_fields() {
    // A request from another major is reported as such, not as whatever
    // else that major may lay out differently.
    rejects(
        &demands(),
        |r| {
            r.header.as_mut().unwrap().protocol_version =
                Some(proto::ProtocolVersion { major: 3, minor: 0 });
            r.demands.clear();
        },
        "header.protocol_version.major",
        "major versions must match",
    );
}

#[test]
fn tenant_is_required_and_has_identifier_syntax() {
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant.clear(),
        "header.tenant",
        "is required",
    );
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant = "acme corp".into(),
        "header.tenant",
        "contains ' '",
    );
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant = "a/b".into(),
        "header.tenant",
        "contains '/'",
    );
    rejects(
        &demands(),
        |r| r.header.as_mut().unwrap().tenant = "t".repeat(MAX_ID_LEN + 1),
        "header.tenant",
        "at most 128",
    );
}

// ---------------------------------------------------------------------------
// Topology
// ---------------------------------------------------------------------------

fn with_topology(
    f: impl FnOnce(&mut proto::Topology),
) -> impl FnOnce(&mut proto::RegisterTopologyRequest) {
    move |r| f(r.topology.as_mut().unwrap())
}

#[test]
fn topology_is_required() {
    rejects(
        &topology(),
        |r| r.topology = None,
        "topology",
        "is required",
    );
}

#[test]
fn topology_job_id_is_required() {
    rejects(
        &topology(),
        with_topology(|t| t.job_id.clear()),
        "topology.job_id",
        "is required",
    );
}

#[test]
fn workload_kind_must_be_specified_and_known() {
    rejects(
        &topology(),
        with_topology(|t| t.workload_kind = 0),
        "topology.workload_kind",
        "WORKLOAD_KIND_UNSPECIFIED",
    );
    rejects(
        &topology(),
        with_topology(|t| t.workload_kind = 42),
        "topology.workload_kind",
        "unknown WorkloadKind value 42",
    );
}

#[test]
fn world_size_must_be_in_range() {
    rejects(
        &topology(),
        with_topology(|t| t.world_size = 0),
        "topology.world_size",
        "outside 1 to",
    );
    rejects(
        &topology(),
        with_topology(|t| t.world_size = MAX_WORLD_SIZE + 1),
        "topology.world_size",
        "outside 1 to",
    );
}

#[test]
fn library_must_be_specified() {
    rejects(
        &topology(),
        with_topology(|t| t.library = 0),
        "topology.library",
        "is required",
    );
}

#[test]
fn library_version_is_bounded_text() {
    rejects(
        &topology(),
        with_topology(|t| t.library_version = "x".repeat(MAX_LIBRARY_VERSION_LEN + 1)),
        "topology.library_version",
        "at most 64",
    );
    rejects(
        &topology(),
        with_topology(|t| t.library_version = "2.21\n".into()),
        "topology.library_version",
        "control character",
    );
}

#[test]
fn algorithms_must_be_specified_and_distinct() {
    rejects(
        &topology(),
        with_topology(|t| t.algorithms.push(0)),
        "topology.algorithms[2]",
        "is required",
    );
    rejects(
        &topology(),
        with_topology(|t| t.algorithms.push(proto::CollectiveAlgorithm::Ring as i32)),
        "topology.algorithms[2]",
        "duplicate algorithm COLLECTIVE_ALGORITHM_RING (also at algorithms[0])",
    );
}

#[test]
fn ranks_are_required() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks.clear()),
        "topology.ranks",
        "at least one rank",
    );
}

#[test]
fn rank_must_be_below_world_size() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[3].rank = 4),
        "topology.ranks[3].rank",
        "rank 4 is not below world_size 4",
    );
}

#[test]
fn duplicate_rank_is_rejected() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[3].rank = 1),
        "topology.ranks[3].rank",
        "duplicate rank 1 (also at ranks[1])",
    );
}

#[test]
fn host_address_must_be_ipv4() {
    let mut r = topology();
    r.topology.as_mut().unwrap().ranks[3].host_address = "10.0.0.300".into();
    let e = r.validate().unwrap_err();
    assert_eq!(
        e.to_string(),
        "topology.ranks[3].host_address: \"10.0.0.300\" is not an IPv4 address"
    );
    for bad in ["", "fe80::1", "10.0.0", "10.0.0.1/24", " 10.0.0.1"] {
        rejects(
            &topology(),
            with_topology(|t| t.ranks[0].host_address = bad.into()),
            "topology.ranks[0].host_address",
            "",
        );
    }
}

#[test]
fn host_address_must_be_unicast() {
    for (bad, what) in [
        ("0.0.0.0", "unspecified"),
        ("255.255.255.255", "broadcast"),
        ("239.1.1.1", "multicast"),
        ("127.0.0.1", "loopback"),
    ] {
        rejects(
            &topology(),
            with_topology(|t| t.ranks[2].host_address = bad.into()),
            "topology.ranks[2].host_address",
            what,
        );
    }
}

#[test]
fn nic_name_has_no_whitespace_or_slash_and_is_bounded() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[0].nic = "mlx5 0".into()),
        "topology.ranks[0].nic",
        "' '",
    );
    rejects(
        &topology(),
        with_topology(|t| t.ranks[0].nic = "a/b".into()),
        "topology.ranks[0].nic",
        "'/'",
    );
    rejects(
        &topology(),
        with_topology(|t| t.ranks[0].nic = "n".repeat(MAX_NIC_LEN + 1)),
        "topology.ranks[0].nic",
        "at most 64",
    );
}

#[test]
fn device_id_is_bounded_text() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[1].device_id = "GPU\u{7}".into()),
        "topology.ranks[1].device_id",
        "control character",
    );
}

#[test]
fn qp_range_first_must_not_be_special() {
    for first in [0, 1] {
        rejects(
            &topology(),
            with_topology(|t| t.ranks[0].qp_range.as_mut().unwrap().first_qp = first),
            "topology.ranks[0].qp_range.first_qp",
            "is special",
        );
    }
}

#[test]
fn qp_range_must_fit_in_24_bits() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[0].qp_range.as_mut().unwrap().first_qp = 1 << 24),
        "topology.ranks[0].qp_range.first_qp",
        "24 bits",
    );
    rejects(
        &topology(),
        with_topology(|t| {
            t.ranks[0].qp_range = Some(proto::QpRange {
                first_qp: QP_MAX - 10,
                count: 12,
            })
        }),
        "topology.ranks[0].qp_range.count",
        "beyond 24 bits",
    );
    // Exactly up to the last QP is fine.
    let mut r = topology();
    r.topology.as_mut().unwrap().ranks[0].qp_range = Some(proto::QpRange {
        first_qp: QP_MAX - 10,
        count: 11,
    });
    accepts(&r);
}

#[test]
fn qp_range_count_must_be_positive() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[0].qp_range.as_mut().unwrap().count = 0),
        "topology.ranks[0].qp_range.count",
        "at least 1",
    );
}

#[test]
fn qp_ranges_on_one_nic_must_not_overlap() {
    rejects(
        &topology(),
        with_topology(|t| t.ranks[1].qp_range.as_mut().unwrap().first_qp = 0x13f),
        "topology.ranks[1].qp_range",
        "overlap those of rank 0 (ranks[0])",
    );
    // Ranks 2 and 3 share a host and QP numbers but use different NICs.
    let t = accepts(&topology());
    assert_eq!(t.ranks[2].qp_range, t.ranks[3].qp_range);
}

#[test]
fn topology_ranks_come_out_sorted() {
    let mut r = topology();
    r.topology.as_mut().unwrap().ranks.reverse();
    let t = accepts(&r);
    assert_eq!(
        t.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(
        t.endpoint(2).unwrap().host_address,
        Ipv4Addr::new(10, 0, 2, 1)
    );
    assert!(t.endpoint(7).is_none());
}

// ---------------------------------------------------------------------------
// Demands
// ---------------------------------------------------------------------------

#[test]
fn demands_must_be_present_and_bounded() {
    rejects(&demands(), |r| r.demands.clear(), "demands", "at least one");
    rejects(
        &demands(),
        |r| {
            r.demands = (0..=MAX_DEMANDS_PER_REQUEST)
                .map(|i| demand(&format!("d{i}")))
                .collect()
        },
        "demands",
        "at most 4096",
    );
}

#[test]
fn demand_id_is_required_and_unique() {
    rejects(
        &demands(),
        with_demand(|d| d.demand_id.clear()),
        "demands[1].demand_id",
        "is required",
    );
    rejects(
        &demands(),
        with_demand(|d| d.demand_id = "d0".into()),
        "demands[1].demand_id",
        "duplicate demand id \"d0\" (also at demands[0])",
    );
}

#[test]
fn demand_job_id_is_required_for_rank_endpoints() {
    rejects(
        &demands(),
        with_demand(|d| d.job_id.clear()),
        "demands[1].job_id",
        "required when an endpoint is a rank",
    );
    // Host-to-host needs no job.
    let mut r = demands();
    let d = &mut r.demands[1];
    d.job_id.clear();
    d.source = host("10.0.1.1");
    d.destination = host("10.0.9.9");
    let v = accepts(&r);
    assert_eq!(v.demands[1].job_id, None);
}

#[test]
fn demand_job_id_has_identifier_syntax() {
    rejects(
        &demands(),
        with_demand(|d| d.job_id = "llm train".into()),
        "demands[1].job_id",
        "contains ' '",
    );
}

#[test]
fn endpoints_are_required() {
    rejects(
        &demands(),
        with_demand(|d| d.source = None),
        "demands[1].source",
        "is required",
    );
    rejects(
        &demands(),
        with_demand(|d| d.destination = Some(proto::Endpoint { address: None })),
        "demands[1].destination",
        "set rank or host_address",
    );
}

#[test]
fn endpoint_host_address_must_be_ipv4() {
    rejects(
        &demands(),
        with_demand(|d| d.destination = host("10.0.0.300")),
        "demands[1].destination.host_address",
        "is not an IPv4 address",
    );
}

#[test]
fn endpoint_rank_is_bounded() {
    rejects(
        &demands(),
        with_demand(|d| d.source = rank(MAX_WORLD_SIZE)),
        "demands[1].source.rank",
        "largest world size",
    );
}

#[test]
fn source_and_destination_differ() {
    rejects(
        &demands(),
        with_demand(|d| d.destination = rank(0)),
        "demands[1].destination",
        "same as the source",
    );
    rejects(
        &demands(),
        with_demand(|d| {
            d.source = host("10.0.1.1");
            d.destination = host("10.0.1.1");
        }),
        "demands[1].destination",
        "same as the source",
    );
}

#[test]
fn start_is_required() {
    rejects(
        &demands(),
        with_demand(|d| d.start = None),
        "demands[1].start",
        "start_offset_ns or start_unix_ns",
    );
}

#[test]
fn start_offset_is_within_horizon() {
    rejects(
        &demands(),
        with_demand(|d| d.start = Some(demand_signal::Start::StartOffsetNs(MAX_HORIZON_NS + 1))),
        "demands[1].start_offset_ns",
        "24 h horizon",
    );
    // Zero means "at the reference time" and is fine.
    let mut r = demands();
    r.demands[1].start = Some(demand_signal::Start::StartOffsetNs(0));
    accepts(&r);
}

#[test]
fn start_unix_must_be_positive() {
    rejects(
        &demands(),
        with_demand(|d| {
            d.start = Some(demand_signal::Start::StartUnixNs(0));
            d.deadline = None;
        }),
        "demands[1].start_unix_ns",
        "greater than 0",
    );
}

#[test]
fn size_must_be_positive() {
    rejects(
        &demands(),
        with_demand(|d| d.size_bytes = 0),
        "demands[1].size_bytes",
        "greater than 0",
    );
}

#[test]
fn pacing_is_required() {
    rejects(
        &demands(),
        with_demand(|d| d.pacing = None),
        "demands[1].pacing",
        "duration_ns or rate_bps",
    );
}

#[test]
fn duration_must_be_positive_and_bounded() {
    rejects(
        &demands(),
        with_demand(|d| d.pacing = Some(demand_signal::Pacing::DurationNs(0))),
        "demands[1].duration_ns",
        "greater than 0",
    );
    rejects(
        &demands(),
        with_demand(|d| {
            d.pacing = Some(demand_signal::Pacing::DurationNs(MAX_HORIZON_NS + 1));
            d.deadline = None;
            d.recurrence = None;
        }),
        "demands[1].duration_ns",
        "24 h limit",
    );
}

#[test]
fn duration_must_not_imply_an_absurd_rate() {
    // 64 MiB in 1 us is about 537 Tbit/s.
    rejects(
        &demands(),
        with_demand(|d| d.pacing = Some(demand_signal::Pacing::DurationNs(1_000))),
        "demands[1].duration_ns",
        "implies",
    );
}

#[test]
fn rate_must_be_positive_and_bounded() {
    rejects(
        &demands(),
        with_demand(|d| d.pacing = Some(demand_signal::Pacing::RateBps(0))),
        "demands[1].rate_bps",
        "greater than 0",
    );
    rejects(
        &demands(),
        with_demand(|d| d.pacing = Some(demand_signal::Pacing::RateBps(MAX_RATE_BPS + 1))),
        "demands[1].rate_bps",
        "10 Tbit/s",
    );
}

#[test]
fn rate_must_not_imply_a_duration_beyond_horizon() {
    rejects(
        &demands(),
        with_demand(|d| {
            d.pacing = Some(demand_signal::Pacing::RateBps(1));
            d.deadline = None;
            d.recurrence = None;
        }),
        "demands[1].rate_bps",
        "24 h limit",
    );
}

#[test]
fn priority_must_be_specified_and_known() {
    rejects(
        &demands(),
        with_demand(|d| d.priority = 0),
        "demands[1].priority",
        "PRIORITY_CLASS_UNSPECIFIED",
    );
    rejects(
        &demands(),
        with_demand(|d| d.priority = 9),
        "demands[1].priority",
        "unknown PriorityClass value 9",
    );
}

#[test]
fn elasticity_must_be_specified() {
    rejects(
        &demands(),
        with_demand(|d| d.elasticity = 0),
        "demands[1].elasticity",
        "ELASTICITY_UNSPECIFIED",
    );
}

#[test]
fn deadline_uses_the_start_time_base() {
    rejects(
        &demands(),
        with_demand(|d| {
            d.deadline = Some(demand_signal::Deadline::DeadlineUnixNs(
                1_800_000_000_000_000_000,
            ))
        }),
        "demands[1].deadline_unix_ns",
        "give the deadline as deadline_offset_ns too",
    );
}

#[test]
fn deadline_before_start_is_rejected() {
    rejects(
        &demands(),
        with_demand(|d| d.deadline = Some(demand_signal::Deadline::DeadlineOffsetNs(4 * MS))),
        "demands[1].deadline_offset_ns",
        "not after the start",
    );
    rejects(
        &demands(),
        with_demand(|d| d.deadline = Some(demand_signal::Deadline::DeadlineOffsetNs(5 * MS))),
        "demands[1].deadline_offset_ns",
        "not after the start",
    );
}

#[test]
fn deadline_before_end_is_rejected() {
    // Starts at 5 ms, lasts 10 ms: ends at 15 ms.
    rejects(
        &demands(),
        with_demand(|d| d.deadline = Some(demand_signal::Deadline::DeadlineOffsetNs(15 * MS - 1))),
        "demands[1].deadline_offset_ns",
        "before the end 15000000 ns",
    );
    let mut r = demands();
    r.demands[1].deadline = Some(demand_signal::Deadline::DeadlineOffsetNs(15 * MS));
    accepts(&r);
    // With a rate, the end is derived: 64 MiB at 100 Gbit/s takes ~5.4 ms.
    rejects(
        &demands(),
        with_demand(|d| {
            d.pacing = Some(demand_signal::Pacing::RateBps(100_000_000_000));
            d.deadline = Some(demand_signal::Deadline::DeadlineOffsetNs(10 * MS));
        }),
        "demands[1].deadline_offset_ns",
        "before the end",
    );
}

#[test]
fn dest_qp_must_be_24_bit_and_not_special() {
    rejects(
        &demands(),
        with_demand(|d| d.dest_qp = Some(1 << 24)),
        "demands[1].dest_qp",
        "does not fit in 24 bits",
    );
    rejects(
        &demands(),
        with_demand(|d| d.dest_qp = Some(1)),
        "demands[1].dest_qp",
        "is special",
    );
    let mut r = demands();
    r.demands[1].dest_qp = Some(QP_MAX);
    accepts(&r);
}

#[test]
fn recurrence_period_and_count_are_checked() {
    rejects(
        &demands(),
        with_demand(|d| d.recurrence.as_mut().unwrap().period_ns = 0),
        "demands[1].recurrence.period_ns",
        "greater than 0",
    );
    rejects(
        &demands(),
        with_demand(|d| d.recurrence.as_mut().unwrap().occurrences = 0),
        "demands[1].recurrence.occurrences",
        "outside 1 to",
    );
    rejects(
        &demands(),
        with_demand(|d| d.recurrence.as_mut().unwrap().occurrences = MAX_OCCURRENCES + 1),
        "demands[1].recurrence.occurrences",
        "outside 1 to",
    );
}

#[test]
fn recurrence_period_must_cover_one_occurrence() {
    rejects(
        &demands(),
        with_demand(|d| d.recurrence.as_mut().unwrap().period_ns = 10 * MS - 1),
        "demands[1].recurrence.period_ns",
        "would overlap",
    );
}

#[test]
fn recurrence_must_not_overflow_time() {
    rejects(
        &demands(),
        with_demand(|d| {
            d.start = Some(demand_signal::Start::StartUnixNs(u64::MAX - 1_000 * MS));
            d.deadline = None;
            d.recurrence = Some(proto::Recurrence {
                period_ns: 1_000 * MS,
                occurrences: 3,
            });
        }),
        "demands[1].recurrence.occurrences",
        "largest representable time",
    );
}

#[test]
fn demand_fields_are_preserved() {
    let v = accepts(&demands());
    assert_eq!(v.reference_unix_ns, Some(1_700_000_000_000_000_000));
    let d = &v.demands[0];
    assert_eq!(d.tenant, "acme");
    assert_eq!(d.source, Endpoint::Rank(0));
    assert_eq!(d.start, TimePoint::OffsetNs(5 * MS));
    assert_eq!(d.duration_ns(), 10 * MS);
    // 64 MiB in 10 ms = 53.687 Gbit/s, rounded up.
    assert_eq!(d.rate_bps(), 53_687_091_200);
    assert_eq!(d.end(), TimePoint::OffsetNs(15 * MS));
    assert_eq!(d.priority, Priority::IterationBlocking);
}

// ---------------------------------------------------------------------------
// Collectives
// ---------------------------------------------------------------------------

#[test]
fn collective_is_required() {
    rejects(
        &ring(),
        |r| r.collective = None,
        "collective",
        "is required",
    );
}

#[test]
fn collective_ids_are_required() {
    rejects(
        &ring(),
        with_collective(|c| c.collective_id.clear()),
        "collective.collective_id",
        "is required",
    );
    rejects(
        &ring(),
        with_collective(|c| c.job_id.clear()),
        "collective.job_id",
        "is required",
    );
}

#[test]
fn collective_kind_must_be_specified() {
    rejects(
        &ring(),
        with_collective(|c| c.kind = 0),
        "collective.kind",
        "COLLECTIVE_KIND_UNSPECIFIED",
    );
}

#[test]
fn group_collectives_need_two_ranks() {
    for kind in [
        proto::CollectiveKind::RingAllReduce,
        proto::CollectiveKind::TreeAllReduce,
        proto::CollectiveKind::AllGather,
        proto::CollectiveKind::ReduceScatter,
        proto::CollectiveKind::AllToAll,
        proto::CollectiveKind::PipelineSend,
    ] {
        rejects(
            &ring(),
            with_collective(|c| {
                c.kind = kind as i32;
                c.ranks = vec![3];
            }),
            "collective.ranks",
            "needs at least 2 ranks, got 1",
        );
    }
    rejects(
        &kv(),
        with_collective(|c| {
            c.ranks.clear();
            c.peer_ranks.clear();
        }),
        "collective.ranks",
        "needs at least 1 ranks, got 0",
    );
}

#[test]
fn duplicate_collective_rank_is_rejected() {
    rejects(
        &ring(),
        with_collective(|c| c.ranks = vec![0, 5, 1, 5]),
        "collective.ranks[3]",
        "duplicate rank 5 (also at ranks[1])",
    );
}

#[test]
fn collective_rank_is_bounded() {
    rejects(
        &ring(),
        with_collective(|c| c.ranks[0] = u32::MAX),
        "collective.ranks[0]",
        "largest world size",
    );
}

#[test]
fn peer_ranks_only_for_kv_transfer() {
    rejects(
        &ring(),
        with_collective(|c| c.peer_ranks = vec![7]),
        "collective.peer_ranks",
        "only COLLECTIVE_KIND_KV_CACHE_TRANSFER",
    );
}

#[test]
fn kv_transfer_pairs_each_prefill_rank() {
    rejects(
        &kv(),
        with_collective(|c| c.peer_ranks.pop().map(drop).unwrap()),
        "collective.peer_ranks",
        "has 1 entries but ranks has 2",
    );
}

#[test]
fn kv_transfer_decode_ranks_are_distinct_and_not_prefill() {
    rejects(
        &kv(),
        with_collective(|c| c.peer_ranks = vec![2, 1]),
        "collective.peer_ranks[1]",
        "also a prefill rank (ranks[1])",
    );
    rejects(
        &kv(),
        with_collective(|c| c.peer_ranks = vec![2, 2]),
        "collective.peer_ranks[1]",
        "duplicate rank 2 (also at peer_ranks[0])",
    );
}

#[test]
fn collective_size_is_positive_and_at_least_a_byte_per_rank() {
    rejects(
        &ring(),
        with_collective(|c| c.size_bytes = 0),
        "collective.size_bytes",
        "greater than 0",
    );
    rejects(
        &ring(),
        with_collective(|c| c.size_bytes = 3),
        "collective.size_bytes",
        "one byte per rank",
    );
    rejects(
        &kv(),
        with_collective(|c| c.size_bytes = 1),
        "collective.size_bytes",
        "one byte per prefill/decode pair",
    );
    let mut r = ring();
    r.collective.as_mut().unwrap().size_bytes = 4;
    accepts(&r);
    // A pipeline send only needs a byte.
    let mut r = ring();
    let c = r.collective.as_mut().unwrap();
    c.kind = proto::CollectiveKind::PipelineSend as i32;
    c.size_bytes = 1;
    accepts(&r);
}

#[test]
fn channels_are_bounded_and_zero_means_one() {
    rejects(
        &ring(),
        with_collective(|c| c.channels = MAX_CHANNELS + 1),
        "collective.channels",
        "at most 64",
    );
    let mut r = ring();
    r.collective.as_mut().unwrap().channels = 0;
    assert_eq!(accepts(&r).channels, 1);
}

#[test]
fn collective_start_and_pacing_are_required() {
    rejects(
        &ring(),
        with_collective(|c| c.start = None),
        "collective.start",
        "is required",
    );
    rejects(
        &ring(),
        with_collective(|c| c.pacing = None),
        "collective.pacing",
        "flow_rate_bps",
    );
}

#[test]
fn collective_pacing_values_are_checked() {
    rejects(
        &ring(),
        with_collective(|c| c.pacing = Some(collective::Pacing::FlowRateBps(0))),
        "collective.flow_rate_bps",
        "greater than 0",
    );
    rejects(
        &ring(),
        with_collective(|c| c.pacing = Some(collective::Pacing::FlowRateBps(MAX_RATE_BPS + 1))),
        "collective.flow_rate_bps",
        "10 Tbit/s",
    );
    rejects(
        &ring(),
        with_collective(|c| {
            c.pacing = Some(collective::Pacing::DurationNs(MAX_HORIZON_NS + 1));
            c.deadline = None;
            c.recurrence = None;
        }),
        "collective.duration_ns",
        "24 h limit",
    );
}

#[test]
fn collective_deadline_before_end_is_rejected() {
    rejects(
        &ring(),
        with_collective(|c| c.deadline = Some(collective::Deadline::DeadlineOffsetNs(40 * MS))),
        "collective.deadline_offset_ns",
        "before the end 51000000 ns",
    );
    rejects(
        &ring(),
        with_collective(|c| c.deadline = Some(collective::Deadline::DeadlineUnixNs(u64::MAX))),
        "collective.deadline_unix_ns",
        "give the deadline as deadline_offset_ns",
    );
}

#[test]
fn collective_recurrence_period_covers_duration() {
    rejects(
        &ring(),
        with_collective(|c| c.recurrence.as_mut().unwrap().period_ns = 10 * MS),
        "collective.recurrence.period_ns",
        "would overlap",
    );
}

// ---------------------------------------------------------------------------
// Cancel, deviations, watch, queries
// ---------------------------------------------------------------------------

fn cancel(target: cancel_request::Target) -> proto::CancelRequest {
    proto::CancelRequest {
        header: header(),
        target: Some(target),
    }
}

#[test]
fn cancel_target_is_required() {
    rejects(
        &cancel(cancel_request::Target::JobId("j".into())),
        |r| r.target = None,
        "target",
        "is required",
    );
}

#[test]
fn cancel_ids_are_checked_by_kind() {
    // Controller ids may contain '/', client ids may not.
    let v = accepts(&cancel(cancel_request::Target::ReservationId(
        "r-1/flow-3".into(),
    )));
    assert_eq!(v.target, CancelTarget::Reservation("r-1/flow-3".into()));
    rejects(
        &cancel(cancel_request::Target::DemandId("d/1".into())),
        |_| {},
        "demand_id",
        "contains '/'",
    );
    rejects(
        &cancel(cancel_request::Target::JobId(String::new())),
        |_| {},
        "job_id",
        "is required",
    );
}

fn deviation(change: proto::workload_deviation::Change) -> proto::ReportDeviationRequest {
    proto::ReportDeviationRequest {
        header: header(),
        reference_unix_ns: 0,
        deviation: Some(proto::WorkloadDeviation {
            target: Some(proto::workload_deviation::Target::CollectiveId(
                "step-17-grads".into(),
            )),
            change: Some(change),
            observed_unix_ns: 0,
        }),
    }
}

fn early(offset: u64) -> proto::workload_deviation::Change {
    proto::workload_deviation::Change::EarlyStart(proto::StartChange {
        start: Some(proto::start_change::Start::StartOffsetNs(offset)),
    })
}

#[test]
fn deviation_target_and_change_are_required() {
    rejects(
        &deviation(early(0)),
        |r| r.deviation = None,
        "deviation",
        "is required",
    );
    rejects(
        &deviation(early(0)),
        |r| r.deviation.as_mut().unwrap().target = None,
        "deviation.target",
        "demand_id or collective_id",
    );
    rejects(
        &deviation(early(0)),
        |r| r.deviation.as_mut().unwrap().change = None,
        "deviation.change",
        "early_start, late_start",
    );
}

#[test]
fn deviation_start_change_needs_a_start() {
    rejects(
        &deviation(proto::workload_deviation::Change::LateStart(
            proto::StartChange { start: None },
        )),
        |_| {},
        "deviation.late_start.start",
        "is required",
    );
    rejects(
        &deviation(early(MAX_HORIZON_NS + 1)),
        |_| {},
        "deviation.early_start.start_offset_ns",
        "horizon",
    );
    let v = accepts(&deviation(early(0)));
    assert_eq!(v.change, WorkloadChange::EarlyStart(TimePoint::OffsetNs(0)));
}

#[test]
fn deviation_size_change_must_be_positive() {
    rejects(
        &deviation(proto::workload_deviation::Change::SizeChange(
            proto::SizeChange { new_size_bytes: 0 },
        )),
        |_| {},
        "deviation.size_change.new_size_bytes",
        "greater than 0",
    );
}

#[test]
fn deviation_abort_reason_is_bounded_text() {
    rejects(
        &deviation(proto::workload_deviation::Change::Aborted(proto::Abort {
            reason: "x".repeat(MAX_TEXT_LEN + 1),
        })),
        |_| {},
        "deviation.aborted.reason",
        "at most 1024",
    );
}

fn watch() -> proto::WatchEventsRequest {
    proto::WatchEventsRequest {
        header: header(),
        job_ids: vec!["llm-train".into(), "kv-serve".into()],
        telemetry_interval_ns: 100 * MS,
    }
}

#[test]
fn watch_job_ids_are_distinct_identifiers() {
    rejects(
        &watch(),
        |r| r.job_ids.push("llm-train".into()),
        "job_ids[2]",
        "duplicate job id \"llm-train\" (also at job_ids[0])",
    );
    rejects(
        &watch(),
        |r| r.job_ids.push(String::new()),
        "job_ids[2]",
        "is required",
    );
}

#[test]
fn watch_telemetry_interval_is_bounded() {
    rejects(
        &watch(),
        |r| r.telemetry_interval_ns = MIN_TELEMETRY_INTERVAL_NS - 1,
        "telemetry_interval_ns",
        "10 ms",
    );
    rejects(
        &watch(),
        |r| r.telemetry_interval_ns = MAX_TELEMETRY_INTERVAL_NS + 1,
        "telemetry_interval_ns",
        "1 h",
    );
    let mut r = watch();
    r.telemetry_interval_ns = 0;
    assert_eq!(accepts(&r).telemetry_interval_ns, None);
}

#[test]
fn get_reservation_needs_an_id() {
    rejects(
        &proto::GetReservationRequest {
            header: header(),
            reservation_id: String::new(),
        },
        |_| {},
        "reservation_id",
        "is required",
    );
}

#[test]
fn list_page_size_and_token_are_checked() {
    let base = proto::ListReservationsRequest {
        header: header(),
        job_id: String::new(),
        page_size: 0,
        page_token: String::new(),
    };
    assert_eq!(accepts(&base).page_size, DEFAULT_PAGE_SIZE);
    rejects(
        &base,
        |r| r.page_size = MAX_PAGE_SIZE + 1,
        "page_size",
        "largest page",
    );
    rejects(
        &base,
        |r| r.page_token = "a\0b".into(),
        "page_token",
        "control character",
    );
    rejects(&base, |r| r.job_id = "j j".into(), "job_id", "contains ' '");
}

#[test]
fn handshake_client_name_is_bounded() {
    let base = proto::HandshakeRequest {
        header: header(),
        client_name: "nccl-ndsp-plugin 0.1".into(),
    };
    accepts(&base);
    rejects(
        &base,
        |r| r.client_name = "n".repeat(MAX_NAME_LEN + 1),
        "client_name",
        "at most 256",
    );
}

// ---------------------------------------------------------------------------
// Checks against registered topologies
// ---------------------------------------------------------------------------

#[test]
fn demand_ranks_must_be_registered() {
    let topo = accepts(&topology());
    let lookup = |job: &str| (job == "llm-train").then_some(&topo);
    accepts(&demands()).check_ranks(lookup).unwrap();

    let mut r = demands();
    r.demands[1].destination = rank(3);
    r.demands[0].job_id = "other".into();
    let e = accepts(&r).check_ranks(lookup).unwrap_err();
    assert_eq!(e.field, "demands[0].job_id");
    assert!(e.reason.contains("no registered topology"), "{e}");

    let mut r = demands();
    r.demands[1].source = rank(3);
    r.demands[1].destination = rank(9);
    let e = accepts(&r).check_ranks(lookup).unwrap_err();
    assert_eq!(
        e.to_string(),
        "demands[1].destination.rank: rank 9 is not registered in job \"llm-train\""
    );
}

#[test]
fn demand_ends_on_one_host_are_rejected() {
    let topo = accepts(&topology());
    let mut r = demands();
    r.demands[0].destination = rank(1); // same host as rank 0
    let e = accepts(&r).check_ranks(|_| Some(&topo)).unwrap_err();
    assert_eq!(e.field, "demands[0].destination");
    assert!(e.reason.contains("does not cross the fabric"), "{e}");
    let mut r = demands();
    r.demands[0].destination = host("10.0.1.1"); // rank 0's address
    let e = accepts(&r).check_ranks(|_| Some(&topo)).unwrap_err();
    assert_eq!(e.field, "demands[0].destination");
}

#[test]
fn collective_ranks_must_be_registered() {
    let topo = accepts(&topology());
    accepts(&ring()).check_ranks(&topo).unwrap();
    accepts(&kv()).check_ranks(&topo).unwrap();

    let mut r = kv();
    r.collective.as_mut().unwrap().peer_ranks = vec![2, 8];
    let e = accepts(&r).check_ranks(&topo).unwrap_err();
    assert_eq!(e.field, "collective.peer_ranks[1]");

    let mut r = ring();
    r.collective.as_mut().unwrap().job_id = "other".into();
    let e = accepts(&r).check_ranks(&topo).unwrap_err();
    assert_eq!(e.field, "collective.job_id");
}

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

#[test]
fn long_values_are_cut_short_in_errors() {
    let mut r = topology();
    r.topology.as_mut().unwrap().job_id = format!("{} x", "j".repeat(500));
    let e = r.validate().unwrap_err();
    assert!(e.reason.len() < 200, "{e}");
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
