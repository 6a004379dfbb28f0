"""The HLO reader and the gloo expansion on HLO text (no JAX needed)."""

import pytest

from foresight_ndsp import CollectiveKind
from foresight_ndsp.jax import (
    HloParseError,
    expected_ring_link_bytes,
    plan_iteration,
    read_collectives,
    schedule_from_text,
    shape_bytes,
    wire_flows,
)

MODULE = """HloModule jit_step, is_scheduled=true, num_partitions=4

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%body (p: (s32[], f32[256])) -> (s32[], f32[256]) {
  %p = (s32[], f32[256]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %v = f32[256]{0} get-tuple-element(%p), index=1
  %ar.loop = f32[256]{0} all-reduce(%v), channel_id=3, replica_groups=[2,2]<=[4], use_global_device_ids=true, to_apply=%add
  ROOT %t = (s32[], f32[256]{0}) tuple(%i, %ar.loop)
}

%cond (p.1: (s32[], f32[256])) -> pred[] {
  %p.1 = (s32[], f32[256]{0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

ENTRY %main (x: f32[64,128], y: bf16[8,4], z: f32[256]) -> f32[64,128] {
  %x = f32[64,128]{1,0} parameter(0), sharding={replicated}
  %y = bf16[8,4]{1,0} parameter(1)
  %z = f32[256]{0} parameter(2)
  %y2 = bf16[8,4]{1,0} copy(%y)
  %ag = (bf16[32,4]{1,0}, /*index=1*/bf16[32,4]{1,0}) all-gather(%y, /*index=1*/%y2), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %ars = (f32[64,128]{1,0}, f32[64,128]{1,0}) all-reduce-start(%x), channel_id=2, replica_groups=[2,2]<=[2,2]T(1,0), use_global_device_ids=true, to_apply=%add, metadata={op_name="jit(step)/psum"}
  %ard = f32[64,128]{1,0} all-reduce-done(%ars)
  %cp = bf16[8,4]{1,0} collective-permute(%y), channel_id=4, source_target_pairs={{0,1},{1,0},{2,3},{3,2}}
  %zero = s32[] constant(0)
  %init = (s32[], f32[256]{0}) tuple(%zero, %z)
  %w = (s32[], f32[256]{0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}
  ROOT %r = f32[64,128]{1,0} add(%ard, %ard)
}
"""


def test_shape_bytes():
    assert shape_bytes("f32[64,128]{1,0}") == 32768
    assert shape_bytes("bf16[8,4]") == 64
    assert shape_bytes("(f32[4]{0}, s8[3]{0})") == 19
    assert shape_bytes("pred[]") == 1
    with pytest.raises(HloParseError, match="unknown element type 'q7'"):
        shape_bytes("q7[3]")


def test_reads_collectives_in_schedule_order_with_bytes_and_groups():
    cs = read_collectives(MODULE, 4)
    assert [(c.op, c.name) for c in cs] == [
        ("all-gather", "ag"), ("all-reduce", "ars"), ("collective-permute", "cp"), ("all-reduce", "ar.loop")]
    ag, ar, cp, loop = cs
    # Two operands (the second after an /*index=1*/ comment), gathered 4x.
    assert (ag.operand_bytes, ag.result_bytes, ag.groups) == (128, 512, ((0, 1, 2, 3),))
    # An async start holds (operand, result) buffers: the data moved is the operand.
    assert (ar.operand_bytes, ar.result_bytes) == (32768, 32768)
    assert ar.groups == ((0, 2), (1, 3))  # iota [2,2]<=[2,2]T(1,0)
    assert ar.op_name == "jit(step)/psum"
    assert cp.pairs == ((0, 1), (1, 0), (2, 3), (3, 2)) and cp.operand_bytes == 64
    assert (loop.groups, loop.repeat, loop.computation) == (((0, 1), (2, 3)), 5, "body")


def test_processes_map_groups_and_drop_local_traffic():
    # Devices 0,1 in process 0 and 2,3 in process 1.
    s = schedule_from_text(MODULE, [0, 0, 1, 1])
    by_name = {c.hlo.name: c for c in s.collectives}
    assert by_name["ag"].process_groups == ((0, 1),) and by_name["ag"].cross_process
    assert by_name["ars"].process_groups == ((0, 1), (0, 1))
    assert by_name["cp"].process_pairs == () and not by_name["cp"].cross_process
    assert by_name["ar.loop"].process_groups == ((0,), (1,)) and not by_name["ar.loop"].cross_process
    assert [c.hlo.name for c in s.cross_process()] == ["ag", "ars"]


def test_gloo_ring_sends_to_the_previous_rank_with_2_n_minus_1_over_n_bytes():
    s = schedule_from_text(MODULE.replace("replica_groups=[2,2]<=[2,2]T(1,0)", "replica_groups={}"), [0, 1, 2, 3])
    ar = next(c for c in s.collectives if c.hlo.name == "ars")
    flows = wire_flows(ar)
    assert {(f.src, f.dst) for f in flows} == {(0, 3), (1, 0), (2, 1), (3, 2)}
    assert {f.size_bytes for f in flows} == {2 * 3 * 32768 // 4} == {expected_ring_link_bytes("all-reduce", 4, 32768)}


def test_plan_iteration_builds_reverse_ring_collectives_within_the_window():
    s = schedule_from_text(MODULE, [0, 1, 2, 3])
    items = plan_iteration(s, job_id="j", iteration=7, start_offset_ns=1000, window_ns=1_000_000)
    collectives = [c for cs, _ in items for c in cs]
    demands = [d for _, ds in items for d in ds]
    ag = collectives[0]
    assert (ag.collective_id, ag.kind, list(ag.ranks), ag.size_bytes) == (
        "j.i7.c0.g0", CollectiveKind.ALL_GATHER, [3, 2, 1, 0], 512)
    ars = [c for c in collectives if c.collective_id.startswith("j.i7.c1.")]
    assert [list(c.ranks) for c in ars] == [[2, 0], [3, 1]]
    assert {(d.source, d.destination) for d in demands} == {(0, 1), (1, 0), (2, 3), (3, 2)}
    starts = [c.start_offset_ns for c in collectives] + [d.start_offset_ns for d in demands]
    ends = [c.start_offset_ns + c.duration_ns for c in collectives] + [d.start_offset_ns + d.duration_ns for d in demands]
    assert min(starts) == 1000 and max(ends) <= 1000 + 1_000_000
    with pytest.raises(ValueError, match="window_ns: must be positive"):
        plan_iteration(s, job_id="j", iteration=0, start_offset_ns=0, window_ns=0)


def test_text_that_is_not_hlo_is_refused():
    with pytest.raises(HloParseError, match="no ENTRY computation"):
        read_collectives("hello", 2)
    with pytest.raises(HloParseError, match="replica_groups=garbage"):
        read_collectives(MODULE.replace("replica_groups={{0,1,2,3}}", "replica_groups=garbage"), 4)
    with pytest.raises(HloParseError, match="main/ag: operand nope is not defined before its use"):
        read_collectives(MODULE.replace("all-gather(%y,", "all-gather(%nope,"), 4)
    with pytest.raises(ValueError, match="ag: device index 2 outside the 2-device assignment"):
        schedule_from_text(MODULE, [0, 1])
