//! T+5 on a running controller (its switches are down: no BMv2 needed): a
//! registered job that announces nothing sends three ring iterations (as
//! the INT reports of its host pairs show them); the controller reserves
//! the next two by itself, marked predicted, keeps reserving while the job
//! keeps time, and withdraws them (with a prediction_withdrawn event)
//! within one period of the job going silent. On BMv2: a learned job's
//! host pairs are watched at their source leaves while it is registered
//! (their counters read back as the controller polls them), and no longer
//! once it is cancelled. Learning from real TCP traffic through BMv2 is
//! tested in the lab (`bmv2-lab/test_lab.py`).

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::*;
use ndsp::proto;
use ndsp::types::{NetworkChange, ReservationStatus, ValidatedReservation, WatchEventBody};
use ndsp::Validate;

const PERIOD: Duration = Duration::from_millis(400);

/// One ring iteration over the job's four hosts: 10 reports of 1,000-byte
/// packets per hop over 30 ms.
fn iteration(udp: &std::net::UdpSocket, to: &str, hosts: &[Ipv4Addr]) {
    for k in 0..10u32 {
        for (i, &src) in hosts.iter().enumerate() {
            let dst = hosts[(i + 1) % hosts.len()];
            let r = testkit::int::report_between(src, dst, 1000, 2, k, &[(2, 3, 1, 0, 0, 0)]);
            udp.send_to(&r, to).unwrap();
        }
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// Every reservation of the job "train".
async fn reservations(client: &mut Client) -> Vec<ValidatedReservation> {
    client
        .list_reservations(proto::ListReservationsRequest {
            header: header(),
            job_id: "train".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap()
        .reservations
}

async fn predicted(client: &mut Client) -> Vec<ValidatedReservation> {
    reservations(client)
        .await
        .into_iter()
        .filter(|r| r.predicted)
        .collect()
}

/// The predicted reservations once `done` holds of them, polled for up to
/// two seconds (the controller acts on its own timers, later under load);
/// the last list read otherwise, for the caller's assertion to show.
async fn predicted_when(
    client: &mut Client,
    done: impl Fn(&[ValidatedReservation]) -> bool,
) -> Vec<ValidatedReservation> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let ahead = predicted(client).await;
        if done(&ahead) || Instant::now() >= deadline {
            return ahead;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

type Client =
    ndsp::proto::demand_signaling_client::DemandSignalingClient<tonic::transport::Channel>;

/// The registered job "train" on these hosts, and a watch of its events.
async fn register_and_watch(
    client: &mut Client,
    hosts: &[&str],
) -> tonic::Streaming<proto::WatchEvent> {
    client
        .register_topology(register("train", hosts))
        .await
        .unwrap();
    client
        .watch_events(proto::WatchEventsRequest {
            header: header(),
            job_ids: vec!["train".into()],
            telemetry_interval_ns: 0,
        })
        .await
        .unwrap()
        .into_inner()
}

/// The next prediction_withdrawn event within `wait`: (job, reason,
/// reservation ids).
async fn next_withdrawal(
    watch: &mut tonic::Streaming<proto::WatchEvent>,
    wait: Duration,
) -> Option<(String, String, Vec<String>)> {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        let Ok(Some(Ok(ev))) = tokio::time::timeout(Duration::from_millis(200), watch.message())
            .await
            .map(|m| m.transpose())
        else {
            continue;
        };
        if let WatchEventBody::Deviation(d) = ev.validate().expect("a valid event").body {
            if let NetworkChange::PredictionWithdrawn { job_id, reason } = d.change {
                return Some((job_id, reason, d.affected_reservation_ids));
            }
        }
    }
    None
}

fn demand_ids(ahead: &[ValidatedReservation]) -> Vec<String> {
    let mut ids: Vec<String> = ahead
        .iter()
        .map(|r| match &r.subject {
            ndsp::types::ReservationSubject::Demand(d) => d.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_job_is_learned_reserved_ahead_and_withdrawn() {
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
            "--learn-iterations",
            "--learn-from",
            "int",
            "--learn-idle-ms",
            "40",
            "--learn-jitter",
            "0.2",
        ],
    );
    let mut client = controller.client().await;
    let hosts: Vec<Ipv4Addr> = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"]
        .iter()
        .map(|h| h.parse().unwrap())
        .collect();
    let names: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut watch = register_and_watch(&mut client, &names).await;

    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let t0 = Instant::now();
    for i in 0..3u32 {
        tokio::time::sleep_until((t0 + PERIOD * i).into()).await;
        iteration(&udp, &int_listen, &hosts);
    }
    // The third iteration closes 40 ms after its last report.
    let expected_ids = [
        "t5/train/4/0",
        "t5/train/4/1",
        "t5/train/4/2",
        "t5/train/4/3",
        "t5/train/5/0",
        "t5/train/5/1",
        "t5/train/5/2",
        "t5/train/5/3",
    ];
    let ahead = predicted_when(&mut client, |a| demand_ids(a) == expected_ids).await;
    assert_eq!(demand_ids(&ahead), expected_ids, "{ahead:?}");
    for r in &ahead {
        assert_eq!(r.status, ReservationStatus::Admitted, "{r:?}");
        // What a 100 Gbit/s NIC may reserve (90 %): each host sends one
        // transfer.
        assert_eq!(r.flows[0].requested_bps, 90_000_000_000, "{r:?}");
    }
    // The 4th iteration is reserved around its expected start.
    let now_ns = now_unix_ns();
    let fourth = ahead
        .iter()
        .filter(|r| matches!(&r.subject, ndsp::types::ReservationSubject::Demand(d) if d.starts_with("t5/train/4/")))
        .map(|r| r.start_unix_ns)
        .min()
        .unwrap();
    let expected = now_ns + (PERIOD * 3).saturating_sub(t0.elapsed()).as_nanos() as u64;
    let slack = 150_000_000;
    assert!(
        fourth.abs_diff(expected) < slack,
        "4th iteration reserved from {fourth}, expected about {expected}"
    );

    // The job keeps time: iteration 4 confirms, iteration 6 is reserved.
    tokio::time::sleep_until((t0 + PERIOD * 3).into()).await;
    iteration(&udp, &int_listen, &hosts);
    let sixth = |a: &[ValidatedReservation]| {
        a.iter().any(|r| matches!(&r.subject, ndsp::types::ReservationSubject::Demand(d) if d.starts_with("t5/train/6/")))
    };
    let ahead = predicted_when(&mut client, sixth).await;
    assert!(sixth(&ahead), "{ahead:?}");

    // Then it goes silent: every predicted reservation not yet ended is
    // withdrawn within one period of the missed start.
    let silent = Instant::now();
    let (job, reason, affected) = next_withdrawal(&mut watch, 2 * PERIOD + Duration::from_secs(1))
        .await
        .expect("a prediction_withdrawn event");
    let after = silent.elapsed();
    assert_eq!(job, "train");
    assert!(reason.contains("no iteration"), "{reason}");
    assert!(!affected.is_empty());
    // Silence starts ~120 ms after iteration 4 began; iteration 5 was due
    // 400 ms after it, with 80 ms of jitter allowed: withdrawn before
    // iteration 6 would have been due (the margin is for a loaded machine).
    assert!(
        after < 2 * PERIOD,
        "withdrawn {after:?} after the job went silent"
    );
    // What is left of the job's predictions has ended (the iterations it
    // did); nothing is reserved ahead any more.
    let now_ns = now_unix_ns();
    let left: Vec<_> = predicted(&mut client)
        .await
        .into_iter()
        .filter(|r| r.status != ReservationStatus::Cancelled && r.end_unix_ns > now_ns)
        .collect();
    assert!(left.is_empty(), "still reserved: {left:?}");
    let metrics = controller.get_text("/metrics");
    assert!(
        metrics.contains("foresight_int_reports_total 160"),
        "{metrics}"
    );
}

/// The job announces the ring iteration starting one period from now (T+1).
async fn announce(client: &mut Client, hosts: &[&str], n: u32) -> Vec<String> {
    let demands: Vec<proto::DemandSignal> = (0..hosts.len())
        .map(|i| proto::DemandSignal {
            job_id: "train".into(),
            ..testkit::requests::demand(
                &format!("announced-{n}-{i}"),
                hosts[i],
                hosts[(i + 1) % hosts.len()],
                PERIOD.as_nanos() as u64,
                30_000_000,
                10_000_000_000,
                None,
            )
        })
        .collect();
    let answer = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands,
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    answer.into_iter().map(|r| r.reservation_id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcing_job_is_learned_and_its_announcements_take_over() {
    let dir = tempfile::tempdir().unwrap();
    let switches = common::unreachable_switches(dir.path());
    // Learning from the watch counters (the default): the switches are
    // down, so only the announcements are seen.
    let controller = Controller::spawn(
        dir.path(),
        &switches,
        50,
        &[
            "--switch-wait-s",
            "0",
            "--learn-iterations",
            "--learn-horizon",
            "1",
            "--learn-jitter",
            "0.2",
        ],
    );
    let mut client = controller.client().await;
    let hosts = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"];
    let mut watch = register_and_watch(&mut client, &hosts).await;

    let t0 = Instant::now();
    for n in 0..3u32 {
        tokio::time::sleep_until((t0 + PERIOD * n).into()).await;
        announce(&mut client, &hosts, n).await;
    }
    // Three announced iterations lock the learner: the iteration after the
    // last announced one is reserved, predicted, before the job says it.
    let fourth = [
        "t5/train/4/0",
        "t5/train/4/1",
        "t5/train/4/2",
        "t5/train/4/3",
    ];
    let ahead = predicted_when(&mut client, |a| demand_ids(a) == fourth).await;
    assert_eq!(demand_ids(&ahead), fourth, "{ahead:?}");
    let predicted_ids: Vec<String> = ahead.iter().map(|r| r.reservation_id.clone()).collect();

    // The job announces that iteration itself: its own reservation takes
    // over (the prediction is withdrawn, with an event saying why), and
    // the next one is predicted.
    tokio::time::sleep_until((t0 + PERIOD * 3).into()).await;
    let announced = announce(&mut client, &hosts, 3).await;
    let (_, reason, affected) = next_withdrawal(&mut watch, Duration::from_secs(2))
        .await
        .expect("a prediction_withdrawn event");
    assert!(reason.contains("announced"), "{reason}");
    let mut affected = affected;
    affected.sort();
    let mut expected = predicted_ids.clone();
    expected.sort();
    assert_eq!(affected, expected);
    let fifth = [
        "t5/train/5/0",
        "t5/train/5/1",
        "t5/train/5/2",
        "t5/train/5/3",
    ];
    let live = |a: &[ValidatedReservation]| -> Vec<ValidatedReservation> {
        a.iter()
            .filter(|r| r.status != ReservationStatus::Cancelled)
            .cloned()
            .collect()
    };
    let ahead = predicted_when(&mut client, |a| demand_ids(&live(a)) == fifth).await;
    assert_eq!(demand_ids(&live(&ahead)), fifth, "{ahead:?}");
    // Every announced reservation stands, none is predicted.
    let all = reservations(&mut client).await;
    for id in &announced {
        let r = all
            .iter()
            .find(|r| &r.reservation_id == id)
            .expect("announced reservation listed");
        assert!(
            !r.predicted && r.status == ReservationStatus::Admitted,
            "{r:?}"
        );
    }
    controller.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_jobs_host_pairs_are_watched_on_the_switches() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("T+5 watch entries on BMv2") else {
        return;
    };
    let int_listen = format!("127.0.0.1:{}", free_udp_port());
    let controller =
        fabric.controller_with(100, &["--int-listen", &int_listen, "--learn-iterations"]);
    let mut reader = fabric.reader().await;
    let watch = ["FsIngress.int_ingress.watchlist"];
    let mut client = controller.client().await;
    client
        .register_topology(register("train", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let line = |src: &str, dst: &str| {
        format!("FsIngress.int_ingress.watchlist|dst_addr={dst}&&&255.255.255.255,src_addr={src}&&&255.255.255.255|FsIngress.int_ingress.int_source(ds_instruction=32768,instruction_bitmap=62464,max_hop=8)")
    };
    let entries = reader.entries(&watch).await;
    assert_eq!(
        entries["leaf1"],
        [line("10.0.1.1", "10.0.2.1")].into_iter().collect(),
        "{entries:?}"
    );
    assert_eq!(
        entries["leaf2"],
        [line("10.0.2.1", "10.0.1.1")].into_iter().collect(),
        "{entries:?}"
    );
    assert!(entries.get("spine1").is_none_or(|s| s.is_empty()));
    // The read the controller polls (--learn-from counters): every watch
    // entry's counter at once, each naming its entry.
    let info = reader.info().await.clone();
    let table_id = info
        .table("FsIngress.int_ingress.watchlist")
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .id;
    let counters = reader.sessions["leaf1"]
        .read(vec![p4rt::proto::p4::v1::DirectCounterEntry {
            table_entry: Some(p4rt::proto::p4::v1::TableEntry {
                table_id,
                ..Default::default()
            }),
            data: None,
        }
        .into()])
        .await
        .unwrap();
    assert_eq!(counters.len(), 1, "{counters:?}");
    match &counters[0].entity {
        Some(p4rt::proto::p4::v1::entity::Entity::DirectCounterEntry(c)) => {
            let entry = c.table_entry.as_ref().unwrap();
            assert_eq!(entry.priority, 50);
            assert_eq!(entry.r#match.len(), 2, "{entry:?}");
        }
        other => panic!("expected a direct counter, got {other:?}"),
    }
    client
        .cancel(proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::JobId("train".into())),
        })
        .await
        .unwrap();
    let entries = reader.entries(&watch).await;
    assert!(entries.values().all(|s| s.is_empty()), "{entries:?}");
    controller.kill();
}
