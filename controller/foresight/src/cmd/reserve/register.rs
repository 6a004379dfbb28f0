//! `foresight register`: a job's hosts, announcing nothing yet.

use std::net::Ipv4Addr;

use anyhow::bail;
use clap::{Args, ValueEnum};
use ndsp::proto;
use ndsp::Validate;

use super::args::header;
use super::client::{call, Target};

#[derive(Args)]
pub struct RegisterCmd {
    /// Job id.
    #[arg(long)]
    job: String,
    /// The job's hosts, IPv4 addresses in rank order (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    hosts: Vec<Ipv4Addr>,
    /// Ranks (GPUs) per host.
    #[arg(long, default_value_t = 1)]
    gpus_per_host: u32,
    /// The job's collective library: NCCL/RCCL traffic is matched on its
    /// queue pairs, any other on its host pairs.
    #[arg(long, value_enum, default_value = "nccl")]
    library: Library,
    #[command(flatten)]
    target: Target,
}

#[derive(Clone, Copy, ValueEnum)]
enum Library {
    Nccl,
    Rccl,
    Gloo,
    Mpi,
    Oneccl,
    Xla,
}

/// A job's ranks: each host's GPUs are consecutive ranks.
pub(super) fn registration(
    tenant: &str,
    job: &str,
    hosts: &[Ipv4Addr],
    gpus_per_host: u32,
    library: proto::CollectiveLibrary,
) -> proto::RegisterTopologyRequest {
    let world = hosts.len() as u32 * gpus_per_host;
    proto::RegisterTopologyRequest {
        header: header(tenant),
        topology: Some(proto::Topology {
            job_id: job.to_string(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: world,
            ranks: (0..world)
                .map(|r| proto::RankEndpoint {
                    rank: r,
                    device_id: format!("GPU-{}", r % gpus_per_host),
                    host_address: hosts[(r / gpus_per_host) as usize].to_string(),
                    nic: String::new(),
                    qp_range: None,
                })
                .collect(),
            library: library as i32,
            library_version: String::new(),
            algorithms: Vec::new(),
        }),
    }
}

/// `foresight register`: a job's hosts, announcing nothing yet (a
/// controller that learns iterations, T+5, watches them from now on).
pub fn register(cmd: RegisterCmd) -> anyhow::Result<()> {
    if cmd.gpus_per_host == 0 {
        bail!("--gpus-per-host must be at least 1");
    }
    let library = match cmd.library {
        Library::Nccl => proto::CollectiveLibrary::Nccl,
        Library::Rccl => proto::CollectiveLibrary::Rccl,
        Library::Gloo => proto::CollectiveLibrary::Gloo,
        Library::Mpi => proto::CollectiveLibrary::Mpi,
        Library::Oneccl => proto::CollectiveLibrary::Oneccl,
        Library::Xla => proto::CollectiveLibrary::Xla,
    };
    let request = registration(
        &cmd.target.tenant,
        &cmd.job,
        &cmd.hosts,
        cmd.gpus_per_host,
        library,
    );
    request
        .validate()
        .map_err(|e| anyhow::anyhow!("invalid job registration: {e}"))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        call(&cmd.target, request, |mut c, r| {
            Box::pin(async move { c.register_topology(r).await })
        })
        .await?;
        if cmd.target.json {
            println!("{}", serde_json::json!({ "registered": cmd.job }));
        } else {
            println!("registered job {} ({} hosts)", cmd.job, cmd.hosts.len());
        }
        Ok(())
    })
}
