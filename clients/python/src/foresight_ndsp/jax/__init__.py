"""Read a compiled JAX step's collectives and announce them over NDSP.

`read_step_schedule(step, *args)` -> the cross-process collectives in
schedule order with bytes and process groups; `gloo` says what each puts
on the wire and how it becomes an NDSP collective; `StepAnnouncer`
announces every iteration ahead of time (T+1) through a BackgroundSender.
Only `schedule.read_step_schedule` imports JAX.
"""

from .announce import StepAnnouncer, job_for_processes, plan_iteration
from .gloo import WireFlow, describe, expected_ring_link_bytes, to_ndsp, wire_bytes, wire_flows
from .hlo import HloCollective, HloParseError, read_collectives, shape_bytes
from .schedule import StepCollective, StepSchedule, read_step_schedule, schedule_from_compiled, schedule_from_text

__all__ = [
    "HloCollective", "HloParseError", "StepAnnouncer", "StepCollective", "StepSchedule", "WireFlow",
    "describe", "expected_ring_link_bytes", "job_for_processes", "plan_iteration", "read_collectives",
    "read_step_schedule", "schedule_from_compiled", "schedule_from_text", "shape_bytes", "to_ndsp",
    "wire_bytes", "wire_flows",
]
