//! `foresight demo`: the whole loop on an embedded default.
//!
//! A leaf-spine fabric (2 leaves, 2 spines, 4 hosts of 8 GPUs: the lab's
//! `leaf-spine-small.yaml`, compiled in) and a 32-GPU ring all-reduce:
//! plan it, and — when BMv2 is installed — start one `simple_switch_grpc`
//! per fabric switch, push the Foresight pipeline, install the static state
//! (routes, ECMP groups and hash seeds, SR adjacencies, INT, ECN), install the reservation
//! entries at the ingress leaves, read them back, then withdraw them at
//! expiry and check they are gone. Without BMv2 it plans only, and says so.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use installer::reservations::{reserved_flows, ReservedFlow};
use installer::static_state::{hash_offset_config, hash_seed_config, static_state, EcnProfile};
use installer::Intent;
use planner::collectives::{expand, select_servers, Collective, CollectiveKind};
use planner::demand::{Demand, DemandKind, QpAllocator};
use planner::ecmp::SeedPolicy;
use planner::report::{self, ReportOptions};
use planner::topology::yaml;
use planner::{Planner, PlannerConfig, Topology};

use crate::fabric::{Endpoint, Fabric, Pipeline};

const EMBEDDED_TOPOLOGY: &str =
    include_str!("../../../../bmv2-lab/topologies/leaf-spine-small.yaml");

#[derive(Args)]
pub struct DemoCmd {
    /// Plan only, even if BMv2 is installed.
    #[arg(long)]
    plan_only: bool,
    /// All-reduce buffer size in bytes.
    #[arg(long, default_value_t = 256 << 20)]
    bytes: u64,
    /// ECMP hash seed and offset of every switch: per-switch (CRC-32 of the
    /// switch's name, its tier's hash offset), seeds-only (no offsets) or
    /// same:N (every switch N, no offsets: the polarised fabric).
    #[arg(long, default_value = "per-switch")]
    hash_seed: SeedPolicy,
}

pub fn run(cmd: DemoCmd) -> anyhow::Result<()> {
    let topo = yaml::load_str(EMBEDDED_TOPOLOGY).context("embedded topology")?;
    println!(
        "fabric {}: {} switches, {} hosts, {} GPUs",
        topo.name(),
        topo.switches().len(),
        topo.hosts().len(),
        topo.gpu_count()
    );
    let (demands, planner_ms, plan_text, flows) = plan(&topo, cmd.bytes, cmd.hash_seed)?;
    print!("{plan_text}");
    println!(
        "planned in {planner_ms:.2} ms; {} flows reserved with SR label stacks",
        flows.len()
    );

    if cmd.plan_only {
        println!("demo: planning only (--plan-only)");
        return Ok(());
    }
    let tools = match bmv2::Toolchain::find() {
        Ok(t) => t,
        Err(missing) => {
            println!("demo: planning only — {missing}");
            println!(
                "demo: to run it on BMv2 switches, install PI and BMv2 with\n  \
                 bash ci/p4-toolchain.sh\n\
                 (from p4lang's repositories at the pinned tags, or local clones named by \
                 FORESIGHT_P4_SOURCES; ~35 min and ~1.1 GB on 2 cores, into /opt/p4tools or \
                 FORESIGHT_P4_PREFIX), then run this again; `foresight doctor` lists what else is missing"
            );
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(on_bmv2(&tools, &topo, &demands, &flows, cmd.hash_seed))
}

fn plan(
    topo: &Topology,
    bytes: u64,
    seeds: SeedPolicy,
) -> anyhow::Result<(Vec<Demand>, f64, String, Vec<ReservedFlow>)> {
    let gpus = u32::try_from(topo.gpu_count())?;
    let servers = select_servers(topo, gpus)?;
    let mut collective = Collective::new(CollectiveKind::RingAllreduce, servers, bytes);
    collective.channels = 1;
    let flows = expand(topo, &collective, &mut QpAllocator::new(topo))?;
    let demands = vec![Demand {
        id: "demo-ring-allreduce".into(),
        tenant: "demo".into(),
        priority: 0,
        elastic: false,
        deadline_ns: None,
        kind: DemandKind::Collective(CollectiveKind::RingAllreduce),
        flows,
    }];
    let config = PlannerConfig {
        ecmp_seeds: seeds,
        ..PlannerConfig::default()
    };
    let mut planner = Planner::new(topo, config);
    let start = Instant::now();
    let plan = planner.plan(&demands);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let report = report::build(
        &planner,
        &demands,
        &plan,
        ms,
        ReportOptions {
            flows_per_demand: 8,
            links: 6,
        },
    );
    let reserved = reserved_flows(topo, &demands, &plan);
    Ok((demands, ms, report::render_text(&report), reserved))
}

/// The static state of every switch, with its ECMP hash seed and offset.
fn static_intents(topo: &Topology, seeds: SeedPolicy) -> BTreeMap<String, Intent> {
    let mut intents = static_state(topo, EcnProfile::default());
    for s in topo.switches() {
        let intent = intents
            .get_mut(&s.name)
            .expect("static state is per switch");
        let hash = seeds.switch_hash(&s.name, s.role);
        intent.push(hash_seed_config(hash.seed));
        intent.push(hash_offset_config(hash.offset));
    }
    intents
}

/// Intended state: static everywhere, plus reservations at ingress leaves.
fn intents(
    topo: &Topology,
    seeds: SeedPolicy,
    reserved: &[ReservedFlow],
) -> BTreeMap<String, Intent> {
    let mut intents = static_intents(topo, seeds);
    for flow in reserved {
        let leaf = &topo.switches()[flow.ingress_leaf as usize].name;
        intents
            .get_mut(leaf)
            .expect("leaf in topology")
            .push(flow.entry());
    }
    intents
}

async fn on_bmv2(
    tools: &bmv2::Toolchain,
    topo: &Topology,
    _demands: &[Demand],
    reserved: &[ReservedFlow],
    seeds: SeedPolicy,
) -> anyhow::Result<()> {
    let pipeline = Pipeline::embedded()?;
    let mut processes = Vec::new();
    let mut endpoints = BTreeMap::new();
    for sw in topo.switches() {
        let spec = bmv2::SwitchSpec::new(&sw.name, u64::from(sw.id))
            .target_arg("--priority-queues")
            .target_arg("8");
        let process = bmv2::Bmv2Switch::start(tools, spec)?;
        endpoints.insert(
            sw.name.clone(),
            Endpoint {
                addr: process.grpc_addr(),
                device_id: u64::from(sw.id),
                tls: None,
            },
        );
        processes.push(process);
    }
    println!(
        "\nBMv2: started {} simple_switch_grpc processes ({})",
        processes.len(),
        endpoints
            .values()
            .map(|e| e.addr.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let fabric = Fabric::connect(pipeline, installer::Devices::bmv2(), &endpoints, 1).await?;
    let start = Instant::now();
    fabric.push_pipeline().await?;
    println!(
        "pipeline pushed to every switch in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    let static_only = static_intents(topo, seeds);
    let (diffs, took) = fabric.reconcile(&static_only).await?;
    let installed: usize = diffs.values().map(|d| d.insert.len()).sum();
    println!(
        "static state: {installed} entities installed on {} switches in {:.1} ms",
        diffs.len(),
        took.as_secs_f64() * 1e3
    );
    println!(
        "ECMP hash seeds ({seeds}): {}",
        topo.switches()
            .iter()
            .map(|s| format!("{} {:#010x}", s.name, seeds.seed(&s.name)))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let with_reservations = intents(topo, seeds, reserved);
    let (diffs, took) = fabric.reconcile(&with_reservations).await?;
    let inserted: usize = diffs.values().map(|d| d.insert.len()).sum();
    if inserted != reserved.len()
        || diffs
            .values()
            .any(|d| !d.modify.is_empty() || !d.delete.is_empty())
    {
        bail!(
            "reservation install changed more than the {} reservation entries: {diffs:?}",
            reserved.len()
        );
    }
    println!(
        "reservations: {inserted} SR push entries acknowledged by every switch in {:.2} ms",
        took.as_secs_f64() * 1e3
    );
    for (name, d) in &diffs {
        if !d.insert.is_empty() {
            println!("  {name}: {}", d.summary());
        }
    }

    // Idempotence: a second reconcile must change nothing.
    let (diffs, _) = fabric.reconcile(&with_reservations).await?;
    if diffs.values().any(|d| !d.is_empty()) {
        bail!("second reconcile was not a no-op: {diffs:?}");
    }
    println!("re-reconcile: no changes (nothing duplicated, nothing missing)");

    let (diffs, took) = fabric.reconcile(&static_only).await?;
    let deleted: usize = diffs.values().map(|d| d.delete.len()).sum();
    println!(
        "expiry: {deleted} reservation entries withdrawn in {:.2} ms; static state untouched",
        took.as_secs_f64() * 1e3
    );
    if deleted != reserved.len() {
        bail!("expected {} deletions, got {deleted}", reserved.len());
    }
    fabric.shutdown().await;
    drop(processes);
    println!("demo: done (switches stopped)");
    Ok(())
}
