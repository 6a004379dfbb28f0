//! Results as a text table, CSV files and SVG plots.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

use crate::PolicyResult;

/// The per-policy table (iteration time ÷ ideal, utilisation distribution).
pub fn table(results: &[PolicyResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:>10} {:>10} {:>12} {:>7} {:>6} {:>6} {:>6} {:>6} {:>9} {:>8}",
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
        let mean_ms = r.iteration_ns.iter().sum::<f64>() / r.iteration_ns.len().max(1) as f64 / 1e6;
        let _ = writeln!(
            s,
            "{:<12} {:>10.3} {:>10.3} {:>12.3} {:>7} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>9} {:>8.3}{}",
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
    let mut it = String::from("policy,iteration,iteration_ns,ideal_ns,ratio\n");
    for r in results {
        for (i, (&t, &q)) in r.iteration_ns.iter().zip(&r.ratio).enumerate() {
            let id = ideal.map_or(f64::NAN, |x| x.iteration_ns[i]);
            let _ = writeln!(it, "{},{i},{t:.1},{id:.1},{q:.6}", r.policy);
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

fn colour(i: usize) -> RGBColor {
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
