//! Learning a job's iteration period from what it does (the seed's T+5).
//!
//! Training runs repeat the same communication every iteration. A
//! [`PeriodLearner`] watches one job's iterations (each an [`Observation`]:
//! when its communication started, how long it lasted, which transfers it
//! made) and, once `lock_after` consecutive iterations agree (same
//! transfers, steady timing), predicts the next `horizon` iterations so
//! that the controller can reserve them before the job announces anything.
//!
//! Timing is learned two ways, and the steady one is used: the idle gap
//! from the end of one iteration's communication to the start of the next
//! (the compute between them: steady when communication ends the
//! iteration, as a data-parallel gradient all-reduce does, whatever the
//! network makes of the communication), else the start-to-start period
//! (steady when communication overlaps compute). The gap matters: a
//! reservation makes the communication faster, so the next iteration
//! starts earlier than the start-to-start period of the unreserved ones
//! says, and a period-only learner would take its own success for a
//! deviation. Every later iteration is checked against the
//! prediction: a match keeps the lock; a different start, different
//! transfers, or silence past the expected start is a [`Deviation`], the
//! predictions are withdrawn and learning starts again from the deviating
//! iteration.
//!
//! Where a job announces nothing, its iterations are seen in its traffic:
//! an [`IterationDetector`] turns the packets (or INT reports) of the job's
//! flows into observations, one per burst of communication.
//!
//! Pure logic over timestamps: no clock, no I/O. The caller says what it
//! observed and when it looked ([`PeriodLearner::expire`]).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// How sure the learner must be, and how far it looks ahead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearnerConfig {
    /// Consecutive matching iterations before predicting (at least 2: one
    /// gap is needed to measure a period).
    pub lock_after: usize,
    /// Allowed deviation of a gap from the period, as a fraction of it.
    pub jitter: f64,
    /// Allowed deviation of a transfer's bytes, as a fraction of them.
    pub bytes_tolerance: f64,
    /// Iterations predicted ahead.
    pub horizon: usize,
}

impl Default for LearnerConfig {
    fn default() -> Self {
        LearnerConfig {
            lock_after: 3,
            jitter: 0.05,
            bytes_tolerance: 0.05,
            horizon: 2,
        }
    }
}

/// One point-to-point transfer of an iteration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Transfer {
    pub src: String,
    pub dst: String,
    pub bytes: u64,
}

/// One iteration's communication as seen (announced, or measured).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub start_ns: u64,
    pub duration_ns: u64,
    pub transfers: Vec<Transfer>,
}

/// How the next start follows from the last iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cadence {
    /// The next start is the last end plus this gap.
    AfterEnd { gap_ns: u64 },
    /// The next start is the last start plus this period.
    Period { period_ns: u64 },
}

/// An iteration the learner expects.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// 1 for the iteration after the last one observed.
    pub ahead: usize,
    pub start_ns: u64,
    /// The last iteration's communication time.
    pub duration_ns: u64,
    /// The longest communication time of the latest agreeing iterations:
    /// what a reservation of this iteration should last, so that a step
    /// slower than the last one does not outlive it.
    pub longest_ns: u64,
    pub transfers: Vec<Transfer>,
}

/// Why the predictions were withdrawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Deviation {
    /// The iteration started outside the expected window.
    Shifted { expected_ns: u64, got_ns: u64 },
    /// The iteration made different transfers (another batch size, a rank
    /// more or less).
    Changed { what: String },
    /// Nothing arrived by the end of the expected window (the job stopped
    /// or slowed down).
    Missed { expected_ns: u64 },
}

impl fmt::Display for Deviation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deviation::Shifted {
                expected_ns,
                got_ns,
            } => write!(
                f,
                "iteration started at {got_ns} ns, expected {expected_ns} ns"
            ),
            Deviation::Changed { what } => write!(f, "iteration changed: {what}"),
            Deviation::Missed { expected_ns } => {
                write!(f, "no iteration by the window around {expected_ns} ns")
            }
        }
    }
}

/// What an observation did to the learner.
#[derive(Debug, Clone, PartialEq)]
pub enum Learned {
    /// Still learning: this many consecutive iterations agree.
    Learning { agreeing: usize },
    /// The cadence is known from now on.
    Locked(Cadence),
    /// The iteration matched the prediction.
    Confirmed,
    /// The iteration did not match: predictions withdrawn, learning again.
    Deviated(Deviation),
}

/// A bad observation (the learner is left as it was).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObservationError {
    #[error("observation starts at {got_ns} ns, before the previous one at {previous_ns} ns")]
    OutOfOrder { previous_ns: u64, got_ns: u64 },
    #[error("observation has no transfers")]
    Empty,
}

#[derive(Debug, Clone)]
struct Lock {
    cadence: Cadence,
    last_start_ns: u64,
    last_end_ns: u64,
    duration_ns: u64,
    transfers: Vec<Transfer>,
}

impl Lock {
    /// The expected start of the iteration `ahead` iterations on, and the
    /// window scale (its gap or period) the jitter applies to.
    fn expected(&self, ahead: u64) -> (u64, u64) {
        match self.cadence {
            Cadence::AfterEnd { gap_ns } => (
                self.last_end_ns + gap_ns + (ahead - 1) * (self.duration_ns + gap_ns),
                (gap_ns + self.duration_ns).max(1),
            ),
            Cadence::Period { period_ns } => (self.last_start_ns + ahead * period_ns, period_ns),
        }
    }
}

/// One job's period learner.
#[derive(Debug, Clone)]
pub struct PeriodLearner {
    config: LearnerConfig,
    /// The latest consecutive iterations that agree with each other.
    agreeing: VecDeque<Observation>,
    lock: Option<Lock>,
}

impl PeriodLearner {
    pub fn new(config: LearnerConfig) -> PeriodLearner {
        PeriodLearner {
            config: LearnerConfig {
                lock_after: config.lock_after.max(2),
                ..config
            },
            agreeing: VecDeque::new(),
            lock: None,
        }
    }

    /// The cadence once locked.
    pub fn cadence(&self) -> Option<Cadence> {
        self.lock.as_ref().map(|l| l.cadence)
    }

    /// Take one iteration into account.
    pub fn observe(&mut self, mut obs: Observation) -> Result<Learned, ObservationError> {
        if obs.transfers.is_empty() {
            return Err(ObservationError::Empty);
        }
        if let Some(prev) = self.agreeing.back() {
            if obs.start_ns < prev.start_ns {
                return Err(ObservationError::OutOfOrder {
                    previous_ns: prev.start_ns,
                    got_ns: obs.start_ns,
                });
            }
        }
        obs.transfers.sort();
        if let Some(lock) = &self.lock {
            let (expected, scale) = lock.expected(1);
            let deviation = if !self.within_window(obs.start_ns, expected, scale) {
                Some(Deviation::Shifted {
                    expected_ns: expected,
                    got_ns: obs.start_ns,
                })
            } else {
                self.difference(&lock.transfers, &obs.transfers)
                    .map(|what| Deviation::Changed { what })
            };
            return Ok(match deviation {
                None => {
                    let lock = self.lock.as_mut().expect("locked");
                    lock.last_start_ns = obs.start_ns;
                    lock.last_end_ns = obs.start_ns + obs.duration_ns;
                    lock.duration_ns = obs.duration_ns;
                    self.agreeing.pop_front();
                    self.agreeing.push_back(obs);
                    Learned::Confirmed
                }
                Some(d) => {
                    self.relearn_from(obs);
                    Learned::Deviated(d)
                }
            });
        }
        let agrees = self
            .agreeing
            .back()
            .is_some_and(|prev| self.difference(&prev.transfers, &obs.transfers).is_none());
        if !agrees {
            self.agreeing.clear();
        }
        self.agreeing.push_back(obs);
        while self.agreeing.len() > self.config.lock_after {
            self.agreeing.pop_front();
        }
        if self.agreeing.len() == self.config.lock_after {
            if let Some(cadence) = self.steady_cadence() {
                let last = self.agreeing.back().expect("non-empty");
                self.lock = Some(Lock {
                    cadence,
                    last_start_ns: last.start_ns,
                    last_end_ns: last.start_ns + last.duration_ns,
                    duration_ns: last.duration_ns,
                    transfers: last.transfers.clone(),
                });
                return Ok(Learned::Locked(cadence));
            }
            // Agreeing transfers at an irregular pace: keep the latest ones
            // and wait for a steadier run.
            self.agreeing.pop_front();
        }
        Ok(Learned::Learning {
            agreeing: self.agreeing.len(),
        })
    }

    /// Called when time passes without an observation: once the expected
    /// iteration's window has closed, the predictions are withdrawn.
    pub fn expire(&mut self, now_ns: u64) -> Option<Deviation> {
        let lock = self.lock.as_ref()?;
        let (expected, scale) = lock.expected(1);
        let slack = (scale as f64 * self.config.jitter) as u64;
        if now_ns <= expected + slack {
            return None;
        }
        self.lock = None;
        self.agreeing.clear();
        Some(Deviation::Missed {
            expected_ns: expected,
        })
    }

    /// The next `horizon` iterations, empty while learning. Beyond the next
    /// one they assume the last iteration's communication time.
    pub fn predictions(&self) -> Vec<Prediction> {
        let Some(lock) = &self.lock else {
            return Vec::new();
        };
        // The agreeing iterations end with the last one (the lock's).
        let longest_ns = self
            .agreeing
            .iter()
            .map(|o| o.duration_ns)
            .max()
            .unwrap_or(lock.duration_ns);
        (1..=self.config.horizon)
            .map(|ahead| Prediction {
                ahead,
                start_ns: lock.expected(ahead as u64).0,
                duration_ns: lock.duration_ns,
                longest_ns,
                transfers: lock.transfers.clone(),
            })
            .collect()
    }

    fn relearn_from(&mut self, obs: Observation) {
        self.lock = None;
        self.agreeing.clear();
        self.agreeing.push_back(obs);
    }

    fn within_window(&self, got: u64, expected: u64, period: u64) -> bool {
        got.abs_diff(expected) as f64 <= self.config.jitter * period as f64
    }

    /// The cadence of the agreeing run: the idle gap if every gap is within
    /// jitter of the median (relative to gap + communication), else the
    /// start-to-start period if every period is within jitter of theirs.
    fn steady_cadence(&self) -> Option<Cadence> {
        let runs: Vec<&Observation> = self.agreeing.iter().collect();
        let steady = |values: &mut Vec<i128>, scale: &dyn Fn(i128) -> f64| {
            values.sort_unstable();
            let median = values[values.len() / 2];
            values
                .iter()
                .all(|&v| (v - median).abs() as f64 <= self.config.jitter * scale(median))
                .then_some(median)
        };
        let mut gaps: Vec<i128> = runs
            .windows(2)
            .map(|w| w[1].start_ns as i128 - (w[0].start_ns + w[0].duration_ns) as i128)
            .collect();
        let duration = runs.last().map_or(0, |o| o.duration_ns) as i128;
        if let Some(gap) = steady(&mut gaps, &|g| (g + duration) as f64) {
            if gap > 0 {
                return Some(Cadence::AfterEnd { gap_ns: gap as u64 });
            }
        }
        let mut periods: Vec<i128> = runs
            .windows(2)
            .map(|w| (w[1].start_ns - w[0].start_ns) as i128)
            .collect();
        match steady(&mut periods, &|p| p as f64) {
            Some(p) if p > 0 => Some(Cadence::Period {
                period_ns: p as u64,
            }),
            _ => None,
        }
    }

    /// How two iterations' (sorted) transfers differ, if they do.
    fn difference(&self, a: &[Transfer], b: &[Transfer]) -> Option<String> {
        if a.len() != b.len() {
            return Some(format!("{} transfers, expected {}", b.len(), a.len()));
        }
        for (x, y) in a.iter().zip(b) {
            if (&x.src, &x.dst) != (&y.src, &y.dst) {
                return Some(format!(
                    "transfer {} -> {} instead of {} -> {}",
                    y.src, y.dst, x.src, x.dst
                ));
            }
            if x.bytes.abs_diff(y.bytes) as f64 > self.config.bytes_tolerance * x.bytes as f64 {
                return Some(format!(
                    "{} -> {}: {} bytes, expected {}",
                    y.src, y.dst, y.bytes, x.bytes
                ));
            }
        }
        None
    }
}

/// One job's traffic cut into iterations: a burst of communication ends
/// once none of the job's flows has been seen for `idle_ns` (shorter than
/// the job's compute between iterations, longer than the pauses inside its
/// communication).
#[derive(Debug, Clone)]
pub struct IterationDetector {
    idle_ns: u64,
    burst: Option<Burst>,
}

#[derive(Debug, Clone)]
struct Burst {
    start_ns: u64,
    last_ns: u64,
    bytes: BTreeMap<(String, String), u64>,
}

impl Burst {
    fn observation(self) -> Observation {
        Observation {
            start_ns: self.start_ns,
            duration_ns: self.last_ns - self.start_ns,
            transfers: self
                .bytes
                .into_iter()
                .map(|((src, dst), bytes)| Transfer { src, dst, bytes })
                .collect(),
        }
    }
}

impl IterationDetector {
    pub fn new(idle_ns: u64) -> IterationDetector {
        IterationDetector {
            idle_ns: idle_ns.max(1),
            burst: None,
        }
    }

    /// `bytes` of the job's flow `src` -> `dst` seen at `at_ns`. Returns the
    /// previous iteration when this one starts a new burst. A record a
    /// little older than the latest (reports arrive out of order) counts
    /// in the current burst.
    pub fn record(&mut self, src: &str, dst: &str, bytes: u64, at_ns: u64) -> Option<Observation> {
        let closed = match &self.burst {
            Some(b) if at_ns > b.last_ns + self.idle_ns => self.burst.take(),
            _ => None,
        };
        let b = self.burst.get_or_insert_with(|| Burst {
            start_ns: at_ns,
            last_ns: at_ns,
            bytes: BTreeMap::new(),
        });
        b.start_ns = b.start_ns.min(at_ns);
        b.last_ns = b.last_ns.max(at_ns);
        *b.bytes
            .entry((src.to_string(), dst.to_string()))
            .or_default() += bytes;
        closed.map(Burst::observation)
    }

    /// When the burst in progress started, if one is.
    pub fn open_since(&self) -> Option<u64> {
        self.burst.as_ref().map(|b| b.start_ns)
    }

    /// The current iteration, once nothing has been seen for `idle_ns` by
    /// `now_ns`.
    pub fn flush(&mut self, now_ns: u64) -> Option<Observation> {
        match &self.burst {
            Some(b) if now_ns > b.last_ns + self.idle_ns => {
                self.burst.take().map(Burst::observation)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ring(bytes: u64) -> Vec<Transfer> {
        (0..4)
            .map(|r| Transfer {
                src: format!("h{r}"),
                dst: format!("h{}", (r + 3) % 4),
                bytes,
            })
            .collect()
    }

    fn iteration(start_ms: f64, bytes: u64) -> Observation {
        Observation {
            start_ns: (start_ms * MS as f64) as u64,
            duration_ns: 40 * MS,
            transfers: ring(bytes),
        }
    }

    #[test]
    fn locks_after_k_steady_iterations_and_predicts_the_next() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        // 100 ms period with up to 2 ms of jitter.
        assert_eq!(
            l.observe(iteration(0.0, 1 << 20)).unwrap(),
            Learned::Learning { agreeing: 1 }
        );
        assert_eq!(
            l.observe(iteration(101.0, 1 << 20)).unwrap(),
            Learned::Learning { agreeing: 2 }
        );
        assert!(l.predictions().is_empty());
        // Gaps after the 40 ms of communication: 61 and 58 ms.
        assert_eq!(
            l.observe(iteration(199.0, 1 << 20)).unwrap(),
            Learned::Locked(Cadence::AfterEnd { gap_ns: 61 * MS })
        );
        let p = l.predictions();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].start_ns, 300 * MS);
        assert_eq!(p[1].start_ns, 401 * MS);
        assert_eq!(p[0].transfers, ring(1 << 20));
        assert_eq!(
            l.observe(iteration(302.0, 1 << 20)).unwrap(),
            Learned::Confirmed
        );
        assert_eq!(l.predictions()[0].start_ns, 403 * MS);
    }

    #[test]
    fn an_irregular_pace_does_not_lock() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        for start in [0.0, 100.0, 250.0, 320.0, 500.0] {
            let r = l.observe(iteration(start, 1000)).unwrap();
            assert!(matches!(r, Learned::Learning { .. }), "{r:?}");
        }
        assert!(l.predictions().is_empty());
    }

    #[test]
    fn a_changed_batch_size_withdraws_and_relearns_within_k() {
        let cfg = LearnerConfig::default();
        let mut l = PeriodLearner::new(cfg);
        for i in 0..20 {
            l.observe(iteration(i as f64 * 100.0, 1 << 20)).unwrap();
        }
        assert_eq!(l.cadence(), Some(Cadence::AfterEnd { gap_ns: 60 * MS }));
        // Iteration 20: twice the bytes and a 150 ms period from now on.
        let r = l.observe(iteration(2000.0, 2 << 20)).unwrap();
        assert!(
            matches!(r, Learned::Deviated(Deviation::Changed { .. })),
            "{r:?}"
        );
        assert!(l.predictions().is_empty(), "withdrawn at once");
        let mut relearned_after = None;
        for i in 1..=cfg.lock_after {
            let r = l
                .observe(iteration(2000.0 + i as f64 * 150.0, 2 << 20))
                .unwrap();
            if let Learned::Locked(cadence) = r {
                assert_eq!(cadence, Cadence::AfterEnd { gap_ns: 110 * MS });
                relearned_after = Some(i);
                break;
            }
        }
        // The deviating iteration counts as the first of the new run.
        assert_eq!(relearned_after, Some(cfg.lock_after - 1));
        assert_eq!(l.predictions()[0].transfers, ring(2 << 20));
    }

    #[test]
    fn a_stopped_job_loses_its_predictions_within_one_period() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        for i in 0..4 {
            l.observe(iteration(i as f64 * 100.0, 1000)).unwrap();
        }
        assert_eq!(l.predictions()[0].start_ns, 400 * MS);
        assert_eq!(l.expire(404 * MS), None, "still inside the window");
        assert_eq!(
            l.expire(406 * MS),
            Some(Deviation::Missed {
                expected_ns: 400 * MS
            })
        );
        assert!(l.predictions().is_empty());
        assert_eq!(l.expire(900 * MS), None, "withdrawn once");
    }

    #[test]
    fn a_late_iteration_is_a_shift_and_small_byte_noise_is_not_a_change() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        for i in 0..3 {
            l.observe(iteration(i as f64 * 100.0, 10_000)).unwrap();
        }
        assert_eq!(
            l.observe(iteration(300.0, 10_300)).unwrap(),
            Learned::Confirmed,
            "3 % more bytes is within tolerance"
        );
        let r = l.observe(iteration(430.0, 10_000)).unwrap();
        assert_eq!(
            r,
            Learned::Deviated(Deviation::Shifted {
                expected_ns: 400 * MS,
                got_ns: 430 * MS
            })
        );
    }

    #[test]
    fn faster_communication_under_a_reservation_is_not_a_deviation() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        for i in 0..3 {
            l.observe(iteration(i as f64 * 100.0, 1000)).unwrap();
        }
        // Reserved: 20 ms of communication instead of 40, so the next
        // iteration starts 20 ms earlier than a start-to-start period says.
        assert_eq!(l.predictions()[0].start_ns, 300 * MS);
        let fast = |start_ms: u64| Observation {
            start_ns: start_ms * MS,
            duration_ns: 20 * MS,
            transfers: ring(1000),
        };
        assert_eq!(l.observe(fast(300)).unwrap(), Learned::Confirmed);
        assert_eq!(l.predictions()[0].start_ns, 380 * MS);
        assert_eq!(l.observe(fast(380)).unwrap(), Learned::Confirmed);
    }

    #[test]
    fn overlapping_communication_locks_on_the_period() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        // Communication that overlaps compute: its length varies, its start
        // follows a steady 100 ms period.
        for (i, d) in [30u64, 90, 55].into_iter().enumerate() {
            let r = l
                .observe(Observation {
                    start_ns: i as u64 * 100 * MS,
                    duration_ns: d * MS,
                    transfers: ring(1000),
                })
                .unwrap();
            if i == 2 {
                assert_eq!(
                    r,
                    Learned::Locked(Cadence::Period {
                        period_ns: 100 * MS
                    })
                );
            }
        }
        assert_eq!(l.predictions()[1].start_ns, 400 * MS);
        // Reserved for the slowest of the three (90 ms), not the last (55).
        assert_eq!(l.predictions()[0].duration_ns, 55 * MS);
        assert_eq!(l.predictions()[0].longest_ns, 90 * MS);
        // The slow one leaves the k latest: the reservation shrinks back.
        for (i, d) in [(3u64, 50u64), (4, 50)] {
            let obs = Observation {
                start_ns: i * 100 * MS,
                duration_ns: d * MS,
                transfers: ring(1000),
            };
            assert_eq!(l.observe(obs).unwrap(), Learned::Confirmed);
        }
        assert_eq!(l.predictions()[0].longest_ns, 55 * MS);
    }

    #[test]
    fn bursts_of_traffic_become_iterations_the_learner_locks_on() {
        let mut d = IterationDetector::new(10 * MS);
        let mut l = PeriodLearner::new(LearnerConfig::default());
        let mut locked = None;
        // Every 100 ms, 40 ms of packets (one per ms per ring neighbour),
        // reported slightly out of order.
        for it in 0..5u64 {
            for ms in 0..40u64 {
                for r in 0..4 {
                    // Odd milliseconds reported before the even one ahead.
                    let at = (it * 100 + ms) * MS + if ms % 2 == 0 { 900_000 } else { 0 }
                        - if ms % 2 == 1 { 300_000 } else { 0 };
                    let src = format!("h{r}");
                    let dst = format!("h{}", (r + 3) % 4);
                    if let Some(obs) = d.record(&src, &dst, 1024, at) {
                        assert_eq!(obs.transfers, ring(40 * 1024));
                        if let Learned::Locked(c) = l.observe(obs).unwrap() {
                            locked = Some((it, c));
                        }
                    }
                }
            }
        }
        // Iterations 0..2 close when 1..3 start: locked when the third is
        // observed, as iteration 3 begins. Each burst runs from 0.7 ms
        // (ms 1, early) to 38.9 ms (ms 38, late): gap 100.7 - 38.9.
        assert_eq!(locked, Some((3, Cadence::AfterEnd { gap_ns: 61_800_000 })));
        assert_eq!(d.flush(445 * MS), None, "idle only 6.1 ms");
        let last = d.flush(460 * MS).expect("closed by idleness");
        assert_eq!(last.start_ns, 400 * MS + 700_000);
        assert_eq!(l.observe(last).unwrap(), Learned::Confirmed);
    }

    #[test]
    fn bad_observations_are_refused_and_change_nothing() {
        let mut l = PeriodLearner::new(LearnerConfig::default());
        for i in 0..3 {
            l.observe(iteration(100.0 + i as f64 * 100.0, 1000))
                .unwrap();
        }
        let before = l.predictions();
        assert_eq!(
            l.observe(iteration(50.0, 1000)),
            Err(ObservationError::OutOfOrder {
                previous_ns: 300 * MS,
                got_ns: 50 * MS
            })
        );
        let mut empty = iteration(400.0, 1000);
        empty.transfers.clear();
        assert_eq!(l.observe(empty), Err(ObservationError::Empty));
        assert_eq!(l.predictions(), before);
    }
}
