#!/usr/bin/env python3
"""A JAX data-parallel training loop that announces its collectives (T+1).

Every process runs the same jitted step (an MLP, gradients averaged with
pmean over gloo). Process 0 reads the step's compiled schedule once, registers
the job (process i -> host address i) and, while iteration k runs, queues
iteration k+1's collectives on a BackgroundSender: start one measured step
period from now, spread over that period. The step never waits on the
controller; the sender's counters are printed at the end.

One command, N local processes on loopback (host addresses are those the
controller's fabric knows, e.g. from `foresight topo show`):

  python announce_jax_step.py --launch 4 --controller 127.0.0.1:50051 \\
      --hosts 10.0.1.1,10.0.1.2,10.0.2.1,10.0.2.2 --steps 20
"""

import argparse
import os
import socket
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--launch", type=int, metavar="N", help="start N local processes of this script and wait")
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--coordinator", default="127.0.0.1:47001", help="jax.distributed coordinator host:port")
    p.add_argument("--controller", default="127.0.0.1:50051", help="Foresight controller NDSP address")
    p.add_argument("--tenant", default="jax-example")
    p.add_argument("--job", default="jax-dp")
    p.add_argument("--hosts", required=True, help="comma-separated IPv4 address of each process's host, by process id")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--width", type=int, default=512, help="hidden width (gradient bytes grow with its square)")
    return p.parse_args()


def launch(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = [a for a in sys.argv[1:]]
    i = base.index("--launch")
    del base[i:i + 2]
    procs = [
        subprocess.Popen([sys.executable, __file__, *base, "--process-id", str(k), "--num-processes", str(args.launch),
                          "--coordinator", f"127.0.0.1:{port}"])
        for k in range(args.launch)
    ]
    return max(p.wait() for p in procs)


def data_parallel_mlp(width, process_id):
    """A data-parallel MLP step over every process's devices (gradients
    averaged with pmean) and its arguments: (step, params, x, y). Call after
    jax.distributed.initialize."""
    import jax
    import jax.numpy as jnp
    from jax import shard_map
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(jax.devices(), ("dp",))
    sizes = [256, width, width, 10]

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.tanh(h)
        return jnp.mean((h - y) ** 2)

    def local_step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        g = jax.lax.pmean(g, "dp")
        return jax.tree.map(lambda p, gp: p - 0.01 * gp, params, g), jax.lax.pmean(l, "dp")

    step = jax.jit(shard_map(local_step, mesh=mesh, in_specs=(P(), P("dp"), P("dp")), out_specs=(P(), P()),
                             check_vma=False))
    key = jax.random.PRNGKey(0)
    params = [(jax.random.normal(key, (a, b)) * 0.05, jnp.zeros((b,))) for a, b in zip(sizes[:-1], sizes[1:])]
    params = jax.device_put(params, NamedSharding(mesh, P()))
    local = jax.random.normal(jax.random.PRNGKey(1 + process_id), (32, sizes[0]))
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("dp")), local)
    y = jax.make_array_from_process_local_data(NamedSharding(mesh, P("dp")), jnp.ones((32, sizes[-1])))
    return step, params, x, y


def main(args):
    hosts = args.hosts.split(",")
    if len(hosts) != args.num_processes:
        sys.exit(f"--hosts: {len(hosts)} addresses for {args.num_processes} processes; give one per process")
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(args.coordinator, num_processes=args.num_processes, process_id=args.process_id)

    from foresight_ndsp import BackgroundSender, NdspClient
    from foresight_ndsp.jax import StepAnnouncer, describe, job_for_processes, read_step_schedule

    step, params, x, y = data_parallel_mlp(args.width, args.process_id)

    schedule = read_step_schedule(step, params, x, y)
    announcer = sender = client = None
    if args.process_id == 0:
        print("cross-process collectives of one step:\n" + describe(schedule.cross_process()), flush=True)
        client = NdspClient(args.controller, args.tenant)
        try:
            client.handshake()
        except Exception as err:  # the loop runs anyway; the sender counts what it cannot send
            print(f"controller not reachable now ({err}); training goes on", flush=True)
        job = job_for_processes(args.job, hosts, library_version=f"jax {jax.__version__}")
        sender = BackgroundSender(client, job=job)
        announcer = StepAnnouncer(sender, schedule, args.job, id_prefix=f"{args.job}.{int(time.time())}")

    params, l = step(params, x, y)  # warm-up: compile once, measure a first period
    jax.block_until_ready(l)
    t0 = time.perf_counter()
    params, l = step(params, x, y)
    jax.block_until_ready(l)
    period_ns = max(int((time.perf_counter() - t0) * 1e9), 1_000_000)
    worst_announce_us = 0.0
    for k in range(args.steps):
        if announcer is not None:  # T+1: the next iteration, while this one runs
            a0 = time.perf_counter()
            announcer.announce(k + 1, start_offset_ns=period_ns, window_ns=period_ns)
            worst_announce_us = max(worst_announce_us, (time.perf_counter() - a0) * 1e6)
        s0 = time.perf_counter()
        params, l = step(params, x, y)
        jax.block_until_ready(l)
        period_ns = int((time.perf_counter() - s0) * 1e9)
    if sender is not None:
        sender.flush(10)
        c = sender.close()
        print(f"steps {args.steps}, last loss {float(l):.4f}, last step {period_ns / 1e6:.1f} ms, "
              f"slowest announce call {worst_announce_us:.0f} us; sender: sent {c.sent}, dropped (queue full) "
              f"{c.dropped_full}, failed {c.failed}, expired {c.expired}, retries {c.retries}", flush=True)
        try:
            print(f"reservations of job {args.job}: {len(client.list_reservations(job_id=args.job))}", flush=True)
        except Exception as err:
            print(f"cannot list reservations: {err}", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    a = parse_args()
    sys.exit(launch(a) if a.launch else main(a))
