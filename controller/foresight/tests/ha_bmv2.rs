//! Highly available controller: three replicas of `foresight controller
//! --etcd` on a three-member etcd cluster, driving the BMv2 leaf-spine. A
//! client streams demands through a failure (the leader SIGKILLed, the
//! leader paused past its lease and resumed, an etcd member killed) and
//! retries, as the CLI does, wherever a replica points it. Afterwards:
//! every acknowledged demand is one live reservation of the new leader,
//! nothing else is, and every switch holds exactly the leader's intended
//! entries (read back over P4Runtime as a backup client).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use common::replica::{start_replicas, wait_leader, Replica, STEP_DOWN_EXIT};
use common::{demand, header, http, now_unix_ns, Fabric};
use ndsp::proto::{self, demand_signaling_client::DemandSignalingClient};
use ndsp::Validate;
use testkit::etcd::Cluster;

const HOSTS: [&str; 4] = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"];

/// Demand `i`: 50 Mbit/s between two hosts on different leaves to QP
/// 1000 + i (its own reservation entry), for 300 s from 200 ms after the
/// stream began (an absolute window, so that a retried request is
/// identical).
fn demand_request(i: usize, reference: u64) -> proto::SubmitDemandRequest {
    let (src, dst) = match i % 4 {
        0 => (HOSTS[0], HOSTS[2]),
        1 => (HOSTS[1], HOSTS[3]),
        2 => (HOSTS[2], HOSTS[0]),
        _ => (HOSTS[3], HOSTS[1]),
    };
    proto::SubmitDemandRequest {
        header: header(),
        reference_unix_ns: reference,
        demands: vec![demand(
            &format!("d{i:04}"),
            src,
            dst,
            200_000_000,
            300_000_000_000,
            50_000_000,
            Some(1000 + i as u32),
        )],
    }
}

/// Submit like the CLI: on UNAVAILABLE or a broken connection, retry at
/// the leader the replica named, else the next replica. Starts at
/// `addrs[*first]` and leaves there the one that answered (so that a paused
/// replica costs one timeout, not one per request). The reservation id and
/// how many attempts it took.
async fn submit(
    addrs: &[String],
    first: &mut usize,
    request: proto::SubmitDemandRequest,
) -> (String, usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut next = *first;
    let mut leader: Option<String> = None;
    for attempt in 1.. {
        let addr = leader.take().unwrap_or_else(|| {
            next += 1;
            addrs[(next - 1) % addrs.len()].clone()
        });
        let error = match tokio::time::timeout(
            Duration::from_secs(5),
            DemandSignalingClient::connect(format!("http://{addr}")),
        )
        .await
        {
            // A paused replica accepts connections but never answers.
            Ok(Ok(mut client)) => match tokio::time::timeout(
                Duration::from_secs(5),
                client.submit_demand(request.clone()),
            )
            .await
            .unwrap_or_else(|_| Err(tonic::Status::deadline_exceeded("no answer in 5 s")))
            {
                Ok(answer) => {
                    *first = addrs.iter().position(|a| *a == addr).unwrap_or(*first);
                    let r = answer.into_inner().validate().expect("valid answer");
                    return (r[0].reservation_id.clone(), attempt);
                }
                Err(s) => {
                    assert!(
                        matches!(
                            s.code(),
                            tonic::Code::Unavailable
                                | tonic::Code::Cancelled
                                | tonic::Code::Unknown
                                | tonic::Code::DeadlineExceeded
                        ),
                        "demand {:?} refused: {s:?}",
                        request.demands[0].demand_id
                    );
                    leader = s
                        .metadata()
                        .get("foresight-leader")
                        .and_then(|v| v.to_str().ok())
                        .map(String::from);
                    format!("{s:?}")
                }
            },
            Ok(Err(e)) => format!("{e:?}"),
            Err(_) => "connect timed out".into(),
        };
        assert!(
            Instant::now() < deadline,
            "demand {:?} not accepted in 30 s: {error}",
            request.demands[0].demand_id
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    unreachable!()
}

/// Stream `n` demands from `first`, calling `fault` once `at` of them were
/// acknowledged; demand id → reservation id, and the requests that needed
/// a retry.
async fn stream(
    addrs: &[String],
    first: usize,
    n: usize,
    at: usize,
    mut fault: impl FnMut(),
) -> (BTreeMap<String, String>, usize) {
    let reference = now_unix_ns();
    let mut acked = BTreeMap::new();
    let mut retried = 0;
    let mut answered_last = 0;
    for i in first..first + n {
        if i - first == at {
            fault();
        }
        let (reservation, attempts) =
            submit(addrs, &mut answered_last, demand_request(i, reference)).await;
        if attempts > 1 {
            retried += 1;
        }
        assert!(
            acked.insert(format!("d{i:04}"), reservation).is_none(),
            "demand d{i:04} acknowledged twice"
        );
    }
    (acked, retried)
}

/// The leader's live reservations: demand id → reservation id.
async fn live(leader: &Replica) -> BTreeMap<String, String> {
    let mut client = DemandSignalingClient::connect(format!("http://{}", leader.ndsp))
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_reservations(proto::ListReservationsRequest {
                header: header(),
                job_id: String::new(),
                page_size: 1000,
                page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .validate()
            .unwrap();
        for r in page.reservations {
            let demand = match r.subject {
                ndsp::types::ReservationSubject::Demand(d) => d,
                other => panic!("unexpected subject {other:?}"),
            };
            assert!(
                out.insert(demand.clone(), r.reservation_id).is_none(),
                "demand {demand} has two live reservations"
            );
        }
        match page.next_page_token {
            Some(t) => token = t,
            None => break,
        }
    }
    out
}

/// Every acknowledged demand is exactly one live reservation of the
/// leader, nothing else is, and every switch holds exactly the leader's
/// intended entries.
async fn check_installed(fabric: &Fabric, leader: &Replica, acked: &BTreeMap<String, String>) {
    assert_eq!(
        &live(leader).await,
        acked,
        "live reservations ≠ acknowledged demands"
    );
    let http = leader.ready().unwrap()["http"]
        .as_str()
        .unwrap()
        .to_string();
    let mut reader = fabric.reader().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut drift = Vec::new();
        let on_switches = reader.entries(&["FsIngress.sr.reservation"]).await;
        for name in fabric.switches.keys() {
            let view = get_json(&http, &format!("/v1/entries/{name}"));
            for kind in ["missing", "unexpected", "different"] {
                let n = view["drift"][kind].as_array().map_or(0, |a| a.len());
                if n > 0 {
                    drift.push(format!("{name}: {n} {kind}"));
                }
            }
            let intended = view["entities"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["entry"]["table"] == "FsIngress.sr.reservation")
                .count();
            if intended != on_switches[name].len() {
                drift.push(format!(
                    "{name}: {intended} reservation entries intended, {} read back",
                    on_switches[name].len()
                ));
            }
        }
        if drift.is_empty() {
            // Each reservation has its own QP, so its own entries: one
            // per reservation on the source leaf.
            let total: usize = on_switches.values().map(BTreeSet::len).sum();
            assert_eq!(total, acked.len(), "reservation entries vs reservations");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "switches differ from the leader: {drift:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn get_json(addr: &str, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
}

/// Dropped in field order: the replicas (and their logs) before the
/// fabric's directory.
struct Setup {
    replicas: Vec<Replica>,
    etcd: Cluster,
    fabric: Fabric,
    leader: usize,
    addrs: Vec<String>,
}

fn setup(test: &str) -> Option<Setup> {
    let fabric = Fabric::start(test)?;
    let etcd = Cluster::start(test, 3)?;
    let (replicas, leader) = start_replicas(&fabric, &etcd);
    let addrs = replicas.iter().map(|r| r.ndsp.clone()).collect();
    Some(Setup {
        fabric,
        etcd,
        replicas,
        leader,
        addrs,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_mid_stream_loses_nothing() {
    let _guard = common::serial().await;
    let Some(mut s) = setup("the_leader_killed_mid_stream_loses_nothing") else {
        return;
    };
    let old = s.leader;
    let (acked, retried) = {
        let replicas = &mut s.replicas;
        stream(&s.addrs, 0, 1000, 300, || replicas[old].kill()).await
    };
    assert!(retried > 0, "the kill should have made some request retry");
    let new = wait_leader(&mut s.replicas, Some(old), Duration::from_secs(10));
    // It took over without waiting for the lease: a follower saw the dead
    // leader's port refuse connections and revoked its lease.
    assert!(
        s.replicas.iter().any(|r| r.log_text().contains(REVOKED)),
        "no follower revoked the dead leader's lease:\n{}",
        s.replicas
            .iter()
            .map(|r| format!("--- {} ---\n{}", r.name, r.log_text()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    check_installed(&s.fabric, &s.replicas[new], &acked).await;
    // The admin port: the follower points at the leader, which answers.
    let follower = (0..3).find(|i| *i != old && *i != new).unwrap();
    let (f, l) = (&s.replicas[follower].http, &s.replicas[new].http);
    assert_eq!(http::request(f, "GET", "/healthz").body, "following\n");
    let status = http::request(f, "GET", "/v1/status");
    assert_eq!(status.code, 503, "{}", status.body);
    assert_eq!(status.header("foresight-leader"), Some(l.as_str()));
    assert!(http::error_of(&status).contains(&format!("the leader is {}", s.replicas[new].name)));
    assert_eq!(http::request(l, "GET", "/v1/status").code, 200);
    let _ = &s.etcd;
}

/// What a follower logs when it revokes a dead leader's lease.
const REVOKED: &str = "the leader's NDSP port refuses connections: its lease revoked";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_is_fenced_and_steps_down() {
    let _guard = common::serial().await;
    let Some(mut s) = setup("a_paused_leader_is_fenced_and_steps_down") else {
        return;
    };
    let old = s.leader;
    let (mut acked, _) = stream(&s.addrs, 0, 50, 50, || {}).await;
    s.replicas[old].signal(libc::SIGSTOP);
    // Past the 1 s lease: another replica leads and takes the switches.
    let new = wait_leader(&mut s.replicas, Some(old), Duration::from_secs(10));
    let (more, _) = stream(&s.addrs, 50, 50, 50, || {}).await;
    acked.extend(more);
    s.replicas[old].signal(libc::SIGCONT);
    // A paused leader still accepts connections: it lost its lease to the
    // TTL, not to a follower's probe.
    assert!(s.replicas.iter().all(|r| !r.log_text().contains(REVOKED)));
    let code = s.replicas[old].wait_exit(Duration::from_secs(10));
    assert_eq!(
        code,
        Some(STEP_DOWN_EXIT),
        "the resumed old leader must step down on its own:\n{}",
        s.replicas[old].log_text()
    );
    assert!(s.replicas[old].log_text().contains("stepping down"));
    check_installed(&s.fabric, &s.replicas[new], &acked).await;

    // The CLI, given the replicas with the dead one and a follower first,
    // reaches the leader and reserves.
    let follower = (0..3).find(|i| *i != old && *i != new).unwrap();
    let order = [old, follower, new].map(|i| s.replicas[i].ndsp.clone());
    let out = Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args([
            "reserve", "demand", "--id", "cli-1", "--src", HOSTS[0], "--dst", HOSTS[2],
        ])
        .args([
            "--bytes",
            "1MB",
            "--rate-gbps",
            "1",
            "--start-in-ms",
            "60000",
        ])
        .args([
            "--tenant",
            "acme",
            "--json",
            "--controller",
            &order.join(","),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live = live(&s.replicas[new]).await;
    assert!(live.contains_key("cli-1"), "{live:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_an_etcd_member_loses_nothing() {
    let _guard = common::serial().await;
    let Some(mut s) = setup("losing_an_etcd_member_loses_nothing") else {
        return;
    };
    let (acked, _) = {
        let etcd = &mut s.etcd;
        stream(&s.addrs, 0, 300, 100, || etcd.kill(0)).await
    };
    // The leader may have stepped down if its etcd session broke; whoever
    // leads now holds everything.
    let leader = wait_leader(&mut s.replicas, None, Duration::from_secs(10));
    check_installed(&s.fabric, &s.replicas[leader], &acked).await;
    // A leader stopped on purpose hands over and exits 0, not as if its
    // lease had been lost.
    s.replicas[leader].signal(libc::SIGTERM);
    let code = s.replicas[leader].wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{}", s.replicas[leader].log_text());
    let next = wait_leader(&mut s.replicas, Some(leader), Duration::from_secs(10));
    check_installed(&s.fabric, &s.replicas[next], &acked).await;
}
