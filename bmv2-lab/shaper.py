"""A port shaper on BMv2's per-queue rate limiters.

BMv2 rate-limits every priority queue of a port on its own: a queue of its
own would be a link of its own, and reserved traffic in its own queue would
get a second port's worth of rate. A real switch shapes the port: the
reserved queue is served first (strict priority) up to what was reserved,
with its own ECN profile, and the other queues share what is left of the
line rate. The lab does the same from the controller's answer: while a
reservation's entries are installed on a port ([start - lead, end)), the
reserved queue drains at the rate reserved through that port and each other
data queue at the port's rate minus it; otherwise the data queues get the
whole port. CNPs (queue 7) keep their own small limiter, as before.

In the lab every data packet and ACK is in the RoCE queue (3) or, when
reserved, in the reserved queue, so a port never carries more than its rate.
`schedule` is pure (tested in test_shaper.py); `Shaper` applies it with
simple_switch_CLI at each change.
"""

import threading
import time

CNP_QUEUE = 7


def reserved_pps_changes(reservations, lead_ns, pps_of_bps):
    """(time_ns, (switch, port), +-pps) for every reserved flow: the rate
    it takes from its ports while its entries are installed."""
    out = []
    for r in reservations:
        for f in r["flows"]:
            if f["accepted_bps"] <= 0 or not f["path"]:
                continue
            pps = pps_of_bps(f["accepted_bps"])
            for hop in f["path"]:
                sw, port = hop.rsplit(":", 1)
                key = (sw, int(port))
                out.append((f["start_unix_ns"] - lead_ns, key, pps))
                out.append((f["end_unix_ns"], key, -pps))
    return out


def schedule(reservations, port_pps, lead_ns, pps_of_bps, reserved_queue, data_queues):
    """The queue rates of every port over time: a list of
    (time_ns, switch, port, {queue: pps}), in time order. `port_pps` maps
    (switch, port) to the port's rate. The reserved queue gets what is
    reserved through the port (at least 1 pps, as BMv2 reads 0 as
    unlimited, and less than the port's rate); each other data queue the
    rest, so the two add up to the port's rate."""
    changes = sorted(reserved_pps_changes(reservations, lead_ns, pps_of_bps),
                     key=lambda c: (c[0], c[2]))
    reserved = {}
    out = []
    for t, key, delta in changes:
        if key not in port_pps:
            continue
        reserved[key] = reserved.get(key, 0) + delta
        rate = port_pps[key]
        r = min(rate - 1, max(1, round(reserved[key])))
        rates = {q: rate - r for q in data_queues if q != reserved_queue}
        rates[reserved_queue] = r
        out.append((t, key[0], key[1], rates))
    return out


def port_total(rates, reserved_queue, data_queue):
    """What a port can send per second under `rates`: its shared data
    queue plus its reserved queue (the lab's two data queues)."""
    return rates[data_queue] + rates[reserved_queue]


class Shaper:
    """Applies a schedule in a thread, one simple_switch_CLI call per
    switch and moment; `stop` restores every port to `base` rates."""

    def __init__(self, lab, steps, base):
        self.lab, self.steps, self.base = lab, steps, base
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.applied = 0
        self.errors = []

    def start(self):
        self.thread.start()
        return self

    def _run(self):
        i = 0
        while i < len(self.steps) and not self.stopped.is_set():
            t = self.steps[i][0]
            wait = (t - time.time_ns()) / 1e9
            if wait > 0 and self.stopped.wait(wait):
                break
            by_switch = {}
            while i < len(self.steps) and self.steps[i][0] <= t:
                _, sw, port, rates = self.steps[i]
                by_switch.setdefault(sw, []).extend(
                    f"set_queue_rate {pps} {port} {q}" for q, pps in sorted(rates.items()))
                i += 1
            for sw, cmds in by_switch.items():
                try:
                    self.lab.switch_cli(sw, cmds)
                    self.applied += len(cmds)
                except RuntimeError as e:
                    self.errors.append(str(e))

    def stop(self):
        self.stopped.set()
        self.thread.join(timeout=30)
        for sw in {sw for _, sw, _, _ in self.steps}:
            self.lab.switch_cli(sw, self.base(sw))
