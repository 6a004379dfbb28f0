"""Learned periodic schedules in the lab (T+5): the JAX job announces
nothing but its registration, and the controller learns its iterations
from the traffic and reserves the next ones by itself.

    sudo bmv2-lab/experiment.py t5 [--seeds 2] [--out bmv2-lab/results/t5]

The job and the background are the JAX experiment's (jax_experiment.py),
with a pause before each step's collectives (--compute-s, the stand-in for
the accelerator's forward and backward pass), so that iterations are
bursts with silence between them. At --change-at the job changes its model
and batch (--width-after, --compute-after: other bytes, another period).

Modes, the same background (drawn from the seed) in each:

  isolated  the background kept inside each leaf: the reference, the
            communication time of a step when nothing collides with it;
  ecmp5     seeded ECMP on the 5-tuple, nothing reserved;
  qp        QP-aware ECMP, nothing reserved (the RoCEv2 flows hashed on
            their destination QP; the job's TCP on its 5-tuple);
  t5        QP-aware ECMP plus Foresight: the background's tenant forecasts
            its flows; the job only registers (process 0, over the
            management link), and the controller learns it
            (--learn-iterations, from the watch counters of the job's host
            pairs: gloo is TCP, which INT does not carry). The job is
            SIGKILLed after step --kill-after-step. The background's
            reserved flows ride a queue below the job's (--background-tc),
            each port they reserved split between the two for the run
            (shaper.py: BMv2 would give every queue the port's rate).

Measured per step: its communication time (the collectives, without the
pause) over the seed's `isolated` median for the same phase (before or
after the change); whether a predicted reservation covered it (the
controller's /v1/status, polled every 100 ms during the run); after the
change, the steps until predictions cover steps again; after the kill, the
time until no predicted reservation of the job is scheduled or installed.

Results: DIR/steps.csv (every step), DIR/runs.csv (per run), DIR/t5.png,
DIR/raw/<run>/ (logs, the status timeline).
"""

import csv
import json
import os
import shutil
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as labmod  # noqa: E402
import labkit  # noqa: E402
import shaper as shapermod  # noqa: E402

MODES = ("isolated", "ecmp5", "qp", "t5")
LIVE = ("scheduled", "installed")

# Polls the controller's status in the fabric namespace: one JSON line per
# poll with the predicted reservations (argv: output path).
STATUS_POLLER = """
import json, sys, time, urllib.request
out = open(sys.argv[1], "w")
while True:
    t = time.time_ns()
    try:
        with urllib.request.urlopen("http://%s/v1/status", timeout=2) as r:
            s = json.load(r)
        pred = [{k: x[k] for k in ("id", "state", "status", "reserved_flows", "flows",
                               "start_unix_ns", "end_unix_ns", "install_unix_ns")}
                for x in s["reservations"]["list"] if x.get("predicted")]
        out.write(json.dumps({"t": t, "predicted": pred}) + "\\n")
        out.flush()
    except Exception as e:
        out.write(json.dumps({"t": t, "error": str(e)}) + "\\n")
    time.sleep(0.1)
""" % labmod.HTTP_ADDR


class LearnedExperiment(labkit.JaxJobLab):
    """The controller, the job and the runs of the learned-schedule experiment."""

    def __init__(self, args):
        super().__init__(args)
        self.shaped = {}  # the ports shaped for the current run (shaper.py)

    def controller(self, mode):
        key = mode if mode in ("t5", "ecmp5") else "qp"
        if self.controller_mode == key:
            return
        self.lab.stop_controller()
        a = self.args
        extra = ["--ecmp-hash", "five-tuple" if key == "ecmp5" else "qp-aware", "--hash-seed", a.hash_seed,
                 "--reserved-tc", str(labkit.ROCE_QUEUE), "--background-tc", str(a.background_tc),
                 "--headroom", "1.0", "--lead-time-ms", str(a.lead_time_ms), "--lowered-ecn", "10,50,13107"]
        if key == "t5":
            extra += ["--learn-iterations", "--learn-from", "counters", "--learn-poll-ms", str(a.learn_poll_ms),
                      "--learn-idle-ms", str(a.learn_idle_ms), "--learn-jitter", str(a.learn_jitter),
                      "--learn-bytes-tolerance", str(a.learn_bytes_tolerance),
                      "--learn-horizon", str(a.learn_horizon), "--learn-returns", a.learn_returns]
        self.lab.start_controller(*extra, ndsp=f"0.0.0.0:{labmod.NDSP_ADDR.rsplit(':', 1)[1]}")
        self.controller_mode = key

    def forecast_background(self, spec, raw, tag):
        """The background's forecast; with its reserved flows in a queue of
        their own (--background-tc), each port they reserved is shaped for
        the run (shaper.py): their queue gets what they reserved, the job's
        the rest of the port, as a strict-priority port would give it at
        least, and no port sends more than its rate."""
        ids = super().forecast_background(spec, raw, tag)
        if self.args.background_tc != labkit.ROCE_QUEUE:
            with open(os.path.join(raw, "reservations.json")) as fh:
                reservations = json.load(fh)
            self.shaped = shapermod.shape_lab(self.lab, reservations, self.args.pps_per_gbps,
                                              self.args.background_tc, labkit.ROCE_QUEUE)
            with open(os.path.join(raw, "shaped.json"), "w") as fh:
                json.dump([{"port": f"{sw}:{p}", "queue_pps": qs} for (sw, p), qs in sorted(self.shaped.items())],
                          fh, indent=1)
        return ids

    def job_command(self, i, mode, raw, tag, hosts):
        a = self.args
        cmd = [a.python, os.path.join(HERE, "jax_job.py"), "--process-id", str(i), "--hosts", hosts,
               "--steps", str(a.steps), "--width", str(a.width), "--compute-s", str(a.compute_s),
               "--change-at", str(a.change_at), "--width-after", str(a.width_after),
               "--compute-after", str(a.compute_after)]
        if i == 0:
            cmd += ["--out", os.path.join(raw, "steps.csv")]
            if mode == "t5":
                cmd += ["--controller", self.controller_addr, "--register-only", "--job", f"jax-{tag}"]
        return cmd

    def run_job(self, mode, raw, tag):
        """The job; in t5 mode SIGKILLed after step --kill-after-step.
        Returns (exit codes, kill time in Unix ns or None)."""
        procs = self.start_job(mode, raw, tag)
        kill_after = self.args.kill_after_step if mode == "t5" else None
        steps_csv = os.path.join(raw, "steps.csv")
        deadline = time.time() + self.args.timeout_s
        killed_ns = None
        while any(p.poll() is None for p in procs) and time.time() < deadline:
            if kill_after is not None and killed_ns is None and steps_done(steps_csv) > kill_after:
                for p in procs:
                    p.send_signal(signal.SIGKILL)
                killed_ns = time.time_ns()
            time.sleep(0.05)
        codes = []
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
                codes.append("timeout")
            else:
                codes.append(0 if killed_ns else p.returncode)
        return codes, killed_ns

    def run_one(self, seed, mode, load):
        tag = f"s{seed}-{mode}"
        raw = os.path.join(self.out, "raw", tag)
        os.makedirs(raw, exist_ok=True)
        with open(os.path.join(raw, "load_1m"), "w") as fh:  # kept for --reanalyse
            fh.write(str(load))
        self.controller(mode)
        timeline = os.path.join(raw, "status.jsonl")
        poller = self.lab.fabric_popen([sys.executable, "-c", STATUS_POLLER, timeline],
                                       os.path.join(raw, "status-poller.log"))
        bg_procs, bg_ids = self.start_background(seed, "foresight-bg" if mode == "t5" else mode, raw, tag)
        codes, killed_ns = self.run_job(mode, raw, tag)
        if killed_ns:
            with open(os.path.join(raw, "killed_unix_ns"), "w") as fh:
                fh.write(str(killed_ns))
        if killed_ns:
            time.sleep(self.args.after_kill_s)  # watch the withdrawal
        self.stop_background(bg_procs, bg_ids)
        if self.shaped:
            shapermod.unshape(self.lab, self.shaped)
            self.shaped = {}
        poller.terminate()
        poller.wait()
        if mode == "t5":  # what the controller learned, reserved and withdrew
            shutil.copy(os.path.join(self.lab.dir, "controller.log"), os.path.join(raw, "controller.log"))
        failed = [f"{h}:{c}" for h, c in zip(self.ranks, codes) if c != 0]
        steps = []
        steps_csv = os.path.join(raw, "steps.csv")
        if os.path.exists(steps_csv):
            with open(steps_csv) as fh:
                steps = [{"seed": seed, "mode": mode, **r} for r in csv.DictReader(fh)]
        return steps, failed, read_timeline(timeline), killed_ns


def steps_done(path):
    try:
        with open(path) as fh:
            return max(0, sum(1 for _ in fh) - 1)
    except FileNotFoundError:
        return 0


def read_timeline(path):
    polls = []
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                try:
                    polls.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # the last line of a killed poller
    return [p for p in polls if "predicted" in p]


def predicted_windows(polls):
    """Every predicted reservation seen installed: id -> (from, to), its
    window cut to the polls that saw it installed (a withdrawn one stops
    counting when it is withdrawn)."""
    seen = {}
    for p in polls:
        for r in p["predicted"]:
            if r["state"] == "installed":
                first, _, start, end = seen.get(r["id"], (p["t"], p["t"], int(r["start_unix_ns"]),
                                                          int(r["end_unix_ns"])))
                seen[r["id"]] = (first, p["t"], start, end)
    # Installed at the lead time before its start: it counts from its start.
    return {i: (max(start, first), min(end, last)) for i, (first, last, start, end) in seen.items()}


def last_live(polls, ids=None):
    """When a predicted reservation (of `ids`, if given) was last seen
    scheduled or installed."""
    t = None
    for p in polls:
        if any(r["state"] in LIVE and (ids is None or r["id"] in ids) for r in p["predicted"]):
            t = p["t"]
    return t


def withdrawn_after_change(steps, polls, change_at):
    """Seconds from the first changed step's start until none of the
    predictions made before it is live (0 if none was)."""
    changed = [int(r["start_unix_ns"]) for r in steps if int(r["step"]) == change_at]
    if not changed:
        return ""
    before = {r["id"] for p in polls if p["t"] < changed[0] for r in p["predicted"]}
    gone = last_live(polls, before)
    return round(max(0, gone - changed[0]) / 1e9, 3) if gone else 0.0


def annotate(steps, polls, change_at):
    """Per step: communication seconds, phase, covered by a predicted reservation."""
    windows = predicted_windows(polls)
    for r in steps:
        t0, t1 = int(r["start_unix_ns"]), int(r["end_unix_ns"])
        r["comm_s"] = round((t1 - t0) / 1e9, 4)
        r["phase"] = "after" if int(r["step"]) >= change_at else "before"
        r["predicted"] = int(any(s < t1 and e > t0 for s, e in windows.values()))


def fill_ratios(steps, runs):
    """comm_s over the seed's isolated median comm_s of the same phase."""
    ref = {}
    for r in steps:
        if r["mode"] == "isolated" and int(r["step"]) > 0:
            ref.setdefault((r["seed"], r["phase"]), []).append(float(r["comm_s"]))
    ref = {k: statistics.median(v) for k, v in ref.items()}
    for r in steps:
        k = (r["seed"], r["phase"])
        r["comm_vs_isolated"] = round(float(r["comm_s"]) / ref[k], 3) if k in ref else ""
    for run in runs:
        mine = [r for r in steps if r["seed"] == run["seed"] and r["mode"] == run["mode"]
                and r["comm_vs_isolated"] != ""]
        covered = [float(r["comm_vs_isolated"]) for r in mine if int(r["predicted"])]
        bare = [float(r["comm_vs_isolated"]) for r in mine if not int(r["predicted"]) and int(r["step"]) > 0]
        run["median_covered_vs_isolated"] = round(statistics.median(covered), 3) if covered else ""
        run["median_uncovered_vs_isolated"] = round(statistics.median(bare), 3) if bare else ""


def run_summary(seed, mode, steps, failed, polls, killed_ns, change_at):
    covered = [int(r["step"]) for r in steps if int(r["predicted"])]
    before = [k for k in covered if k < change_at]
    after = [k for k in covered if k >= change_at]
    gone = last_live(polls)
    period = [int(r["end_unix_ns"]) - int(r["start_unix_ns"]) + float(r["compute_s"]) * 1e9
              for r in steps if int(r["step"]) > 0]
    return {"seed": seed, "mode": mode, "steps": len(steps), "failed": " ".join(failed),
            "predicted_steps": len(covered),
            "first_predicted_step": before[0] if before else "",
            "first_predicted_after_change": after[0] if after else "",
            "relearned_in_steps": after[0] - change_at if after else "",
            "old_predictions_gone_after_change_s": withdrawn_after_change(steps, polls, change_at),
            "killed_unix_ns": killed_ns or "",
            "withdrawn_after_kill_s": round(max(0, gone - killed_ns) / 1e9, 3) if killed_ns and gone else
            (0.0 if killed_ns else ""),
            "last_period_s": round(period[-1] / 1e9, 3) if period else ""}


def cmd_learned(args):
    if args.reanalyse:
        print_runs(reanalyse(args))
        return
    exp = LearnedExperiment(args)
    steps_all, runs = [], []
    with exp.lab:
        exp.setup_hosts()
        total, done, t0 = args.seeds * len(args.modes), 0, time.time()
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for mode in args.modes:
                load = labmod.load_1m()
                steps, failed, polls, killed_ns = exp.run_one(seed, mode, load)
                annotate(steps, polls, args.change_at)
                row = {**run_summary(seed, mode, steps, failed, polls, killed_ns, args.change_at), "load_1m": load}
                steps_all += steps
                runs.append(row)
                fill_ratios(steps_all, runs)
                done += 1
                eta = (time.time() - t0) / done * (total - done)
                labkit.progress(f"[{done}/{total}] seed {seed} {mode:<8} {row['steps']} steps, "
                                f"{row['predicted_steps']} covered by predictions (first {row['first_predicted_step']}, "
                                f"after the change {row['first_predicted_after_change']}), withdrawn "
                                f"{row['withdrawn_after_kill_s']} s after the kill"
                                f"{' FAILED ' + row['failed'] if row['failed'] else ''}; ETA {eta:.0f} s")
                labkit.write_csv(os.path.join(args.out, "steps.csv"), steps_all)
                labkit.write_csv(os.path.join(args.out, "runs.csv"), runs)
    import plots
    plots.learned_steps(args.out, args.change_at)
    print_runs(runs)


def print_runs(runs):
    for r in runs:
        print(f"seed {r['seed']} {r['mode']}: covered steps {r['median_covered_vs_isolated']}x isolated, "
              f"others {r['median_uncovered_vs_isolated']}x; first predicted step {r['first_predicted_step']}, "
              f"relearned in {r['relearned_in_steps']} steps (old predictions gone "
              f"{r['old_predictions_gone_after_change_s']} s after the change), withdrawn {r['withdrawn_after_kill_s']} s after "
              f"the kill (period {r['last_period_s']} s)")


def reanalyse(args):
    """Recompute DIR's CSVs and plot from DIR/raw (status timelines and
    per-step CSVs), e.g. after the analysis changed, or to join seeds run
    in several sittings (each with its own --first-seed, same --out)."""
    steps_all, runs = [], []
    tags = [t[1:].split("-", 1) for t in os.listdir(os.path.join(args.out, "raw"))]
    order = {m: i for i, m in enumerate(MODES)}
    for seed, mode in sorted(tags, key=lambda t: (int(t[0]), order.get(t[1], len(order)), t[1])):
        tag = f"s{seed}-{mode}"
        raw = os.path.join(args.out, "raw", tag)
        with open(os.path.join(raw, "steps.csv")) as fh:
            steps = [{"seed": int(seed), "mode": mode, **r} for r in csv.DictReader(fh)]
        polls = read_timeline(os.path.join(raw, "status.jsonl"))
        killed = None
        if os.path.exists(os.path.join(raw, "killed_unix_ns")):
            killed = int(open(os.path.join(raw, "killed_unix_ns")).read())
        annotate(steps, polls, args.change_at)
        row = run_summary(int(seed), mode, steps, [], polls, killed, args.change_at)
        load = os.path.join(raw, "load_1m")
        row["load_1m"] = open(load).read().strip() if os.path.exists(load) else ""
        runs.append(row)
        steps_all += steps
    fill_ratios(steps_all, runs)
    labkit.write_csv(os.path.join(args.out, "steps.csv"), steps_all)
    labkit.write_csv(os.path.join(args.out, "runs.csv"), runs)
    import plots
    plots.learned_steps(args.out, args.change_at)
    return runs


def add_parser(sub):
    p = sub.add_parser("t5", help="T+5: a JAX job that announces nothing, learned by the controller")
    labkit.add_lab_arguments(p, "ft", "t5", 2, MODES, MODES, 400.0, 400.0)
    p.add_argument("--steps", type=int, default=36)
    p.add_argument("--compute-s", type=float, default=1.5)
    p.add_argument("--change-at", type=int, default=18)
    p.add_argument("--width-after", type=int, default=128, help="~200 KB of gradients instead of ~140 KB")
    p.add_argument("--compute-after", type=float, default=2.0)
    p.add_argument("--kill-after-step", type=int, default=32, help="t5 mode: SIGKILL the job after this step")
    p.add_argument("--after-kill-s", type=float, default=12.0, help="watch the controller this long after the kill")
    p.add_argument("--learn-poll-ms", type=float, default=20.0)
    p.add_argument("--learn-idle-ms", type=float, default=500.0,
                   help="longer than a TCP retransmission timeout inside a step, shorter than --compute-s")
    p.add_argument("--learn-jitter", type=float, default=0.1)
    p.add_argument("--learn-bytes-tolerance", type=float, default=0.2)
    p.add_argument("--learn-horizon", type=int, default=1)
    p.add_argument("--background-tc", type=int, default=1,
                   help="the background tenant's reserved flows' queue: below the job's (3), with the ports "
                        "they reserve shaped between the two (shaper.py); or 3, sharing the job's queue")
    p.add_argument("--learn-returns", choices=("reserve", "ecmp"), default="reserve",
                   help="the job's TCP acknowledgements: reserved with its transfers, or left to ECMP")
    p.add_argument("--reanalyse", action="store_true",
                   help="no runs: recompute the CSVs and the plot from --out's raw/")
    p.set_defaults(func=cmd_learned)
