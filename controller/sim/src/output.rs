//! Results as a text table, CSV files and SVG plots.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

use crate::PolicyResult;

/// The per-policy table (iteration time ÷ ideal of the job that suffers
/// most, utilisation distribution), then, with several jobs, each job's
/// mean ratio.
pub fn table(results: &[PolicyResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<17} {:>10} {:>10} {:>12} {:>7} {:>6} {:>6} {:>6} {:>6} {:>9} {:>8}",
        "policy",
        "iter/ideal",
        "worst",
        "iter ms",
        "links",
        "u.p50",
        "u.p90",
        "u.p99",
        "u.max",
        "flows",
        "sim s"
    );
    for r in results {
        let worst = r
            .jobs
            .iter()
            .max_by(|a, b| a.mean_ratio.total_cmp(&b.mean_ratio))
            .map_or(&[][..], |j| &j.iteration_ns[..]);
        let mean_ms = worst.iter().sum::<f64>() / worst.len().max(1) as f64 / 1e6;
        let _ = writeln!(
            s,
            "{:<17} {:>10.3} {:>10.3} {:>12.3} {:>7} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9} {:>8.3}{}",
            r.policy,
            r.mean_ratio,
            r.max_ratio,
            mean_ms,
            r.util.links,
            r.util.p50,
            r.util.p90,
            r.util.p99,
            r.util.max,
            r.flows,
            r.wall_s,
            if r.unfinished > 0 {
                format!("  ({} flows never finished)", r.unfinished)
            } else {
                String::new()
            }
        );
    }
    for r in results {
        if let Some(st) = &r.steering {
            let _ = writeln!(
                s,
                "{}: {} reserved flows, {} steered by source port, {} without a port ({:.3} %); search {:.1} ms ({:.2} us per flow, at most {} ports tried)",
                r.policy,
                st.reserved,
                st.steered,
                st.no_port,
                100.0 * st.no_port as f64 / st.reserved.max(1) as f64,
                st.search_s * 1e3,
                st.search_s * 1e6 / st.reserved.max(1) as f64,
                st.max_tried
            );
        }
    }
    if results.first().is_some_and(|r| r.jobs.len() > 1) {
        let _ = write!(s, "\nmean iteration / ideal per job\n{:<17}", "policy");
        for j in &results[0].jobs {
            let _ = write!(s, " {:>10}", j.name);
        }
        s.push('\n');
        for r in results {
            let _ = write!(s, "{:<17}", r.policy);
            for j in &r.jobs {
                let _ = write!(s, " {:>10.3}", j.mean_ratio);
            }
            s.push('\n');
        }
    }
    s
}

/// The results of one workload at one size, a row of the policy ×
/// workload × size table.
pub struct SuiteRow {
    /// Workload (scenario) name.
    pub workload: String,
    /// GPUs.
    pub gpus: u32,
    /// The ideal first, then the policies.
    pub results: Vec<PolicyResult>,
}

/// The policy × workload × size table in Markdown: mean iteration time ÷
/// ideal of the job that suffers most.
pub fn suite_markdown(rows: &[SuiteRow]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let mut s = String::from("| workload | GPUs |");
    for r in first.results.iter().skip(1) {
        let _ = write!(s, " {} |", r.policy);
    }
    s.push_str("\n|---|---:|");
    for _ in first.results.iter().skip(1) {
        s.push_str("---:|");
    }
    s.push('\n');
    for row in rows {
        let _ = write!(s, "| {} | {} |", row.workload, row.gpus);
        for r in row.results.iter().skip(1) {
            if r.unfinished > 0 {
                let _ = write!(s, " stuck ({}) |", r.unfinished);
            } else {
                let _ = write!(s, " {:.2} |", r.mean_ratio);
            }
        }
        s.push('\n');
    }
    s
}

/// The table as CSV, one line per workload, size, policy and job.
pub fn suite_csv(rows: &[SuiteRow]) -> String {
    let mut s = String::from(
        "workload,gpus,policy,job,mean_ratio,max_ratio,ideal_mean_iteration_ns,iterations,unfinished,wall_s\n",
    );
    for row in rows {
        let ideal = &row.results[0];
        for r in row.results.iter().skip(1) {
            for (k, j) in r.jobs.iter().enumerate() {
                let id = &ideal.jobs[k].iteration_ns;
                let _ = writeln!(
                    s,
                    "{},{},{},{},{:.6},{:.6},{:.1},{},{},{:.3}",
                    row.workload,
                    row.gpus,
                    r.policy,
                    j.name,
                    j.mean_ratio,
                    j.ratio.iter().copied().fold(0.0, f64::max),
                    id.iter().sum::<f64>() / id.len().max(1) as f64,
                    j.iteration_ns.len(),
                    r.unfinished,
                    r.wall_s
                );
            }
        }
    }
    s
}

/// Writes `iterations.csv`, `summary.csv`, `link_util.csv`, `ratio.svg`
/// and `util_cdf.svg` into `dir`.
pub fn write_all(dir: &Path, results: &[PolicyResult]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let w = |name: &str, body: String| {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))
    };
    let ideal = results.iter().find(|r| r.policy == "ideal");
    let mut it = String::from("policy,job,iteration,iteration_ns,ideal_ns,ratio\n");
    for r in results {
        for (k, j) in r.jobs.iter().enumerate() {
            for (i, (&t, &q)) in j.iteration_ns.iter().zip(&j.ratio).enumerate() {
                let id = ideal.map_or(f64::NAN, |x| x.jobs[k].iteration_ns[i]);
                let _ = writeln!(it, "{},{},{i},{t:.1},{id:.1},{q:.6}", r.policy, j.name);
            }
        }
    }
    w("iterations.csv", it)?;
    let mut su = String::from(
        "policy,mean_ratio,max_ratio,links,util_mean,util_p50,util_p90,util_p99,util_max,flows,events,unfinished,wall_s,plan_s\n",
    );
    for r in results {
        let u = &r.util;
        let _ = writeln!(
            su,
            "{},{:.6},{:.6},{},{:.4},{:.4},{:.4},{:.4},{:.4},{},{},{},{:.4},{:.4}",
            r.policy,
            r.mean_ratio,
            r.max_ratio,
            u.links,
            u.mean,
            u.p50,
            u.p90,
            u.p99,
            u.max,
            r.flows,
            r.events,
            r.unfinished,
            r.wall_s,
            r.plan_s
        );
    }
    w("summary.csv", su)?;
    let mut lu = String::from("policy,rank,utilisation\n");
    for r in results {
        for (i, u) in r.link_util.iter().enumerate() {
            let _ = writeln!(lu, "{},{i},{u:.5}", r.policy);
        }
    }
    w("link_util.csv", lu)?;
    plot_ratio(&dir.join("ratio.svg"), results)?;
    plot_cdf(&dir.join("util_cdf.svg"), results)?;
    Ok(())
}

pub(crate) fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 6] = [
        RGBColor(120, 120, 120),
        RGBColor(214, 39, 40),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
    ];
    C[i % C.len()]
}

fn plot_ratio(path: &Path, results: &[PolicyResult]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let top = results
        .iter()
        .map(|r| {
            if r.max_ratio.is_finite() {
                r.max_ratio
            } else {
                1.0
            }
        })
        .fold(1.0, f64::max)
        * 1.15;
    let n = results.len();
    let names: Vec<String> = results.iter().map(|r| r.policy.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "iteration time / ideal (bar: mean, line: worst)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc("× ideal")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .draw_series(results.iter().enumerate().map(|(i, r)| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.35, 0.0), (x + 0.35, r.mean_ratio.min(top))],
                colour(i).filled(),
            )
        }))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .draw_series(results.iter().enumerate().map(|(i, r)| {
            let x = i as f64;
            PathElement::new(
                vec![
                    (x - 0.35, r.max_ratio.min(top)),
                    (x + 0.35, r.max_ratio.min(top)),
                ],
                BLACK.stroke_width(2),
            )
        }))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

fn plot_cdf(path: &Path, results: &[PolicyResult]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "fabric link utilisation (CDF over used links)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..1.05, 0f64..1.0)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("time-averaged utilisation")
        .y_desc("fraction of links")
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (i, r) in results.iter().enumerate() {
        if r.link_util.is_empty() {
            continue;
        }
        let n = r.link_util.len() as f64;
        let pts: Vec<(f64, f64)> = r
            .link_util
            .iter()
            .enumerate()
            .map(|(k, &u)| (u.min(1.05), (k + 1) as f64 / n))
            .collect();
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(r.policy.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}
