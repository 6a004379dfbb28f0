#!/usr/bin/python3
"""The lab rows of the README's headline table, from experiment results.

    bmv2-lab/headline.py "LABEL=DIR[,DIR...]" [...]

Each argument is one row: a label and the all-reduce result directories
(`experiment.py allreduce --out DIR`, e.g. the go-back-N run and its
`--nic ooo` companion) whose runs fill it. A cell is completion ÷ ideal,
median [min, max] over seeds, and below it the simulator on the same runs
(DIR/sim_vs_lab.csv from compare_sim.py) when it is there. The last column
gives the seeds and the machine's 1-minute load average over the row's
runs (runs.csv load_1m), so every figure carries the load it was taken at.

Below the table, one line per row holds it against issue 29's bar: per
seed, Foresight ÷ the best baseline that runs on go-back-N NICs (ECMP,
QP-aware ECMP, flowlets and spraying on go-back-N NICs), and on how many
seeds Foresight is within 1.05× ideal and within 0.8× that baseline.
"""

import csv
import os
import statistics
import sys

# Columns: (mode as runs.csv names it, NIC or None for "any"); the
# simulator's columns in the same order (adaptive routing has no lab mode).
# Foresight's column is its go-back-N runs: it needs no special NIC.
COLUMNS = (("ecmp5", None), ("qp", None), ("adaptive", None), ("flowlet", "gbn"), ("flowlet", "ooo"),
           ("spray", "gbn"), ("spray", "ooo"), ("foresight", "gbn"))
HEADER = ("ECMP, 5-tuple", "QP-aware ECMP (S)", "adaptive (S)", "flowlet, go-back-N NIC (S)",
          "flowlet, OOO NIC (S, N)", "spraying, go-back-N NIC (S)", "spraying, OOO NIC (S, N)", "Foresight (S)")


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return list(csv.DictReader(fh))


def summary(values):
    if not values:
        return "–"
    return f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def nic_of(run, default):
    return run.get("nic") or default


# The baselines a plain RoCE (go-back-N) NIC can run: issue 29's bar.
GBN_BASELINES = (("ecmp5", "gbn"), ("qp", "gbn"), ("flowlet", "gbn"), ("spray", "gbn"))


def runs_of(d):
    """DIR/runs.csv's rows, or exit naming what is missing."""
    runs = read(os.path.join(d, "runs.csv"))
    if not runs:
        sys.exit(f"{d}: no runs.csv (is it an `experiment.py allreduce --out` directory?)")
    return runs


def against_the_bar(label, dirs):
    """Per seed: Foresight's slowdown ÷ the best go-back-N baseline's."""
    by_seed = {}
    for d in dirs:
        for r in runs_of(d):
            if r.get("slowdown"):
                by_seed.setdefault(r["seed"], {})[(r["mode"], nic_of(r, "gbn"))] = float(r["slowdown"])
    ratios, within = [], 0
    for seed in sorted(by_seed, key=int):
        runs = by_seed[seed]
        best = [runs[k] for k in GBN_BASELINES if k in runs]
        if ("foresight", "gbn") not in runs or not best:
            continue
        ratios.append(runs[("foresight", "gbn")] / min(best))
        within += runs[("foresight", "gbn")] <= 1.05
    if not ratios:
        return f"{label}: no seed with Foresight and a go-back-N baseline"
    listed = ", ".join(f"{x:.2f}" for x in ratios)
    return (f"{label}: Foresight ÷ best go-back-N baseline per seed {listed}; ≤ 0.8 on "
            f"{sum(x <= 0.8 for x in ratios)}/{len(ratios)}, Foresight ≤ 1.05× ideal on {within}/{len(ratios)}")


def row(label, dirs):
    lab, sim, loads, seeds = {}, {}, [], set()
    for d in dirs:
        runs = runs_of(d)
        for r in runs:
            if not r.get("slowdown"):
                continue  # a failed run: no completion to count
            key = (r["mode"], nic_of(r, "gbn"))
            lab.setdefault(key, []).append(float(r["slowdown"]))
            seeds.add(int(r["seed"]))
            if r.get("load_1m"):
                loads.append(float(r["load_1m"]))
        nics = {(r["seed"], r["mode"]): nic_of(r, "gbn") for r in runs}
        for r in read(os.path.join(d, "sim_vs_lab.csv")):
            # compare_sim names spraying's and flowlets' NICs in the mode
            # (spray-gbn); the other modes' NICs are their run's.
            mode, _, nic = r["mode"].partition("-")
            nic = nic or nics.get((r["seed"], mode))
            if not nic:
                sys.exit(f"{d}/sim_vs_lab.csv: seed {r['seed']} mode {r['mode']} has no run in runs.csv")
            sim.setdefault((mode, nic), []).append(float(r["sim_slowdown"]))
    cells = []
    for mode, nic in COLUMNS:
        keys = [k for k in lab if k[0] == mode and (nic is None or k[1] == nic)]
        values = [v for k in keys for v in lab[k]]
        sim_values = [v for k in keys for v in sim.get(k, [])]
        cell = summary(values)
        if sim_values:
            cell += f"<br>sim {summary(sim_values)}"
        cells.append(cell)
    load = f"load {min(loads):.1f}–{max(loads):.1f}" if loads else "load not recorded"
    return f"| {label}, {len(seeds)} seeds, {load} | " + " | ".join(cells) + " |"


def main(argv):
    if not argv or any("=" not in a for a in argv):
        sys.exit(__doc__)
    print("| workload | " + " | ".join(HEADER) + " |")
    print("|---|" + "---|" * len(HEADER))
    rows = [(label, [d for d in dirs.split(",") if d]) for label, dirs in (a.split("=", 1) for a in argv)]
    for label, dirs in rows:
        print(row(label, dirs))
    print()
    for label, dirs in rows:
        print(against_the_bar(label, dirs))


if __name__ == "__main__":
    main(sys.argv[1:])
