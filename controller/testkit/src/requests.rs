//! NDSP requests as a client sends them, for tenant `acme`.

use ndsp::proto::{self, collective, demand_signal, endpoint};

/// The request header of tenant `acme` at this protocol version.
pub fn header() -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ndsp::PROTOCOL_VERSION.into()),
        tenant: "acme".into(),
    })
}

/// Register job `job` with 8 ranks (GPUs) on each of `hosts`, in order.
pub fn register(job: &str, hosts: &[&str]) -> proto::RegisterTopologyRequest {
    let ranks = 8 * hosts.len() as u32;
    proto::RegisterTopologyRequest {
        header: header(),
        topology: Some(proto::Topology {
            job_id: job.into(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: ranks,
            ranks: (0..ranks)
                .map(|r| proto::RankEndpoint {
                    rank: r,
                    device_id: format!("GPU-{}", r % 8),
                    host_address: hosts[(r / 8) as usize].into(),
                    nic: "mlx5_0".into(),
                    qp_range: None,
                })
                .collect(),
            library: proto::CollectiveLibrary::Nccl as i32,
            library_version: "2.21.5".into(),
            algorithms: vec![proto::CollectiveAlgorithm::Ring as i32],
        }),
    }
}

/// A 64 MiB ring all-reduce over ranks `0..ranks` of `job`.
pub fn ring_allreduce(
    id: &str,
    job: &str,
    ranks: u32,
    channels: u32,
    start_offset_ns: u64,
    duration_ns: u64,
) -> proto::SubmitCollectiveRequest {
    proto::SubmitCollectiveRequest {
        header: header(),
        reference_unix_ns: 0,
        collective: Some(proto::Collective {
            collective_id: id.into(),
            job_id: job.into(),
            kind: proto::CollectiveKind::RingAllReduce as i32,
            ranks: (0..ranks).collect(),
            peer_ranks: vec![],
            size_bytes: 64 << 20,
            channels,
            start: Some(collective::Start::StartOffsetNs(start_offset_ns)),
            pacing: Some(collective::Pacing::DurationNs(duration_ns)),
            priority: proto::PriorityClass::IterationBlocking as i32,
            elasticity: proto::Elasticity::Inelastic as i32,
            deadline: None,
            recurrence: None,
        }),
    }
}

/// A host-to-host demand of `rate_bps` for `duration_ns` from
/// `start_offset_ns`, optionally to one destination queue pair.
pub fn demand(
    id: &str,
    src: &str,
    dst: &str,
    start_offset_ns: u64,
    duration_ns: u64,
    rate_bps: u64,
    qp: Option<u32>,
) -> proto::DemandSignal {
    let host = |a: &str| {
        Some(proto::Endpoint {
            address: Some(endpoint::Address::HostAddress(a.into())),
        })
    };
    proto::DemandSignal {
        demand_id: id.into(),
        job_id: String::new(),
        source: host(src),
        destination: host(dst),
        start: Some(demand_signal::Start::StartOffsetNs(start_offset_ns)),
        size_bytes: (rate_bps as u128 * duration_ns as u128 / 8_000_000_000) as u64,
        pacing: Some(demand_signal::Pacing::DurationNs(duration_ns)),
        priority: proto::PriorityClass::Standard as i32,
        elasticity: proto::Elasticity::Inelastic as i32,
        deadline: None,
        dest_qp: qp,
        recurrence: None,
        dest_qp_choices: None,
    }
}

#[cfg(test)]
mod tests {
    use ndsp::Validate;

    use super::*;

    /// The builders make requests the protocol accepts.
    #[test]
    fn requests_validate() {
        register("job", &["10.0.1.1", "10.0.2.1"])
            .validate()
            .unwrap();
        let submit = proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 1,
            demands: vec![demand(
                "d",
                "10.0.1.1",
                "10.0.2.1",
                0,
                1_000_000,
                1_000_000_000,
                Some(7),
            )],
        };
        submit.validate().unwrap();
        ring_allreduce("c", "job", 16, 4, 0, 1_000_000)
            .validate()
            .unwrap();
    }

    #[test]
    fn demand_size_is_rate_times_duration() {
        // 8 Gbit/s for 1 ms is 1 MB.
        let d = demand("d", "h1", "h2", 0, 1_000_000, 8_000_000_000, None);
        assert_eq!(d.size_bytes, 1_000_000);
    }
}
