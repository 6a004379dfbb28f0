//! A reservation as the controller answered it: JSON (`--json`) or text,
//! with the time from the request to its entries acknowledged.

use ndsp::proto;
use ndsp::types::ValidatedReservation;
use serde::Serialize;

use crate::cmd::text_table;
use crate::daemon::northbound::service::INSTALL_US_METADATA;
use crate::daemon::now_unix_ns;

#[derive(Serialize)]
struct FlowOut {
    flow_id: String,
    src: String,
    dst: String,
    dest_qp: Option<u32>,
    status: String,
    requested_bps: u64,
    accepted_bps: u64,
    start_unix_ns: u64,
    end_unix_ns: u64,
    labels: Vec<u32>,
    /// The UDP source port to send on (entropy steering).
    #[serde(skip_serializing_if = "Option::is_none")]
    udp_src_port: Option<u16>,
    path: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct ReservationOut {
    reservation_id: String,
    subject: String,
    job_id: Option<String>,
    status: String,
    reason: String,
    advisory: Option<String>,
    revision: u64,
    start_unix_ns: u64,
    end_unix_ns: u64,
    flows: Vec<FlowOut>,
    /// From the request received to its due entries acknowledged, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    install_us: Option<u64>,
}

fn status_name(s: ndsp::types::ReservationStatus) -> String {
    proto::ReservationStatus::from(s)
        .as_str_name()
        .trim_start_matches("RESERVATION_STATUS_")
        .to_string()
}

pub(super) fn out(r: &ValidatedReservation, install_us: Option<u64>) -> ReservationOut {
    use ndsp::types::ReservationSubject as S;
    ReservationOut {
        reservation_id: r.reservation_id.clone(),
        subject: match &r.subject {
            S::Demand(d) => format!("demand:{d}"),
            S::Collective(c) => format!("collective:{c}"),
        },
        job_id: r.job_id.clone(),
        status: status_name(r.status),
        reason: proto::ReasonCode::from(r.reason)
            .as_str_name()
            .trim_start_matches("REASON_CODE_")
            .to_string(),
        advisory: r.advisory.clone(),
        revision: r.revision,
        start_unix_ns: r.start_unix_ns,
        end_unix_ns: r.end_unix_ns,
        flows: r
            .flows
            .iter()
            .map(|f| FlowOut {
                flow_id: f.flow_id.clone(),
                src: f.source_address.to_string(),
                dst: f.destination_address.to_string(),
                dest_qp: f.dest_qp,
                status: status_name(f.status),
                requested_bps: f.requested_bps,
                accepted_bps: f.accepted_bps,
                start_unix_ns: f.start_unix_ns,
                end_unix_ns: f.end_unix_ns,
                labels: f.sr_label_stack.clone(),
                udp_src_port: f.udp_src_port,
                path: f
                    .hops
                    .iter()
                    .map(|h| format!("{}:{}", h.node, h.egress_port))
                    .collect(),
            })
            .collect(),
        install_us,
    }
}

fn rel_ms(t: u64, now: u64) -> String {
    let d = t as i128 - now as i128;
    format!("{:+.1} ms", d as f64 / 1e6)
}

pub(super) fn print_reservation(r: &ReservationOut) {
    let now = now_unix_ns();
    println!(
        "reservation {} ({}): {} (revision {})",
        r.reservation_id, r.subject, r.status, r.revision
    );
    if let Some(a) = &r.advisory {
        println!("  why: {} — {a}", r.reason);
    }
    println!(
        "  window: {} .. {} from now",
        rel_ms(r.start_unix_ns, now),
        rel_ms(r.end_unix_ns, now)
    );
    if let Some(us) = r.install_us {
        println!(
            "  answered after {:.2} ms (entries due now acknowledged by every switch)",
            us as f64 / 1e3
        );
    }
    let reserved = r.flows.iter().filter(|f| f.accepted_bps > 0).count();
    println!(
        "  flows: {} ({reserved} reserved, {} on ECMP)",
        r.flows.len(),
        r.flows.len() - reserved
    );
    if r.flows.is_empty() {
        return;
    }
    let mut flows = text_table::new(
        &[
            "FLOW",
            "SRC -> DST",
            "QP",
            "STATUS",
            "GOT / ASKED",
            "HELD BY",
            "PATH",
        ],
        &[2, 4],
    );
    for f in r.flows.iter().take(64) {
        let held_by = match f.udp_src_port {
            Some(port) => format!("source port {port}"),
            None => f
                .labels
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        };
        flows.add_row(vec![
            f.flow_id.clone(),
            format!("{} -> {}", f.src, f.dst),
            f.dest_qp.map_or("any".into(), |q| q.to_string()),
            f.status.to_string(),
            format!(
                "{} / {}",
                text_table::rate(f.accepted_bps),
                text_table::rate(f.requested_bps)
            ),
            held_by,
            f.path.join(" "),
        ]);
    }
    print!("{}", text_table::indented(&flows));
    if r.flows.len() > 64 {
        println!("  ... {} more flows (--json lists all)", r.flows.len() - 64);
    }
}

pub(super) fn install_us<T>(r: &tonic::Response<T>) -> Option<u64> {
    r.metadata()
        .get(INSTALL_US_METADATA)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}
