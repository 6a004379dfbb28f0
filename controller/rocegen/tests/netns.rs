//! End-to-end: `rocegen run` in two network namespaces, directly over a veth
//! pair or through the user-space impairment relay (rate limit + CE marking,
//! or random loss) in a third namespace. Needs root and iproute2; skips
//! otherwise. Namespaces are deleted by name on drop.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use rocegen::dcqcn::DcqcnParams;
use rocegen::netns::Lab;
use rocegen::relay::{self, Impair, Relay};
use rocegen::spec::{Flow, Kind, Spec};

/// The cases measure rates: run them one at a time on the small CI box.
static SERIAL: Mutex<()> = Mutex::new(());

const BIN: &str = env!("CARGO_BIN_EXE_rocegen");
const IP_A: &str = "10.200.0.1";
const IP_B: &str = "10.200.0.2";

fn skip() -> bool {
    if rocegen::netns::available() {
        return false;
    }
    testkit::skip::skipped("rocegen network-namespace tests", "needs root and iproute2");
    true
}

struct Topo {
    // Declared first: the relay stops before its namespace goes away.
    relay: Option<Relay>,
    lab: Lab,
    ns_a: String,
    ns_b: String,
}

fn topo(case: &str, impair: Option<Impair>) -> Topo {
    let pid = std::process::id();
    let ns = |s: &str| format!("rgt-{pid}-{case}-{s}");
    // Interface names must fit 15 bytes.
    let ifn = |s: &str| format!("g{pid}{case}{s}");
    let (ns_a, ns_b, ns_r) = (ns("a"), ns("b"), ns("r"));
    let mut lab = Lab::new();
    lab.add_ns(&ns_a).unwrap();
    lab.add_ns(&ns_b).unwrap();
    let (if_a, if_b) = (ifn("a"), ifn("b"));
    let relay = match impair {
        None => {
            lab.veth(&ns_a, &if_a, &ns_b, &if_b).unwrap();
            None
        }
        Some(imp) => {
            lab.add_ns(&ns_r).unwrap();
            let (ra, rb) = (ifn("ra"), ifn("rb"));
            lab.veth(&ns_a, &if_a, &ns_r, &ra).unwrap();
            lab.veth(&ns_r, &rb, &ns_b, &if_b).unwrap();
            Some(relay::start(&ns_r, &ra, &rb, imp).unwrap())
        }
    };
    lab.addr(&ns_a, &if_a, &format!("{IP_A}/24")).unwrap();
    lab.addr(&ns_b, &if_b, &format!("{IP_B}/24")).unwrap();
    Topo {
        relay,
        lab,
        ns_a,
        ns_b,
    }
}

fn flow(id: &str, src: &str, dst: &str, qps: (u32, u32), bytes: u64, rate: f64) -> Flow {
    Flow {
        id: id.into(),
        kind: Kind::Collective,
        src: src.into(),
        dst: dst.into(),
        src_qp: qps.0,
        dest_qp: qps.1,
        udp_src_port: rocegen::gen::udp_port_for(qps.1),
        bytes,
        line_rate_pps: rate,
        dscp: 24,
        start_offset_ns: 0,
        stop_offset_ns: None,
        after: vec![],
    }
}

fn write_spec(dir: &Path, flows: Vec<Flow>) -> PathBuf {
    let spec = Spec {
        start_unix_ns: rocegen::sys::unix_now_ns() + 800_000_000,
        payload_bytes: 1024,
        dcqcn: DcqcnParams::default(),
        hosts: BTreeMap::from([("h1".into(), IP_A.into()), ("h2".into(), IP_B.into())]),
        flows,
    };
    spec.validate().unwrap();
    let p = dir.join("spec.json");
    std::fs::write(&p, serde_json::to_string_pretty(&spec).unwrap()).unwrap();
    p
}

fn spawn(
    t: &Topo,
    ns: &str,
    spec: &Path,
    host: &str,
    out: &Path,
    extra: &[&str],
) -> std::process::Child {
    let mut c: Command = t.lab.command(ns, BIN);
    c.args(["run", "--spec"])
        .arg(spec)
        .args(["--host", host, "--out"])
        .arg(out)
        .args(["--linger-ms", "300"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

fn run_both(t: &Topo, spec: &Path, out: &Path) -> (Output, Output) {
    run_both_with(t, spec, out, &["--timeout-s", "40"])
}

fn run_both_with(t: &Topo, spec: &Path, out: &Path, extra: &[&str]) -> (Output, Output) {
    let a = spawn(t, &t.ns_a, spec, "h1", out, extra);
    let b = spawn(t, &t.ns_b, spec, "h2", out, extra);
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for (h, o) in [("h1", &a), ("h2", &b)] {
        eprintln!("--- {h} stderr:\n{}", String::from_utf8_lossy(&o.stderr));
    }
    (a, b)
}

type Row = HashMap<String, String>;

fn csv(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            head.iter()
                .zip(l.split(','))
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn row<'a>(rows: &'a [Row], flow: &str, role: &str) -> &'a Row {
    rows.iter()
        .find(|r| r["flow"] == flow && r["role"] == role)
        .unwrap_or_else(|| panic!("no {role} row for {flow}"))
}

fn num(r: &Row, k: &str) -> f64 {
    r[k].parse().unwrap_or_else(|_| panic!("{k}={:?}", r[k]))
}

#[test]
fn two_hosts_exchange_with_dependency() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let t = topo("x", None);
    let dir = tempfile::tempdir().unwrap();
    let fwd = flow("fwd", "h1", "h2", (0x1001, 0x100), 300 * 1024, 500.0);
    let back = flow("back", "h2", "h1", (0x2001, 0x200), 100 * 1024 + 7, 500.0);
    // Second message on h2's connection: waits for fwd to arrive at h2.
    let mut reply = flow("reply", "h2", "h1", (0x2001, 0x200), 20 * 1024, 500.0);
    reply.after = vec!["fwd".into()];
    let spec = write_spec(dir.path(), vec![fwd, back, reply]);
    let (a, b) = run_both(&t, &spec, dir.path());
    assert!(a.status.success() && b.status.success());
    let h1 = csv(&dir.path().join("flows-h1.csv"));
    let h2 = csv(&dir.path().join("flows-h2.csv"));
    assert_eq!(h1.len(), 3);
    let s = row(&h1, "fwd", "send");
    let r = row(&h2, "fwd", "recv");
    for x in [s, r] {
        assert_eq!(x["complete"], "true");
        assert_eq!(num(x, "bytes"), 300.0 * 1024.0);
        assert_eq!(num(x, "packets"), 300.0);
        assert_eq!(num(x, "retransmits"), 0.0);
        assert_eq!(
            (x["src_qp"].as_str(), x["dest_qp"].as_str()),
            ("4097", "256")
        );
    }
    assert_eq!(num(row(&h2, "back", "send"), "packets"), 101.0);
    assert_eq!(num(row(&h1, "back", "recv"), "packets"), 101.0);
    // Paced at 500 pps: 299 gaps of 2 ms, plus an RTT and the ACK.
    let fct = num(s, "fct_ns") / 1e9;
    assert!((0.59..0.75).contains(&fct), "fwd FCT {fct}s");
    // The dependent message starts only after fwd was fully received.
    let reply_ready = num(row(&h2, "reply", "send"), "ready_ns");
    assert!(
        reply_ready >= num(r, "end_ns"),
        "reply released before fwd arrived"
    );
    assert_eq!(row(&h1, "reply", "recv")["complete"], "true");
    let rate = std::fs::read_to_string(dir.path().join("rate-h1.csv")).unwrap();
    assert!(rate.starts_with("time_ns,flow,rate_pps,alpha"));
    assert!(rate.lines().count() > 50, "samples every 5 ms over 0.6 s");
}

#[test]
fn ce_marks_cut_the_rate_and_flow_completes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let imp = Impair {
        rate_pps: 250.0,
        queue_pkts: 400,
        ce_threshold_pkts: 5,
        ..Impair::default()
    };
    let t = topo("c", Some(imp));
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow("big", "h1", "h2", (0x1001, 0x100), 500 * 1024, 600.0)],
    );
    let (a, b) = run_both(&t, &spec, dir.path());
    assert!(a.status.success() && b.status.success());
    let st = &t.relay.as_ref().unwrap().stats;
    let marked = st.ce_marked.load(std::sync::atomic::Ordering::Relaxed);
    assert!(marked > 0, "relay marked nothing");
    let s = &csv(&dir.path().join("flows-h1.csv"))[0];
    let r = &csv(&dir.path().join("flows-h2.csv"))[0];
    assert_eq!(s["complete"], "true");
    assert_eq!(r["complete"], "true");
    assert!(num(r, "ce_marked") > 0.0);
    assert!(num(r, "cnps") > 0.0, "receiver sent no CNP");
    assert!(num(s, "cnps") > 0.0, "sender got no CNP");
    let min_rate = num(s, "min_rate_pps");
    assert!(
        min_rate < 600.0 * 0.6,
        "min rate {min_rate} barely below line rate"
    );
    // CNPs are rate-limited per flow: at most one per 5 ms.
    let fct = num(r, "fct_ns");
    assert!(num(r, "cnps") <= fct / 5e6 + 1.0);
    let rates = csv(&dir.path().join("rate-h1.csv"));
    assert!(rates.iter().any(|x| num(x, "rate_pps") < 300.0));
    assert!(rates.iter().any(|x| num(x, "alpha") < 1.0));
    eprintln!("relay marked {marked}; sender min rate {min_rate} pps; fct {fct} ns");
}

#[test]
fn loss_recovered_by_go_back_n() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let imp = Impair {
        loss: 0.02,
        seed: 42,
        ..Impair::default()
    };
    let t = topo("l", Some(imp));
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow(
            "lossy",
            "h1",
            "h2",
            (0x1001, 0x100),
            400 * 1024,
            800.0,
        )],
    );
    let (a, b) = run_both(&t, &spec, dir.path());
    assert!(a.status.success() && b.status.success());
    let lost = t
        .relay
        .as_ref()
        .unwrap()
        .stats
        .lost
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(lost > 0);
    let s = &csv(&dir.path().join("flows-h1.csv"))[0];
    let r = &csv(&dir.path().join("flows-h2.csv"))[0];
    assert_eq!(s["complete"], "true");
    assert_eq!(r["complete"], "true");
    assert!(num(s, "retransmits") > 0.0);
    assert!(num(s, "packets") > 400.0);
    assert!(
        num(r, "retransmits") > 0.0,
        "receiver saw no out-of-order/duplicates"
    );
}

/// A lost last packet is no gap the receiver can NAK: without a probe the
/// sender waits its RTO. The relay drops exactly the last of 50 packets;
/// with a 1 s RTO the tail-loss probe (20 ms) recovers it, and the flow
/// ends long before the RTO would have fired. With the probe off the same
/// loss costs the RTO.
#[test]
fn lost_tail_recovered_by_probe_before_rto() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let fct_ms = |tlp: &str, case: &str| {
        let imp = Impair {
            drop_udp: vec![50],
            ..Impair::default()
        };
        let t = topo(case, Some(imp));
        let dir = tempfile::tempdir().unwrap();
        let spec = write_spec(
            dir.path(),
            vec![flow("tail", "h1", "h2", (0x1001, 0x100), 50 * 1024, 2000.0)],
        );
        let extra = ["--timeout-s", "20", "--rto-ms", "1000", "--tlp-ms", tlp];
        let (a, b) = run_both_with(&t, &spec, dir.path(), &extra);
        assert!(a.status.success() && b.status.success());
        let s = &csv(&dir.path().join("flows-h1.csv"))[0];
        assert_eq!(s["complete"], "true");
        assert_eq!(
            num(s, "retransmits"),
            1.0,
            "only the lost tail is sent again"
        );
        let stderr = String::from_utf8_lossy(&a.stderr).to_string();
        (num(s, "fct_ns") / 1e6, stderr)
    };
    let (with_probe, err) = fct_ms("20", "p");
    assert!(err.contains("1 tail probes, 0 timeouts"), "{err}");
    let (without, err) = fct_ms("0", "n");
    assert!(err.contains("0 tail probes, 1 timeouts"), "{err}");
    eprintln!("lost tail: FCT {with_probe:.0} ms with the probe, {without:.0} ms without");
    assert!(with_probe < 300.0, "{with_probe} ms");
    assert!(without > 1000.0, "{without} ms");
}

/// A sender waiting for sparse ACKs (the lab's background: every 16th
/// packet, at most 100 ms late) sleeps until its next packet is due: the
/// tail-loss probe's timer, not armed while the sender still has packets
/// to send, must not wake it (it spun from the probe time to each ACK,
/// about a core's quarter per sender in the lab).
#[test]
fn a_sender_waiting_for_acks_sleeps() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let t = topo("s", None);
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow("slow", "h1", "h2", (0x1001, 0x100), 300 * 1024, 150.0)],
    );
    let extra = [
        "--timeout-s",
        "20",
        "--tlp-ms",
        "20",
        "--ack-every",
        "16",
        "--ack-delay-ms",
        "100",
    ];
    let (a, b) = run_both_with(&t, &spec, dir.path(), &extra);
    assert!(a.status.success() && b.status.success());
    let err = String::from_utf8_lossy(&a.stderr).to_string();
    // "... cpu 12.3 ms (0.6% of a core)"
    let share: f64 = err
        .rsplit_once("ms (")
        .and_then(|(_, rest)| rest.split('%').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no cpu share in {err}"));
    eprintln!("a 150 pps sender with sparse ACKs: {share}% of a core");
    assert!(share < 10.0, "{share}% of a core: {err}");
}

/// A packet whose payload changed in flight (IP and UDP checksums still
/// valid: only the ICRC covers it) is dropped by the receiver as a NIC
/// drops it, counted, and recovered like a loss: the receiver NAKs the gap
/// and the sender resends. The data that arrives is what was sent.
#[test]
fn corrupted_packet_fails_the_icrc_and_is_resent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let imp = Impair {
        corrupt_udp: vec![10],
        ..Impair::default()
    };
    let t = topo("c", Some(imp));
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow("bent", "h1", "h2", (0x1001, 0x100), 50 * 1024, 2000.0)],
    );
    let (a, b) = run_both(&t, &spec, dir.path());
    assert!(a.status.success() && b.status.success());
    let corrupted = t
        .relay
        .as_ref()
        .unwrap()
        .stats
        .corrupted
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(corrupted, 1);
    let receiver = String::from_utf8_lossy(&b.stderr);
    assert!(receiver.contains("malformed 0, bad ICRC 1"), "{receiver}");
    let s = &csv(&dir.path().join("flows-h1.csv"))[0];
    let r = &csv(&dir.path().join("flows-h2.csv"))[0];
    assert_eq!(s["complete"], "true");
    assert_eq!(r["complete"], "true");
    assert!(
        num(s, "retransmits") >= 1.0,
        "the dropped packet was resent"
    );
    let sender = String::from_utf8_lossy(&a.stderr);
    assert!(sender.contains("bad ICRC 0"), "{sender}");
}

#[test]
fn missing_peer_times_out_naming_the_flow() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let t = topo("t", None);
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow("orphan", "h1", "h2", (0x1001, 0x100), 4096, 100.0)],
    );
    let out = spawn(
        &t,
        &t.ns_a,
        &spec,
        "h1",
        dir.path(),
        &["--timeout-s", "1.5"],
    )
    .wait_with_output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("incomplete flows: orphan (send)"), "{err}");
    let s = &csv(&dir.path().join("flows-h1.csv"))[0];
    assert_eq!(s["complete"], "false");
    assert!(num(s, "packets") > 4.0, "go-back-N retried after RTO");
}

/// One flow of 400 packets at 1,000 pps through the relay, which holds
/// every 40th UDP packet back 4 ms (about 4 packets overtake it) and
/// delays the way back by 3 ms (so a NAK takes effect some packets after
/// its gap), run on NICs of kind `nic`. Returns the sender's and
/// receiver's rows, both hosts' summaries and how many packets the relay
/// held back.
fn reordered(nic: &str, case: &str, extra: &[&str]) -> (Row, Row, String, String, u64) {
    let imp = Impair {
        reorder_every_udp: 40,
        reorder_delay: std::time::Duration::from_millis(4),
        reverse_delay: std::time::Duration::from_millis(3),
        ..Impair::default()
    };
    let t = topo(case, Some(imp));
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow("ro", "h1", "h2", (0x1001, 0x100), 400 * 1024, 1000.0)],
    );
    let mut args = vec!["--timeout-s", "30", "--nic", nic];
    args.extend_from_slice(extra);
    let (a, b) = run_both_with(&t, &spec, dir.path(), &args);
    assert!(a.status.success() && b.status.success());
    let delayed = t
        .relay
        .as_ref()
        .unwrap()
        .stats
        .delayed
        .load(std::sync::atomic::Ordering::Relaxed);
    let s = row(&csv(&dir.path().join("flows-h1.csv")), "ro", "send").clone();
    let r = row(&csv(&dir.path().join("flows-h2.csv")), "ro", "recv").clone();
    let text = |o: &Output| String::from_utf8_lossy(&o.stderr).to_string();
    (s, r, text(&a), text(&b), delayed)
}

/// Every byte placed exactly once, and the sender's bytes on the wire are
/// the message plus what it resent.
fn check_goodput(s: &Row, r: &Row) {
    for x in [s, r] {
        assert_eq!(x["complete"], "true");
    }
    let bytes = num(s, "bytes");
    assert_eq!(num(r, "placed_bytes"), bytes, "placed exactly once");
    assert_eq!(num(s, "wire_bytes"), bytes + num(s, "resent_bytes"));
    assert!(num(r, "wire_bytes") <= num(s, "wire_bytes"));
    assert!(num(r, "wire_bytes") >= bytes);
    assert_eq!(num(s, "packets"), 400.0 + num(s, "retransmits"));
}

/// A go-back-N receiver drops what follows a PSN gap and NAKs the gap once
/// (the expected PSN); the sender goes back to it and resends from there.
#[test]
fn reordering_costs_a_go_back_n_nic_naks_and_rewinds() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let (s, r, sender, receiver, delayed) = reordered("gbn", "g", &[]);
    assert!(delayed >= 10, "relay held back {delayed}");
    check_goodput(&s, &r);
    assert_eq!(s["nic"], "gbn");
    let naks = num(&r, "naks");
    assert!(naks > 0.0, "{receiver}");
    // Once per gap: more packets dropped out of order than NAKs sent (the
    // NAK takes a round trip to act). A held-back packet opens a gap, and
    // when it arrives late a second one: what followed it was dropped.
    assert!(num(&r, "out_of_order") > naks, "{receiver}");
    assert!(naks <= 2.0 * delayed as f64, "{receiver}");
    assert!(num(&s, "naks") > 0.0 && num(&s, "naks") <= naks, "{sender}");
    assert!(num(&s, "rewinds") > 0.0, "{sender}");
    assert!(
        sender.contains(" 0 timeouts)"),
        "rewinds came from NAKs: {sender}"
    );
    assert!(num(&s, "resent_bytes") > 0.0, "{sender}");
    assert!(sender.contains("(nic gbn)"), "{sender}");
    eprintln!(
        "go-back-N under reordering: {delayed} held back, {naks} NAKs, {} rewinds, {} B resent",
        s["rewinds"], s["resent_bytes"]
    );
}

/// An out-of-order receiver places the overtaken packets by PSN and
/// acknowledges selectively: the same reordering costs no NAK, no rewind,
/// no duplicate placement, and fewer resent bytes than go-back-N.
#[test]
fn an_out_of_order_nic_places_reordered_packets_without_rewinds() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let (s, r, sender, receiver, delayed) = reordered("ooo", "o", &[]);
    assert!(delayed >= 10, "relay held back {delayed}");
    check_goodput(&s, &r);
    assert_eq!((s["nic"].as_str(), r["nic"].as_str()), ("ooo", "ooo"));
    assert!(
        num(&r, "out_of_order") > 0.0,
        "reordered packets placed: {receiver}"
    );
    for (x, what) in [(&s, "naks"), (&s, "rewinds"), (&r, "naks")] {
        assert_eq!(num(x, what), 0.0, "{what}: {sender}\n{receiver}");
    }
    assert!(receiver.contains("with SACK"), "{receiver}");
    assert!(
        !receiver.contains("(0 with SACK)"),
        "a gap was reported: {receiver}"
    );
    let (gs, _, _, _, _) = reordered("gbn", "q", &[]);
    let (ooo, gbn) = (num(&s, "resent_bytes"), num(&gs, "resent_bytes"));
    eprintln!("resent under the same reordering: out-of-order NIC {ooo} B, go-back-N {gbn} B");
    assert!(ooo < gbn, "ooo resent {ooo} B, gbn {gbn} B");
}

/// `--cnp-on-ooo`: a go-back-N receiver also sends a CNP with the NAK of a
/// gap (no CE marks here, so every CNP is one of those), and the sender's
/// DCQCN reacts to it.
#[test]
fn a_go_back_n_nic_can_send_cnps_on_out_of_order_packets() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let (s, r, _, receiver, _) = reordered("gbn", "k", &["--cnp-on-ooo"]);
    check_goodput(&s, &r);
    assert_eq!(num(&r, "ce_marked"), 0.0);
    let cnps = num(&r, "cnps");
    assert!(cnps > 0.0 && cnps <= num(&r, "naks"), "{receiver}");
    assert!(
        receiver.contains(&format!("({cnps} on out-of-order)")),
        "{receiver}"
    );
    assert!(num(&s, "cnps") > 0.0 && num(&s, "min_rate_pps") < 1000.0);
}

/// Hosts that disagree on the NIC kind: the sender learns it from the
/// first reply of the other kind and stops with an error naming the flag.
#[test]
fn hosts_of_different_nic_kinds_are_an_error() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let imp = Impair {
        reorder_every_udp: 20,
        reorder_delay: std::time::Duration::from_millis(4),
        ..Impair::default()
    };
    let t = topo("m", Some(imp));
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow("mix", "h1", "h2", (0x1001, 0x100), 100 * 1024, 1000.0)],
    );
    let a = spawn(
        &t,
        &t.ns_a,
        &spec,
        "h1",
        dir.path(),
        &["--nic", "ooo", "--timeout-s", "5"],
    );
    let b = spawn(
        &t,
        &t.ns_b,
        &spec,
        "h2",
        dir.path(),
        &["--nic", "gbn", "--timeout-s", "3"],
    );
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let err = String::from_utf8_lossy(&a.stderr);
    assert_eq!(a.status.code(), Some(1), "{err}");
    assert!(
        err.contains("h1 runs --nic ooo but 10.200.0.2 answered with a NAK"),
        "{err}"
    );
    assert!(
        err.contains("every host of a run needs the same --nic"),
        "{err}"
    );
    assert_eq!(b.status.code(), Some(2), "the receiver waits in vain");
}

/// At an out-of-order NIC a lost packet is resent alone: the relay drops
/// three of 50 packets, the last among them; the two in the middle are
/// resent once `--ooo-threshold` packets beyond them are acknowledged,
/// the last by the tail-loss probe, all long before the 1 s RTO. Nothing
/// else is resent and nothing is placed twice.
#[test]
fn an_out_of_order_nic_resends_only_the_lost_packets() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if skip() {
        return;
    }
    let imp = Impair {
        drop_udp: vec![10, 30, 50],
        ..Impair::default()
    };
    let t = topo("z", Some(imp));
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(
        dir.path(),
        vec![flow(
            "holes",
            "h1",
            "h2",
            (0x1001, 0x100),
            50 * 1024,
            2000.0,
        )],
    );
    let extra = ["--timeout-s", "20", "--rto-ms", "1000", "--nic", "ooo"];
    let (a, b) = run_both_with(&t, &spec, dir.path(), &extra);
    assert!(a.status.success() && b.status.success());
    let s = row(&csv(&dir.path().join("flows-h1.csv")), "holes", "send").clone();
    let r = row(&csv(&dir.path().join("flows-h2.csv")), "holes", "recv").clone();
    let sender = String::from_utf8_lossy(&a.stderr);
    assert_eq!(num(&s, "retransmits"), 3.0, "{sender}");
    assert_eq!(num(&s, "resent_bytes"), 3.0 * 1024.0);
    assert_eq!(num(&s, "rewinds"), 0.0);
    assert!(sender.contains("1 tail probes, 0 timeouts"), "{sender}");
    assert_eq!(num(&r, "placed_bytes"), 50.0 * 1024.0);
    assert_eq!(num(&r, "duplicates"), 0.0);
    assert_eq!(
        num(&r, "packets"),
        50.0,
        "47 first sends and 3 resends arrived"
    );
    let fct_ms = num(&s, "fct_ns") / 1e6;
    assert!(fct_ms < 300.0, "{fct_ms} ms");
}
