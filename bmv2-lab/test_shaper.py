#!/usr/bin/python3
"""The lab's port shaper (shaper.py), without root or BMv2: on the
reservations a recorded all-reduce run got from the controller, no port is
ever given more than its rate across its queues; a port carrying
reservations gives the reserved queue what was reserved through it and the
RoCE queue the rest; every port is whole again when they end. The check
also catches BMv2's default (every queue at the port's rate).

    python3 bmv2-lab/test_shaper.py
"""

import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import shaper  # noqa: E402

ROCE, RESERVED = 3, 5
PPS_PER_GBPS = 2.5
RUN = os.path.join(HERE, "results", "allreduce", "raw", "s1-foresight", "reservations.json.gz")


def over_rate(steps, port_pps):
    """The steps that give a port more than its rate."""
    return [(t, sw, p, r) for t, sw, p, r in steps
            if shaper.port_total(r, RESERVED, ROCE) > port_pps[(sw, p)]]


def main():
    reservations = json.load(gzip.open(RUN))
    # The lab's leaf-spine: hosts at 100 Gbit/s, uplinks at 200.
    ports = {hop.rsplit(":", 1)[0] + ":" + hop.rsplit(":", 1)[1]
             for r in reservations for f in r["flows"] for hop in f["path"]}
    port_pps = {}
    for hop in ports:
        sw, p = hop.rsplit(":", 1)
        uplink = sw.startswith("spine") or int(p) > 4
        port_pps[(sw, int(p))] = int((200 if uplink else 100) * PPS_PER_GBPS)
    # Ring flows at 90 % of a 100 G NIC, two channels: 45 Gbit/s each.
    for r in reservations:
        for f in r["flows"]:
            if f["accepted_bps"] > 0:
                f["accepted_bps"] = 45_000_000_000 if "ring" in f["flow_id"] else f["accepted_bps"]
    steps = shaper.schedule(reservations, port_pps, 500_000_000,
                            lambda bps: bps / 1e9 * PPS_PER_GBPS, RESERVED,
                            [q for q in range(8) if q != shaper.CNP_QUEUE])
    failures = []
    if not steps:
        failures.append("no shaping step for a run with reservations")
    bad = over_rate(steps, port_pps)
    if bad:
        failures.append(f"{len(bad)} steps give a port more than its rate, e.g. {bad[0]}")
    # While reserved: the reserved queue gets what is reserved.
    busiest = max(steps, key=lambda s: s[3][RESERVED])
    t, sw, p, rates = busiest
    if not rates[RESERVED] > 1 or rates[ROCE] + rates[RESERVED] != port_pps[(sw, p)]:
        failures.append(f"{sw}:{p} at its busiest: {rates} on a {port_pps[(sw, p)]} packets/s port")
    # Afterwards every port is whole.
    last = {}
    for _, s, q, r in steps:
        last[(s, q)] = r
    for (s, q), rates in last.items():
        if rates[ROCE] != port_pps[(s, q)] - 1 or rates[RESERVED] != 1:
            failures.append(f"{s}:{q} after the reservations: {rates}")
    # The check has teeth: BMv2's default rates would fail it.
    naive = [(t, sw, p, {q: port_pps[(sw, p)] for q in r}) for t, sw, p, r in steps]
    if not over_rate(naive, port_pps):
        failures.append("every queue at the port's rate went unnoticed")
    for f in failures:
        print("FAIL", f)
    if not failures:
        print(f"ok   port shaper: {len(steps)} steps over {len(port_pps)} ports, none above its rate; "
              f"busiest {sw}:{p} gives the reserved queue {busiest[3][RESERVED]} and the RoCE queue "
              f"{busiest[3][ROCE]} of {port_pps[(sw, p)]} packets/s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
