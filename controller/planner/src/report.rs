//! The plan as people and scripts read it: per demand (outcome, start,
//! predicted completion, flows with paths and label stacks) and per link
//! (peak reserved load). Serializable to JSON; [`render_text`] for humans.

use serde::Serialize;

use crate::admission::{Outcome, Plan, Planner, PlannerConfig};
use crate::bounds::{lower_bound, LowerBound};
use crate::conventions::bps_to_gbps;
use crate::demand::{Demand, DemandKind};
use crate::ecmp::EcmpOutcome;
use crate::flow::Flow;
use crate::paths::Hop;
use crate::topology::Topology;

/// How much detail to include.
#[derive(Clone, Copy, Debug)]
pub struct ReportOptions {
    /// Flows listed per demand (the rest are counted).
    pub flows_per_demand: usize,
    /// Links listed (busiest first).
    pub links: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            flows_per_demand: 8,
            links: 10,
        }
    }
}

/// Whole-plan figures.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Demands planned.
    pub demands: usize,
    /// Admitted at the requested start.
    pub admitted: usize,
    /// Admitted later.
    pub deferred: usize,
    /// Partly reserved.
    pub partial: usize,
    /// Not reserved.
    pub rejected: usize,
    /// Flows.
    pub flows: usize,
    /// Flows with a reservation.
    pub reserved_flows: usize,
    /// Flows on ECMP fallback.
    pub fallback_flows: usize,
    /// Highest reserved load / capacity over all links and times.
    pub peak_utilisation: f64,
    /// Lower bound on that peak for the demands' flows at full rate.
    pub lower_bound: LowerBound,
    /// Predicted completion of the last demand, ns (`None`: some unbounded).
    pub completion_ns: Option<u64>,
    /// Wall-clock planning time, ms (as measured by the caller).
    pub planning_ms: f64,
}

/// One flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowReport {
    /// Source host.
    pub src: String,
    /// Destination host.
    pub dst: String,
    /// Source IPv4.
    pub src_ip: String,
    /// Destination IPv4.
    pub dst_ip: String,
    /// UDP source port.
    pub udp_src_port: u16,
    /// BTH destination QP.
    pub dest_qp: u32,
    /// Start (after deferral), ns.
    pub start_ns: u64,
    /// Bytes.
    pub bytes: u64,
    /// Requested rate, Gbit/s.
    pub rate_gbps: f64,
    /// Reserved rate, Gbit/s (0 = ECMP fallback).
    pub reserved_gbps: f64,
    /// Reserved window end, ns.
    pub end_ns: u64,
    /// Hops (switch, egress port) from the ingress leaf.
    pub path: Vec<Hop>,
    /// SR-MPLS label stack the ingress leaf pushes (empty for fallback flows).
    pub labels: Vec<u32>,
    /// On ECMP (no reservation).
    pub fallback: bool,
    /// Predicted completion, ns.
    pub predicted_completion_ns: Option<u64>,
}

/// One demand.
#[derive(Clone, Debug, Serialize)]
pub struct DemandReport {
    /// Id.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// Priority.
    pub priority: u8,
    /// Transfer or collective kind.
    pub kind: String,
    /// What happened (status and, if any, reason).
    pub outcome: Outcome,
    /// Flows.
    pub flow_count: usize,
    /// Bytes over all flows.
    pub bytes: u64,
    /// Start (after deferral), ns.
    pub start_ns: u64,
    /// Predicted completion, ns.
    pub predicted_completion_ns: Option<u64>,
    /// How paths were chosen.
    pub method: Option<String>,
    /// The first flows.
    pub flows: Vec<FlowReport>,
}

/// One directed link with reservations.
#[derive(Clone, Debug, Serialize)]
pub struct LinkReport {
    /// `leaf1:3 -> spine2:1`.
    pub link: String,
    /// Capacity, Gbit/s.
    pub capacity_gbps: f64,
    /// Peak reserved, Gbit/s.
    pub peak_reserved_gbps: f64,
    /// Peak reserved / capacity.
    pub peak_utilisation: f64,
}

/// ECMP on the same flows, for comparison.
#[derive(Clone, Debug, Serialize)]
pub struct EcmpComparison {
    /// Which ECMP.
    pub mode: String,
    /// Peak offered / capacity.
    pub peak_utilisation: f64,
    /// Links offered more than their capacity.
    pub overloaded_links: usize,
    /// Predicted completion of the last flow, ns.
    pub completion_ns: u64,
}

impl From<&EcmpOutcome> for EcmpComparison {
    fn from(o: &EcmpOutcome) -> Self {
        EcmpComparison {
            mode: o.mode.clone(),
            peak_utilisation: o.peak_utilisation,
            overloaded_links: o.overloaded_links,
            completion_ns: o.completion_ns,
        }
    }
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct PlanReport {
    /// Fabric name.
    pub fabric: String,
    /// Settings.
    pub config: PlannerConfig,
    /// Totals.
    pub summary: Summary,
    /// Per demand, in input order.
    pub demands: Vec<DemandReport>,
    /// Total directed links with reservations.
    pub reserved_links: usize,
    /// The busiest links.
    pub links: Vec<LinkReport>,
    /// ECMP baselines, if computed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ecmp: Vec<EcmpComparison>,
    /// What joint placement of the set did.
    pub joint: crate::admission::JointSummary,
}

fn flow_report(topo: &Topology, f: &Flow, fp: &crate::admission::FlowPlan) -> FlowReport {
    let h = topo.hosts();
    FlowReport {
        src: h[f.src as usize].name.clone(),
        dst: h[f.dst as usize].name.clone(),
        src_ip: f.src_ip.to_string(),
        dst_ip: f.dst_ip.to_string(),
        udp_src_port: f.udp_src_port,
        dest_qp: f.dest_qp,
        start_ns: fp.start_ns,
        bytes: f.bytes,
        rate_gbps: bps_to_gbps(f.rate_bps),
        reserved_gbps: bps_to_gbps(fp.reserved_bps),
        end_ns: fp.start_ns + f.duration_ns,
        path: fp.path.hops(topo),
        labels: if fp.reserved_bps > 0 {
            fp.path.label_stack(topo).unwrap_or_default()
        } else {
            Vec::new()
        },
        fallback: fp.reserved_bps == 0,
        predicted_completion_ns: fp.completion_ns,
    }
}

/// Builds the report of a plan made by `planner` from `demands`.
pub fn build(
    planner: &Planner<'_>,
    demands: &[Demand],
    plan: &Plan,
    planning_ms: f64,
    opts: ReportOptions,
) -> PlanReport {
    let topo = planner.topology();
    let ledger = planner.ledger();
    let mut s = Summary {
        demands: demands.len(),
        admitted: 0,
        deferred: 0,
        partial: 0,
        rejected: 0,
        flows: 0,
        reserved_flows: 0,
        fallback_flows: 0,
        peak_utilisation: 0.0,
        lower_bound: lower_bound(topo, planner.clos(), &[]),
        completion_ns: Some(0),
        planning_ms,
    };
    let mut shifted: Vec<Flow> = Vec::new();
    let mut out = Vec::with_capacity(demands.len());
    for dp in &plan.demands {
        let d = &demands[dp.demand];
        match dp.outcome {
            Outcome::Admitted => s.admitted += 1,
            Outcome::Deferred { .. } => s.deferred += 1,
            Outcome::Partial { .. } => s.partial += 1,
            Outcome::Rejected { .. } => s.rejected += 1,
        }
        s.flows += d.flows.len();
        let reserved = dp.flows.iter().filter(|f| f.reserved_bps > 0).count();
        s.reserved_flows += reserved;
        s.fallback_flows += d.flows.len() - reserved;
        s.completion_ns = match (s.completion_ns, dp.completion_ns) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        for f in &d.flows {
            let mut g = f.clone();
            g.start_ns += dp.shift_ns;
            shifted.push(g);
        }
        out.push(DemandReport {
            id: d.id.clone(),
            tenant: d.tenant.clone(),
            priority: d.priority,
            kind: match d.kind {
                DemandKind::Transfer => "transfer".into(),
                DemandKind::Collective(k) => k.name().into(),
            },
            outcome: dp.outcome.clone(),
            flow_count: d.flows.len(),
            bytes: d.flows.iter().map(|f| f.bytes).sum(),
            start_ns: d.start_ns() + dp.shift_ns,
            predicted_completion_ns: dp.completion_ns,
            method: dp.method.map(|m| format!("{m:?}").to_lowercase()),
            flows: d
                .flows
                .iter()
                .zip(&dp.flows)
                .take(opts.flows_per_demand)
                .map(|(f, fp)| flow_report(topo, f, fp))
                .collect(),
        });
    }
    s.lower_bound = lower_bound(topo, planner.clos(), &shifted);
    let mut links = Vec::new();
    for e in 0..topo.edge_count() as u32 {
        if ledger.timeline(e).is_zero() {
            continue;
        }
        let cap = topo.edge(e).capacity_bps;
        let peak = ledger.max(e);
        let u = peak as f64 / cap as f64;
        s.peak_utilisation = s.peak_utilisation.max(u);
        links.push((u, e, peak, cap));
    }
    let reserved_links = links.len();
    links.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let links = links
        .into_iter()
        .take(opts.links)
        .map(|(u, e, peak, cap)| LinkReport {
            link: topo.describe_edge(e),
            capacity_gbps: bps_to_gbps(cap),
            peak_reserved_gbps: bps_to_gbps(peak),
            peak_utilisation: u,
        })
        .collect();
    PlanReport {
        fabric: topo.name().to_string(),
        config: planner.config().clone(),
        summary: s,
        demands: out,
        reserved_links,
        links,
        ecmp: Vec::new(),
        joint: plan.joint.clone(),
    }
}

/// `1.234 ms`-style duration from ns.
pub fn fmt_ns(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.3} us", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.3} ms", n / 1e6)
    } else {
        format!("{:.3} s", n / 1e9)
    }
}

fn fmt_opt(ns: Option<u64>) -> String {
    ns.map_or_else(|| "unbounded".into(), fmt_ns)
}

/// Human-readable report.
pub fn render_text(r: &PlanReport) -> String {
    use std::fmt::Write;
    let s = &r.summary;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "plan for fabric '{}' (headroom {:.2})",
        r.fabric, r.config.headroom
    );
    let _ = writeln!(
        o,
        "demands: {} ({} admitted, {} deferred, {} partial, {} rejected); flows: {} reserved, {} on ECMP fallback",
        s.demands, s.admitted, s.deferred, s.partial, s.rejected, s.reserved_flows, s.fallback_flows
    );
    let _ = writeln!(
        o,
        "peak reserved link load: {:.1}% of capacity; lower bound for all flows at full rate {:.1}% ({} bound, {} at {})",
        100.0 * s.peak_utilisation,
        100.0 * s.lower_bound.utilisation,
        s.lower_bound.kind,
        if s.lower_bound.group.is_empty() {
            "-"
        } else {
            &s.lower_bound.group
        },
        fmt_ns(s.lower_bound.at_ns)
    );
    let _ = writeln!(
        o,
        "predicted completion: {}; planning time {:.3} ms",
        fmt_opt(s.completion_ns),
        s.planning_ms
    );
    let j = &r.joint;
    if let (Some(before), Some(after)) = (j.peak_before, j.peak_after) {
        let _ = writeln!(
            o,
            "joint placement: peak of the admitted set {:.1}% -> {:.1}%; {} admitted by moving others ({}); {} searches, {} evaluations{}",
            100.0 * before,
            100.0 * after,
            j.admitted_by_moving.len(),
            if j.admitted_by_moving.is_empty() { "-".to_string() } else { j.admitted_by_moving.join(", ") },
            j.searches,
            j.evaluations,
            if j.cut_short { " (cut short by the time budget)" } else { "" }
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<20} {:<10} {:>4} {:<15} {:>7} {:<10} {:>12} {:>12}",
        "DEMAND", "TENANT", "PRIO", "KIND", "FLOWS", "OUTCOME", "START", "COMPLETION"
    );
    for d in &r.demands {
        let status = match &d.outcome {
            Outcome::Admitted => "admitted",
            Outcome::Deferred { .. } => "deferred",
            Outcome::Partial { .. } => "partial",
            Outcome::Rejected { .. } => "rejected",
        };
        let _ = writeln!(
            o,
            "{:<20} {:<10} {:>4} {:<15} {:>7} {:<10} {:>12} {:>12}",
            d.id,
            d.tenant,
            d.priority,
            d.kind,
            d.flow_count,
            status,
            fmt_ns(d.start_ns),
            fmt_opt(d.predicted_completion_ns)
        );
        match &d.outcome {
            Outcome::Deferred {
                requested_start_ns,
                start_ns,
            } => {
                let _ = writeln!(
                    o,
                    "    deferred from {} to {}",
                    fmt_ns(*requested_start_ns),
                    fmt_ns(*start_ns)
                );
            }
            Outcome::Partial {
                reserved_flows,
                flows,
                reserved_fraction,
                reason,
            } => {
                let _ = writeln!(
                    o,
                    "    {reserved_flows}/{flows} flows reserved ({:.1}% of the rate); why: {reason}",
                    100.0 * reserved_fraction
                );
            }
            Outcome::Rejected { reason } => {
                let _ = writeln!(o, "    why: {reason}; falls back to ECMP");
            }
            Outcome::Admitted => {}
        }
        for f in &d.flows {
            let path = f
                .path
                .iter()
                .map(|h| format!("{}:{}", h.switch, h.egress_port))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                o,
                "    {} -> {} qp {:#08x} sport {} {:.1}/{:.1} Gbit/s [{}, {}) {} labels {:?} path {}",
                f.src,
                f.dst,
                f.dest_qp,
                f.udp_src_port,
                f.reserved_gbps,
                f.rate_gbps,
                fmt_ns(f.start_ns),
                fmt_ns(f.end_ns),
                if f.fallback { "ECMP" } else { "SR" },
                f.labels,
                path
            );
        }
        if d.flow_count > d.flows.len() {
            let _ = writeln!(
                o,
                "    ... {} more flows (--flows N to list more, --json for all fields)",
                d.flow_count - d.flows.len()
            );
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "busiest links ({} of {} with reservations):",
        r.links.len(),
        r.reserved_links
    );
    let _ = writeln!(
        o,
        "  {:<40} {:>10} {:>12} {:>7}",
        "LINK", "CAP Gb/s", "PEAK Gb/s", "UTIL"
    );
    for l in &r.links {
        let _ = writeln!(
            o,
            "  {:<40} {:>10.1} {:>12.3} {:>6.1}%",
            l.link,
            l.capacity_gbps,
            l.peak_reserved_gbps,
            100.0 * l.peak_utilisation
        );
    }
    if !r.ecmp.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "same flows on ECMP, no reservations:");
        let _ = writeln!(
            o,
            "  {:<20} {:>10} {:>10} {:>14}",
            "MODE", "PEAK", "OVERLOADED", "COMPLETION"
        );
        for e in &r.ecmp {
            let _ = writeln!(
                o,
                "  {:<20} {:>9.1}% {:>10} {:>14}",
                e.mode,
                100.0 * e.peak_utilisation,
                e.overloaded_links,
                fmt_ns(e.completion_ns)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::PlannerConfig;
    use crate::demand::load_str;
    use crate::topology::generate::{leaf_spine, LeafSpine};

    #[test]
    fn report_lists_outcomes_paths_and_links() {
        let t = Topology::from_spec(leaf_spine(&LeafSpine::default()).unwrap()).unwrap();
        let yaml = "demands:
  - {id: a, tenant: x, src: h1, dst: h3, bytes: 1GB, rate_gbps: 80, priority: 2}
  - {id: b, src: h1, dst: h4, bytes: 1GB, rate_gbps: 80, elastic: true}
";
        let d = load_str(&t, yaml, 0.9).unwrap();
        let mut p = Planner::new(&t, PlannerConfig::default());
        let plan = p.plan(&d);
        let r = build(&p, &d, &plan, 0.5, ReportOptions::default());
        assert_eq!((r.summary.admitted, r.summary.deferred), (1, 1));
        assert_eq!(r.demands[0].flows[0].labels.len(), 3);
        assert_eq!(r.demands[0].flows[0].labels[2], 1001); // leaf2 port 1 -> h3
        assert!((r.summary.peak_utilisation - 0.8).abs() < 1e-9);
        // h1's NIC carries 80G in two windows: the bound is 0.8, reached.
        assert!((r.summary.lower_bound.utilisation - 0.8).abs() < 1e-9);
        let text = render_text(&r);
        assert!(text.contains("deferred from 0 ns to 100.000 ms"), "{text}");
        assert!(text.contains("h1 -> leaf1:1"), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["demands"][1]["outcome"]["status"], "deferred");
        assert_eq!(json["demands"][0]["flows"][0]["path"][0]["switch"], "leaf1");
    }
}
