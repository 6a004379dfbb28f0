//! `foresight scale`: what the controller computes for one NDSP batch on a
//! generated fabric of thousands of switches, without the switches. The
//! batch (one ring all-reduce over every rank, or one all-to-all round:
//! each rank to the rank half the fabric away) is validated and planned
//! into reservation records; every switch's intended state is derived and
//! diffed against the state before the batch; the changes are encoded as
//! the P4Runtime Write requests each switch would get, in batches as the
//! controller sends them. It stops at the encoded requests and says so:
//! writing them is the switches' time, which the BMv2 benches measure
//! (`cargo bench -p foresight --bench control_loop`).

use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use installer::ecn::EcnProfile;
use installer::layered::diff_layered;
use installer::reconcile::Diff;
use installer::Devices;
use ndsp::proto::{self, collective, demand_signal, endpoint};
use ndsp::types as nt;
use ndsp::Validate;
use p4rt::proto::p4::v1 as p4;
use p4rt::{SharedUpdate, SharedWriteRequest};
use planner::ecmp::{HashMode, SeedPolicy};
use planner::shares::TenantShares;
use planner::{PlannerConfig, Topology};
use prost::Message;
use serde::Serialize;

use super::topo::FabricPreset;
use crate::daemon::engine::Engine;
use crate::daemon::inputs::requests::{collective_key, demand_keys, recorded_registration};
use crate::daemon::now_unix_ns;
use crate::daemon::persistence::state::State;
use crate::daemon::southbound::desired::{Compiler, Policy};

const TENANT: &str = "scale";
const JOB: &str = "scale";
/// The batch starts this long after it is received, and lasts as long.
const START_NS: u64 = 1_000_000_000;
const DURATION_NS: u64 = 1_000_000_000;

#[derive(Clone, Copy, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Workload {
    /// One ring all-reduce over every rank.
    Ring,
    /// One all-to-all round: each rank sends to the rank half the fabric away.
    AllToAllRound,
    /// One MoE expert-parallel round, every group of --ep ranks at once
    /// (the planner's side only: see `scale_moe`).
    MoeEp,
}

#[derive(Args)]
pub struct ScaleCmd {
    /// Fabric to generate.
    #[arg(long, value_enum, default_value = "clos3")]
    fabric: FabricPreset,
    /// GPUs (one rank, one NIC each).
    #[arg(long, default_value_t = 8192)]
    gpus: u32,
    /// Uplinks oversubscribed this many to one (clos3 only).
    #[arg(long, default_value_t = 1)]
    oversubscription: u32,
    /// --workload moe-ep: ranks per expert-parallel group.
    #[arg(long, default_value_t = 64)]
    ep: u32,
    /// --workload moe-ep: bytes each rank sends to its group per step.
    #[arg(long, default_value_t = 64 << 20)]
    moe_bytes: u64,
    /// --workload moe-ep: log-normal skew of the experts' popularity.
    #[arg(long, default_value_t = 0.3)]
    moe_skew: f64,
    #[arg(long, value_enum, default_value = "ring")]
    workload: Workload,
    /// Ring channels (flows per neighbour pair); a reservation holds at
    /// most 65,536 flows.
    #[arg(long, default_value_t = 1)]
    channels: u32,
    /// Batches timed (each on the fabric as before the first).
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Updates per Write request.
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Give reserved flows their INT watch entries too, as a controller
    /// with an INT collector or counter polls does (one more entity per
    /// flow at its first leaf).
    #[arg(long)]
    watch_reserved: bool,
    /// Which step is timed: the first (planned, its entries written; the
    /// fabric reset before each batch) or a steady one (the ring's pattern
    /// installed once before timing, as `controller --standing-patterns`
    /// does; each timed step is admitted on it and then cancelled).
    #[arg(long, value_enum, default_value = "first")]
    steps: Steps,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Steps {
    /// Every batch a job's first step.
    First,
    /// Every batch a later step of a ring whose pattern stands.
    Steady,
}

/// One batch's time per phase, seconds.
#[derive(Clone, Copy, Default)]
struct Phases {
    plan: f64,
    intent: f64,
    diff: f64,
    encode: f64,
}

#[derive(Serialize)]
struct Quantiles {
    p50_ms: f64,
    p99_ms: f64,
}

#[derive(Serialize)]
struct Report {
    fabric: String,
    gpus: u32,
    switches: usize,
    workload: Workload,
    steps: Steps,
    flows: usize,
    iterations: usize,
    /// Building the fabric, the engine and the static state (once).
    setup_s: f64,
    plan: Quantiles,
    intent: Quantiles,
    diff: Quantiles,
    encode: Quantiles,
    total: Quantiles,
    /// Entities written for the batch, all switches.
    entities: usize,
    switches_written: usize,
    entities_per_switch_mean: f64,
    entities_per_switch_max: usize,
    /// The busiest switch's share of all entities: with writes to every
    /// switch in parallel, the loop waits for it.
    busiest_switch: String,
    busiest_share: f64,
    write_requests: usize,
    encoded_bytes: usize,
    peak_rss_mib: f64,
    stops_at: &'static str,
}

pub fn run(cmd: ScaleCmd) -> anyhow::Result<()> {
    if cmd.iterations == 0 || cmd.batch == 0 {
        anyhow::bail!("--iterations and --batch: at least 1");
    }
    if cmd.steps == Steps::Steady && !matches!(cmd.workload, Workload::Ring) {
        anyhow::bail!("--steps steady: the ring only (a pattern is a collective's)");
    }
    let started = Instant::now();
    eprintln!(
        "scale: generating {} GPUs of {:?}...",
        cmd.gpus,
        cmd.fabric.preset()
    );
    let topo: &'static Topology = Box::leak(Box::new(sim::fabrics::generated(
        cmd.fabric.preset(),
        cmd.gpus,
        cmd.oversubscription,
    )?));
    if matches!(cmd.workload, Workload::MoeEp) {
        let report =
            super::scale_moe::run(topo, cmd.ep, cmd.iterations, cmd.moe_bytes, cmd.moe_skew)?;
        if cmd.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            super::scale_moe::print(&report);
        }
        return Ok(());
    }
    // Ranks server by server (NCCL's order: a server's GPUs are neighbours
    // in the ring, and talk over NVLink).
    let mut by_server: Vec<&planner::topology::Host> = topo.hosts().iter().collect();
    by_server.sort_by_key(|h| h.server);
    let hosts: Vec<String> = by_server.iter().map(|h| h.ip.to_string()).collect();
    let ranks = hosts.len() as u32;
    eprintln!(
        "scale: {} switches, {} NICs; building the static state...",
        topo.switches().len(),
        ranks
    );
    let (mut engine, _) = Engine::new(
        topo,
        PlannerConfig::default(),
        TenantShares::default(),
        State::new(topo.name(), now_unix_ns()),
        Vec::new(),
    )?;
    let mut compiler = compiler(topo, cmd.watch_reserved)?;
    register(&mut engine, &hosts)?;
    let mut before = compiler
        .changes(&engine.state, now_unix_ns())
        .map_err(|e| anyhow::anyhow!("the static state: {e}"))?;
    if cmd.steps == Steps::Steady {
        engine.set_standing_patterns(true);
        eprintln!("scale: the ring's first step (its pattern, installed once)...");
        let now = now_unix_ns();
        submit(
            &mut engine,
            cmd.workload,
            ranks,
            cmd.channels,
            "ring-first",
            now,
        )?;
        let pattern = compiler
            .changes(&engine.state, now + START_NS + DURATION_NS / 2)
            .map_err(|e| anyhow::anyhow!("intended state: {e}"))?;
        before.extend(pattern);
        end_step(&mut engine, "ring-first", now)?;
    }
    let setup_s = started.elapsed().as_secs_f64();
    eprintln!(
        "scale: static state of every switch in {setup_s:.1} s; timing {} batches",
        cmd.iterations
    );

    let mut phases = Vec::with_capacity(cmd.iterations);
    let mut last = None;
    for i in 0..cmd.iterations {
        let now = now_unix_ns();
        let t0 = Instant::now();
        let id = format!("ring-{i}");
        let flows = submit(&mut engine, cmd.workload, ranks, cmd.channels, &id, now)?;
        let t1 = Instant::now();
        let at = now + START_NS + DURATION_NS / 2;
        let desired = compiler
            .changes(&engine.state, at)
            .map_err(|e| anyhow::anyhow!("intended state: {e}"))?;
        let t2 = Instant::now();
        let diffs: Vec<(&str, Diff)> = desired
            .iter()
            .filter_map(|(name, to)| {
                let d = diff_layered(before.get(name)?, to);
                (!d.is_empty()).then_some((name.as_str(), d))
            })
            .collect();
        let t3 = Instant::now();
        let encoded: Vec<(&str, usize, usize, usize)> = diffs
            .iter()
            .map(|(name, d)| {
                let device_id = topo
                    .switch_by_name(name)
                    .map(|s| u64::from(topo.switches()[s as usize].id))
                    .unwrap_or(0);
                let (requests, bytes) = encode(d, device_id, cmd.batch);
                (*name, entities(d), requests, bytes)
            })
            .collect();
        let t4 = Instant::now();
        phases.push(Phases {
            plan: (t1 - t0).as_secs_f64(),
            intent: (t2 - t1).as_secs_f64(),
            diff: (t3 - t2).as_secs_f64(),
            encode: (t4 - t3).as_secs_f64(),
        });
        eprintln!(
            "scale: batch {}/{}: {flows} flows, {:.1} ms to {} switches' requests",
            i + 1,
            cmd.iterations,
            (t4 - t0).as_secs_f64() * 1e3,
            encoded.len()
        );
        last = Some((
            flows,
            encoded
                .iter()
                .map(|(n, e, r, b)| (n.to_string(), *e, *r, *b))
                .collect::<Vec<_>>(),
        ));
        // Back to the fabric as before the batch (and the switches, as the
        // controller would send it): a steady step ends, the pattern stays.
        match cmd.steps {
            Steps::First => reset(&mut engine, &hosts, now)?,
            Steps::Steady => end_step(&mut engine, &id, now)?,
        }
        before.extend(
            compiler
                .changes(&engine.state, at)
                .map_err(|e| anyhow::anyhow!("intended state: {e}"))?,
        );
    }
    let (flows, per_switch) = last.expect("at least one batch");
    let entities: usize = per_switch.iter().map(|(_, e, _, _)| e).sum();
    let (busiest, most) = per_switch
        .iter()
        .max_by_key(|(_, e, _, _)| *e)
        .map(|(n, e, _, _)| (n.clone(), *e))
        .unwrap_or_default();
    let q = |f: fn(&Phases) -> f64| quantiles(phases.iter().map(f).collect());
    let report = Report {
        fabric: topo.name().to_string(),
        gpus: cmd.gpus,
        switches: topo.switches().len(),
        workload: cmd.workload,
        steps: cmd.steps,
        flows,
        iterations: cmd.iterations,
        setup_s,
        plan: q(|p| p.plan),
        intent: q(|p| p.intent),
        diff: q(|p| p.diff),
        encode: q(|p| p.encode),
        total: q(|p| p.plan + p.intent + p.diff + p.encode),
        entities,
        switches_written: per_switch.len(),
        entities_per_switch_mean: entities as f64 / per_switch.len().max(1) as f64,
        entities_per_switch_max: most,
        busiest_switch: busiest,
        busiest_share: most as f64 / entities.max(1) as f64,
        write_requests: per_switch.iter().map(|(_, _, r, _)| r).sum(),
        encoded_bytes: per_switch.iter().map(|(_, _, _, b)| b).sum(),
        peak_rss_mib: peak_rss_mib(),
        stops_at:
            "the encoded P4Runtime Write requests; the switches' write time is the BMv2 benches'",
    };
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print(&report);
    }
    Ok(())
}

fn compiler(topo: &'static Topology, watch_reserved: bool) -> anyhow::Result<Compiler> {
    let pipeline = crate::fabric::Pipeline::embedded()?;
    let policy = Policy {
        lead_ns: 0,
        ecn: EcnProfile::default(),
        lowered: EcnProfile::lowered(),
        predrain_probability: 0xffff,
        collector: None,
        ecmp_hash: HashMode::QpAware.into(),
        ecmp_seeds: SeedPolicy::PerSwitch,
        reserved_tc: installer::reservations::RESERVED_TC,
        background_tc: installer::reservations::RESERVED_TC,
        int_mtu: None,
        watch_reserved,
        police_reserved: true,
    };
    Compiler::new(topo, pipeline.info, Arc::new(Devices::bmv2()), policy)
        .map_err(|e| anyhow::anyhow!("the static state: {e}"))
}

fn header() -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ndsp::PROTOCOL_VERSION.into()),
        tenant: TENANT.into(),
    })
}

/// The job: rank r on NIC r.
fn register(engine: &mut Engine, hosts: &[String]) -> anyhow::Result<()> {
    let req = proto::RegisterTopologyRequest {
        header: header(),
        topology: Some(proto::Topology {
            job_id: JOB.into(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: hosts.len() as u32,
            ranks: hosts
                .iter()
                .enumerate()
                .map(|(r, h)| proto::RankEndpoint {
                    rank: r as u32,
                    host_address: h.clone(),
                    ..Default::default()
                })
                .collect(),
            library: proto::CollectiveLibrary::Nccl as i32,
            library_version: String::new(),
            algorithms: vec![proto::CollectiveAlgorithm::Ring as i32],
        }),
    };
    let t = req
        .validate()
        .map_err(|e| anyhow::anyhow!("registration: {e}"))?;
    engine.register(t, recorded_registration(&req));
    Ok(())
}

/// Everything of the job cancelled and the job registered again: the
/// fabric as before the batch.
fn reset(engine: &mut Engine, hosts: &[String], now: u64) -> anyhow::Result<()> {
    let cancel = nt::ValidatedCancel {
        ctx: nt::RequestContext {
            tenant: TENANT.into(),
            client_version: ndsp::PROTOCOL_VERSION,
        },
        target: nt::CancelTarget::Job(JOB.into()),
    };
    engine
        .cancel(&cancel)
        .map_err(|e| anyhow::anyhow!("cancelling the batch: {e:?}"))?;
    engine.expire(now + START_NS + DURATION_NS + 1);
    register(engine, hosts)
}

/// Step `id` of the ring cancelled and retired: its booking goes, and its
/// job's pattern stays.
fn end_step(engine: &mut Engine, id: &str, now: u64) -> anyhow::Result<()> {
    let cancel = nt::ValidatedCancel {
        ctx: nt::RequestContext {
            tenant: TENANT.into(),
            client_version: ndsp::PROTOCOL_VERSION,
        },
        target: nt::CancelTarget::Collective(id.into()),
    };
    engine
        .cancel(&cancel)
        .map_err(|e| anyhow::anyhow!("cancelling step {id}: {e:?}"))?;
    engine.expire(now + START_NS + DURATION_NS + 1);
    Ok(())
}

/// Validates and plans the batch (a ring's collective `id`); the flows it
/// holds.
fn submit(
    engine: &mut Engine,
    workload: Workload,
    ranks: u32,
    channels: u32,
    id: &str,
    now: u64,
) -> anyhow::Result<usize> {
    match workload {
        Workload::Ring => {
            let req = proto::SubmitCollectiveRequest {
                header: header(),
                reference_unix_ns: now,
                collective: Some(proto::Collective {
                    collective_id: id.into(),
                    job_id: JOB.into(),
                    kind: proto::CollectiveKind::RingAllReduce as i32,
                    ranks: (0..ranks).collect(),
                    peer_ranks: vec![],
                    size_bytes: 64 << 20,
                    channels,
                    start: Some(collective::Start::StartOffsetNs(START_NS)),
                    pacing: Some(collective::Pacing::DurationNs(DURATION_NS)),
                    priority: proto::PriorityClass::IterationBlocking as i32,
                    elasticity: proto::Elasticity::Inelastic as i32,
                    deadline: None,
                    recurrence: None,
                }),
            };
            let c = req
                .validate()
                .map_err(|e| anyhow::anyhow!("the collective: {e}"))?;
            let planned = engine
                .submit_collective(&c, collective_key(&req), now)
                .map_err(|e| anyhow::anyhow!("the collective was refused: {e:?}"))?;
            Ok(planned.records.iter().map(|r| r.flows.len()).sum())
        }
        Workload::AllToAllRound => {
            let mut flows = 0;
            let all: Vec<u32> = (0..ranks).collect();
            for chunk in all.chunks(ndsp::limits::MAX_DEMANDS_PER_REQUEST) {
                let req = proto::SubmitDemandRequest {
                    header: header(),
                    reference_unix_ns: now,
                    demands: chunk
                        .iter()
                        .map(|&r| proto::DemandSignal {
                            demand_id: format!("a2a-{r}"),
                            job_id: JOB.into(),
                            source: Some(proto::Endpoint {
                                address: Some(endpoint::Address::Rank(r)),
                            }),
                            destination: Some(proto::Endpoint {
                                address: Some(endpoint::Address::Rank((r + ranks / 2) % ranks)),
                            }),
                            start: Some(demand_signal::Start::StartOffsetNs(START_NS)),
                            size_bytes: 8 << 20,
                            pacing: Some(demand_signal::Pacing::DurationNs(DURATION_NS)),
                            priority: proto::PriorityClass::IterationBlocking as i32,
                            elasticity: proto::Elasticity::Inelastic as i32,
                            ..Default::default()
                        })
                        .collect(),
                };
                let batch = req
                    .validate()
                    .map_err(|e| anyhow::anyhow!("the demands: {e}"))?;
                let planned = engine
                    .submit_demands(&batch, &demand_keys(&req), now)
                    .map_err(|e| anyhow::anyhow!("the demands were refused: {e:?}"))?;
                flows += planned.records.iter().map(|r| r.flows.len()).sum::<usize>();
            }
            Ok(flows)
        }
        Workload::MoeEp => unreachable!("timed by scale_moe"),
    }
}

fn entities(d: &Diff) -> usize {
    d.insert.len() + d.modify.len() + d.delete.len()
}

/// The Write requests of `d` for device `device_id`, `batch` updates
/// each, encoded as the controller sends them (sharing the diff's
/// entities): how many, and their encoded bytes.
fn encode(d: &Diff, device_id: u64, batch: usize) -> (usize, usize) {
    use p4::update::Type;
    let updates: Vec<SharedUpdate> = d
        .insert
        .iter()
        .map(|(_, e)| SharedUpdate::new(Type::Insert, e.clone()))
        .chain(
            d.modify
                .iter()
                .map(|(_, e)| SharedUpdate::new(Type::Modify, e.clone())),
        )
        .chain(
            d.delete
                .iter()
                .map(|(_, e)| SharedUpdate::new(Type::Delete, e.clone())),
        )
        .collect();
    let mut requests = 0;
    let mut bytes = 0;
    for chunk in updates.chunks(batch) {
        let request = SharedWriteRequest {
            device_id,
            election_id: Some(p4::Uint128 { high: 0, low: 1 }),
            updates: chunk.to_vec(),
            atomicity: p4::write_request::Atomicity::ContinueOnError as i32,
            ..Default::default()
        };
        bytes += request.encode_to_vec().len();
        requests += 1;
    }
    (requests, bytes)
}

fn quantiles(mut v: Vec<f64>) -> Quantiles {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] * 1e3;
    Quantiles {
        p50_ms: at(0.5),
        p99_ms: at(0.99),
    }
}

/// The process's peak resident memory (VmHWM), MiB.
pub(super) fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn print(r: &Report) {
    let ms = |q: &Quantiles| format!("{:.1} / {:.1} ms", q.p50_ms, q.p99_ms);
    println!(
        "{} ({} GPUs, {} switches), {}: {} flows, {} batches",
        r.fabric,
        r.gpus,
        r.switches,
        match (r.workload, r.steps) {
            (Workload::Ring, Steps::First) => "one ring all-reduce over every rank, its first step",
            (Workload::Ring, Steps::Steady) =>
                "one ring all-reduce over every rank, a steady step (its pattern standing)",
            (Workload::AllToAllRound, _) => "one all-to-all round",
            (Workload::MoeEp, _) => unreachable!("printed by scale_moe"),
        },
        r.flows,
        r.iterations
    );
    println!("  setup (fabric, engine, static state): {:.1} s", r.setup_s);
    println!(
        "  p50 / p99: plan {}, intent {}, diff {}, encode {}; total {}",
        ms(&r.plan),
        ms(&r.intent),
        ms(&r.diff),
        ms(&r.encode),
        ms(&r.total)
    );
    println!(
        "  {} entities to {} switches (mean {:.1}, most {} on {}: {:.1} % of all), {} Write requests, {:.1} MiB encoded",
        r.entities,
        r.switches_written,
        r.entities_per_switch_mean,
        r.entities_per_switch_max,
        r.busiest_switch,
        r.busiest_share * 100.0,
        r.write_requests,
        r.encoded_bytes as f64 / 1048576.0
    );
    println!("  peak memory {:.0} MiB", r.peak_rss_mib);
    println!("  stops at {}", r.stops_at);
}
