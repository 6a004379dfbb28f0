//! Pacing and FCT figures over a direct veth pair (as root):
//! `cargo run --release -p rocegen --example bench`
//!
//! 1. Sweep the total send rate of one host (8 flows) and report achieved
//!    rate and sender CPU.
//! 2. FCT of a single flow vs bytes/rate.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use rocegen::dcqcn::DcqcnParams;
use rocegen::netns::Lab;
use rocegen::spec::{Flow, Kind, Spec};

/// The rocegen binary next to target/<profile>/examples/, or $ROCEGEN_BIN.
fn bin() -> String {
    std::env::var("ROCEGEN_BIN").unwrap_or_else(|_| {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(Path::parent).unwrap();
        dir.join("rocegen").to_string_lossy().into_owned()
    })
}

fn spec(dir: &Path, flows: usize, rate_each: f64, pkts_each: u64) -> std::path::PathBuf {
    let flows = (0..flows)
        .map(|i| {
            let dq = 0x100 + i as u32;
            Flow {
                id: format!("f{i}"),
                kind: Kind::Collective,
                src: "h1".into(),
                dst: "h2".into(),
                src_qp: 0x1000 + i as u32,
                dest_qp: dq,
                udp_src_port: rocegen::gen::udp_port_for(dq),
                bytes: pkts_each * 1024,
                line_rate_pps: rate_each,
                dscp: 24,
                start_offset_ns: 0,
                stop_offset_ns: None,
                after: vec![],
            }
        })
        .collect();
    let s = Spec {
        start_unix_ns: rocegen::sys::unix_now_ns() + 700_000_000,
        payload_bytes: 1024,
        dcqcn: DcqcnParams::default(),
        hosts: BTreeMap::from([
            ("h1".into(), "10.201.0.1".into()),
            ("h2".into(), "10.201.0.2".into()),
        ]),
        flows,
    };
    let p = dir.join("spec.json");
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();
    p
}

/// Runs both hosts; returns (sender summary line, flows-h1.csv rows).
fn run(lab: &Lab, dir: &Path, spec: &Path) -> (String, Vec<Vec<String>>) {
    let go = |ns: &str, host: &str| {
        lab.command(ns, &bin())
            .args(["run", "--quiet", "--linger-ms", "200", "--spec"])
            .arg(spec)
            .args(["--host", host, "--out"])
            .arg(dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = go("rgb-a", "h1");
    let b = go("rgb-b", "h2");
    let a = a.wait_with_output().unwrap();
    b.wait_with_output().unwrap();
    let line = String::from_utf8_lossy(&a.stderr)
        .lines()
        .find(|l| l.contains("complete"))
        .unwrap_or("?")
        .to_string();
    let text = std::fs::read_to_string(dir.join("flows-h1.csv")).unwrap();
    let rows = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (line, rows)
}

fn cpu_pct(line: &str) -> f64 {
    line.rsplit('(')
        .next()
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    if !rocegen::netns::available() {
        println!("SKIPPED: needs root and iproute2");
        return;
    }
    let mut lab = Lab::new();
    lab.add_ns("rgb-a").unwrap();
    lab.add_ns("rgb-b").unwrap();
    lab.veth("rgb-a", "rgba0", "rgb-b", "rgbb0").unwrap();
    lab.addr("rgb-a", "rgba0", "10.201.0.1/24").unwrap();
    lab.addr("rgb-b", "rgbb0", "10.201.0.2/24").unwrap();

    println!("target_pps,achieved_pps,ratio,sender_cpu_pct_of_core");
    for total in [1000.0, 2500.0, 5000.0, 10000.0, 20000.0] {
        let dir = tempfile::tempdir().unwrap();
        let pkts = (total * 3.0 / 8.0) as u64; // ~3 s
        let p = spec(dir.path(), 8, total / 8.0, pkts);
        let (line, rows) = run(&lab, dir.path(), &p);
        // columns: ... start_ns=9, end_ns=10, packets=12
        let start = rows
            .iter()
            .map(|r| r[9].parse::<u64>().unwrap())
            .min()
            .unwrap();
        let end = rows
            .iter()
            .map(|r| r[10].parse::<u64>().unwrap())
            .max()
            .unwrap();
        let sent: u64 = rows.iter().map(|r| r[12].parse::<u64>().unwrap()).sum();
        let achieved = sent as f64 / ((end - start) as f64 / 1e9);
        println!(
            "{total},{achieved:.0},{:.3},{:.1}",
            achieved / total,
            cpu_pct(&line)
        );
    }

    println!("\nbytes,rate_pps,ideal_s,fct_s,fct_over_ideal");
    for (pkts, rate) in [(200u64, 400.0), (1000, 400.0), (2000, 2000.0)] {
        let dir = tempfile::tempdir().unwrap();
        let p = spec(dir.path(), 1, rate, pkts);
        let (_, rows) = run(&lab, dir.path(), &p);
        let fct = rows[0][11].parse::<f64>().unwrap() / 1e9;
        let ideal = pkts as f64 / rate;
        println!(
            "{},{rate},{ideal:.3},{fct:.4},{:.4}",
            pkts * 1024,
            fct / ideal
        );
    }
}
