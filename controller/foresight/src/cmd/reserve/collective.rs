//! `foresight reserve collective`: a collective over whole hosts (each
//! host's GPUs are consecutive ranks), registered as a job first.

use std::net::Ipv4Addr;

use anyhow::bail;
use clap::{Args, ValueEnum};
use ndsp::proto::{self, collective};
use ndsp::types::ValidatedReservation;
use ndsp::Validate;

use super::args::{default_id, header, parse_size, timing_fields, Timing};
use super::client::{call, Target};
use super::output::install_us;
use super::register::registration;
use crate::cmd::millis::{ms_to_ns, MAX_MS};

#[derive(Clone, Copy, ValueEnum)]
enum Kind {
    RingAllreduce,
    TreeAllreduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Pipeline,
}

#[derive(Args)]
pub(super) struct CollectiveArgs {
    /// Collective id (default: collective-<unix ms>).
    #[arg(long)]
    id: Option<String>,
    /// Pattern.
    #[arg(long, value_enum, default_value = "ring-allreduce")]
    kind: Kind,
    /// Hosts taking part, IPv4 addresses in ring order (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    hosts: Vec<Ipv4Addr>,
    /// Ranks (GPUs) per host.
    #[arg(long, default_value_t = 8)]
    gpus_per_host: u32,
    /// Buffer size (suffixes K, M, G, KiB, MiB, GiB...).
    #[arg(long, value_parser = parse_size)]
    bytes: u64,
    /// Parallel channels (QPs per neighbour pair).
    #[arg(long, default_value_t = 1)]
    channels: u32,
    /// Job to register the hosts' ranks under (default: the collective id).
    #[arg(long)]
    job: Option<String>,
    #[command(flatten)]
    timing: Timing,
    #[command(flatten)]
    target: Target,
}

/// Register the hosts as a job, then submit the collective; the
/// controller's reservation of it, where to print it and the install time.
pub(super) async fn submit(
    a: CollectiveArgs,
) -> anyhow::Result<(Target, ValidatedReservation, Option<u64>)> {
    let (start, duration, rate, recurrence) = timing_fields(&a.timing)?;
    let id = a.id.clone().unwrap_or_else(|| default_id("collective"));
    let job = a.job.clone().unwrap_or_else(|| id.clone());
    if a.gpus_per_host == 0 {
        bail!("--gpus-per-host must be at least 1");
    }
    let world = a.hosts.len() as u32 * a.gpus_per_host;
    let register = registration(
        &a.target.tenant,
        &job,
        &a.hosts,
        a.gpus_per_host,
        proto::CollectiveLibrary::Nccl,
    );
    let kind = match a.kind {
        Kind::RingAllreduce => proto::CollectiveKind::RingAllReduce,
        Kind::TreeAllreduce => proto::CollectiveKind::TreeAllReduce,
        Kind::AllGather => proto::CollectiveKind::AllGather,
        Kind::ReduceScatter => proto::CollectiveKind::ReduceScatter,
        Kind::AllToAll => proto::CollectiveKind::AllToAll,
        Kind::Pipeline => proto::CollectiveKind::PipelineSend,
    };
    let submit = proto::SubmitCollectiveRequest {
        header: header(&a.target.tenant),
        reference_unix_ns: 0,
        collective: Some(proto::Collective {
            collective_id: id,
            job_id: job,
            kind: kind as i32,
            ranks: (0..world).collect(),
            peer_ranks: Vec::new(),
            size_bytes: a.bytes,
            channels: a.channels,
            start: Some(collective::Start::StartOffsetNs(start)),
            pacing: Some(match (duration, rate) {
                (Some(d), _) => collective::Pacing::DurationNs(d),
                (None, Some(r)) => collective::Pacing::FlowRateBps(r),
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
                    ms_to_ns("--deadline-ms", d, MAX_MS).map(collective::Deadline::DeadlineOffsetNs)
                })
                .transpose()?,
            recurrence,
        }),
    };
    register
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid job registration: {e}"))?;
    submit
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid request: {e}"))?;
    call(&a.target, register, |mut c, r| {
        Box::pin(async move { c.register_topology(r).await })
    })
    .await?;
    let response = call(&a.target, submit, |mut c, r| {
        Box::pin(async move { c.submit_collective(r).await })
    })
    .await?;
    let us = install_us(&response);
    let body = response
        .into_inner()
        .validate()
        .map_err(|e| anyhow::anyhow!("the controller's answer is malformed: {e}"))?;
    Ok((a.target, body, us))
}
