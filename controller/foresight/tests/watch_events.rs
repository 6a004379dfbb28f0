//! WatchEvents beyond reservation changes, from synthetic INT reports sent
//! to a running controller (its switches are down: no BMv2 needed):
//! congestion episodes coalesced per port, path availability between the
//! hosts of the watcher's reservations, and forecast mismatches (a flow
//! faster than forecast; a flow never seen after its start).

mod common;

use std::time::{Duration, Instant};

use common::*;
use ndsp::proto;
use ndsp::types::{NetworkChange, WatchEventBody};
use ndsp::Validate;

const MS: u64 = 1_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn congestion_path_availability_and_forecast_mismatch_are_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let switches = common::unreachable_switches(dir.path());
    let int_listen = format!("127.0.0.1:{}", free_udp_port());
    let controller = Controller::spawn(
        dir.path(),
        &switches,
        50,
        &[
            "--switch-wait-s",
            "0",
            "--int-listen",
            &int_listen,
            "--congestion-queue-packets",
            "10",
            "--congestion-gap-ms",
            "50",
            "--mismatch-start-ms",
            "300",
            "--mismatch-rate-fraction",
            "0.5",
        ],
    );
    let mut client = controller.client().await;
    let mut watch = client
        .watch_events(proto::WatchEventsRequest {
            header: header(),
            job_ids: vec![],
            telemetry_interval_ns: 20 * MS,
        })
        .await
        .unwrap()
        .into_inner();
    // Two 1 Gbit/s flows from h1, starting now: d1 to h3 (QP 700) will be
    // seen at 3 Gbit/s; d2 to h4 (QP 701) never.
    let rs = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![
                demand(
                    "d1",
                    "10.0.1.1",
                    "10.0.2.1",
                    0,
                    60_000 * MS,
                    1_000_000_000,
                    Some(700),
                ),
                demand(
                    "d2",
                    "10.0.1.1",
                    "10.0.2.2",
                    0,
                    60_000 * MS,
                    1_000_000_000,
                    Some(701),
                ),
            ],
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    let (d1, d2) = (rs[0].reservation_id.clone(), rs[1].reservation_id.clone());
    let uplink = rs[0].flows[0].hops[0].egress_port as u16;

    // Reports of d1 (sink leaf2 first): leaf2's port 1 to h3 queues 40
    // packets three times, then drains; leaf1's uplink sent 375 000 bytes
    // per ms of switch time = 3 Gbit/s.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for (seq, queue) in [(1u32, 40u32), (2, 25), (3, 40), (4, 2)] {
        let ts = u64::from(seq) * 1_000;
        let tx = seq * 375_000;
        let hops = [
            (2, 3, 1, queue, ts, tx),
            (3 + u32::from(uplink == 4), 1, 2, 0, ts, tx),
            (1, 1, uplink, 0, ts, tx),
        ];
        udp.send_to(&testkit::int::report_to_qp(2, seq, 700, &hops), &int_listen)
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }

    let mut congestion = None;
    let mut paths = None;
    let (mut rate_mismatch, mut start_mismatch) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && (congestion.is_none()
            || paths.is_none()
            || rate_mismatch.is_none()
            || start_mismatch.is_none())
    {
        let ev = tokio::time::timeout(Duration::from_secs(2), watch.message())
            .await
            .expect("events keep coming")
            .unwrap()
            .expect("stream open")
            .validate()
            .expect("a valid event");
        match ev.body {
            WatchEventBody::Telemetry(t) => {
                if let Some(c) = t.congestion_events.iter().find(|c| c.duration_ns > 0) {
                    congestion = Some(c.clone());
                }
                if !t.paths.is_empty() {
                    paths = Some(t.paths.clone());
                }
            }
            WatchEventBody::Deviation(d) => {
                if let NetworkChange::ForecastMismatch(m) = d.change {
                    assert_eq!(d.affected_reservation_ids, vec![m.reservation_id.clone()]);
                    if m.reservation_id == d1 {
                        rate_mismatch = Some(m);
                    } else if m.reservation_id == d2 {
                        start_mismatch = Some(m);
                    }
                }
            }
        }
    }

    let c = congestion.expect("a finished congestion episode");
    assert_eq!(
        (
            c.link.from_node.as_str(),
            c.link.from_port,
            c.link.to_node.as_str()
        ),
        ("leaf2", 1, "h3")
    );
    assert_eq!(c.peak_queue_bytes, 40 * 1024);
    assert_eq!(
        c.affected_packets, 3,
        "three reports above 10 packets, one episode"
    );

    let paths = paths.expect("path availability");
    let h1h3 = paths
        .iter()
        .find(|p| p.destination_address.to_string() == "10.0.2.1")
        .expect("d1's host pair");
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert_eq!((h1h3.equal_cost_paths, h1h3.available_paths), (2, 2));
    // 90 % of h1's 100 G NIC, two 1 G reservations on it.
    assert_eq!(h1h3.max_reservable_bps, 88_000_000_000);

    let m = rate_mismatch.expect("d1 runs at 3 Gbit/s, forecast 1");
    assert_eq!(
        (m.expected_bps, m.observed_bps),
        (1_000_000_000, 3_000_000_000)
    );
    assert!(m.observed_start_unix_ns.is_some());
    let m = start_mismatch.expect("d2 never seen");
    assert_eq!(m.observed_start_unix_ns, None);
    assert_eq!(m.flow_id, "d2");

    let metrics = controller.get_text("/metrics");
    assert!(
        metrics.contains("foresight_int_reports_total 4"),
        "{metrics}"
    );

    // The operator CLI: a bad link name is refused and changes nothing; a
    // fabric link goes down, d1 and d2 (both on h1's uplink side) that
    // used it are re-planned, and watchers hear of it.
    let foresight = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_foresight"))
            .args(args)
            .args(["--http", &controller.http])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, _, err) = foresight(&["link", "down", "leaf1:1"]);
    assert!(!ok);
    assert!(
        err.contains("connects host h1, not another switch"),
        "{err}"
    );
    let (ok, _, err) = foresight(&["link", "down", "leaf1"]);
    assert!(!ok);
    assert!(err.contains("want <switch>:<port>"), "{err}");
    let status = controller.get_json("/v1/status");
    assert!(status["controller"]["links_down"]
        .as_array()
        .unwrap()
        .is_empty());
    let (ok, out, err) = foresight(&["link", "down", &format!("leaf1:{uplink}")]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("link leaf1:{uplink} <-> ")), "{out}");
    assert!(out.contains(&d1), "d1 used the link: {out}");
    let (ok, out, _) = foresight(&["link", "down", &format!("leaf1:{uplink}")]);
    assert!(ok && out.contains("already down"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let down = loop {
        assert!(Instant::now() < deadline, "no link_down event");
        let ev = tokio::time::timeout(Duration::from_secs(2), watch.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .validate()
            .unwrap();
        if let WatchEventBody::Deviation(d) = ev.body {
            if let NetworkChange::LinkDown(l) = &d.change {
                break (l.clone(), d.affected_reservation_ids.clone());
            }
        }
    };
    assert_eq!(
        (down.0.from_node.as_str(), down.0.from_port),
        ("leaf1", u32::from(uplink))
    );
    assert!(down.1.contains(&d1), "{down:?}");
    let (ok, out, err) = foresight(&["link", "up", &format!("leaf1:{uplink}")]);
    assert!(ok && out.contains("is up"), "{out}{err}");
}
