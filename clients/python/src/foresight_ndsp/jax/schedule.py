"""The communication schedule of a jitted JAX step, per process.

`read_step_schedule(step, *args)` compiles the step exactly as it will run
(`jax.jit(step).lower(*args).compile()`), reads the scheduled HLO
(hlo.py) and maps each collective's participants from devices to JAX
process indices, which is what crosses the network: one process per host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from .hlo import HloCollective, read_collectives


@dataclass(frozen=True)
class StepCollective:
    """A collective with its participants as process groups (first-seen order
    of each group's devices; several devices of one process count once)."""

    hlo: HloCollective
    process_groups: Tuple[Tuple[int, ...], ...]
    process_pairs: Tuple[Tuple[int, int], ...]  # collective-permute, cross-process pairs only

    @property
    def op(self) -> str:
        return self.hlo.op

    @property
    def cross_process(self) -> bool:
        return any(len(g) > 1 for g in self.process_groups) or bool(self.process_pairs)


@dataclass(frozen=True)
class StepSchedule:
    """Every collective of one execution of the step, in schedule order."""

    collectives: Tuple[StepCollective, ...]
    process_of_device: Tuple[int, ...]  # device-assignment index -> process index

    @property
    def num_processes(self) -> int:
        return len(set(self.process_of_device))

    def cross_process(self) -> Tuple[StepCollective, ...]:
        """The collectives that leave a process, i.e. reach the network."""
        return tuple(c for c in self.collectives if c.cross_process)


def _dedup(seq) -> Tuple[int, ...]:
    seen, out = set(), []
    for x in seq:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return tuple(out)


def schedule_from_text(text: str, process_of_device: Sequence[int]) -> StepSchedule:
    """A schedule from HLO text and the process of each device-assignment slot."""
    pod = tuple(process_of_device)
    out = []
    for c in read_collectives(text, len(pod)):
        for d in (x for g in c.groups for x in g):
            if d >= len(pod):
                raise ValueError(f"{c.name}: device index {d} outside the {len(pod)}-device assignment")
        groups = tuple(_dedup(pod[d] for d in g) for g in c.groups)
        pairs = tuple((pod[a], pod[b]) for a, b in c.pairs if pod[a] != pod[b])
        out.append(StepCollective(c, groups, pairs))
    return StepSchedule(tuple(out), pod)


def device_assignment(compiled) -> Tuple:
    """The devices of a compiled executable, in assignment order."""
    shardings = [s for s in _flatten(getattr(compiled, "input_shardings", ())) if hasattr(s, "_device_assignment")]
    shardings += [s for s in _flatten(getattr(compiled, "output_shardings", ())) if hasattr(s, "_device_assignment")]
    if shardings:
        return tuple(shardings[0]._device_assignment)
    import jax

    return tuple(jax.devices())


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _flatten(y)
    elif x is not None:
        yield x


def schedule_from_compiled(compiled, devices: Optional[Sequence] = None) -> StepSchedule:
    devs = tuple(devices) if devices is not None else device_assignment(compiled)
    return schedule_from_text(compiled.as_text(), [d.process_index for d in devs])


def read_step_schedule(step, *args, **kwargs) -> StepSchedule:
    """Compile `step` (a function or an already jitted one) for these arguments
    and read its collectives. Compilation is cached by JAX, so calling the
    step afterwards runs this very executable."""
    import jax

    jitted = step if hasattr(step, "lower") else jax.jit(step)
    return schedule_from_compiled(jitted.lower(*args, **kwargs).compile())
