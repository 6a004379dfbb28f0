//! What a run of one policy gives: per job its iterations against the
//! ideal's, and how much of the fabric's links it used.

use super::steering::SteeringStats;

/// Distribution of time-averaged utilisation over the switch-to-switch
/// links that carried traffic.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct UtilStats {
    /// Links with traffic.
    pub links: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Highest.
    pub max: f64,
}

impl UtilStats {
    /// From values (sorted here).
    pub fn of(v: &mut [f64]) -> UtilStats {
        if v.is_empty() {
            return UtilStats::default();
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        UtilStats {
            links: v.len(),
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// One job's iterations under a policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct JobResult {
    /// Job name.
    pub name: String,
    /// Per iteration: duration, ns.
    pub iteration_ns: Vec<f64>,
    /// Per iteration: duration ÷ the ideal's duration of that iteration.
    pub ratio: Vec<f64>,
    /// Mean of `ratio`.
    pub mean_ratio: f64,
}

/// One policy's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Per job.
    pub jobs: Vec<JobResult>,
    /// Mean ratio of the job that suffers most (the table's figure).
    pub mean_ratio: f64,
    /// Largest ratio of any iteration of any job.
    pub max_ratio: f64,
    /// Link utilisation distribution.
    pub util: UtilStats,
    /// Per used fabric link: time-averaged utilisation (sorted).
    #[serde(skip)]
    pub link_util: Vec<f64>,
    /// Flows simulated (each QP of a connection counts).
    pub flows: usize,
    /// Rate recomputations.
    pub events: usize,
    /// Flows that never finished (unroutable after failures).
    pub unfinished: usize,
    /// Wall time of the simulation (and planning, for Foresight), s.
    pub wall_s: f64,
    /// Of which planning, s.
    pub plan_s: f64,
    /// Entropy steering's ports (`foresight-entropy` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steering: Option<SteeringStats>,
}
