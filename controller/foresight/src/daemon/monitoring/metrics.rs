//! Prometheus metrics, exposed in the OpenMetrics text format by the
//! `prometheus-client` crate.
//!
//! Counters and histograms live here for the life of the daemon; gauges
//! that describe current state (reservations by state, switch sessions,
//! link loads) are built from a status snapshot at scrape time, so they can
//! never drift from it. OpenMetrics names a counter family without its
//! `_total` suffix and adds the suffix to the sample, so consumers still
//! read e.g. `foresight_int_reports_total 2`.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use installer::reconcile::Diff;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::api::StatusView;
use super::switch_status::ReconcileReport;

/// The media type of the exposition, for the HTTP `Content-Type`.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the latency buckets, in seconds: sub-millisecond
/// resolution where the control loop lives, up to the 10 s of a slow switch.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// A gauge holding a fraction or a duration.
type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    rpc: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeLabels {
    switch: String,
    /// `insert`, `modify` or `delete`.
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SwitchLabels {
    switch: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkLabels {
    link: String,
}

/// The metrics the daemon accumulates between scrapes.
pub struct Metrics {
    /// NDSP requests by (rpc, gRPC code).
    requests: Family<RequestLabels, Counter>,
    /// Reservation outcomes by status.
    outcomes: Family<OutcomeLabels, Counter>,
    /// From an NDSP request received to all its entries acknowledged.
    pub install_latency: Histogram,
    /// One planner call.
    pub planner_time: Histogram,
    /// One write of a diff to one switch.
    write_latency: Histogram,
    /// Entity changes written, by (switch, kind).
    changes: Family<ChangeLabels, Counter>,
    /// Duration of the last reconciliation per switch.
    reconcile_seconds: Family<SwitchLabels, FloatGauge>,
    pub int_reports: Counter,
    pub int_bad_reports: Counter,
    pub state_write_errors: Counter,
    /// Reservations extended because their flows still sent.
    pub follow_extensions: Counter,
    /// Extensions refused (no room, or at the cap), once per end.
    pub follow_refusals: Counter,
    /// Link-seconds those extensions reserved beyond the ends.
    pub follow_extended_link_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    /// Reservations released early because their flows stopped.
    pub follow_releases: Counter,
    /// Link-seconds those early releases gave back.
    pub follow_released_link_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            requests: Family::default(),
            outcomes: Family::default(),
            install_latency: latency_histogram(),
            planner_time: latency_histogram(),
            write_latency: latency_histogram(),
            changes: Family::default(),
            reconcile_seconds: Family::default(),
            int_reports: Counter::default(),
            int_bad_reports: Counter::default(),
            state_write_errors: Counter::default(),
            follow_extensions: Counter::default(),
            follow_refusals: Counter::default(),
            follow_extended_link_seconds: Counter::default(),
            follow_releases: Counter::default(),
            follow_released_link_seconds: Counter::default(),
        }
    }
}

impl Metrics {
    pub fn request(&self, rpc: &str, code: tonic::Code) {
        self.requests
            .get_or_create(&RequestLabels {
                rpc: rpc.to_string(),
                code: format!("{code:?}"),
            })
            .inc();
    }

    pub fn outcome(&self, status: &str) {
        self.outcomes
            .get_or_create(&OutcomeLabels {
                status: status.to_string(),
            })
            .inc();
    }

    /// A diff written to `switch` in `took`.
    pub fn applied(&self, switch: &str, diff: &Diff, took: Duration) {
        self.write_latency.observe(took.as_secs_f64());
        self.count_changes(
            switch,
            diff.insert.len(),
            diff.modify.len(),
            diff.delete.len(),
        );
    }

    /// A reconciliation of `switch` finished.
    pub fn reconciled(&self, switch: &str, report: &ReconcileReport) {
        self.count_changes(switch, report.inserted, report.modified, report.deleted);
        self.reconcile_seconds
            .get_or_create(&SwitchLabels {
                switch: switch.to_string(),
            })
            .set(report.millis / 1e3);
    }

    fn count_changes(&self, switch: &str, inserted: usize, modified: usize, deleted: usize) {
        for (kind, n) in [
            ("insert", inserted),
            ("modify", modified),
            ("delete", deleted),
        ] {
            self.changes
                .get_or_create(&ChangeLabels {
                    switch: switch.to_string(),
                    kind,
                })
                .inc_by(n as u64);
        }
    }

    /// The whole exposition, gauges from `status`.
    pub fn render(&self, status: &StatusView) -> String {
        let mut registry = Registry::default();
        register_reservation_gauges(&mut registry, status);
        self.register_counters_and_histograms(&mut registry);
        register_switch_gauges(&mut registry, status);
        register_link_gauges(&mut registry, status);
        registry.register(
            "foresight_int_reports",
            "INT telemetry reports received",
            self.int_reports.clone(),
        );
        registry.register(
            "foresight_int_bad_reports",
            "Datagrams on the INT port that were not valid reports",
            self.int_bad_reports.clone(),
        );
        registry.register(
            "foresight_state_write_errors",
            "Failed writes of the state file",
            self.state_write_errors.clone(),
        );
        registry.register(
            "foresight_reservation_extensions",
            "Reservations extended because their flows still sent near the end",
            self.follow_extensions.clone(),
        );
        registry.register(
            "foresight_reservation_extension_refusals",
            "Extensions refused: no room on a link, or the cap reached",
            self.follow_refusals.clone(),
        );
        registry.register(
            "foresight_reservation_extended_link_seconds",
            "Link-seconds extensions reserved beyond the reservations' ends",
            self.follow_extended_link_seconds.clone(),
        );
        registry.register(
            "foresight_reservation_early_releases",
            "Reservations released early because their flows stopped",
            self.follow_releases.clone(),
        );
        registry.register(
            "foresight_reservation_released_link_seconds",
            "Link-seconds given back by early releases",
            self.follow_released_link_seconds.clone(),
        );
        let mut out = String::new();
        encode(&mut out, &registry).expect("encoding into a String cannot fail");
        out
    }

    /// The accumulated metrics (they are shared handles: the registry of
    /// one scrape reads the live values).
    fn register_counters_and_histograms(&self, registry: &mut Registry) {
        registry.register(
            "foresight_reservation_outcomes",
            "Reservation outcomes (admission decisions) by status",
            self.outcomes.clone(),
        );
        registry.register(
            "foresight_ndsp_requests",
            "NDSP requests by RPC and gRPC status code",
            self.requests.clone(),
        );
        registry.register(
            "foresight_install_latency_seconds",
            "From an NDSP request received to all of its due entries acknowledged by every switch",
            self.install_latency.clone(),
        );
        registry.register(
            "foresight_planner_seconds",
            "Time of one planner call",
            self.planner_time.clone(),
        );
        registry.register(
            "foresight_switch_write_seconds",
            "Time to write one intended-state change to one switch",
            self.write_latency.clone(),
        );
        registry.register(
            "foresight_switch_changes",
            "Entities written to switches, by kind",
            self.changes.clone(),
        );
        registry.register(
            "foresight_reconcile_seconds",
            "Duration of the last reconciliation of each switch",
            self.reconcile_seconds.clone(),
        );
    }
}

fn register_reservation_gauges(registry: &mut Registry, status: &StatusView) {
    let by_state = Family::<StateLabels, Gauge>::default();
    for (state, n) in &status.reservations.by_state {
        by_state
            .get_or_create(&StateLabels {
                state: state.clone(),
            })
            .set(*n as i64);
    }
    registry.register(
        "foresight_reservations",
        "Reservations by lifecycle state",
        by_state,
    );
    let installed = Gauge::<i64>::default();
    installed.set(status.reservations.installed_flows as i64);
    registry.register(
        "foresight_reserved_flows_installed",
        "Reserved flows whose entries are on the switches",
        installed,
    );
}

fn register_switch_gauges(registry: &mut Registry, status: &StatusView) {
    let up = Family::<SwitchLabels, Gauge>::default();
    let primary = Family::<SwitchLabels, Gauge>::default();
    for s in &status.switches {
        let labels = SwitchLabels {
            switch: s.name.clone(),
        };
        up.get_or_create(&labels).set(i64::from(s.status.connected));
        primary
            .get_or_create(&labels)
            .set(i64::from(s.status.primary));
    }
    registry.register(
        "foresight_switch_up",
        "Whether the controller has a session with the switch",
        up,
    );
    registry.register(
        "foresight_switch_primary",
        "Whether the controller is the switch's primary client",
        primary,
    );
}

fn register_link_gauges(registry: &mut Registry, status: &StatusView) {
    let reserved = Family::<LinkLabels, Gauge>::default();
    let utilization = Family::<LinkLabels, FloatGauge>::default();
    for l in &status.links {
        let labels = LinkLabels {
            link: l.link.clone(),
        };
        reserved
            .get_or_create(&labels)
            .set(i64::try_from(l.reserved_bps).unwrap_or(i64::MAX));
        if let Some(u) = l.utilization {
            utilization.get_or_create(&labels).set(u);
        }
    }
    registry.register(
        "foresight_link_reserved_bps",
        "Bandwidth reserved on a directed link now",
        reserved,
    );
    registry.register(
        "foresight_link_utilization",
        "Measured egress utilisation of a directed link (INT reports), 0..1",
        utilization,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::monitoring::api::tests::sample as status;

    /// The value of the one sample line `series` (name and labels).
    fn sample(text: &str, series: &str) -> String {
        let values: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .collect();
        assert_eq!(values.len(), 1, "{series} in\n{text}");
        values[0].to_string()
    }

    #[test]
    fn latency_buckets_are_cumulative() {
        let m = Metrics::default();
        m.planner_time.observe(0.0008);
        m.planner_time.observe(0.004);
        m.planner_time.observe(20.0);
        let text = m.render(&status());
        let bucket = |le: &str| {
            sample(
                &text,
                &format!("foresight_planner_seconds_bucket{{le=\"{le}\"}}"),
            )
        };
        assert_eq!(bucket("0.0005"), "0");
        assert_eq!(bucket("0.001"), "1");
        assert_eq!(bucket("0.005"), "2");
        assert_eq!(bucket("10.0"), "2");
        assert_eq!(bucket("+Inf"), "3");
        assert_eq!(sample(&text, "foresight_planner_seconds_count"), "3");
        let sum: f64 = sample(&text, "foresight_planner_seconds_sum")
            .parse()
            .unwrap();
        assert!((sum - 20.0048).abs() < 1e-9, "{sum}");
    }

    /// The exposition with a sample in every family: requests, outcomes,
    /// INT reports, a reconciliation and a switch write.
    fn populated() -> String {
        let m = Metrics::default();
        m.request("SubmitCollective", tonic::Code::Ok);
        m.request("SubmitCollective", tonic::Code::Ok);
        m.request("Cancel", tonic::Code::NotFound);
        m.outcome("granted");
        m.int_reports.inc();
        m.int_reports.inc();
        m.int_bad_reports.inc();
        m.reconciled(
            "leaf1",
            &ReconcileReport {
                inserted: 5,
                modified: 1,
                deleted: 0,
                millis: 250.0,
                pipeline: "kept".into(),
            },
        );
        let diff = Diff {
            insert: vec![
                (
                    installer::intent::Key::Table(vec![1].into()),
                    Default::default(),
                ),
                (
                    installer::intent::Key::Table(vec![2].into()),
                    Default::default(),
                ),
            ],
            ..Diff::default()
        };
        m.applied("leaf1", &diff, Duration::from_millis(3));
        m.render(&status())
    }

    /// Every name the tests, the benchmark and the lab read, with the value
    /// they expect, and OpenMetrics' `_total` added exactly once.
    #[test]
    fn exposes_the_names_consumers_read() {
        let text = populated();
        for (series, value) in [
            ("foresight_reservations{state=\"installed\"}", "2"),
            ("foresight_reservations{state=\"expired\"}", "1"),
            ("foresight_reserved_flows_installed", "16"),
            (
                "foresight_reservation_outcomes_total{status=\"granted\"}",
                "1",
            ),
            (
                "foresight_ndsp_requests_total{rpc=\"SubmitCollective\",code=\"Ok\"}",
                "2",
            ),
            (
                "foresight_ndsp_requests_total{rpc=\"Cancel\",code=\"NotFound\"}",
                "1",
            ),
            ("foresight_switch_write_seconds_count", "1"),
            (
                "foresight_switch_changes_total{switch=\"leaf1\",kind=\"insert\"}",
                "7",
            ),
            (
                "foresight_switch_changes_total{switch=\"leaf1\",kind=\"modify\"}",
                "1",
            ),
            (
                "foresight_switch_changes_total{switch=\"leaf1\",kind=\"delete\"}",
                "0",
            ),
            ("foresight_reconcile_seconds{switch=\"leaf1\"}", "0.25"),
            ("foresight_switch_up{switch=\"leaf1\"}", "1"),
            ("foresight_switch_primary{switch=\"leaf1\"}", "1"),
            (
                "foresight_link_reserved_bps{link=\"leaf1:3 -> spine1:1\"}",
                "4000000000",
            ),
            (
                "foresight_link_reserved_bps{link=\"leaf1:4 -> spine2:1\"}",
                "0",
            ),
            (
                "foresight_link_utilization{link=\"leaf1:3 -> spine1:1\"}",
                "0.01",
            ),
            ("foresight_int_reports_total", "2"),
            ("foresight_int_bad_reports_total", "1"),
            ("foresight_state_write_errors_total", "0"),
        ] {
            assert_eq!(sample(&text, series), value, "{series}");
        }
        assert!(!text.contains("_total_total"), "{text}");
        assert!(
            !text.contains("link=\"leaf1:4 -> spine2:1\"} 0.0"),
            "a link without INT reports has no utilisation sample:\n{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// Every sample belongs to a family announced by `# TYPE` before it.
    #[test]
    fn every_sample_has_a_declared_family() {
        let m = Metrics::default();
        m.outcome("fallback");
        let text = m.render(&status());
        let mut declared: Vec<(String, String)> = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                declared.push((name.to_string(), kind.to_string()));
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                let (family, kind) = declared.last().expect("a TYPE line first");
                let suffixes: &[&str] = match kind.as_str() {
                    "counter" => &["_total"],
                    "histogram" => &["_bucket", "_sum", "_count"],
                    _ => &[""],
                };
                assert!(
                    suffixes.iter().any(|s| name == format!("{family}{s}")),
                    "{name} under # TYPE {family} {kind}"
                );
            }
        }
        // Families without samples yet (no NDSP request, no switch write,
        // no reconciliation) are left out; the other 18 are there (5 of
        // them reservations that follow the traffic).
        assert_eq!(declared.len(), 18, "{text}");
        assert!(!text.contains("foresight_ndsp_requests"), "{text}");
    }

    /// The committed Grafana dashboard reads only families the controller
    /// exposes, and groups and labels its series by labels they carry.
    #[test]
    fn the_grafana_dashboard_reads_what_is_exposed() {
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../../../docs/grafana/foresight.json"))
                .unwrap();
        let text = populated();
        let declared: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
            .collect();
        let mut targets = Vec::new();
        for panel in dashboard["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                targets.push((
                    t["expr"].as_str().unwrap(),
                    t["legendFormat"].as_str().unwrap(),
                ));
            }
        }
        assert!(targets.len() >= 15, "{} queries", targets.len());
        for (expr, legend) in targets {
            let names: Vec<&str> = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("foresight_"))
                .collect();
            assert!(!names.is_empty(), "{expr}");
            for name in &names {
                let family = ["_bucket", "_sum", "_count", "_total"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|f| declared.contains(f))
                    .unwrap_or(name);
                assert!(declared.contains(&family), "{name} in {expr}: not exposed");
            }
            let grouped = expr
                .split_once("by (")
                .map(|(_, rest)| rest.split(')').next().unwrap())
                .into_iter()
                .flat_map(|l| l.split(','))
                .map(str::trim);
            let shown = legend
                .split("{{")
                .skip(1)
                .map(|l| l.split("}}").next().unwrap().trim());
            for label in grouped.chain(shown).filter(|l| *l != "le") {
                assert!(
                    names.iter().any(|n| text
                        .lines()
                        .any(|l| l.starts_with(n) && l.contains(&format!("{label}=\"")))),
                    "label {label} of {expr}: no such label on {names:?}"
                );
            }
        }
    }
}
