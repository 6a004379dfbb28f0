//! NDSP requests as the engine takes them. The engine works on validated
//! domain types; what it also needs from the wire message is the
//! idempotency key (the hex of what the client sent, which an identical
//! resubmission repeats and a changed one does not), and a registration
//! as the state keeps it. Both are encodings of the protobuf message, so
//! they are made here, beside validation, and the engine never sees a
//! protobuf message. The other way round too: the registrations a state
//! recorded, decoded and validated again on reload; and an iteration
//! learning predicted, as the demand batch a client would have sent.

use ndsp::types as nt;
use ndsp::{proto, Validate};
use prost::Message;

use super::learning::PredictedDemand;
use crate::daemon::persistence::state::{from_hex, to_hex, State};

/// The idempotency key of each demand of `request`, in order.
pub fn demand_keys(request: &proto::SubmitDemandRequest) -> Vec<String> {
    request
        .demands
        .iter()
        .map(|d| to_hex(&d.encode_to_vec()))
        .collect()
}

/// The idempotency key of the collective of `request`.
pub fn collective_key(request: &proto::SubmitCollectiveRequest) -> String {
    to_hex(
        &request
            .collective
            .as_ref()
            .map(|c| c.encode_to_vec())
            .unwrap_or_default(),
    )
}

/// A registration as the state keeps it.
pub fn recorded_registration(request: &proto::RegisterTopologyRequest) -> String {
    to_hex(&request.encode_to_vec())
}

/// The jobs `state` records as registered, validated again.
pub fn registered_jobs(state: &State) -> anyhow::Result<Vec<nt::ValidatedTopology>> {
    state
        .jobs
        .iter()
        .map(|job| {
            let bytes = from_hex(&job.request)?;
            let request = proto::RegisterTopologyRequest::decode(bytes.as_slice())?;
            request
                .validate()
                .map_err(|e| anyhow::anyhow!("state file, job {}: {e}", job.job_id))
        })
        .collect()
}

/// One iteration learning predicted for `tenant`'s job `job_id`, as the
/// demand batch a client would announce for it, with its keys. Built,
/// not decoded: the demand ids carry the controller's "/", which a
/// client's may not.
pub fn predicted_batch(
    tenant: &str,
    job_id: &str,
    demands: &[PredictedDemand],
) -> (nt::ValidatedDemandBatch, Vec<String>) {
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
                dest_qp_choices: None,
            })
            .collect(),
    };
    (batch, demand_keys(&request))
}
