//! Controller figures on BMv2 (the lab's small leaf-spine, 4 switches):
//!
//! 1. **Control loop**: from an NDSP `SubmitCollective` received to all of
//!    its entries acknowledged by every BMv2 switch, for a 16-rank ring
//!    all-reduce (2 servers x 8 GPUs, 8 channels: 16 flows -> 16 SR push +
//!    16 INT watch entries on the two leaves and the lowered DCQCN
//!    thresholds of every port on the paths), due at once. Measured by the
//!    controller (receipt to last acknowledgement, returned in the
//!    `foresight-install-us` metadata) and by the client (the whole RPC).
//!    Each collective is cancelled before the next (removal measured too).
//! 2. **Restart**: N reservations live (500 by default), the controller
//!    killed with SIGKILL and restarted on its state file: time until every
//!    switch is reconciled, and the check that nothing was duplicated or
//!    lost (switch contents identical before and after, zero changes).
//! 3. **Scale**: the control loop of (1) for 16-, 256- and 1,024-rank ring
//!    all-reduces on a generated leaf-spine of 12 BMv2 switches (8 leaves of
//!    16 NICs, 4 spines; 8 GPUs per NIC), hosts taken leaf by leaf in turn
//!    so that every ring crosses the spines; how the time grows with the
//!    entities written. With more leaf counts, the same rings on fabrics of
//!    that many leaves: the controller writes to every switch at once, so
//!    the loop should not grow with the switches a ring is spread over.
//! 4. **Steady steps** (`steady`): the rings of (3) on the same fabric with
//!    `--standing-patterns`: the first step of each ring (planned, its
//!    entries installed for good), then repeated steps of the same shape,
//!    each admitted on the pinned paths and cancelled before the next.
//!    What the switches did is read from them, not from the controller:
//!    their CPU time per step, and everything they hold read back over
//!    P4Runtime before and after the steady steps (identical: nothing was
//!    written, deleted or rewritten).
//!
//! `cargo bench -p foresight --bench control_loop`
//! (env: `FORESIGHT_BENCH_PARTS`, default loop,etcd,restart,scale,steady;
//! `FORESIGHT_BENCH_ITERATIONS`, default 200; `FORESIGHT_BENCH_CHANNELS`,
//! default 8; `FORESIGHT_BENCH_RESERVATIONS`, default 500;
//! `FORESIGHT_BENCH_SCALE_RANKS`, default 16,256,1024 (empty: skip);
//! `FORESIGHT_BENCH_SCALE_LEAVES`, default 8 (each with 4 spines);
//! `FORESIGHT_BENCH_SCALE_ITERATIONS`, default 50; `FORESIGHT_BENCH_CSV`, a
//! file the scale figures are appended to, one row per fabric and ring;
//! `FORESIGHT_BENCH_WATCH=1`: the loop and scale controllers get an INT
//! collector, so every reserved flow gets its INT watch entry too;
//! `FORESIGHT_BENCH_ROUNDS`, a file every round's times are appended to).

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::*;
use ndsp::proto;
use ndsp::Validate;

const MS: u64 = 1_000_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A comma-separated list from the environment, or `default`.
fn env_list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("{name}: {s:?} is not one of a comma-separated list"))
        })
        .collect()
}

/// The controller's arguments for `FORESIGHT_BENCH_WATCH=1`: INT reports
/// to `host`, so reserved flows get their INT watch entries (without a
/// reader the controller leaves them out).
fn watch_args(host: &str) -> Vec<String> {
    match env("FORESIGHT_BENCH_WATCH", 0) {
        0 => Vec::new(),
        _ => vec!["--int-collector".into(), host.into()],
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut v: Vec<f64>) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "  {name:<44} p50 {:>7.3} ms   p99 {:>7.3} ms   max {:>7.3} ms   (n = {})",
        quantile(&v, 0.5),
        quantile(&v, 0.99),
        v.last().copied().unwrap_or(f64::NAN),
        v.len()
    );
}

/// CPU time (user + system) `pid` has used so far, seconds; 0 when it
/// cannot be read.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may hold spaces) end with ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 here.
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11).unwrap_or(0.0) + ticks(12).unwrap_or(0.0)) / hz
}

/// CPU seconds of the controller and of all switches together.
fn cpu_of(controller: &Controller, fabric: &Fabric) -> [f64; 2] {
    [
        cpu_seconds(controller.child.id()),
        fabric.switches.values().map(|s| cpu_seconds(s.pid())).sum(),
    ]
}

/// `path` (named by the environment variable `var`) opened for appending
/// rows, with `header` written first if it is new or empty.
fn csv_for_appending(var: &str, path: &str, header: &str) -> std::fs::File {
    use std::io::Write;
    let fresh = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{var} {path}: {e}"));
    if fresh {
        writeln!(file, "{header}").unwrap();
    }
    file
}

/// The sum of every sample of metric `name` (all its label sets).
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| {
            l.rsplit_once(' ')
                .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        })
        .sum()
}

/// A sample of the controller's metrics text (`NaN` when absent).
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(f64::NAN)
}

/// What repeated submit-then-cancel rounds of one collective shape measured.
#[derive(Default)]
struct Rounds {
    /// NDSP received -> all entries acknowledged (the controller's own clock), ms.
    server: Vec<f64>,
    /// The client's SubmitCollective RPC, ms.
    rpc: Vec<f64>,
    /// The client's Cancel RPC (entries removed), ms.
    removal: Vec<f64>,
    /// Entity changes and flows of the last collective.
    changes: usize,
    flows: usize,
}

/// An NDSP connection to the controller under test.
type NdspClient =
    ndsp::proto::demand_signaling_client::DemandSignalingClient<tonic::transport::Channel>;

impl Rounds {
    /// Submit `ranks`-rank ring all-reduces of `job` and cancel each before
    /// the next; the first `warmup` rounds are not recorded.
    async fn run(
        client: &mut NdspClient,
        job: &str,
        ranks: u32,
        channels: u32,
        rounds: usize,
        warmup: usize,
    ) -> Rounds {
        let mut out = Rounds::default();
        for i in 0..rounds + warmup {
            let id = format!("{job}-{ranks}-{i}");
            let request = ring_allreduce(&id, job, ranks, channels, 0, 10_000 * MS);
            let t0 = Instant::now();
            let response = client.submit_collective(request).await.unwrap();
            let client_ms = t0.elapsed().as_secs_f64() * 1e3;
            let meta = |k: &str| -> f64 {
                let value = response.metadata().get(k).unwrap().to_str().unwrap();
                value.parse().unwrap()
            };
            let (us, changes) = (
                meta("foresight-install-us"),
                meta("foresight-switch-changes"),
            );
            let r = response.into_inner().validate().unwrap();
            assert!(
                r.flows.iter().all(|f| f.accepted_bps > 0),
                "every flow reserved"
            );
            let t1 = Instant::now();
            client
                .cancel(proto::CancelRequest {
                    header: header(),
                    target: Some(proto::cancel_request::Target::CollectiveId(id)),
                })
                .await
                .unwrap();
            if i >= warmup {
                out.server.push(us / 1e3);
                out.rpc.push(client_ms);
                out.removal.push(t1.elapsed().as_secs_f64() * 1e3);
                out.changes = changes as usize;
                out.flows = r.flows.len();
            }
        }
        if let Ok(path) = std::env::var("FORESIGHT_BENCH_ROUNDS") {
            out.append_rounds(&path, job, ranks);
        }
        out
    }

    /// Every round's times in order (`FORESIGHT_BENCH_ROUNDS`), to see
    /// when the slow ones come.
    fn append_rounds(&self, path: &str, job: &str, ranks: u32) {
        use std::io::Write;
        let mut file = csv_for_appending(
            "FORESIGHT_BENCH_ROUNDS",
            path,
            "job,ranks,round,loop_ms,rpc_ms,cancel_ms",
        );
        for (i, ((server, rpc), removal)) in self
            .server
            .iter()
            .zip(&self.rpc)
            .zip(&self.removal)
            .enumerate()
        {
            writeln!(file, "{job},{ranks},{i},{server:.3},{rpc:.3},{removal:.3}").unwrap();
        }
    }

    fn print(self) {
        summary("NDSP received -> all entries acknowledged", self.server);
        summary("client SubmitCollective RPC (incl. gRPC)", self.rpc);
        summary("client Cancel RPC (entries removed)", self.removal);
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would run us too.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let parts: Vec<String> = env_list("FORESIGHT_BENCH_PARTS", "loop,etcd,restart,scale,steady");
    if let Some(unknown) = parts
        .iter()
        .find(|p| !["loop", "etcd", "restart", "scale", "steady"].contains(&p.as_str()))
    {
        panic!("FORESIGHT_BENCH_PARTS: {unknown:?}; want loop, etcd, restart, scale, steady");
    }
    let runs = |part: &str| parts.iter().any(|p| p == part);
    // The small leaf-spine serves the first three figures; the scale
    // figures start fabrics of their own.
    let small = if ["loop", "etcd", "restart"].iter().any(|p| runs(p)) {
        let Some(fabric) = Fabric::start("control-loop bench") else {
            return;
        };
        Some(fabric)
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        if let Some(mut fabric) = small {
            if runs("loop") {
                control_loop(&fabric).await;
            }
            if runs("etcd") {
                control_loop_etcd(&fabric).await;
            }
            if runs("restart") {
                restart(&mut fabric).await;
            }
        }
        for (part, steps) in [("scale", Steps::Each), ("steady", Steps::Pinned)] {
            if runs(part) {
                for leaves in env_list("FORESIGHT_BENCH_SCALE_LEAVES", "8") {
                    scale(leaves, steps).await;
                }
            }
        }
    });
}

/// The generated fabric of the scale figures (`leaves` leaves of 16 NICs,
/// 4 spines), written into `dir`.
fn scale_topology(dir: &std::path::Path, leaves: u32) -> std::path::PathBuf {
    use planner::topology::generate::{leaf_spine, LeafSpine};
    let spec = leaf_spine(&LeafSpine {
        name: "bench-scale".into(),
        leaves,
        spines: 4,
        hosts_per_leaf: 16,
        host_gbps: 100.0,
        uplink_gbps: 400.0,
        gpus_per_host: 8,
        nics_per_server: 1,
    })
    .unwrap();
    let path = dir.join("bench-scale.yaml");
    planner::topology::yaml::save_file(&spec, &path).unwrap();
    path
}

/// How the scale figures' steps are installed: each on its own (the
/// controller's default), or the first one for good and the rest admitted
/// on its paths (`--standing-patterns`).
#[derive(Clone, Copy, PartialEq)]
enum Steps {
    Each,
    Pinned,
}

async fn scale(leaves: u32, steps: Steps) {
    let ranks: Vec<u32> = env_list("FORESIGHT_BENCH_SCALE_RANKS", "16,256,1024");
    if ranks.is_empty() {
        return;
    }
    let iterations = env("FORESIGHT_BENCH_SCALE_ITERATIONS", 50);
    let channels = env("FORESIGHT_BENCH_CHANNELS", 8) as u32;
    let dir = tempfile::tempdir().unwrap();
    let topology = scale_topology(dir.path(), leaves);
    let topo = planner::topology::yaml::load_file(&topology).unwrap();
    let Some(fabric) = Fabric::start_topology("control-loop scale bench", &topology) else {
        return;
    };
    // Leaf by leaf in turn: consecutive NICs of a ring sit on different leaves.
    let leaves = topo.leaves().len();
    let per_leaf = topo.hosts().len() / leaves;
    let hosts: Vec<String> = (0..per_leaf)
        .flat_map(|i| topo.leaves().iter().map(move |&leaf| (leaf, i)))
        .map(|(leaf, i)| {
            topo.hosts()
                .iter()
                .filter(|h| h.leaf == leaf)
                .nth(i)
                .unwrap()
                .ip
                .to_string()
        })
        .collect();
    let (ranks, too_many): (Vec<u32>, Vec<u32>) = ranks
        .into_iter()
        .partition(|&n| n as usize <= 8 * hosts.len());
    if !too_many.is_empty() {
        println!(
            "scale: {leaves} leaves hold {} ranks; not run: {too_many:?}",
            8 * hosts.len()
        );
    }
    let mut args = watch_args(&topo.hosts()[0].name);
    if steps == Steps::Pinned {
        args.push("--standing-patterns".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let controller = fabric.controller_with(50, &args);
    let mut client = controller.client().await;
    let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
    client
        .register_topology(register("scale", &names))
        .await
        .unwrap();
    let what = match steps {
        Steps::Each => "scale",
        Steps::Pinned => "steady steps (--standing-patterns)",
    };
    println!(
        "{what}: ring all-reduce ({channels} channels) on {} BMv2 switches ({} leaves x {per_leaf} NICs, {} spines), {iterations} iterations each",
        fabric.switches.len(),
        leaves,
        fabric.switches.len() - leaves
    );
    let sums = |c: &Controller| {
        let text = c.get_text("/metrics");
        [
            "foresight_planner_seconds_sum",
            "foresight_planner_seconds_count",
            "foresight_switch_write_seconds_sum",
            "foresight_switch_write_seconds_count",
        ]
        .map(|name| metric(&text, name))
    };
    // The first three rounds warm up (connections, caches).
    let warmup = 3;
    let mut reader = fabric.reader().await;
    for &n in &ranks {
        let held = match steps {
            Steps::Each => None,
            Steps::Pinned => {
                // The ring's first step: planned, its entries in for good.
                let first = Rounds::run(&mut client, "scale", n, channels, 1, 0).await;
                println!(
                    "  {n} ranks, first step: {} flows, {} entity changes, {:.3} ms NDSP received -> all acknowledged",
                    first.flows, first.changes, first.server[0]
                );
                Some(reader.everything().await)
            }
        };
        let before = sums(&controller);
        let changes_before = metric_sum(
            &controller.get_text("/metrics"),
            "foresight_switch_changes_total",
        );
        let cpu_before = cpu_of(&controller, &fabric);
        let rounds = Rounds::run(&mut client, "scale", n, channels, iterations, warmup).await;
        let cpu_after = cpu_of(&controller, &fabric);
        let after = sums(&controller);
        if let Some(held) = held {
            let changes_after = metric_sum(
                &controller.get_text("/metrics"),
                "foresight_switch_changes_total",
            );
            let now = reader.everything().await;
            let entities: usize = now.values().map(BTreeSet::len).sum();
            println!(
                "  {n} ranks, steady steps: the switches hold the same {} entities before and after ({}); the controller counted {} changes over the {} steps",
                entities,
                if now == held { "read back over P4Runtime: identical" } else { "read back over P4Runtime: DIFFERENT" },
                changes_after - changes_before,
                iterations + warmup
            );
            assert!(now == held, "a steady step changed the switches");
        }
        let d: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let collectives = (iterations + warmup) as f64;
        let cpu_ms = |i: usize| (cpu_after[i] - cpu_before[i]) / collectives * 1e3;
        println!(
            "  {n} ranks: {} flows, {} entity changes per collective; planner {:.2} ms per call, one switch's write {:.2} ms on average ({:.0} writes per collective incl. cancel)",
            rounds.flows,
            rounds.changes,
            d[0] / d[1].max(1.0) * 1e3,
            d[2] / d[3].max(1.0) * 1e3,
            d[3] / collectives
        );
        println!(
            "  CPU per collective (submit and cancel): controller {:.2} ms, switches {:.2} ms",
            cpu_ms(0),
            cpu_ms(1)
        );
        // The cost curves read first steps only.
        let csv = std::env::var("FORESIGHT_BENCH_CSV")
            .ok()
            .filter(|_| steps == Steps::Each);
        if let Some(path) = csv {
            let row = ScaleRow {
                switches: fabric.switches.len(),
                leaves,
                ranks: n,
                planner_ms: d[0] / d[1].max(1.0) * 1e3,
                write_ms: d[2] / d[3].max(1.0) * 1e3,
                controller_cpu_ms: cpu_ms(0),
                switches_cpu_ms: cpu_ms(1),
            };
            row.append(&path, &rounds);
        }
        rounds.print();
    }
    controller.kill();
}

/// One scale figure as a CSV row (`FORESIGHT_BENCH_CSV`), for the cost
/// curves.
struct ScaleRow {
    switches: usize,
    leaves: usize,
    ranks: u32,
    planner_ms: f64,
    write_ms: f64,
    /// CPU per collective (submit and cancel), ms.
    controller_cpu_ms: f64,
    switches_cpu_ms: f64,
}

impl ScaleRow {
    const HEADER: &'static str =
        "switches,leaves,ranks,flows,entity_changes,loop_p50_ms,loop_p99_ms,\
        rpc_p50_ms,rpc_p99_ms,cancel_p50_ms,planner_ms,switch_write_ms,load_1min,\
        controller_cpu_ms,switches_cpu_ms";

    fn append(&self, path: &str, rounds: &Rounds) {
        use std::io::Write;
        let sorted = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v
        };
        let (server, rpc, removal) = (
            sorted(&rounds.server),
            sorted(&rounds.rpc),
            sorted(&rounds.removal),
        );
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_string))
            .unwrap_or_default();
        let mut file = csv_for_appending("FORESIGHT_BENCH_CSV", path, Self::HEADER);
        writeln!(
            file,
            "{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{load},{:.3},{:.3}",
            self.switches,
            self.leaves,
            self.ranks,
            rounds.flows,
            rounds.changes,
            quantile(&server, 0.5),
            quantile(&server, 0.99),
            quantile(&rpc, 0.5),
            quantile(&rpc, 0.99),
            quantile(&removal, 0.5),
            self.planner_ms,
            self.write_ms,
            self.controller_cpu_ms,
            self.switches_cpu_ms,
        )
        .unwrap();
    }
}

/// A tenant limit (`--max-live-reservations`) with room for the held
/// reservations and the loop's own.
fn room_for_live() -> String {
    (env("FORESIGHT_BENCH_LIVE", 5000) + 1000)
        .max(10_000)
        .to_string()
}

/// The same loop with `FORESIGHT_BENCH_LIVE` (5,000) more reservations
/// live, an hour ahead (nothing of them on the switches yet): what the
/// controller holds should not slow down a commit.
async fn with_live_reservations(
    client: &mut NdspClient,
    job: &str,
    channels: u32,
    iterations: usize,
) {
    let live = env("FORESIGHT_BENCH_LIVE", 5000);
    let hosts = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"];
    let later: Vec<proto::DemandSignal> = (0..live)
        .map(|i| {
            let (s, d) = (i % 4, (i % 4 + 2) % 4);
            let id = format!("{job}-later-{i}");
            demand(
                &id,
                hosts[s],
                hosts[d],
                3_600_000 * MS,
                60_000 * MS,
                1_000_000,
                None,
            )
        })
        .collect();
    for chunk in later.chunks(100) {
        client
            .submit_demand(proto::SubmitDemandRequest {
                header: header(),
                reference_unix_ns: 0,
                demands: chunk.to_vec(),
            })
            .await
            .unwrap();
    }
    client
        .register_topology(register(job, &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let rounds = Rounds::run(client, job, 16, channels, iterations, 10).await;
    println!("  the same with {live} more live reservations held:");
    rounds.print();
}

/// The control loop of a replica (`--etcd`, leader of one) whose every
/// commit is an etcd transaction on a three-member cluster, instead of a
/// state file.
async fn control_loop_etcd(fabric: &Fabric) {
    let Some(etcd) = testkit::etcd::Cluster::start("control-loop bench (etcd)", 3) else {
        return;
    };
    let iterations = env("FORESIGHT_BENCH_ITERATIONS", 200);
    let channels = env("FORESIGHT_BENCH_CHANNELS", 8) as u32;
    let endpoints = etcd.endpoints();
    let most = room_for_live();
    let controller = fabric.controller_with(
        50,
        &[
            "--etcd",
            &endpoints,
            "--replica",
            "bench",
            "--max-live-reservations",
            &most,
        ],
    );
    let mut client = controller.client().await;
    client
        .register_topology(register("bench-etcd", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let rounds = Rounds::run(&mut client, "bench-etcd", 16, channels, iterations, 10).await;
    println!("control loop with etcd in the path (3 members, each commit a fenced transaction): same collective");
    rounds.print();
    with_live_reservations(&mut client, "bench-etcd-live", channels, iterations / 2).await;
    controller.kill();
}

async fn control_loop(fabric: &Fabric) {
    let iterations = env("FORESIGHT_BENCH_ITERATIONS", 200);
    let channels = env("FORESIGHT_BENCH_CHANNELS", 8) as u32;
    let most = room_for_live();
    let mut args = vec!["--max-live-reservations".to_string(), most];
    args.extend(watch_args("h4"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let controller = fabric.controller_with(50, &args);
    let mut client = controller.client().await;
    client
        .register_topology(register("bench", &["10.0.1.1", "10.0.2.1"]))
        .await
        .unwrap();
    let cpu_before = cpu_of(&controller, fabric);
    let rounds = Rounds::run(&mut client, "bench", 16, channels, iterations, 10).await;
    let cpu_after = cpu_of(&controller, fabric);
    let cpu_ms = |i: usize| (cpu_after[i] - cpu_before[i]) / (iterations + 10) as f64 * 1e3;
    println!(
        "control loop: 16-rank ring all-reduce (2 x 8 GPUs, {channels} channels, {} flows) on 4 BMv2 switches",
        2 * channels
    );
    println!(
        "  {} entity changes per collective (SR push, INT watch if watched, DCQCN thresholds)",
        rounds.changes
    );
    rounds.print();
    println!(
        "  CPU per collective (submit and cancel): controller {:.3} ms, switches {:.3} ms",
        cpu_ms(0),
        cpu_ms(1)
    );
    let metrics = controller.get_text("/metrics");
    let value = |name: &str| metric(&metrics, name);
    println!(
        "  one Write of a change to one switch: mean {:.3} ms over {} writes; planner mean {:.3} ms",
        value("foresight_switch_write_seconds_sum") / value("foresight_switch_write_seconds_count") * 1e3,
        value("foresight_switch_write_seconds_count"),
        value("foresight_planner_seconds_sum") / value("foresight_planner_seconds_count") * 1e3,
    );
    with_live_reservations(&mut client, "bench-live", channels, iterations / 2).await;
    controller.kill();
}

async fn restart(fabric: &mut Fabric) {
    let n = env("FORESIGHT_BENCH_RESERVATIONS", 500);
    let _ = std::fs::remove_file(fabric.state_file());
    let _ = std::fs::remove_file(fabric.dir.path().join("state.json.journal"));
    let controller = fabric.controller(50);
    let mut client = controller.client().await;
    let hosts = ["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"];
    let mut demands = Vec::new();
    for i in 0..n {
        let s = i % 4;
        let d = (s + 1 + (i / 4) % 3) % 4;
        demands.push(demand(
            &format!("r-{i}"),
            hosts[s],
            hosts[d],
            0,
            3_600_000 * MS,
            50_000_000,
            Some(10_000 + i as u32),
        ));
    }
    let t0 = Instant::now();
    for chunk in demands.chunks(100) {
        let r = client
            .submit_demand(proto::SubmitDemandRequest {
                header: header(),
                reference_unix_ns: 0,
                demands: chunk.to_vec(),
            })
            .await
            .unwrap()
            .into_inner()
            .validate()
            .unwrap();
        assert!(
            r.iter().all(|r| r.flows[0].accepted_bps > 0),
            "all admitted"
        );
    }
    let submit_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut reader = fabric.reader().await;
    let before = reader.everything().await;
    let entities: usize = before.values().map(|s| s.len()).sum();
    controller.kill();

    let t1 = Instant::now();
    let controller = fabric.controller(50);
    let wall_ms = t1.elapsed().as_secs_f64() * 1e3;
    let status = controller.get_json("/v1/status");
    let after = reader.everything().await;
    let (mut inserted, mut modified, mut deleted, mut slowest) = (0, 0, 0, 0f64);
    for sw in status["switches"].as_array().unwrap() {
        let r = &sw["last_reconcile"];
        inserted += r["inserted"].as_u64().unwrap();
        modified += r["modified"].as_u64().unwrap();
        deleted += r["deleted"].as_u64().unwrap();
        slowest = slowest.max(r["millis"].as_f64().unwrap());
        assert_eq!(r["pipeline"], "kept");
    }
    let lost: usize = before
        .iter()
        .map(|(k, v)| v.difference(&after[k]).count())
        .sum();
    let extra: usize = after
        .iter()
        .map(|(k, v)| v.difference(&before[k]).count())
        .sum();
    println!("restart: {n} live reservations ({entities} entities on the switches; submitted in {submit_ms:.0} ms), controller killed with SIGKILL and restarted");
    println!(
        "  reconciled: {inserted} inserted, {modified} modified, {deleted} deleted; {lost} lost, {extra} duplicated/extra after restart"
    );
    println!(
        "  slowest switch read+diff+apply {slowest:.1} ms; process start -> every switch reconciled {:.1} ms (controller's own measure); spawn -> ready file {wall_ms:.1} ms",
        status["controller"]["startup_reconcile_ms"].as_f64().unwrap()
    );
    assert_eq!(
        (lost, extra, inserted, modified, deleted),
        (0, 0, 0, 0, 0),
        "restart must change nothing"
    );
    assert_eq!(status["controller"]["restored_reservations"], n);

    // A switch restart (its tables gone): the controller re-pushes the
    // pipeline and re-installs everything the switch should hold.
    let before_leaf1 = before["leaf1"].clone();
    drop(reader);
    let t2 = Instant::now();
    fabric
        .switches
        .get_mut("leaf1")
        .unwrap()
        .restart()
        .expect("leaf1 restarts");
    let leaf1 = loop {
        let status = controller.get_json("/v1/status");
        let sw = status["switches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "leaf1")
            .unwrap()
            .clone();
        if sw["reconciles"].as_u64().unwrap() >= 2 && sw["in_sync"] == true {
            break sw;
        }
        assert!(
            t2.elapsed() < Duration::from_secs(60),
            "leaf1 not reconciled: {sw}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let total_ms = t2.elapsed().as_secs_f64() * 1e3;
    let mut reader = fabric.reader_with_id(2).await;
    let after = reader.everything().await;
    assert_eq!(
        after["leaf1"], before_leaf1,
        "leaf1 holds what it held before its restart"
    );
    println!(
        "switch restart: leaf1 lost its {} entities; controller re-pushed the pipeline and reinstalled them ({} inserted) in {:.1} ms (restart -> in sync {total_ms:.0} ms, incl. BMv2 start)",
        before_leaf1.len(),
        leaf1["last_reconcile"]["inserted"],
        leaf1["last_reconcile"]["millis"].as_f64().unwrap()
    );
    drop(controller);
    std::thread::sleep(Duration::from_millis(100));
}
