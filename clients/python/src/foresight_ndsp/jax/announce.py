"""T+1: announce an iteration's collectives before the iteration runs.

The schedule gives the order and the bytes of every cross-process
collective but not when, inside the step, each one starts. The announcer
spreads them over a communication window in schedule order, each getting a
share proportional to the bytes it puts on the wire; the caller picks the
window (typically: from the step's start, as long as the last measured
step). Ids are `<prefix>.i<iteration>.c<order>...`, so announcing the same
iteration again (a retry, a restarted loop) is recognised by the
controller instead of reserving twice.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..types import Collective, Demand, JobTopology, Library, Algorithm, RankEndpoint
from .gloo import to_ndsp, wire_bytes
from .schedule import StepSchedule


def job_for_processes(job_id: str, hosts: Sequence[str], library_version: str = "") -> JobTopology:
    """A job whose rank i is JAX process i on host address hosts[i]."""
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"hosts: one address per process, all distinct (got {list(hosts)})")
    return JobTopology(
        job_id,
        [RankEndpoint(i, h, device_id=f"process-{i}") for i, h in enumerate(hosts)],
        library=Library.GLOO,
        library_version=library_version,
        algorithms=(Algorithm.RING,),
    )


def plan_iteration(
    schedule: StepSchedule,
    *,
    job_id: str,
    iteration: int,
    start_offset_ns: int,
    window_ns: int,
    id_prefix: Optional[str] = None,
) -> List[Tuple[List[Collective], List[Demand]]]:
    """NDSP items for one iteration, one entry per cross-process collective."""
    if window_ns <= 0:
        raise ValueError(f"window_ns: must be positive, not {window_ns}")
    cs = schedule.cross_process()
    total = sum(max(1, wire_bytes(c)) for c in cs)
    prefix = id_prefix or job_id
    out = []
    offset = start_offset_ns
    for c in cs:
        share = window_ns * max(1, wire_bytes(c)) // total
        out.append(to_ndsp(c, job_id=job_id, id_base=f"{prefix}.i{iteration}.c{c.hlo.order}",
                           start_offset_ns=offset, duration_ns=share))
        offset += share
    return out


class StepAnnouncer:
    """Queues each iteration's collectives on a BackgroundSender (never blocks)."""

    def __init__(self, sender, schedule: StepSchedule, job_id: str, id_prefix: Optional[str] = None):
        if not schedule.cross_process():
            raise ValueError("schedule: the step has no cross-process collective to announce")
        self.sender = sender
        self.schedule = schedule
        self.job_id = job_id
        self.id_prefix = id_prefix

    def announce(self, iteration: int, *, start_offset_ns: int, window_ns: int,
                 reference_unix_ns: Optional[int] = None) -> int:
        """Queue iteration `iteration`; returns how many items the queue took."""
        taken = 0
        for collectives, demands in plan_iteration(
            self.schedule, job_id=self.job_id, iteration=iteration,
            start_offset_ns=start_offset_ns, window_ns=window_ns, id_prefix=self.id_prefix,
        ):
            for c in collectives:
                taken += self.sender.submit_collective(c, reference_unix_ns)
            if demands:
                taken += self.sender.submit_demands(demands, reference_unix_ns)
        return taken
