"""JAX programs the JAX tests run in subprocesses (XLA flags and
jax.distributed must be set before JAX starts, once per process).

  python jax_programs.py dp-worker PROCESS_ID NUM_PROCESSES COORD_PORT OUT.json
      one process of a data-parallel MLP step on CPU, gradients averaged
      with pmean across processes over gloo; process 0 writes the schedule
      it read and the gradient bytes computed from the parameters.
  python jax_programs.py single-host OUT.json
      one process, 4 CPU devices, one of each collective kind; writes the
      compiled HLO text and the byte counts computed from the arrays.
"""

import json
import os
import sys

STEPS = 3


def mlp_params(jnp, sizes):
    return {f"l{i}": {"w": jnp.full((a, b), 0.01, jnp.float32), "b": jnp.zeros((b,), jnp.float32)}
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))}


def dp_worker(pid, n, port, out):
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n, process_id=pid)
    import jax.numpy as jnp
    from jax import shard_map
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    from foresight_ndsp.jax import read_step_schedule

    mesh = Mesh(jax.devices(), ("dp",))
    sizes = [64, 256, 128, 10]

    def loss(params, x, y):
        h = x
        for i in range(len(sizes) - 1):
            h = h @ params[f"l{i}"]["w"] + params[f"l{i}"]["b"]
            if i < len(sizes) - 2:
                h = jnp.tanh(h)
        return jnp.mean((h - y) ** 2)

    def local_step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        g = jax.lax.pmean(g, "dp")  # the data-parallel gradient all-reduce
        l = jax.lax.pmean(l, "dp")
        return jax.tree.map(lambda p, gp: p - 0.1 * gp, params, g), l

    step = jax.jit(shard_map(local_step, mesh=mesh, in_specs=(P(), P("dp"), P("dp")),
                             out_specs=(P(), P()), check_vma=False))
    rep = NamedSharding(mesh, P())
    params = jax.device_put(mlp_params(jnp, sizes), rep)
    batch = 8
    x = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P("dp")), jnp.full((batch, sizes[0]), 1.0 + pid, jnp.float32))
    y = jax.make_array_from_process_local_data(
        NamedSharding(mesh, P("dp")), jnp.ones((batch, sizes[-1]), jnp.float32))

    schedule = read_step_schedule(step, params, x, y)
    losses = []
    for _ in range(STEPS):
        params, l = step(params, x, y)
        losses.append(float(l))
    if pid == 0:
        grad_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(params))
        loss_bytes = 4
        result = {
            "num_processes": jax.process_count(),
            "grad_bytes": grad_bytes,
            "loss_bytes": loss_bytes,
            "losses": losses,
            "process_of_device": list(schedule.process_of_device),
            "collectives": [
                {"order": c.hlo.order, "op": c.op, "name": c.hlo.name, "operand_bytes": c.hlo.operand_bytes,
                 "result_bytes": c.hlo.result_bytes, "groups": [list(g) for g in c.process_groups],
                 "cross_process": c.cross_process, "repeat": c.hlo.repeat}
                for c in schedule.collectives
            ],
        }
        with open(out, "w") as f:
            json.dump(result, f)
    jax.distributed.shutdown()


def single_host(out):
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    import jax
    import jax.numpy as jnp
    from jax import shard_map
    from jax.sharding import Mesh, PartitionSpec as P

    mesh = Mesh(jax.devices(), ("d",))
    n = 4

    def f(x, y):
        a = jax.lax.psum(x, "d")
        b = jax.lax.all_gather(y, "d", tiled=True)
        c = jax.lax.psum_scatter(x, "d", tiled=True)
        d = jax.lax.all_to_all(y, "d", 0, 0, tiled=True)
        e = jax.lax.ppermute(y, "d", [(i, (i + 1) % n) for i in range(n)])
        return a, b, c, d, e

    g = jax.jit(shard_map(f, mesh=mesh, in_specs=(P("d"), P("d")),
                          out_specs=(P(), P(), P("d"), P("d"), P("d")), check_vma=False))
    x = jnp.ones((16 * n, 32), jnp.float32)  # per device 16x32 f32
    y = jnp.ones((8 * n, 4), jnp.float32)  # per device 8x4 f32
    compiled = g.lower(x, y).compile()
    xb, yb = 16 * 32 * 4, 8 * 4 * 4  # per-device bytes
    with open(out, "w") as fh:
        json.dump({"hlo": compiled.as_text(), "devices": n, "x_bytes": xb, "y_bytes": yb}, fh)


if __name__ == "__main__":
    if sys.argv[1] == "dp-worker":
        dp_worker(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "single-host":
        single_host(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]!r}; see the docstring")
