//! Registered jobs: a job's rank map (which host each rank runs on),
//! replaced by a new registration, kept in the state so that a restart
//! knows it, and handed to learning as the hosts to watch.

use std::collections::BTreeMap;

use ndsp::types as nt;

use super::records::{Engine, RegisteredJob};
use crate::daemon::inputs::learning::JobHosts;
use crate::daemon::persistence::state_records::Job;

impl Engine {
    /// Register (or replace) a job's rank map. `recorded` is the
    /// registration as the state keeps it (to register the job again
    /// after a restart). Returns (generation, warnings).
    pub fn register(
        &mut self,
        topo: nt::ValidatedTopology,
        recorded: String,
    ) -> (u64, Vec<String>) {
        let key = (topo.ctx.tenant.clone(), topo.job_id.clone());
        let mut warnings = Vec::new();
        for r in &topo.ranks {
            if !self.by_ip.contains_key(&r.host_address) {
                warnings.push(format!(
                    "rank {}: host address {} is not attached to the fabric; its traffic will be routed by ECMP",
                    r.rank, r.host_address
                ));
            }
        }
        let mut dropped_patterns = false;
        let generation = match self
            .state
            .jobs
            .iter_mut()
            .find(|j| j.tenant == key.0 && j.job_id == key.1)
        {
            Some(job) => {
                job.generation += 1;
                // Ranks that moved take the job's patterns with them (live
                // steps on them keep entries of their own until they end);
                // the same registration again keeps them.
                if job.request != recorded {
                    dropped_patterns = !job.patterns.is_empty();
                    job.patterns.clear();
                }
                job.request = recorded;
                job.generation
            }
            None => {
                self.state.jobs.push(Job {
                    tenant: key.0.clone(),
                    job_id: key.1.clone(),
                    generation: 1,
                    request: recorded,
                    patterns: Vec::new(),
                });
                1
            }
        };
        if dropped_patterns {
            self.unpin_orphans();
        }
        let job = RegisteredJob::new(topo, &self.by_ip, self.topo);
        self.jobs.insert(key, std::sync::Arc::new(job));
        warnings.truncate(16);
        (generation, warnings)
    }

    /// The registered jobs' hosts and ranks, for learning (T+5).
    pub fn job_hosts(&self) -> Vec<JobHosts> {
        let mut out: Vec<_> = self
            .jobs
            .iter()
            .map(|((tenant, job_id), topo)| {
                let mut ranks = BTreeMap::new();
                for r in &topo.ranks {
                    let rank = ranks.entry(r.host_address).or_insert(r.rank);
                    *rank = (*rank).min(r.rank);
                }
                JobHosts {
                    tenant: tenant.clone(),
                    job_id: job_id.clone(),
                    ranks,
                }
            })
            .collect();
        out.sort_by(|a, b| (&a.tenant, &a.job_id).cmp(&(&b.tenant, &b.job_id)));
        out
    }
}
