#!/usr/bin/python3
"""The lab's port shaper (shaper.py), without root or BMv2: on the
reservations a recorded all-reduce run got from the controller, no port is
given more than its rate across its queues; a port carrying reservations
gives the reserved queue the most reserved through it at any moment and the
RoCE queue the rest; ports without reservations are left alone. The check
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


def over_rate(rates, port_pps):
    return {k: r for k, r in rates.items()
            if shaper.port_total(r, RESERVED, ROCE) > port_pps[k]}


def main():
    reservations = json.load(gzip.open(RUN))
    # The lab's leaf-spine: hosts on leaf ports 1-4 at 100 Gbit/s, uplinks at 200.
    port_pps = {}
    for r in reservations:
        for f in r["flows"]:
            for hop in f["path"]:
                sw, p = hop.rsplit(":", 1)
                uplink = sw.startswith("spine") or int(p) > 4
                port_pps[(sw, int(p))] = int((200 if uplink else 100) * PPS_PER_GBPS)
    port_pps[("leaf1", 7)] = 250          # a port no reservation crosses
    # Ring flows at 90 % of a 100 G NIC, two channels: 45 Gbit/s each.
    for r in reservations:
        for f in r["flows"]:
            if f["accepted_bps"] > 0 and "ring" in f["flow_id"]:
                f["accepted_bps"] = 45_000_000_000
    pps = lambda bps: bps / 1e9 * PPS_PER_GBPS  # noqa: E731
    rates = shaper.split(reservations, port_pps, pps, RESERVED,
                         [q for q in range(8) if q != shaper.CNP_QUEUE])
    failures = []
    if not rates:
        failures.append("no port shaped for a run with reservations")
    if over_rate(rates, port_pps):
        failures.append(f"ports over their rate: {over_rate(rates, port_pps)}")
    if ("leaf1", 7) in rates:
        failures.append("a port without reservations was shaped")
    peak = shaper.reserved_peak(reservations, pps)
    for key, r in rates.items():
        if r[RESERVED] < min(port_pps[key] - 1, round(peak[key])) or CNP in r:
            failures.append(f"{key}: {r} for a peak of {peak[key]:.1f} packets/s")
    # A host port receiving the ring: 2 channels x 112.5 = 225 of 250.
    host = max((k for k in rates if k[0].startswith("leaf") and k[1] <= 4),
               key=lambda k: rates[k][RESERVED])
    if rates[host][RESERVED] != 225 or rates[host][ROCE] != 25:
        failures.append(f"{host}: {rates[host]}, want 225 reserved and 25 for the rest")
    # The check has teeth: BMv2's default rates would fail it.
    naive = {k: {q: port_pps[k] for q in r} for k, r in rates.items()}
    if not over_rate(naive, port_pps):
        failures.append("every queue at the port's rate went unnoticed")
    for f in failures:
        print("FAIL", f)
    if not failures:
        print(f"ok   port shaper: {len(rates)} ports shaped, none above its rate; {host[0]}:{host[1]} "
              f"gives the reserved queue {rates[host][RESERVED]} and the RoCE queue {rates[host][ROCE]} "
              f"of {port_pps[host]} packets/s")
    return 1 if failures else 0


CNP = shaper.CNP_QUEUE

if __name__ == "__main__":
    sys.exit(main())
