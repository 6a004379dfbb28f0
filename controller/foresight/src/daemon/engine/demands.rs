//! Announced demands (`SubmitDemand`) and the iterations learning
//! predicts: a batch is checked whole (known ranks, identical
//! resubmissions, stale announcements, flow counts) before anything is
//! allocated, then planned as one set.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;

use ndsp::types as nt;
use planner::demand::{DemandKind, Flow};

use super::outcome::{FlowMeta, Opening, Pending, Planned, Superseded};
use super::records::{Engine, MAX_FLOWS_PER_RESERVATION};
use super::refusal::{invalid, refuse_stale, Refusal};
use crate::daemon::persistence::state_records::{FlowRecord, Reason, Reservation, Status, Subject};

impl Engine {
    /// Demands of `batch` that are not live already (an identical
    /// resubmission creates nothing).
    pub fn new_demands(&self, batch: &nt::ValidatedDemandBatch) -> usize {
        let tenant = &batch.ctx.tenant;
        batch
            .demands
            .iter()
            .filter(|d| {
                self.live_seq(tenant, &Subject::Demand(d.demand_id.clone()))
                    .is_none()
            })
            .count()
    }

    /// Reserve one iteration the controller predicted for a job (learned
    /// periodic schedules): the demands, with their keys, go through the
    /// same planning as announced ones, and the records are marked
    /// predicted. Ids already live are answered as they are (a prediction
    /// is made once per iteration). A job's iterations follow one another,
    /// so its earlier predictions end where this one begins (they are in
    /// `moved`); the job's own previous window would otherwise hold the
    /// links the next iteration needs.
    pub fn submit_predicted(
        &mut self,
        batch: &nt::ValidatedDemandBatch,
        keys: &[String],
        now: u64,
    ) -> Result<Planned, Refusal> {
        let reference = batch.reference_unix_ns.unwrap_or(now);
        let start = batch
            .demands
            .iter()
            .map(|d| d.start.resolve(reference))
            .min();
        let job = batch.demands.first().and_then(|d| d.job_id.clone());
        let before = match (start, &job) {
            (Some(start), Some(job)) => self.end_predictions_at(&batch.ctx.tenant, job, start),
            _ => Vec::new(),
        };
        let mut planned = match self.plan_demands(batch, keys, now, false) {
            Ok(p) => p,
            Err(refusal) => {
                // Nothing half-applied: the earlier predictions as they were.
                for r in before {
                    self.replace_record(r);
                }
                return Err(refusal);
            }
        };
        let shortened = before
            .iter()
            .filter_map(|r| self.state.find_shared(&r.id).cloned());
        planned.moved.extend(shortened);
        for r in &mut planned.records {
            match self.state.reservations.seq_of(&r.id) {
                Some(seq) => {
                    self.state.reservations.record_mut(seq).predicted = true;
                    *r = self.state.reservations.shared(seq).expect("live").clone();
                }
                None => Arc::make_mut(r).predicted = true,
            }
        }
        Ok(planned)
    }

    /// End `job_id`'s predicted reservations that began before `start` at
    /// `start`, in new revisions. Returns them as they were.
    fn end_predictions_at(&mut self, tenant: &str, job_id: &str, start: u64) -> Vec<Reservation> {
        let earlier: Vec<u64> = self
            .state
            .reservations
            .starting_by(start.saturating_sub(1))
            .filter(|r| {
                r.predicted
                    && !r.cancelled
                    && r.tenant == tenant
                    && r.job_id.as_deref() == Some(job_id)
                    && r.end_unix_ns() > start
                    && r.start_unix_ns() < start
            })
            .map(|r| r.seq)
            .collect();
        let mut before = Vec::new();
        for seq in earlier {
            before.push(self.state.reservations.record(seq).clone());
            let why = "ends where the job's next predicted iteration begins".to_string();
            self.revise(seq, why, |flows| {
                for f in flows {
                    f.end_unix_ns = f.end_unix_ns.min(start.max(f.start_unix_ns));
                }
            });
        }
        before
    }

    /// Put `r` back as it was (same id), in the state and the ledger.
    fn replace_record(&mut self, r: Reservation) {
        if self.state.reservations.seq_of(&r.id) == Some(r.seq) {
            self.state.reservations.insert(r.clone());
            self.reledger(&r);
        }
    }

    /// Cancel a job's predicted reservations that have not ended by `now`.
    pub fn withdraw_predicted(
        &mut self,
        tenant: &str,
        job_id: &str,
        now: u64,
    ) -> Vec<Arc<Reservation>> {
        let seqs: Vec<u64> = self
            .state
            .reservations
            .of_job(tenant, job_id)
            .filter(|r| r.predicted && r.end_unix_ns() > now)
            .map(|r| r.seq)
            .collect();
        let mut out = Vec::new();
        for seq in seqs {
            let id = self.cancel_at(seq);
            out.push(self.state.find_shared(&id).expect("retired").clone());
        }
        out
    }

    /// Plan a batch of announced demands: all are accepted for planning or
    /// none.
    /// `keys` are the demands' idempotency keys, one per demand in order
    /// (an identical resubmission repeats its key).
    pub fn submit_demands(
        &mut self,
        batch: &nt::ValidatedDemandBatch,
        keys: &[String],
        now: u64,
    ) -> Result<Planned, Refusal> {
        self.plan_demands(batch, keys, now, true)
    }

    /// `announced`: by a client (its jobs' predictions give way), not
    /// predicted by learning.
    fn plan_demands(
        &mut self,
        batch: &nt::ValidatedDemandBatch,
        keys: &[String],
        now: u64,
        announced: bool,
    ) -> Result<Planned, Refusal> {
        if keys.len() != batch.demands.len() {
            return Err(Refusal::Internal(format!(
                "{} idempotency keys for {} demands",
                keys.len(),
                batch.demands.len()
            )));
        }
        let tenant = &batch.ctx.tenant;
        batch.check_ranks(|job| {
            self.jobs
                .get(&(tenant.clone(), job.to_string()))
                .map(|t| &t.topology)
        })?;
        let reference = batch.reference_unix_ns.unwrap_or(now);

        // Existing ids first: identical resubmissions answer with the live
        // reservation, different contents are refused; nothing changes yet.
        let mut answers: Vec<Option<Arc<Reservation>>> = vec![None; batch.demands.len()];
        for (i, d) in batch.demands.iter().enumerate() {
            let subject = Subject::Demand(d.demand_id.clone());
            if let Some(seq) = self.live_seq(tenant, &subject) {
                let existing = self.state.reservations.shared(seq).expect("live");
                if existing.request == keys[i] {
                    answers[i] = Some(existing.clone());
                } else {
                    return Err(Refusal::AlreadyExists(format!(
                        "demands[{i}].demand_id: demand {:?} is live (reservation {}) with different contents; cancel it first or use another id",
                        d.demand_id, existing.id
                    )));
                }
            }
        }
        // Stale announcements before anything is allocated.
        for (i, d) in batch.demands.iter().enumerate() {
            if answers[i].is_none() {
                let end = d.start.resolve(reference).saturating_add(d.duration_ns());
                let field = match d.start {
                    nt::TimePoint::OffsetNs(_) => format!("demands[{i}].start_offset_ns"),
                    nt::TimePoint::UnixNs(_) => format!("demands[{i}].start_unix_ns"),
                };
                refuse_stale(&field, end, d.recurrence, now)?;
            }
        }
        // Flow counts before anything is allocated.
        for (i, d) in batch.demands.iter().enumerate() {
            let occurrences = d.recurrence.map_or(1, |r| r.occurrences as usize);
            if answers[i].is_none() && occurrences > MAX_FLOWS_PER_RESERVATION {
                return Err(invalid(
                    format!("demands[{i}].recurrence.occurrences"),
                    format!("{occurrences} occurrences; the controller plans at most {MAX_FLOWS_PER_RESERVATION} flows per reservation"),
                ));
            }
        }

        let announcing: BTreeSet<&str> = batch
            .demands
            .iter()
            .zip(&answers)
            .filter(|(_, a)| announced && a.is_none())
            .filter_map(|(d, _)| d.job_id.as_deref())
            .collect();
        let mut superseded = Vec::new();
        for job in announcing {
            self.supersede_predictions(tenant, job, now, &mut superseded);
        }
        let mut pending = Vec::new();
        let mut fallback = Vec::new();
        for (i, d) in batch.demands.iter().enumerate() {
            if answers[i].is_some() {
                continue;
            }
            match self.demand_pending(tenant, d, keys[i].clone(), reference, now) {
                Ok(p) => pending.push((i, p)),
                Err(record) => fallback.push((i, record)),
            }
        }
        let mut moved = Vec::new();
        let timing = self.plan_pending(&mut pending, Some(now), &mut moved);
        for (i, p) in pending {
            let record = Arc::new(p.record);
            self.state.reservations.insert(record.clone());
            answers[i] = Some(record);
        }
        for (i, r) in fallback {
            let record = Arc::new(*r);
            self.state.reservations.insert(record.clone());
            answers[i] = Some(record);
        }
        Ok(Planned {
            records: answers
                .into_iter()
                .map(|a| a.expect("every demand answered"))
                .collect(),
            moved: self.current(&moved),
            superseded,
            timing,
        })
    }

    /// A demand as a pending reservation, or (unknown endpoint) a final
    /// ECMP-fallback record.
    fn demand_pending(
        &mut self,
        tenant: &str,
        d: &nt::ValidatedDemand,
        key: String,
        reference: u64,
        now: u64,
    ) -> Result<Pending, Box<Reservation>> {
        let job = d
            .job_id
            .as_ref()
            .and_then(|j| self.jobs.get(&(tenant.to_string(), j.clone())));
        let resolve = |e: nt::Endpoint| -> (Ipv4Addr, Option<u32>) {
            match e {
                nt::Endpoint::Host(a) => (a, None),
                nt::Endpoint::Rank(r) => {
                    let ep = job.and_then(|t| t.endpoint(r)).expect("ranks checked");
                    (ep.host_address, Some(r))
                }
            }
        };
        let (src_ip, src_rank) = resolve(d.source);
        let (dst_ip, dst_rank) = resolve(d.destination);
        let start = d.start.resolve(reference).max(now);
        let duration = d.duration_ns();
        let rate = d.rate_bps();
        let occurrences = d.recurrence.map_or(1, |r| r.occurrences as u64);
        let period = d.recurrence.map_or(0, |r| r.period_ns);
        let deadline = d
            .deadline
            .map(|dl| dl.resolve(reference) + period * (occurrences - 1));
        let mut record = self.open_record(Opening {
            tenant,
            subject: Subject::Demand(d.demand_id.clone()),
            job_id: d.job_id.clone(),
            key,
            priority: d.priority,
            elasticity: d.elasticity,
            deadline_unix_ns: deadline,
        });
        let flow_id = |k: u64| {
            if occurrences == 1 {
                d.demand_id.clone()
            } else {
                format!("{}/{k}", d.demand_id)
            }
        };
        let (Some(&src), Some(&dst)) = (self.by_ip.get(&src_ip), self.by_ip.get(&dst_ip)) else {
            let unknown = if self.by_ip.contains_key(&src_ip) {
                dst_ip
            } else {
                src_ip
            };
            record.reason = Reason::UnknownEndpoint;
            record.advisory = Some(format!(
                "host {unknown} is not attached to the fabric; the traffic is routed by ECMP"
            ));
            for k in 0..occurrences {
                let s = start + k * period;
                record.flows.push(FlowRecord {
                    flow_id: flow_id(k),
                    src: src_ip.to_string(),
                    dst: dst_ip.to_string(),
                    src_ip,
                    dst_ip,
                    src_rank,
                    dst_rank,
                    qp: d
                        .dest_qp
                        .or(d.dest_qp_choices.map(|c| c.first_qp))
                        .unwrap_or(0),
                    steer_qp: d.dest_qp.is_some() || d.dest_qp_choices.is_some(),
                    qp_choices: d.dest_qp_choices.map(Into::into),
                    pinned: false,
                    bytes: d.size_bytes,
                    rate_bps: rate,
                    duration_ns: duration,
                    requested_start_unix_ns: s,
                    status: Status::FallbackEcmp,
                    reason: Reason::UnknownEndpoint,
                    accepted_bps: 0,
                    start_unix_ns: s,
                    end_unix_ns: s + duration,
                    labels: Arc::from([]),
                    hops: Arc::from([]),
                    udp_src_port: None,
                });
            }
            return Err(Box::new(record));
        };
        // Given, or the first the client offers (entropy steering may
        // choose another of them), or the controller's own.
        let qp = match (d.dest_qp, d.dest_qp_choices) {
            (Some(q), _) => q,
            (None, Some(c)) => c.first_qp,
            (None, None) => self.alloc_qp(dst),
        };
        let mut flows = Vec::new();
        let mut meta = Vec::new();
        for k in 0..occurrences {
            let s = self.to_planner_ns(start + k * period);
            flows.push(Flow::with_duration(
                self.topo,
                src,
                dst,
                qp,
                s,
                d.size_bytes,
                rate,
                duration,
            ));
            meta.push(FlowMeta {
                flow_id: flow_id(k),
                src_rank,
                dst_rank,
                steer_qp: d.dest_qp.is_some() || d.dest_qp_choices.is_some(),
                qp_choices: d.dest_qp_choices.map(Into::into),
            });
        }
        Ok(self.pending(record, DemandKind::Transfer, flows, meta))
    }

    /// An announcement takes over: the job's predicted reservations that
    /// have not ended are withdrawn before it is planned (they would hold
    /// the capacity it needs), and learning predicts again from it.
    pub(super) fn supersede_predictions(
        &mut self,
        tenant: &str,
        job_id: &str,
        now: u64,
        superseded: &mut Vec<Superseded>,
    ) {
        let withdrawn = self.withdraw_predicted(tenant, job_id, now);
        if !withdrawn.is_empty() {
            superseded.push(Superseded {
                tenant: tenant.to_string(),
                job_id: job_id.to_string(),
                withdrawn,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::daemon::inputs::learning::PredictedDemand;
    use crate::daemon::inputs::requests::predicted_batch;

    /// Job `job`'s predicted iteration `k`: h1 to h3 at 80 Gbit/s for
    /// 50 ms from `start` (rank 0 is on 10.0.1.1, rank 8 on 10.0.2.1).
    fn predicted(
        e: &mut Engine,
        job: &str,
        k: u64,
        start: u64,
        now: u64,
    ) -> Result<Planned, Refusal> {
        let d = PredictedDemand {
            demand_id: format!("t5/{job}/{k}/0"),
            src_rank: 0,
            dst_rank: 8,
            start_unix_ns: start,
            rate_bps: 80_000_000_000,
            size_bytes: 500_000_000,
        };
        let (batch, keys) = predicted_batch("acme", job, &[d]);
        e.submit_predicted(&batch, &keys, now)
    }

    /// Learned windows are the slowest of the latest iterations, so a
    /// prediction can outlast the start of the job's next one. The job's
    /// earlier prediction ends where its next begins, and the next is
    /// reserved on the NIC the job itself held; another job's is not cut.
    #[test]
    fn a_jobs_prediction_ends_where_its_next_iteration_begins() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let other = testkit::requests::register("other", &["10.0.1.1", "10.0.2.1"]);
        e.register(other.validate().unwrap(), recorded_registration(&other));
        let first = predicted(&mut e, "job", 1, T0 + 10 * MS, T0).unwrap();
        assert_eq!(first.records[0].status, Status::Admitted);
        assert_eq!(first.records[0].end_unix_ns(), T0 + 60 * MS);
        // Another job's iteration over the same NIC: only what is left
        // (20 of its 80 Gbit/s), and the job's prediction stays.
        let theirs = predicted(&mut e, "other", 1, T0 + 50 * MS, T0).unwrap();
        let f = &theirs.records[0].flows[0];
        assert!(f.accepted_bps <= 20_000_000_000, "{:?}", f.status);
        assert!(theirs.moved.is_empty());
        // The job's own next iteration: its previous prediction gives way.
        let second = predicted(&mut e, "job", 2, T0 + 50 * MS, T0 + MS).unwrap();
        assert_eq!(second.records[0].status, Status::Admitted);
        assert_eq!(second.moved.len(), 1, "{:?}", second.moved);
        let cut = &second.moved[0];
        assert_eq!(cut.id, first.records[0].id);
        assert_eq!(cut.end_unix_ns(), T0 + 50 * MS);
        assert_eq!(cut.revision, first.records[0].revision + 1);
        assert!(cut
            .advisory
            .as_deref()
            .unwrap()
            .contains("next predicted iteration"));
    }

    #[test]
    fn resubmission_is_idempotent_and_a_changed_demand_is_refused() {
        let mut e = engine();
        let d = demand(
            "d",
            "10.0.1.1",
            "10.0.2.1",
            0,
            10 * MS,
            10_000_000_000,
            Some(500),
        );
        let first = submit(&mut e, vec![d.clone()], T0).unwrap();
        let again = submit(&mut e, vec![d.clone()], T0 + MS).unwrap();
        assert_eq!(first[0].id, again[0].id);
        assert_eq!(e.state.reservations.len(), 1);
        let mut changed = d;
        changed.size_bytes += 1;
        let err = submit(&mut e, vec![changed], T0).unwrap_err();
        assert!(matches!(err, Refusal::AlreadyExists(_)), "{err:?}");
        assert!(
            err.message().starts_with("demands[0].demand_id: "),
            "{}",
            err.message()
        );
    }

    #[test]
    fn stale_announcements_are_refused_and_change_nothing() {
        let mut e = engine();
        let fresh = demand(
            "fresh",
            "10.0.1.1",
            "10.0.2.1",
            0,
            10 * MS,
            10_000_000_000,
            None,
        );
        // Announced for T0, 10 ms long, received a second later.
        let req = proto::SubmitDemandRequest {
            header: header(),
            reference_unix_ns: T0,
            demands: vec![
                demand(
                    "late",
                    "10.0.1.2",
                    "10.0.2.2",
                    0,
                    10 * MS,
                    10_000_000_000,
                    None,
                ),
                fresh.clone(),
            ],
        };
        let batch = req.validate().unwrap();
        let err = e
            .submit_demands(&batch, &demand_keys(&req), T0 + 1_000 * MS)
            .unwrap_err();
        assert!(matches!(err, Refusal::Invalid(_)), "{err:?}");
        assert!(
            err.message().starts_with(
                "demands[0].start_offset_ns: the announced traffic ended 990.000 ms before"
            ),
            "{}",
            err.message()
        );
        assert!(e.state.reservations.is_empty(), "all or nothing");
        // A recurrence whose later occurrences are still ahead is not stale.
        let mut recurring = req.demands[0].clone();
        recurring.recurrence = Some(proto::Recurrence {
            period_ns: 600 * MS,
            occurrences: 3,
        });
        let req = proto::SubmitDemandRequest {
            demands: vec![recurring],
            ..req
        };
        let batch = req.validate().unwrap();
        assert!(e
            .submit_demands(&batch, &demand_keys(&req), T0 + 1_000 * MS)
            .is_ok());
        // A collective whose window ended is refused too.
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 16, 100 * MS, 200 * MS);
        let c = req.validate().unwrap();
        let err = e
            .submit_collective(&c, collective_key(&req), T0 + 500 * MS)
            .unwrap_err();
        assert!(
            err.message()
                .starts_with("collective.start_offset_ns: the announced traffic ended 200.000 ms"),
            "{}",
            err.message()
        );
        assert_eq!(e.state.reservations.len(), 1);
    }

    /// h2 -> h4 "a" at 85 G, which is reserved, and a second 85 G flow
    /// h2 -> h4 "b", which falls back to ECMP, both of class `priority`.
    fn competing_pair(priority: proto::PriorityClass) -> Vec<proto::DemandSignal> {
        ["a", "b"]
            .into_iter()
            .zip([700, 701])
            .map(|(id, qp)| {
                let mut d = demand(
                    id,
                    "10.0.1.2",
                    "10.0.2.2",
                    10 * MS,
                    100 * MS,
                    85_000_000_000,
                    Some(qp),
                );
                d.priority = priority as i32;
                d
            })
            .collect()
    }

    #[test]
    fn competing_fallback_flows_are_predrained_only_on_reserved_ports() {
        let mut e = engine();
        let r = submit(&mut e, competing_pair(proto::PriorityClass::Standard), T0).unwrap();
        assert_eq!(
            (r[0].status, r[1].status),
            (Status::Admitted, Status::FallbackEcmp)
        );
        let mut comp = compiler(e.topo, 5 * MS);
        let predrain = installer::names::PREDRAIN;
        assert_eq!(
            tables(&comp.desired(&e.state, T0).unwrap(), predrain),
            0,
            "before a's install"
        );
        let during = comp.desired(&e.state, T0 + 5 * MS).unwrap();
        let shared = r[1].flows[0]
            .hops
            .iter()
            .filter(|h| r[0].flows[0].hops.contains(h))
            .count();
        assert!(
            shared >= 1,
            "b's ECMP path shares at least h4's port with a"
        );
        assert_eq!(tables(&during, predrain), shared);
        assert_eq!(
            tables(&comp.desired(&e.state, T0 + 110 * MS).unwrap(), predrain),
            0
        );
    }

    /// A commit sends a switch its state only when it changed: every switch
    /// first, then exactly those where the whole intended state differs,
    /// each as the whole state derives it.
    #[test]
    fn a_commit_sends_only_the_switches_a_change_touches() {
        let mut e = engine();
        submit(&mut e, competing_pair(proto::PriorityClass::Standard), T0).unwrap();
        let mut comp = compiler(e.topo, 5 * MS);
        let first = comp.changes(&e.state, T0).unwrap();
        assert_eq!(first.len(), e.topo.switches().len(), "every switch first");
        let mut before = comp.desired(&e.state, T0).unwrap();
        let mut touched_any = false;
        for t in [T0, T0 + 5 * MS, T0 + 5 * MS, T0 + 110 * MS, T0 + 120 * MS] {
            let now = comp.desired(&e.state, t).unwrap();
            let sent = comp.changes(&e.state, t).unwrap();
            let differ: Vec<&String> = now
                .iter()
                .filter(|(n, s)| before[*n].entities != s.entities)
                .map(|(n, _)| n)
                .collect();
            assert_eq!(sent.keys().collect::<Vec<_>>(), differ, "at {t}");
            for (n, s) in &sent {
                assert!(s.whole().entities == now[n].entities, "{n} at {t}");
            }
            touched_any |= !sent.is_empty() && sent.len() < now.len();
            before = now;
        }
        assert!(
            touched_any,
            "the reservation touched some switches, not all"
        );
    }

    /// A reserved background flow keeps its path in the background queue
    /// and clears the way for nothing (no lowered DCQCN profile, no
    /// pre-drain of the flow that fell back); with the background queue
    /// set to the reserved one, it is reserved traffic like any other.
    #[test]
    fn reserved_background_traffic_yields() {
        use p4rt::proto::p4::v1::table_action::Type;
        let mut e = engine();
        let r = submit(&mut e, competing_pair(proto::PriorityClass::Background), T0).unwrap();
        assert_eq!(
            (r[0].status, r[1].status),
            (Status::Admitted, Status::FallbackEcmp)
        );
        let sr_tc = |d: &std::collections::BTreeMap<String, installer::intent::Resolved>| {
            let entries = leaf1_sr_entries(d);
            match entries[0].action.as_ref().and_then(|a| a.r#type.as_ref()) {
                Some(Type::Action(a)) => a.params[0].value.clone(),
                other => panic!("a's SR entry has no action: {other:?}"),
            }
        };
        let during = |comp: &mut Compiler| comp.desired(&e.state, T0 + 20 * MS).unwrap();
        let mut comp = compiler(e.topo, 5 * MS);
        let at_rest = tables(
            &comp.desired(&e.state, T0).unwrap(),
            installer::names::DCQCN_PORT,
        );
        let d = during(&mut comp);
        assert_eq!(sr_tc(&d), vec![1], "the background queue");
        assert_eq!(tables(&d, installer::names::DCQCN_PORT), at_rest);
        assert_eq!(tables(&d, installer::names::PREDRAIN), 0);
        // The background queue is the reserved one: the way is cleared.
        let mut comp = policy_compiler(
            e.topo,
            5 * MS,
            planner::ecmp::SeedPolicy::PerSwitch,
            installer::reservations::RESERVED_TC,
        );
        let d = during(&mut comp);
        assert_eq!(sr_tc(&d), vec![installer::reservations::RESERVED_TC]);
        assert!(tables(&d, installer::names::DCQCN_PORT) > at_rest);
        assert!(tables(&d, installer::names::PREDRAIN) > 0);
    }

    #[test]
    fn the_earlier_reservation_keeps_a_shared_entry_until_it_ends() {
        let mut e = engine();
        let a = demand(
            "a",
            "10.0.1.1",
            "10.0.2.1",
            0,
            100 * MS,
            1_000_000_000,
            Some(900),
        );
        let b = demand(
            "b",
            "10.0.1.1",
            "10.0.2.1",
            50 * MS,
            100 * MS,
            1_000_000_000,
            Some(900),
        );
        let r = submit(&mut e, vec![a, b], T0).unwrap();
        let mut comp = compiler(e.topo, 0);
        let leaf =
            |comp: &mut Compiler, t: u64| leaf1_sr_entries(&comp.desired(&e.state, t).unwrap());
        assert_eq!(leaf(&mut comp, T0 + 60 * MS).len(), 1, "one key, one entry");
        let first = leaf(&mut comp, T0 + 60 * MS);
        let later = leaf(&mut comp, T0 + 120 * MS);
        assert_eq!(later.len(), 1);
        if r[0].flows[0].labels != r[1].flows[0].labels {
            assert_ne!(first[0].action, later[0].action, "b takes over when a ends");
        }
    }
}
