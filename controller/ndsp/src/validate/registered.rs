//! Checks against registered topologies: state the caller supplies, so
//! validation itself stays free of it.

use std::net::Ipv4Addr;

use crate::types::*;

use super::path::{Path, ROOT};
use super::Result;

fn registered<'t>(
    p: Path<'_>,
    topology: &'t ValidatedTopology,
    rank: u32,
) -> Result<&'t RankEndpoint> {
    topology.endpoint(rank).ok_or_else(|| {
        p.error(format!(
            "rank {rank} is not registered in job {:?}",
            topology.job_id
        ))
    })
}

impl ValidatedDemandBatch {
    /// Checks every rank endpoint against its job's registered topology
    /// (`topology_of(job_id)`): the job must be registered, the rank must
    /// be in it, and the two ends of a demand must resolve to different
    /// host addresses (traffic within a host does not cross the fabric).
    /// The error names the field as in the request.
    pub fn check_ranks<'t>(
        &self,
        topology_of: impl Fn(&str) -> Option<&'t ValidatedTopology>,
    ) -> Result<()> {
        for (i, d) in self.demands.iter().enumerate() {
            let dp = ROOT.index("demands", i);
            let Some(job_id) = &d.job_id else { continue };
            if !matches!(d.source, Endpoint::Rank(_)) && !matches!(d.destination, Endpoint::Rank(_))
            {
                continue;
            }
            let topology = topology_of(job_id).ok_or_else(|| {
                dp.field("job_id")
                    .error(format!("job {job_id:?} has no registered topology"))
            })?;
            let resolve = |p: Path<'_>, e: Endpoint| -> Result<Ipv4Addr> {
                match e {
                    Endpoint::Rank(r) => Ok(registered(p.field("rank"), topology, r)?.host_address),
                    Endpoint::Host(a) => Ok(a),
                }
            };
            let src = resolve(dp.field("source"), d.source)?;
            let dst = resolve(dp.field("destination"), d.destination)?;
            if src == dst {
                return dp.field("destination").err(format!(
                    "resolves to {dst}, the source's host address; traffic within a host does not cross the fabric"
                ));
            }
        }
        Ok(())
    }
}

impl ValidatedCollective {
    /// Checks that `topology` is the collective's job and that every rank
    /// and peer rank is registered in it.
    pub fn check_ranks(&self, topology: &ValidatedTopology) -> Result<()> {
        let cp = ROOT.field("collective");
        if topology.job_id != self.job_id {
            return cp.field("job_id").err(format!(
                "is {:?} but the topology given is job {:?}",
                self.job_id, topology.job_id
            ));
        }
        for (i, &r) in self.ranks.iter().enumerate() {
            registered(cp.index("ranks", i), topology, r)?;
        }
        for (i, &r) in self.peer_ranks.iter().enumerate() {
            registered(cp.index("peer_ranks", i), topology, r)?;
        }
        Ok(())
    }
}
