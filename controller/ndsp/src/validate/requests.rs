//! The requests a client sends, validated on the controller.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::limits::*;
use crate::proto;
use crate::types::*;

use super::fields::{
    check_unique, client_id, controller_id, deadline_point, duration_ns, endpoint, header,
    ipv4_unicast, name, nonzero, optional_client_id, pacing, positive, queue_pair, rank_number,
    rate_bps, recurrence, required, start_point, text, FromWire, Quoted,
};
use super::path::{Path, ROOT};
use super::{Result, Validate};

impl Validate for proto::HandshakeRequest {
    type Output = ValidatedHandshake;

    fn validate(&self) -> Result<ValidatedHandshake> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let client_name = text(ROOT.field("client_name"), &self.client_name, MAX_NAME_LEN)?;
        Ok(ValidatedHandshake { ctx, client_name })
    }
}

impl Validate for proto::RegisterTopologyRequest {
    type Output = ValidatedTopology;

    fn validate(&self) -> Result<ValidatedTopology> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let tp = ROOT.field("topology");
        let t = required(tp, &self.topology)?;
        let job_id = client_id(tp.field("job_id"), &t.job_id)?;
        let workload_kind = WorkloadKind::from_wire(tp.field("workload_kind"), t.workload_kind)?;
        let world_size = t.world_size;
        if world_size == 0 || world_size > MAX_WORLD_SIZE {
            return tp
                .field("world_size")
                .err(format!("{world_size} is outside 1 to {MAX_WORLD_SIZE}"));
        }
        let library = CollectiveLibrary::from_wire(tp.field("library"), t.library)?;
        let library_version = text(
            tp.field("library_version"),
            &t.library_version,
            MAX_LIBRARY_VERSION_LEN,
        )?;

        let mut algorithms = Vec::with_capacity(t.algorithms.len());
        let mut seen_algorithms = HashMap::new();
        for (i, &a) in t.algorithms.iter().enumerate() {
            let ap = tp.index("algorithms", i);
            let algorithm = CollectiveAlgorithm::from_wire(ap, a)?;
            let wire_name = proto::CollectiveAlgorithm::from(algorithm).as_str_name();
            check_unique(
                &mut seen_algorithms,
                wire_name,
                i,
                ap,
                "algorithms",
                "algorithm",
            )?;
            algorithms.push(algorithm);
        }

        if t.ranks.is_empty() {
            return tp.field("ranks").err("at least one rank is required");
        }
        let mut ranks = Vec::with_capacity(t.ranks.len());
        let mut seen_ranks = HashMap::with_capacity(t.ranks.len());
        // Queue-pair ranges per (address, NIC): (range, rank, index).
        let mut qp_owners: QpOwners<'_> = HashMap::new();
        for (i, r) in t.ranks.iter().enumerate() {
            let rp = tp.index("ranks", i);
            if r.rank >= world_size {
                return rp.field("rank").err(format!(
                    "rank {} is not below world_size {world_size}",
                    r.rank
                ));
            }
            check_unique(
                &mut seen_ranks,
                r.rank,
                i,
                rp.field("rank"),
                "ranks",
                "rank",
            )?;
            let device_id = text(rp.field("device_id"), &r.device_id, MAX_DEVICE_ID_LEN)?;
            let host_address = ipv4_unicast(rp.field("host_address"), &r.host_address)?;
            let nic = name(rp.field("nic"), &r.nic, MAX_NIC_LEN)?;
            let qp_range = match &r.qp_range {
                None => None,
                Some(q) => {
                    let qp = rp.field("qp_range");
                    let range = qp_range(qp, q)?;
                    let owners = qp_owners
                        .entry((host_address, (!r.nic.is_empty()).then_some(r.nic.as_str())))
                        .or_default();
                    if let Some((_, other, j)) = owners.iter().find(|(o, _, _)| o.overlaps(&range))
                    {
                        return qp.err(format!(
                            "queue pairs {}..={} overlap those of rank {other} (ranks[{j}]) on the same address and NIC",
                            range.first_qp,
                            range.last_qp()
                        ));
                    }
                    owners.push((range, r.rank, i));
                    Some(range)
                }
            };
            ranks.push(RankEndpoint {
                rank: r.rank,
                device_id,
                host_address,
                nic,
                qp_range,
            });
        }
        ranks.sort_by_key(|r| r.rank);

        Ok(ValidatedTopology {
            ctx,
            job_id,
            workload_kind,
            world_size,
            ranks,
            library,
            library_version,
            algorithms,
        })
    }
}

/// Queue-pair ranges claimed per (host address, NIC): (range, rank, index).
type QpOwners<'a> = HashMap<(Ipv4Addr, Option<&'a str>), Vec<(QpRange, u32, usize)>>;

fn qp_range(p: Path<'_>, q: &proto::QpRange) -> Result<QpRange> {
    queue_pair(p.field("first_qp"), q.first_qp)?;
    if q.count == 0 {
        return p.field("count").err("must be at least 1");
    }
    let last = u64::from(q.first_qp) + u64::from(q.count) - 1;
    if last > u64::from(QP_MAX) {
        return p.field("count").err(format!(
            "{} queue pairs from {} end at {last}, beyond 24 bits (at most {QP_MAX})",
            q.count, q.first_qp
        ));
    }
    Ok(QpRange {
        first_qp: q.first_qp,
        count: q.count,
    })
}

impl Validate for proto::SubmitDemandRequest {
    type Output = ValidatedDemandBatch;

    fn validate(&self) -> Result<ValidatedDemandBatch> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        if self.demands.is_empty() {
            return ROOT.field("demands").err("at least one demand is required");
        }
        if self.demands.len() > MAX_DEMANDS_PER_REQUEST {
            return ROOT.field("demands").err(format!(
                "{} demands; at most {MAX_DEMANDS_PER_REQUEST} per request",
                self.demands.len()
            ));
        }
        let mut demands = Vec::with_capacity(self.demands.len());
        let mut seen = HashMap::with_capacity(self.demands.len());
        for (i, d) in self.demands.iter().enumerate() {
            let dp = ROOT.index("demands", i);
            let demand = demand(dp, d, &ctx.tenant)?;
            check_unique(
                &mut seen,
                Quoted(&d.demand_id),
                i,
                dp.field("demand_id"),
                "demands",
                "demand id",
            )?;
            demands.push(demand);
        }
        Ok(ValidatedDemandBatch {
            ctx,
            reference_unix_ns: nonzero(self.reference_unix_ns),
            demands,
        })
    }
}

fn demand(p: Path<'_>, d: &proto::DemandSignal, tenant: &str) -> Result<ValidatedDemand> {
    use proto::demand_signal::{Deadline, Pacing as WirePacing, Start};

    let demand_id = client_id(p.field("demand_id"), &d.demand_id)?;
    let job_id = optional_client_id(p.field("job_id"), &d.job_id)?;
    let source = endpoint(p.field("source"), &d.source)?;
    let destination = endpoint(p.field("destination"), &d.destination)?;
    if job_id.is_none()
        && (matches!(source, Endpoint::Rank(_)) || matches!(destination, Endpoint::Rank(_)))
    {
        return p
            .field("job_id")
            .err("is required when an endpoint is a rank");
    }
    if source == destination {
        return p.field("destination").err("is the same as the source");
    }
    let start = start_point(
        p,
        d.start.map(|s| match s {
            Start::StartOffsetNs(t) => TimePoint::OffsetNs(t),
            Start::StartUnixNs(t) => TimePoint::UnixNs(t),
        }),
    )?;
    let size_bytes = positive(p.field("size_bytes"), d.size_bytes)?;
    let pacing = pacing(
        p,
        size_bytes,
        d.pacing.map(|x| match x {
            WirePacing::DurationNs(t) => Pacing::DurationNs(t),
            WirePacing::RateBps(r) => Pacing::RateBps(r),
        }),
    )?;
    let priority = Priority::from_wire(p.field("priority"), d.priority)?;
    let elasticity = Elasticity::from_wire(p.field("elasticity"), d.elasticity)?;
    let one_duration = match pacing {
        Pacing::DurationNs(t) => t,
        Pacing::RateBps(r) => transfer_ns(size_bytes, r),
    };
    let end = start.raw_ns().checked_add(one_duration);
    let deadline = deadline_point(
        p,
        start,
        end,
        d.deadline.map(|x| match x {
            Deadline::DeadlineOffsetNs(t) => TimePoint::OffsetNs(t),
            Deadline::DeadlineUnixNs(t) => TimePoint::UnixNs(t),
        }),
    )?;
    let dest_qp = d
        .dest_qp
        .map(|q| queue_pair(p.field("dest_qp"), q))
        .transpose()?;
    let recurrence = recurrence(
        p.field("recurrence"),
        &d.recurrence,
        start,
        Some(one_duration),
    )?;
    let dest_qp_choices = d
        .dest_qp_choices
        .as_ref()
        .map(|q| qp_range(p.field("dest_qp_choices"), q))
        .transpose()?;
    if dest_qp.is_some() && dest_qp_choices.is_some() {
        return p
            .field("dest_qp_choices")
            .err("not with dest_qp: give the queue pair, or the choices, not both");
    }
    Ok(ValidatedDemand {
        tenant: tenant.to_owned(),
        demand_id,
        job_id,
        source,
        destination,
        start,
        size_bytes,
        pacing,
        priority,
        elasticity,
        deadline,
        dest_qp,
        recurrence,
        dest_qp_choices,
    })
}

pub(super) fn kind_name(kind: CollectiveKind) -> &'static str {
    proto::CollectiveKind::from(kind).as_str_name()
}

impl Validate for proto::SubmitCollectiveRequest {
    type Output = ValidatedCollective;

    fn validate(&self) -> Result<ValidatedCollective> {
        use proto::collective::{Deadline, Pacing as WirePacing, Start};

        let ctx = header(ROOT.field("header"), &self.header)?;
        let cp = ROOT.field("collective");
        let c = required(cp, &self.collective)?;
        let collective_id = client_id(cp.field("collective_id"), &c.collective_id)?;
        let job_id = client_id(cp.field("job_id"), &c.job_id)?;
        let kind = CollectiveKind::from_wire(cp.field("kind"), c.kind)?;

        let min_ranks = if kind == CollectiveKind::KvCacheTransfer {
            1
        } else {
            2
        };
        if c.ranks.len() < min_ranks {
            return cp.field("ranks").err(format!(
                "{} needs at least {min_ranks} ranks, got {}",
                kind_name(kind),
                c.ranks.len()
            ));
        }
        let mut seen = HashMap::new();
        if strictly_ascending(&c.ranks) {
            // Ascending ranks are unique: no set needed (a job's steps list
            // its ranks in order as a rule, 32k of them at the sizes we serve).
            if let Some(&last) = c.ranks.last() {
                rank_number(cp.index("ranks", c.ranks.len() - 1), last)?;
            }
            if kind == CollectiveKind::KvCacheTransfer {
                seen.extend(c.ranks.iter().enumerate().map(|(i, &r)| (r, i)));
            }
        } else {
            seen.reserve(c.ranks.len() + c.peer_ranks.len());
            for (i, &r) in c.ranks.iter().enumerate() {
                let rp = cp.index("ranks", i);
                rank_number(rp, r)?;
                check_unique(&mut seen, r, i, rp, "ranks", "rank")?;
            }
        }
        if kind == CollectiveKind::KvCacheTransfer {
            if c.peer_ranks.len() != c.ranks.len() {
                return cp.field("peer_ranks").err(format!(
                    "has {} entries but ranks has {}; each prefill rank needs one decode rank",
                    c.peer_ranks.len(),
                    c.ranks.len()
                ));
            }
            let mut seen_peers = HashMap::with_capacity(c.peer_ranks.len());
            for (i, &r) in c.peer_ranks.iter().enumerate() {
                let rp = cp.index("peer_ranks", i);
                rank_number(rp, r)?;
                if let Some(j) = seen.get(&r) {
                    return rp.err(format!(
                        "rank {r} is also a prefill rank (ranks[{j}]); a rank cannot send its KV cache to itself"
                    ));
                }
                check_unique(&mut seen_peers, r, i, rp, "peer_ranks", "rank")?;
            }
        } else if !c.peer_ranks.is_empty() {
            return cp.field("peer_ranks").err(format!(
                "must be empty for {}; only COLLECTIVE_KIND_KV_CACHE_TRANSFER takes peer ranks",
                kind_name(kind)
            ));
        }

        let sp = cp.field("size_bytes");
        let size_bytes = positive(sp, c.size_bytes)?;
        let n = c.ranks.len() as u64;
        let (min_bytes, per) = match kind {
            CollectiveKind::PipelineSend => (1, "stage"),
            CollectiveKind::KvCacheTransfer => (n, "prefill/decode pair"),
            CollectiveKind::AllToAll => (n - 1, "peer"),
            _ => (n, "rank"),
        };
        if size_bytes < min_bytes {
            return sp.err(format!(
                "{size_bytes} bytes is less than one byte per {per} ({min_bytes} needed)"
            ));
        }
        let channels = match c.channels {
            0 => 1,
            ch if ch > MAX_CHANNELS => {
                return cp
                    .field("channels")
                    .err(format!("{ch} channels; at most {MAX_CHANNELS}"))
            }
            ch => ch,
        };

        let start = start_point(
            cp,
            c.start.map(|s| match s {
                Start::StartOffsetNs(t) => TimePoint::OffsetNs(t),
                Start::StartUnixNs(t) => TimePoint::UnixNs(t),
            }),
        )?;
        let pacing = match c.pacing {
            None => {
                return cp
                    .field("pacing")
                    .err("is required: set duration_ns or flow_rate_bps")
            }
            Some(WirePacing::DurationNs(d)) => {
                CollectivePacing::DurationNs(duration_ns(cp.field("duration_ns"), d)?)
            }
            Some(WirePacing::FlowRateBps(r)) => {
                CollectivePacing::FlowRateBps(rate_bps(cp.field("flow_rate_bps"), r)?)
            }
        };
        let priority = Priority::from_wire(cp.field("priority"), c.priority)?;
        let elasticity = Elasticity::from_wire(cp.field("elasticity"), c.elasticity)?;
        // The duration of a rate-paced collective depends on its expansion,
        // which is the controller's; only an explicit one is checked here.
        let one_duration = match pacing {
            CollectivePacing::DurationNs(d) => Some(d),
            CollectivePacing::FlowRateBps(_) => None,
        };
        let end = one_duration.and_then(|d| start.raw_ns().checked_add(d));
        let deadline = deadline_point(
            cp,
            start,
            end,
            c.deadline.map(|x| match x {
                Deadline::DeadlineOffsetNs(t) => TimePoint::OffsetNs(t),
                Deadline::DeadlineUnixNs(t) => TimePoint::UnixNs(t),
            }),
        )?;
        let recurrence = recurrence(cp.field("recurrence"), &c.recurrence, start, one_duration)?;

        Ok(ValidatedCollective {
            ctx,
            reference_unix_ns: nonzero(self.reference_unix_ns),
            collective_id,
            job_id,
            kind,
            ranks: c.ranks.clone(),
            peer_ranks: c.peer_ranks.clone(),
            size_bytes,
            channels,
            start,
            pacing,
            priority,
            elasticity,
            deadline,
            recurrence,
        })
    }
}

impl Validate for proto::CancelRequest {
    type Output = ValidatedCancel;

    fn validate(&self) -> Result<ValidatedCancel> {
        use proto::cancel_request::Target;

        let ctx = header(ROOT.field("header"), &self.header)?;
        let target = match &self.target {
            None => {
                return ROOT
                    .field("target")
                    .err("is required: set demand_id, collective_id, reservation_id or job_id")
            }
            Some(Target::DemandId(id)) => {
                CancelTarget::Demand(client_id(ROOT.field("demand_id"), id)?)
            }
            Some(Target::CollectiveId(id)) => {
                CancelTarget::Collective(client_id(ROOT.field("collective_id"), id)?)
            }
            Some(Target::ReservationId(id)) => {
                CancelTarget::Reservation(controller_id(ROOT.field("reservation_id"), id)?)
            }
            Some(Target::JobId(id)) => CancelTarget::Job(client_id(ROOT.field("job_id"), id)?),
        };
        Ok(ValidatedCancel { ctx, target })
    }
}

impl Validate for proto::ReportDeviationRequest {
    type Output = ValidatedDeviation;

    fn validate(&self) -> Result<ValidatedDeviation> {
        use proto::workload_deviation::{Change, Target};

        let ctx = header(ROOT.field("header"), &self.header)?;
        let dp = ROOT.field("deviation");
        let d = required(dp, &self.deviation)?;
        let target = match &d.target {
            None => {
                return dp
                    .field("target")
                    .err("is required: set demand_id or collective_id")
            }
            Some(Target::DemandId(id)) => {
                DeviationTarget::Demand(client_id(dp.field("demand_id"), id)?)
            }
            Some(Target::CollectiveId(id)) => {
                DeviationTarget::Collective(client_id(dp.field("collective_id"), id)?)
            }
        };
        let change =
            match &d.change {
                None => return dp.field("change").err(
                    "is required: set early_start, late_start, size_change, completed or aborted",
                ),
                Some(Change::EarlyStart(s)) => {
                    WorkloadChange::EarlyStart(start_change(dp.field("early_start"), s)?)
                }
                Some(Change::LateStart(s)) => {
                    WorkloadChange::LateStart(start_change(dp.field("late_start"), s)?)
                }
                Some(Change::SizeChange(s)) => WorkloadChange::SizeChange {
                    new_size_bytes: positive(
                        dp.field("size_change").field("new_size_bytes"),
                        s.new_size_bytes,
                    )?,
                },
                Some(Change::Completed(c)) => WorkloadChange::Completed {
                    completed_unix_ns: nonzero(c.completed_unix_ns),
                },
                Some(Change::Aborted(a)) => WorkloadChange::Aborted {
                    reason: text(dp.field("aborted").field("reason"), &a.reason, MAX_TEXT_LEN)?,
                },
            };
        Ok(ValidatedDeviation {
            ctx,
            reference_unix_ns: nonzero(self.reference_unix_ns),
            target,
            change,
            observed_unix_ns: nonzero(d.observed_unix_ns),
        })
    }
}

fn start_change(p: Path<'_>, s: &proto::StartChange) -> Result<TimePoint> {
    use proto::start_change::Start;
    start_point(
        p,
        s.start.map(|s| match s {
            Start::StartOffsetNs(t) => TimePoint::OffsetNs(t),
            Start::StartUnixNs(t) => TimePoint::UnixNs(t),
        }),
    )
}

impl Validate for proto::WatchEventsRequest {
    type Output = ValidatedWatch;

    fn validate(&self) -> Result<ValidatedWatch> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let mut job_ids = Vec::with_capacity(self.job_ids.len());
        let mut seen = HashMap::new();
        for (i, id) in self.job_ids.iter().enumerate() {
            let jp = ROOT.index("job_ids", i);
            job_ids.push(client_id(jp, id)?);
            check_unique(&mut seen, Quoted(id), i, jp, "job_ids", "job id")?;
        }
        let interval = self.telemetry_interval_ns;
        let telemetry_interval_ns = match interval {
            0 => None,
            t if !(MIN_TELEMETRY_INTERVAL_NS..=MAX_TELEMETRY_INTERVAL_NS).contains(&t) => {
                return ROOT.field("telemetry_interval_ns").err(format!(
                    "{t} ns is outside {MIN_TELEMETRY_INTERVAL_NS} ns (10 ms) to {MAX_TELEMETRY_INTERVAL_NS} ns (1 h); 0 turns telemetry off"
                ))
            }
            t => Some(t),
        };
        Ok(ValidatedWatch {
            ctx,
            job_ids,
            telemetry_interval_ns,
        })
    }
}

impl Validate for proto::GetReservationRequest {
    type Output = ValidatedGetReservation;

    fn validate(&self) -> Result<ValidatedGetReservation> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let reservation_id = controller_id(ROOT.field("reservation_id"), &self.reservation_id)?;
        Ok(ValidatedGetReservation {
            ctx,
            reservation_id,
        })
    }
}

impl Validate for proto::ListReservationsRequest {
    type Output = ValidatedListReservations;

    fn validate(&self) -> Result<ValidatedListReservations> {
        let ctx = header(ROOT.field("header"), &self.header)?;
        let job_id = optional_client_id(ROOT.field("job_id"), &self.job_id)?;
        let page_size = match self.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n if n > MAX_PAGE_SIZE => {
                return ROOT
                    .field("page_size")
                    .err(format!("{n} is above the largest page of {MAX_PAGE_SIZE}"))
            }
            n => n,
        };
        let page_token = text(
            ROOT.field("page_token"),
            &self.page_token,
            MAX_PAGE_TOKEN_LEN,
        )?;
        Ok(ValidatedListReservations {
            ctx,
            job_id,
            page_size,
            page_token,
        })
    }
}

/// Whether `ranks` rise strictly (so are unique, the largest last).
fn strictly_ascending(ranks: &[u32]) -> bool {
    ranks.windows(2).all(|w| w[0] < w[1])
}
