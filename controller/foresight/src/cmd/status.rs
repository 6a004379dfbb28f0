//! `foresight status`: a running controller's switches (primary/backup),
//! reservations and link loads, from its admin endpoint.

use clap::Args;

use super::admin_client::Admin;
use super::client_tls::ClientTls;
use super::controller::DEFAULT_HTTP;
use super::text_table;
use crate::daemon::monitoring::api::StatusView;

#[derive(Args)]
pub struct StatusCmd {
    /// The controller's metrics/admin HTTP address.
    #[arg(long, default_value = DEFAULT_HTTP)]
    http: String,
    #[command(flatten)]
    tls: ClientTls,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: StatusCmd) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let admin = Admin {
        addr: &cmd.http,
        tls: &cmd.tls,
    };
    let body = runtime.block_on(admin.get("/v1/status"))?;
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
    if let Some(tenant) = &s.tenant {
        let _ = writeln!(
            o,
            "  the view of tenant {tenant} (its client certificate): its reservations only; links and their loads are the fabric's"
        );
    }
    match (c.startup_reconcile_ms, &s.tenant) {
        (Some(ms), None) => {
            let _ = writeln!(
                o,
                "  start-up: {} reservations reloaded, every switch reconciled after {ms:.1} ms",
                c.restored_reservations
            );
        }
        (Some(ms), Some(_)) => {
            let _ = writeln!(o, "  start-up: every switch reconciled after {ms:.1} ms");
        }
        (None, _) => {}
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
    let mut switches = text_table::new(
        &[
            "NAME",
            "ADDRESS",
            "DEV",
            "ROLE",
            "ENTITIES",
            "IN SYNC",
            "LAST RECONCILE",
        ],
        &[2, 4, 5],
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
        switches.add_row(vec![
            sw.name.clone(),
            if sw.addr.is_empty() {
                "-".to_string()
            } else {
                sw.addr.clone()
            },
            sw.device_id.to_string(),
            sw.role.clone(),
            sw.status.entities.to_string(),
            if sw.status.in_sync { "yes" } else { "no" }.to_string(),
            rec,
        ]);
    }
    o.push_str(&text_table::indented(&switches));
    for sw in &s.switches {
        if let Some(e) = &sw.status.last_error {
            let _ = writeln!(o, "  {}: last error: {e}", sw.name);
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
        let mut reservations = text_table::new(
            &[
                "ID", "TENANT", "SUBJECT", "STATUS", "STATE", "FLOWS", "START", "END",
            ],
            &[5, 6, 7],
        );
        for r in &s.reservations.list {
            reservations.add_row(vec![
                r.id.clone(),
                r.tenant.clone(),
                r.subject.clone(),
                r.status.clone(),
                r.state.clone(),
                format!("{}/{}", r.reserved_flows, r.flows),
                ms(r.start_unix_ns, now),
                ms(r.end_unix_ns, now),
            ]);
        }
        o.push_str(&text_table::indented(&reservations));
    }
    let _ = writeln!(o, "\nlinks (reserved now; measured from INT reports):");
    if s.links.is_empty() {
        let _ = writeln!(o, "  nothing reserved or measured");
        return o;
    }
    let mut links = text_table::new(&["LINK", "RESERVED", "CAPACITY", "MEASURED"], &[1, 2]);
    for l in &s.links {
        let measured = match (l.measured_bps, l.utilization) {
            (Some(m), Some(u)) => format!(
                "{} ({:.0}%), queue {} pkts",
                text_table::rate(m),
                u * 100.0,
                l.queue_packets.unwrap_or(0)
            ),
            _ => "-".into(),
        };
        links.add_row(vec![
            l.link.clone(),
            text_table::rate(l.reserved_bps),
            text_table::rate(l.capacity_bps),
            measured,
        ]);
    }
    o.push_str(&text_table::indented(&links));
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::monitoring::api::tests::sample;

    /// The lines of the table that starts with the line holding `header`.
    fn table_lines<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
        text.lines()
            .skip_while(|l| !l.contains(header))
            .take_while(|l| !l.trim().is_empty())
            .collect()
    }

    /// Columns line up whatever the length of a cell (a long generated
    /// reservation id pushes the other columns right, not out of line).
    #[test]
    fn columns_line_up_with_long_cells() {
        let text = render(&sample());
        let rows = table_lines(&text, "SUBJECT");
        assert_eq!(rows.len(), 3, "{text}");
        let subject = rows[0].find("SUBJECT").unwrap();
        assert_eq!(rows[1].find("demand:d-1"), Some(subject), "{text}");
        assert_eq!(rows[2].find("collective:ar-1"), Some(subject), "{text}");
        // Numbers are right-aligned: the END column ends where its header does.
        let end = rows[0].find("END").unwrap() + "END".len();
        assert!(rows[1..].iter().all(|r| r.len() == end), "{text}");
        assert!(
            rows.iter()
                .all(|r| r.starts_with("  ") && !r.starts_with("   ")),
            "{text}"
        );

        let switches = table_lines(&text, "ADDRESS");
        assert_eq!(switches.len(), 2, "{text}");
        assert!(
            switches[1].contains("leaf1") && switches[1].contains("primary"),
            "{text}"
        );
        let links = table_lines(&text, "RESERVED");
        assert_eq!(links.len(), 3, "{text}");
        assert!(
            links[1].contains("4.00 Gb/s") && links[1].contains("100 Mb/s (1%)"),
            "{text}"
        );
        assert!(!text.contains("the view of tenant"), "{text}");
    }

    /// A tenant's view says whose it is and hides what it does not hold.
    #[test]
    fn a_tenant_view_says_so_and_shows_no_switch_address() {
        let mut view = sample();
        view.controller.startup_reconcile_ms = Some(12.0);
        view.controller.restored_reservations = 7;
        let full = render(&view);
        assert!(full.contains("7 reservations reloaded"), "{full}");
        assert!(full.contains("127.0.0.1:9559"), "{full}");
        let text = render(&view.scope_to("acme"));
        assert!(text.contains("the view of tenant acme"), "{text}");
        assert!(
            text.contains("every switch reconciled after 12.0 ms"),
            "{text}"
        );
        assert!(!text.contains("reloaded"), "{text}");
        assert!(!text.contains("127.0.0.1:9559"), "{text}");
        let switches = table_lines(&text, "ADDRESS");
        assert!(
            switches[1].contains("leaf1") && switches[1].contains(" - "),
            "{text}"
        );
    }
}
