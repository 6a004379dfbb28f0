//! Changes to live reservations: cancellation (of a demand, collective,
//! reservation or whole job), a workload deviation (re-planned), and
//! expiry (retired once every flow window is over).

use std::sync::Arc;

use ndsp::types::{self as nt, CancelTarget, DeviationTarget, WorkloadChange};
use planner::conventions::transfer_ns;
use planner::demand::Flow;

use super::super::outcome::Planned;
use super::super::records::Engine;
use super::super::refusal::Refusal;
use crate::daemon::persistence::state_records::{Pattern, Reason, Reservation, Status, Subject};

impl Engine {
    pub(in crate::daemon::engine) fn cancel_at(&mut self, seq: u64) -> String {
        let mut r = self.state.reservations.record_mut(seq);
        self.planner.release(&r.id);
        r.cancelled = true;
        r.status = Status::Cancelled;
        r.reason = Reason::None;
        r.advisory = None;
        r.revision += 1;
        for f in &mut r.flows {
            f.status = Status::Cancelled;
            f.reason = Reason::None;
            f.accepted_bps = 0;
            f.labels = Arc::from([]);
            f.hops = Arc::from([]);
            f.udp_src_port = None;
        }
        let id = r.id.clone();
        drop(r);
        self.state.retire(seq);
        id
    }

    /// Cancel a demand, collective, reservation or job of the tenant.
    pub fn cancel(&mut self, c: &nt::ValidatedCancel) -> Result<Vec<Arc<Reservation>>, Refusal> {
        let tenant = &c.ctx.tenant;
        let live = &self.state.reservations;
        let matches: Vec<u64> = match &c.target {
            CancelTarget::Demand(id) => live.all_answering(tenant, &Subject::Demand(id.clone())),
            CancelTarget::Collective(id) => {
                live.all_answering(tenant, &Subject::Collective(id.clone()))
            }
            CancelTarget::Reservation(id) => live
                .find(id)
                .filter(|r| &r.tenant == tenant)
                .map(|r| r.seq)
                .into_iter()
                .collect(),
            CancelTarget::Job(id) => live.of_job(tenant, id).map(|r| r.seq).collect(),
        };
        let job_known = match &c.target {
            CancelTarget::Job(id) => self.jobs.contains_key(&(tenant.clone(), id.clone())),
            _ => false,
        };
        if matches.is_empty() && !job_known {
            let (field, what) = match &c.target {
                CancelTarget::Demand(id) => ("demand_id", format!("demand {id:?}")),
                CancelTarget::Collective(id) => ("collective_id", format!("collective {id:?}")),
                CancelTarget::Reservation(id) => ("reservation_id", format!("reservation {id:?}")),
                CancelTarget::Job(id) => ("job_id", format!("job {id:?}")),
            };
            return Err(Refusal::NotFound(format!(
                "{field}: no live {what} of tenant {tenant:?}"
            )));
        }
        let mut out = Vec::new();
        for seq in matches.into_iter().rev() {
            let id = self.cancel_at(seq);
            out.push(self.state.find_shared(&id).expect("retired").clone());
        }
        out.reverse();
        if let CancelTarget::Job(id) = &c.target {
            self.jobs.remove(&(tenant.clone(), id.clone()));
            self.state
                .jobs
                .retain(|j| !(&j.tenant == tenant && &j.job_id == id));
        }
        Ok(out)
    }

    /// Re-plan after a workload deviation.
    pub fn deviation(&mut self, d: &nt::ValidatedDeviation, now: u64) -> Result<Planned, Refusal> {
        let tenant = &d.ctx.tenant;
        let (subject, field) = match &d.target {
            DeviationTarget::Demand(id) => (Subject::Demand(id.clone()), "deviation.demand_id"),
            DeviationTarget::Collective(id) => {
                (Subject::Collective(id.clone()), "deviation.collective_id")
            }
        };
        let Some(seq) = self.live_seq(tenant, &subject) else {
            return Err(Refusal::NotFound(format!(
                "{field}: no live {} {:?} of tenant {tenant:?}",
                subject.kind(),
                subject.id()
            )));
        };
        let reference = d.reference_unix_ns.unwrap_or(now);
        let old = self.state.reservations.record(seq).clone();
        let mut flows = old.flows.clone();
        match &d.change {
            WorkloadChange::Completed { .. } | WorkloadChange::Aborted { .. } => {
                let id = self.cancel_at(seq);
                return Ok(Planned::answered(vec![self
                    .state
                    .find_shared(&id)
                    .expect("retired")
                    .clone()]));
            }
            WorkloadChange::EarlyStart(t) | WorkloadChange::LateStart(t) => {
                let new_start = t.resolve(reference).max(now);
                let old_start = flows
                    .iter()
                    .map(|f| f.requested_start_unix_ns)
                    .min()
                    .unwrap_or(new_start);
                // Every flow moves with the start; the deadline stays (a
                // late start that misses it is rejected by the planner).
                for f in &mut flows {
                    f.requested_start_unix_ns = f.requested_start_unix_ns - old_start + new_start;
                }
            }
            WorkloadChange::SizeChange { new_size_bytes } => {
                let old_total: u128 = flows.iter().map(|f| f.bytes as u128).sum::<u128>().max(1);
                for f in &mut flows {
                    f.bytes =
                        ((f.bytes as u128 * *new_size_bytes as u128) / old_total).max(1) as u64;
                    f.duration_ns = transfer_ns(f.bytes, f.rate_bps).max(1);
                }
            }
        }
        let mut record = old.clone();
        record.flows = flows;
        if let Some(pattern) = self.pattern_of(&old) {
            // A step on its job's pattern moves its booking, not its paths.
            match self.rebook_on_pattern(record, &old, &pattern) {
                Ok(planned) => return Ok(planned),
                Err(back) => record = *back,
            }
        }
        let pending = self
            .replanning(record)
            .map_err(|e| Refusal::Internal(e.to_string()))?;
        self.planner.release(&old.id);
        let mut moved = Vec::new();
        let (mut p, timing) = self.plan_one(pending, None, &mut moved);
        if p.record.status != Status::Admitted && p.record.reason == Reason::None {
            p.record.reason = Reason::WorkloadDeviation;
        }
        let record = Arc::new(p.record);
        self.state.reservations.insert(record.clone());
        Ok(Planned {
            records: vec![record],
            moved: self.current(&moved),
            superseded: Vec::new(),
            timing,
        })
    }

    /// Book `record` (a pinned step with its flows changed) again on its
    /// pattern's paths, as its next revision; when they have no room, its
    /// flows get QPs of their own and it goes back to be planned afresh.
    fn rebook_on_pattern(
        &mut self,
        mut record: Reservation,
        old: &Reservation,
        pattern: &Pattern,
    ) -> Result<Planned, Box<Reservation>> {
        let mut flows = Vec::with_capacity(record.flows.len());
        for f in &record.flows {
            let (Ok(src), Ok(dst)) = (self.host(&f.src), self.host(&f.dst)) else {
                return Err(Box::new(record));
            };
            flows.push(Flow::with_duration(
                self.topo,
                src,
                dst,
                f.qp,
                self.to_planner_ns(f.requested_start_unix_ns),
                f.bytes,
                f.rate_bps,
                f.duration_ns,
            ));
        }
        self.planner.release(&old.id);
        record.revision += 1;
        let ids: Vec<String> = old.flows.iter().map(|f| f.flow_id.clone()).collect();
        match self.admit_on_pattern(record, pattern, &flows, |i| ids[i].clone()) {
            Ok(planned) => Ok(planned),
            Err(back) => {
                let (mut back, _) = *back;
                back.revision -= 1;
                for f in back.flows.iter_mut() {
                    let dst = self.host(&f.dst).expect("checked above");
                    f.qp = self.alloc_qp(dst);
                    f.pinned = false;
                }
                Err(Box::new(back))
            }
        }
    }

    /// Retire reservations whose every flow window is over; returns them.
    pub fn expire(&mut self, now: u64) -> Vec<String> {
        let mut out = Vec::new();
        for seq in self.state.reservations.ended_by(now) {
            let id = self.state.retire(seq).id.clone();
            self.planner.release(&id);
            out.push(id);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::*;

    #[test]
    fn cancel_releases_capacity_and_deviation_replans() {
        let mut e = engine();
        let big = demand(
            "big",
            "10.0.1.1",
            "10.0.2.1",
            0,
            100 * MS,
            85_000_000_000,
            Some(500),
        );
        let r = submit(&mut e, vec![big.clone()], T0).unwrap();
        assert_eq!(r[0].status, Status::Admitted);
        let other = demand(
            "other",
            "10.0.1.1",
            "10.0.2.2",
            0,
            100 * MS,
            85_000_000_000,
            Some(501),
        );
        let r2 = submit(&mut e, vec![other.clone()], T0).unwrap();
        assert_eq!(r2[0].status, Status::FallbackEcmp, "h1's NIC is full");
        wire(&r2[0]);
        let cancel = proto::CancelRequest {
            header: header(),
            target: Some(proto::cancel_request::Target::DemandId("big".into())),
        };
        let out = e.cancel(&cancel.validate().unwrap()).unwrap();
        assert_eq!(out[0].status, Status::Cancelled);
        wire(&out[0]);
        assert!(
            e.cancel(&cancel.validate().unwrap()).is_err(),
            "already cancelled"
        );
        // The capacity is free again: a late start of `other` now fits.
        let dev = proto::ReportDeviationRequest {
            header: header(),
            reference_unix_ns: T0,
            deviation: Some(proto::WorkloadDeviation {
                target: Some(proto::workload_deviation::Target::DemandId("other".into())),
                change: Some(proto::workload_deviation::Change::LateStart(
                    proto::StartChange {
                        start: Some(proto::start_change::Start::StartOffsetNs(50 * MS)),
                    },
                )),
                observed_unix_ns: 0,
            }),
        };
        let updated = e.deviation(&dev.validate().unwrap(), T0).unwrap().records;
        let u = &updated[0];
        assert_eq!(u.status, Status::Admitted);
        assert_eq!(u.revision, 2);
        assert_eq!(u.start_unix_ns(), T0 + 50 * MS);
        wire(u);
    }
}
