#!/usr/bin/python3
"""Cost curves: what the control loop, the planner, the compute side and
the simulator cost as the fabric grows, measured and plotted on log-log
axes with the growth exponent of each curve.

    python3 docs/cost_curves.py [--only loop,compute,sim] [--plot-only] [--out docs/cost-curves]

  loop     the control loop on BMv2 (`cargo bench -p foresight --bench
           control_loop`, its scale part): NDSP batch received to every
           entry acknowledged, ring all-reduces of 16 to 1,024 ranks on 12
           switches, and a 256-rank ring spread over 2 to 32 leaves (the
           writes to every switch go out at once);
  compute  `foresight scale`: an NDSP batch to the encoded P4Runtime writes
           for every switch of a generated clos3 or rail-optimized fabric
           (plan, intent, diff, encode), 1k to 32k GPUs; the planner's
           share is its own curve;
  sim      `foresight sim run`, one iteration: ring at 1k to 100k GPUs,
           all-to-all at 256 to 4k, each policy's wall time and the
           process's peak memory.

Each part writes a CSV into --out (loop.csv, compute.csv, sim.csv, with
the 1-minute load average beside every row) and the figure
docs/images/cost-curves.png is drawn from them. Run it on an idle machine:
the figures are timings. The binary is target/release/foresight (build it
with `cargo build --release -p foresight`); the loop needs BMv2 on PATH.

The exponent k of each curve is the least-squares slope of log(cost)
against log(size) over its largest sizes (the upper half): cost ~ size^k.
k near 1 is linear; slightly above 1 what n log n looks like over a
decade; 2 quadratic.
"""

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "foresight")
FIGURE = os.path.join(ROOT, "docs", "images", "cost-curves.png")

COMPUTE_SIZES = (1024, 2048, 4096, 8192, 16384, 32768)
SIM_RING_SIZES = (1024, 4096, 8192, 16384, 32768, 102400)
SIM_A2A_SIZES = (256, 512, 1024, 2048, 4096)
LOOP_RANKS = (16, 64, 256, 1024)
LOOP_LEAVES = (2, 4, 8, 16, 32)


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def say(msg):
    print(f"[cost-curves {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    say(f"wrote {os.path.relpath(path, ROOT)} ({len(rows)} rows)")


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def need_binary():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"{BIN} not found: build it with `cargo build --release -p foresight`")


def measure_compute(out):
    need_binary()
    rows = []
    for fabric in ("clos3", "rail-optimized"):
        for workload in ("ring", "all-to-all-round"):
            for gpus in COMPUTE_SIZES:
                say(f"compute: {fabric} {workload} {gpus} GPUs")
                r = subprocess.run([BIN, "scale", "--fabric", fabric, "--gpus", str(gpus), "--workload",
                                    workload, "--iterations", "5", "--json"], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"foresight scale --fabric {fabric} --gpus {gpus} failed: {r.stderr.strip()[-300:]}")
                rep = json.loads(r.stdout)
                rows.append({"fabric": fabric, "workload": workload, "gpus": gpus, "switches": rep["switches"],
                             "flows": rep["flows"], "plan_p50_ms": rep["plan"]["p50_ms"],
                             "total_p50_ms": rep["total"]["p50_ms"], "total_p99_ms": rep["total"]["p99_ms"],
                             "entities": rep["entities"], "encoded_bytes": rep["encoded_bytes"],
                             "switches_written": rep["switches_written"],
                             "entities_per_switch_max": rep["entities_per_switch_max"], "setup_s": rep["setup_s"],
                             "peak_rss_mib": rep["peak_rss_mib"], "load_1min": load()})
    write_rows(os.path.join(out, "compute.csv"), rows)


def measure_sim(out):
    need_binary()
    rows = []
    cases = [("ring", g, "ecmp,foresight") for g in SIM_RING_SIZES]
    cases += [("all-to-all", g, "ecmp,spray,foresight") for g in SIM_A2A_SIZES]
    for workload, gpus, policies in cases:
        say(f"sim: {workload} {gpus} GPUs ({policies})")
        with tempfile.TemporaryDirectory(prefix="foresight-cost-") as tmp:
            started = time.time()
            r = subprocess.run([BIN, "sim", "run", "--gpus", str(gpus), "--workload", workload, "--policies",
                                policies, "--jobs", "1", "--out", tmp], capture_output=True, text=True)
            wall = time.time() - started
            if r.returncode != 0:
                sys.exit(f"foresight sim run --gpus {gpus} --workload {workload} failed: {r.stderr.strip()[-300:]}")
            rss = re.search(r"peak RSS (\d+) MiB", r.stdout + r.stderr)
            build = re.search(r"fabric build ([\d.]+) s", r.stdout + r.stderr)
            with open(os.path.join(tmp, "summary.csv")) as f:
                for s in csv.DictReader(f):
                    if s["policy"] == "ideal":
                        continue
                    rows.append({"workload": workload, "gpus": gpus, "policy": s["policy"], "flows": s["flows"],
                                 "events": s["events"], "wall_s": s["wall_s"], "plan_s": s["plan_s"],
                                 "fabric_build_s": build.group(1) if build else "",
                                 "process_wall_s": f"{wall:.2f}", "peak_rss_mib": rss.group(1) if rss else "",
                                 "load_1min": load()})
    write_rows(os.path.join(out, "sim.csv"), rows)


def measure_loop(out):
    path = os.path.join(out, "loop.csv")
    if os.path.exists(path):
        os.remove(path)
    env = dict(os.environ, FORESIGHT_BENCH_PARTS="scale", FORESIGHT_BENCH_CSV=path)
    # The ring sizes on the bench's 8 leaves, then a 256-rank ring over
    # 2 to 32 leaves (16 NICs each, 4 spines).
    runs = [({"FORESIGHT_BENCH_SCALE_LEAVES": "8",
              "FORESIGHT_BENCH_SCALE_RANKS": ",".join(map(str, LOOP_RANKS))}),
            ({"FORESIGHT_BENCH_SCALE_LEAVES": ",".join(str(n) for n in LOOP_LEAVES if n != 8),
              "FORESIGHT_BENCH_SCALE_RANKS": "256"})]
    for extra in runs:
        say(f"loop: cargo bench control_loop, {extra}")
        r = subprocess.run(["cargo", "bench", "-p", "foresight", "--bench", "control_loop"],
                           cwd=os.path.join(ROOT, "controller"), env=dict(env, **extra))
        if r.returncode != 0:
            sys.exit("the control-loop bench failed (see above)")
    if not os.path.exists(path):
        sys.exit("the control-loop bench wrote no figures: is BMv2 (simple_switch_grpc) on PATH?")
    say(f"wrote {os.path.relpath(path, ROOT)}")


def exponent(points):
    """Least-squares slope of log(cost) on log(size) over the upper half of
    the sizes (at least two points); None with fewer than two."""
    pts = sorted((x, y) for x, y in points if x > 0 and y > 0)
    pts = pts[(len(pts) - 1) // 2:]
    if len(pts) < 2:
        return None
    xs, ys = [math.log(x) for x, _ in pts], [math.log(y) for _, y in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def curve(ax, rows, x, y, label, per=None):
    """Plots y against x; the label carries the exponent k, and with `per`
    (a column such as flows) also the exponent against that column."""
    pts = sorted((float(r[x]), float(r[y])) for r in rows if r[y] not in ("", "nan"))
    if not pts:
        return None
    k = exponent(pts)
    text = f"k = {k:.2f}" if k is not None else ""
    if per:
        kp = exponent([(float(r[per]), float(r[y])) for r in rows if r[y] not in ("", "nan")])
        if kp is not None:
            text += f"; {kp:.2f} in {per}"
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{label} ({text})" if text else label)
    return text


def plot(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loop, compute, sim = (read_rows(os.path.join(out, f)) for f in ("loop.csv", "compute.csv", "sim.csv"))
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    exponents = []

    ax = axes[0][0]
    on8 = [r for r in loop if r["leaves"] == "8"]
    for y, label in (("loop_p50_ms", "p50"), ("loop_p99_ms", "p99")):
        exponents.append(("loop", f"ring on 12 BMv2 switches, {label}", curve(ax, on8, "ranks", y, label)))
    spread = [r for r in loop if r["ranks"] == "256"]
    if spread:
        twin = ax.twiny()
        pts = sorted((int(r["switches"]), float(r["loop_p50_ms"])) for r in spread)
        k = exponent(pts)
        twin.plot([p[0] for p in pts], [p[1] for p in pts], marker="s", color="tab:green",
                  label=f"256 ranks over more switches, p50 (top axis; k = {k:.2f})")
        twin.set_xscale("log")
        twin.set_xticks([p[0] for p in pts], [str(p[0]) for p in pts])
        twin.minorticks_off()
        twin.set_xlabel("BMv2 switches (256-rank ring)")
        twin.legend(loc="lower right", fontsize=8)
        exponents.append(("loop", "256 ranks against switches, p50", f"k = {k:.2f}"))
    ax.set(xscale="log", yscale="log", xlabel="ranks (ring all-reduce, 8 channels)",
           ylabel="NDSP received to all entries acknowledged, ms", title="Control loop on BMv2")
    ax.legend(loc="upper left", fontsize=8)

    for ax, y, title in ((axes[0][1], "plan_p50_ms", "Planner (one NDSP batch)"),
                         (axes[1][0], "total_p50_ms", "Compute side: batch to encoded writes")):
        for fabric in ("clos3", "rail-optimized"):
            for workload in ("ring", "all-to-all-round"):
                rows = [r for r in compute if r["fabric"] == fabric and r["workload"] == workload]
                label = f"{fabric} {workload}"
                exponents.append((title.split(" ")[0].lower().rstrip(":"), label, curve(ax, rows, "gpus", y, label)))
        ax.set(xscale="log", yscale="log", xlabel="GPUs", ylabel="p50, ms", title=title)
        ax.legend(fontsize=8)

    ax = axes[1][1]
    for workload in ("ring", "all-to-all"):
        for policy in sorted({r["policy"] for r in sim if r["workload"] == workload}):
            rows = [r for r in sim if r["workload"] == workload and r["policy"] == policy]
            label = f"{workload} {policy}"
            exponents.append(("sim", label, curve(ax, rows, "gpus", "wall_s", label, per="flows")))
    ax.set(xscale="log", yscale="log", xlabel="GPUs", ylabel="wall time of one policy, s",
           title="Simulator, one iteration")
    ax.legend(fontsize=8)

    loads = sorted({float(r["load_1min"]) for rows in (loop, compute, sim) for r in rows if r.get("load_1min")})
    fig.suptitle("Cost against size (log-log; k: growth exponent over the largest sizes)"
                 + (f"; load {loads[0]:.1f}–{loads[-1]:.1f}" if loads else ""))
    fig.tight_layout()
    os.makedirs(os.path.dirname(FIGURE), exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    say(f"wrote {os.path.relpath(FIGURE, ROOT)}")
    for part, label, k in exponents:
        print(f"  {part:<8} {label:<48} {k or '-'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="loop,compute,sim", help="parts to measure, comma-separated")
    ap.add_argument("--plot-only", action="store_true", help="draw the figure from the CSVs already in --out")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "cost-curves"))
    args = ap.parse_args()
    parts = [p for p in args.only.split(",") if p]
    unknown = set(parts) - {"loop", "compute", "sim"}
    if unknown:
        ap.error(f"--only: {', '.join(sorted(unknown))}; want loop, compute, sim")
    os.makedirs(args.out, exist_ok=True)
    if not args.plot_only:
        for part in parts:
            {"loop": measure_loop, "compute": measure_compute, "sim": measure_sim}[part](args.out)
    plot(args.out)


if __name__ == "__main__":
    main()
