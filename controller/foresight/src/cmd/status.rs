//! `foresight status`: a running controller's switches (primary/backup),
//! reservations and link loads, from its admin endpoint.

use clap::Args;

use super::admin_client;
use super::controller::DEFAULT_HTTP;
use crate::daemon::api::StatusView;

#[derive(Args)]
pub struct StatusCmd {
    /// The controller's metrics/admin HTTP address.
    #[arg(long, default_value = DEFAULT_HTTP)]
    http: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: StatusCmd) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let body = runtime.block_on(admin_client::get(&cmd.http, "/v1/status"))?;
    if cmd.json {
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(());
    }
    let s: StatusView = serde_json::from_slice(&body)
        .map_err(|e| anyhow::anyhow!("{} did not answer with a Foresight status ({e}); is --http the controller's admin address?", cmd.http))?;
    print!("{}", render(&s));
    Ok(())
}

fn ms(t: u64, now: u64) -> String {
    format!("{:+.1} ms", (t as i128 - now as i128) as f64 / 1e6)
}

pub fn render(s: &StatusView) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let c = &s.controller;
    let now = c.now_unix_ns;
    let _ = writeln!(
        o,
        "controller {} — fabric {}, NDSP {}, admin http://{}, election id {}, lead time {:.1} ms, up {:.0} s",
        c.version, c.fabric, c.ndsp_addr, c.http_addr, c.election_id, c.lead_time_ms, c.uptime_s
    );
    if let Some(ms) = c.startup_reconcile_ms {
        let _ = writeln!(
            o,
            "  start-up: {} reservations reloaded, every switch reconciled after {ms:.1} ms",
            c.restored_reservations
        );
    }
    for id in &c.restored_diverged {
        let _ = writeln!(
            o,
            "  warning: reservation {id} was recorded on a link that is down; re-planned at start-up"
        );
    }
    for l in &c.links_down {
        let _ = writeln!(o, "  link down: {l}");
    }
    let _ = writeln!(o, "\nswitches:");
    let _ = writeln!(
        o,
        "  {:<10} {:<22} {:>4} {:<12} {:>8} {:>9}  LAST RECONCILE",
        "NAME", "ADDRESS", "DEV", "ROLE", "ENTITIES", "IN SYNC"
    );
    for sw in &s.switches {
        let rec = sw
            .status
            .last_reconcile
            .as_ref()
            .map_or("-".to_string(), |r| {
                format!(
                    "+{} ~{} -{} in {:.1} ms (pipeline {})",
                    r.inserted, r.modified, r.deleted, r.millis, r.pipeline
                )
            });
        let _ = writeln!(
            o,
            "  {:<10} {:<22} {:>4} {:<12} {:>8} {:>9}  {rec}",
            sw.name,
            sw.addr,
            sw.device_id,
            sw.role,
            sw.status.entities,
            if sw.status.in_sync { "yes" } else { "no" }
        );
        if let Some(e) = &sw.status.last_error {
            let _ = writeln!(o, "  {:<10} last error: {e}", "");
        }
    }
    let counts: Vec<String> = s
        .reservations
        .by_state
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect();
    let _ = writeln!(
        o,
        "\nreservations: {}; {} reserved flows installed",
        counts.join(", "),
        s.reservations.installed_flows
    );
    if !s.reservations.list.is_empty() {
        let _ = writeln!(
            o,
            "  {:<28} {:<10} {:<26} {:<14} {:<10} {:>11} {:>12} {:>12}",
            "ID", "TENANT", "SUBJECT", "STATUS", "STATE", "FLOWS", "START", "END"
        );
        for r in &s.reservations.list {
            let _ = writeln!(
                o,
                "  {:<28} {:<10} {:<26} {:<14} {:<10} {:>11} {:>12} {:>12}",
                r.id,
                r.tenant,
                r.subject,
                r.status,
                r.state,
                format!("{}/{}", r.reserved_flows, r.flows),
                ms(r.start_unix_ns, now),
                ms(r.end_unix_ns, now)
            );
        }
    }
    let _ = writeln!(o, "\nlinks (reserved now; measured from INT reports):");
    if s.links.is_empty() {
        let _ = writeln!(o, "  nothing reserved or measured");
    }
    for l in &s.links {
        let measured = match (l.measured_bps, l.utilization) {
            (Some(m), Some(u)) => format!(
                "{:.2} Gb/s ({:.0}%), queue {} pkts",
                m as f64 / 1e9,
                u * 100.0,
                l.queue_packets.unwrap_or(0)
            ),
            _ => "-".into(),
        };
        let _ = writeln!(
            o,
            "  {:<30} reserved {:>7.2} of {:>6.1} Gb/s   measured {measured}",
            l.link,
            l.reserved_bps as f64 / 1e9,
            l.capacity_bps as f64 / 1e9
        );
    }
    o
}
