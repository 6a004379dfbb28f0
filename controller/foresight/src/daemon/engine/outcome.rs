//! From a plan to records: pending reservations are planned as one set,
//! each flow's outcome (admitted, deferred, partial, ECMP fallback) and
//! the reason become the record's, and earlier reservations the planner
//! moved to make room get new paths and an advisory saying why.

use std::sync::Arc;
use std::time::Instant;

use ndsp::types as nt;
use planner::admission::{DemandPlan, Outcome, Reason as PlanReason};
use planner::demand::{Demand, DemandKind, Flow};

use super::records::Engine;
use super::steering::Hold;
use crate::daemon::persistence::state_records::{
    FlowRecord, Hop, Lifecycle, QpChoices, Reason, Reservation, Status, Subject,
};

/// Planner priority of each NDSP priority class (higher is planned first).
fn planner_priority(p: nt::Priority) -> u8 {
    match p {
        nt::Priority::Background => crate::daemon::southbound::desired::BACKGROUND_PRIORITY,
        nt::Priority::Standard => 64,
        nt::Priority::IterationBlocking => 128,
        nt::Priority::LatencyCritical => 192,
    }
}

/// What a planning call took, for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanTiming {
    pub planner_secs: f64,
}

/// What one request did, in one value: the records it answers with, the
/// earlier reservations moved to make room for it (as they are now), and
/// the predictions its announcement took over.
#[derive(Debug, Clone, Default)]
pub struct Planned {
    pub records: Vec<Arc<Reservation>>,
    pub moved: Vec<Arc<Reservation>>,
    pub superseded: Vec<Superseded>,
    pub timing: PlanTiming,
}

impl Planned {
    /// Records answered without planning (a resubmission, a record that
    /// could not be planned): nothing else changed.
    pub(super) fn answered(records: Vec<Arc<Reservation>>) -> Planned {
        Planned {
            records,
            ..Planned::default()
        }
    }
}

/// A job's predicted reservations withdrawn because the job announced.
#[derive(Debug, Clone)]
pub struct Superseded {
    pub tenant: String,
    pub job_id: String,
    pub withdrawn: Vec<Arc<Reservation>>,
}

/// What a new reservation record is opened from: a demand's or a
/// collective's fields.
pub(super) struct Opening<'a> {
    pub(super) tenant: &'a str,
    pub(super) subject: Subject,
    pub(super) job_id: Option<String>,
    /// The request's idempotency key, kept to tell an identical
    /// resubmission from a changed one.
    pub(super) key: String,
    pub(super) priority: nt::Priority,
    pub(super) elasticity: nt::Elasticity,
    pub(super) deadline_unix_ns: Option<u64>,
}

/// Flow metadata kept beside a planner flow until the record is built.
pub(super) struct FlowMeta {
    pub(super) flow_id: String,
    pub(super) src_rank: Option<u32>,
    pub(super) dst_rank: Option<u32>,
    pub(super) steer_qp: bool,
    /// The destination QPs the controller may choose among.
    pub(super) qp_choices: Option<QpChoices>,
}

impl FlowMeta {
    /// The metadata of a recorded flow (for re-planning it).
    pub(super) fn of(f: &FlowRecord) -> FlowMeta {
        FlowMeta {
            flow_id: f.flow_id.clone(),
            src_rank: f.src_rank,
            dst_rank: f.dst_rank,
            steer_qp: f.steer_qp,
            qp_choices: f.qp_choices,
        }
    }
}

/// A reservation about to be planned.
pub(super) struct Pending {
    pub(super) record: Reservation,
    pub(super) demand: Demand,
    pub(super) meta: Vec<FlowMeta>,
}

impl Engine {
    /// Open a new record: the next id and sequence number, revision 1, no
    /// flows yet. It reads as ECMP fallback until planning fills it in.
    pub(super) fn open_record(&mut self, o: Opening) -> Reservation {
        let (id, seq) = self.next_id(o.subject.id());
        Reservation {
            id,
            seq,
            tenant: o.tenant.to_string(),
            subject: o.subject,
            job_id: o.job_id,
            request: o.key,
            priority: planner_priority(o.priority),
            elastic: o.elasticity == nt::Elasticity::Elastic,
            deadline_unix_ns: o.deadline_unix_ns,
            status: Status::FallbackEcmp,
            reason: Reason::None,
            advisory: None,
            revision: 1,
            flows: Vec::new(),
            cancelled: false,
            predicted: false,
        }
    }

    /// The planner demand of `record` with `flows`: its id, tenant,
    /// priority, elasticity and deadline.
    pub(super) fn demand(
        &self,
        record: &Reservation,
        kind: DemandKind,
        flows: Vec<Flow>,
    ) -> Demand {
        Demand {
            id: record.id.clone(),
            tenant: record.tenant.clone(),
            priority: record.priority,
            elastic: record.elastic,
            deadline_ns: record.deadline_unix_ns.map(|d| self.to_planner_ns(d)),
            kind,
            flows,
        }
    }

    /// `record` and its flows, ready to plan.
    pub(super) fn pending(
        &self,
        record: Reservation,
        kind: DemandKind,
        flows: Vec<Flow>,
        meta: Vec<FlowMeta>,
    ) -> Pending {
        let demand = self.demand(&record, kind, flows);
        Pending {
            record,
            demand,
            meta,
        }
    }

    /// `record` (its flows as recorded, maybe changed) ready to plan
    /// again, as its next revision. Release its old reservation before
    /// planning it.
    pub(super) fn replanning(&self, mut record: Reservation) -> anyhow::Result<Pending> {
        let demand = self.demand_of(&record)?;
        let meta = record.flows.iter().map(FlowMeta::of).collect();
        record.revision += 1;
        Ok(Pending {
            record,
            demand,
            meta,
        })
    }

    /// Plan pending reservations together and fill in their outcomes.
    /// Plans a single demand (a new collective, or a re-plan after a
    /// deviation) through the same path as a batch.
    pub(super) fn plan_one(
        &mut self,
        pending: Pending,
        now: Option<u64>,
        moved: &mut Vec<String>,
    ) -> (Pending, PlanTiming) {
        let mut batch = [(0, pending)];
        let timing = self.plan_pending(&mut batch, now, moved);
        let [(_, p)] = batch;
        (p, timing)
    }

    /// Plans the pending reservations as one set. With `now`, the
    /// reservations `Engine::reoptimization` allows may move for them;
    /// their ids are added to `moved`.
    pub(super) fn plan_pending(
        &mut self,
        pending: &mut [(usize, Pending)],
        now: Option<u64>,
        moved: &mut Vec<String>,
    ) -> PlanTiming {
        if pending.is_empty() {
            return PlanTiming::default();
        }
        let demands: Vec<Demand> = pending.iter().map(|(_, p)| p.demand.clone()).collect();
        let during = (
            self.to_unix_ns(demands.iter().map(Demand::start_ns).min().unwrap_or(0)),
            self.to_unix_ns(demands.iter().map(Demand::end_ns).max().unwrap_or(0)),
        );
        let movable = now.map_or_else(Vec::new, |n| self.movable(n, during));
        let movable: Vec<&str> = movable.iter().map(String::as_str).collect();
        let t0 = Instant::now();
        let plan = self.planner.plan_moving(&demands, &movable);
        let planner_secs = t0.elapsed().as_secs_f64();
        for (dp, (_, p)) in plan.demands.iter().zip(pending.iter_mut()) {
            self.fill_outcome(&mut p.record, &p.demand, dp, &p.meta);
            let unheld = dp
                .flows
                .iter()
                .zip(&p.record.flows)
                .any(|(fp, f)| fp.reserved_bps > 0 && f.status == Status::FallbackEcmp);
            if unheld {
                self.reledger(&p.record);
            }
        }
        self.apply_moves(&plan.moved, moved);
        PlanTiming { planner_secs }
    }

    /// Live reservations that may move at `now` (see `Reoptimization`):
    /// every flow reserved in full, and nothing installed yet (or, if
    /// allowed, installed but not started); only those whose windows
    /// overlap `during` (Unix ns, end exclusive), where the capacity in
    /// question is: moving others cannot make room there, and looking
    /// only there keeps planning's cost off what is held for later.
    fn movable(&self, now: u64, during: (u64, u64)) -> Vec<String> {
        let policy = self.reoptimization;
        if !policy.pending || during.1 <= during.0 {
            return Vec::new();
        }
        self.state
            .reservations
            .starting_by(during.1 - 1)
            .filter(|r| r.end_unix_ns() > during.0)
            .filter(|r| {
                r.flows
                    .iter()
                    .all(|f| matches!(f.status, Status::Admitted | Status::Deferred) && !f.pinned)
            })
            .filter(|r| match r.lifecycle(now, policy.lead_ns) {
                Lifecycle::Scheduled => true,
                Lifecycle::Installed => policy.installed_not_started && now < r.start_unix_ns(),
                _ => false,
            })
            .map(|r| r.id.clone())
            .collect()
    }

    /// Writes the planner's moves into the reservation records (hops and
    /// labels of the moved flows, a new revision, an advisory saying what
    /// moved and why) and adds their ids to `moved` (once each).
    fn apply_moves(&mut self, planned: &[planner::admission::Moved], moved: &mut Vec<String>) {
        for m in planned {
            let Some(seq) = self.state.reservations.seq_of(&m.id) else {
                continue;
            };
            let record = self.state.reservations.record(seq);
            let paths: Vec<(usize, Vec<Hop>, Hold)> = m
                .flows
                .iter()
                .filter_map(|f| {
                    let flow = record.flows.get(f.index)?;
                    let hold = self.hold_record(flow, &f.to);
                    let hops = match hold {
                        // Moved where nothing holds it: where ECMP sends it.
                        Hold::Cannot(_) => self.ecmp_hops(&FlowRecord {
                            udp_src_port: None,
                            ..flow.clone()
                        })?,
                        _ => self.hops_of(&f.to),
                    };
                    Some((f.index, hops, hold))
                })
                .collect();
            let mut r = self.state.reservations.record_mut(seq);
            let mut lost = None;
            for (i, hops, hold) in paths {
                let f = &mut r.flows[i];
                f.hops = hops.into();
                if let Hold::Cannot(reason) = hold {
                    // Moved where neither labels nor a port hold it: ECMP.
                    f.status = Status::FallbackEcmp;
                    f.reason = reason;
                    f.accepted_bps = 0;
                    lost = Some(reason);
                }
                hold.write_to(f);
            }
            let settled = lost.map(|reason| {
                super::steering::settle_after_loss(&mut r, reason);
                r.clone()
            });
            drop(r);
            if let Some(settled) = settled {
                self.reledger(&settled);
            }
            let mut r = self.state.reservations.record_mut(seq);
            r.revision += 1;
            let why: Vec<String> = m.causes.iter().map(|c| c.to_string()).collect();
            r.advisory = Some(truncate(
                format!(
                    "re-optimized before installation: {} of {} flows moved to other paths ({}); windows and rates unchanged",
                    m.flows.len(),
                    r.flows.len(),
                    why.join("; ")
                ),
                1000,
            ));
            if !moved.contains(&m.id) {
                moved.push(m.id.clone());
            }
        }
    }

    /// The live reservations of `ids`, as they are now (a reservation
    /// moved, then re-planned, is told once, as it ended up).
    pub(super) fn current(&self, ids: &[String]) -> Vec<Arc<Reservation>> {
        ids.iter()
            .filter_map(|id| self.state.reservations.find_shared(id).cloned())
            .collect()
    }

    /// After a cancellation: re-places the reservations that may move when
    /// that lowers their peak; returns those that moved, as they are now.
    /// `freed` are the reservations that gave their capacity back: only
    /// what overlaps their windows may move.
    pub fn reoptimize_pending(
        &mut self,
        now: u64,
        freed: &[Arc<Reservation>],
    ) -> Vec<Arc<Reservation>> {
        let during = (
            freed.iter().map(|r| r.start_unix_ns()).min().unwrap_or(0),
            freed.iter().map(|r| r.end_unix_ns()).max().unwrap_or(0),
        );
        let movable = self.movable(now, during);
        if movable.is_empty() {
            return Vec::new();
        }
        let ids: Vec<&str> = movable.iter().map(String::as_str).collect();
        let planned = self.planner.reoptimize(&ids);
        let mut moved = Vec::new();
        self.apply_moves(&planned, &mut moved);
        self.current(&moved)
    }

    fn fill_outcome(
        &self,
        record: &mut Reservation,
        demand: &Demand,
        dp: &DemandPlan,
        meta: &[FlowMeta],
    ) {
        let (plan_reason, advisory) = match &dp.outcome {
            Outcome::Admitted => (Reason::None, None),
            Outcome::Deferred {
                requested_start_ns,
                start_ns,
            } => (
                Reason::InsufficientCapacity,
                Some(format!(
                    "deferred by {:.3} ms: capacity is reserved by others at the requested start",
                    (start_ns - requested_start_ns) as f64 / 1e6
                )),
            ),
            Outcome::Partial { reason, .. } | Outcome::Rejected { reason } => (
                reason_code(reason),
                Some(truncate(reason.to_string(), 1000)),
            ),
        };
        // Under shares, "free" and "reserved by others" are the tenant's slice.
        let advisory = advisory.map(|a| match self.planner.shares().describe(&demand.tenant) {
            Some(slice) => truncate(format!("{a} ({slice})"), 1000),
            None => a,
        });
        record.flows.clear();
        for ((flow, fp), m) in demand.flows.iter().zip(&dp.flows).zip(meta) {
            let mut hops = self.hops_of(&fp.path);
            let hold = if fp.reserved_bps > 0 {
                self.hold(flow, m.steer_qp, m.qp_choices, &fp.path)
            } else {
                Hold::Cannot(plan_reason_or(plan_reason))
            };
            if fp.reserved_bps > 0 && matches!(hold, Hold::Cannot(_)) {
                // Reserved, but nothing holds it there: it goes where ECMP
                // sends it.
                hops = self.hops_of(&self.planner.ecmp_path_of(flow));
            }
            let (status, reason, accepted, hold) = match (fp.reserved_bps, hold) {
                (_, Hold::Cannot(reason)) => {
                    (Status::FallbackEcmp, reason, 0, Hold::Cannot(reason))
                }
                (r, h) if r >= flow.rate_bps && dp.shift_ns > 0 => (
                    Status::Deferred,
                    Reason::InsufficientCapacity,
                    flow.rate_bps,
                    h,
                ),
                (r, h) if r >= flow.rate_bps => (Status::Admitted, Reason::None, flow.rate_bps, h),
                (r, h) => (Status::Partial, plan_reason_or(plan_reason), r, h),
            };
            let qp = hold.qp().unwrap_or(flow.dest_qp);
            let (labels, udp_src_port) = hold.parts();
            let start = self.to_unix_ns(fp.start_ns);
            record.flows.push(FlowRecord {
                flow_id: m.flow_id.clone(),
                src: self.topo.hosts()[flow.src as usize].name.clone(),
                dst: self.topo.hosts()[flow.dst as usize].name.clone(),
                src_ip: flow.src_ip,
                dst_ip: flow.dst_ip,
                src_rank: m.src_rank,
                dst_rank: m.dst_rank,
                qp,
                steer_qp: m.steer_qp,
                bytes: flow.bytes,
                rate_bps: flow.rate_bps,
                duration_ns: flow.duration_ns,
                requested_start_unix_ns: self.to_unix_ns(flow.start_ns),
                status,
                reason,
                accepted_bps: accepted,
                start_unix_ns: start,
                end_unix_ns: start + flow.duration_ns,
                labels: labels.into(),
                hops: hops.into(),
                udp_src_port,
                qp_choices: m.qp_choices,
                pinned: false,
            });
        }
        let all = |s: Status| record.flows.iter().all(|f| f.status == s);
        let any_reserved = record.flows.iter().any(|f| f.status.reserves());
        let (status, reason) = if all(Status::Admitted) {
            (Status::Admitted, Reason::None)
        } else if record
            .flows
            .iter()
            .all(|f| matches!(f.status, Status::Admitted | Status::Deferred))
        {
            (Status::Deferred, Reason::InsufficientCapacity)
        } else if any_reserved {
            let r = record
                .flows
                .iter()
                .map(|f| f.reason)
                .find(|r| *r != Reason::None);
            (Status::Partial, r.unwrap_or(Reason::InsufficientCapacity))
        } else if plan_reason == Reason::DeadlineUnmeetable {
            (Status::Rejected, Reason::DeadlineUnmeetable)
        } else {
            let r = record
                .flows
                .iter()
                .map(|f| f.reason)
                .find(|r| *r != Reason::None);
            (
                Status::FallbackEcmp,
                r.unwrap_or(Reason::InsufficientCapacity),
            )
        };
        record.status = status;
        record.reason = reason;
        record.advisory = match status {
            Status::Admitted => None,
            _ => Some(advisory.unwrap_or_else(|| {
                let stuck = record.flows.iter().filter(|f| !f.status.reserves()).count();
                format!("{stuck} of {} flows fall back to ECMP", record.flows.len())
            })),
        };
    }
}

fn plan_reason_or(r: Reason) -> Reason {
    if r == Reason::None {
        Reason::InsufficientCapacity
    } else {
        r
    }
}

fn reason_code(r: &PlanReason) -> Reason {
    match r {
        PlanReason::Bottleneck { .. } | PlanReason::ExceedsNic { .. } => {
            Reason::InsufficientCapacity
        }
        PlanReason::DeadlineBeforeCompletion { .. } => Reason::DeadlineUnmeetable,
        PlanReason::NoStartBeforeDeadline {
            deadline_ns,
            blocked_by,
            ..
        } => {
            if deadline_ns.is_some() {
                Reason::DeadlineUnmeetable
            } else {
                reason_code(blocked_by)
            }
        }
        PlanReason::DoesNotFit { blocked_by } => reason_code(blocked_by),
    }
}

pub(super) fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    const G: u64 = 1_000_000_000;

    /// 2 leaves x 5 hosts, 2 spines, 100G: room for three cross-leaf
    /// transfers on distinct NICs.
    fn wide_engine(reoptimization: Reoptimization) -> Engine {
        let spec =
            planner::topology::generate::leaf_spine(&planner::topology::generate::LeafSpine {
                hosts_per_leaf: 5,
                ..Default::default()
            })
            .unwrap();
        let topo: &'static Topology = Box::leak(Box::new(Topology::from_spec(spec).unwrap()));
        let mut e = restart(topo, State::new(topo.name(), T0)).0;
        e.reoptimization = reoptimization;
        e
    }

    fn ip(e: &Engine, host: usize) -> String {
        e.topo.hosts()[host].ip.to_string()
    }

    /// x and y (45G) planned together sit on different spines; z (50G,
    /// same window) fits only with x and y on one spine (90 = headroom).
    /// Returns x and y, z, and what moved for z.
    fn x_y_then_z(e: &mut Engine, now_z: u64) -> (Vec<Reservation>, Reservation, Vec<Reservation>) {
        let (h1, h2, h3, h6, h7, h8) = (ip(e, 0), ip(e, 1), ip(e, 2), ip(e, 5), ip(e, 6), ip(e, 7));
        let first = submit(
            e,
            vec![
                demand("x", &h1, &h6, 100 * MS, 10 * MS, 45 * G, None),
                demand("y", &h2, &h7, 100 * MS, 10 * MS, 45 * G, None),
            ],
            T0,
        )
        .unwrap();
        assert_ne!(first[0].flows[0].hops[0], first[1].flows[0].hops[0]);
        let start = T0 + 100 * MS - now_z;
        let mut z = submit_planned(
            e,
            vec![demand("z", &h3, &h8, start, 10 * MS, 50 * G, None)],
            now_z,
        )
        .unwrap();
        (
            first,
            std::sync::Arc::unwrap_or_clone(z.records.remove(0)),
            owned(z.moved),
        )
    }

    #[test]
    fn pending_reservations_move_to_admit_a_new_demand_and_say_so() {
        let lead = 10 * MS;
        let mut e = wide_engine(Reoptimization {
            pending: true,
            installed_not_started: false,
            lead_ns: lead,
        });
        let (first, z, moved) = x_y_then_z(&mut e, T0 + MS);
        assert_eq!(z.status, Status::Admitted, "{:?}", z.advisory);
        assert_eq!(moved.len(), 1);
        let m = &moved[0];
        let before = first.iter().find(|r| r.id == m.id).unwrap();
        assert_eq!(m.revision, before.revision + 1);
        assert_ne!(m.flows[0].hops, before.flows[0].hops);
        assert_eq!(m.flows[0].start_unix_ns, before.flows[0].start_unix_ns);
        assert_eq!(m.flows[0].accepted_bps, before.flows[0].accepted_bps);
        let advisory = m.advisory.as_deref().unwrap();
        assert!(
            advisory.contains("moved to admit") && advisory.contains(&z.id),
            "{advisory}"
        );
        // The state holds the moved record; it is reported once (a
        // resubmission of z moves nothing again).
        assert_eq!(
            e.state
                .reservations
                .iter()
                .find(|r| r.id == m.id)
                .unwrap()
                .flows[0]
                .hops,
            m.flows[0].hops
        );
        let h = |i| ip(&e, i);
        let z_again = demand("z", &h(2), &h(7), 99 * MS, 10 * MS, 50 * G, None);
        assert!(submit_planned(&mut e, vec![z_again], T0 + MS)
            .unwrap()
            .moved
            .is_empty());
        // x, y and z now share the two spines 90 / 50: the ledger agrees
        // with the records (restart rebuilds the same reservations).
        let mut reserved = e.reserved_now(T0 + 105 * MS);
        reserved.sort();
        let (again, _) = restart(e.topo, e.state.clone());
        let mut restored = again.reserved_now(T0 + 105 * MS);
        restored.sort();
        assert_eq!(reserved, restored);
    }

    #[test]
    fn nothing_moves_when_off_or_once_installed() {
        let lead = 10 * MS;
        // Off: z gets what is left.
        let mut off = wide_engine(Reoptimization::default());
        let (_, z, moved) = x_y_then_z(&mut off, T0 + MS);
        assert_eq!(z.status, Status::Partial);
        assert!(moved.is_empty());
        // Pending only, but x and y are installed (past their install
        // time, before their start): they stay.
        let pending = Reoptimization {
            pending: true,
            installed_not_started: false,
            lead_ns: lead,
        };
        let mut installed = wide_engine(pending);
        let (_, z, moved) = x_y_then_z(&mut installed, T0 + 95 * MS);
        assert_eq!(z.status, Status::Partial);
        assert!(moved.is_empty());
        // Allowed to move installed-but-not-started ones: z is admitted.
        let mut not_started = wide_engine(Reoptimization {
            installed_not_started: true,
            ..pending
        });
        let (_, z, moved) = x_y_then_z(&mut not_started, T0 + 95 * MS);
        assert_eq!(z.status, Status::Admitted);
        assert_eq!(moved.len(), 1);
    }

    /// Five transfers leaf1 -> leaf2 (30, 30, 20, 20, 20G) planned as one
    /// batch sit 60 / 60 on the spines; cancelling a 20G one leaves 60 / 40
    /// until the pending reservations are re-placed: a 30G and a 20G one
    /// swap spines, 50 / 50.
    #[test]
    fn a_cancellation_lets_pending_reservations_spread_out() {
        let mut e = wide_engine(Reoptimization {
            pending: true,
            installed_not_started: false,
            lead_ns: 10 * MS,
        });
        let rates = [("a", 30), ("b", 30), ("c", 20), ("d", 20), ("f", 20)];
        let signals: Vec<proto::DemandSignal> = rates
            .iter()
            .enumerate()
            .map(|(i, (id, g))| {
                let (src, dst) = (ip(&e, i), ip(&e, 5 + i));
                demand(id, &src, &dst, 100 * MS, 10 * MS, g * G, None)
            })
            .collect();
        let planned = submit(&mut e, signals, T0).unwrap();
        assert!(planned.iter().all(|r| r.status == Status::Admitted));
        let peak = |e: &Engine| {
            e.reserved_now(T0 + 105 * MS)
                .iter()
                .filter(|(edge, _)| {
                    matches!(
                        (e.topo.edge(*edge).from, e.topo.edge(*edge).to),
                        (
                            planner::topology::NodeRef::Switch(_),
                            planner::topology::NodeRef::Switch(_)
                        )
                    )
                })
                .map(|(_, bps)| *bps)
                .max()
                .unwrap()
        };
        assert_eq!(peak(&e), 60 * G);
        let cancel = proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::DemandId("f".into())),
        };
        let cancelled = e.cancel(&cancel.validate().unwrap()).unwrap();
        assert_eq!(peak(&e), 60 * G, "cancelling alone moves nothing");
        let moved = e.reoptimize_pending(T0 + MS, &cancelled);
        assert_eq!(moved.len(), 2);
        assert_eq!(peak(&e), 50 * G);
        for m in &moved {
            let advisory = m.advisory.as_deref().unwrap();
            assert!(
                advisory.contains("lower the peak utilisation from 0.6000 to 0.5000"),
                "{advisory}"
            );
        }
        // Once installed, nothing moves any more.
        let again = e.reoptimize_pending(T0 + 95 * MS, &cancelled);
        assert_eq!(again.len(), 0);
    }
}
