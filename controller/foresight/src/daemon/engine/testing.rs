//! What the engine's tests share: a small fabric, an engine over it,
//! compilers of the switch state, and requests as a client builds them.

pub use ndsp::proto;
pub use ndsp::types as nt;
pub use ndsp::Validate;
pub use planner::shares::TenantShares;
pub use planner::{PlannerConfig, Topology};
pub use testkit::requests::{demand, header};

pub use super::*;
pub use crate::daemon::inputs::requests::{
    collective_key, demand_keys, recorded_registration, registered_jobs,
};
pub use crate::daemon::persistence::state::State;
pub use crate::daemon::persistence::state_records::{Reason, Reservation, Status};
pub use crate::daemon::southbound::desired::{Compiler, Policy};
use installer::ecn::EcnProfile;
use ndsp::proto::collective;

pub const MS: u64 = 1_000_000;
pub const T0: u64 = 1_000_000_000_000_000_000;

pub fn topo() -> &'static Topology {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
    );
    Box::leak(Box::new(planner::topology::yaml::load_file(path).unwrap()))
}

/// An engine over `state` (fresh, or a restart's reload) without shares.
pub fn restart(topo: &'static Topology, state: State) -> (Engine, Restored) {
    let jobs = registered_jobs(&state).unwrap();
    Engine::new(
        topo,
        PlannerConfig::default(),
        TenantShares::default(),
        state,
        jobs,
    )
    .unwrap()
}

pub fn engine() -> Engine {
    let topo = topo();
    restart(topo, State::new(topo.name(), T0)).0
}

/// An engine holding one admitted 40 Gb/s, 50 ms demand from h1 to h3
/// (leaf1 to leaf2, so over either spine) and its records: the
/// reservation the link-failure and reload tests move between spines.
pub fn engine_with_one_reservation() -> (Engine, Vec<Reservation>) {
    let mut e = engine();
    let d = demand(
        "d",
        "10.0.1.1",
        "10.0.2.1",
        0,
        50 * MS,
        40_000_000_000,
        Some(600),
    );
    let r = submit(&mut e, vec![d], T0).unwrap();
    (e, r)
}

pub fn compiler(topo: &'static Topology, lead_ns: u64) -> Compiler {
    seeded_compiler(topo, lead_ns, planner::ecmp::SeedPolicy::PerSwitch)
}

pub fn seeded_compiler(
    topo: &'static Topology,
    lead_ns: u64,
    seeds: planner::ecmp::SeedPolicy,
) -> Compiler {
    policy_compiler(topo, lead_ns, seeds, 1)
}

pub fn policy_compiler(
    topo: &'static Topology,
    lead_ns: u64,
    seeds: planner::ecmp::SeedPolicy,
    background_tc: u8,
) -> Compiler {
    let policy = test_policy(lead_ns, seeds, background_tc);
    compiler_for(topo, policy)
}

/// The tests' policy: reserved flows watched, no collector.
pub fn test_policy(lead_ns: u64, seeds: planner::ecmp::SeedPolicy, background_tc: u8) -> Policy {
    Policy {
        lead_ns,
        ecn: EcnProfile::default(),
        lowered: EcnProfile::lowered(),
        predrain_probability: 0xffff,
        collector: None,
        ecmp_hash: planner::ecmp::HashMode::QpAware.into(),
        ecmp_seeds: seeds,
        reserved_tc: installer::reservations::RESERVED_TC,
        background_tc,
        int_mtu: None,
        watch_reserved: true,
        police_reserved: true,
    }
}

pub fn compiler_for(topo: &'static Topology, policy: Policy) -> Compiler {
    let pipeline = crate::fabric::Pipeline::embedded().unwrap();
    let devices = std::sync::Arc::new(installer::Devices::bmv2());
    Compiler::new(topo, pipeline.info, devices, policy).unwrap()
}

/// Submit `demands` as a client would, received at `now`.
pub fn submit_planned(
    e: &mut Engine,
    demands: Vec<proto::DemandSignal>,
    now: u64,
) -> Result<Planned, Refusal> {
    let req = proto::SubmitDemandRequest {
        header: header(),
        reference_unix_ns: now,
        demands,
    };
    let batch = req.validate().unwrap();
    e.submit_demands(&batch, &demand_keys(&req), now)
}

/// The records of [`submit_planned`].
pub fn submit(
    e: &mut Engine,
    demands: Vec<proto::DemandSignal>,
    now: u64,
) -> Result<Vec<Reservation>, Refusal> {
    submit_planned(e, demands, now).map(|p| owned(p.records))
}

/// The engine's shared answers as records of the test's own.
pub fn owned(records: Vec<std::sync::Arc<Reservation>>) -> Vec<Reservation> {
    records
        .into_iter()
        .map(std::sync::Arc::unwrap_or_clone)
        .collect()
}

pub fn register(e: &mut Engine, hosts: &[&str]) {
    let req = testkit::requests::register("job", hosts);
    let t = req.validate().unwrap();
    e.register(t, recorded_registration(&req));
}

pub fn ring(id: &str, ranks: u32, start: u64, dur: u64) -> proto::SubmitCollectiveRequest {
    proto::SubmitCollectiveRequest {
        header: header(),
        reference_unix_ns: T0,
        collective: Some(proto::Collective {
            collective_id: id.into(),
            job_id: "job".into(),
            kind: proto::CollectiveKind::RingAllReduce as i32,
            ranks: (0..ranks).collect(),
            peer_ranks: vec![],
            size_bytes: 256 << 20,
            channels: 8,
            start: Some(collective::Start::StartOffsetNs(start)),
            pacing: Some(collective::Pacing::DurationNs(dur)),
            priority: proto::PriorityClass::IterationBlocking as i32,
            elasticity: proto::Elasticity::Inelastic as i32,
            deadline: None,
            recurrence: None,
        }),
    }
}

/// The record as a client would receive and validate it.
pub fn wire(r: &Reservation) -> nt::ValidatedReservation {
    let p: proto::Reservation = to_ndsp(r).into();
    p.validate()
        .unwrap_or_else(|e| panic!("controller answer does not validate: {e}\n{r:?}"))
}

/// The entries of `table` the switches (or only `switch`) should hold.
pub fn entries_of(
    d: &std::collections::BTreeMap<String, installer::intent::Resolved>,
    switch: Option<&str>,
    table: &str,
) -> Vec<p4rt::proto::p4::v1::TableEntry> {
    let info = crate::fabric::Pipeline::embedded().unwrap().info;
    let id = info.table(table).unwrap().preamble.as_ref().unwrap().id;
    d.iter()
        .filter(|(name, _)| switch.is_none_or(|s| s == name.as_str()))
        .flat_map(|(_, r)| r.entities.values())
        .filter_map(|x| match &x.entity {
            Some(p4rt::proto::p4::v1::entity::Entity::TableEntry(t)) if t.table_id == id => {
                Some(t.clone())
            }
            _ => None,
        })
        .collect()
}

/// The SR reservation entries leaf1 should hold.
pub fn leaf1_sr_entries(
    d: &std::collections::BTreeMap<String, installer::intent::Resolved>,
) -> Vec<p4rt::proto::p4::v1::TableEntry> {
    entries_of(d, Some("leaf1"), installer::names::SR_RESERVATION)
}

pub fn tables(
    d: &std::collections::BTreeMap<String, installer::intent::Resolved>,
    table: &str,
) -> usize {
    entries_of(d, None, table).len()
}
