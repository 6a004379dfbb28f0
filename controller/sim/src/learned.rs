//! What a learned periodic schedule buys (T+5): a training job that
//! announces nothing, whose iterations the controller learns
//! ([`planner::periodic`]) and reserves ahead.
//!
//! The network side comes from the simulator: one iteration's
//! communication time under ECMP, under Foresight's reservations and on
//! the ideal fabric ([`Phase`]), for the job as it starts and, optionally,
//! after it changes (another batch size: other bytes). The job side is a
//! loop: compute (its length drawn around `compute_ns` with relative
//! standard deviation `jitter`), then communication. Each iteration runs
//! reserved when the learner's prediction for it holds (the learner would
//! confirm it: same transfers, start inside its window) and under ECMP
//! otherwise: while learning, and when a prediction is wrong (the
//! iteration after a change). The learner then observes the iteration.
//!
//! Assumption, stated: a wrong prediction costs the iteration Foresight's
//! gain (it runs under ECMP) and nothing more; the reserved capacity it
//! held was idle.

use planner::periodic::{Learned, LearnerConfig, Observation, PeriodLearner, Transfer};
use planner::rng::Rng;

use crate::workload::normal;

/// One iteration's communication as the simulator times it.
#[derive(Clone, Debug)]
pub struct Phase {
    pub transfers: Vec<Transfer>,
    pub ecmp_ns: f64,
    pub foresight_ns: f64,
    pub ideal_ns: f64,
}

/// The job.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    pub iterations: usize,
    pub compute_ns: f64,
    /// Relative standard deviation of the compute time.
    pub jitter: f64,
    /// Iteration (0-based) from which the second phase runs.
    pub change_at: Option<usize>,
    pub seed: u64,
}

/// One iteration of the study.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub iteration: usize,
    pub phase: usize,
    pub comm_ns: f64,
    pub ideal_ns: f64,
    /// Ran on a reservation the learner made.
    pub reserved: bool,
    /// The learner predicted this iteration and was wrong.
    pub wrong: bool,
}

/// What the study found.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// First iteration that ran reserved.
    pub first_reserved: Option<usize>,
    /// After the change: iterations that ran unreserved (the changed one
    /// included) before one ran reserved again.
    pub relearned_after: Option<usize>,
    /// Of the iterations after the first reserved one, the fraction reserved.
    pub reserved_fraction: f64,
    /// Mean communication ÷ ideal over every iteration, and over the
    /// iterations after the first reserved one.
    pub mean_ratio: f64,
    pub steady_ratio: f64,
    /// The same job all ECMP, and all announced (every iteration reserved).
    pub ecmp_ratio: f64,
    pub announced_ratio: f64,
    pub wrong: usize,
    /// Communication time the wrong predictions cost over Foresight's, ns.
    pub wrong_cost_ns: f64,
}

/// Runs the job against the learner.
pub fn study(phases: &[Phase], job: Job, learner: LearnerConfig) -> (Vec<Row>, Summary) {
    assert!(!phases.is_empty() && phases.len() <= 2, "one or two phases");
    let mut rng = Rng::new(job.seed);
    let mut l = PeriodLearner::new(learner);
    let mut rows = Vec::with_capacity(job.iterations);
    let mut t = 0.0f64;
    for i in 0..job.iterations {
        let p = match job.change_at {
            Some(c) if i >= c && phases.len() == 2 => 1,
            _ => 0,
        };
        let phase = &phases[p];
        let compute =
            (job.compute_ns * (1.0 + job.jitter * normal(&mut rng))).max(0.1 * job.compute_ns);
        let start = t + compute;
        let observation = |duration: f64| Observation {
            start_ns: start as u64,
            duration_ns: duration as u64,
            transfers: phase.transfers.clone(),
        };
        let predicted = !l.predictions().is_empty();
        let holds = predicted
            && matches!(
                l.clone().observe(observation(phase.foresight_ns)),
                Ok(Learned::Confirmed)
            );
        let comm = if holds {
            phase.foresight_ns
        } else {
            phase.ecmp_ns
        };
        rows.push(Row {
            iteration: i,
            phase: p,
            comm_ns: comm,
            ideal_ns: phase.ideal_ns,
            reserved: holds,
            wrong: predicted && !holds,
        });
        l.observe(observation(comm))
            .expect("iterations are in time order and have transfers");
        t = start + comm;
    }
    let summary = summarise(&rows, phases, job);
    (rows, summary)
}

fn summarise(rows: &[Row], phases: &[Phase], job: Job) -> Summary {
    let ratio = |r: &Row| r.comm_ns / r.ideal_ns;
    let mean = |it: &mut dyn Iterator<Item = f64>| {
        let (s, n) = it.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if n == 0 {
            f64::NAN
        } else {
            s / n as f64
        }
    };
    let first_reserved = rows.iter().position(|r| r.reserved);
    let after = first_reserved.map_or(&rows[rows.len()..], |f| &rows[f..]);
    let relearned_after = job
        .change_at
        .and_then(|c| rows.iter().skip(c).position(|r| r.reserved));
    let phase_of = |r: &Row| &phases[r.phase];
    Summary {
        first_reserved,
        relearned_after,
        reserved_fraction: after.iter().filter(|r| r.reserved).count() as f64
            / after.len().max(1) as f64,
        mean_ratio: mean(&mut rows.iter().map(ratio)),
        steady_ratio: mean(&mut after.iter().map(ratio)),
        ecmp_ratio: mean(&mut rows.iter().map(|r| phase_of(r).ecmp_ns / r.ideal_ns)),
        announced_ratio: mean(&mut rows.iter().map(|r| phase_of(r).foresight_ns / r.ideal_ns)),
        wrong: rows.iter().filter(|r| r.wrong).count(),
        wrong_cost_ns: rows
            .iter()
            .filter(|r| r.wrong)
            .map(|r| r.comm_ns - phase_of(r).foresight_ns)
            .sum(),
    }
}

/// Per iteration, communication ÷ ideal of the job all ECMP, all
/// announced, and learned (T+5), as an SVG.
pub fn plot(
    path: &std::path::Path,
    rows: &[Row],
    phases: &[Phase],
    title: &str,
) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("{}: {e}", path.display());
    let series: [(&str, Vec<(f64, f64)>); 3] = [
        (
            "ECMP",
            rows.iter()
                .map(|r| (r.iteration as f64, phases[r.phase].ecmp_ns / r.ideal_ns))
                .collect(),
        ),
        (
            "announced (every iteration reserved)",
            rows.iter()
                .map(|r| {
                    (
                        r.iteration as f64,
                        phases[r.phase].foresight_ns / r.ideal_ns,
                    )
                })
                .collect(),
        ),
        (
            "learned (T+5)",
            rows.iter()
                .map(|r| (r.iteration as f64, r.comm_ns / r.ideal_ns))
                .collect(),
        ),
    ];
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(1.0, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..rows.len().max(1) as f64, 0f64..top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("iteration")
        .y_desc("communication / ideal")
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, pts)) in series.into_iter().enumerate() {
        let c = crate::output::colour([1, 4, 5][i]);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(bytes: u64, ecmp: f64, foresight: f64) -> Phase {
        Phase {
            transfers: (0..4)
                .map(|r| Transfer {
                    src: format!("h{r}"),
                    dst: format!("h{}", (r + 3) % 4),
                    bytes,
                })
                .collect(),
            ecmp_ns: ecmp,
            foresight_ns: foresight,
            ideal_ns: 1.0e6,
        }
    }

    fn job(jitter: f64, change_at: Option<usize>) -> Job {
        Job {
            iterations: 40,
            compute_ns: 5.0e6,
            jitter,
            change_at,
            seed: 7,
        }
    }

    #[test]
    fn a_steady_job_runs_reserved_from_iteration_k_on() {
        let cfg = LearnerConfig::default();
        let (rows, s) = study(&[phase(1 << 20, 2.0e6, 1.05e6)], job(0.0, None), cfg);
        assert_eq!(s.first_reserved, Some(cfg.lock_after));
        assert!(rows[..cfg.lock_after].iter().all(|r| !r.reserved));
        assert_eq!(s.reserved_fraction, 1.0);
        assert!((s.steady_ratio - 1.05).abs() < 1e-9);
        assert_eq!(s.wrong, 0);
    }

    #[test]
    fn a_change_costs_one_wrong_iteration_and_is_relearned() {
        let cfg = LearnerConfig::default();
        let phases = [phase(1 << 20, 2.0e6, 1.05e6), phase(2 << 20, 3.5e6, 2.1e6)];
        let (rows, s) = study(&phases, job(0.0, Some(20)), cfg);
        assert!(rows[20].wrong && !rows[20].reserved);
        assert_eq!(s.wrong, 1);
        assert!((s.wrong_cost_ns - (3.5e6 - 2.1e6)).abs() < 1.0);
        // The changed iteration starts the new run: it and k - 1 more run
        // unreserved, then every one is reserved.
        assert_eq!(s.relearned_after, Some(cfg.lock_after));
        assert!(rows[20 + cfg.lock_after..].iter().all(|r| r.reserved));
    }

    #[test]
    fn jitter_beyond_the_window_keeps_the_job_on_ecmp() {
        let cfg = LearnerConfig::default();
        let (_, s) = study(&[phase(1 << 20, 2.0e6, 1.05e6)], job(0.3, None), cfg);
        assert!(s.reserved_fraction < 0.5, "{s:?}");
        assert!(s.mean_ratio > 1.5, "{s:?}");
    }
}
