"""Plots of the bmv2-lab experiments (matplotlib, PNG), from their CSVs."""

import csv
import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODE_LABEL = {"ecmp5": "ECMP (5-tuple)", "qp": "QP-aware ECMP", "flowlet": "Flowlets",
              "spray": "Packet spraying", "foresight": "Foresight",
              "foresight-entropy": "Foresight, source ports only"}
COLORS = {"ecmp5": "#c0504d", "qp": "#e39b2d", "flowlet": "#8064a2", "spray": "#4bacc6",
          "foresight": "#2f7ed8", "foresight-entropy": "#7fb0e8"}


def _read(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def workload_of(out):
    """What the runs of an `experiment.py allreduce|alltoall` directory ran,
    from the flow ids of one run's spec (rocegen names them ring-... or
    a2a-...; the tenants' KV transfers kv...)."""
    import glob
    import gzip
    import json
    for path in sorted(glob.glob(os.path.join(out, "raw", "*", "spec.json*"))):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as fh:
            ids = [f["id"] for f in json.load(fh)["flows"]]
        name = "All-to-all" if any(i.startswith("a2a-") for i in ids) else "Ring all-reduce"
        extra = "KV transfers of another tenant" if any(i.startswith("kv") for i in ids) else "background present"
        return name, extra
    return "Ring all-reduce", "background present"


def allreduce(out):
    runs = [r for r in _read(os.path.join(out, "runs.csv")) if r["slowdown"]]
    modes = [m for m in MODE_LABEL if any(r["mode"] == m for r in runs)]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    data = [[float(r["slowdown"]) for r in runs if r["mode"] == m] for m in modes]
    ax[0].boxplot(data, labels=[MODE_LABEL[m] for m in modes], widths=0.5, showfliers=False)
    for i, (m, d) in enumerate(zip(modes, data)):
        xs = [i + 1 + (j - len(d) / 2) * 0.02 for j in range(len(d))]
        ax[0].scatter(xs, d, s=14, color=COLORS[m], zorder=3)
    ax[0].axhline(1.0, color="grey", lw=0.8, ls=":")
    ax[0].axhline(1.05, color="#2f7ed8", lw=0.8, ls="--", label="goal 1.05x")
    name, extra = workload_of(out)
    ax[0].set_ylabel(f"{name.lower()} completion / ideal")
    ax[0].set_title(f"{name}, {len(data[0]) if data else 0} seeds, {extra}")
    ax[0].legend(loc="upper right", fontsize=8)

    links = _read(os.path.join(out, "links.csv"))
    # Load imbalance of the leaf->spine uplinks: busiest / mean, per run.
    imb = {m: [] for m in modes}
    per_run = {}
    for r in links:
        if r["switch"].startswith("leaf") and int(r["port"]) > 0:
            per_run.setdefault((r["seed"], r["mode"]), {})[(r["switch"], int(r["port"]))] = int(r["packets"])
    uplinks = _uplink_ports(out)
    for (seed, mode), ports in per_run.items():
        vals = [ports[p] for p in uplinks if p in ports]
        if vals and sum(vals) > 0 and mode in imb:
            imb[mode].append(max(vals) / (sum(vals) / len(vals)))
    ax[1].boxplot([imb[m] for m in modes], labels=[MODE_LABEL[m] for m in modes], widths=0.5,
                  showfliers=False)
    for i, m in enumerate(modes):
        ax[1].scatter([i + 1] * len(imb[m]), imb[m], s=14, color=COLORS[m], zorder=3)
    ax[1].axhline(1.0, color="grey", lw=0.8, ls=":")
    ax[1].set_ylabel("busiest uplink / mean uplink (packets)")
    ax[1].set_title("Uplink load, all traffic (ring, background, ACKs)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "allreduce.png"), dpi=110)
    plt.close(fig)


def _uplink_ports(out):
    """(leaf, port) of every leaf-to-spine link of the run's topology."""
    import json
    import glob
    import yaml
    specs = sorted(glob.glob(os.path.join(out, "raw", "*", "topology.txt")))
    path = open(specs[0]).read().strip() if specs else None
    if not path or not os.path.exists(path):
        return []
    topo = yaml.safe_load(open(path))
    roles = {s["name"]: s["role"] for s in topo["switches"]}
    out_ports = []
    for l in topo.get("links", []):
        for a, pa, b in ((l["node1"], l["port1"], l["node2"]), (l["node2"], l["port2"], l["node1"])):
            if roles[a] == "leaf" and roles[b] == "spine":
                out_ports.append((a, pa))
    _ = json
    return out_ports


def queue_timeline(queue):
    """Deepest queue on any reserved-path port per 50 ms, per run."""
    bins = {}
    for r in queue:
        k = (str(r["seed"]), str(r["predrain"]), int(float(r["t_s"]) / 0.05))
        bins[k] = max(bins.get(k, 0), int(r["queue_occupancy"]))
    return [{"seed": sd, "predrain": on, "t_s": round(b * 0.05, 2), "max_queue": q}
            for (sd, on, b), q in sorted(bins.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2]))]


def predrain(out):
    timeline = _read(os.path.join(out, "queue_timeline.csv"))
    stats = {(r["seed"], r["predrain"]): {"p99": int(r["p99"]), "peak": int(r["peak"])}
             for r in _read(os.path.join(out, "queue_stats.csv"))}
    runs = _read(os.path.join(out, "runs.csv"))
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    seed = min((int(r["seed"]) for r in timeline), default=1)
    for on, color in (("1", "#2f7ed8"), ("0", "#c0504d")):
        pts = [(float(r["t_s"]), int(r["max_queue"])) for r in timeline
               if r["seed"] == str(seed) and r["predrain"] == on]
        if pts:
            ax[0].step([p[0] for p in pts], [p[1] for p in pts], where="post", color=color, lw=1,
                       label=f"pre-drain {'on' if on == '1' else 'off'}")
    ax[0].set_xlabel("time since the runs' start (s)")
    ax[0].set_ylabel("deepest queue per 50 ms (packets, INT)")
    ax[0].set_title(f"INT queue depth on reserved paths (seed {seed})")
    ax[0].legend()
    seeds = sorted({int(k[0]) for k in stats})
    w = 0.38
    for on, dx, color, label in (("1", -w / 2, "#2f7ed8", "pre-drain on"), ("0", w / 2, "#c0504d", "pre-drain off")):
        p99 = [stats.get((str(sd), on), {}).get("p99", 0) for sd in seeds]
        peak = [stats.get((str(sd), on), {}).get("peak", 0) for sd in seeds]
        ax[1].bar([sd + dx for sd in seeds], p99, w, color=color, label=f"{label}: p99")
        ax[1].scatter([sd + dx for sd in seeds], peak, marker="_", s=120, color="black", zorder=3)
    ax[1].scatter([], [], marker="_", s=120, color="black", label="peak")
    slow = {(r["seed"], r["predrain"]): r["slowdown"] for r in runs}
    for sd in seeds:
        for on, dx in (("1", -w / 2), ("0", w / 2)):
            if slow.get((str(sd), on)):
                ax[1].text(sd + dx, 0.5, f"{float(slow[(str(sd), on)]):.2f}x", ha="center", va="bottom",
                           fontsize=7, rotation=90, color="white")
    ax[1].set_xticks(seeds)
    ax[1].set_xlabel("seed (in the bars: completion / ideal)")
    ax[1].set_ylabel("INT queue depth on reserved paths (packets)")
    ax[1].set_title("Queue depth p99 (bars) and peak, per run")
    ax[1].set_ylim(0, max([v["peak"] for v in stats.values()] + [1]) * 1.35)
    ax[1].legend(loc="upper left", ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "predrain.png"), dpi=110)
    plt.close(fig)


def queue_stats(queue):
    """(seed, predrain) -> peak, p99 and share of samples at >= 10 packets."""
    by = {}
    for r in queue:
        by.setdefault((r["seed"], r["predrain"]), []).append(int(r["queue_occupancy"]))
    out = {}
    for k, v in by.items():
        v.sort()
        out[k] = {"peak": v[-1], "p99": v[min(len(v) - 1, int(len(v) * 0.99))],
                  "ge10": sum(1 for x in v if x >= 10) / len(v), "samples": len(v)}
    return out


JAX_LABEL = {"alone": "alone (no background)", "isolated": "isolated (background in its leaf)", **MODE_LABEL,
             "foresight-bg": "Foresight, background's forecast only"}
JAX_COLORS = {"alone": "#7f7f7f", "isolated": "#3a3a3a", **COLORS, "foresight-bg": "#8fb8e8"}


def jax_steps(out):
    """Left: every run's mean step time over its seed's reference (isolated) median, per mode.
    Right: step time per iteration (median over seeds, min-max band)."""
    runs = [r for r in _read(os.path.join(out, "runs.csv")) if r["mean_vs_ref"]]
    steps = _read(os.path.join(out, "steps.csv"))
    modes = [m for m in JAX_LABEL if any(r["mode"] == m for r in runs)]
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.4))
    data = [[float(r["mean_vs_ref"]) for r in runs if r["mode"] == m] for m in modes]
    if not modes:
        # Without a reference mode's runs (e.g. a run of one mode) there is
        # no ratio to draw; the per-iteration times still are.
        ax[0].text(0.5, 0.5, "no run has a reference median to compare with\n(run the isolated mode too)",
                   ha="center", va="center", transform=ax[0].transAxes)
    else:
        ax[0].boxplot(data, labels=[JAX_LABEL[m].replace(" (", "\n(") for m in modes], widths=0.5,
                      showfliers=False)
    for i, (m, d) in enumerate(zip(modes, data)):
        xs = [i + 1 + (j - len(d) / 2) * 0.03 for j in range(len(d))]
        ax[0].scatter(xs, d, s=14, color=JAX_COLORS[m], zorder=3)
    ax[0].axhline(1.0, color="grey", lw=0.8, ls=":")
    ref = next((r["mode"] for r in runs if float(r["median_vs_ref"]) == 1.0), "reference")
    ax[0].set_ylabel(f"mean step time / {ref}'s median step")
    seeds = len({r["seed"] for r in runs})
    ax[0].set_title(f"JAX data-parallel step (gloo ring, 4 hosts), {seeds} seeds")
    for m in modes:
        by_step = {}
        for r in steps:
            if r["mode"] == m:
                by_step.setdefault(int(r["step"]), []).append(float(r["step_s"]))
        xs = sorted(by_step)
        if not xs:
            continue
        med = [sorted(by_step[x])[len(by_step[x]) // 2] for x in xs]
        ax[1].plot(xs, med, color=JAX_COLORS[m], label=JAX_LABEL[m], lw=1.5)
        ax[1].fill_between(xs, [min(by_step[x]) for x in xs], [max(by_step[x]) for x in xs],
                           color=JAX_COLORS[m], alpha=0.15)
    ax[1].set_xlabel("iteration (step 0 is not announced)")
    ax[1].set_ylabel("step time (s)")
    ax[1].set_title("per iteration: median over seeds, min-max band")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "jax_steps.png"), dpi=120)
    plt.close(fig)


LEARNED_LABEL = {"isolated": "isolated (reference)", "ecmp5": MODE_LABEL["ecmp5"], "qp": MODE_LABEL["qp"],
                 "t5": "Foresight T+5 (learned, nothing announced)"}
LEARNED_COLORS = {"isolated": "#3a3a3a", "ecmp5": COLORS["ecmp5"], "qp": COLORS["qp"], "t5": COLORS["foresight"]}


def learned_steps(out, change_at=None):
    """Communication time per iteration over the isolated median (median over seeds, min-max band);
    dots where a predicted reservation covered the t5 run's step; the change and the kill marked."""
    steps = _read(os.path.join(out, "steps.csv"))
    if change_at is None:
        after = [int(r["step"]) for r in steps if r["phase"] == "after"]
        change_at = min(after) if after else None
    fig, ax = plt.subplots(figsize=(11, 5.2))
    for m in LEARNED_LABEL:
        by_step = {}
        for r in steps:
            if r["mode"] == m and r["comm_vs_isolated"] != "":
                by_step.setdefault(int(r["step"]), []).append(float(r["comm_vs_isolated"]))
        xs = sorted(by_step)
        if not xs:
            continue
        med = [statistics.median(by_step[x]) for x in xs]
        ax.plot(xs, med, color=LEARNED_COLORS[m], label=LEARNED_LABEL[m], lw=1.5, marker=".")
        ax.fill_between(xs, [min(by_step[x]) for x in xs], [max(by_step[x]) for x in xs], color=LEARNED_COLORS[m],
                        alpha=0.15)
    covered = {}
    for r in steps:
        if r["mode"] == "t5" and r["comm_vs_isolated"] != "":
            covered.setdefault(int(r["step"]), []).append(int(r["predicted"]))
    xs = [x for x, v in sorted(covered.items()) if sum(v) * 2 > len(v)]
    if xs:
        ax.scatter(xs, [0.9] * len(xs), marker="s", s=16, color=LEARNED_COLORS["t5"],
                   label="t5: a predicted reservation covered the step (most seeds)")
    if change_at is not None:
        ax.axvline(change_at - 0.5, color="grey", ls="--", lw=1)
        ax.text(change_at - 0.4, ax.get_ylim()[1] * 0.95, "model and batch change", fontsize=8, va="top")
    killed_at = [max(int(r["step"]) for r in steps if r["mode"] == "t5" and r["seed"] == s)
               for s in {r["seed"] for r in steps if r["mode"] == "t5"}]
    if killed_at:
        ax.axvline(statistics.median(killed_at) + 0.5, color="#c44", ls=":", lw=1)
        ax.text(statistics.median(killed_at) + 0.6, ax.get_ylim()[1] * 0.95, "t5 job killed", fontsize=8,
                va="top", color="#c44")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.axhline(1.05, color="grey", lw=0.6, ls="-.")
    ax.set_xlabel("iteration")
    ax.set_ylabel("communication time / isolated median (same phase)")
    seeds = len({r["seed"] for r in steps})
    ax.set_title(f"T+5 in the lab: a JAX job that announces nothing, {seeds} seeds (median, min-max band)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "t5.png"), dpi=120)
    plt.close(fig)
