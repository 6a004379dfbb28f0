"""Typed values <-> generated protobuf messages (the only place that knows both)."""

from __future__ import annotations

from typing import Iterable, Tuple

from ._pb import ndsp_pb2 as pb
from .types import (
    Collective,
    CollectiveKind,
    Demand,
    FlowReservation,
    JobTopology,
    PathHop,
    Reservation,
    ReservationStatus,
    WatchEvent,
)

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 3

_PREFIX = {
    "Priority": ("PriorityClass", "PRIORITY_CLASS_"),
    "Elasticity": ("Elasticity", "ELASTICITY_"),
    "WorkloadKind": ("WorkloadKind", "WORKLOAD_KIND_"),
    "Library": ("CollectiveLibrary", "COLLECTIVE_LIBRARY_"),
    "Algorithm": ("CollectiveAlgorithm", "COLLECTIVE_ALGORITHM_"),
    "CollectiveKind": ("CollectiveKind", "COLLECTIVE_KIND_"),
}


def enum_to_pb(value) -> int:
    """The proto number of a types.* enum member, looked up by name in the bindings."""
    pb_enum, prefix = _PREFIX[type(value).__name__]
    return getattr(pb, pb_enum).Value(prefix + value.value)


def header(tenant: str) -> pb.RequestHeader:
    return pb.RequestHeader(
        protocol_version=pb.ProtocolVersion(major=PROTOCOL_MAJOR, minor=PROTOCOL_MINOR), tenant=tenant
    )


def _endpoint(value) -> pb.Endpoint:
    return pb.Endpoint(rank=value) if isinstance(value, int) else pb.Endpoint(host_address=value)


def _set_if(msg, **fields) -> None:
    for name, value in fields.items():
        if value is not None:
            setattr(msg, name, value)


def topology_to_pb(t: JobTopology) -> pb.Topology:
    msg = pb.Topology(
        job_id=t.job_id,
        workload_kind=enum_to_pb(t.workload),
        world_size=t.world_size if t.world_size is not None else len(t.ranks),
        library=enum_to_pb(t.library),
        library_version=t.library_version,
        algorithms=[enum_to_pb(a) for a in t.algorithms],
    )
    for r in t.ranks:
        ep = msg.ranks.add(rank=r.rank, host_address=r.host_address, device_id=r.device_id, nic=r.nic)
        if r.qp_range is not None:
            ep.qp_range.first_qp, ep.qp_range.count = r.qp_range
    return msg


def demand_to_pb(d: Demand) -> pb.DemandSignal:
    msg = pb.DemandSignal(
        demand_id=d.demand_id,
        job_id=d.job_id,
        source=_endpoint(d.source),
        destination=_endpoint(d.destination),
        size_bytes=d.size_bytes,
        priority=enum_to_pb(d.priority),
        elasticity=enum_to_pb(d.elasticity),
    )
    _set_if(
        msg,
        start_offset_ns=d.start_offset_ns,
        start_unix_ns=d.start_unix_ns,
        duration_ns=d.duration_ns,
        rate_bps=d.rate_bps,
        deadline_offset_ns=d.deadline_offset_ns,
        deadline_unix_ns=d.deadline_unix_ns,
        dest_qp=d.dest_qp,
    )
    if d.recurrence is not None:
        msg.recurrence.period_ns, msg.recurrence.occurrences = d.recurrence.period_ns, d.recurrence.occurrences
    if d.dest_qp_choices is not None:
        msg.dest_qp_choices.first_qp, msg.dest_qp_choices.count = d.dest_qp_choices
    return msg


def collective_to_pb(c: Collective) -> pb.Collective:
    msg = pb.Collective(
        collective_id=c.collective_id,
        job_id=c.job_id,
        kind=enum_to_pb(c.kind),
        ranks=list(c.ranks),
        peer_ranks=list(c.peer_ranks),
        size_bytes=c.size_bytes,
        channels=c.channels,
        priority=enum_to_pb(c.priority),
        elasticity=enum_to_pb(c.elasticity),
    )
    _set_if(
        msg,
        start_offset_ns=c.start_offset_ns,
        start_unix_ns=c.start_unix_ns,
        duration_ns=c.duration_ns,
        flow_rate_bps=c.flow_rate_bps,
        deadline_offset_ns=c.deadline_offset_ns,
        deadline_unix_ns=c.deadline_unix_ns,
    )
    if c.recurrence is not None:
        msg.recurrence.period_ns, msg.recurrence.occurrences = c.recurrence.period_ns, c.recurrence.occurrences
    return msg


def _status(n: int) -> ReservationStatus:
    return ReservationStatus(pb.ReservationStatus.Name(n).removeprefix("RESERVATION_STATUS_"))


def _reason(n: int) -> str:
    return pb.ReasonCode.Name(n).removeprefix("REASON_CODE_")


def _opt(msg, name):
    return getattr(msg, name) if msg.HasField(name) else None


def reservation_from_pb(r: pb.Reservation) -> Reservation:
    subject = r.WhichOneof("subject")
    return Reservation(
        reservation_id=r.reservation_id,
        demand_id=r.demand_id if subject == "demand_id" else None,
        collective_id=r.collective_id if subject == "collective_id" else None,
        job_id=r.job_id,
        status=_status(r.status),
        reason=_reason(r.reason),
        advisory=r.advisory,
        start_unix_ns=r.start_unix_ns,
        end_unix_ns=r.end_unix_ns,
        flows=tuple(
            FlowReservation(
                flow_id=f.flow_id,
                source_address=f.source_address,
                destination_address=f.destination_address,
                source_rank=_opt(f, "source_rank"),
                destination_rank=_opt(f, "destination_rank"),
                dest_qp=_opt(f, "dest_qp"),
                status=_status(f.status),
                reason=_reason(f.reason),
                requested_bps=f.requested_bps,
                accepted_bps=f.accepted_bps,
                start_unix_ns=f.start_unix_ns,
                end_unix_ns=f.end_unix_ns,
                sr_label_stack=tuple(f.sr_label_stack),
                hops=tuple(PathHop(h.node, h.egress_port) for h in f.hops),
                advisory=f.advisory,
                udp_src_port=_opt(f, "udp_src_port"),
            )
            for f in r.flows
        ),
        revision=r.revision,
        predicted=r.predicted,
    )


def collective_kinds_from_pb(values: Iterable[int]) -> Tuple[CollectiveKind, ...]:
    return tuple(CollectiveKind(pb.CollectiveKind.Name(v).removeprefix("COLLECTIVE_KIND_")) for v in values)


def watch_event_from_pb(e: pb.WatchEvent) -> WatchEvent:
    which = e.WhichOneof("event")
    if which == "telemetry":
        return WatchEvent(e.sequence, e.emitted_unix_ns, "telemetry", (), None, e)
    dev = e.deviation
    kind = dev.WhichOneof("kind") or "unknown"
    res = reservation_from_pb(dev.reservation_changed) if kind == "reservation_changed" else None
    return WatchEvent(e.sequence, e.emitted_unix_ns, kind, tuple(dev.affected_reservation_ids), res, e)
