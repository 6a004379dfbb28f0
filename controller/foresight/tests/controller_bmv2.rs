//! The controller end to end on BMv2 (no Mininet): the `foresight
//! controller` binary runs as a child process against four BMv2 switches
//! of the lab's small leaf-spine; the test speaks NDSP to it and reads the
//! switches itself over P4Runtime (as a backup client).
//!
//! * a 16-rank ring all-reduce (and two host demands, one of which falls
//!   back to ECMP) produces exactly the expected entries — SR push and INT
//!   watch at the ingress leaves, lowered DCQCN thresholds on every port of
//!   the reserved paths (but not for the reserved queue), pre-drain marks for the competing fallback flow —
//!   on the right switches, no earlier than start − lead, before the start,
//!   and they disappear at expiry;
//! * malformed NDSP messages are rejected with the field named and change
//!   nothing (controller state, state file, switches);
//! * kill -9 the controller with live reservations, drift the switches
//!   while it is down, restart it: it reconciles with zero duplicates and
//!   zero losses, keeps the pipeline, and the schedule goes on; a switch
//!   restart is reconciled too.
//!
//! Skipped (with a line saying so) when BMv2 is not installed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use ndsp::proto;
use ndsp::types::ValidatedReservation;
use ndsp::Validate;

const MS: u64 = 1_000_000;

/// Decoded entries by switch.
type Entries = BTreeMap<String, BTreeSet<String>>;

/// What the switches must hold for `reservations`' installed flows:
/// (SR + watch entries by switch, lowered (switch, port)s).
fn expected(reservations: &[&ValidatedReservation]) -> (Entries, BTreeSet<(String, u32)>) {
    let mut entries: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut busy = BTreeSet::new();
    for r in reservations {
        for f in &r.flows {
            if f.accepted_bps == 0 {
                continue;
            }
            let leaf = f.hops[0].node.clone();
            let (qp, port) = match f.dest_qp {
                Some(q) => (
                    format!("dst_qp={q}&&&16777215,"),
                    "l4_dst_port=4791&&&65535,",
                ),
                None => (String::new(), ""),
            };
            let (src, dst) = (f.source_address, f.destination_address);
            let labels: Vec<String> = f
                .sr_label_stack
                .iter()
                .enumerate()
                .map(|(i, l)| format!("label{i}={l}"))
                .collect();
            let set = entries.entry(leaf).or_default();
            set.insert(format!(
                "FsIngress.sr.reservation|dst_addr={dst}&&&255.255.255.255,{qp}src_addr={src}&&&255.255.255.255|FsIngress.sr.push_{}({},tc=5)",
                labels.len(),
                labels.join(",")
            ));
            set.insert(format!(
                "FsIngress.int_ingress.watchlist|dst_addr={dst}&&&255.255.255.255,{qp}{port}src_addr={src}&&&255.255.255.255|FsIngress.int_ingress.int_source(ds_instruction=32768,instruction_bitmap=62464,max_hop=8)"
            ));
            for h in &f.hops {
                busy.insert((h.node.clone(), h.egress_port));
            }
        }
    }
    (entries, busy)
}

fn lowered(port: u32) -> String {
    format!("FsEgress.ecn.dcqcn_port|egress_port={port}|FsEgress.ecn.set_dcqcn(kmax=12,kmin=2,pmax=32768)")
}

fn table_of(line: &str) -> &str {
    line.split('|').next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_installs_expected_entries_at_lead_time_and_removes_them_at_expiry() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("controller end-to-end test") else {
        return;
    };
    let lead_ms = 400;
    let int_port = free_udp_port();
    let int_listen = format!("127.0.0.1:{int_port}");
    let controller = fabric.controller_with(
        lead_ms,
        &["--int-collector", "h4", "--int-listen", &int_listen],
    );
    let mut reader = fabric.reader().await;
    let baseline = reader.entries(&DYNAMIC_TABLES).await;
    for (sw, set) in &baseline {
        assert!(
            set.iter().all(|l| table_of(l) == "FsEgress.ecn.dcqcn_port"),
            "{sw} holds reservation entries before any demand: {set:?}"
        );
    }

    let mut client = controller.client().await;
    client
        .register_topology(register("train-1", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let (start_in, duration) = (1500 * MS, 1200 * MS);
    let collective = client
        .submit_collective(ring_allreduce("ar-1", "train-1", 16, 2, start_in, duration))
        .await
        .unwrap()
        .into_inner()
        .validate()
        .expect("a valid reservation");
    assert_eq!(
        collective.flows.len(),
        4,
        "2 servers x 2 channels x 2 directions"
    );
    assert!(
        collective
            .flows
            .iter()
            .all(|f| f.accepted_bps == f.requested_bps && f.sr_label_stack.len() == 3),
        "{collective:?}"
    );
    // h2 -> h4 at 85 Gbit/s is admitted; a second 85 Gbit/s flow on the
    // same NIC cannot be, and falls back to ECMP: a competing flow.
    let demands = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![
                demand(
                    "bulk-a",
                    "10.0.1.2",
                    "10.0.2.2",
                    start_in,
                    duration,
                    85_000_000_000,
                    Some(1000),
                ),
                demand(
                    "bulk-b",
                    "10.0.1.2",
                    "10.0.2.2",
                    start_in,
                    duration,
                    85_000_000_000,
                    Some(1001),
                ),
            ],
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert_eq!(
        demands[0].flows[0].accepted_bps, 85_000_000_000,
        "{:?}",
        demands[0]
    );
    let b = &demands[1];
    assert_eq!(b.flows[0].accepted_bps, 0, "{b:?}");
    assert_eq!(
        proto::ReservationStatus::from(b.status),
        proto::ReservationStatus::FallbackEcmp,
        "{b:?}"
    );
    assert!(b.advisory.is_some());

    // The collective was not installed yet, so the controller may have
    // moved its flows to other paths for bulk-a (then WatchEvents carried
    // the change): what the switches get is the reservation as it is now.
    let listed = client
        .list_reservations(proto::ListReservationsRequest {
            header: header(),
            job_id: String::new(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .expect("a valid page");
    let collective: ValidatedReservation = listed
        .reservations
        .into_iter()
        .find(|r| r.reservation_id == collective.reservation_id)
        .expect("the collective is listed");
    assert!(
        collective
            .flows
            .iter()
            .all(|f| f.accepted_bps == f.requested_bps && f.sr_label_stack.len() == 3),
        "moves keep rates: {collective:?}"
    );

    // The demands were received a little after the collective: windows
    // differ by that much.
    let a = &demands[0];
    let start = collective.start_unix_ns.min(a.start_unix_ns);
    let last_start = collective.start_unix_ns.max(a.start_unix_ns);
    let end = collective.end_unix_ns.min(a.end_unix_ns);
    let last_end = collective.end_unix_ns.max(a.end_unix_ns);
    eprintln!(
        "windows: collective {}..{}, bulk-a {}..{} (ms after the first start: {:.3}, {:.3})",
        collective.start_unix_ns,
        collective.end_unix_ns,
        a.start_unix_ns,
        a.end_unix_ns,
        (last_start - start) as f64 / 1e6,
        (last_end - end) as f64 / 1e6
    );
    let install_at = start - lead_ms * MS;
    let all_installed = last_start - lead_ms * MS;
    let (want, busy) = expected(&[&collective, &demands[0]]);
    assert!(
        want.keys().all(|k| k.starts_with("leaf")),
        "only ingress leaves get reservation entries: {want:?}"
    );

    // Poll the ingress tables through the whole life of the reservation.
    let mut samples = Vec::new();
    let mut full = None;
    while now_unix_ns() < last_end + 700 * MS {
        let t0 = now_unix_ns();
        let e = reader
            .entries(&[
                "FsIngress.sr.reservation",
                "FsIngress.int_ingress.watchlist",
            ])
            .await;
        let t1 = now_unix_ns();
        let n: usize = e.values().map(BTreeSet::len).sum();
        samples.push((t0, t1, n));
        if full.is_none() && t0 > all_installed + 250 * MS && t1 < start {
            full = Some(reader.entries(&DYNAMIC_TABLES).await);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let total: usize = want.values().map(BTreeSet::len).sum();
    for &(t0, t1, n) in &samples {
        let at = |t: u64| format!("{:+.1} ms from the start", (t as f64 - start as f64) / 1e6);
        if t1 < install_at {
            assert_eq!(n, 0, "entries before start - lead (read ending {})", at(t1));
        }
        if t0 > all_installed + 250 * MS && t1 < end {
            assert_eq!(
                n,
                total,
                "not all entries installed (read starting {})",
                at(t0)
            );
        }
        if t0 > last_end + 250 * MS {
            assert_eq!(n, 0, "entries left after expiry (read starting {})", at(t0));
        }
    }
    assert!(
        samples
            .iter()
            .any(|&(t0, t1, n)| t0 >= all_installed && t1 < start && n == total),
        "installed ahead of the start"
    );
    assert!(
        samples
            .iter()
            .any(|&(t0, _, n)| t0 > last_end + 250 * MS && n == 0),
        "the poll outlived the reservation"
    );

    // Exactly the expected entries, on the right switches, mid-window.
    let full = full.expect("a full read between start - lead + 250 ms and the start");
    for (sw, set) in &full {
        let ingress: BTreeSet<String> = set
            .iter()
            .filter(|l| {
                matches!(
                    table_of(l),
                    "FsIngress.sr.reservation" | "FsIngress.int_ingress.watchlist"
                )
            })
            .cloned()
            .collect();
        assert_eq!(
            &ingress,
            want.get(sw).unwrap_or(&BTreeSet::new()),
            "SR/INT entries of {sw}"
        );
        // DCQCN: the baseline (every port's profile for all queues, and
        // its reserved queue's (5) above it), with the ports of reserved
        // paths lowered for every queue in between.
        let dcqcn: BTreeSet<String> = set
            .iter()
            .filter(|l| table_of(l) == "FsEgress.ecn.dcqcn_port")
            .cloned()
            .collect();
        let mut want_dcqcn = baseline[sw].clone();
        for line in &baseline[sw] {
            let port: u32 = line
                .split("egress_port=")
                .nth(1)
                .unwrap()
                .split(['|', ','])
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                baseline[sw].contains(&format!(
                    "FsEgress.ecn.dcqcn_port|egress_port={port},qid=5&&&7|FsEgress.ecn.set_dcqcn(kmax=50,kmin=10,pmax=13107)"
                )),
                "{sw}: port {port}'s reserved queue keeps its profile"
            );
            if busy.contains(&(sw.clone(), port)) {
                want_dcqcn.insert(lowered(port));
            }
        }
        assert_eq!(dcqcn, want_dcqcn, "DCQCN thresholds of {sw}");
        // Pre-drain: only the fallback flow, only on ports reservations use.
        for line in set
            .iter()
            .filter(|l| table_of(l) == "FsEgress.ecn.predrain")
        {
            assert!(
                line.contains("src_addr=10.0.1.2&&&255.255.255.255")
                    && line.contains("dst_addr=10.0.2.2&&&255.255.255.255")
                    && line.contains("dst_qp=1001&&&16777215"),
                "{line}"
            );
            assert!(
                line.ends_with("FsEgress.ecn.predrain_mark(probability=65535)"),
                "{line}"
            );
            let port: u32 = line
                .split("egress_port=")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                busy.contains(&(sw.clone(), port)),
                "pre-drain on {sw}:{port}, which no reservation uses"
            );
        }
    }
    let predrains: usize = full
        .values()
        .map(|s| {
            s.iter()
                .filter(|l| table_of(l) == "FsEgress.ecn.predrain")
                .count()
        })
        .sum();
    assert!(
        predrains >= 1,
        "the fallback flow crosses reserved ports: pre-drain expected"
    );

    // After expiry: back to the baseline exactly.
    assert_eq!(
        reader.entries(&DYNAMIC_TABLES).await,
        baseline,
        "state after expiry"
    );
    let status = controller.get_json("/v1/status");
    assert_eq!(status["reservations"]["by_state"]["expired"], 3, "{status}");
    assert_eq!(status["reservations"]["installed_flows"], 0);
    for sw in status["switches"].as_array().unwrap() {
        assert_eq!(sw["role"], "primary", "{sw}");
    }

    // Link utilisation from INT reports: leaf1 (node 1) port 3 sent
    // 1 250 000 bytes in 10 ms between two reports = 1 Gbit/s of 100.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for (seq, ts, tx) in [(1, 1_000_000u64, 5_000u32), (2, 1_010_000, 1_255_000)] {
        let report = int_report(
            2,
            seq,
            &[
                (2, 3, 1, 0, ts, 9),
                (3, 1, 2, 0, ts, 9),
                (1, 1, 3, 4, ts, tx),
            ],
        );
        udp.send_to(&report, &int_listen).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    udp.send_to(b"not a report", &int_listen).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let status = controller.get_json("/v1/status");
    let link = status["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["link"] == "leaf1:3 -> spine1:1")
        .cloned();
    let link = link.unwrap_or_else(|| panic!("no measured leaf1:3 link: {status}"));
    assert_eq!(link["measured_bps"], 1_000_000_000u64, "{link}");
    assert!(
        (link["utilization"].as_f64().unwrap() - 0.01).abs() < 1e-9,
        "{link}"
    );
    let log = controller.log_text();
    assert!(
        !log.contains('\x1b'),
        "a log written to a file carries colour codes:\n{log}"
    );
    let metrics = controller.get_text("/metrics");
    assert!(
        metrics.contains("foresight_int_reports_total 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("foresight_int_bad_reports_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("foresight_link_utilization{link=\"leaf1:3 -> spine1:1\"} 0.01"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ndsp_is_rejected_naming_the_field_and_changes_nothing() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("controller malformed-NDSP test") else {
        return;
    };
    let controller = fabric.controller(50);
    let mut reader = fabric.reader().await;
    let mut client = controller.client().await;
    client
        .register_topology(register("train-1", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let before = reader.everything().await;
    let state_before = fabric.saved_state();

    let expect_invalid =
        |r: Result<tonic::Response<proto::SubmitDemandResponse>, tonic::Status>, field: &str| {
            let s = r.unwrap_err();
            assert_eq!(s.code(), tonic::Code::InvalidArgument, "{s:?}");
            assert!(
                s.message().starts_with(&format!("{field}: ")),
                "{field}: {}",
                s.message()
            );
            assert_eq!(s.metadata().get("ndsp-field").unwrap(), field);
        };
    // A batch with one bad demand: none of them is planned.
    let mut bad = demand("bad", "10.0.1.1", "10.0.2.1", 0, 100 * MS, MS, None);
    bad.destination = Some(proto::Endpoint {
        address: Some(proto::endpoint::Address::HostAddress("10.0.2.300".into())),
    });
    let good = demand(
        "good",
        "10.0.1.1",
        "10.0.2.1",
        0,
        10_000 * MS,
        1_000_000_000,
        None,
    );
    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![good.clone(), bad],
        })
        .await;
    expect_invalid(r, "demands[1].destination.host_address");
    // Zero size, missing priority, wrong protocol major.
    let mut zero = good.clone();
    zero.size_bytes = 0;
    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![zero],
        })
        .await;
    expect_invalid(r, "demands[0].size_bytes");
    let mut unprioritised = good.clone();
    unprioritised.priority = 0;
    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![unprioritised],
        })
        .await;
    expect_invalid(r, "demands[0].priority");
    let mut old = header();
    old.as_mut().unwrap().protocol_version = Some(proto::ProtocolVersion { major: 2, minor: 0 });
    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: old,
            reference_unix_ns: 0,
            demands: vec![good.clone()],
        })
        .await;
    expect_invalid(r, "header.protocol_version.major");
    // Checks that need controller state name the field too.
    let mut unknown_job = ring_allreduce("ar-x", "no-such-job", 16, 1, 0, 100 * MS);
    let s = client
        .submit_collective(unknown_job.clone())
        .await
        .unwrap_err();
    assert_eq!(s.code(), tonic::Code::InvalidArgument);
    assert!(
        s.message().starts_with("collective.job_id: "),
        "{}",
        s.message()
    );
    unknown_job.collective.as_mut().unwrap().job_id = "train-1".into();
    unknown_job.collective.as_mut().unwrap().ranks = (0..12).collect();
    let s = client.submit_collective(unknown_job).await.unwrap_err();
    assert!(
        s.message().starts_with("collective.ranks: "),
        "{}",
        s.message()
    );
    let mut rank_demand = good.clone();
    rank_demand.job_id = "train-1".into();
    rank_demand.source = Some(proto::Endpoint {
        address: Some(proto::endpoint::Address::Rank(99)),
    });
    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![rank_demand],
        })
        .await;
    let s = r.unwrap_err();
    assert!(
        s.message().starts_with("demands[0].source.rank: "),
        "{}",
        s.message()
    );
    let s = client
        .cancel(proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::DemandId("never".into())),
        })
        .await
        .unwrap_err();
    assert_eq!(s.code(), tonic::Code::NotFound);
    assert!(s.message().starts_with("demand_id: "), "{}", s.message());

    // Nothing changed: no reservation, same state file, same switches.
    let list = client
        .list_reservations(proto::ListReservationsRequest {
            header: header(),
            job_id: String::new(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(list.reservations.is_empty(), "{list:?}");
    assert_eq!(fabric.saved_state(), state_before, "state file changed");
    assert_eq!(reader.everything().await, before, "switches changed");
    let metrics = controller.get_json("/v1/status");
    assert_eq!(metrics["reservations"]["list"].as_array().unwrap().len(), 0);

    // And a valid request still goes through after all that.
    let ok = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![good],
        })
        .await
        .unwrap();
    assert!(ok.metadata().get("foresight-install-us").is_some());
    assert_eq!(
        ok.into_inner().validate().unwrap()[0].flows[0].accepted_bps,
        1_000_000_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_reconciles_without_duplicates_or_losses() {
    let _serial = serial().await;
    let Some(mut fabric) = Fabric::start("controller restart test") else {
        return;
    };
    let controller = fabric.controller_with(100, &["--int-collector", "h4"]);
    let mut reader = fabric.reader().await;
    let mut client = controller.client().await;

    // 48 live reservations between every ordered host pair, distinct QPs;
    // one that ends while the controller is down, one that starts then.
    let hosts = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"];
    let mut demands = Vec::new();
    for i in 0..48u32 {
        let (s, d) = (i as usize % 4, (i as usize / 4 + 1 + i as usize % 4) % 4);
        let d = if d == s { (d + 1) % 4 } else { d };
        demands.push(demand(
            &format!("live-{i}"),
            hosts[s],
            hosts[d],
            0,
            600_000 * MS,
            500_000_000,
            Some(2000 + i),
        ));
    }
    demands.push(demand(
        "ends-while-down",
        "10.0.1.1",
        "10.0.2.2",
        0,
        1500 * MS,
        500_000_000,
        Some(3000),
    ));
    demands.push(demand(
        "due-while-down",
        "10.0.2.2",
        "10.0.1.1",
        2500 * MS,
        600_000 * MS,
        500_000_000,
        Some(3001),
    ));
    let reservations = client
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
    assert!(
        reservations.iter().all(|r| r.flows[0].accepted_bps > 0),
        "all admitted"
    );
    let before = reader
        .entries(&[
            "FsIngress.sr.reservation",
            "FsIngress.int_ingress.watchlist",
        ])
        .await;
    let n_before: usize = before.values().map(BTreeSet::len).sum();
    assert_eq!(n_before, 2 * 49, "SR + watch entry per installed flow");

    // kill -9, then drift while it is down: the test's backup session
    // becomes primary; lose one entry and add a stray one.
    controller.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let info = reader.info().await.clone();
    let leaf1 = &reader.sessions["leaf1"];
    leaf1
        .wait_primary(Duration::from_secs(5))
        .await
        .expect("the test's session is primary once the controller is gone");
    let victim = p4rt::EntrySpec {
        table: "FsIngress.sr.reservation".into(),
        matches: [
            (
                "src_addr".to_string(),
                "10.0.1.1&&&255.255.255.255".to_string(),
            ),
            (
                "dst_addr".to_string(),
                format!(
                    "{}&&&255.255.255.255",
                    reservations[0].flows[0].destination_address
                ),
            ),
            ("dst_qp".to_string(), "2000&&&0xffffff".to_string()),
        ]
        .into(),
        action: None,
        params: Default::default(),
        priority: Some(100),
        group: None,
        member: None,
        meter: None,
    };
    let mut victim_entry = victim.to_entry_key(&info);
    let stray = p4rt::EntrySpec {
        table: "FsIngress.sr.reservation".into(),
        matches: [
            (
                "src_addr".to_string(),
                "10.0.1.2&&&255.255.255.255".to_string(),
            ),
            (
                "dst_addr".to_string(),
                "10.0.2.1&&&255.255.255.255".to_string(),
            ),
            ("dst_qp".to_string(), "77&&&0xffffff".to_string()),
        ]
        .into(),
        action: Some("FsIngress.sr.push_1".into()),
        params: [
            ("tc".to_string(), "5".to_string()),
            ("label0".to_string(), "1003".to_string()),
        ]
        .into(),
        priority: Some(100),
        group: None,
        member: None,
        meter: None,
    };
    use p4rt::proto::p4::v1 as p4;
    victim_entry.action = None;
    leaf1
        .apply(p4::update::Type::Delete, [victim_entry.into()], 10)
        .await
        .expect("the test deletes an entry");
    leaf1
        .apply(
            p4::update::Type::Insert,
            [stray.to_entry(&info).unwrap().into()],
            10,
        )
        .await
        .expect("the test adds a stray entry");
    tokio::time::sleep(Duration::from_millis(2600)).await;

    // Restart on the same state file.
    let controller = fabric.controller_with(100, &["--int-collector", "h4"]);
    let status = controller.get_json("/v1/status");
    let (mut inserted, mut deleted, mut modified) = (0, 0, 0);
    for sw in status["switches"].as_array().unwrap() {
        let r = &sw["last_reconcile"];
        assert_eq!(
            r["pipeline"], "kept",
            "a restarted controller must not re-push the pipeline: {sw}"
        );
        inserted += r["inserted"].as_u64().unwrap();
        deleted += r["deleted"].as_u64().unwrap();
        modified += r["modified"].as_u64().unwrap();
        assert_eq!(sw["in_sync"], true, "{sw}");
    }
    assert_eq!(
        status["controller"]["restored_reservations"], 50,
        "{status}"
    );
    // Lost entry + the due reservation's SR and watch; the stray entry +
    // the expired reservation's SR and watch. DCQCN changes are modifies.
    assert_eq!(
        (inserted, deleted),
        (3, 3),
        "reconcile changes (modified {modified})"
    );
    let after = reader
        .entries(&[
            "FsIngress.sr.reservation",
            "FsIngress.int_ingress.watchlist",
        ])
        .await;
    let live: Vec<&ValidatedReservation> = reservations.iter().filter(|r| !matches!(&r.subject, ndsp::types::ReservationSubject::Demand(d) if d == "ends-while-down")).collect();
    let (want, _) = expected(&live);
    for (sw, set) in &after {
        assert_eq!(
            set,
            want.get(sw).unwrap_or(&BTreeSet::new()),
            "entries of {sw} after the restart"
        );
    }
    for sw in ["leaf1", "leaf2", "spine1", "spine2"] {
        let drift = &controller.get_json(&format!("/v1/entries/{sw}"))["drift"];
        for k in ["missing", "unexpected", "different"] {
            assert!(drift[k].as_array().unwrap().is_empty(), "{sw} {k}: {drift}");
        }
    }
    // The restarted controller still knows and serves the reservations.
    let list = controller
        .client()
        .await
        .list_reservations(proto::ListReservationsRequest {
            header: header(),
            job_id: String::new(),
            page_size: 1000,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.reservations.len(), 50);

    // A switch restart (all state lost) is reconciled as well.
    let everything = reader.everything().await;
    fabric
        .switches
        .get_mut("leaf1")
        .unwrap()
        .restart()
        .expect("leaf1 restarts");
    let mut ok = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = controller.get_json("/v1/status");
        let leaf1 = status["switches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "leaf1")
            .unwrap()
            .clone();
        if leaf1["reconciles"].as_u64().unwrap() >= 2 && leaf1["in_sync"] == true {
            assert_eq!(leaf1["last_reconcile"]["pipeline"], "pushed");
            ok = true;
            break;
        }
    }
    assert!(
        ok,
        "leaf1 not reconciled after its restart:\n{}",
        controller.log_text()
    );
    let mut reader = fabric.reader_with_id(2).await;
    assert_eq!(
        reader.everything().await,
        everything,
        "leaf1 after its restart"
    );
}

trait KeyOnly {
    fn to_entry_key(&self, info: &p4rt::P4Info) -> p4rt::proto::p4::v1::TableEntry;
}

impl KeyOnly for p4rt::EntrySpec {
    /// The entry's key (for a delete): built with a placeholder action.
    fn to_entry_key(&self, info: &p4rt::P4Info) -> p4rt::proto::p4::v1::TableEntry {
        let mut spec = self.clone();
        spec.action = Some("FsIngress.sr.push_1".into());
        spec.params = [
            ("tc".to_string(), "0".to_string()),
            ("label0".to_string(), "16".to_string()),
        ]
        .into();
        spec.to_entry(info).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_controller_takes_over_and_the_first_becomes_backup() {
    let _serial = serial().await;
    let Some(fabric) = Fabric::start("controller mastership test") else {
        return;
    };
    let first = fabric.controller(50);
    let mut client = first.client().await;
    let r = client
        .submit_demand(proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: 0,
            demands: vec![demand(
                "d",
                "10.0.1.1",
                "10.0.2.1",
                0,
                60_000 * MS,
                1_000_000_000,
                Some(400),
            )],
        })
        .await
        .unwrap()
        .into_inner()
        .validate()
        .unwrap();
    assert!(r[0].flows[0].accepted_bps > 0);
    let roles = |c: &Controller| -> Vec<String> {
        c.get_json("/v1/status")["switches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["role"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(roles(&first).iter().all(|r| r == "primary"));

    // A second controller (higher election id) on a copy of the state.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fabric.state_file(), dir.path().join("state.json")).unwrap();
    let journal = fabric.dir.path().join("state.json.journal");
    if journal.exists() {
        std::fs::copy(&journal, dir.path().join("state.json.journal")).unwrap();
    }
    let second = Controller::spawn(
        dir.path(),
        &fabric.dir.path().join("switches.yaml"),
        50,
        &["--election-id", "20"],
    );
    let status = second.get_json("/v1/status");
    for sw in status["switches"].as_array().unwrap() {
        assert_eq!(sw["role"], "primary", "{sw}");
        let r = &sw["last_reconcile"];
        assert_eq!(
            (r["inserted"].as_u64(), r["deleted"].as_u64()),
            (Some(0), Some(0)),
            "same intent, no change: {sw}"
        );
    }
    let mut backup = false;
    for _ in 0..50 {
        if roles(&first).iter().all(|r| r == "backup") {
            backup = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        backup,
        "the first controller sees itself as backup: {:?}",
        roles(&first)
    );
    // Its writes are refused while backup; it keeps the intent for later.
    let s = client
        .cancel(proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::DemandId("d".into())),
        })
        .await
        .unwrap();
    assert_eq!(s.into_inner().cancelled_reservation_ids.len(), 1);
    let mut reader = fabric.reader().await;
    let held = reader.entries(&["FsIngress.sr.reservation"]).await;
    assert_eq!(held["leaf1"].len(), 1, "the backup did not write");

    // The second goes away: the first is primary again and reconciles its
    // intent (the cancellation it could not write).
    second.kill();
    let mut primary = false;
    for _ in 0..100 {
        let status = first.get_json("/v1/status");
        if status["switches"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["role"] == "primary" && s["in_sync"] == true)
        {
            primary = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        primary,
        "the first controller is primary again:\n{}",
        first.log_text()
    );
    let held = reader.entries(&["FsIngress.sr.reservation"]).await;
    assert!(held.values().all(BTreeSet::is_empty), "{held:?}");
}
