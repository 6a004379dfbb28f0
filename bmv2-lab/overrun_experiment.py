"""The overrun experiment: a reserved flow that sends twice its grant, next
to a flow nobody announced, with and without policing.

    sudo bmv2-lab/experiment.py overrun [--seeds 3] [--out bmv2-lab/results/overrun]

Two hosts of leaf 1 send to one host of leaf 2 at once, each at the NIC's
rate (--nic-fraction of the port's), for --seconds.
  - `reserved`: announced to Foresight with a grant of --grant-share of the
    port, in real bytes per second (the lab's packets at the port's packet
    rate), so the meter on its entry runs at exactly that grant; reserved
    traffic has a queue of its own (5), above the RoCE queue (3).
  - `other`: not announced, the RoCE class (queue 3).
Modes: `policed` (the controller's default: the reserved flow's SR entry
carries a meter at its grant, and what it sends beyond leaves in queue 0)
and `unpoliced` (controller --no-policing). The same QPs per seed in both.

What it shows: on a live RoCE flow the switch's meter lets exactly the
grant through in the reserved queue (its time's worth plus the meter's
burst) and demotes the rest, packet for packet (FsIngress.sr.demoted
against what the sender sent); unpoliced, nothing is demoted. What it
cannot show: BMv2 gives every priority queue of a port a rate limiter of
its own (the port's rate each), so two queues together drain twice the
port and the reserved queue cannot starve the other one here as strict
priority does on a real port; the lab's own experiments split a port's
rate between queues instead (shaper.py). The per-packet queue of the
excess is ptf-tests/test_policing.py's; strict priority over a shared port
rate is ptf-tests/test_priority.py's.

Results: DIR/runs.csv (per seed and mode: packets the reserved flow sent,
the grant's packets, demoted, expected demoted, both flows' delivered rate
as a fraction of the port's, the reserved flow's NAKs and retransmits),
DIR/overrun.png, and a summary on stdout. The lab's rates elsewhere are
nominal (a 100 Gbit/s NIC drains at a few hundred packets/s), so the other
experiments' grants are far above what their senders send and their
meters never bite; this one announces the real rate on purpose.
"""

import csv
import json
import os
import statistics
import subprocess
import time

import labkit
from labkit import labmod

MODES = ("policed", "unpoliced")
# Bytes a lab RoCE packet takes at a switch's ingress: Ethernet 14, IPv4 20,
# UDP 8, BTH 12, rocegen's 1,024-byte payload, ICRC 4.
FRAME_BYTES = 14 + 20 + 8 + 12 + 1024 + 4


def pick_hosts(fabric, collector):
    """Two senders of the first leaf and a receiver of another."""
    by_leaf = {}
    for h in sorted(fabric.hosts, key=lambda n: (fabric.hosts[n]["leaf"], fabric.hosts[n]["port"])):
        if h != collector:
            by_leaf.setdefault(fabric.hosts[h]["leaf"], []).append(h)
    leaves = sorted(by_leaf)
    if len(leaves) < 2 or len(by_leaf[leaves[0]]) < 2:
        raise SystemExit("the overrun experiment wants two hosts on one leaf and one on another")
    return by_leaf[leaves[0]][0], by_leaf[leaves[0]][1], by_leaf[leaves[1]][0]


class Overrun:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        os.makedirs(os.path.join(self.out, "raw"), exist_ok=True)
        self.rocegen = labmod.foresight_bin("rocegen")
        self.foresight = labmod.foresight_bin("foresight")
        self.lab = labmod.Lab(args.topology, name=args.name, pps_per_gbps=args.pps_per_gbps,
                              queue_depth=args.queue_depth)
        f = self.lab.fabric
        self.reserved, self.other, self.receiver = pick_hosts(f, self.lab.collector)
        self.port_pps = self.lab.rate_pps(float(f.hosts[self.receiver]["gbps"]))
        self.nic_pps = self.port_pps * args.nic_fraction
        self.grant_pps = self.port_pps * args.grant_share
        self.mode = None

    def controller(self, mode):
        if self.mode == mode:
            return
        self.lab.stop_controller()
        q = str(labkit.RESERVED_QUEUE)
        extra = ["--reserved-tc", q, "--background-tc", q, "--headroom", "1.0",
                 "--lead-time-ms", str(self.args.lead_time_ms)]
        if mode == "unpoliced":
            extra.append("--no-policing")
        self.lab.start_controller(*extra)
        self.mode = mode

    def spec(self, seed, start_ns):
        f = self.lab.fabric
        hosts = ",".join(f"{h}={f.ip(h)}" for h in (self.reserved, self.other, self.receiver))
        cmd = [self.rocegen, "spec", "ring-allreduce", "--hosts", hosts, "--bytes", "4096", "--channels", "1",
               "--qp-seed", str(seed), "--line-rate-pps", f"{self.nic_pps:.3f}", "--start-in-ms", "0", "-o", "-"]
        for src in (self.reserved, self.other):
            cmd += ["--background", f"{src}:{self.receiver}:{10 ** 9}:{self.nic_pps:.3f}"]
        spec = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        spec["flows"] = [fl for fl in spec["flows"] if fl["kind"] != "collective"]
        spec["start_unix_ns"] = start_ns
        spec["dcqcn"] = labkit.LAB_DCQCN
        for fl in spec["flows"]:
            fl["stop_offset_ns"] = int(self.args.seconds * 1e9)
        return spec

    def demoted(self):
        """Packets FsIngress.sr.demoted counted at the reserved sender's
        leaf port."""
        h = self.lab.fabric.hosts[self.reserved]
        text = self.lab.switch_cli(h["leaf"], [f"counter_read FsIngress.sr.demoted {h['port']}"])
        for line in text.splitlines():
            if " packets)" in line:
                return int(line.rsplit(",", 1)[1].split()[0])
        raise RuntimeError(f"cannot read FsIngress.sr.demoted: {text.strip()[:200]}")

    def run(self, seed, mode):
        tag = f"s{seed}-{mode}"
        raw = os.path.join(self.out, "raw", tag)
        os.makedirs(raw, exist_ok=True)
        self.controller(mode)
        start = time.time_ns() + int(self.args.setup_ms * 1e6)
        spec = self.spec(seed, start)
        f = self.lab.fabric
        mine = next(fl for fl in spec["flows"] if fl["src"] == self.reserved)
        grant_gbps = self.grant_pps * FRAME_BYTES * 8 / 1e9
        demand = {"id": f"{tag}-reserved", "src": f.ip(self.reserved), "dst": f.ip(self.receiver),
                  "qp": mine["dest_qp"], "rate_gbps": grant_gbps,
                  "bytes": int(grant_gbps * 1e9 / 8 * self.args.seconds), "start_unix_ns": start}
        granted = labkit.reserve_batch(self.lab, [demand], os.path.join(raw, "forecast.json"))
        accepted = sum(fl["accepted_bps"] for rv in granted for fl in rv["flows"])
        spec_path = os.path.join(raw, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        demoted_before = self.demoted()
        load = labmod.load_1m()
        procs = []
        for h in (self.receiver, self.reserved, self.other):
            with open(os.path.join(raw, f"rocegen-{h}.log"), "w") as logf:
                procs.append(self.lab.host(h).popen(
                    [self.rocegen, "run", "--spec", spec_path, "--host", h, "--out", raw,
                     "--timeout-s", f"{self.args.seconds + 30:.0f}", "--rto-ms", "1000",
                     "--ack-every", "16", "--ack-delay-ms", "100", "--ack-dscp", "48",
                     "--tlp-ms", str(labmod.tail_probe_ms(100)), "--quiet"],
                    stdout=logf, stderr=subprocess.STDOUT))
        codes = [p.wait() for p in procs]
        demoted = self.demoted() - demoted_before
        self.lab.fabric_cmd([self.foresight, "cancel", "--demand", demand["id"],
                             "--controller", labmod.NDSP_ADDR], check=False)
        got = {"reserved": {}, "other": {}}
        for name in os.listdir(raw):
            if not name.startswith("flows-"):
                continue
            with open(os.path.join(raw, name)) as fh:
                for r in csv.DictReader(fh):
                    who = "reserved" if r["src"] in (self.reserved, f.ip(self.reserved)) else "other"
                    got[who][r["role"]] = r
        share = {k: int(got[k].get("recv", {}).get("packets") or 0) / self.args.seconds / self.port_pps
                 for k in got}
        send = got["reserved"].get("send", {})
        sent = int(send.get("packets") or 0)
        # In the grant: its rate over the run, plus the meter's burst
        # (installer::policing: 10 ms of the grant, at least 64 KiB).
        grant_bytes_s = accepted / 8
        burst = max(grant_bytes_s * 0.010, 64 * 1024)
        in_grant = (grant_bytes_s * self.args.seconds + burst) / FRAME_BYTES
        expected = max(0, round(sent - in_grant)) if mode == "policed" else 0
        return {"seed": seed, "mode": mode, "load_1m": load, "port_pps": self.port_pps,
                "grant_share": self.args.grant_share, "granted_bps": accepted,
                "reserved_sent": sent, "grant_packets": round(in_grant), "expected_demoted": expected,
                "reserved_share": round(share["reserved"], 4), "other_share": round(share["other"], 4),
                "reserved_naks": send.get("naks", ""), "reserved_retransmits": send.get("retransmits", ""),
                "demoted_packets": demoted, "failed": sum(1 for c in codes if c != 0)}


def plot(out, runs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        labkit.progress("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    labels, x = [], 0
    for mode in MODES:
        for r in (r for r in runs if r["mode"] == mode):
            sent, grant, dem = r["reserved_sent"], r["grant_packets"], r["demoted_packets"]
            ax.bar(x, sent - dem, color="tab:blue", label="kept its class" if x == 0 else None)
            ax.bar(x, dem, bottom=sent - dem, color="tab:red", label="demoted to queue 0" if x == 0 else None)
            if mode == "policed":
                ax.plot([x - 0.4, x + 0.4], [grant, grant], "k--", lw=1,
                        label="grant x time + burst" if x == 0 else None)
            labels.append(f"{mode}\nseed {r['seed']}")
            x += 1
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel("packets the reserved flow sent")
    ax.set_title(f"A reserved flow sending beyond its grant ({runs[0]['grant_share']:.0%} of the port)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "overrun.png"), dpi=120)


def cmd_overrun(args):
    exp = Overrun(args)
    runs = []
    with exp.lab:
        total = args.seeds * len(MODES)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for mode in MODES:
                row = exp.run(seed, mode)
                runs.append(row)
                labkit.progress(f"[{len(runs)}/{total}] seed {seed} {mode:<9} reserved flow sent "
                                f"{row['reserved_sent']}, demoted {row['demoted_packets']} (expected "
                                f"{row['expected_demoted']}); delivered: reserved {row['reserved_share']:.2f}, "
                                f"other {row['other_share']:.2f} of the port; NAKs {row['reserved_naks']}; "
                                f"load {row['load_1m']}")
                labkit.write_csv(os.path.join(args.out, "runs.csv"), runs)
    plot(args.out, runs)
    for mode in MODES:
        rows = [r for r in runs if r["mode"] == mode]
        print(f"{mode}: demoted {[r['demoted_packets'] for r in rows]} of sent {[r['reserved_sent'] for r in rows]} "
              f"(expected {[r['expected_demoted'] for r in rows]}); delivered other "
              f"{statistics.median(r['other_share'] for r in rows):.2f}, reserved "
              f"{statistics.median(r['reserved_share'] for r in rows):.2f} of the port (median of {len(rows)})")


def add_parser(sub):
    p = sub.add_parser("overrun", help="a reserved flow sending twice its grant, policed and not")
    p.add_argument("--topology", default=os.path.join(labkit.HERE, "topologies", "leaf-spine-lab.yaml"))
    p.add_argument("--name", default="fo", help="lab name (namespace <name>-fabric)")
    p.add_argument("--out", default=os.path.join(labkit.HERE, "results", "overrun"))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--seconds", type=float, default=15.0, help="how long both flows send")
    p.add_argument("--grant-share", type=float, default=0.45,
                   help="the reserved flow's grant as a fraction of the port's rate")
    p.add_argument("--nic-fraction", type=float, default=0.9,
                   help="what each sender sends, as a fraction of the port's rate")
    p.add_argument("--pps-per-gbps", type=float, default=2.5)
    p.add_argument("--queue-depth", type=int, default=64)
    p.add_argument("--lead-time-ms", type=float, default=300.0)
    p.add_argument("--setup-ms", type=float, default=2000.0, help="the flows start this long after the forecast")
    p.set_defaults(func=cmd_overrun)
