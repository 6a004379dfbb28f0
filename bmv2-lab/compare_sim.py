#!/usr/bin/python3
"""The simulator against the lab: every run of an all-reduce experiment
simulated on the same topology, flows, QPs, source ports, rates, seeds and
(Foresight) reservations, set against the measured completion.

    bmv2-lab/compare_sim.py DIR [DIR ...]

DIR is an `experiment.py allreduce --out DIR` result: DIR/runs.csv and, per
run, DIR/raw/<run>/{spec.json,topology.txt} (and reservations.json in
Foresight mode; either JSON file may be gzipped, as in the committed
results). Spraying and flowlet runs name their NICs: a `nic` column (gbn or
ooo) in runs.csv, a mode such as `spray-gbn`, or --nic for the whole
directory; their raw directory is raw/s<seed>-<mode>-<nic> or
raw/s<seed>-<mode>. They are simulated with the reordering model
(controller/sim/README.md): pass the lab's flowlet timeout with
--flowlet-timeout-ms and --cnp-on-ooo if its go-back-N NICs send CNPs on
out-of-order packets. For each run it calls `foresight sim lab` twice: the lab
model (per-step latency and ACK traffic included) and the bare fluid model
(neither), to show what they account for. It writes

  DIR/sim_vs_lab.csv        per (seed, mode): lab and simulated completion
                            / ideal, and predicted / measured;
  DIR/sim_vs_lab_links.csv  per (seed, mode, switch port): packets sent,
                            lab (P4 tx counters) and simulated;
  DIR/sim_vs_lab.png        simulated against measured, and the ratios;

and prints, per topology, the ratios and whether the simulator ranks the
modes (per seed) and the seeds (per mode) as the lab does.
"""

import argparse
import csv
import gzip
import json
import math
import os
import statistics
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as labmod  # noqa: E402

MODES = ("ecmp5", "qp", "foresight", "spray-gbn", "spray-ooo", "flowlet-gbn", "flowlet-ooo")
MULTIPATH = ("spray", "flowlet")


def mode_of(r, args):
    """A run's mode as the simulator names it: spray and flowlet runs carry
    their NICs (`spray-gbn`), from the mode itself, the row's `nic` column
    or --nic."""
    mode = r["mode"]
    if mode not in MULTIPATH:
        return mode
    nic = r.get("nic") or args.nic
    if nic not in ("gbn", "ooo"):
        raise SystemExit(f"runs.csv seed {r['seed']}: mode {mode} with no nic column (gbn or ooo); "
                         f"pass --nic gbn|ooo")
    return f"{mode}-{nic}"


def raw_dir(out, r, mode):
    """raw/s<seed>-<mode>, with the NICs in the name if the lab put them there."""
    tried = [os.path.join(out, "raw", f"s{r['seed']}-{m}") for m in dict.fromkeys((mode, r["mode"]))]
    for d in tried:
        if os.path.isdir(d):
            return d
    raise SystemExit(f"no raw directory for seed {r['seed']} mode {mode}: tried {', '.join(tried)}")


def read_csv(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def write_csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def topology_of(raw):
    """The topology file the run used: as recorded, or the file of that name
    in the experiment's directory (--link-down writes one there) or in
    bmv2-lab/topologies (results moved between checkouts)."""
    recorded = open(os.path.join(raw, "topology.txt")).read().strip()
    if os.path.exists(recorded):
        return recorded
    tried = [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(raw))), os.path.basename(recorded)),
             os.path.join(HERE, "topologies", os.path.basename(recorded))]
    for path in tried:
        if os.path.exists(path):
            return path
    raise SystemExit(f"{raw}/topology.txt: {recorded} not found, nor {' nor '.join(tried)}")


def raw_file(raw, name, tmp):
    """raw/<run>/<name>, or its gzipped copy (committed results keep only
    those) unpacked into `tmp`."""
    path = os.path.join(raw, name)
    if os.path.exists(path):
        return path
    if not os.path.exists(path + ".gz"):
        raise SystemExit(f"{path} missing (nor {name}.gz): the comparison needs the run's raw/ directory")
    out = os.path.join(tmp, f"{os.path.basename(raw)}-{name}")
    with gzip.open(path + ".gz", "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def lab_step_excess_ms(raw, spec_path):
    """Median and mean over ring steps of (last packet received - step
    ready) minus its packets at the sender's rate, ms, from the hosts' flow
    records (None when raw/ holds only the committed inputs)."""
    recs = {}
    for name in os.listdir(raw):
        if name.startswith("flows-") and name.endswith(".csv"):
            for r in read_csv(os.path.join(raw, name)):
                recs[(r["flow"], r["role"])] = r
    if not recs:
        return None
    spec = json.load(open(spec_path))
    out = []
    for f in spec["flows"]:
        send, recv = recs.get((f["id"], "send")), recs.get((f["id"], "recv"))
        if f["kind"] != "collective" or not send or not recv or not recv["end_ns"] or not send["ready_ns"]:
            continue
        alone_ms = math.ceil(f["bytes"] / spec["payload_bytes"]) / f["line_rate_pps"] * 1e3
        out.append((int(recv["end_ns"]) - int(send["ready_ns"])) / 1e6 - alone_ms)
    return (statistics.median(out), statistics.mean(out)) if out else None


def simulate(foresight, raw, mode, args, tmp, bare=False, seed=0):
    cmd = [foresight, "sim", "lab", "--topology", topology_of(raw), "--spec",
           raw_file(raw, "spec.json", tmp), "--mode", mode, "--hash-seed", args.hash_seed,
           "--pps-per-gbps", str(args.pps_per_gbps), "--nic-fraction", str(args.nic_fraction),
           "--json"]
    if mode == "foresight":
        cmd += ["--reservations", raw_file(raw, "reservations.json", tmp)]
    if mode.split("-")[0] in MULTIPATH:
        cmd += ["--seed", str(seed)]
        if args.flowlet_timeout_ms is not None:
            cmd += ["--flowlet-timeout-us", str(args.flowlet_timeout_ms * 1e3)]
        if args.cnp_on_ooo:
            cmd += ["--cnp-on-ooo"]
    if bare:
        cmd += ["--no-latency", "--ack-delay-ms", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def ranks(values):
    """Average ranks (ties share), 1 = smallest."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x, y):
    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else float("nan")


def kendall(x, y):
    """Kendall's tau-b."""
    n = len(x)
    if n < 3:
        return float("nan")
    conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = x[i] - x[j], y[i] - y[j]
            if a == 0 and b == 0:
                continue
            if a == 0:
                tx += 1
            elif b == 0:
                ty += 1
            elif (a > 0) == (b > 0):
                conc += 1
            else:
                disc += 1
    den = math.sqrt((conc + disc + tx) * (conc + disc + ty))
    return (conc - disc) / den if den else float("nan")


def pearson(x, y):
    if len(x) < 3:
        return float("nan")
    mx, my = statistics.mean(x), statistics.mean(y)
    num = sum((a - mx) * (b - my) for a, b in zip(x, y))
    den = math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
    return num / den if den else float("nan")


def compare(out, foresight, args):
    runs = [r for r in read_csv(os.path.join(out, "runs.csv")) if r["slowdown"]]
    lab_links = {}
    links_path = os.path.join(out, "links.csv")
    if os.path.exists(links_path):
        # links.csv rows name their NIC through their run (runs.csv).
        nics = {(r["seed"], r["mode"]): r.get("nic", "") for r in runs}
        for r in read_csv(links_path):
            mode = mode_of({**r, "nic": r.get("nic") or nics.get((r["seed"], r["mode"]), "")}, args)
            lab_links[(r["seed"], mode, f"{r['switch']}:{r['port']}")] = int(r["packets"])
    rows, link_rows = [], []
    topo_name = None
    for r in runs:
        mode = mode_of(r, args)
        raw = raw_dir(out, r, mode)
        topo_name = topo_name or os.path.splitext(os.path.basename(topology_of(raw)))[0]
        with tempfile.TemporaryDirectory() as tmp:
            sim = simulate(foresight, raw, mode, args, tmp, seed=int(r["seed"]))
            bare = simulate(foresight, raw, mode, args, tmp, bare=True, seed=int(r["seed"]))
            step = lab_step_excess_ms(raw, raw_file(raw, "spec.json", tmp))
        lab_slow = float(r["slowdown"])
        rows.append({
            "topology": topo_name, "seed": int(r["seed"]), "mode": mode,
            "lab_ideal_s": float(r["ideal_s"]), "sim_ideal_s": round(sim["ideal_s"], 4),
            "lab_completion_s": float(r["completion_s"]), "sim_completion_s": round(sim["completion_s"], 4),
            "lab_slowdown": lab_slow, "sim_slowdown": round(sim["slowdown"], 4),
            "ratio": round(sim["slowdown"] / lab_slow, 4),
            "fluid_slowdown": round(bare["slowdown"], 4),
            "fluid_ratio": round(bare["slowdown"] / lab_slow, 4),
            "lab_step_excess_ms": round(step[0], 2) if step else "",
            "lab_step_excess_mean_ms": round(step[1], 2) if step else "",
            "sim_step_excess_ms": round(sim["step_excess_ms"], 2),
            "reserved": f"{sim['reserved']}/{sim['connections']}",
            "retransmits": r.get("retransmits", ""), "cnps": r.get("cnps", ""),
        })
        for port, pk in sorted(sim["port_packets"].items()):
            lab_pk = lab_links.get((r["seed"], mode, port))
            if lab_pk is not None:
                link_rows.append({"seed": int(r["seed"]), "mode": mode, "port": port,
                                  "lab_packets": lab_pk, "sim_packets": round(pk, 1)})
    if not rows:
        raise SystemExit(f"{out}/runs.csv: no finished runs")
    write_csv(os.path.join(out, "sim_vs_lab.csv"), rows)
    if link_rows:
        write_csv(os.path.join(out, "sim_vs_lab_links.csv"), link_rows)
    summary(topo_name, rows, link_rows)
    plot(out, topo_name, rows)
    return rows


def summary(topo, rows, link_rows):
    print(f"== {topo}: {len(rows)} runs")
    print("mode       lab median [range]     sim median [range]     sim/lab median [range]   "
          "fluid/lab median   seeds ranked alike (Kendall tau, Spearman)")
    for m in MODES:
        rs = sorted((r for r in rows if r["mode"] == m), key=lambda r: r["seed"])
        if not rs:
            continue
        lab = [r["lab_slowdown"] for r in rs]
        sim = [r["sim_slowdown"] for r in rs]
        rat = [r["ratio"] for r in rs]
        flu = [r["fluid_ratio"] for r in rs]
        print(f"{m:<10} {statistics.median(lab):6.3f} [{min(lab):.3f}, {max(lab):.3f}]   "
              f"{statistics.median(sim):6.3f} [{min(sim):.3f}, {max(sim):.3f}]   "
              f"{statistics.median(rat):6.3f} [{min(rat):.3f}, {max(rat):.3f}]      "
              f"{statistics.median(flu):6.3f}        "
              f"tau {kendall(lab, sim):+.2f}, rho {spearman(lab, sim):+.2f}")
    for m in MODES:
        rs = [r for r in rows if r["mode"] == m and r["lab_step_excess_ms"] != ""]
        if rs:
            print(f"{m}: a ring step's time beyond its packets at the sender's rate (per run the median "
                  f"step; median over runs): lab {statistics.median(r['lab_step_excess_ms'] for r in rs):.1f} ms, "
                  f"simulator {statistics.median(r['sim_step_excess_ms'] for r in rs):.1f} ms; "
                  f"lab mean step {statistics.median(r['lab_step_excess_mean_ms'] for r in rs):.1f} ms")
    seeds = sorted({r["seed"] for r in rows})
    same = best = 0
    full = 0
    for s in seeds:
        by = {r["mode"]: r for r in rows if r["seed"] == s}
        if len(by) < 2:
            continue
        full += 1
        lab_order = sorted(by, key=lambda m: by[m]["lab_slowdown"])
        sim_order = sorted(by, key=lambda m: by[m]["sim_slowdown"])
        same += lab_order == sim_order
        best += lab_order[0] == sim_order[0]
    print(f"mode order per seed: the same in {same}/{full} seeds; the same best mode in {best}/{full}")
    allx = [r["lab_slowdown"] for r in rows]
    ally = [r["sim_slowdown"] for r in rows]
    print(f"all runs: Kendall tau {kendall(allx, ally):+.2f}, Spearman rho {spearman(allx, ally):+.2f}")
    # What the lab adds beyond the model: does it go with DCQCN's CNPs or
    # go-back-N's retransmissions?
    for m in MODES:
        rs = [r for r in rows if r["mode"] == m and r["cnps"] != "" and r["retransmits"] != ""]
        if len(rs) >= 3:
            miss = [r["lab_slowdown"] / r["sim_slowdown"] for r in rs]
            print(f"{m}: lab/sim vs CNPs: Spearman {spearman(miss, [int(r['cnps']) for r in rs]):+.2f}; "
                  f"vs retransmits: {spearman(miss, [int(r['retransmits']) for r in rs]):+.2f}")
    if link_rows:
        for m in MODES:
            lr = [r for r in link_rows if r["mode"] == m]
            if lr:
                x = [r["lab_packets"] for r in lr]
                y = [r["sim_packets"] for r in lr]
                print(f"packets per switch port, {m}: Pearson r {pearson(x, y):.3f} over {len(lr)} ports "
                      f"(sim/lab total {sum(y) / max(1, sum(x)):.3f})")


# Modes plots.py may not know yet (spraying and flowlets, per NIC kind).
EXTRA_LABEL = {"spray-gbn": "spray (go-back-N)", "spray-ooo": "spray (OOO NIC)",
               "flowlet-gbn": "flowlet (go-back-N)", "flowlet-ooo": "flowlet (OOO NIC)"}
EXTRA_COLOR = {"spray-gbn": "#8e44ad", "spray-ooo": "#c39bd3",
               "flowlet-gbn": "#1e8449", "flowlet-ooo": "#82e0aa"}


def label(plots, m):
    return plots.MODE_LABEL.get(m) or EXTRA_LABEL.get(m, m)


def color(plots, m):
    return plots.COLORS.get(m) or EXTRA_COLOR.get(m, "#555555")


def plot(out, topo, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plots
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.4))
    hi = max(max(r["lab_slowdown"], r["sim_slowdown"]) for r in rows) * 1.05
    ax[0].plot([1, hi], [1, hi], color="grey", lw=0.8, ls=":")
    for m in MODES:
        rs = [r for r in rows if r["mode"] == m]
        if rs:
            ax[0].scatter([r["lab_slowdown"] for r in rs], [r["sim_slowdown"] for r in rs], s=18,
                          color=color(plots, m), label=label(plots, m), zorder=3)
            ax[0].scatter([r["lab_slowdown"] for r in rs], [r["fluid_slowdown"] for r in rs], s=14,
                          facecolors="none", edgecolors=color(plots, m), zorder=2)
    ax[0].set_xlabel("lab: completion / ideal")
    ax[0].set_ylabel("simulator: completion / ideal")
    ax[0].set_title(f"{topo}: each run (filled: lab model; open: bare fluid)")
    ax[0].legend(loc="upper left", fontsize=8)
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
    data = [[r["ratio"] for r in rows if r["mode"] == m] for m in modes]
    ax[1].boxplot(data, labels=[label(plots, m) for m in modes], widths=0.5, showfliers=False)
    for i, (m, d) in enumerate(zip(modes, data)):
        ax[1].scatter([i + 1] * len(d), d, s=14, color=color(plots, m), zorder=3)
    ax[1].axhline(1.0, color="grey", lw=0.8, ls=":")
    ax[1].set_ylabel("predicted / measured completion")
    ax[1].set_title("Simulator ÷ lab, per run")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "sim_vs_lab.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("dirs", nargs="+", help="experiment.py allreduce --out directories")
    ap.add_argument("--hash-seed", default="per-switch", help="as the lab ran (experiment.py --hash-seed)")
    ap.add_argument("--pps-per-gbps", type=float, default=2.5, help="as the lab ran")
    ap.add_argument("--nic-fraction", type=float, default=0.9, help="as the lab ran")
    ap.add_argument("--nic", choices=("gbn", "ooo"),
                    help="the NICs of spray and flowlet runs when runs.csv has no nic column")
    ap.add_argument("--flowlet-timeout-ms", type=float,
                    help="the lab switches' flowlet timeout (default: the simulator's)")
    ap.add_argument("--cnp-on-ooo", action="store_true",
                    help="the lab's go-back-N NICs send a CNP on an out-of-order packet")
    args = ap.parse_args()
    foresight = labmod.foresight_bin("foresight")
    for d in args.dirs:
        compare(os.path.abspath(d), foresight, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
