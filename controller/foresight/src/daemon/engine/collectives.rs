//! Collectives (`SubmitCollective`): a job's ranks become whole servers,
//! the planner's collective model expands them into flows, and the flows
//! are planned as one reservation.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ndsp::types as nt;
use planner::collectives::{self, Collective, CollectiveKind};
use planner::conventions::transfer_ns;
use planner::demand::{DemandKind, Flow};
use planner::topology::HostIdx;

use super::outcome::{FlowMeta, Opening, Planned};
use super::patterns::shape_of;
use super::records::{Engine, MAX_FLOWS_PER_RESERVATION};
use super::refusal::{invalid, refuse_stale, Refusal};
use crate::daemon::persistence::state_records::{Pattern, Reason, Status, Subject};

impl Engine {
    /// Expand and plan a collective over whole servers of the fabric.
    /// `key` is its idempotency key (an identical resubmission repeats it).
    pub fn submit_collective(
        &mut self,
        c: &nt::ValidatedCollective,
        key: String,
        now: u64,
    ) -> Result<Planned, Refusal> {
        let tenant = c.ctx.tenant.clone();
        let job = self
            .jobs
            .get(&(tenant.clone(), c.job_id.clone()))
            .cloned()
            .ok_or_else(|| {
                invalid(
                    "collective.job_id",
                    format!(
                        "job {:?} has no registered topology; call RegisterTopology first",
                        c.job_id
                    ),
                )
            })?;
        c.check_ranks(&job)?;
        let subject = Subject::Collective(c.collective_id.clone());
        if let Some(seq) = self.live_seq(&tenant, &subject) {
            let existing = self.state.reservations.shared(seq).expect("live");
            if existing.request == key {
                return Ok(Planned::answered(vec![existing.clone()]));
            }
            return Err(Refusal::AlreadyExists(format!(
                "collective.collective_id: collective {:?} is live (reservation {}) with different contents; cancel it first or use another id",
                c.collective_id, existing.id
            )));
        }

        // Ranks -> hosts -> whole servers, in rank order: runs of ranks on
        // one server, each server's run once and whole.
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut done: HashSet<u32> = HashSet::new();
        let mut unknown = None;
        for (i, &r) in c.ranks.iter().chain(&c.peer_ranks).enumerate() {
            let Some(server) = job.server_of(r).expect("ranks checked") else {
                unknown = Some(job.endpoint(r).expect("ranks checked").host_address);
                continue;
            };
            match runs.last_mut() {
                Some((s, n)) if *s == server => *n += 1,
                _ => {
                    if !done.insert(server) {
                        // Counted already: the server came before another one.
                        let field = if i < c.ranks.len() {
                            format!("collective.ranks[{i}]")
                        } else {
                            format!("collective.peer_ranks[{}]", i - c.ranks.len())
                        };
                        return Err(invalid(
                            field,
                            format!(
                                "rank {r} is on server {} again after other servers; the controller plans collectives over whole servers with their ranks listed together",
                                self.topo.servers()[server as usize].name
                            ),
                        ));
                    }
                    runs.push((server, 1));
                }
            }
        }
        if unknown.is_none() {
            for &(s, have) in &runs {
                let gpus = self.topo.servers()[s as usize].gpus;
                if have != gpus {
                    return Err(invalid(
                        "collective.ranks",
                        format!(
                            "{have} ranks on server {} which has {gpus} GPUs; the controller plans collectives over whole servers (one rank per GPU)",
                            self.topo.servers()[s as usize].name
                        ),
                    ));
                }
            }
        }
        let servers: Vec<u32> = runs.iter().map(|&(s, _)| s).collect();
        let reference = c.reference_unix_ns.unwrap_or(now);
        // With only a flow rate known, no flow carries more than the whole
        // buffer: that bounds the end.
        let longest_ns = match c.pacing {
            nt::CollectivePacing::DurationNs(d) => d,
            nt::CollectivePacing::FlowRateBps(r) => transfer_ns(c.size_bytes, r),
        };
        let field = match c.start {
            nt::TimePoint::OffsetNs(_) => "collective.start_offset_ns",
            nt::TimePoint::UnixNs(_) => "collective.start_unix_ns",
        };
        refuse_stale(
            field,
            c.start.resolve(reference).saturating_add(longest_ns),
            c.recurrence,
            now,
        )?;
        let start = c.start.resolve(reference).max(now);
        let occurrences = c.recurrence.map_or(1, |r| r.occurrences as u64);
        let period = c.recurrence.map_or(0, |r| r.period_ns);
        let deadline = c
            .deadline
            .map(|dl| dl.resolve(reference) + period * (occurrences - 1));
        let mut superseded = Vec::new();
        self.supersede_predictions(&tenant, &c.job_id, now, &mut superseded);
        let mut record = self.open_record(Opening {
            tenant: &tenant,
            subject,
            job_id: Some(c.job_id.clone()),
            key,
            priority: c.priority,
            elasticity: c.elasticity,
            deadline_unix_ns: deadline,
        });
        if let Some(addr) = unknown {
            record.status = Status::Rejected;
            record.reason = Reason::UnknownEndpoint;
            record.advisory = Some(format!(
                "host {addr} of the job is not attached to the fabric; the collective's traffic is routed by ECMP"
            ));
            let record = Arc::new(record);
            self.state.reservations.insert(record.clone());
            return Ok(Planned {
                superseded,
                ..Planned::answered(vec![record])
            });
        }

        let kind = match c.kind {
            nt::CollectiveKind::RingAllReduce => CollectiveKind::RingAllreduce,
            nt::CollectiveKind::TreeAllReduce => CollectiveKind::TreeAllreduce,
            nt::CollectiveKind::AllGather => CollectiveKind::AllGather,
            nt::CollectiveKind::ReduceScatter => CollectiveKind::ReduceScatter,
            nt::CollectiveKind::AllToAll => CollectiveKind::AllToAll,
            nt::CollectiveKind::PipelineSend => CollectiveKind::Pipeline,
            nt::CollectiveKind::KvCacheTransfer => CollectiveKind::KvTransfer,
        };
        let mut spec = Collective::new(kind, servers.clone(), c.size_bytes);
        spec.channels = c.channels;
        spec.start_ns = self.to_planner_ns(start);
        match kind {
            CollectiveKind::Pipeline => {
                spec.stages = servers.len() as u32;
                spec.microbatches = 1;
            }
            CollectiveKind::KvTransfer => {
                let prefill: std::collections::HashSet<u32> = c
                    .ranks
                    .iter()
                    .filter_map(|&r| job.server_of(r).flatten())
                    .collect();
                spec.prefill_servers = Some(prefill.len() as u32);
            }
            _ => {}
        }
        if let nt::CollectivePacing::FlowRateBps(r) = c.pacing {
            spec.rate_bps = Some(r);
        }
        let mut qps = planner::demand::QpAllocator::new(self.topo);
        let expanded = collectives::expand(self.topo, &spec, &mut qps)
            .map_err(|e| invalid("collective", format!("cannot expand: {e}")))?;
        if expanded.is_empty() {
            return Err(invalid(
                "collective.ranks",
                "every rank is on one server: the traffic stays on NVLink and never reaches the fabric",
            ));
        }
        let total = expanded.len() as u64 * occurrences;
        if total > MAX_FLOWS_PER_RESERVATION as u64 {
            return Err(invalid(
                "collective.recurrence.occurrences",
                format!("{total} flows; the controller plans at most {MAX_FLOWS_PER_RESERVATION} flows per reservation"),
            ));
        }
        // Durations: a collective duration stretches each connection's flow
        // to end with the collective.
        let collective_end = expanded
            .iter()
            .map(|f| f.end_ns())
            .max()
            .unwrap_or(spec.start_ns);
        let scale_to = match c.pacing {
            nt::CollectivePacing::DurationNs(d) => Some(d),
            nt::CollectivePacing::FlowRateBps(_) => None,
        };
        let shape = shape_of(c);
        // A job's repeated step rides its pattern: the same QPs and paths,
        // admitted by booking its window (see `patterns`).
        let pattern = (occurrences == 1)
            .then(|| self.pattern(&tenant, &c.job_id, &shape))
            .flatten()
            .filter(|p| self.same_flows(p, &expanded));
        let steps = StepShape {
            expanded: &expanded,
            start_ns: spec.start_ns,
            collective_end,
            scale_to,
            occurrences,
            period,
        };
        let mut no_room = None;
        if let Some(pattern) = pattern {
            let flows = self.step_flows(&steps, Some(&pattern));
            let id = c.collective_id.clone();
            match self.admit_on_pattern(record, &pattern, &flows, |i| format!("{id}/{i}")) {
                Ok(planned) => {
                    return Ok(Planned {
                        superseded,
                        ..planned
                    })
                }
                Err(back) => {
                    let (back, room) = *back;
                    record = back;
                    no_room = Some(room);
                }
            }
        }
        let flows = self.step_flows(&steps, None);
        let meta: Vec<FlowMeta> = (0..expanded.len() * occurrences as usize)
            .map(|i| FlowMeta {
                flow_id: format!("{}/{}", c.collective_id, i),
                src_rank: None,
                dst_rank: None,
                // Entries match the controller's QP only where the
                // library has QPs; a TCP job's match its host pairs.
                steer_qp: job.library.uses_queue_pairs(),
                qp_choices: None,
            })
            .collect();
        let mut moved = Vec::new();
        let pending = self.pending(record, DemandKind::Collective(kind), flows, meta);
        let (mut p, timing) = self.plan_one(pending, Some(now), &mut moved);
        match no_room {
            // The job keeps its pattern; this step has entries of its own.
            Some(room) => {
                let why = format!(
                    "not on the job's standing paths ({} has {:.3} Gb/s free of {:.3} needed): planned on QPs of its own",
                    room.link,
                    room.free_bps as f64 / 1e9,
                    room.need_bps as f64 / 1e9
                );
                p.record.advisory = Some(match p.record.advisory.take() {
                    Some(a) => format!("{why}; {a}"),
                    None => why,
                });
            }
            None if occurrences == 1 => self.adopt_pattern(&mut p.record, shape),
            None => {}
        }
        let record = Arc::new(p.record);
        self.state.reservations.insert(record.clone());
        Ok(Planned {
            records: vec![record],
            moved: self.current(&moved),
            superseded,
            timing,
        })
    }
}

/// What a step's flows are made from: the collective's expansion (its
/// connections in order, at the planner's rates), where its schedule
/// starts and ends, the duration it is paced to, and its recurrence.
struct StepShape<'a> {
    expanded: &'a [Flow],
    start_ns: u64,
    collective_end: u64,
    scale_to: Option<u64>,
    occurrences: u64,
    period: u64,
}

impl Engine {
    /// The flows of a step: each connection with its window and rate, on
    /// the QPs of `pattern` (in its order) or on controller-wide QPs of
    /// their own, so that collectives never share a (src, dst, QP).
    fn step_flows(&mut self, s: &StepShape, pattern: Option<&Pattern>) -> Vec<Flow> {
        let mut qp_map: HashMap<(HostIdx, u32), u32> = HashMap::new();
        let mut flows = Vec::with_capacity(s.expanded.len() * s.occurrences as usize);
        for k in 0..s.occurrences {
            for (i, f) in s.expanded.iter().enumerate() {
                let qp = match (pattern, qp_map.get(&(f.dst, f.dest_qp))) {
                    (Some(p), _) => p.flows[i].qp,
                    (None, Some(q)) => *q,
                    (None, None) => {
                        let q = self.alloc_qp(f.dst);
                        qp_map.insert((f.dst, f.dest_qp), q);
                        q
                    }
                };
                match s.scale_to {
                    Some(d) => {
                        let offset = f.start_ns - s.start_ns;
                        let span = s.collective_end - s.start_ns;
                        // Keep the flow's place in the schedule, scaled to d.
                        let s_off = (offset as u128 * d as u128 / span.max(1) as u128) as u64;
                        let dur = ((f.duration_ns as u128 * d as u128) / span.max(1) as u128).max(1)
                            as u64;
                        let rate = nt::rate_for(f.bytes, dur);
                        let start = s.start_ns + s_off + k * s.period;
                        flows.push(Flow::with_duration(
                            self.topo, f.src, f.dst, qp, start, f.bytes, rate, dur,
                        ));
                    }
                    None => {
                        flows.push(Flow::with_duration(
                            self.topo,
                            f.src,
                            f.dst,
                            qp,
                            f.start_ns + k * s.period,
                            f.bytes,
                            f.rate_bps,
                            f.duration_ns,
                        ));
                    }
                }
            }
        }
        flows
    }

    /// Whether `pattern` has the connections of `expanded`, in its order.
    fn same_flows(&self, pattern: &Pattern, expanded: &[Flow]) -> bool {
        let name = |h: HostIdx| self.topo.hosts()[h as usize].name.as_str();
        pattern.flows.len() == expanded.len()
            && pattern
                .flows
                .iter()
                .zip(expanded)
                .all(|(p, f)| p.src == name(f.src) && p.dst == name(f.dst))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;

    /// A 16-rank ring over two servers, from 100 to 300 ms after `T0`,
    /// submitted; its record.
    fn two_server_ring(e: &mut Engine) -> crate::daemon::persistence::state_records::Reservation {
        register(e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 16, 100 * MS, 200 * MS);
        let c = req.validate().unwrap();
        std::sync::Arc::unwrap_or_clone(
            e.submit_collective(&c, collective_key(&req), T0)
                .unwrap()
                .records
                .remove(0),
        )
    }

    #[test]
    fn a_collective_is_planned_over_whole_servers_and_installed_in_its_window() {
        let mut e = engine();
        let r = two_server_ring(&mut e);
        assert_eq!(r.status, Status::Admitted);
        assert_eq!(r.flows.len(), 16, "2 servers x 8 channels x 2 directions");
        let v = wire(&r);
        assert_eq!(v.start_unix_ns, T0 + 100 * MS);
        assert_eq!(v.end_unix_ns, T0 + 300 * MS);
        // Distinct (src, dst, QP): every flow gets its own entries.
        let keys: std::collections::BTreeSet<_> =
            r.flows.iter().map(|f| (f.src_ip, f.dst_ip, f.qp)).collect();
        assert_eq!(keys.len(), 16);

        let lead = 10 * MS;
        let mut comp = compiler(e.topo, lead);
        let at = |comp: &mut Compiler, t: u64| comp.desired(&e.state, t).unwrap();
        let sr = installer::names::SR_RESERVATION;
        assert_eq!(
            tables(&at(&mut comp, T0 + 89 * MS), sr),
            0,
            "not before start - lead"
        );
        let during = at(&mut comp, T0 + 90 * MS);
        assert_eq!(tables(&during, sr), 16);
        assert_eq!(tables(&during, installer::names::INT_WATCHLIST), 16);
        assert_eq!(tables(&at(&mut comp, T0 + 299 * MS), sr), 16);
        assert_eq!(
            tables(&at(&mut comp, T0 + 300 * MS), sr),
            0,
            "gone at expiry"
        );
        assert_eq!(e.next_event(T0, lead), Some(T0 + 90 * MS));
        assert_eq!(e.next_event(T0 + 90 * MS, lead), Some(T0 + 300 * MS));
        assert_eq!(e.expire(T0 + 300 * MS), vec![r.id.clone()]);
        assert!(e.state.reservations.is_empty());
    }

    /// Without an INT collector or a counter poll, nothing reads a reserved
    /// flow's watch entry: only its SR push goes in, the rest is the same.
    #[test]
    fn unread_watch_entries_are_not_installed() {
        let mut e = engine();
        two_server_ring(&mut e);
        let lead = 10 * MS;
        let seeds = planner::ecmp::SeedPolicy::PerSwitch;
        let mut watched = compiler_for(e.topo, test_policy(lead, seeds, 1));
        let mut unwatched = compiler_for(
            e.topo,
            Policy {
                watch_reserved: false,
                police_reserved: true,
                ..test_policy(lead, seeds, 1)
            },
        );
        let at = T0 + 90 * MS;
        let with = watched.desired(&e.state, at).unwrap();
        let without = unwatched.desired(&e.state, at).unwrap();
        let (sr, watch) = (
            installer::names::SR_RESERVATION,
            installer::names::INT_WATCHLIST,
        );
        assert_eq!((tables(&with, sr), tables(&with, watch)), (16, 16));
        assert_eq!((tables(&without, sr), tables(&without, watch)), (16, 0));
        for (switch, state) in &with {
            let other = &without[switch].entities;
            let watches = entries_of(&with, Some(switch), watch).len();
            assert!(
                other.iter().all(|(k, v)| state.entities.get(k) == Some(v)),
                "{switch}: everything else is the same"
            );
            assert_eq!(state.entities.len(), other.len() + watches, "{switch}");
        }
    }

    /// A port a reservation crosses gets one DCQCN entry, the lowered
    /// profile for every queue; its reserved queue's own profile is static
    /// (above it), so nothing else changes on the port.
    #[test]
    fn a_busy_port_gets_one_lowered_entry() {
        use installer::ecn::{
            DCQCN_LOWERED_PRIORITY, DCQCN_PORT_PRIORITY, DCQCN_RESERVED_PRIORITY,
        };
        let mut e = engine();
        let r = two_server_ring(&mut e);
        let busy: std::collections::BTreeSet<(&str, u16)> = r
            .flows
            .iter()
            .flat_map(|f| f.hops.iter().map(|h| (h.switch.as_str(), h.port)))
            .collect();
        let mut comp = compiler(e.topo, 10 * MS);
        let priorities = |comp: &mut Compiler, t: u64| {
            let mut n = std::collections::BTreeMap::new();
            let d = comp.desired(&e.state, t).unwrap();
            for t in entries_of(&d, None, installer::names::DCQCN_PORT) {
                *n.entry(t.priority).or_insert(0) += 1;
            }
            n
        };
        let at_rest = priorities(&mut comp, T0);
        let ports = at_rest[&DCQCN_PORT_PRIORITY];
        assert_eq!(at_rest[&DCQCN_RESERVED_PRIORITY], ports, "{at_rest:?}");
        assert_eq!(at_rest.len(), 2, "{at_rest:?}");
        let during = priorities(&mut comp, T0 + 90 * MS);
        assert_eq!(during[&DCQCN_PORT_PRIORITY], ports);
        assert_eq!(during[&DCQCN_RESERVED_PRIORITY], ports);
        assert_eq!(during[&DCQCN_LOWERED_PRIORITY], busy.len(), "{during:?}");
    }

    /// NCCL's connections are queue pairs the entries can match; gloo's are
    /// TCP connections on ephemeral ports, so its entries match the host pair.
    #[test]
    fn a_tcp_library_s_collective_matches_host_pairs_not_qps() {
        for (library, steers) in [
            (proto::CollectiveLibrary::Nccl, true),
            (proto::CollectiveLibrary::Gloo, false),
        ] {
            let mut e = engine();
            let mut req = testkit::requests::register("job", &["10.0.1.1", "10.0.2.1"]);
            req.topology.as_mut().unwrap().library = library as i32;
            let t = req.validate().unwrap();
            e.register(t, recorded_registration(&req));
            let req = ring("ar", 16, 100 * MS, 200 * MS);
            let r = e
                .submit_collective(&req.validate().unwrap(), collective_key(&req), T0)
                .unwrap()
                .records
                .remove(0);
            assert_eq!(r.status, Status::Admitted, "{library:?}");
            for f in &r.flows {
                assert_eq!(f.dst_qp().is_some(), steers, "{library:?}: {f:?}");
            }
        }
    }

    #[test]
    fn collectives_that_split_servers_are_refused_naming_the_field() {
        let mut e = engine();
        register(&mut e, &["10.0.1.1", "10.0.2.1"]);
        let req = ring("ar", 12, 0, 20 * MS);
        let err = e
            .submit_collective(&req.validate().unwrap(), collective_key(&req), T0)
            .unwrap_err();
        assert!(matches!(err, Refusal::Invalid(_)), "{err:?}");
        assert!(
            err.message().starts_with("collective.ranks: "),
            "{}",
            err.message()
        );
        assert!(e.state.reservations.is_empty());
    }
}
