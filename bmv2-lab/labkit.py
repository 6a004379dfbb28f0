"""What the bmv2-lab experiments share: the lab's queues and DCQCN, ring
order, progress lines, NDSP forecasts (`foresight reserve batch`), CSVs,
command-line arguments, and the lab of the JAX job's experiments
(jax_experiment.py, learned_experiment.py). The experiments import this
module, never each other.
"""

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as labmod  # noqa: E402

# The RoCE queue (DSCP 24, data and ACKs) and the queue of reserved traffic
# when it has its own (the controller's default traffic class).
ROCE_QUEUE, RESERVED_QUEUE = 3, 5
# DCQCN at lab scale. A lab packet takes 4 ms on a 250 pps port, against
# 80 ns for 1 KB at 100 Gbit/s, so hardware timers cannot be scaled
# uniformly; these keep hardware's proportions to the packet time and RTT
# instead: at most one CNP per flow every 5 packet times (hardware: 50 us),
# rate increase every 10 (300 us), and a 5 % floor.
LAB_DCQCN = {"g": 1 / 16, "initial_alpha": 1.0, "alpha_timer_ns": 20_000_000,
             "increase_timer_ns": 40_000_000, "fast_recovery_steps": 5, "rai_frac": 0.05,
             "rhai_frac": 0.25, "rmin_frac": 0.05, "cnp_interval_ns": 20_000_000}

# The JAX job's TCP class (DSCP 24, the RoCE class) and a full packet's size.
DSCP = 24
FULL_PACKET_BYTES = 1514


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def ring_order(fabric, hosts):
    """Ranks alternate between leaves (h1, h5, h2, h6, ...) so every ring
    hop crosses the spine layer, where ECMP chooses."""
    by_leaf = {}
    for h in sorted(hosts, key=lambda n: (fabric.hosts[n]["leaf"], fabric.hosts[n]["port"])):
        by_leaf.setdefault(fabric.hosts[h]["leaf"], []).append(h)
    columns = list(by_leaf.values())
    order = []
    for i in range(max(len(c) for c in columns)):
        for c in columns:
            if i < len(c):
                order.append(c[i])
    return order


def reserve_batch(lab, demands, forecast_path):
    """`foresight reserve batch` with `demands` (written to forecast_path);
    the answer is kept next to it as reservations.json and returned."""
    with open(forecast_path, "w") as fh:
        json.dump(demands, fh, indent=1)
    r = lab.fabric_cmd([labmod.foresight_bin("foresight"), "reserve", "batch", "--file", forecast_path, "--json",
                        "--controller", labmod.NDSP_ADDR], check=False)
    if r.returncode != 0:
        raise RuntimeError(f"foresight reserve batch: {r.stderr.strip()}")
    with open(os.path.join(os.path.dirname(forecast_path), "reservations.json"), "w") as fh:
        fh.write(r.stdout)
    return json.loads(r.stdout)


def steered_paths(raw):
    """Entropy steering's path check: every connection the controller told a
    UDP source port (raw/reservations.json), against the paths INT saw its
    packets take (raw/int.csv, one row per hop of each report, the sink's
    hop 0). Returns how many steered connections INT saw (checked), how
    many of those had a packet off its reserved path (off), and how many
    it never saw (unseen)."""
    with open(os.path.join(raw, "reservations.json")) as fh:
        granted = {(fl["src"], fl["dst"], fl["dest_qp"]): fl["path"]
                   for rv in json.load(fh) for fl in rv["flows"] if fl.get("udp_src_port") is not None}
    reports = {}
    path = os.path.join(raw, "int.csv")
    if os.path.exists(path):
        with open(path) as fh:
            for r in csv.DictReader(fh):
                if r["dst_qp"] == "" or r["egress_port"] == "":
                    continue
                key = (r["src"], r["dst"], int(r["dst_qp"]))
                hops = reports.setdefault((key, r["sink"], r["seq"]), {})
                hops[int(r["hop"])] = f"{r['node']}:{r['egress_port']}"
    seen = {}
    for (key, _, _), hops in reports.items():
        if key in granted:
            seen.setdefault(key, set()).add(tuple(hops[i] for i in sorted(hops, reverse=True)))
    off = [k for k, paths in seen.items() if paths != {tuple(granted[k])}]
    # What the check saw, small enough to keep beside the run's spec.
    counts = {}
    for (key, _, _), hops in reports.items():
        if key in granted:
            path = " ".join(hops[i] for i in sorted(hops, reverse=True))
            counts[(key, path)] = counts.get((key, path), 0) + 1
    write_csv(os.path.join(raw, "int_paths.csv"), [
        {"src": k[0], "dst": k[1], "dest_qp": k[2], "reserved_path": " ".join(granted[k]), "int_path": p,
         "reports": n} for (k, p), n in sorted(counts.items())])
    for k in off[:3]:
        progress(f"  {k[0]} -> {k[1]} qp {k[2]:#x}: reserved {' '.join(granted[k])}, "
                 f"INT saw {' | '.join(' '.join(p) for p in sorted(seen[k]))}")
    return {"checked": len(seen), "off": len(off), "unseen": len(granted) - len(seen)}


# The controller's counters of reservations that follow their traffic
# (--follow-traffic), as runs.csv columns.
FOLLOW_METRICS = {
    "foresight_reservation_extensions_total": "extensions",
    "foresight_reservation_extended_link_seconds_total": "extended_link_s",
    "foresight_reservation_extension_refusals_total": "refusals",
    "foresight_reservation_early_releases_total": "releases",
    "foresight_reservation_released_link_seconds_total": "released_link_s",
}


def follow_metrics(lab):
    """The follow counters of the lab's controller now (its /metrics, read
    inside the fabric namespace); runs take the difference."""
    url = f"http://{labmod.HTTP_ADDR}/metrics"
    r = lab.fabric_cmd(["/usr/bin/python3", "-c",
                        f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=5).read().decode())"],
                       check=False)
    out = {v: 0.0 for v in FOLLOW_METRICS.values()}
    for line in r.stdout.splitlines():
        name, _, value = line.partition(" ")
        if name in FOLLOW_METRICS:
            out[FOLLOW_METRICS[name]] = float(value)
    return out


def start_roce_flow(lab, src, dst, raw, seconds):
    """One RoCEv2 flow src -> dst at half the port's rate for `seconds`
    (the lab's DCQCN; spec and logs in raw), from a second on: the rocegen
    processes of both hosts, to stop with stop_processes."""
    os.makedirs(raw, exist_ok=True)
    f = lab.fabric
    pps = lab.rate_pps(float(f.hosts[src]["gbps"])) * 0.5
    out = subprocess.run([labmod.foresight_bin("rocegen"), "spec", "ring-allreduce", "--hosts",
                          f"{src}={f.ip(src)},{dst}={f.ip(dst)}", "--bytes", "4096", "--line-rate-pps", f"{pps:.3f}",
                          "--start-in-ms", "1000", "--background", f"{src}:{dst}:{10 ** 9}:{pps:.3f}", "-o", "-"],
                         check=True, capture_output=True, text=True).stdout
    spec = json.loads(out)
    spec["flows"] = [fl for fl in spec["flows"] if fl["kind"] != "collective"]
    spec["dcqcn"] = LAB_DCQCN
    for fl in spec["flows"]:
        fl["stop_offset_ns"] = int(seconds * 10 ** 9)
    path = os.path.join(raw, "spec.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    return [lab.host(h).popen(
        [labmod.foresight_bin("rocegen"), "run", "--spec", path, "--host", h, "--out", raw,
         "--timeout-s", str(int(seconds) + 30), "--rto-ms", "1000", "--ack-every", "16", "--ack-delay-ms", "100",
         "--tlp-ms", str(labmod.tail_probe_ms(100)), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in (dst, src)]


def write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def mode_list(known):
    """An argparse type: a comma-separated list of `known` modes."""
    def parse(text):
        modes = text.split(",")
        unknown = [m for m in modes if m not in known]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return modes
    return parse


def check_python(python):
    """The hosts' Python must have jax and foresight-ndsp."""
    r = subprocess.run([python, "-c", "import jax, foresight_ndsp.jax"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"--python {python}: cannot import jax and foresight_ndsp ({r.stderr.strip().splitlines()[-1:]}); "
                 "create it with: python3 -m venv .venv-jax && .venv-jax/bin/pip install './clients/python[jax]'")


class JaxJobLab:
    """The lab of the JAX job's experiments: the job's rank hosts, the other
    tenant's background flows, and the job's processes. An experiment adds
    its controller (`controller(mode)`) and its job's command lines
    (`job_command(i, mode, raw, tag, hosts)`)."""

    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        os.makedirs(os.path.join(self.out, "raw"), exist_ok=True)
        check_python(args.python)
        self.rocegen = labmod.foresight_bin("rocegen")
        self.foresight = labmod.foresight_bin("foresight")
        self.lab = labmod.Lab(args.topology, name=args.name, pps_per_gbps=args.pps_per_gbps,
                              queue_depth=args.queue_depth)
        f = self.lab.fabric
        everyone = ring_order(f, [h for h in f.hosts if h != self.lab.collector])
        self.ranks = everyone[:args.ranks]
        self.others = [h for h in everyone if h not in self.ranks]
        self.host_gbps = float(f.hosts[self.ranks[0]].get("gbps"))
        self.port_pps = self.lab.rate_pps(self.host_gbps)
        # What a ring NIC sends: full-size TCP segments at this rate.
        self.nic_bps = self.port_pps * args.nic_fraction * FULL_PACKET_BYTES * 8
        self.controller_mode = None
        self.controller_addr = None

    # -- set-up ------------------------------------------------------------
    def setup_hosts(self):
        for h in self.ranks:
            node = self.lab.host(h)
            intf = node.defaultIntf().name
            cmds = [
                "sysctl -qw net.ipv4.tcp_ecn=1",
                f"tc qdisc replace dev {intf} root tbf rate {int(self.nic_bps)}bit burst {2 * FULL_PACKET_BYTES} "
                "latency 200ms",
                # The job's class: DSCP 24 on its TCP, the ECN bits kept
                # (nftables: tc's pedit is not in every kernel).
                "nft add table ip foresight_lab",
                "nft 'add chain ip foresight_lab out { type filter hook output priority 0; }'",
                f"nft add rule ip foresight_lab out oifname {intf} ip protocol tcp ip dscp set {DSCP}",
            ]
            for c in cmds:
                out = node.cmd(f"{c} 2>&1; echo rc=$?").strip()
                if not out.endswith("rc=0"):
                    raise RuntimeError(f"{h}: `{c}` failed: {out}")
        mgmt = self.lab.management_link(self.ranks[0])
        self.controller_addr = f"{mgmt}:{labmod.NDSP_ADDR.rsplit(':', 1)[1]}"

    # -- background ----------------------------------------------------------
    def background(self, seed, start_ns, isolated=False):
        """Every other host sends one long flow to a host of the other leaf
        and receives one, paired per seed; QPs and ports drawn from the seed.
        `isolated`: to the other host of its own leaf instead."""
        f = self.lab.fabric
        rng = random.Random(seed * 7919 + 11)
        by_leaf = {}
        for h in self.others:
            by_leaf.setdefault(f.hosts[h]["leaf"], []).append(h)
        (a, b) = sorted(by_leaf.values())[:2]
        pps = self.port_pps * self.args.background_share
        if isolated:
            pairs = [(x, y) for side in (a, b) for x, y in zip(side, side[1:] + side[:1])]
        else:
            pairs = list(zip(a, rng.sample(b, len(b)))) + list(zip(b, rng.sample(a, len(a))))
        hosts = ",".join(f"{h}={f.ip(h)}" for h in self.others)
        cmd = [self.rocegen, "spec", "ring-allreduce", "--hosts", hosts, "--bytes", "4096", "--channels", "1",
               "--qp-seed", str(seed), "--line-rate-pps", f"{pps:.3f}", "--start-in-ms", "0", "-o", "-"]
        for s, d in pairs:
            cmd += ["--background", f"{s}:{d}:{10 ** 9}:{pps:.3f}"]
        spec = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        # Only the background flows: the ring was the generator's vehicle.
        spec["flows"] = [fl for fl in spec["flows"] if fl["kind"] != "collective"]
        spec["start_unix_ns"] = start_ns
        spec["dcqcn"] = LAB_DCQCN
        for fl in spec["flows"]:
            fl["stop_offset_ns"] = int(self.args.background_s * 1e9)
        return spec

    def forecast_background(self, spec, raw, tag):
        """The background's tenant forecasts its flows for the whole run."""
        f = self.lab.fabric
        gbps = self.host_gbps * self.args.background_share
        demands = [{"id": f"{tag}-bg-{fl['src']}-{fl['dst']}", "src": f.ip(fl["src"]), "dst": f.ip(fl["dst"]),
                    "qp": fl["dest_qp"], "bytes": int(gbps * 1e9 / 8 * self.args.background_s),
                    "rate_gbps": gbps, "start_unix_ns": spec["start_unix_ns"], "priority": "background"}
                   for fl in spec["flows"]]
        reserve_batch(self.lab, demands, os.path.join(raw, "forecast.json"))
        return [d["id"] for d in demands]

    # -- one run -------------------------------------------------------------
    def start_background(self, seed, mode, raw, tag):
        """The mode's background flows, running (and forecast in Foresight
        modes) before the job starts; returns (processes, forecast ids)."""
        spec = self.background(seed, time.time_ns() + 1_000_000_000, isolated=mode == "isolated")
        spec_path = os.path.join(raw, "background.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        ids = []
        if mode in ("foresight", "foresight-bg"):
            ids = self.forecast_background(spec, raw, tag)
        procs = []
        for h in sorted({fl["src"] for fl in spec["flows"]} | {fl["dst"] for fl in spec["flows"]}):
            with open(os.path.join(raw, f"rocegen-{h}.log"), "w") as logf:
                procs.append(self.lab.host(h).popen(
                    [self.rocegen, "run", "--spec", spec_path, "--host", h, "--out", raw,
                     "--timeout-s", f"{self.args.background_s + 30:.0f}", "--rto-ms", "1000",
                     "--ack-every", "16", "--ack-delay-ms", "100",
                     "--tlp-ms", str(labmod.tail_probe_ms(100)), "--quiet"],
                    stdout=logf, stderr=subprocess.STDOUT))
        time.sleep(2.0)  # the background is running before the job starts
        return procs, ids

    def stop_background(self, procs, ids):
        stop_processes(procs)
        for d in ids:
            self.lab.fabric_cmd([self.foresight, "cancel", "--demand", d, "--controller", labmod.NDSP_ADDR],
                                check=False)

    def start_job(self, mode, raw, tag):
        """The JAX job's processes, one per rank host, started."""
        hosts = ",".join(self.lab.fabric.ip(h) for h in self.ranks)
        env = dict(os.environ, OMP_NUM_THREADS="1", XLA_FLAGS="--xla_cpu_multi_thread_eigen=false",
                   TF_CPP_MIN_LOG_LEVEL="2")
        procs = []
        for i, h in enumerate(self.ranks):
            with open(os.path.join(raw, f"jax-{i}-{h}.log"), "w") as logf:
                procs.append(self.lab.host(h).popen(self.job_command(i, mode, raw, tag, hosts), stdout=logf,
                                                    stderr=subprocess.STDOUT, env=env))
        return procs

def add_lab_arguments(p, name, out, seeds, modes, known, background_s, timeout_s):
    """The arguments the JAX job's experiments share: the lab, the job's
    hosts, the background and the controller."""
    p.add_argument("--topology", default=os.path.join(HERE, "topologies", "jax-lab.yaml"))
    p.add_argument("--name", default=name, help="lab name (namespace <name>-fabric)")
    p.add_argument("--out", default=os.path.join(HERE, "results", out))
    p.add_argument("--python", default=os.path.join(os.path.dirname(HERE), ".venv-jax", "bin", "python"),
                   help="a Python with jax and foresight-ndsp, run in the hosts")
    p.add_argument("--seeds", type=int, default=seeds)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--modes", type=mode_list(known), default=list(modes), help=f"comma-separated, of {', '.join(known)}")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--width", type=int, default=96, help="the MLP's hidden width (~140 KB of gradients at 96)")
    p.add_argument("--nic-fraction", type=float, default=0.6,
                   help="a ring NIC's rate as a fraction of its port's (room for the TCP ACKs)")
    p.add_argument("--background-share", type=float, default=0.6,
                   help="background flow rate / a port's rate (above ~0.7 the job's unreserved TCP ACKs, a "
                        "packet each in BMv2's shaping, overload an uplink even where the data is kept apart)")
    p.add_argument("--background-s", type=float, default=background_s, help="background flows last at most this long")
    p.add_argument("--lead-time-ms", type=float, default=300.0)
    p.add_argument("--hash-seed", default="per-switch")
    p.add_argument("--pps-per-gbps", type=float, default=250 / 0.003,
                   help="jax-lab.yaml's 0.003 Gbit/s NICs drain at 250 packets/s")
    p.add_argument("--queue-depth", type=int, default=64)
    p.add_argument("--timeout-s", type=float, default=timeout_s, help="a run's job is killed after this long")


def stop_processes(procs):
    """Terminates the lab processes a run started (SIGTERM, then SIGKILL
    after 5 s) and reaps them."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
