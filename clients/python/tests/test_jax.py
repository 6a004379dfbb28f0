"""The schedule reader on real compiled JAX programs (skipped without jax).

Multi-process: N JAX processes on loopback (jax.distributed, gloo CPU
collectives), a data-parallel MLP step whose gradients are averaged with
pmean; the reader must find that all-reduce with the parameters' bytes, and
its NDSP form must reserve gloo's ring on the real controller.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="SKIPPED: jax not installed (pip install 'foresight-ndsp[jax]')")

from harness import free_port  # noqa: E402

from foresight_ndsp import NdspClient, ReservationStatus  # noqa: E402
from foresight_ndsp.jax import (  # noqa: E402
    expected_ring_link_bytes,
    job_for_processes,
    plan_iteration,
    schedule_from_text,
    wire_flows,
)

PROGRAMS = Path(__file__).with_name("jax_programs.py")
MS = 1_000_000


def run_processes(n, tmp_path, timeout_s=300):
    port = free_port()
    out = tmp_path / "schedule.json"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    procs = [
        subprocess.Popen([sys.executable, str(PROGRAMS), "dp-worker", str(i), str(n), str(port), str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        for i in range(n)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=timeout_s)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, f"JAX process failed:\n{log[-3000:]}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def dp4(tmp_path_factory):
    return run_processes(4, tmp_path_factory.mktemp("jax4"))


def test_multiprocess_dp_step_all_reduce_is_found_with_its_bytes(dp4):
    n = dp4["num_processes"]
    assert n == 4 and sorted(set(dp4["process_of_device"])) == list(range(n))
    cross = [c for c in dp4["collectives"] if c["cross_process"]]
    assert cross and {c["op"] for c in cross} == {"all-reduce"}
    assert all(c["groups"] == [list(range(n))] for c in cross)
    # Every gradient byte (and the 4-byte loss) is all-reduced once per step.
    assert sum(c["operand_bytes"] for c in cross) == dp4["grad_bytes"] + dp4["loss_bytes"]
    # The training ran and the processes agreed (a pmean'd loss that moves).
    assert dp4["losses"][0] != dp4["losses"][-1]


def test_multiprocess_schedule_announced_as_gloo_ring_on_the_controller(dp4, controller, tenant):
    n = dp4["num_processes"]
    cross = [c for c in dp4["collectives"] if c["cross_process"]]
    hosts = controller.hosts[:n]
    job = job_for_processes("jax-dp", hosts)
    # Rebuild the schedule from the same facts the reader gave (order, bytes, groups).
    from foresight_ndsp.jax import HloCollective, StepCollective, StepSchedule

    schedule = StepSchedule(tuple(
        StepCollective(HloCollective(c["order"], c["name"], c["op"], c["operand_bytes"], c["result_bytes"],
                                     (tuple(range(n)),), (), "main", 1, ""), tuple(map(tuple, c["groups"])), ())
        for c in cross), tuple(dp4["process_of_device"]))
    with NdspClient(controller.target, tenant) as client:
        client.register_job(job)
        items = plan_iteration(schedule, job_id="jax-dp", iteration=1, start_offset_ns=300 * MS, window_ns=20 * MS)
        for collectives, _ in items:
            for col in collectives:
                res = client.submit_collective(col)
                assert res.status is ReservationStatus.ADMITTED, res.advisory
                # The controller's flows are gloo's ring: process r -> r-1, 2(N-1)/N * S each.
                got = {(f.source_address, f.destination_address) for f in res.flows}
                assert got == {(hosts[r], hosts[r - 1]) for r in range(n)}
                sc = next(s for s in schedule.collectives if col.collective_id.startswith(f"jax-dp.i1.c{s.hlo.order}."))
                per_link = expected_ring_link_bytes("all-reduce", n, col.size_bytes)
                assert {f.size_bytes for f in wire_flows(sc)} == {per_link}
                for f in res.flows:
                    moved = f.accepted_bps * (f.end_unix_ns - f.start_unix_ns) / 8e9
                    assert moved == pytest.approx(per_link, rel=0.01)


def test_single_host_multi_device_program_every_collective_kind(tmp_path):
    out = tmp_path / "single.json"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, str(PROGRAMS), "single-host", str(out)], check=True, env=env, timeout=300)
    d = json.loads(out.read_text())
    n, xb, yb = d["devices"], d["x_bytes"], d["y_bytes"]
    # One process per device, as if each device were a host.
    s = schedule_from_text(d["hlo"], list(range(n)))
    ops = {c.op: c for c in s.cross_process()}
    assert set(ops) == {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"}
    assert ops["all-reduce"].hlo.operand_bytes == xb
    assert (ops["all-gather"].hlo.operand_bytes, ops["all-gather"].hlo.result_bytes) == (yb, n * yb)
    assert (ops["reduce-scatter"].hlo.operand_bytes, ops["reduce-scatter"].hlo.result_bytes) == (xb, xb // n)
    assert ops["all-to-all"].hlo.operand_bytes == yb
    assert ops["collective-permute"].process_pairs == tuple((i, (i + 1) % n) for i in range(n))
    # Within one real process, nothing is cross-process.
    assert schedule_from_text(d["hlo"], [0] * n).cross_process() == ()
