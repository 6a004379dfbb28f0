"""foresight-ndsp: tell the Foresight controller what traffic is coming.

`NdspClient` is the blocking client (one method per NDSP RPC);
`BackgroundSender` announces from a thread so a training step never waits;
`foresight_ndsp.jax` reads a compiled JAX step's collectives.
"""

from .client import NdspClient
from .errors import NdspError
from .sender import BackgroundSender, SenderCounters
from .types import (
    Algorithm,
    Collective,
    CollectiveKind,
    Demand,
    Elasticity,
    FlowReservation,
    JobTopology,
    Library,
    PathHop,
    Priority,
    RankEndpoint,
    Recurrence,
    Registration,
    Reservation,
    ReservationStatus,
    ServerInfo,
    WatchEvent,
    WorkloadKind,
)

__all__ = [
    "Algorithm", "BackgroundSender", "Collective", "CollectiveKind", "Demand", "Elasticity",
    "FlowReservation", "JobTopology", "Library", "NdspClient", "NdspError", "PathHop", "Priority",
    "RankEndpoint", "Recurrence", "Registration", "Reservation", "ReservationStatus",
    "SenderCounters", "ServerInfo", "WatchEvent", "WorkloadKind",
]
