"""A port shaper on BMv2's per-queue rate limiters.

BMv2 rate-limits every priority queue of a port on its own: a queue of its
own would be a link of its own, and reserved traffic in its own queue would
get a second port's worth of rate. A real switch shapes the port: the
reserved queue is served first (strict priority) up to what was reserved,
with its own ECN profile, and the other queues share what is left of the
line rate.

The lab splits each port's rate for a whole run: the reserved queue gets
the most that is reserved through the port at any moment of the run, each
other data queue the rest. The split is fixed because BMv2 stamps a
packet's departure time when it is enqueued (`max(now, last + 1/rate)`):
a rate lowered for a reservation window would leave the queue's backlog
scheduled at the low rate long after the window. Unlike a real scheduler
the split is not work-conserving: on a port that carries reservations,
competing traffic gets only the unreserved rest for the whole run, even
when the reserved queue idles. CNPs and ACKs (queue 7 in this mode) keep
their own small limiter, as before.

The same split puts reserved background in its place (learned_experiment.py,
`--background-tc 1`): its queue gets what it reserved, the job's queue the
rest, as a strict-priority port would give the job at least.

`split` is pure (tested in test_shaper.py); `apply` sets it with
simple_switch_CLI, `shape_lab` and `unshape` around a run.
"""

CNP_QUEUE = 7


def reserved_peak(reservations, pps_of_bps):
    """(switch, port) -> the most packets/s reserved through the port at
    any moment, from the controller's answer (flows, paths, windows)."""
    changes = []
    for r in reservations:
        for f in r["flows"]:
            if f["accepted_bps"] <= 0 or not f["path"]:
                continue
            pps = pps_of_bps(f["accepted_bps"])
            for hop in f["path"]:
                sw, port = hop.rsplit(":", 1)
                key = (sw, int(port))
                changes.append((f["start_unix_ns"], pps, key))
                changes.append((f["end_unix_ns"], -pps, key))
    # Ends before starts at the same moment: back-to-back windows do not add.
    changes.sort(key=lambda c: (c[0], c[1]))
    now, peak = {}, {}
    for _, delta, key in changes:
        now[key] = now.get(key, 0) + delta
        peak[key] = max(peak.get(key, 0), now[key])
    return peak


def split(reservations, port_pps, pps_of_bps, reserved_queue, data_queues):
    """{(switch, port): {queue: pps}} for every port that carries a
    reservation: the reserved queue its peak reserved rate (at least 1, as
    BMv2 reads 0 as unlimited, and less than the port's rate), each other
    data queue the rest, so the two add up to the port's rate."""
    out = {}
    for key, peak in sorted(reserved_peak(reservations, pps_of_bps).items()):
        if key not in port_pps:
            continue
        rate = port_pps[key]
        r = min(rate - 1, max(1, round(peak)))
        rates = {q: rate - r for q in data_queues if q != reserved_queue}
        rates[reserved_queue] = r
        out[key] = rates
    return out


def port_total(rates, reserved_queue, data_queue):
    """What a port can send per second under `rates`: its shared data
    queue plus its reserved queue (the lab's two data queues)."""
    return rates[data_queue] + rates[reserved_queue]


def shape_lab(lab, reservations, pps_per_gbps, reserved_queue, shared_queue):
    """Split the rate of every lab port that carries one of `reservations`
    (the controller's answer) between `reserved_queue` and the other data
    queues, for a run; the collector's port is left alone. Returns the
    rates set, for `unshape`."""
    f = lab.fabric
    unshaped = {(f.hosts[lab.collector]["leaf"], f.hosts[lab.collector]["port"])} if lab.collector else set()
    port_pps = {k: lab.rate_pps(g) for k, g in f.port_gbps().items() if k not in unshaped}
    data_queues = [q for q in range(8) if q != CNP_QUEUE]
    rates = split(reservations, port_pps, lambda bps: bps / 1e9 * pps_per_gbps, reserved_queue, data_queues)
    for key, qs in rates.items():
        total = port_total(qs, reserved_queue, shared_queue)
        if total > port_pps[key]:
            raise RuntimeError(f"shaper would give {key} {total} packets/s")
    apply(lab, rates)
    return rates


def unshape(lab, rates):
    """Every queue of the ports `shape_lab` shaped back at the port's rate."""
    gbps = lab.fabric.port_gbps()
    apply(lab, {k: {q: lab.rate_pps(gbps[k]) for q in qs} for k, qs in rates.items()})


def apply(lab, rates):
    """Set `rates` ({(switch, port): {queue: pps}}), one CLI call per switch."""
    by_switch = {}
    for (sw, port), qs in sorted(rates.items()):
        by_switch.setdefault(sw, []).extend(
            f"set_queue_rate {pps} {port} {q}" for q, pps in sorted(qs.items()))
    for sw, cmds in by_switch.items():
        lab.switch_cli(sw, cmds)
