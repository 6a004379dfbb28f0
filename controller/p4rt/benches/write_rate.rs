//! Write-rate benchmark against real BMv2 (`cargo bench -p p4rt --bench write_rate`).
//!
//! Installs 10,000 exact-match entries into `p4rt_features`' `exact_table`
//! with this client at batch sizes 1, 100 and 1,000, and in the same run with
//! p4runtime-shell (one update per request) and finsy (batched, asyncio);
//! measures the latency of one 64-entry batch (p50/p99) and the switch's
//! ceiling (one 10,000-update request built in advance). Timings include
//! building the entries from P4Info names, as a caller would.
//!
//! Env: FORESIGHT_BENCH_ENTRIES (default 10000), FORESIGHT_BENCH_WRITES
//! (the batch sizes and requests in flight), FORESIGHT_PYTHON (.venv) and
//! FORESIGHT_FINSY_PYTHON (.venv-finsy) for the peers (FORESIGHT_BENCH_PEERS=0
//! leaves them out).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use p4::set_forwarding_pipeline_config_request::Action as PipelineAction;
use p4rt::proto::p4::v1 as p4;
use p4rt::{entity, P4Info, Switch, SwitchOptions, TableEntryBuilder};
use prost::Message;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One exact-match entry built from P4Info names, as a caller would.
fn entry(info: &P4Info, key: u64) -> p4::Entity {
    TableEntryBuilder::new(info, "exact_table")
        .unwrap()
        .exact("dst_addr", key)
        .unwrap()
        .action("set_port", &[("port", 1u32.into())])
        .unwrap()
        .build()
        .unwrap()
        .into()
}

fn entries(info: &P4Info, keys: std::ops::Range<u64>) -> Vec<p4::Entity> {
    keys.map(|key| entry(info, key)).collect()
}

async fn connect(addr: &str, election_id: u128) -> Switch {
    let options = SwitchOptions::new(addr, 0).election_id(election_id);
    let switch = Switch::connect_with_retry(options, Duration::from_secs(10))
        .await
        .unwrap();
    switch.wait_primary(Duration::from_secs(5)).await.unwrap();
    switch
}

/// Delete everything in exact_table; returns how many entries there were.
async fn clear(switch: &Switch, info: &P4Info) -> usize {
    let all = switch
        .read(vec![entity::all_table_entries(info, "exact_table").unwrap()])
        .await
        .unwrap();
    let n = all.len();
    switch
        .apply(p4::update::Type::Delete, all, 1000)
        .await
        .unwrap();
    n
}

struct Row {
    client: String,
    batch: String,
    in_flight: usize,
    entries: usize,
    seconds: f64,
    /// The same shape with every update built in advance, entries/s.
    shape_ceiling: Option<f64>,
}

impl Row {
    fn rate(&self) -> f64 {
        self.entries as f64 / self.seconds
    }
}

fn run_peer(python: &Path, script: &str, args: &[String]) -> Option<(usize, f64)> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("benches/peers")
        .join(script);
    if std::env::var("FORESIGHT_BENCH_PEERS").as_deref() == Ok("0") {
        return None;
    }
    if !python.exists() {
        eprintln!(
            "skipping {}: {} not found (run ci/setup.sh)",
            script.display(),
            python.display()
        );
        return None;
    }
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .expect("run python peer");
    if !out.status.success() {
        eprintln!(
            "{} failed:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let value: serde_json::Value = serde_json::from_str(line.lines().last()?).ok()?;
    Some((
        value["entries"].as_u64()? as usize,
        value["seconds"].as_f64()?,
    ))
}

/// (batch, requests in flight) of each run: FORESIGHT_BENCH_WRITES as
/// `BATCHxIN_FLIGHT,...`, default 1x1,100x1,1000x1,1x16,1x64,100x4,1000x2,1000x4.
fn write_configs() -> Vec<(usize, usize)> {
    let text = std::env::var("FORESIGHT_BENCH_WRITES")
        .unwrap_or_else(|_| "1x1,100x1,1000x1,1x16,1x64,100x4,1000x2,1000x4".into());
    text.split(',')
        .map(|c| {
            c.split_once('x')
                .and_then(|(b, f)| Some((b.trim().parse().ok()?, f.trim().parse().ok()?)))
                .unwrap_or_else(|| panic!("FORESIGHT_BENCH_WRITES: {c:?} is not BATCHxIN_FLIGHT"))
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let tools = match bmv2::Toolchain::find() {
        Ok(t) => t,
        Err(e) => {
            println!("SKIPPED write_rate benchmark: {e}");
            return;
        }
    };
    let count: usize = std::env::var("FORESIGHT_BENCH_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let build = repo().join("p4src/build");
    let p4info_path = build.join("p4rt_features.p4info.binpb");
    let info = P4Info::load(&p4info_path).unwrap();
    let json = std::fs::read(build.join("p4rt_features.json")).unwrap();
    let bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let addr = bmv2[0].grpc_addr();
    println!(
        "BMv2 {} (pid {}), {count} exact-match entries per run",
        addr,
        bmv2[0].pid()
    );

    let switch = connect(&addr, 1).await;
    switch
        .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();
    let mut rows = Vec::new();

    // In order (one request at a time), then with requests in flight. The
    // entries are built from P4Info names as each batch is sent. Each shape
    // is measured again with every update built in advance: what the switch
    // takes at that shape when the client does the least (its ceiling there).
    for (batch, in_flight) in write_configs() {
        let run = |prebuilt: bool| {
            let (switch, info) = (&switch, &info);
            async move {
                clear(switch, info).await;
                let ready: Vec<p4::Update> = if prebuilt {
                    entries(info, 1..count as u64 + 1)
                        .into_iter()
                        .map(|e| p4rt::switch::update(p4::update::Type::Insert, e))
                        .collect()
                } else {
                    Vec::new()
                };
                let start = Instant::now();
                let result = if prebuilt {
                    switch.write_streamed(ready, batch, in_flight).await
                } else {
                    let built = (1..count as u64 + 1).map(|key| {
                        p4rt::switch::update(p4::update::Type::Insert, entry(info, key))
                    });
                    switch.write_streamed(built, batch, in_flight).await
                };
                result.unwrap();
                let seconds = start.elapsed().as_secs_f64();
                let installed = clear(switch, info).await;
                assert_eq!(
                    installed, count,
                    "batch {batch}, {in_flight} in flight: the switch holds {installed} entries"
                );
                seconds
            }
        };
        let seconds = run(false).await;
        let prebuilt_seconds = run(true).await;
        rows.push(Row {
            client: "foresight p4rt".into(),
            batch: batch.to_string(),
            in_flight,
            entries: count,
            seconds,
            shape_ceiling: Some(count as f64 / prebuilt_seconds),
        });
        eprintln!(
            "  p4rt batch {batch}, {in_flight} in flight: {:.0} entries/s (prebuilt {:.0})",
            rows.last().unwrap().rate(),
            count as f64 / prebuilt_seconds
        );
    }

    // Ceiling: one request with every update, built and encoded beforehand;
    // what remains is the transfer and BMv2's own work.
    clear(&switch, &info).await;
    let updates: Vec<p4::Update> = entries(&info, 1..count as u64 + 1)
        .into_iter()
        .map(|e| p4rt::switch::update(p4::update::Type::Insert, e))
        .collect();
    let encode_start = Instant::now();
    let encoded_len = p4::WriteRequest {
        updates: updates.clone(),
        ..Default::default()
    }
    .encode_to_vec()
    .len();
    let encode = encode_start.elapsed();
    let start = Instant::now();
    switch.write(updates).await.unwrap();
    let ceiling_seconds = start.elapsed().as_secs_f64();
    assert_eq!(
        clear(&switch, &info).await,
        count,
        "ceiling run installed everything"
    );
    let ceiling = Row {
        client: "BMv2 ceiling (1 prebuilt request)".into(),
        batch: count.to_string(),
        in_flight: 1,
        entries: count,
        seconds: ceiling_seconds,
        shape_ceiling: None,
    };

    // Latency of one 64-entry batch.
    clear(&switch, &info).await;
    let mut latencies = Vec::new();
    for round in 0..200u64 {
        let batch = entries(&info, 1_000_000 + round * 64..1_000_000 + (round + 1) * 64);
        let start = Instant::now();
        switch
            .apply(p4::update::Type::Insert, batch, 64)
            .await
            .unwrap();
        latencies.push(start.elapsed());
    }
    latencies.sort();
    let build_start = Instant::now();
    let _ = entries(&info, 1..count as u64 + 1);
    let build_time = build_start.elapsed();
    clear(&switch, &info).await;
    switch.shutdown().await;

    // Peers, one at a time, each as the primary client.
    let shell_python = std::env::var("FORESIGHT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join(".venv/bin/python"));
    let finsy_python = std::env::var("FORESIGHT_FINSY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join(".venv-finsy/bin/python"));
    let count_arg = count.to_string();
    if let Some((n, s)) = run_peer(
        &shell_python,
        "shell_write.py",
        &[
            "--addr".into(),
            addr.clone(),
            "--count".into(),
            count_arg.clone(),
        ],
    ) {
        rows.push(Row {
            client: "p4runtime-shell".into(),
            batch: "1".into(),
            in_flight: 1,
            entries: n,
            seconds: s,
            shape_ceiling: None,
        });
    }
    let check = connect(&addr, 2).await;
    let shell_written = clear(&check, &info).await;
    check.shutdown().await;
    for batch in ["100", "1000"] {
        let args = [
            "--addr".into(),
            addr.clone(),
            "--p4info".into(),
            build
                .join("p4rt_features.p4info.txtpb")
                .display()
                .to_string(), // finsy reads text P4Info
            "--count".into(),
            count_arg.clone(),
            "--batch".into(),
            batch.into(),
        ];
        let Some((n, s)) = run_peer(&finsy_python, "finsy_write.py", &args) else {
            continue;
        };
        rows.push(Row {
            client: "finsy (asyncio)".into(),
            batch: batch.into(),
            in_flight: 1,
            entries: n,
            seconds: s,
            shape_ceiling: None,
        });
        let check = connect(&addr, 100).await;
        let written = clear(&check, &info).await;
        check.shutdown().await;
        assert_eq!(written, count, "finsy wrote {written} entries");
    }
    if rows.iter().any(|r| r.client == "p4runtime-shell") {
        assert_eq!(
            shell_written, count,
            "p4runtime-shell wrote {shell_written} entries"
        );
    }

    let shell = rows
        .iter()
        .find(|r| r.client == "p4runtime-shell")
        .map(Row::rate);
    let finsy = rows
        .iter()
        .filter(|r| r.client.starts_with("finsy"))
        .map(Row::rate)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    println!();
    println!(
        "| client | batch | in flight | entries/s | same shape prebuilt | of that | vs 1-request ceiling | vs p4runtime-shell | vs finsy (best) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in rows.iter().chain(std::iter::once(&ceiling)) {
        let ratio =
            |base: Option<f64>| base.map_or("n/a".into(), |b| format!("{:.2}x", row.rate() / b));
        println!(
            "| {} | {} | {} | {:.0} | {} | {} | {:.2}x | {} | {} |",
            row.client,
            row.batch,
            row.in_flight,
            row.rate(),
            row.shape_ceiling.map_or("".into(), |c| format!("{c:.0}")),
            row.shape_ceiling
                .map_or("".into(), |c| format!("{:.2}", row.rate() / c)),
            row.rate() / ceiling.rate(),
            ratio(shell),
            ratio(finsy),
        );
    }
    println!();
    println!(
        "64-entry batch latency over 200 batches: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "client-side cost for {count} entries: building from names {:.1} ms, protobuf encoding {:.1} ms ({} bytes); the rest of each run is gRPC transfer and BMv2's PI/bmv2 insert path",
        build_time.as_secs_f64() * 1e3,
        encode.as_secs_f64() * 1e3,
        encoded_len
    );
}
