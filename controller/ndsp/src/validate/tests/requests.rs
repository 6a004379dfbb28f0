//! One test per validation rule: each starts from a valid message, breaks
//! one thing, and expects the error to name that field. Removing the rule
//! makes the mutated message validate, which fails the test.

use super::*;

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

/// QP choices are a valid range, and never beside a given QP.
#[test]
fn dest_qp_choices_are_a_range_and_not_with_dest_qp() {
    let choices = |first_qp, count| Some(proto::QpRange { first_qp, count });
    rejects(
        &demands(),
        with_demand(|d| {
            d.dest_qp = None;
            d.dest_qp_choices = choices(0x100, 0);
        }),
        "demands[1].dest_qp_choices.count",
        "at least 1",
    );
    rejects(
        &demands(),
        with_demand(|d| {
            d.dest_qp = None;
            d.dest_qp_choices = choices(QP_MAX, 2);
        }),
        "demands[1].dest_qp_choices.count",
        "beyond 24 bits",
    );
    rejects(
        &demands(),
        with_demand(|d| d.dest_qp_choices = choices(0x200, 16)),
        "demands[1].dest_qp_choices",
        "not with dest_qp",
    );
    let mut r = demands();
    r.demands[1].dest_qp = None;
    r.demands[1].dest_qp_choices = choices(0x200, 16);
    let v = accepts(&r);
    assert_eq!(
        v.demands[1].dest_qp_choices,
        Some(QpRange {
            first_qp: 0x200,
            count: 16
        })
    );
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
fn ascending_collective_ranks_are_bounded_too() {
    rejects(
        &ring(),
        with_collective(|c| c.ranks = vec![0, 1, 2, u32::MAX]),
        "collective.ranks[3]",
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
