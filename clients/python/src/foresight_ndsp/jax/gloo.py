"""What each collective puts on the wire, and its NDSP description.

Assumption (observed with XLA's CPU collectives over gloo, checked in
tests/test_jax_multiprocess.py by byte count only): every collective of a
process group runs as gloo's ring over the group's processes in the
order the replica group lists them, rank r sending to rank r-1. For a
group of N processes and S bytes:

* all-reduce: 2(N-1) steps of S/N: 2(N-1)/N * S bytes on each ring link;
* all-gather (S = gathered output) and reduce-scatter (S = input):
  (N-1)/N * S on each ring link;
* all-to-all (S = each process's send buffer): S/N from every process to
  every other one (direct pairs);
* collective-permute: the operand, from each source to its target.

NDSP's ring kinds expand "ranks[i] sends to ranks[i+1]", so a gloo ring is
announced with the group in reverse order. NCCL maps the same way with its
own ring order (its ring i -> i+1, so the group in forward order, and
`channels` = NCCL's channel count); NCCL's tree all-reduce is
TREE_ALL_REDUCE with the tree's root first; on GPUs the ranks of one server
talk over NVLink and the controller counts only server-crossing edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..types import Collective, CollectiveKind, Demand, Priority, Elasticity
from .schedule import StepCollective

_RING_KIND = {
    "all-reduce": CollectiveKind.RING_ALL_REDUCE,
    "all-gather": CollectiveKind.ALL_GATHER,
    "reduce-scatter": CollectiveKind.REDUCE_SCATTER,
    "all-to-all": CollectiveKind.ALL_TO_ALL,
}


@dataclass(frozen=True)
class WireFlow:
    """Bytes one process sends another for one collective (per execution)."""

    src: int
    dst: int
    size_bytes: int


def ndsp_size(c: StepCollective) -> int:
    """The size NDSP's kind definitions want: all-gather counts the gathered
    output, the others the per-process input."""
    return c.hlo.result_bytes if c.op == "all-gather" else c.hlo.operand_bytes


def wire_flows(c: StepCollective) -> List[WireFlow]:
    """Per-link bytes of one collective under the gloo assumption above."""
    flows: List[WireFlow] = []
    if c.op == "collective-permute":
        return [WireFlow(a, b, c.hlo.operand_bytes) for a, b in c.process_pairs]
    s = ndsp_size(c)
    for g in c.process_groups:
        n = len(g)
        if n < 2:
            continue
        if c.op == "all-to-all":
            flows += [WireFlow(a, b, s // n) for a in g for b in g if a != b]
            continue
        per_link = 2 * (n - 1) * s // n if c.op == "all-reduce" else (n - 1) * s // n
        flows += [WireFlow(g[i], g[i - 1], per_link) for i in range(n)]  # rank r -> r-1
    return flows


def wire_bytes(c: StepCollective) -> int:
    return sum(f.size_bytes for f in wire_flows(c))


def to_ndsp(
    c: StepCollective,
    *,
    job_id: str,
    id_base: str,
    start_offset_ns: int,
    duration_ns: int,
    priority: Priority = Priority.ITERATION_BLOCKING,
    elasticity: Elasticity = Elasticity.INELASTIC,
) -> Tuple[List[Collective], List[Demand]]:
    """NDSP collectives (one per cross-process group) or, for a permute,
    point-to-point demands. Ranks are process indices of the job."""
    common = dict(start_offset_ns=start_offset_ns, duration_ns=max(1, duration_ns), priority=priority, elasticity=elasticity)
    if c.op == "collective-permute":
        demands = [
            Demand(f"{id_base}.p{k}", a, b, c.hlo.operand_bytes, job_id=job_id, **common)
            for k, (a, b) in enumerate(c.process_pairs)
        ]
        return [], demands
    kind = _RING_KIND[c.op]
    out = []
    for k, g in enumerate(c.process_groups):
        if len(g) < 2:
            continue
        ranks = list(reversed(g)) if kind is not CollectiveKind.ALL_TO_ALL else list(g)
        out.append(Collective(f"{id_base}.g{k}", job_id, kind, ranks, ndsp_size(c), **common))
    return out, []


def expected_ring_link_bytes(op: str, n: int, size_bytes: int) -> Optional[int]:
    """2(N-1)/N*S for all-reduce, (N-1)/N*S for all-gather / reduce-scatter."""
    if op == "all-reduce":
        return 2 * (n - 1) * size_bytes // n
    if op in ("all-gather", "reduce-scatter"):
        return (n - 1) * size_bytes // n
    return None


def describe(cs: Sequence[StepCollective]) -> str:
    """One line per collective: order, op, bytes, process groups, wire bytes."""
    lines = []
    for c in cs:
        who = c.process_pairs if c.op == "collective-permute" else c.process_groups
        lines.append(
            f"#{c.hlo.order} {c.op} {c.hlo.name}: operand {c.hlo.operand_bytes} B, result {c.hlo.result_bytes} B, "
            f"processes {list(who)}, on the wire {wire_bytes(c)} B"
            + ("" if c.hlo.repeat == 1 else f", runs {c.hlo.repeat if c.hlo.repeat else 'an unknown number of'} times")
        )
    return "\n".join(lines)
