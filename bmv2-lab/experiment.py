#!/usr/bin/python3
"""bmv2-lab experiments: ring all-reduce and all-to-all under ECMP, QP-aware ECMP, flowlets, spraying and Foresight.

    sudo bmv2-lab/experiment.py allreduce [--seeds 10] [--out bmv2-lab/results/allreduce] [--nic gbn|ooo]
                                          [--tenants] [--link-down SWITCH:PORT]
    sudo bmv2-lab/experiment.py alltoall  [--seeds 5]  [--moe-skew 0.3] [--link-down SWITCH:PORT]
    sudo bmv2-lab/experiment.py predrain  [--seeds 3]  [--out bmv2-lab/results/predrain]
    sudo bmv2-lab/experiment.py jax       [--seeds 5]  [--out bmv2-lab/results/jax]   (jax_experiment.py)
    sudo bmv2-lab/experiment.py t5        [--seeds 2]  [--out bmv2-lab/results/t5]    (learned_experiment.py)
    sudo bmv2-lab/experiment.py overrun   [--seeds 3]  [--out bmv2-lab/results/overrun] (overrun_experiment.py)
    sudo bmv2-lab/experiment.py plot --out DIR          # plots again from DIR/*.csv

One lab (bmv2-lab/lab.py) is brought up for the whole experiment and taken
down at the end, also on Ctrl-C or an error. For every seed the same traffic
(one rocegen spec: QPs drawn from the seed, background flows) runs once per
mode:

  ecmp5      switches hash RoCEv2 on the 5-tuple; like a NIC that gives all
             QPs of a connection one UDP source port, the K channels of a
             neighbour pair share one source port, so they hash as one flow;
  qp         QP-aware ECMP: every channel (QP) hashes on its own;
  foresight  QP-aware ECMP plus Foresight: the runner sends the forecast
             (every ring connection, and the background flows it knows of)
             to the controller over NDSP, as one batch, before the burst; the
             controller reserves paths and installs SR, INT and pre-drain
             entries --lead-time-ms ahead;
  flowlet    flowlet switching (LetFlow): every switch gives a QP a random
             member and draws a new one after a pause longer than
             --flowlet-timeout-ms (default: twice the lab's round trip);
  spray      per-packet spraying: every switch picks a random member for
             every packet (NICs must cope with reordering);
  foresight-entropy
             Foresight on a fabric that cannot run its program: the switches
             hash the 5-tuple and nothing is installed for a reservation (no
             SR push, no reservation table, no pre-drain); the controller
             (--steering entropy-only) tells every reserved connection the
             UDP source port whose hash takes its reserved path, and the
             hosts send on it. --int-path-check has the collector read every
             steered connection's path from INT (leaf-spine-lab, jax-lab).
flowlet and spray send the qp mode's traffic (one source port per QP); by
default the experiment runs ecmp5, qp and foresight.

In every mode each switch hashes with its own ECMP seed and its tier's hash
offset (the controller's default: CRC-32 of the switch name; leaves 0,
spines 10, super-spines 20 bits), so tiers decide independently;
--hash-seed seeds-only keeps the seeds without offsets, same:N gives every
switch seed N and no offset, the polarised fabric.

--nic chooses the hosts' kind of RoCE NIC for the whole experiment (rocegen
--nic): gbn, go-back-N RC, where a reordered packet draws a NAK and the
sender goes back; or ooo, out-of-order placement with selective ACKs, where
only missing packets are resent (what spraying needs). runs.csv records it
with the NAKs, rewinds and resent bytes of every run; ooo results go to
results/<experiment>-ooo unless --out says otherwise.

Workloads. allreduce: a ring over every host (ranks alternate leaves, so
every hop crosses the spines), with two long background flows of another
tenant (known to Foresight, priority background). --tenants: two tenants
sharing the leaves instead: the last host of each leaf serves inference and
the others train; the inference tenant moves KV caches between its hosts
(--kv-bursts of --kv-bytes at the NIC's full rate, at random moments during
the ring, announced to nobody; --kv-announced has them in Foresight's
forecast too, latency-critical, as a bound on what announcing would buy).
alltoall: every host sends to every other
at once (MoE's dispatch), each destination's share weighted by a seeded
log-normal expert popularity (--moe-skew, 0 for an even all-to-all), every
flow at the rate that ends them together at the busiest NIC's pace.
--link-down takes one fabric link down for the whole experiment (the
controller is told, drops it from routes and groups and plans around it),
so the fabric has less than it was built with; the simulator gets the topology without it.

The ideal completion time is the collective packets through the busiest NIC
(for the ring, 2(N-1)/N of the buffer) divided by the NIC's rate: the lab's
switch ports drain slightly faster than a NIC sends (--nic-fraction), as a
port's line rate exceeds a NIC's goodput, and the uplinks are non-blocking
(with --link-down they no longer are: the ideal stays the NIC's).

Results: DIR/runs.csv (one row per seed and mode), DIR/links.csv (bytes per
switch port and run, from the P4 tx counters), DIR/queue.csv (INT queue
depth seen by reserved packets: queue_timeline.csv, the deepest per 50 ms,
and queue_stats.csv, per run; every hop in raw/queue.csv), DIR/raw/<run>/ (every
host's rocegen CSVs), and plots (DIR/*.png).
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as labmod  # noqa: E402
import labkit  # noqa: E402
import shaper as shapermod  # noqa: E402

MODES = ("ecmp5", "qp", "foresight", "flowlet", "spray", "foresight-entropy")
# The modes whose forecast goes to the controller.
FORECAST_MODES = ("foresight", "foresight-entropy")
DEFAULT_MODES = ("ecmp5", "qp", "foresight")
# The controller's --ecmp-hash in each mode.
ECMP_HASH = {"ecmp5": "five-tuple", "qp": "qp-aware", "foresight": "qp-aware",
             "flowlet": "flowlet", "spray": "spray", "foresight-entropy": "five-tuple"}
# The controller's --steering in each mode (sr unless said).
STEERING = {"foresight-entropy": "entropy-only"}
# Flowlet timeout: twice the lab's unloaded round trip, so that a flowlet
# ends only at a pause (a ring step waiting for its predecessor, a DCQCN
# rate cut) and a QP sending at its rate stays one flowlet. At 2.5 packets/s
# per Gbit/s a packet takes 2 ms on a 200 Gbit/s uplink and 4 ms on a
# 100 Gbit/s host port: on leaf-spine-lab a data packet crosses a leaf
# uplink, a spine downlink and a host port (8 ms), its ACK the same back,
# plus BMv2's processing, about 1 ms per switch: a 20 ms round trip (pod3's
# cross-pod paths, 5 switches, about 30 ms). A channel at its full rate
# (2 channels share 90 % of 250 packets/s) sends every 9 ms, well inside.
FLOWLET_TIMEOUT_MS = 40.0
# --background-dscp: a DSCP the controller maps to no queue lands in queue
# 0, below the RoCE queue (3); Foresight's reserved background goes there too.
LOW_QUEUE = 0
# Ingress drop reasons worth counting per run (p4src/README.md, "Drop reasons").
DROP_REASONS = (1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13)


class Experiment:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        os.makedirs(os.path.join(self.out, "raw"), exist_ok=True)
        self.rocegen = labmod.foresight_bin("rocegen")
        self.foresight = labmod.foresight_bin("foresight")
        self.lab = labmod.Lab(args.topology, name=args.name, pps_per_gbps=args.pps_per_gbps,
                              queue_depth=args.queue_depth)
        f = self.lab.fabric
        self.hosts = labkit.ring_order(f, [h for h in f.hosts if h != self.lab.collector])
        # With --tenants, the last host of each leaf serves inference and the
        # rest train: the tenants share leaves and uplinks, not NICs.
        self.inference = tenant_hosts(f, self.hosts) if getattr(args, "tenants", False) else []
        self.ranks = [h for h in self.hosts if h not in self.inference]
        gbps = {float(f.hosts[h].get("gbps", 100.0)) for h in self.hosts}
        if len(gbps) != 1:
            raise SystemExit("the experiment wants every ring host at the same NIC speed")
        self.host_gbps = gbps.pop()
        self.port_pps = self.lab.rate_pps(self.host_gbps)
        self.nic_pps = self.port_pps * args.nic_fraction
        self.flow_pps = self.nic_pps / args.channels
        self.collective = "all-to-all" if args.cmd == "alltoall" else "ring-allreduce"
        self.controller_mode = None
        self.down_link = find_link(f, args.link_down) if getattr(args, "link_down", None) else None
        self.topology_copy = None
        self.int_reports = self.lab.collector is not None and (
            args.cmd == "predrain" or getattr(args, "int_path_check", False))
        if getattr(args, "int_path_check", False) and not self.lab.collector:
            raise SystemExit("--int-path-check needs the topology's collector host (INT reports)")
        if "foresight-entropy" in getattr(args, "modes", ()) and args.reserved_queue == "own":
            raise SystemExit("--reserved-queue own puts reserved traffic in a queue by its SR label; "
                             "foresight-entropy installs none (run it with the shared queue)")

    # -- controller per mode ----------------------------------------------
    def ecmp_hash(self, mode):
        """The fabric's hash in `mode`; --foresight-hash can make SR
        Foresight's unreserved traffic hash as foresight-entropy's does."""
        return getattr(self.args, "foresight_hash", "qp-aware") if mode == "foresight" else ECMP_HASH[mode]

    def controller(self, mode, predrain=True):
        steering = STEERING.get(mode, "sr")
        key = (self.ecmp_hash(mode), steering, predrain)
        if self.controller_mode == key:
            return
        self.lab.stop_controller()
        # Reserved traffic in the RoCE queue (3) like everything else; or,
        # with --reserved-queue own, in a queue of its own (5) with its own
        # ECN profile and the port shaped across queues (shaper.py).
        tc = labkit.RESERVED_QUEUE if self.args.reserved_queue == "own" else labkit.ROCE_QUEUE
        extra = ["--ecmp-hash", self.ecmp_hash(mode),
                 "--flowlet-timeout-us", str(int(self.args.flowlet_timeout_ms * 1000)),
                 "--hash-seed", self.args.hash_seed, "--reserved-tc", str(tc),
                 "--background-tc", str(tc if self.args.background_dscp is None else LOW_QUEUE),
                 "--headroom", "1.0", "--lead-time-ms", str(self.args.lead_time_ms),
                 "--steering", steering]
        if not predrain:
            extra += ["--predrain-probability", "0"]
        if not self.args.lowered_ecn:
            # No lowered profile: the static one stays on reserved ports and
            # pre-drain alone slows the competing flows down.
            extra += ["--lowered-ecn", "10,50,13107"]
        if self.int_reports:
            # Only when INT is measured: report copies cross the fabric to
            # the collector and would count as load on the links.
            extra += ["--int-collector", self.lab.collector]
        if self.args.follow_traffic and mode in FORECAST_MODES:
            # The controller's own INT collector is not on here (reports go
            # to the lab's collector host): it sees reserved flows by their
            # watch counters.
            # A ring flow waiting out a retransmission timeout still sends.
            extra += ["--follow-traffic", "--follow-from", "counters",
                      "--release-idle-ms", str(2 * self.args.rto_ms)]
        if steering == "entropy-only" and getattr(self.args, "switch_hash", None):
            extra += ["--switch-hash", os.path.abspath(self.args.switch_hash)]
        self.lab.start_controller(*extra)
        self.controller_mode = key
        if self.args.link_down:
            self.take_link_down()

    def take_link_down(self):
        """--link-down: the controller is told the link failed, as a link
        monitor would tell it; it drops the link from routes and ECMP groups
        and plans reservations around it, so no packet takes it. The veths
        stay up: BMv2 1.15 stops forwarding on every port once one of its
        interfaces goes down, and does not recover when it comes back up.
        links.csv shows the link carried nothing."""
        self.lab.fabric_cmd([self.foresight, "link", "down", self.args.link_down, "--http", labmod.HTTP_ADDR])

    # -- one run -----------------------------------------------------------
    def spec(self, seed):
        f = self.lab.fabric
        hosts = ",".join(f"{h}={f.ip(h)}" for h in self.ranks)
        if self.collective == "ring-allreduce":
            shape = ["--channels", str(self.args.channels), "--line-rate-pps", f"{self.flow_pps:.3f}"]
        else:
            shape = ["--line-rate-pps", f"{self.nic_pps / (len(self.ranks) - 1):.3f}"]
        args = [self.rocegen, "spec", self.collective, "--hosts", hosts, "--bytes", str(self.args.bytes),
                "--qp-seed", str(seed), *shape, "--start-in-ms", "0", "-o", "-"]
        for bg in [] if self.inference else self.background(seed):
            args += ["--background", bg]
        spec = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
        if self.collective == "all-to-all":
            moe_reweight(spec, self.args.moe_skew, seed, self.nic_pps)
        if self.args.background_dscp is not None:
            for fl in spec["flows"]:
                if fl["kind"] != "collective":
                    fl["dscp"] = self.args.background_dscp
        if self.inference:
            self.add_kv_bursts(spec, seed)
        return spec

    def add_kv_bursts(self, spec, seed):
        """--tenants: the inference tenant's KV-cache transfers, prefill to
        decode between its hosts on different leaves, each --kv-bytes at
        the full NIC rate on a QP pair of its own. They start at random
        moments while the all-reduce should run (uniform over its ideal
        time, drawn from the seed), as requests finishing prefill would,
        and are not announced to Foresight."""
        import random
        rng = random.Random(seed * 7919 + 2)
        ideal_ns = self.ideal_s(spec) * 1e9
        used = {(fl[h], fl[q]) for fl in spec["flows"] for h, q in (("src", "src_qp"), ("dst", "dest_qp"))}

        def qp(host):
            while True:
                n = rng.randrange(0x100, 1 << 24)
                if (host, n) not in used:
                    used.add((host, n))
                    return n
        f = self.lab.fabric
        for h in self.inference:
            spec["hosts"][h] = f.ip(h)
        for k in range(self.args.kv_bursts):
            src, dst = rng.sample(self.inference, 2)
            src_qp, dest_qp = qp(src), qp(dst)
            spec["flows"].append({
                "id": f"kv{k}-{src}-{dst}", "kind": "background", "src": src, "dst": dst,
                "src_qp": src_qp, "dest_qp": dest_qp, "udp_src_port": 49152 + dest_qp % 16384,  # rocegen gen::udp_port_for
                "bytes": self.args.kv_bytes, "line_rate_pps": round(self.nic_pps, 3),
                "dscp": spec["flows"][0]["dscp"], "start_offset_ns": int(rng.uniform(0, ideal_ns)), "after": []})

    def background(self, seed):
        """Long flows of another tenant between hosts of different leaves, at
        half a NIC's rate, starting before the all-reduce; chosen per seed."""
        import random
        rng = random.Random(seed * 7919 + 1)
        out = []
        leaves = {}
        for h in self.ranks:
            leaves.setdefault(self.lab.fabric.hosts[h]["leaf"], []).append(h)
        groups = list(leaves.values())
        used = set()
        for _ in range(self.args.background):
            a, b = rng.sample(range(len(groups)), 2) if len(groups) > 1 else (0, 0)
            src = rng.choice(groups[a])
            free = [h for h in groups[b] if h != src and h not in used]
            if not free:
                continue
            dst = rng.choice(free)
            used.add(dst)
            out.append(f"{src}:{dst}:{10**9}:{self.nic_pps * self.args.background_share:.3f}")
        return out

    def topology_as_run(self):
        """The topology the runs saw, for the simulator (compare_sim.py): the
        lab's file, or with --link-down a copy without the down link (written
        once per experiment)."""
        if not self.down_link:
            return self.lab.fabric.path
        if self.topology_copy:
            return self.topology_copy
        import yaml
        with open(self.lab.fabric.path) as fh:
            doc = yaml.safe_load(fh)
        doc["links"] = [l for l in doc["links"] if l != self.down_link]
        doc["name"] = f"{doc.get('name', 'lab')}-{self.args.link_down.replace(':', '-')}-down"
        path = os.path.join(self.out, f"{doc['name']}.yaml")
        with open(path, "w") as fh:
            fh.write(f"# {self.lab.fabric.path} with {self.args.link_down} down (experiment.py --link-down)\n")
            yaml.safe_dump(doc, fh, sort_keys=False)
        self.topology_copy = path
        return path

    def ideal_s(self, spec):
        """The busiest NIC's collective packets (sent or received: MoE's hot
        experts receive more than they send) / its rate, the bottleneck."""
        return collective_packets_busiest_nic(spec) / self.nic_pps

    def prepare(self, spec, mode, start_ns):
        s = json.loads(json.dumps(spec))
        s["start_unix_ns"] = start_ns
        s["dcqcn"] = labkit.LAB_DCQCN
        coll = [fl for fl in s["flows"] if fl["kind"] == "collective"]
        kv = [fl for fl in s["flows"] if is_kv_burst(fl)]
        bg = [fl for fl in s["flows"] if fl["kind"] != "collective" and not is_kv_burst(fl)]
        ring_start = start_ns + self.args.background_lead_ms * 1_000_000
        for fl in coll + kv:
            fl["start_offset_ns"] += self.args.background_lead_ms * 1_000_000
        if mode == "ecmp5":
            # One UDP source port per neighbour pair, shared by its channels.
            first = {}
            for fl in coll:
                first.setdefault((fl["src"], fl["dst"]), fl["udp_src_port"])
                fl["udp_src_port"] = first[(fl["src"], fl["dst"])]
        ideal = self.ideal_s(s)
        # Background flows stop when the all-reduce should long be over.
        for fl in bg:
            fl["stop_offset_ns"] = int((self.args.background_lead_ms / 1e3 + ideal * 2.5 + 1.0) * 1e9)
        return s, ring_start, ideal

    def forecast(self, spec, ring_start, ideal, path, tag):
        """The NDSP forecast: one demand per QP connection of the ring (its
        bytes over the whole all-reduce, at its share of the NIC's line rate), and the
        background flows at their rate. The ring's window: the ideal time
        plus --window-margin (25 %)."""
        f = self.lab.fabric
        conns = {}
        for fl in spec["flows"]:
            if is_kv_burst(fl) and not getattr(self.args, "kv_announced", False):
                continue  # the inference tenant announces nothing
            key = (fl["src"], fl["dst"], fl["dest_qp"])
            c = conns.setdefault(key, {"bytes": 0, "kind": "kv" if is_kv_burst(fl) else fl["kind"],
                                       "pps": fl["line_rate_pps"],
                                       "start": spec["start_unix_ns"] + fl["start_offset_ns"]})
            c["bytes"] += fl["bytes"]
            c["start"] = min(c["start"], spec["start_unix_ns"] + fl["start_offset_ns"])
        demands = []
        for (src, dst, qp), c in sorted(conns.items()):
            gbps = c["pps"] / self.port_pps * self.host_gbps
            if c["kind"] == "collective":
                # The job forecasts its NIC's line rate, shared by the
                # connections in the proportion they send at (the ring's
                # channels equally, MoE's by their tokens); with the port
                # shaped (--reserved-queue own), the rate the NIC sends at,
                # as a reservation of the full line rate would leave the
                # port's other traffic nothing.
                share = self.args.nic_fraction if self.args.reserved_queue == "own" else 1.0
                gbps = self.host_gbps * share * c["pps"] / self.nic_pps
                dur_ms = ideal * 1e3 * (1 + self.args.window_margin)
                demands.append({"id": f"{tag}-ring-{src}-{dst}-{qp}", "src": f.ip(src), "dst": f.ip(dst), "qp": qp,
                                "bytes": int(gbps * 1e9 / 8 * dur_ms / 1e3), "rate_gbps": gbps,
                                "start_unix_ns": ring_start, "priority": "iteration-blocking"})
            elif c["kind"] == "kv":
                # --kv-announced: each transfer, its bytes at its rate from
                # its start, as latency-critical traffic.
                demands.append({"id": f"{tag}-kv-{src}-{dst}-{qp}", "src": f.ip(src), "dst": f.ip(dst), "qp": qp,
                                "bytes": c["bytes"], "rate_gbps": gbps, "start_unix_ns": c["start"],
                                "priority": "latency-critical"})
            else:
                dur_ms = (ideal * 2.5 + 1.0) * 1e3 + self.args.background_lead_ms
                demands.append({"id": f"{tag}-bg-{src}-{dst}-{qp}", "src": f.ip(src), "dst": f.ip(dst), "qp": qp,
                                "bytes": int(gbps * 1e9 / 8 * dur_ms / 1e3), "rate_gbps": gbps,
                                "start_unix_ns": c["start"], "priority": "background"})
        res = labkit.reserve_batch(self.lab, demands, path)
        flows = [fl for rv in res for fl in rv["flows"]]
        reserved = sum(1 for fl in flows if fl["accepted_bps"] > 0)
        by_ip = {f.ip(h): h for h in f.hosts}
        # Entropy steering: every packet of a steered connection leaves on
        # the source port it was told.
        steered = 0
        for fl in flows:
            port = fl.get("udp_src_port")
            if port is None:
                continue
            steered += 1
            for g in spec["flows"]:
                if (g["src"], g["dst"], g["dest_qp"]) == (by_ip[fl["src"]], by_ip[fl["dst"]], fl["dest_qp"]):
                    g["udp_src_port"] = port
        # The NDSP contract: a sender keeps to the bandwidth it was granted
        # when the grant is partial; what fell back to ECMP sends as it likes.
        for fl in flows:
            if 0 < fl["accepted_bps"] < fl["requested_bps"]:
                for g in spec["flows"]:
                    if (g["src"], g["dst"], g["dest_qp"]) == (by_ip[fl["src"]], by_ip[fl["dst"]], fl["dest_qp"]):
                        g["line_rate_pps"] *= fl["accepted_bps"] / fl["requested_bps"]
        return reserved, len(flows), steered, [d["id"] for d in demands]

    def ack_class(self):
        """With reserved traffic in its own queue, ACKs and NAKs ride the
        CNP class (DSCP 48, queue 7, above data) in every mode, as fabrics
        that give control packets a class of their own do; otherwise the
        flow's own class."""
        return ["--ack-dscp", "48"] if self.args.reserved_queue == "own" else []

    def nic_args(self):
        """The hosts' NIC kind (rocegen --nic), the same on every host."""
        extra = ["--ooo-threshold", str(self.args.ooo_threshold)] if self.args.nic == "ooo" else []
        return ["--nic", self.args.nic, *extra]

    def shape_ports(self, reservations_path):
        """Split the rate of every port that carries a reservation between
        its reserved and other queues for this run (shaper.py); returns
        the rates set."""
        with open(reservations_path) as fh:
            reservations = json.load(fh)
        return shapermod.shape_lab(self.lab, reservations, self.args.pps_per_gbps, labkit.RESERVED_QUEUE,
                                   labkit.ROCE_QUEUE)

    def tx_counters(self):
        """Packets sent per (switch, port) from the P4 tx_port counters."""
        out = {}
        for s in self.lab.fabric.switches:
            ports = sorted({p for (sw, p) in self.lab.fabric.port_gbps() if sw == s})
            cmds = [f"counter_read FsEgress.counters.tx_port {p}" for p in ports]
            cmds += [f"counter_read FsIngress.counters.drops {r}" for r in DROP_REASONS]
            text = self.lab.switch_cli(s, cmds)
            vals = [line for line in text.splitlines() if " packets)" in line]
            if len(vals) != len(ports) + len(DROP_REASONS):
                raise RuntimeError(f"{s}: cannot read tx_port / drops counters: {text.strip()[:300]}")
            for key, line in zip([p for p in ports] + [f"drop-{r}" for r in DROP_REASONS], vals):
                out[(s, key)] = int(line.rsplit(",", 1)[1].split()[0])
        return out

    def run_one(self, seed, mode, spec, predrain=True, tag=None):
        tag = tag or f"s{seed}-{mode}"
        raw = os.path.join(self.out, "raw", tag)
        os.makedirs(raw, exist_ok=True)
        self.controller(mode, predrain)
        start_ns = time.time_ns() + int(self.args.setup_ms * 1e6)
        s, ring_start, ideal = self.prepare(spec, mode, start_ns)
        with open(os.path.join(raw, "topology.txt"), "w") as fh:
            fh.write(self.topology_as_run() + "\n")
        reserved = total = steered = 0
        demand_ids = []
        shaped = {}
        if mode in FORECAST_MODES:
            reserved, total, steered, demand_ids = self.forecast(s, ring_start, ideal,
                                                                 os.path.join(raw, "forecast.json"), tag)
            if self.args.reserved_queue == "own" and mode == "foresight":
                shaped = self.shape_ports(os.path.join(raw, "reservations.json"))
        spec_path = os.path.join(raw, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(s, fh)
        collector = None
        if self.int_reports and mode in FORECAST_MODES:
            collector = self.lab.fabric_popen(
                [self.foresight, "int-collect", "--listen", f"0.0.0.0:{labmod.INT_PORT}",
                 "--csv", os.path.join(raw, "int.csv"), "--topology", self.lab.fabric.path],
                os.path.join(raw, "int-collect.log"))
        before = self.tx_counters()
        followed = labkit.follow_metrics(self.lab) if self.args.follow_traffic else None
        load = labmod.load_1m()
        procs = {}
        timeout = self.args.background_lead_ms / 1e3 + ideal * 6 + 30
        for h in self.hosts:
            logf = open(os.path.join(raw, f"rocegen-{h}.log"), "w")
            procs[h] = self.lab.host(h).popen(
                [self.rocegen, "run", "--spec", spec_path, "--host", h, "--out", raw,
                 "--timeout-s", f"{timeout:.0f}", "--rto-ms", str(self.args.rto_ms),
                 "--linger-ms", str(3 * self.args.rto_ms),
                 "--ack-every", "16", "--ack-delay-ms", str(self.args.ack_delay_ms),
                 "--tlp-ms", str(labmod.tail_probe_ms(self.args.ack_delay_ms)), "--quiet",
                 *self.ack_class(), *self.nic_args()], stdout=logf, stderr=subprocess.STDOUT)
        codes = {h: p.wait() for h, p in procs.items()}
        if shaped:
            shapermod.unshape(self.lab, shaped)
        after = self.tx_counters()
        if collector:
            collector.terminate()
            collector.wait(timeout=10)
        bad = {h: c for h, c in codes.items() if c != 0}
        fct = self.collect(raw, ring_start)
        row = {"seed": seed, "mode": mode, "nic": self.args.nic, "predrain": int(predrain), "load_1m": load,
               "ideal_s": round(ideal, 4),
               "completion_s": round(fct["completion_s"], 4) if fct else "",
               "slowdown": round(fct["completion_s"] / ideal, 4) if fct else "",
               "retransmits": fct["retransmits"] if fct else "", "cnps": fct["cnps"] if fct else "",
               "ce_marked": fct["ce_marked"] if fct else "",
               **{k: fct[k] if fct else "" for k in ("naks", "rewinds", "resent_bytes")},
               "background_packets": fct["background_bytes"] if fct else "",
               "reserved_flows": reserved, "forecast_flows": total, "steered_flows": steered,
               "failed_hosts": " ".join(f"{h}:{c}" for h, c in bad.items())}
        links = [{"seed": seed, "mode": mode, "nic": self.args.nic, "predrain": int(predrain), "switch": s, "port": p,
                  "packets": after[(s, p)] - before.get((s, p), 0)}
                 for (s, p) in sorted(k for k in after if isinstance(k[1], int))]
        drops = {f"{s}:{k}": after[(s, k)] - before.get((s, k), 0) for (s, k) in after
                 if isinstance(k, str) and after[(s, k)] != before.get((s, k), 0)}
        row["switch_drops"] = " ".join(f"{k}={v}" for k, v in sorted(drops.items()))
        if followed is not None:
            # What following the traffic did during the run (after it).
            now = labkit.follow_metrics(self.lab)
            row.update({k: round(now[k] - followed[k], 3) for k in followed})
        checked = labkit.steered_paths(raw) if collector and mode == "foresight-entropy" else None
        row["paths_checked"] = checked["checked"] if checked else ""
        row["paths_off"] = checked["off"] if checked else ""
        for d in demand_ids:
            # Withdraw what is still live before the next run.
            self.lab.fabric_cmd([self.foresight, "cancel", "--demand", d, "--controller", labmod.NDSP_ADDR],
                                check=False)
        return row, links, raw

    def collect(self, raw, ring_start):
        """Completion of the all-reduce: the last collective byte received,
        from the receivers' records, relative to the ring's start."""
        last = None
        retx = cnps = ce = bg = naks = rewinds = resent = 0
        for name in os.listdir(raw):
            if not name.startswith("flows-"):
                continue
            with open(os.path.join(raw, name)) as fh:
                for r in csv.DictReader(fh):
                    if r["role"] == "recv" and r["kind"] == "collective" and r["end_ns"]:
                        last = max(last or 0, int(r["end_ns"]))
                    if r["role"] == "send":
                        retx += int(r["retransmits"] or 0)
                        cnps += int(r["cnps"] or 0)
                        naks += int(r.get("naks") or 0)
                        rewinds += int(r.get("rewinds") or 0)
                        resent += int(r.get("resent_bytes") or 0)
                    if r["role"] == "recv":
                        ce += int(r["ce_marked"] or 0)
                        if r["kind"] != "collective":
                            bg += int(r["packets"] or 0)
        if last is None:
            return None
        return {"completion_s": (last - ring_start) / 1e9, "retransmits": retx, "cnps": cnps,
                "ce_marked": ce, "background_bytes": bg, "naks": naks, "rewinds": rewinds,
                "resent_bytes": resent}


def tenant_hosts(fabric, hosts):
    """--tenants: the inference tenant's hosts, the last of each leaf."""
    last = {}
    for h in sorted(hosts, key=lambda n: (fabric.hosts[n]["leaf"], fabric.hosts[n]["port"])):
        last[fabric.hosts[h]["leaf"]] = h
    if len(last) < 2:
        raise SystemExit("--tenants needs hosts on two leaves at least (KV transfers cross the spines)")
    return sorted(last.values())


def is_kv_burst(flow):
    return flow["kind"] != "collective" and flow["id"].startswith("kv")


def find_link(fabric, end):
    """The topology link with `end` (`switch:port`) at one of its ends."""
    sw, _, port = end.partition(":")
    if not port.isdigit():
        raise SystemExit(f"--link-down {end}: expected <switch>:<port>")
    for l in fabric.links:
        if (l["node1"], l["port1"]) == (sw, int(port)) or (l["node2"], l["port2"]) == (sw, int(port)):
            return l
    raise SystemExit(f"--link-down {end}: no link of {fabric.path} ends there")


def collective_packets_busiest_nic(spec):
    """Collective packets through the busiest NIC, sent or received."""
    through = {}
    payload = spec["payload_bytes"]
    for fl in spec["flows"]:
        if fl["kind"] == "collective":
            n = math.ceil(fl["bytes"] / payload)
            through[("tx", fl["src"])] = through.get(("tx", fl["src"]), 0) + n
            through[("rx", fl["dst"])] = through.get(("rx", fl["dst"]), 0) + n
    return max(through.values())


def moe_reweight(spec, skew, seed, nic_pps):
    """MoE's uneven tokens on an all-to-all spec (skew 0 leaves it even):
    each destination host's expert popularity is log-normal with mean 1 and
    log standard deviation `skew`, each source's routing varies around it
    with `skew / 2` (the simulator's model, sim::workload::moe_weights).
    Every flow then sends at the rate that ends all of them together at the
    pace of the busiest NIC, so no NIC is asked more than its rate."""
    import random
    rng = random.Random(seed * 7919 + 4)

    def lognormal(sigma):
        return math.exp(sigma * rng.gauss(0.0, 1.0) - sigma * sigma / 2)
    coll = [fl for fl in spec["flows"] if fl["kind"] == "collective"]
    popularity = {h: lognormal(skew) for h in sorted(spec["hosts"])}
    routing = {(a, b): lognormal(skew / 2) for a in sorted(spec["hosts"]) for b in sorted(spec["hosts"])}
    payload = spec["payload_bytes"]
    for fl in coll:
        w = popularity[fl["dst"]] * routing[(fl["src"], fl["dst"])]
        fl["bytes"] = max(payload, int(round(fl["bytes"] * w / payload)) * payload)
    duration_s = collective_packets_busiest_nic(spec) / nic_pps
    for fl in coll:
        fl["line_rate_pps"] = round(math.ceil(fl["bytes"] / payload) / duration_s, 3)


def int_queue_rows(raw, tag_fields):
    """Per INT report hop: time and queue occupancy at each (switch, port)."""
    path = os.path.join(raw, "int.csv")
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for r in csv.DictReader(fh):
            if r["queue_occupancy"] == "":
                continue
            out.append({**tag_fields, "recv_unix_ns": int(r["recv_unix_ns"]), "node": r["node"],
                        "egress_port": r["egress_port"], "queue_occupancy": int(r["queue_occupancy"])})
    return out


def cmd_allreduce(args):
    exp = Experiment(args)
    runs, links = [], []
    with exp.lab:
        total = args.seeds * len(args.modes)
        done = 0
        t0 = time.time()
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            spec = exp.spec(seed)
            for mode in args.modes:
                row, lk, _ = exp.run_one(seed, mode, spec, predrain=not getattr(args, "no_predrain", False))
                runs.append(row)
                links += lk
                done += 1
                eta = (time.time() - t0) / done * (total - done)
                labkit.progress(f"[{done}/{total}] seed {seed} {mode:<9} completion {row['completion_s']} s "
                         f"= {row['slowdown']}x ideal ({row['ideal_s']} s)"
                         f"{' reserved ' + str(row['reserved_flows']) + '/' + str(row['forecast_flows']) if mode in FORECAST_MODES else ''}"
                         f"{' steered ' + str(row['steered_flows']) if mode == 'foresight-entropy' else ''}"
                         f"{' paths off ' + str(row['paths_off']) + '/' + str(row['paths_checked']) if row['paths_checked'] != '' else ''}"
                         f"{' FAILED ' + row['failed_hosts'] if row['failed_hosts'] else ''}; load {row['load_1m']}; ETA {eta:.0f} s")
                labkit.write_csv(os.path.join(args.out, "runs.csv"), runs)
                labkit.write_csv(os.path.join(args.out, "links.csv"), links)
    import plots
    plots.allreduce(args.out)
    summarize(runs)


def cmd_predrain(args):
    exp = Experiment(args)
    runs, queue = [], []
    with exp.lab:
        if not exp.lab.collector:
            raise SystemExit("the pre-drain experiment needs the topology's collector host (INT reports)")
        total = args.seeds * 2
        done = 0
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            spec = exp.spec(seed)
            for predrain in (True, False):
                tag = f"s{seed}-predrain-{'on' if predrain else 'off'}"
                row, _, raw = exp.run_one(seed, "foresight", spec, predrain=predrain, tag=tag)
                runs.append(row)
                start = json.load(open(os.path.join(raw, "spec.json")))["start_unix_ns"]
                q = int_queue_rows(raw, {"seed": seed, "predrain": int(predrain)})
                for r in q:
                    r["t_s"] = round((r.pop("recv_unix_ns") - start) / 1e9, 4)
                queue += q
                done += 1
                peak = max((r["queue_occupancy"] for r in q), default=0)
                labkit.progress(f"[{done}/{total}] seed {seed} pre-drain {'on ' if predrain else 'off'} completion "
                         f"{row['completion_s']} s = {row['slowdown']}x ideal; peak INT queue {peak} packets; "
                         f"{len(q)} INT hop records")
                labkit.write_csv(os.path.join(args.out, "runs.csv"), runs)
                # Every INT hop (megabytes) stays in raw/; the plots use the
                # timeline (deepest queue per 50 ms) and per-run statistics.
                labkit.write_csv(os.path.join(args.out, "raw", "queue.csv"), queue)
                import plots
                labkit.write_csv(os.path.join(args.out, "queue_timeline.csv"), plots.queue_timeline(queue))
                labkit.write_csv(os.path.join(args.out, "queue_stats.csv"), [
                    {"seed": k[0], "predrain": k[1], **v} for k, v in sorted(plots.queue_stats(queue).items())])
    import plots
    plots.predrain(args.out)
    summarize(runs, key="predrain")


def summarize(runs, key="mode"):
    groups = {}
    for r in runs:
        if r["slowdown"] != "":
            groups.setdefault(r[key], []).append(float(r["slowdown"]))
    import statistics
    for k, v in groups.items():
        v.sort()
        med = statistics.median(v)
        print(f"{key}={k}: {len(v)} runs, completion / ideal: median {med:.3f}, "
              f"min {v[0]:.3f}, max {v[-1]:.3f}, mean {sum(v) / len(v):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, default_seeds in (("allreduce", 10), ("alltoall", 5), ("predrain", 3)):
        p = sub.add_parser(name)
        p.add_argument("--topology", default=os.path.join(HERE, "topologies", "leaf-spine-lab.yaml"))
        p.add_argument("--name", default="fx", help="lab name (namespace <name>-fabric)")
        p.add_argument("--out", default=None,
                       help=f"default bmv2-lab/results/{name} (with --nic ooo: {name}-ooo)")
        p.add_argument("--seeds", type=int, default=default_seeds)
        p.add_argument("--window-margin", type=float, default=0.25,
                       help="the ring's reservation lasts its ideal time times 1 + this; with "
                            "--reserved-queue own, steps that outlive it get only the RoCE queue's share")
        p.add_argument("--follow-traffic", action="store_true",
                       help="the controller's reservations follow their traffic (controller --follow-traffic, "
                            "seen by the watch counters): extended while the ring still sends, released once it "
                            "was quiet for twice --rto-ms; runs.csv counts extensions, refusals, releases and released link-seconds")
        p.add_argument("--first-seed", type=int, default=1,
                       help="seeds FIRST..FIRST+SEEDS-1 (to re-run one seed of an earlier experiment)")
        p.add_argument("--modes", type=labkit.mode_list(MODES), default=list(DEFAULT_MODES),
                       help=f"comma-separated, of {', '.join(MODES)} (default: {','.join(DEFAULT_MODES)})")
        p.add_argument("--flowlet-timeout-ms", type=float, default=FLOWLET_TIMEOUT_MS,
                       help="flowlet mode: a pause longer than this starts a new flowlet "
                            "(default: twice the lab's round trip, see FLOWLET_TIMEOUT_MS)")
        if name == "alltoall":
            p.add_argument("--bytes", type=int, default=7 * 192 * 1024,
                           help="bytes each rank sends, bytes/(N-1) to every other before --moe-skew "
                                "(default: as much as a rank sends in the all-reduce)")
            p.add_argument("--moe-skew", type=float, default=0.3,
                           help="MoE's uneven tokens: log standard deviation of expert popularity per "
                                "destination (0: an even all-to-all; the simulator's --moe-skew)")
        else:
            p.add_argument("--bytes", type=int, default=8 * 2 * 48 * 1024,
                           help="buffer per rank; each ring step moves bytes/N per rank")
        if name == "allreduce":
            p.add_argument("--tenants", action="store_true",
                           help="two tenants sharing the leaves: the last host of each leaf serves inference "
                                "(KV-cache bursts between them, not announced), the others train (the ring)")
            p.add_argument("--kv-bursts", type=int, default=8, help="--tenants: KV transfers per run")
            p.add_argument("--kv-bytes", type=int, default=128 * 1024, help="--tenants: bytes per KV transfer")
            p.add_argument("--kv-announced", action="store_true",
                           help="--tenants, foresight mode: the inference tenant announces its KV transfers too, "
                                "in the same forecast as the ring (latency-critical): what announcing them would "
                                "buy, at best, as no prefill ends that far ahead")
        if name != "predrain":
            p.add_argument("--no-predrain", action="store_true",
                           help="foresight mode without pre-drain marking of competing flows (what entropy "
                                "steering cannot install); runs.csv's predrain column says 0")
        p.add_argument("--int-path-check", action="store_true",
                       help="foresight-entropy: the collector reads every steered connection's path from INT "
                            "(its watch entry, telemetry only) and runs.csv counts those off their reserved path "
                            "(INT reports load the fabric: keep timing runs without it)")
        p.add_argument("--switch-hash", metavar="FILE",
                       help="foresight-entropy: steer by this description of the switches' hash (controller "
                            "--switch-hash) instead of the built-in model; --int-path-check shows whether the "
                            "switches agree (bmv2-lab/switch-hash-foresight.yaml is the lab's own)")
        p.add_argument("--link-down", metavar="SWITCH:PORT",
                       help="this fabric link is down for the whole experiment (the controller is told with "
                            "`foresight link down` after every start; no route or ECMP group uses it)")
        p.add_argument("--channels", type=int, default=2)
        p.add_argument("--background", type=int, default=2, help="background flows per run")
        p.add_argument("--background-share", type=float, default=0.3,
                       help="background flow rate as a fraction of a NIC's")
        p.add_argument("--lowered-ecn", action="store_true",
                       help="lower the DCQCN thresholds of reserved ports for competing traffic "
                            "(off: pre-drain only)")
        p.add_argument("--reserved-queue", choices=("own", "shared"), default="shared",
                       help="reserved traffic shares the RoCE queue (3); or has its own queue (5) with its "
                            "own ECN profile and the port shaped across queues (shaper.py; see bmv2-lab/README.md "
                            "for why it is not the default yet)")
        p.add_argument("--nic", choices=("gbn", "ooo"), default="gbn",
                       help="the hosts' RoCE NIC: gbn (go-back-N: a reordered packet draws a NAK and a "
                            "rewind) or ooo (out-of-order placement, selective ACKs); recorded in runs.csv")
        p.add_argument("--ooo-threshold", type=int, default=8,
                       help="--nic ooo: a packet counts as lost once this many beyond it are acknowledged "
                            "(rocegen --ooo-threshold)")
        p.add_argument("--rto-ms", type=float, default=1000.0,
                       help="retransmit timeout (gbn goes back, ooo resends what is unacknowledged): "
                            "above the deepest queueing delay of a path")
        p.add_argument("--background-dscp", type=int, choices=range(0, 64), metavar="DSCP",
                       help="the other tenant's traffic in a lower class, in every mode: its packets carry this "
                            "DSCP (not 24, the RoCE class: unmapped, so queue 0, below the RoCE queue's strict "
                            "priority), and Foresight reserves it in queue 0 too (a baseline a fabric team "
                            "could configure without Foresight)")
        p.add_argument("--background-lead-ms", type=int, default=1500,
                       help="background starts this long before the all-reduce")
        p.add_argument("--pps-per-gbps", type=float, default=2.5)
        p.add_argument("--ack-delay-ms", type=float, default=100.0,
                       help="receivers ACK every 16 packets or this long after the first unacknowledged one "
                            "(BMv2 shapes packets, not bytes: an ACK costs as much as a data packet)")
        p.add_argument("--nic-fraction", type=float, default=0.9,
                       help="NIC sending rate as a fraction of its switch port's drain rate")
        p.add_argument("--queue-depth", type=int, default=64)
        p.add_argument("--lead-time-ms", type=float, default=500.0)
        p.add_argument("--hash-seed", default="per-switch",
                       help="switch ECMP hash seeds and offsets: per-switch (CRC-32 of the name, "
                            "tier offsets), seeds-only (no offsets) or same:N")
        p.add_argument("--setup-ms", type=float, default=1500.0,
                       help="time from the forecast to the first packet")
        p.add_argument("--foresight-hash", choices=("qp-aware", "five-tuple"), default="qp-aware",
                       help="the fabric's ECMP hash in mode foresight (what its unreserved flows take); "
                            "five-tuple: as in foresight-entropy, so the two differ only in how "
                            "reserved flows reach their paths")
        p.set_defaults(func=cmd_predrain if name == "predrain" else cmd_allreduce)
    import jax_experiment
    import learned_experiment
    import overrun_experiment
    jax_experiment.add_parser(sub)
    learned_experiment.add_parser(sub)
    overrun_experiment.add_parser(sub)
    pl = sub.add_parser("plot")
    pl.add_argument("--out", required=True)
    pl.set_defaults(func=None)
    args = ap.parse_args()
    if args.cmd == "plot":
        import plots
        if os.path.exists(os.path.join(args.out, "links.csv")):
            plots.allreduce(args.out)
        if os.path.exists(os.path.join(args.out, "queue_stats.csv")):
            plots.predrain(args.out)
        if os.path.exists(os.path.join(args.out, "steps.csv")):
            with open(os.path.join(args.out, "steps.csv")) as fh:
                learned = "comm_vs_isolated" in fh.readline()
            plots.learned_steps(args.out) if learned else plots.jax_steps(args.out)
        return 0
    if args.cmd in ("allreduce", "alltoall", "predrain") and args.out is None:
        # Runs on the other kind of NIC never overwrite the go-back-N ones.
        args.out = os.path.join(HERE, "results", args.cmd + ("-ooo" if args.nic == "ooo" else ""))
    if os.geteuid() != 0:
        sys.exit("experiments need root (network namespaces)")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
