"""Typed NDSP requests and replies: what a workload builds and reads.

Enum members carry the proto enum names without their prefix, so the
numbers always come from the generated bindings (convert.py), never from a
copy here. Constructors check what the proto cannot say (exactly one start,
exactly one pacing); value rules (identifier syntax, limits) are the
controller's, which answers with the offending field's path.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Sequence, Tuple, Union


class Priority(enum.Enum):
    BACKGROUND = "BACKGROUND"
    STANDARD = "STANDARD"
    ITERATION_BLOCKING = "ITERATION_BLOCKING"
    LATENCY_CRITICAL = "LATENCY_CRITICAL"


class Elasticity(enum.Enum):
    INELASTIC = "INELASTIC"
    ELASTIC = "ELASTIC"


class WorkloadKind(enum.Enum):
    TRAINING = "TRAINING"
    INFERENCE = "INFERENCE"


class Library(enum.Enum):
    NCCL = "NCCL"
    RCCL = "RCCL"
    GLOO = "GLOO"
    MPI = "MPI"
    ONECCL = "ONECCL"
    XLA = "XLA"
    OTHER = "OTHER"


class Algorithm(enum.Enum):
    RING = "RING"
    TREE = "TREE"
    COLLNET = "COLLNET"
    NVLS = "NVLS"
    PAT = "PAT"
    DIRECT = "DIRECT"


class CollectiveKind(enum.Enum):
    RING_ALL_REDUCE = "RING_ALL_REDUCE"
    TREE_ALL_REDUCE = "TREE_ALL_REDUCE"
    ALL_GATHER = "ALL_GATHER"
    REDUCE_SCATTER = "REDUCE_SCATTER"
    ALL_TO_ALL = "ALL_TO_ALL"
    PIPELINE_SEND = "PIPELINE_SEND"
    KV_CACHE_TRANSFER = "KV_CACHE_TRANSFER"


class ReservationStatus(enum.Enum):
    UNSPECIFIED = "UNSPECIFIED"
    ADMITTED = "ADMITTED"
    PARTIAL = "PARTIAL"
    DEFERRED = "DEFERRED"
    FALLBACK_ECMP = "FALLBACK_ECMP"
    REJECTED = "REJECTED"
    CANCELLED = "CANCELLED"


def _one_of(owner: str, **options) -> None:
    """Raise ValueError naming the group unless exactly one option is set."""
    given = [k for k, v in options.items() if v is not None]
    if len(given) != 1:
        names = " or ".join(options)
        got = ", ".join(given) if given else "none"
        raise ValueError(f"{owner}: give exactly one of {names} (got {got})")


def _at_most_one(owner: str, **options) -> None:
    given = [k for k, v in options.items() if v is not None]
    if len(given) > 1:
        raise ValueError(f"{owner}: give at most one of {' or '.join(options)} (got {', '.join(given)})")


def _check_endpoint(owner: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{owner}: a rank (int) or an IPv4 host address (str), not {value!r}")


@dataclass(frozen=True)
class RankEndpoint:
    """Where one rank's traffic leaves the host: its NIC's IPv4 address."""

    rank: int
    host_address: str
    device_id: str = ""
    nic: str = ""
    qp_range: Optional[Tuple[int, int]] = None  # (first_qp, count)


@dataclass(frozen=True)
class JobTopology:
    """A job's rank map; `world_size` defaults to the number of ranks."""

    job_id: str
    ranks: Sequence[RankEndpoint]
    library: Library = Library.XLA
    workload: WorkloadKind = WorkloadKind.TRAINING
    world_size: Optional[int] = None
    library_version: str = ""
    algorithms: Sequence[Algorithm] = ()


@dataclass(frozen=True)
class Recurrence:
    period_ns: int
    occurrences: int


Endpoint = Union[int, str]


@dataclass(frozen=True)
class Demand:
    """One point-to-point forecast. Endpoints are ranks (int) or host addresses (str)."""

    demand_id: str
    source: Endpoint
    destination: Endpoint
    size_bytes: int
    start_offset_ns: Optional[int] = None
    start_unix_ns: Optional[int] = None
    duration_ns: Optional[int] = None
    rate_bps: Optional[int] = None
    priority: Priority = Priority.ITERATION_BLOCKING
    elasticity: Elasticity = Elasticity.INELASTIC
    job_id: str = ""
    deadline_offset_ns: Optional[int] = None
    deadline_unix_ns: Optional[int] = None
    dest_qp: Optional[int] = None
    recurrence: Optional[Recurrence] = None
    # Destination QPs the sender can use, (first_qp, count): the controller
    # picks one (the reservation's flows carry it in dest_qp). Not with
    # dest_qp. NDSP 1.3.
    dest_qp_choices: Optional[Tuple[int, int]] = None

    def __post_init__(self):
        owner = f"Demand({self.demand_id!r})"
        _one_of(f"{owner}.start", start_offset_ns=self.start_offset_ns, start_unix_ns=self.start_unix_ns)
        _one_of(f"{owner}.pacing", duration_ns=self.duration_ns, rate_bps=self.rate_bps)
        _at_most_one(f"{owner}.deadline", deadline_offset_ns=self.deadline_offset_ns, deadline_unix_ns=self.deadline_unix_ns)
        _at_most_one(f"{owner}.dest_qp", dest_qp=self.dest_qp, dest_qp_choices=self.dest_qp_choices)
        _check_endpoint(f"{owner}.source", self.source)
        _check_endpoint(f"{owner}.destination", self.destination)


@dataclass(frozen=True)
class Collective:
    """A collective for the controller to expand (ring order: ranks[i] sends to ranks[i+1])."""

    collective_id: str
    job_id: str
    kind: CollectiveKind
    ranks: Sequence[int]
    size_bytes: int
    start_offset_ns: Optional[int] = None
    start_unix_ns: Optional[int] = None
    duration_ns: Optional[int] = None
    flow_rate_bps: Optional[int] = None
    priority: Priority = Priority.ITERATION_BLOCKING
    elasticity: Elasticity = Elasticity.INELASTIC
    channels: int = 0
    peer_ranks: Sequence[int] = ()
    deadline_offset_ns: Optional[int] = None
    deadline_unix_ns: Optional[int] = None
    recurrence: Optional[Recurrence] = None

    def __post_init__(self):
        owner = f"Collective({self.collective_id!r})"
        _one_of(f"{owner}.start", start_offset_ns=self.start_offset_ns, start_unix_ns=self.start_unix_ns)
        _one_of(f"{owner}.pacing", duration_ns=self.duration_ns, flow_rate_bps=self.flow_rate_bps)
        _at_most_one(f"{owner}.deadline", deadline_offset_ns=self.deadline_offset_ns, deadline_unix_ns=self.deadline_unix_ns)
        if not isinstance(self.kind, CollectiveKind):
            raise ValueError(f"{owner}.kind: a CollectiveKind, not {self.kind!r}")


# ---------------------------------------------------------------- replies


@dataclass(frozen=True)
class ServerInfo:
    """Handshake answer; `clock_offset_ns` = controller clock − local clock (estimated)."""

    version: Tuple[int, int]
    server_time_unix_ns: int
    clock_offset_ns: int
    supported_collective_kinds: Tuple[CollectiveKind, ...]
    max_demands_per_request: int
    max_label_stack_depth: int


@dataclass(frozen=True)
class Registration:
    job_id: str
    registered_ranks: int
    generation: int
    warnings: Tuple[str, ...]


@dataclass(frozen=True)
class PathHop:
    node: str
    egress_port: int


@dataclass(frozen=True)
class FlowReservation:
    flow_id: str
    source_address: str
    destination_address: str
    source_rank: Optional[int]
    destination_rank: Optional[int]
    dest_qp: Optional[int]
    status: ReservationStatus
    reason: str
    requested_bps: int
    accepted_bps: int
    start_unix_ns: int
    end_unix_ns: int
    sr_label_stack: Tuple[int, ...]
    hops: Tuple[PathHop, ...]
    advisory: str
    # The UDP source port to send on when the fabric's own ECMP hash, not
    # SR labels, carries the flow along hops (entropy steering); else None.
    udp_src_port: Optional[int] = None


@dataclass(frozen=True)
class Reservation:
    """The controller's answer for one demand or collective (current revision)."""

    reservation_id: str
    demand_id: Optional[str]
    collective_id: Optional[str]
    job_id: str
    status: ReservationStatus
    reason: str
    advisory: str
    start_unix_ns: int
    end_unix_ns: int
    flows: Tuple[FlowReservation, ...]
    revision: int
    # Made by the controller from the job's learned iterations (T+5), not announced.
    predicted: bool = False

    @property
    def reserved_bytes(self) -> int:
        """Bytes the accepted rates carry over the reserved windows."""
        return sum(f.accepted_bps * (f.end_unix_ns - f.start_unix_ns) // 8_000_000_000 for f in self.flows)


@dataclass(frozen=True)
class WatchEvent:
    """One WatchEvents item. `raw` is the protobuf message for fields not lifted here."""

    sequence: int
    emitted_unix_ns: int
    # "telemetry", "link_down", "link_up", "reservation_changed", "forecast_mismatch",
    # "prediction_withdrawn" (details in raw.deviation.prediction_withdrawn)
    kind: str
    affected_reservation_ids: Tuple[str, ...]
    reservation: Optional[Reservation]
    raw: object = field(repr=False, default=None)
