//! The engine itself: the reservation records (the [`State`]) and the
//! planner's ledger, kept in step, and the translations between the two
//! that every request kind uses (recorded hops and planner paths, records
//! and planner demands, ids and QPs). Built here from a fresh or reloaded
//! state, where the ledger is rebuilt from what the switches carry.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use ndsp::types as nt;
use planner::collectives::CollectiveKind;
use planner::conventions::{FIRST_QP, QP_MASK};
use planner::demand::{Demand, DemandKind, Flow};
use planner::shares::{SharedPlanner, TenantShares};
use planner::topology::HostIdx;
use planner::{PlannerConfig, Topology};

use crate::daemon::persistence::state::State;
use crate::daemon::persistence::state_records::{Hop, Reservation, Status, Subject};

/// A standing pattern's flows as the planner sees them (source NIC, path),
/// worked out once per pattern: turning recorded hops into a path looks
/// edges up by port, too slow to repeat for every flow of every step.
pub(super) type PinnedPaths = std::sync::Arc<PinnedRoutes>;

/// A pattern's flows as the planner holds them: each flow's source NIC and
/// path, and the flows crossing each reserved link, so that a step is
/// checked and booked per link rather than per flow and hop.
pub(super) struct PinnedRoutes {
    pub paths: Vec<(HostIdx, planner::Path)>,
    /// Each reserved link once, with the flows (indexes into `paths`) on it.
    pub links: Vec<(planner::topology::EdgeId, Vec<u32>)>,
}

/// One flow as the ledger holds it: source NIC, path, window, bit/s.
type LedgerFlow = (HostIdx, planner::Path, planner::Window, u64);

/// Most flows one reservation may expand to (collective flows times
/// recurrence occurrences).
pub const MAX_FLOWS_PER_RESERVATION: usize = 65_536;

/// How the planner's ledger was rebuilt after a restart: from the
/// recorded paths of the live reservations (what the switches carry), so
/// the ledger and the switches agree.
#[derive(Debug, Clone, Default)]
pub struct Restored {
    pub reservations: usize,
    /// Reservations whose recorded path crossed a link that is down in the
    /// restored link state; they were re-planned at start-up.
    pub diverged: Vec<String>,
}

pub struct Engine {
    pub topo: &'static Topology,
    pub(super) by_ip: HashMap<Ipv4Addr, HostIdx>,
    /// The host on each (leaf, port): a recorded last hop's edge at once.
    host_ports: HashMap<(u32, u16), HostIdx>,
    /// One planner per tenant share group (one in all without shares).
    pub(super) planner: SharedPlanner<'static>,
    pub state: State,
    /// Validated topologies of registered jobs, by (tenant, job).
    /// Shared: a step reads its job's while the engine changes.
    pub(super) jobs: HashMap<(String, String), std::sync::Arc<RegisteredJob>>,
    /// Which earlier reservations a planning call may move.
    pub reoptimization: Reoptimization,
    /// Hold reserved flows by their UDP source port rather than SR labels.
    pub steering: Option<super::EntropySteering>,
    /// Install a job's repeated collective once and admit its later steps
    /// on the same paths (see `patterns`).
    pub standing_patterns: bool,
    /// The planner's view of each pattern's flows, by the pattern's seq.
    pub(super) pinned_paths: HashMap<u64, PinnedPaths>,
}

/// A registered job: its validated rank map, and each rank's server on
/// the fabric (by the rank's place in the map), so that a step over 32k
/// ranks finds their servers by index rather than by address.
pub struct RegisteredJob {
    pub topology: nt::ValidatedTopology,
    /// `servers[i]` is the server of `topology.ranks[i]` (none: its host is
    /// not attached to the fabric).
    pub servers: Vec<Option<u32>>,
}

impl RegisteredJob {
    pub fn new(
        topology: nt::ValidatedTopology,
        by_ip: &HashMap<Ipv4Addr, HostIdx>,
        topo: &Topology,
    ) -> RegisteredJob {
        let servers = topology
            .ranks
            .iter()
            .map(|r| {
                by_ip
                    .get(&r.host_address)
                    .map(|&h| topo.hosts()[h as usize].server)
            })
            .collect();
        RegisteredJob { topology, servers }
    }

    /// The server of `rank` (outer none: not registered; inner none: its
    /// host is not on the fabric).
    pub fn server_of(&self, rank: u32) -> Option<Option<u32>> {
        self.topology.index_of(rank).map(|i| self.servers[i])
    }
}

impl std::ops::Deref for RegisteredJob {
    type Target = nt::ValidatedTopology;
    fn deref(&self) -> &nt::ValidatedTopology {
        &self.topology
    }
}

/// Which earlier reservations planning may re-place (paths only, never
/// windows or rates) when that admits a new demand or lowers the peak.
/// Installed reservations whose flows have started never move.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reoptimization {
    /// Reservations none of whose entries are on the switches yet.
    pub pending: bool,
    /// Also reservations installed but not started (the switches then get
    /// the new entries before the first packet).
    pub installed_not_started: bool,
    /// How long before a flow starts its entries go in, ns.
    pub lead_ns: u64,
}

impl Engine {
    /// An engine over `state` (fresh or reloaded). The planner's ledger is
    /// rebuilt from the recorded paths, windows and rates of the live
    /// reservations — what the switches carry — not by planning them again
    /// (a re-plan could choose other paths than the installed ones). Links
    /// recorded down are down again; a reservation still recorded across
    /// one is re-planned (listed in [`Restored::diverged`]).
    /// Each tenant plans within its `shares` of every link (see
    /// [`planner::shares`]; the default is one pool). `jobs` are the
    /// registrations the state records, validated again.
    pub fn new(
        topo: &'static Topology,
        config: PlannerConfig,
        shares: TenantShares,
        state: State,
        jobs: Vec<nt::ValidatedTopology>,
    ) -> anyhow::Result<(Engine, Restored)> {
        let by_ip = topo
            .hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| (h.ip, i as HostIdx))
            .collect();
        let mut engine = Engine {
            topo,
            by_ip,
            host_ports: (0..topo.hosts().len() as HostIdx)
                .map(|h| {
                    let host = &topo.hosts()[h as usize];
                    ((host.leaf, host.port), h)
                })
                .collect(),
            planner: SharedPlanner::new(topo, config, shares),
            state,
            jobs: HashMap::new(),
            reoptimization: Reoptimization::default(),
            steering: None,
            standing_patterns: false,
            pinned_paths: HashMap::new(),
        };
        for t in jobs {
            let job = RegisteredJob::new(t, &engine.by_ip, topo);
            engine.jobs.insert(
                (job.ctx.tenant.clone(), job.job_id.clone()),
                std::sync::Arc::new(job),
            );
        }
        let mut restored = Restored::default();
        for r in &engine.state.reservations {
            for (i, f) in r.flows.iter().enumerate() {
                for (j, h) in f.hops.iter().enumerate() {
                    if topo.switch_by_name(&h.switch).is_none() {
                        anyhow::bail!(
                            "state file: reservations[{}] ({}) flows[{i}].hops[{j}].switch: {:?} is not a switch of fabric {}; \
                             use the topology the state was written with, or move the state file away",
                            r.seq, r.id, h.switch, topo.name()
                        );
                    }
                }
            }
            let flows = engine.ledger_flows(r).map_err(|(i, e)| {
                anyhow::anyhow!(
                    "state file: reservations[{}] ({}) flows[{i}]: {e:#}",
                    r.seq,
                    r.id
                )
            })?;
            restored.reservations += 1;
            // The ledger holds exactly what the switches carry: the
            // recorded paths, not a re-plan (which could choose others).
            engine.planner.restore(&r.tenant, &r.id, &flows);
        }
        // Links that were down stay down; a reservation still recorded on
        // one (a state written by an older controller) is re-planned.
        for (i, l) in engine.state.links_down.clone().iter().enumerate() {
            let (_, edges) = engine
                .resolve_link(&l.a, u32::from(l.a_port))
                .map_err(|e| anyhow::anyhow!("state file: links_down[{i}] ({l}): {e}"))?;
            for e in edges {
                engine.planner.set_edge_down(e, true);
            }
        }
        if !engine.state.links_down.is_empty() {
            restored.diverged = engine.replan_on_links_down()?;
        }
        Ok((engine, restored))
    }

    pub(super) fn to_planner_ns(&self, unix_ns: u64) -> u64 {
        unix_ns.saturating_sub(self.state.epoch_unix_ns)
    }

    pub(super) fn to_unix_ns(&self, planner_ns: u64) -> u64 {
        planner_ns + self.state.epoch_unix_ns
    }

    /// What the ledger holds for `r`: per flow its source NIC, path,
    /// window and reserved bit/s, exactly as recorded (what the switches
    /// carry); a zero placeholder for a flow that reserves nothing, so the
    /// planner's flow indices are the record's. The error names the flow.
    pub(super) fn ledger_flows(
        &self,
        r: &Reservation,
    ) -> Result<Vec<LedgerFlow>, (usize, anyhow::Error)> {
        let mut flows = Vec::with_capacity(r.flows.len());
        for (i, f) in r.flows.iter().enumerate() {
            if !f.status.reserves() || f.accepted_bps == 0 {
                flows.push((0, planner::Path::EMPTY, planner::Window::new(0, 1), 0));
                continue;
            }
            let src = self.host(&f.src).map_err(|e| (i, e))?;
            let path = self.path_of(&f.hops).ok_or_else(|| {
                let fabric = self.topo.name();
                (
                    i,
                    anyhow::anyhow!(
                        "hops: {:?} is not a path of fabric {fabric} to {}",
                        f.hops,
                        f.dst
                    ),
                )
            })?;
            let w = planner::Window::new(
                self.to_planner_ns(f.start_unix_ns),
                self.to_planner_ns(f.end_unix_ns),
            );
            flows.push((src, path, w, f.accepted_bps));
        }
        Ok(flows)
    }

    /// After some of `r`'s flows fell back to ECMP although the plan had
    /// reserved them (nothing could hold them on their path): the ledger
    /// keeps only what the flows still reserved use, so others can have
    /// the rest.
    pub(super) fn reledger(&mut self, r: &Reservation) {
        match self.ledger_flows(r) {
            Ok(flows) => self.planner.restore(&r.tenant, &r.id, &flows),
            Err((i, e)) => {
                tracing::error!(id = %r.id, flow = i, "cannot re-enter the ledger: {e:#}")
            }
        }
    }

    /// Changes the flows of live reservation `seq` with `change`, as a new
    /// revision that says why (`advisory`), and gives the ledger what its
    /// flows now reserve. Returns the record as it now is.
    pub(super) fn revise(
        &mut self,
        seq: u64,
        advisory: String,
        change: impl FnOnce(&mut [crate::daemon::persistence::state_records::FlowRecord]),
    ) -> Reservation {
        let mut r = self.state.reservations.record_mut(seq);
        change(&mut r.flows);
        r.revision += 1;
        r.advisory = Some(advisory);
        let revised = r.clone();
        drop(r);
        self.reledger(&revised);
        revised
    }

    pub(super) fn host(&self, name: &str) -> anyhow::Result<HostIdx> {
        self.topo
            .host_by_name(name)
            .ok_or_else(|| anyhow::anyhow!("host {name} of a reservation is not in the topology"))
    }

    /// The edge a hop leaves its switch by.
    pub fn edge_of(&self, hop: &Hop) -> Option<planner::topology::EdgeId> {
        let s = self.topo.switch_by_name(&hop.switch)?;
        let port = |e: &planner::topology::EdgeId| self.topo.edge(*e).from_port == hop.port;
        if let Some(&e) = self.topo.switch_out_edges(s).iter().find(|e| port(e)) {
            return Some(e);
        }
        let h = *self.host_ports.get(&(s, hop.port))?;
        Some(self.topo.host_down_edge(h))
    }

    /// The planner path of recorded hops, if they form one.
    pub(super) fn path_of(&self, hops: &[Hop]) -> Option<planner::Path> {
        if hops.is_empty() || hops.len() > planner::paths::MAX_PATH_EDGES {
            return None;
        }
        let mut path = planner::Path::EMPTY;
        for h in hops {
            path.push(self.edge_of(h)?);
        }
        Some(path)
    }

    pub(super) fn hops_of(&self, path: &planner::Path) -> Vec<Hop> {
        installer::reservations::path_hops(self.topo, path)
            .into_iter()
            .map(|(s, port)| Hop {
                switch: self.topo.switches()[s as usize].name.clone(),
                port,
            })
            .collect()
    }

    /// The planner demand of a record (for re-planning).
    pub(super) fn demand_of(&self, r: &Reservation) -> anyhow::Result<Demand> {
        let mut flows = Vec::with_capacity(r.flows.len());
        for f in &r.flows {
            flows.push(Flow::with_duration(
                self.topo,
                self.host(&f.src)?,
                self.host(&f.dst)?,
                f.qp,
                self.to_planner_ns(f.requested_start_unix_ns),
                f.bytes,
                f.rate_bps,
                f.duration_ns,
            ));
        }
        let kind = match r.subject {
            Subject::Demand(_) => DemandKind::Transfer,
            Subject::Collective(_) => DemandKind::Collective(CollectiveKind::RingAllreduce),
        };
        Ok(self.demand(r, kind, flows))
    }

    pub(super) fn alloc_qp(&mut self, dst: HostIdx) -> u32 {
        let name = self.topo.hosts()[dst as usize].name.clone();
        let next = self.state.next_qp.entry(name).or_insert(FIRST_QP);
        let q = *next;
        *next = if q >= QP_MASK { FIRST_QP } else { q + 1 };
        q
    }

    pub(super) fn next_id(&mut self, subject: &str) -> (String, u64) {
        let seq = self.state.next_seq;
        self.state.next_seq += 1;
        (format!("r{seq}/{subject}"), seq)
    }

    /// The live reservation of `tenant` answering `subject` (its seq).
    pub(super) fn live_seq(&self, tenant: &str, subject: &Subject) -> Option<u64> {
        self.state.reservations.answering(tenant, subject)
    }

    /// Live reservations of `tenant`.
    pub fn live_count(&self, tenant: &str) -> usize {
        self.state.reservations.count_of(tenant)
    }

    /// The next moment the desired switch state changes (an install, an
    /// expiry), after `now`. Flows held by a source port install nothing
    /// but their INT watch where a collector takes reports (`desired`);
    /// they count too.
    pub fn next_event(&self, now: u64, lead_ns: u64) -> Option<u64> {
        self.state.reservations.next_event(now, lead_ns)
    }

    /// Reserved rate on each directed link at `now` (planner ledger).
    pub fn reserved_now(&self, now: u64) -> Vec<(planner::topology::EdgeId, u64)> {
        let t = self.to_planner_ns(now);
        (0..self.topo.edge_count() as u32)
            .map(|e| (e, self.planner.reserved_at(e, t)))
            .filter(|(_, b)| *b > 0)
            .collect()
    }

    /// The tenant's reservations (live, then finished), optionally of one job.
    pub fn list(&self, tenant: &str, job: Option<&str>) -> Vec<&Reservation> {
        self.state
            .reservations
            .iter()
            .chain(self.state.history.iter())
            .filter(|r| r.tenant == tenant && job.is_none_or(|j| r.job_id.as_deref() == Some(j)))
            .collect()
    }
}

/// A reservation record as the NDSP domain type (for encoding).
pub fn to_ndsp(r: &Reservation) -> nt::ValidatedReservation {
    let reserves = |s: Status| s.reserves();
    let flows: Vec<nt::FlowReservation> = r
        .flows
        .iter()
        .map(|f| nt::FlowReservation {
            flow_id: f.flow_id.clone(),
            source_address: f.src_ip,
            destination_address: f.dst_ip,
            source_rank: f.src_rank,
            destination_rank: f.dst_rank,
            dest_qp: f.steer_qp.then_some(f.qp),
            status: f.status.into(),
            reason: f.reason.into(),
            requested_bps: f.rate_bps,
            accepted_bps: f.accepted_bps,
            start_unix_ns: f.start_unix_ns,
            end_unix_ns: f.end_unix_ns,
            sr_label_stack: if reserves(f.status) {
                f.labels.to_vec()
            } else {
                Vec::new()
            },
            hops: if reserves(f.status) {
                f.hops
                    .iter()
                    .map(|h| nt::PathHop {
                        node: h.switch.clone(),
                        egress_port: u32::from(h.port),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            advisory: None,
            udp_src_port: if reserves(f.status) {
                f.udp_src_port
            } else {
                None
            },
        })
        .collect();
    nt::ValidatedReservation {
        reservation_id: r.id.clone(),
        subject: match &r.subject {
            Subject::Demand(id) => nt::ReservationSubject::Demand(id.clone()),
            Subject::Collective(id) => nt::ReservationSubject::Collective(id.clone()),
        },
        job_id: r.job_id.clone(),
        status: r.status.into(),
        reason: r.reason.into(),
        advisory: r.advisory.clone(),
        start_unix_ns: r.start_unix_ns(),
        end_unix_ns: r.end_unix_ns(),
        flows,
        revision: r.revision,
        predicted: r.predicted,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    /// The static state gives every switch one `hash_seed` default entry
    /// carrying its seed under the policy.
    #[test]
    fn every_switch_is_given_its_hash_seed() {
        use p4rt::proto::p4::v1::table_action::Type;
        use planner::ecmp::SeedPolicy;
        let topo = topo();
        let info = crate::fabric::Pipeline::embedded().unwrap().info;
        let table = info
            .table(installer::names::HASH_SEED)
            .unwrap()
            .preamble
            .as_ref()
            .unwrap()
            .id;
        let state = State::new(topo.name(), T0);
        for seeds in [SeedPolicy::PerSwitch, SeedPolicy::Same(7)] {
            let desired = seeded_compiler(topo, 0, seeds).desired(&state, T0).unwrap();
            assert_eq!(desired.len(), topo.switches().len());
            for (name, r) in &desired {
                let entries: Vec<_> = r.defaults.iter().filter(|t| t.table_id == table).collect();
                assert_eq!(entries.len(), 1, "{name}");
                let Some(Type::Action(a)) =
                    entries[0].action.as_ref().and_then(|a| a.r#type.as_ref())
                else {
                    panic!("{name}: hash_seed default without an action");
                };
                let seed = a.params[0]
                    .value
                    .iter()
                    .fold(0u32, |v, b| (v << 8) | u32::from(*b));
                assert_eq!(seed, seeds.seed(name), "{name} under {seeds}");
            }
        }
    }

    #[test]
    fn a_reloaded_state_keeps_the_recorded_paths_in_the_ledger() {
        let (e, r) = engine_with_one_reservation();
        assert_eq!(r[0].status, Status::Admitted);
        // The switches carry the other spine's path (installed by an
        // earlier run whose ledger differed): what a re-plan would not pick.
        let mut saved: State =
            serde_json::from_str(&serde_json::to_string(&e.state).unwrap()).unwrap();
        let (src, dst) = (
            e.topo.host_by_name("h1").unwrap(),
            e.topo.host_by_name("h3").unwrap(),
        );
        let planned = e.path_of(&saved.reservations.nth(0).flows[0].hops).unwrap();
        let other = planner::paths::all_paths(e.topo, src, dst, 8)
            .into_iter()
            .find(|p| p.edges() != planned.edges())
            .expect("two spines");
        let mut first = saved.reservations.nth_mut(0);
        let f = &mut first.flows[0];
        f.hops = e.hops_of(&other).into();
        f.labels = other.label_stack(e.topo).unwrap().into();
        let recorded = f.hops.clone();
        drop(first);
        let (again, restored) = restart(e.topo, saved);
        assert_eq!(restored.reservations, 1);
        assert!(restored.diverged.is_empty());
        assert_eq!(again.state.reservations.nth(0).flows[0].hops, recorded);
        let reserved: std::collections::BTreeMap<u32, u64> =
            again.reserved_now(T0 + MS).into_iter().collect();
        for edge in other.reserved_edges(e.topo, src) {
            assert_eq!(
                reserved.get(&edge),
                Some(&40_000_000_000),
                "recorded edge {edge}"
            );
        }
        assert_eq!(
            reserved.get(&planned.edges()[0]),
            None,
            "nothing on the path a re-plan would have chosen"
        );
    }

    #[test]
    fn a_reloaded_state_replans_to_the_same_paths() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 16, 0, 200 * MS);
        e.submit_collective(&req.validate().unwrap(), collective_key(&req), T0)
            .unwrap();
        submit(
            &mut e,
            vec![demand(
                "d",
                "10.0.1.2",
                "10.0.2.2",
                0,
                50 * MS,
                40_000_000_000,
                None,
            )],
            T0,
        )
        .unwrap();
        let saved: State = serde_json::from_str(&serde_json::to_string(&e.state).unwrap()).unwrap();
        let (again, restored) = restart(e.topo, saved);
        assert_eq!(restored.reservations, 2);
        assert!(restored.diverged.is_empty(), "{:?}", restored.diverged);
        assert_eq!(again.state.reservations.len(), 2);
        assert_eq!(
            again.reserved_now(T0 + MS),
            e.reserved_now(T0 + MS),
            "same ledger"
        );
    }
}
