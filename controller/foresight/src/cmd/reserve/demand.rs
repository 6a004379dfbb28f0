//! `foresight reserve demand`: a point-to-point transfer between two
//! host addresses.

use std::net::Ipv4Addr;

use clap::Args;
use ndsp::proto::{self, demand_signal, endpoint};
use ndsp::types::ValidatedReservation;
use ndsp::Validate;

use super::args::{default_id, header, parse_qp_choices, parse_size, timing_fields, Timing};
use super::client::{call, Target};
use super::output::install_us;
use crate::cmd::millis::{ms_to_ns, MAX_MS};

#[derive(Args)]
pub(super) struct DemandArgs {
    /// Demand id (default: demand-<unix ms>).
    #[arg(long)]
    id: Option<String>,
    /// Source host IPv4 address.
    #[arg(long)]
    src: Ipv4Addr,
    /// Destination host IPv4 address.
    #[arg(long)]
    dst: Ipv4Addr,
    /// Bytes (suffixes K, M, G, KiB, MiB, GiB...).
    #[arg(long, value_parser = parse_size)]
    bytes: u64,
    /// Steer only this RoCE destination QP (default: every QP between the hosts).
    #[arg(long)]
    qp: Option<u32>,
    /// Destination QPs the sender can use, FIRST-LAST (decimal or 0x hex):
    /// the controller answers with the one to send to (under entropy
    /// steering, the one the switches' hash carries along the path).
    #[arg(long, value_parser = parse_qp_choices, conflicts_with = "qp")]
    qp_choices: Option<proto::QpRange>,
    #[command(flatten)]
    timing: Timing,
    #[command(flatten)]
    target: Target,
}

/// Submit the demand; the controller's reservation of it, where to print
/// it and the install time.
pub(super) async fn submit(
    a: DemandArgs,
) -> anyhow::Result<(Target, ValidatedReservation, Option<u64>)> {
    let (start, duration, rate, recurrence) = timing_fields(&a.timing)?;
    let host = |ip: Ipv4Addr| {
        Some(proto::Endpoint {
            address: Some(endpoint::Address::HostAddress(ip.to_string())),
        })
    };
    let demand = proto::DemandSignal {
        demand_id: a.id.clone().unwrap_or_else(|| default_id("demand")),
        job_id: String::new(),
        source: host(a.src),
        destination: host(a.dst),
        start: Some(demand_signal::Start::StartOffsetNs(start)),
        size_bytes: a.bytes,
        pacing: Some(match (duration, rate) {
            (Some(d), _) => demand_signal::Pacing::DurationNs(d),
            (None, Some(r)) => demand_signal::Pacing::RateBps(r),
            _ => unreachable!("checked"),
        }),
        priority: a.timing.priority.wire(),
        elasticity: if a.timing.elastic {
            proto::Elasticity::Elastic
        } else {
            proto::Elasticity::Inelastic
        } as i32,
        deadline: a
            .timing
            .deadline_ms
            .map(|d| {
                ms_to_ns("--deadline-ms", d, MAX_MS).map(demand_signal::Deadline::DeadlineOffsetNs)
            })
            .transpose()?,
        dest_qp: a.qp,
        recurrence,
        dest_qp_choices: a.qp_choices,
    };
    let request = proto::SubmitDemandRequest {
        header: header(&a.target.tenant),
        reference_unix_ns: 0,
        demands: vec![demand],
    };
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid request: {e}"))?;
    let response = call(&a.target, request, |mut c, r| {
        Box::pin(async move { c.submit_demand(r).await })
    })
    .await?;
    let us = install_us(&response);
    let mut body = response
        .into_inner()
        .validate()
        .map_err(|e| anyhow::anyhow!("the controller's answer is malformed: {e}"))?;
    Ok((a.target, body.remove(0), us))
}
