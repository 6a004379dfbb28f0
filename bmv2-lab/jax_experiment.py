"""The JAX experiment: a real JAX training job on the lab's hosts, its step
time under ECMP collisions, with and without Foresight.

    sudo bmv2-lab/experiment.py jax [--seeds 5] [--out bmv2-lab/results/jax]

The job (jax_job.py) runs one process per host on 4 hosts across the two
leaves (h1, h5, h2, h6: every gloo ring link crosses the spines); each step
averages ~140 KB of gradients with pmean, XLA's gloo ring over TCP. Another
tenant's four long RoCEv2 flows (rocegen, DCQCN) run between the other
hosts, leaf to leaf, at --background-share of a NIC. Per direction, two ring
links and two background flows share the two uplinks: where ECMP puts three
of them on one spine, that spine's links are oversubscribed.

Modes, the same background (drawn from the seed) in each:

  alone      no background at all;
  isolated   the same background flows, but each kept inside its leaf (the
             other host of the same leaf): the same packets, switches and
             CPUs, no link shared with the job. The reference: what the job
             gets when nothing collides with it;
  ecmp5      switches hash on the 5-tuple;
  qp         QP-aware ECMP (the background's RoCEv2 hashes on its QP; the
             job's TCP hashes on its 5-tuple either way);
  foresight  QP-aware ECMP plus Foresight: the background's tenant forecasts
             its flows (`foresight reserve batch`, priority background), and
             the job announces each next step's collectives itself, from its
             compiled HLO, over NDSP (T+1, jax_job.py) through the lab's
             management link;
  foresight-bg  (not by default) Foresight with only the background's
             forecast: the job announces nothing.

Hosts: the job's TCP is marked DSCP 24 (the RoCE class, as the job's
traffic class would be; nftables at the host's output), uses ECN
(net.ipv4.tcp_ecn=1), and leaves the host at --nic-fraction of its port's
rate (tbf): BMv2 shapes packets, and a TCP ACK costs a port as much as a
data packet, so the NIC sends below the port's rate to leave the ACKs room.

Results: DIR/steps.csv (every step of every run), DIR/runs.csv (per seed and
mode: median and mean step time, and their ratio to the seed's reference
run, `isolated` unless --reference says otherwise),
DIR/jax_steps.png, DIR/raw/<run>/ (logs, the forecast and the answer).
"""

import csv
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import experiment as expmod  # noqa: E402
import lab as labmod  # noqa: E402

MODES = ("alone", "isolated", "ecmp5", "qp", "foresight")
# Not run by default: Foresight with the background's forecast only (the job
# announces nothing), to tell what the job's own announcements add.
ABLATION = ("foresight-bg",)
DSCP = 24
FULL_PACKET_BYTES = 1514


def check_python(python):
    """The hosts' Python must have jax and foresight-ndsp."""
    r = subprocess.run([python, "-c", "import jax, foresight_ndsp.jax"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"--python {python}: cannot import jax and foresight_ndsp ({r.stderr.strip().splitlines()[-1:]}); "
                 "create it with: python3 -m venv .venv-jax && .venv-jax/bin/pip install './clients/python[jax]'")


class JaxExperiment:
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
        everyone = expmod.ring_order(f, [h for h in f.hosts if h != self.lab.collector])
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

    def controller(self, mode):
        key = "ecmp5" if mode == "ecmp5" else "qp"
        if self.controller_mode == key:
            return
        self.lab.stop_controller()
        extra = ["--ecmp-hash", "five-tuple" if key == "ecmp5" else "qp-aware",
                 "--hash-seed", self.args.hash_seed, "--reserved-tc", str(expmod.ROCE_QUEUE),
                 "--background-tc", str(expmod.ROCE_QUEUE),
                 "--headroom", "1.0", "--lead-time-ms", str(self.args.lead_time_ms),
                 "--lowered-ecn", "10,50,13107"]
        # NDSP on every address of the fabric namespace: loopback for the
        # CLI, the management link for the job.
        self.lab.start_controller(*extra, ndsp=f"0.0.0.0:{labmod.NDSP_ADDR.rsplit(':', 1)[1]}")
        self.controller_mode = key

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
        spec["dcqcn"] = expmod.LAB_DCQCN
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
        expmod.reserve_batch(self.lab, demands, os.path.join(raw, "forecast.json"))
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
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        for d in ids:
            self.lab.fabric_cmd([self.foresight, "cancel", "--demand", d, "--controller", labmod.NDSP_ADDR],
                                check=False)

    def job_command(self, i, mode, raw, tag, hosts):
        """Process i's command line."""
        cmd = [self.args.python, os.path.join(HERE, "jax_job.py"), "--process-id", str(i), "--hosts", hosts,
               "--steps", str(self.args.steps), "--width", str(self.args.width)]
        if i == 0:
            cmd += ["--out", os.path.join(raw, "steps.csv")]
            if mode == "foresight":
                cmd += ["--controller", self.controller_addr, "--nic-bps", f"{self.nic_bps:.0f}",
                        "--job", f"jax-{tag}", "--window-margin", str(self.args.window_margin)]
        return cmd

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

    def run_job(self, mode, raw, tag):
        """The JAX job, run to its end; returns each process's exit code
        ("timeout" if it was killed)."""
        procs = self.start_job(mode, raw, tag)
        deadline = time.time() + self.args.timeout_s
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(1.0, deadline - time.time())))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append("timeout")
        return codes

    def run_one(self, seed, mode):
        tag = f"s{seed}-{mode}"
        raw = os.path.join(self.out, "raw", tag)
        os.makedirs(raw, exist_ok=True)
        self.controller(mode)
        bg_procs, bg_ids = self.start_background(seed, mode, raw, tag) if mode != "alone" else ([], [])
        codes = self.run_job(mode, raw, tag)
        self.stop_background(bg_procs, bg_ids)
        failed = [f"{h}:{c}" for h, c in zip(self.ranks, codes) if c != 0]
        steps = []
        steps_csv = os.path.join(raw, "steps.csv")
        if os.path.exists(steps_csv):
            with open(steps_csv) as fh:
                steps = [{"seed": seed, "mode": mode, **r} for r in csv.DictReader(fh)]
        return steps, failed, raw


def run_summary(seed, mode, steps, failed):
    """Per run: the steps after the first (the first is never announced)."""
    times = [float(r["step_s"]) for r in steps if int(r["step"]) > 0]
    row = {"seed": seed, "mode": mode, "steps": len(times), "median_step_s": "", "mean_step_s": "",
           "max_step_s": "", "median_vs_ref": "", "mean_vs_ref": "", "failed": " ".join(failed)}
    if times:
        med, mean = statistics.median(times), statistics.fmean(times)
        row.update(median_step_s=round(med, 4), mean_step_s=round(mean, 4), max_step_s=round(max(times), 4))
    return row


def fill_ratios(runs, reference):
    """Each run's median and mean step over its seed's reference median."""
    ref = {r["seed"]: float(r["median_step_s"]) for r in runs
           if r["mode"] == reference and r["median_step_s"] != ""}
    for r in runs:
        if r["seed"] in ref and r["median_step_s"] != "":
            r["median_vs_ref"] = round(float(r["median_step_s"]) / ref[r["seed"]], 3)
            r["mean_vs_ref"] = round(float(r["mean_step_s"]) / ref[r["seed"]], 3)


def cmd_jax(args):
    exp = JaxExperiment(args)
    steps_all, runs = [], []
    with exp.lab:
        exp.setup_hosts()
        total, done, t0 = args.seeds * len(args.modes), 0, time.time()
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for mode in args.modes:
                load = labmod.load_1m()
                steps, failed, raw = exp.run_one(seed, mode)
                row = {**run_summary(seed, mode, steps, failed), "load_1m": load}
                steps_all += steps
                runs.append(row)
                fill_ratios(runs, args.reference)
                done += 1
                eta = (time.time() - t0) / done * (total - done)
                expmod.progress(f"[{done}/{total}] seed {seed} {mode:<9} median step {row['median_step_s']} s "
                                f"({row['median_vs_ref']}x {args.reference}), mean {row['mean_step_s']} s, max "
                                f"{row['max_step_s']} s{' FAILED ' + row['failed'] if row['failed'] else ''}; "
                                f"ETA {eta:.0f} s")
                expmod.write_csv(os.path.join(args.out, "steps.csv"), steps_all)
                expmod.write_csv(os.path.join(args.out, "runs.csv"), runs)
    import plots
    plots.jax_steps(args.out)
    for mode in args.modes:
        v = sorted(float(r["mean_vs_ref"]) for r in runs if r["mode"] == mode and r["mean_vs_ref"] != "")
        if v:
            print(f"{mode}: {len(v)} runs, mean step / {args.reference}'s median: median {statistics.median(v):.3f}, "
                  f"min {v[0]:.3f}, max {v[-1]:.3f}")


def mode_list(known):
    """An argparse type: a comma-separated list of `known` modes."""
    def parse(text):
        modes = text.split(",")
        unknown = [m for m in modes if m not in known]
        if unknown:
            import argparse
            raise argparse.ArgumentTypeError(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return modes
    return parse


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


def add_parser(sub):
    p = sub.add_parser("jax", help="a JAX training job's step time: ECMP, QP-aware ECMP, Foresight")
    add_lab_arguments(p, "fj", "jax", 5, MODES, MODES + ABLATION, 240.0, 240.0)
    p.add_argument("--reference", default="isolated", choices=MODES + ABLATION,
                   help="ratios are to this mode's median step (it runs first among the seed's modes)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--window-margin", type=float, default=0.25)
    p.set_defaults(func=cmd_jax)
