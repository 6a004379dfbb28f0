//! The controller's NDSP service and operator CLI without any switch
//! (the switches file points at closed ports, so this runs everywhere):
//! planning and answers do not wait for switches, watch streams carry
//! telemetry snapshots and reservation changes, reservations can be read
//! back and paged, and the CLI (`reserve`, `cancel`, `status`) works
//! against a running controller with errors that say what to fix.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use ndsp::proto;
use ndsp::types::{NetworkChange, ReservationStatus, WatchEventBody};
use ndsp::Validate;

const MS: u64 = 1_000_000;

fn foresight(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ndsp_and_cli_against_a_controller_whose_switches_are_down() {
    let dir = tempfile::tempdir().unwrap();
    let switches = common::unreachable_switches(dir.path());

    // The CLI says what to do when there is no controller.
    let (ok, _, err) = foresight(&["status", "--http", "127.0.0.1:1"]);
    assert!(!ok);
    assert!(err.contains("is `foresight controller` running"), "{err}");
    let (ok, _, err) = foresight(&["cancel", "--controller", "127.0.0.1:1"]);
    assert!(!ok);
    assert!(err.contains("one of --demand, --collective"), "{err}");

    let controller = Controller::spawn(dir.path(), &switches, 50, &["--switch-wait-s", "0"]);
    let mut client = controller.client().await;
    let hello = client
        .handshake(proto::HandshakeRequest {
            header: header(),
            client_name: "test".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!(hello.max_label_stack_depth, 4);
    assert_eq!(hello.supported_collective_kinds.len(), 7);

    let mut watch = client
        .watch_events(proto::WatchEventsRequest {
            header: header(),
            job_ids: vec![],
            telemetry_interval_ns: 20 * MS,
        })
        .await
        .unwrap()
        .into_inner();

    let reg = client
        .register_topology(register("train-1", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!((reg.registered_ranks, reg.generation), (16, 1));
    let r = client
        .submit_collective(ring_allreduce("ar-1", "train-1", 16, 1, 0, 10_000 * MS))
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!(r.status, ReservationStatus::Admitted, "{r:?}");

    // The CLI: reserve a demand, see it in the status, cancel it.
    let (ok, out, err) = foresight(&[
        "reserve",
        "demand",
        "--controller",
        &controller.ndsp,
        "--tenant",
        "acme",
        "--id",
        "cli-1",
        "--src",
        "10.0.1.2",
        "--dst",
        "10.0.2.2",
        "--bytes",
        "1GB",
        "--duration-ms",
        "5000",
        "--start-in-ms",
        "0",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "ADMITTED", "{v}");
    assert_eq!(
        v["flows"][0]["path"][0].as_str().unwrap().split(':').next(),
        Some("leaf1")
    );
    let (ok, out, err) = foresight(&[
        "reserve",
        "demand",
        "--controller",
        &controller.ndsp,
        "--tenant",
        "acme",
        "--id",
        "cli-1",
        "--src",
        "10.0.1.2",
        "--dst",
        "10.0.2.2",
        "--bytes",
        "2GB",
        "--duration-ms",
        "5000",
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("already exists") && err.contains("demands[0].demand_id"),
        "{err}"
    );
    let (ok, out, err) = foresight(&["status", "--http", &controller.http, "--json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        status["reservations"]["by_state"]["installed"], 2,
        "{status}"
    );
    assert!(status["switches"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["role"] == "disconnected"));
    let (ok, text, _) = foresight(&["status", "--http", &controller.http]);
    assert!(
        ok && text.contains("disconnected") && text.contains("collective:ar-1"),
        "{text}"
    );
    let (ok, _, err) = foresight(&["entries", "leaf9", "--http", &controller.http]);
    assert!(!ok && err.contains("no switch \"leaf9\""), "{err}");
    let (ok, out, err) = foresight(&[
        "cancel",
        "--controller",
        &controller.ndsp,
        "--tenant",
        "acme",
        "--demand",
        "cli-1",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("cancelled r"), "{out}");

    // The watch stream: telemetry with the collective's reserved links, and
    // the cancellation as a reservation change.
    let (mut telemetry, mut cancelled) = (false, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !(telemetry && cancelled) {
        let event = tokio::time::timeout_at(deadline, watch.message())
            .await
            .expect("events")
            .unwrap()
            .unwrap();
        match event.validate().expect("valid watch event").body {
            WatchEventBody::Telemetry(t) => {
                telemetry |= t
                    .links
                    .iter()
                    .any(|l| l.reserved_bps > 0 && l.link.from_node == "h1");
            }
            WatchEventBody::Deviation(d) => {
                if let NetworkChange::ReservationChanged(r) = d.change {
                    cancelled |= r.status == ReservationStatus::Cancelled;
                }
            }
        }
    }

    // Reading back: get, list with paging, bad token.
    let list = |token: &str| proto::ListReservationsRequest {
        header: header(),
        job_id: String::new(),
        page_size: 1,
        page_token: token.into(),
    };
    let page1 = client
        .list_reservations(list(""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page1.reservations.len(), 1);
    assert!(!page1.next_page_token.is_empty());
    let page2 = client
        .list_reservations(list(&page1.next_page_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page2.reservations.len(), 1);
    assert!(page2.next_page_token.is_empty());
    let cancelled_id = page2.reservations[0].reservation_id.clone();
    let got = client
        .get_reservation(proto::GetReservationRequest {
            header: header(),
            reservation_id: cancelled_id,
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!(got.status, ReservationStatus::Cancelled);
    let s = client.list_reservations(list("zz")).await.unwrap_err();
    assert_eq!(s.code(), tonic::Code::InvalidArgument);
    assert!(s.message().starts_with("page_token: "), "{}", s.message());
    let s = client
        .get_reservation(proto::GetReservationRequest {
            header: header(),
            reservation_id: "r999/x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), tonic::Code::NotFound);

    let metrics = controller.get_text("/metrics");
    for needle in [
        "foresight_reservations{state=\"installed\"} 1",
        "foresight_reservations{state=\"cancelled\"} 1",
        "foresight_ndsp_requests_total{rpc=\"SubmitCollective\",code=\"Ok\"} 1",
        "foresight_planner_seconds_count 2",
        "foresight_switch_up{switch=\"leaf1\"} 0",
    ] {
        assert!(metrics.contains(needle), "{needle} not in\n{metrics}");
    }
}
