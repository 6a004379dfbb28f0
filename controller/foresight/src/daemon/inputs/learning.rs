//! T+5 in the controller: learn each registered job's iterations from what
//! its traffic does, and reserve the next ones before the job announces
//! anything.
//!
//! A job's traffic is what flows between two of its registered hosts; while
//! learning is on, the controller watches those host pairs (`watchlist`
//! entries, see `desired.rs`) and sees their bytes either through the
//! entries' counters, polled (UDP and TCP: [`LearnFrom::Counters`], see
//! `watch_counters.rs`), or through INT reports (RoCEv2 only, per packet:
//! [`LearnFrom::Int`]). What is seen feeds the job's
//! [`IterationDetector`] (a burst of communication followed by `idle_ns`
//! of silence is one iteration); transfers much smaller than the
//! iteration's largest (a TCP job's acknowledgements) are left out of its
//! pattern, and each iteration feeds the job's [`PeriodLearner`]. Once the
//! learner locks, each predicted iteration not yet reserved becomes one
//! batch of demands, one per transfer, with ids `t5/<job>/<iteration>/<n>`
//! (marked predicted in NDSP); a transfer whose reverse pair carried
//! traffic (its acknowledgements) gets that pair reserved too, at the
//! share of its rate the return traffic had, so that the acknowledgements
//! ride the reserved queue on a planned path instead of waiting behind it. An iteration that
//! does not match, or silence past the expected window, withdraws the job's
//! predicted reservations that have not ended, and learning starts again.
//!
//! Times are report arrival times on the controller's clock. Pure logic:
//! the daemon feeds reports and the clock and carries out the [`Step`]s.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;

use planner::periodic::{
    Cadence, Deviation, IterationDetector, Learned, LearnerConfig, PeriodLearner, Prediction,
    Transfer,
};

use crate::daemon::persistence::state_records::FlowRecord;

/// Where learning sees a job's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearnFrom {
    /// The watch entries' counters, read every `poll_ns`: any IP traffic.
    Counters { poll_ns: u64 },
    /// INT reports (needs the INT collector): RoCEv2 traffic, per packet.
    Int,
}

/// How learning behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearningConfig {
    pub learner: LearnerConfig,
    /// Silence that ends an iteration's communication, ns.
    pub idle_ns: u64,
    pub from: LearnFrom,
    /// Transfers under this fraction of an iteration's largest are not
    /// part of its pattern (acknowledgements, control messages).
    pub min_transfer_fraction: f64,
    /// A burst carrying fewer bytes is no iteration (a keep-alive, a
    /// coordination message between iterations) and is not learned from.
    pub min_iteration_bytes: u64,
    /// Reserve each predicted transfer's return traffic (its reverse
    /// pair, when that carried traffic) along with it.
    pub reserve_returns: bool,
}

impl Default for LearningConfig {
    fn default() -> Self {
        LearningConfig {
            learner: LearnerConfig::default(),
            idle_ns: 50_000_000,
            from: LearnFrom::Counters {
                poll_ns: 20_000_000,
            },
            min_transfer_fraction: 0.1,
            min_iteration_bytes: 16_384,
            reserve_returns: true,
        }
    }
}

/// A registered job as learning sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobHosts {
    pub tenant: String,
    pub job_id: String,
    /// Rank of each host (a host with several ranks keeps the lowest).
    pub ranks: BTreeMap<Ipv4Addr, u32>,
}

type JobKey = (String, String);

/// One predicted transfer, ready to submit as a demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredictedDemand {
    pub demand_id: String,
    pub src_rank: u32,
    pub dst_rank: u32,
    pub start_unix_ns: u64,
    pub rate_bps: u64,
    pub size_bytes: u64,
}

/// What the daemon must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Reserve one predicted iteration.
    Reserve {
        tenant: String,
        job_id: String,
        iteration: u64,
        demands: Vec<PredictedDemand>,
    },
    /// Withdraw the job's predicted reservations that have not ended.
    Withdraw {
        tenant: String,
        job_id: String,
        reason: String,
    },
}

struct JobLearning {
    hosts: JobHosts,
    detector: IterationDetector,
    learner: PeriodLearner,
    /// Iterations observed so far (the next one observed gets this number).
    observed: u64,
    /// Iterations already reserved ahead (absolute numbers).
    reserved: BTreeSet<u64>,
    /// Steps found while recording (an iteration closed by the next
    /// burst's first report), handed out by the next tick.
    pending: Vec<Step>,
    /// The job announces its iterations: they are learned from its
    /// announcements, and its traffic (the announced traffic) is not
    /// learned again, until an announcement is missed.
    announcing: bool,
    /// Return traffic of the last iteration learned from traffic: for a
    /// transfer (src, dst) of its pattern, the bytes dst sent back to src
    /// over the transfer's bytes.
    returns: Returns,
}

/// Return traffic per transfer: (src, dst) -> bytes dst -> src / bytes src -> dst.
type Returns = BTreeMap<(String, String), f64>;

impl JobLearning {
    fn new(hosts: JobHosts, config: &LearningConfig) -> JobLearning {
        JobLearning {
            hosts,
            detector: IterationDetector::new(config.idle_ns),
            learner: PeriodLearner::new(config.learner),
            observed: 0,
            reserved: BTreeSet::new(),
            pending: Vec::new(),
            announcing: false,
            returns: Returns::new(),
        }
    }

    /// Learn from scratch, keeping the iteration count (the ids of
    /// predicted demands stay unique).
    fn restart(&mut self, config: &LearningConfig, announcing: bool) {
        let observed = self.observed;
        *self = JobLearning::new(self.hosts.clone(), config);
        self.observed = observed;
        self.announcing = announcing;
    }
}

/// One job's learning as the operator's page shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LearnedJob {
    pub tenant: String,
    pub job_id: String,
    /// `learning` (not locked yet), `locked` (predicting its iterations)
    /// or `announcing` (learned from its announcements instead).
    pub state: String,
    /// Iterations observed so far.
    pub observed: u64,
    /// The learned period, once locked on one.
    pub period_s: Option<f64>,
    /// Or the learned gap from an iteration's end to the next start.
    pub gap_s: Option<f64>,
    /// Iterations reserved ahead so far.
    pub reserved_ahead: usize,
}

/// Learning state of every registered job.
pub struct Learning {
    config: LearningConfig,
    jobs: BTreeMap<JobKey, JobLearning>,
    /// Which jobs each host belongs to.
    by_host: HashMap<Ipv4Addr, Vec<JobKey>>,
    /// Reservable rate of every fabric host's NIC, bit/s (predicted
    /// transfers are reserved at their NIC's share, not at the rate seen
    /// under ECMP).
    nic_bps: HashMap<Ipv4Addr, u64>,
}

impl Learning {
    pub fn new(config: LearningConfig, nic_bps: HashMap<Ipv4Addr, u64>) -> Learning {
        Learning {
            config,
            jobs: BTreeMap::new(),
            by_host: HashMap::new(),
            nic_bps,
        }
    }

    /// The registered jobs now. A job that is new or whose hosts changed
    /// starts learning from scratch; a job no longer registered is
    /// forgotten (its reservations were cancelled with it).
    pub fn set_jobs(&mut self, jobs: Vec<JobHosts>) {
        let mut next = BTreeMap::new();
        for hosts in jobs {
            let key = (hosts.tenant.clone(), hosts.job_id.clone());
            let kept = self.jobs.remove(&key).filter(|j| j.hosts == hosts);
            let job = kept.unwrap_or_else(|| JobLearning::new(hosts, &self.config));
            next.insert(key, job);
        }
        self.jobs = next;
        self.by_host.clear();
        for (key, job) in &self.jobs {
            for ip in job.hosts.ranks.keys() {
                self.by_host.entry(*ip).or_default().push(key.clone());
            }
        }
    }

    /// Ordered host pairs of every job, to watch.
    pub fn watched_pairs(&self) -> BTreeSet<(Ipv4Addr, Ipv4Addr)> {
        let mut out = BTreeSet::new();
        for job in self.jobs.values() {
            for &a in job.hosts.ranks.keys() {
                for &b in job.hosts.ranks.keys() {
                    if a != b {
                        out.insert((a, b));
                    }
                }
            }
        }
        out
    }

    /// `bytes` from `src` to `dst` seen at `at_ns` (one INT report, or a
    /// watch counter's increment). Traffic of no job is ignored.
    pub fn record(&mut self, src: Ipv4Addr, dst: Ipv4Addr, bytes: u64, at_ns: u64) {
        let Some(keys) = self.by_host.get(&src) else {
            return;
        };
        let Some(key) = keys
            .iter()
            .find(|k| self.jobs[*k].hosts.ranks.contains_key(&dst))
            .cloned()
        else {
            return;
        };
        let job = self.jobs.get_mut(&key).expect("indexed job");
        if job.announcing {
            return;
        }
        if let Some(burst) = job
            .detector
            .record(&src.to_string(), &dst.to_string(), bytes, at_ns)
        {
            let steps = learn_burst(job, burst, &self.config, &self.nic_bps);
            job.pending.extend(steps);
        }
    }

    /// An iteration the job announced (T+1), as its host pairs' bytes over
    /// the announced window. The job's iterations are learned from its
    /// announcements from now on; once locked, the controller reserves the
    /// iterations after the announced ones (the job's own announcement of
    /// one takes over; see `Engine::supersede_predictions`), so that a late
    /// or lost announcement still finds its iteration reserved. A job that
    /// starts announcing starts learning again; one whose announcements
    /// stop is learned from its traffic again.
    pub fn announced(&mut self, tenant: &str, job_id: &str, obs: planner::periodic::Observation) {
        let Some(job) = self.jobs.get_mut(&(tenant.to_string(), job_id.to_string())) else {
            return;
        };
        if !job.announcing {
            job.restart(&self.config, true);
        }
        // The announcement withdrew every prediction of the job: the ones
        // still ahead of it are reserved again below.
        job.reserved.clear();
        job.returns.clear();
        let steps = observe(job, obs, &self.nic_bps, self.config.learner.jitter);
        job.pending.extend(steps);
    }

    /// Close iterations that went quiet, notice missed ones; what to do.
    pub fn tick(&mut self, now_ns: u64) -> Vec<Step> {
        let mut steps = Vec::new();
        for job in self.jobs.values_mut() {
            steps.append(&mut job.pending);
            if let Some(burst) = job.detector.flush(now_ns) {
                steps.extend(learn_burst(job, burst, &self.config, &self.nic_bps));
            }
            // An iteration in progress is judged once it ends (it is seen
            // whole only then), however long it lasts.
            if job.detector.open_since().is_some() {
                continue;
            }
            if let Some(d) = job.learner.expire(now_ns) {
                steps.push(withdraw(&job.hosts, &d));
                if job.announcing {
                    // Announcements stopped: learn from the traffic again.
                    job.restart(&self.config, false);
                } else {
                    job.reserved.clear();
                }
            }
        }
        steps
    }

    /// What the operator's page shows of every job's learning.
    pub fn jobs_view(&self) -> Vec<LearnedJob> {
        self.jobs
            .iter()
            .map(|((tenant, job_id), j)| {
                let cadence = j.learner.cadence();
                let state = match (j.announcing, cadence) {
                    (true, _) => "announcing",
                    (false, Some(_)) => "locked",
                    (false, None) => "learning",
                };
                let (period_s, gap_s) = match cadence {
                    Some(Cadence::Period { period_ns }) => (Some(period_ns as f64 / 1e9), None),
                    Some(Cadence::AfterEnd { gap_ns }) => (None, Some(gap_ns as f64 / 1e9)),
                    None => (None, None),
                };
                LearnedJob {
                    tenant: tenant.clone(),
                    job_id: job_id.clone(),
                    state: state.to_string(),
                    observed: j.observed,
                    period_s,
                    gap_s,
                    reserved_ahead: j.reserved.len(),
                }
            })
            .collect()
    }

    /// The learned cadence of a job, once locked.
    #[cfg(test)]
    pub fn cadence(&self, tenant: &str, job_id: &str) -> Option<Cadence> {
        self.jobs
            .get(&(tenant.to_string(), job_id.to_string()))
            .and_then(|j| j.learner.cadence())
    }
}

/// An announced iteration as learning sees one: each host pair's bytes
/// over the flows' requested windows (None without flows).
pub fn announced_iteration<'a>(
    flows: impl Iterator<Item = &'a FlowRecord>,
) -> Option<planner::periodic::Observation> {
    let (mut start, mut end) = (u64::MAX, 0u64);
    let mut bytes: BTreeMap<(Ipv4Addr, Ipv4Addr), u64> = BTreeMap::new();
    for f in flows {
        start = start.min(f.requested_start_unix_ns);
        end = end.max(f.requested_start_unix_ns.saturating_add(f.duration_ns));
        *bytes.entry((f.src_ip, f.dst_ip)).or_default() += f.bytes;
    }
    (start <= end).then(|| planner::periodic::Observation {
        start_ns: start,
        duration_ns: end - start,
        transfers: bytes
            .into_iter()
            .map(|((src, dst), bytes)| Transfer {
                src: src.to_string(),
                dst: dst.to_string(),
                bytes,
            })
            .collect(),
    })
}

impl LearningConfig {
    /// A burst of traffic as an iteration to learn from: without its
    /// transfers under `min_transfer_fraction` of the largest, and the
    /// return traffic of the transfers kept (what was left out on their
    /// reverse pairs, if `reserve_returns`); None if it carried under
    /// `min_iteration_bytes`.
    fn iteration(
        &self,
        mut obs: planner::periodic::Observation,
    ) -> Option<(planner::periodic::Observation, Returns)> {
        let total: u64 = obs.transfers.iter().map(|t| t.bytes).sum();
        if total < self.min_iteration_bytes {
            return None;
        }
        let largest = obs.transfers.iter().map(|t| t.bytes).max().unwrap_or(0);
        let floor = (largest as f64 * self.min_transfer_fraction) as u64;
        let (kept, small): (Vec<Transfer>, Vec<Transfer>) =
            obs.transfers.into_iter().partition(|t| t.bytes >= floor);
        let mut returns = Returns::new();
        if self.reserve_returns {
            for back in &small {
                if let Some(t) = kept.iter().find(|t| t.src == back.dst && t.dst == back.src) {
                    let share = back.bytes as f64 / t.bytes as f64;
                    returns.insert((t.src.clone(), t.dst.clone()), share);
                }
            }
        }
        obs.transfers = kept;
        Some((obs, returns))
    }
}

/// Learn from one burst of a job's traffic (if it is an iteration).
fn learn_burst(
    job: &mut JobLearning,
    burst: planner::periodic::Observation,
    config: &LearningConfig,
    nic_bps: &HashMap<Ipv4Addr, u64>,
) -> Vec<Step> {
    let Some((obs, returns)) = config.iteration(burst) else {
        return Vec::new();
    };
    job.returns = returns;
    observe(job, obs, nic_bps, config.learner.jitter)
}

/// Feed one iteration to the job's learner; reserve what became
/// predictable, or withdraw on a deviation.
fn observe(
    job: &mut JobLearning,
    obs: planner::periodic::Observation,
    nic_bps: &HashMap<Ipv4Addr, u64>,
    jitter: f64,
) -> Vec<Step> {
    job.observed += 1;
    match job.learner.observe(obs) {
        Ok(Learned::Locked(_)) | Ok(Learned::Confirmed) => {
            let predictions = job.learner.predictions();
            let margin = window_margin(&predictions, jitter);
            let mut steps = Vec::new();
            for p in predictions {
                let iteration = job.observed + p.ahead as u64;
                if job.reserved.insert(iteration) {
                    steps.push(reserve(
                        &job.hosts,
                        iteration,
                        &p,
                        margin,
                        nic_bps,
                        &job.returns,
                    ));
                }
            }
            job.reserved.retain(|&i| i > job.observed);
            steps
        }
        Ok(Learned::Deviated(d)) => {
            job.reserved.clear();
            vec![withdraw(&job.hosts, &d)]
        }
        Ok(Learned::Learning { .. }) => Vec::new(),
        Err(e) => {
            tracing::debug!(job = %job.hosts.job_id, %e, "iteration not learned from");
            Vec::new()
        }
    }
}

/// Slack on each side of a predicted window: the allowed jitter of the
/// period (start to start of consecutive predictions).
fn window_margin(predictions: &[Prediction], jitter: f64) -> u64 {
    let period = match predictions {
        [a, b, ..] => b.start_ns.saturating_sub(a.start_ns),
        [a] => a.duration_ns,
        [] => 0,
    };
    (period as f64 * jitter) as u64
}

fn reserve(
    hosts: &JobHosts,
    iteration: u64,
    p: &Prediction,
    margin: u64,
    nic_bps: &HashMap<Ipv4Addr, u64>,
    returns: &Returns,
) -> Step {
    let return_share = |t: &Transfer| returns.get(&(t.src.clone(), t.dst.clone())).copied();
    // A NIC is shared by the transfers it sends in the iteration (a unit
    // each) and the return traffic it sends back (its share of a unit), so
    // that what is reserved from a NIC never exceeds it.
    let mut units: HashMap<&str, f64> = HashMap::new();
    for t in &p.transfers {
        *units.entry(t.src.as_str()).or_default() += 1.0;
        if let Some(share) = return_share(t) {
            *units.entry(t.dst.as_str()).or_default() += share;
        }
    }
    let unit_bps = |host: &str| -> Option<f64> {
        let nic = *nic_bps.get(&host.parse::<Ipv4Addr>().ok()?)?;
        (nic > 0).then(|| nic as f64 / units[host])
    };
    let mut demands = Vec::new();
    for (n, t) in p.transfers.iter().enumerate() {
        let (Ok(src), Ok(dst)) = (t.src.parse::<Ipv4Addr>(), t.dst.parse::<Ipv4Addr>()) else {
            continue;
        };
        // At the NIC share; as fast as it went when no NIC is known.
        let rate_bps = unit_bps(&t.src)
            .map(|r| r as u64)
            .unwrap_or_else(|| {
                (t.bytes as u128 * 8_000_000_000 / u128::from(p.duration_ns.max(1))) as u64
            })
            .max(1);
        let transfer_ns = (t.bytes as u128 * 8_000_000_000).div_ceil(rate_bps as u128);
        // The window lasts the transfer at that rate, or as long as the
        // slowest of the latest iterations took if longer (a sender slower
        // than its NIC share: a shaped host, TCP's own pace), plus the
        // start's uncertainty on both sides, and holds the rate
        // throughout: the bytes it could carry.
        let window_ns = transfer_ns.max(u128::from(p.longest_ns)).max(1) + 2 * u128::from(margin);
        let demand = |n: usize, from: Ipv4Addr, to: Ipv4Addr, rate_bps: u64| PredictedDemand {
            demand_id: format!("t5/{}/{iteration}/{n}", hosts.job_id),
            src_rank: hosts.ranks[&from],
            dst_rank: hosts.ranks[&to],
            start_unix_ns: p.start_ns.saturating_sub(margin),
            rate_bps,
            size_bytes: (rate_bps as u128 * window_ns).div_ceil(8_000_000_000) as u64,
        };
        demands.push(demand(n, src, dst, rate_bps));
        if let Some(share) = return_share(t) {
            // Over the same window, at the share of the transfer's rate
            // it had when seen (within its own NIC's unit).
            let base = unit_bps(&t.dst).map_or(rate_bps as f64, |u| u.min(rate_bps as f64));
            let back_bps = ((base * share) as u64).max(1);
            demands.push(demand(p.transfers.len() + n, dst, src, back_bps));
        }
    }
    Step::Reserve {
        tenant: hosts.tenant.clone(),
        job_id: hosts.job_id.clone(),
        iteration,
        demands,
    }
}

fn withdraw(hosts: &JobHosts, d: &Deviation) -> Step {
    Step::Withdraw {
        tenant: hosts.tenant.clone(),
        job_id: hosts.job_id.clone(),
        reason: d.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, n, 1)
    }

    fn learning() -> Learning {
        let nic = (1..=4).map(|n| (ip(n), 8_000_000_000)).collect();
        let mut l = Learning::new(
            LearningConfig {
                learner: LearnerConfig {
                    lock_after: 3,
                    jitter: 0.1,
                    bytes_tolerance: 0.1,
                    horizon: 2,
                },
                idle_ns: 10 * MS,
                ..LearningConfig::default()
            },
            nic,
        );
        l.set_jobs(vec![JobHosts {
            tenant: "t".into(),
            job_id: "job".into(),
            ranks: (1..=4).map(|n| (ip(n), u32::from(n) - 1)).collect(),
        }]);
        l
    }

    /// One ring iteration starting at `start_ms`: every host sends 100
    /// packets of 1,000 bytes to the next over 20 ms.
    fn iteration(l: &mut Learning, start_ms: u64) {
        iteration_paced(l, start_ms, 200_000);
    }

    /// The same, one packet per host every `gap_ns`.
    fn iteration_paced(l: &mut Learning, start_ms: u64, gap_ns: u64) {
        for k in 0..100u64 {
            for n in 1..=4u8 {
                let at = start_ms * MS + k * gap_ns;
                l.record(ip(n), ip(n % 4 + 1), 1000, at);
            }
        }
    }

    fn reserves(steps: &[Step]) -> Vec<u64> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Reserve { iteration, .. } => Some(*iteration),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn locks_after_three_iterations_and_reserves_the_next_two() {
        let mut l = learning();
        let mut seen = Vec::new();
        for i in 0..3 {
            iteration(&mut l, 100 * i);
            seen.extend(l.tick(100 * i * MS + 50 * MS));
        }
        assert_eq!(reserves(&seen), vec![4, 5], "{seen:?}");
        let Step::Reserve { demands, .. } = &seen[0] else {
            panic!("{seen:?}")
        };
        assert_eq!(demands.len(), 4);
        let d = &demands[0];
        assert_eq!(d.demand_id, "t5/job/4/0");
        assert_eq!((d.src_rank, d.dst_rank), (0, 1));
        // The 4th iteration starts 100 ms after the 3rd: the window opens
        // a period's jitter (10 ms) early, and lasts the iteration as seen
        // (19.8 ms: longer than its 100 kB at the NIC's 8 Gbit/s, 0.1 ms)
        // plus the jitter each side ...
        assert_eq!(d.start_unix_ns, 300 * MS - 10 * MS);
        // ... holding the NIC's 8 Gbit/s (1 byte/ns) throughout.
        assert_eq!(d.rate_bps, 8_000_000_000);
        assert_eq!(d.size_bytes, 19_800_000 + 20 * MS);
        // A matching 4th iteration reserves only the 6th.
        iteration(&mut l, 300);
        assert_eq!(reserves(&l.tick(350 * MS)), vec![6]);
    }

    #[test]
    fn a_reservation_lasts_the_slowest_of_the_latest_iterations() {
        let mut l = learning();
        let mut seen = Vec::new();
        // The 2nd iteration takes 29.7 ms, the others 19.8 ms.
        for (i, gap_ns) in [(0u64, 200_000u64), (1, 300_000), (2, 200_000)] {
            iteration_paced(&mut l, 100 * i, gap_ns);
            seen.extend(l.tick(100 * i * MS + 60 * MS));
        }
        let Step::Reserve { demands, .. } = &seen[0] else {
            panic!("{seen:?}")
        };
        // 29.7 ms plus the jitter (10 ms) each side, at 1 byte/ns.
        assert_eq!(demands[0].size_bytes, 29_700_000 + 20 * MS);
    }

    /// Three ring iterations, each receiver acknowledging 2 %, 3 % and
    /// 4 % of the bytes (varying more than the bytes tolerance); what the
    /// learner reserves first.
    fn tcp_ring(l: &mut Learning) -> Vec<PredictedDemand> {
        let mut seen = Vec::new();
        for i in 0..3u64 {
            iteration(l, 100 * i);
            for n in 1..=4u8 {
                let at = (100 * i + 5) * MS;
                l.record(ip(n % 4 + 1), ip(n), 2_000 + 1_000 * i, at);
            }
            seen.extend(l.tick(100 * i * MS + 50 * MS));
        }
        assert_eq!(reserves(&seen), vec![4, 5], "{seen:?}");
        let Step::Reserve { demands, .. } = &seen[0] else {
            panic!("{seen:?}")
        };
        demands.clone()
    }

    #[test]
    fn a_tcp_ring_s_acknowledgements_ride_with_their_transfers() {
        let demands = tcp_ring(&mut learning());
        // The ring's 4 transfers, each followed by its return pair.
        assert_eq!(demands.len(), 8, "{demands:?}");
        // Each NIC sends a transfer and the 4 % return of another: it is
        // shared 1 : 0.04, and never oversubscribed.
        for pair in demands.chunks(2) {
            let (d, b) = (&pair[0], &pair[1]);
            assert_eq!(d.rate_bps, 7_692_307_692, "{d:?}");
            assert_eq!(b.rate_bps, 307_692_307, "{b:?}");
            assert_eq!((b.src_rank, b.dst_rank), (d.dst_rank, d.src_rank));
            assert_eq!(b.start_unix_ns, d.start_unix_ns);
            assert!(d.rate_bps + b.rate_bps <= 8_000_000_000);
        }
        assert_eq!(demands[1].demand_id, "t5/job/4/4");
    }

    #[test]
    fn acknowledgements_left_to_ecmp_are_not_reserved() {
        let mut l = learning();
        l.config.reserve_returns = false;
        let demands = tcp_ring(&mut l);
        // The ring's 4 transfers, each at its NIC's whole share.
        assert_eq!(demands.len(), 4, "{demands:?}");
        assert!(demands.iter().all(|d| d.rate_bps == 8_000_000_000));
    }

    /// The job's announcement of a ring iteration at `start_ms` (20 ms).
    fn announce(l: &mut Learning, start_ms: u64) {
        let transfers = (1..=4u8)
            .map(|n| Transfer {
                src: ip(n).to_string(),
                dst: ip(n % 4 + 1).to_string(),
                bytes: 100_000,
            })
            .collect();
        l.announced(
            "t",
            "job",
            planner::periodic::Observation {
                start_ns: start_ms * MS,
                duration_ns: 20 * MS,
                transfers,
            },
        );
    }

    #[test]
    fn an_announcing_job_is_learned_from_its_announcements_not_its_traffic() {
        let mut l = learning();
        let mut seen = Vec::new();
        // Announced a period ahead (T+1); the traffic of the announced
        // iterations is not learned again.
        for i in 0..3u64 {
            announce(&mut l, 100 * (i + 1));
            iteration(&mut l, 100 * i);
            seen.extend(l.tick(100 * i * MS + 50 * MS));
        }
        // Locked on the 3 announced iterations (at 100, 200 and 300 ms,
        // counted 1 to 3): the next two, from 400 ms on, are reserved.
        assert_eq!(reserves(&seen), vec![4, 5], "{seen:?}");
        let Step::Reserve { demands, .. } = &seen[0] else {
            panic!("{seen:?}")
        };
        assert_eq!(demands[0].start_unix_ns, 400 * MS - 10 * MS);
        // Announcements stop: once the 4th is missed, the predictions are
        // withdrawn and the traffic is learned from again.
        let steps = l.tick(440 * MS);
        assert!(
            matches!(&steps[..], [Step::Withdraw { reason, .. }] if reason.contains("no iteration")),
            "{steps:?}"
        );
        let mut again = Vec::new();
        for i in 5..8u64 {
            iteration(&mut l, 100 * i);
            again.extend(l.tick(100 * i * MS + 50 * MS));
        }
        assert_eq!(
            reserves(&again).len(),
            2,
            "learned from traffic again: {again:?}"
        );
    }

    #[test]
    fn keep_alives_between_iterations_are_no_iterations() {
        let mut l = learning();
        let mut seen = Vec::new();
        for i in 0..4u64 {
            iteration(&mut l, 100 * i);
            seen.extend(l.tick(100 * i * MS + 50 * MS));
            // A 200-byte coordination message in the pause, closed as a
            // burst of its own.
            l.record(ip(2), ip(1), 200, (100 * i + 60) * MS);
            seen.extend(l.tick(100 * i * MS + 80 * MS));
        }
        // Locked after 3, confirmed by the 4th: nothing withdrawn.
        assert_eq!(reserves(&seen), vec![4, 5, 6], "{seen:?}");
        assert!(
            !seen.iter().any(|s| matches!(s, Step::Withdraw { .. })),
            "{seen:?}"
        );
    }

    #[test]
    fn an_iteration_longer_than_the_window_is_not_missed() {
        let mut l = learning();
        let mut seen = Vec::new();
        for i in 0..3 {
            iteration(&mut l, 100 * i);
            seen.extend(l.tick(100 * i * MS + 50 * MS));
        }
        assert_eq!(reserves(&seen), vec![4, 5]);
        // The 4th starts on time but lasts 60 ms, past its window (300 ms
        // + 10 ms): seen only once it ends, it is not missed meanwhile.
        for k in 0..60u64 {
            for n in 1..=4u8 {
                l.record(ip(n), ip(n % 4 + 1), 1000 * 100 / 60, 300 * MS + k * MS);
            }
            let steps = l.tick(300 * MS + k * MS + MS / 2);
            assert!(
                !steps.iter().any(|s| matches!(s, Step::Withdraw { .. })),
                "at {k} ms: {steps:?}"
            );
        }
    }

    #[test]
    fn silence_withdraws_and_learning_starts_again() {
        let mut l = learning();
        for i in 0..3 {
            iteration(&mut l, 100 * i);
            l.tick(100 * i * MS + 50 * MS);
        }
        // Nothing by the end of the 4th iteration's window (300 ms + 10 ms).
        assert!(l.tick(305 * MS).is_empty());
        let steps = l.tick(320 * MS);
        assert!(
            matches!(&steps[..], [Step::Withdraw { job_id, reason, .. }] if job_id == "job" && reason.contains("no iteration")),
            "{steps:?}"
        );
        assert_eq!(l.cadence("t", "job"), None);
    }

    #[test]
    fn a_changed_iteration_withdraws() {
        let mut l = learning();
        for i in 0..3 {
            iteration(&mut l, 100 * i);
            l.tick(100 * i * MS + 50 * MS);
        }
        // Twice the bytes (another batch size).
        iteration(&mut l, 300);
        iteration(&mut l, 300);
        let steps = l.tick(350 * MS);
        assert!(
            matches!(&steps[..], [Step::Withdraw { reason, .. }] if reason.contains("bytes")),
            "{steps:?}"
        );
    }

    #[test]
    fn traffic_of_no_job_is_ignored_and_pairs_are_watched() {
        let mut l = learning();
        for i in 0..5 {
            for k in 0..10 {
                l.record(ip(9), ip(1), 1000, (100 * i) * MS + k * MS);
            }
            assert!(l.tick((100 * i + 50) * MS).is_empty());
        }
        assert_eq!(l.watched_pairs().len(), 12);
        l.set_jobs(Vec::new());
        assert!(l.watched_pairs().is_empty());
    }
}
