//! Prometheus metrics, rendered in the text exposition format (0.0.4).
//!
//! Counters and histograms live here; gauges that describe current state
//! (reservations by state, switch sessions, link loads) are rendered from a
//! status snapshot at scrape time, so they can never drift from it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use installer::reconcile::Diff;

use super::api::StatusView;
use super::switches::ReconcileReport;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

/// A cumulative histogram (also keeps raw samples, bounded, for quantiles).
#[derive(Default)]
pub struct Histogram {
    inner: Mutex<HistInner>,
}

#[derive(Default)]
struct HistInner {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn observe(&self, secs: f64) {
        let mut h = self.inner.lock().expect("metrics lock");
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += secs;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let h = self.inner.lock().expect("metrics lock");
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {}", h.counts[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}", h.sum);
        let _ = writeln!(out, "{name}_count {}", h.count);
    }
}

#[derive(Default)]
pub struct Metrics {
    /// NDSP requests by (rpc, gRPC code).
    requests: Mutex<BTreeMap<(String, String), u64>>,
    /// Reservation outcomes by status.
    outcomes: Mutex<BTreeMap<String, u64>>,
    /// From an NDSP request received to all its entries acknowledged.
    pub install_latency: Histogram,
    /// One planner call.
    pub planner_time: Histogram,
    /// One write of a diff to one switch.
    pub write_latency: Histogram,
    /// Entity changes written, by (switch, kind).
    changes: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Last reconciliation per switch.
    reconciles: Mutex<BTreeMap<String, ReconcileReport>>,
    pub int_reports: AtomicU64,
    pub int_bad_reports: AtomicU64,
    pub state_write_errors: AtomicU64,
}

impl Metrics {
    pub fn request(&self, rpc: &str, code: tonic::Code) {
        let code = format!("{code:?}");
        *self
            .requests
            .lock()
            .expect("metrics lock")
            .entry((rpc.to_string(), code))
            .or_default() += 1;
    }

    pub fn outcome(&self, status: &str) {
        *self
            .outcomes
            .lock()
            .expect("metrics lock")
            .entry(status.to_string())
            .or_default() += 1;
    }

    pub fn applied(&self, switch: &str, diff: &Diff, took: Duration) {
        self.write_latency.observe(took.as_secs_f64());
        let mut c = self.changes.lock().expect("metrics lock");
        for (kind, n) in [
            ("insert", diff.insert.len()),
            ("modify", diff.modify.len()),
            ("delete", diff.delete.len()),
        ] {
            *c.entry((switch.to_string(), kind)).or_default() += n as u64;
        }
    }

    pub fn reconciled(&self, switch: &str, report: &ReconcileReport) {
        let mut c = self.changes.lock().expect("metrics lock");
        for (kind, n) in [
            ("insert", report.inserted),
            ("modify", report.modified),
            ("delete", report.deleted),
        ] {
            *c.entry((switch.to_string(), kind)).or_default() += n as u64;
        }
        drop(c);
        self.reconciles
            .lock()
            .expect("metrics lock")
            .insert(switch.to_string(), report.clone());
    }

    /// The whole exposition, gauges from `status`.
    pub fn render(&self, status: &StatusView) -> String {
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(w, "# HELP foresight_reservations Reservations by lifecycle state.\n# TYPE foresight_reservations gauge");
        for (state, n) in &status.reservations.by_state {
            let _ = writeln!(w, "foresight_reservations{{state=\"{state}\"}} {n}");
        }
        let _ = writeln!(w, "# HELP foresight_reserved_flows_installed Reserved flows whose entries are on the switches.\n# TYPE foresight_reserved_flows_installed gauge");
        let _ = writeln!(
            w,
            "foresight_reserved_flows_installed {}",
            status.reservations.installed_flows
        );
        let _ = writeln!(w, "# HELP foresight_reservation_outcomes_total Reservation outcomes (admission decisions) by status.\n# TYPE foresight_reservation_outcomes_total counter");
        for (s, n) in self.outcomes.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                w,
                "foresight_reservation_outcomes_total{{status=\"{s}\"}} {n}"
            );
        }
        let _ = writeln!(w, "# HELP foresight_ndsp_requests_total NDSP requests by RPC and gRPC status code.\n# TYPE foresight_ndsp_requests_total counter");
        for ((rpc, code), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                w,
                "foresight_ndsp_requests_total{{rpc=\"{rpc}\",code=\"{code}\"}} {n}"
            );
        }
        self.install_latency.render(
            w,
            "foresight_install_latency_seconds",
            "From an NDSP request received to all of its due entries acknowledged by every switch.",
        );
        self.planner_time
            .render(w, "foresight_planner_seconds", "Time of one planner call.");
        self.write_latency.render(
            w,
            "foresight_switch_write_seconds",
            "Time to write one intended-state change to one switch.",
        );
        let _ = writeln!(w, "# HELP foresight_switch_changes_total Entities written to switches, by kind.\n# TYPE foresight_switch_changes_total counter");
        for ((sw, kind), n) in self.changes.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                w,
                "foresight_switch_changes_total{{switch=\"{sw}\",kind=\"{kind}\"}} {n}"
            );
        }
        let _ = writeln!(w, "# HELP foresight_reconcile_seconds Duration of the last reconciliation of each switch.\n# TYPE foresight_reconcile_seconds gauge");
        for (sw, r) in self.reconciles.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                w,
                "foresight_reconcile_seconds{{switch=\"{sw}\"}} {}",
                r.millis / 1e3
            );
        }
        let _ = writeln!(w, "# HELP foresight_switch_up Whether the controller has a session with the switch.\n# TYPE foresight_switch_up gauge");
        for s in &status.switches {
            let _ = writeln!(
                w,
                "foresight_switch_up{{switch=\"{}\"}} {}",
                s.name,
                u8::from(s.status.connected)
            );
        }
        let _ = writeln!(w, "# HELP foresight_switch_primary Whether the controller is the switch's primary client.\n# TYPE foresight_switch_primary gauge");
        for s in &status.switches {
            let _ = writeln!(
                w,
                "foresight_switch_primary{{switch=\"{}\"}} {}",
                s.name,
                u8::from(s.status.primary)
            );
        }
        let _ = writeln!(w, "# HELP foresight_link_reserved_bps Bandwidth reserved on a directed link now.\n# TYPE foresight_link_reserved_bps gauge");
        for l in &status.links {
            let _ = writeln!(
                w,
                "foresight_link_reserved_bps{{link=\"{}\"}} {}",
                l.link, l.reserved_bps
            );
        }
        let _ = writeln!(w, "# HELP foresight_link_utilization Measured egress utilisation of a directed link (INT reports), 0..1.\n# TYPE foresight_link_utilization gauge");
        for l in &status.links {
            if let Some(u) = l.utilization {
                let _ = writeln!(w, "foresight_link_utilization{{link=\"{}\"}} {u}", l.link);
            }
        }
        let _ = writeln!(w, "# HELP foresight_int_reports_total INT telemetry reports received.\n# TYPE foresight_int_reports_total counter");
        let _ = writeln!(
            w,
            "foresight_int_reports_total {}",
            self.int_reports.load(Ordering::Relaxed)
        );
        let _ = writeln!(w, "# HELP foresight_int_bad_reports_total Datagrams on the INT port that were not valid reports.\n# TYPE foresight_int_bad_reports_total counter");
        let _ = writeln!(
            w,
            "foresight_int_bad_reports_total {}",
            self.int_bad_reports.load(Ordering::Relaxed)
        );
        let _ = writeln!(w, "# HELP foresight_state_write_errors_total Failed writes of the state file.\n# TYPE foresight_state_write_errors_total counter");
        let _ = writeln!(
            w,
            "foresight_state_write_errors_total {}",
            self.state_write_errors.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(0.0008);
        h.observe(0.004);
        h.observe(20.0);
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.001\"} 1"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.005\"} 2"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3"), "{out}");
        assert!(out.contains("x_count 3"), "{out}");
    }
}
