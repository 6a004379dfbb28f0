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
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as labmod  # noqa: E402
import labkit  # noqa: E402

MODES = ("alone", "isolated", "ecmp5", "qp", "foresight")
# Not run by default: Foresight with the background's forecast only (the job
# announces nothing), to tell what the job's own announcements add.
ABLATION = ("foresight-bg",)


class JaxExperiment(labkit.JaxJobLab):
    """The JAX experiment's controller, job and runs on the job's lab."""

    def controller(self, mode):
        key = "ecmp5" if mode == "ecmp5" else "qp"
        if self.controller_mode == key:
            return
        self.lab.stop_controller()
        extra = ["--ecmp-hash", "five-tuple" if key == "ecmp5" else "qp-aware",
                 "--hash-seed", self.args.hash_seed, "--reserved-tc", str(labkit.ROCE_QUEUE),
                 "--background-tc", str(labkit.ROCE_QUEUE),
                 "--headroom", "1.0", "--lead-time-ms", str(self.args.lead_time_ms),
                 "--lowered-ecn", "10,50,13107"]
        if self.args.follow_traffic:
            # The job's TCP is seen by its reservations' watch counters; a
            # connection waiting out TCP's initial retransmission timeout
            # (1 s) still sends.
            extra += ["--follow-traffic", "--follow-from", "counters", "--release-idle-ms", "1000"]
        # NDSP on every address of the fabric namespace: loopback for the
        # CLI, the management link for the job.
        self.lab.start_controller(*extra, ndsp=f"0.0.0.0:{labmod.NDSP_ADDR.rsplit(':', 1)[1]}")
        self.controller_mode = key

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
                exp.controller(mode)
                followed = labkit.follow_metrics(exp.lab) if args.follow_traffic else None
                steps, failed, raw = exp.run_one(seed, mode)
                row = {**run_summary(seed, mode, steps, failed), "load_1m": load}
                if followed is not None:
                    now = labkit.follow_metrics(exp.lab)
                    row.update({k: round(now[k] - followed[k], 3) for k in followed})
                steps_all += steps
                runs.append(row)
                fill_ratios(runs, args.reference)
                done += 1
                eta = (time.time() - t0) / done * (total - done)
                labkit.progress(f"[{done}/{total}] seed {seed} {mode:<9} median step {row['median_step_s']} s "
                                f"({row['median_vs_ref']}x {args.reference}), mean {row['mean_step_s']} s, max "
                                f"{row['max_step_s']} s{' FAILED ' + row['failed'] if row['failed'] else ''}; "
                                f"load {row['load_1m']}; ETA {eta:.0f} s")
                labkit.write_csv(os.path.join(args.out, "steps.csv"), steps_all)
                labkit.write_csv(os.path.join(args.out, "runs.csv"), runs)
    import plots
    plots.jax_steps(args.out)
    for mode in args.modes:
        v = sorted(float(r["mean_vs_ref"]) for r in runs if r["mode"] == mode and r["mean_vs_ref"] != "")
        if v:
            print(f"{mode}: {len(v)} runs, mean step / {args.reference}'s median: median {statistics.median(v):.3f}, "
                  f"min {v[0]:.3f}, max {v[-1]:.3f}")


def add_parser(sub):
    p = sub.add_parser("jax", help="a JAX training job's step time: ECMP, QP-aware ECMP, Foresight")
    labkit.add_lab_arguments(p, "fj", "jax", 5, MODES, MODES + ABLATION, 240.0, 240.0)
    p.add_argument("--reference", default="isolated", choices=MODES + ABLATION,
                   help="ratios are to this mode's median step (it runs first among the seed's modes)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--window-margin", type=float, default=0.25)
    p.add_argument("--follow-traffic", action="store_true",
                   help="reservations follow the job's traffic (controller --follow-traffic, seen by the watch "
                        "counters); runs.csv counts extensions, refusals, early releases and released link-seconds")
    p.set_defaults(func=cmd_jax)
