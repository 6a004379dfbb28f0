"""One process of the lab's JAX training job (run by `experiment.py jax`).

The data-parallel MLP step of clients/python/examples/announce_jax_step.py
(gradients averaged with pmean: XLA's CPU collectives over gloo, TCP
between the Mininet hosts). Process i runs on the host whose fabric address
is --hosts[i]; gloo binds to that address (the lab's hosts share one
hostname, which gloo would otherwise resolve).

Process 0 writes one CSV row per step (--out) and, with --controller,
announces each next step's collectives over NDSP while the current one
runs (T+1, `foresight_ndsp.jax.StepAnnouncer` on a BackgroundSender, so
the step never waits on the controller). The announced window opens at
--open-fraction of the last step's length from now and lasts the step's
bytes per ring link at --nic-bps, plus --window-margin, plus the early
opening; the controller plans the bytes over that window.

With --register-only, process 0 registers the job over NDSP and announces
nothing: what the controller reserves it learned from the traffic (T+5,
`experiment.py t5`). --compute-s waits before each step's collectives, the
stand-in for the forward and backward pass an accelerator would run (a
sleep: computing here would take the CPUs the switches need);
--change-at K switches to --width-after / --compute-after from step K on
(another model size and batch: other bytes, another period).

Runs under a Python with jax and foresight-ndsp (see bmv2-lab/README.md).
"""

import argparse
import csv
import os
import sys
import time

# The model is the client's JAX example's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "clients", "python",
                                "examples"))
from announce_jax_step import data_parallel_mlp  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--process-id", type=int, required=True)
    p.add_argument("--hosts", required=True, help="fabric IPv4 address of each process's host, by process id")
    p.add_argument("--coordinator-port", type=int, default=47001,
                   help="jax.distributed coordinator port on process 0's host")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--width", type=int, default=96, help="hidden width (gradient bytes grow with its square)")
    p.add_argument("--out", help="process 0: per-step CSV")
    p.add_argument("--controller", help="process 0: announce each next step to this NDSP address")
    p.add_argument("--tenant", default="ml")
    p.add_argument("--job", default="jax-lab")
    p.add_argument("--nic-bps", type=float, default=0.0, help="the rate the announcement asks for (bit/s)")
    p.add_argument("--window-margin", type=float, default=0.25)
    p.add_argument("--open-fraction", type=float, default=0.8)
    p.add_argument("--register-only", action="store_true",
                   help="process 0: register the job with --controller, announce nothing (T+5)")
    p.add_argument("--compute-s", type=float, default=0.0, help="wait before each step's collectives")
    p.add_argument("--change-at", type=int, help="from this step on, --width-after and --compute-after")
    p.add_argument("--width-after", type=int)
    p.add_argument("--compute-after", type=float)
    return p.parse_args()


def busiest_link(step, params, x, y):
    """The step's compiled schedule and the bytes of its busiest ring link
    (every ring link carries the same)."""
    from foresight_ndsp.jax import read_step_schedule, wire_flows

    schedule = read_step_schedule(step, params, x, y)
    per_link = {}
    for c in schedule.cross_process():
        for f in wire_flows(c):
            per_link[(f.src, f.dst)] = per_link.get((f.src, f.dst), 0) + f.size_bytes
    return schedule, max(per_link.values())


def write_rows(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def use_gloo_bound_to(address):
    """Gloo over TCP, bound to `address` instead of the resolved hostname."""
    import jax
    from jax._src.lib import _jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    make = _jax.make_gloo_tcp_collectives
    _jax.make_gloo_tcp_collectives = lambda **kw: make(hostname=address, **kw)


def main(args):
    hosts = args.hosts.split(",")
    me = hosts[args.process_id]
    use_gloo_bound_to(me)
    import jax

    jax.distributed.initialize(f"{hosts[0]}:{args.coordinator_port}", num_processes=len(hosts),
                               process_id=args.process_id, initialization_timeout=120)
    step, params, x, y = data_parallel_mlp(args.width, args.process_id)

    announcer = sender = None
    link_bytes = 0
    if args.process_id == 0:
        schedule, link_bytes = busiest_link(step, params, x, y)
        print(f"step: {len(schedule.cross_process())} cross-process collectives, {link_bytes} bytes per ring link",
              flush=True)
        if args.controller and args.register_only:
            from foresight_ndsp import NdspClient
            from foresight_ndsp.jax import job_for_processes

            client = NdspClient(args.controller, args.tenant)
            client.handshake()
            client.register_job(job_for_processes(args.job, hosts, library_version=f"jax {jax.__version__}"))
            print(f"registered {args.job}; announcing nothing", flush=True)
        elif args.controller:
            from foresight_ndsp import BackgroundSender, NdspClient
            from foresight_ndsp.jax import StepAnnouncer, job_for_processes

            client = NdspClient(args.controller, args.tenant)
            client.handshake()
            sender = BackgroundSender(client, job=job_for_processes(args.job, hosts,
                                                                     library_version=f"jax {jax.__version__}"))
            announcer = StepAnnouncer(sender, schedule, args.job, id_prefix=f"{args.job}.{time.time_ns()}")

    params, l = step(params, x, y)  # compile; the first collectives set the connections up
    jax.block_until_ready(l)
    period_ns = None
    rows = []
    compute_s = args.compute_s
    for k in range(args.steps):
        if k == args.change_at:
            step, params, x, y = data_parallel_mlp(args.width_after, args.process_id)
            if args.process_id == 0:
                _, link_bytes = busiest_link(step, params, x, y)
            params, l = step(params, x, y)  # compile before the clock runs again
            jax.block_until_ready(l)
            compute_s = args.compute_after
            period_ns = None
            if args.process_id == 0:
                print(f"changed at step {k}: width {args.width_after}, compute {compute_s} s, "
                      f"{link_bytes} bytes per ring link", flush=True)
        if compute_s > 0:
            time.sleep(compute_s)
        if announcer is not None and period_ns is not None:
            comm_ns = link_bytes * 8 / args.nic_bps * 1e9
            opens = int(period_ns * args.open_fraction)
            window = int(comm_ns * (1 + args.window_margin) + (period_ns - opens))
            announcer.announce(k + 1, start_offset_ns=opens, window_ns=window)
        t0 = time.time_ns()
        params, l = step(params, x, y)
        jax.block_until_ready(l)
        t1 = time.time_ns()
        period_ns = t1 - t0
        rows.append({"step": k, "start_unix_ns": t0, "end_unix_ns": t1, "step_s": round(period_ns / 1e9, 4),
                     "compute_s": compute_s, "link_bytes": link_bytes,
                     "announced": int(announcer is not None and k > 0)})
        if args.process_id == 0 and args.out:
            write_rows(args.out, rows)  # every step: a killed job leaves its steps
        if args.process_id == 0:
            print(f"step {k}: {period_ns / 1e9:.3f} s", flush=True)
    if sender is not None:
        sender.flush(5)
        c = sender.close()
        print(f"sender: sent {c.sent}, dropped {c.dropped_full}, failed {c.failed}, expired {c.expired}"
              f"{'; last error: ' + str(sender.last_error) if c.failed else ''}", flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(parse_args()))
