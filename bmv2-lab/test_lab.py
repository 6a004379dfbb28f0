#!/usr/bin/python3
"""bmv2-lab tests (root, BMv2, Mininet): every lab topology comes up with the
controller and every host reaches every other through the P4 fabric; `down`
leaves nothing behind, also after the lab process was SIGKILLed; a short
all-reduce experiment runs in all three modes and writes its CSV and plot,
and runs once more with the hosts as out-of-order NICs (--nic ooo).

    sudo bmv2-lab/test_lab.py [--quick]     # --quick: leaf-spine only, no experiment

Lab names are unique to the test (`ft<n>`), so nothing else is touched.
"""

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as labmod  # noqa: E402
import labkit  # noqa: E402
import tcp_job  # noqa: E402

TOPOLOGIES = ("leaf-spine-lab.yaml", "pod3-lab.yaml", "rail-lab.yaml")
results = []
scratch = []   # temporary files and directories, removed when every check passed


def check(name, ok, detail=""):
    results.append((name, ok))
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def reachability(topology, name):
    lab = labmod.Lab(os.path.join(HERE, "topologies", topology), name=name)
    state = None
    with lab:
        state = dict(lab.state)
        lab.start_controller()
        hosts = [h for h in lab.fabric.hosts if h != lab.collector]
        src = hosts[0]
        missing = []
        for dst in hosts[1:]:
            out = lab.host(src).cmd(f"ping -c 1 -W 2 {lab.fabric.ip(dst)}")
            if " 0% packet loss" not in out:
                missing.append(dst)
        check(f"{topology}: {src} reaches the other {len(hosts) - 1} hosts through "
              f"{len(lab.fabric.switches)} BMv2 switches", not missing, f"no reply from {missing}" if missing else "")
        if topology == TOPOLOGIES[0]:
            full_size_reserved_frames(lab, src, hosts[-1])
            controller_learns_a_tcp_job(lab, src, hosts[-1])
            reservations_follow_real_traffic(lab, hosts, "counters")
            reservations_follow_real_traffic(lab, hosts, "int")
        r = lab.fabric_cmd([labmod.foresight_bin(), "status", "--json"], check=False)
        check(f"{topology}: `foresight status` answers inside the fabric namespace", r.returncode == 0,
              r.stderr.strip()[:200])
        r = subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{labmod.THRIFT_BASE + 1}"],
                           capture_output=True)
        check(f"{topology}: BMv2 Thrift is not reachable from the root namespace", r.returncode != 0)
    left = labmod.leftovers(state)
    check(f"{topology}: down leaves nothing behind", not left, ", ".join(left))


def full_size_reserved_frames(lab, src, dst):
    """A reserved flow's full-size frames (1500-byte IPv4, DF) still cross the
    fabric with their SR labels pushed: the switches' ports take jumbo frames."""
    forecast = tempfile.NamedTemporaryFile("w", prefix="foresight-labtest-", suffix=".json", delete=False)
    scratch.append(forecast.name)
    forecast.write(json.dumps([{"id": "full-size", "src": lab.fabric.ip(src), "dst": lab.fabric.ip(dst),
                                "bytes": 10 ** 7, "rate_gbps": 0.01, "start_unix_ns": time.time_ns(),
                                "priority": "iteration-blocking"}]))
    forecast.close()
    r = lab.fabric_cmd([labmod.foresight_bin(), "reserve", "batch", "--file", forecast.name, "--json",
                        "--controller", labmod.NDSP_ADDR], check=False)
    labels = [f["labels"] for rv in json.loads(r.stdout or "[]") for f in rv["flows"]] if r.returncode == 0 else []
    if not check("a reservation with SR labels is installed", bool(labels and labels[0]), r.stderr.strip()[:200]):
        return
    out = lab.host(src).cmd(f"ping -c 2 -W 2 -s 1472 -M do {lab.fabric.ip(dst)}")
    check(f"a reserved flow's full-size frames cross the fabric ({len(labels[0])} labels pushed)",
          " 0% packet loss" in out, out.strip()[-200:])


def controller_learns_a_tcp_job(lab, src, dst):
    """A learned periodic schedule (T+5) on real TCP: a registered job that
    announces nothing sends a burst every 1.5 s; the controller learns it
    from the watch counters (gloo is TCP, which INT does not carry),
    reserves the next bursts by itself, and withdraws them once the bursts
    stop."""
    lab.stop_controller()
    # A burst lasts tens of ms: installed 300 ms ahead (the prediction is
    # made ~1 s ahead), each predicted reservation shows "installed" for
    # longer than one status poll takes on a busy machine.
    lab.start_controller("--learn-iterations", "--learn-idle-ms", "400", "--learn-jitter", "0.2",
                         "--learn-bytes-tolerance", "0.3", "--learn-horizon", "1", "--lead-time-ms", "300",
                         log_name="controller-learned")
    job = "labtest-learned"
    r = lab.fabric_cmd([labmod.foresight_bin(), "register", "--job", job, "--hosts",
                        f"{lab.fabric.ip(src)},{lab.fabric.ip(dst)}", "--library", "gloo",
                        "--controller", labmod.NDSP_ADDR], check=False)
    if not check("`foresight register` registers a job that announces nothing", r.returncode == 0,
                 r.stderr.strip()[:200]):
        return
    sink = tcp_job.start_sink(lab.host(dst))
    time.sleep(0.5)
    bursts = tcp_job.start_bursts(lab.host(src), lab.fabric.ip(dst), 9, 20000, 1.5)
    seen, installed, returns, stopped_at, live_after = set(), set(), set(), None, None
    deadline = time.time() + 30
    while time.time() < deadline:
        if stopped_at is None and bursts.poll() is not None:
            stopped_at = time.time()
        r = lab.fabric_cmd([labmod.foresight_bin(), "status", "--json"], check=False)
        listed = json.loads(r.stdout)["reservations"]["list"] if r.returncode == 0 else []
        predicted = [x for x in listed if x.get("predicted") and x.get("job_id") == job]
        seen |= {x["id"] for x in predicted}
        installed |= {x["id"] for x in predicted if x["state"] == "installed"}
        # Demand ids t5/<job>/<iteration>/<n>: the one transfer is 0, its
        # return pair (dst -> src, the ACKs) 1.
        returns |= {x["id"] for x in predicted if x["state"] == "installed" and x["subject"].endswith("/1")}
        live = [x["id"] for x in predicted if x["state"] in ("scheduled", "installed")]
        if stopped_at is not None and time.time() - stopped_at > 4.0:
            live_after = live
            break
        time.sleep(0.1)
    for p in (bursts, sink):
        if p.poll() is None:
            p.kill()
        p.wait()
    check("a TCP job that announces nothing is learned: predicted reservations installed ahead of its bursts",
          len(installed) >= 2, f"{sorted(installed)} of {len(seen)} predicted")
    check("its acknowledgements (dst -> src) are reserved with its bursts", len(returns) >= 1,
          f"installed: {sorted(installed)}")
    check("4 s after its bursts stop, none of its predicted reservations is live",
          live_after == [], f"still live: {live_after}")
    lab.stop_controller()
    lab.start_controller()


def reservations_follow_real_traffic(lab, hosts, source):
    """Reservations that follow their traffic (--follow-traffic), seen by
    the watch counters on real TCP (`source` "counters") or by INT reports
    on real RoCEv2 (`source` "int"): a flow that sends past its granted
    window keeps its reservation, extended in steps; one that stops early
    gives its reservation back long before its window ends."""
    lab.stop_controller()
    if source == "counters":
        # TCP's bursts every 50 ms: quiet for 300 ms is stopped.
        flags = ("--follow-from", "counters", "--release-idle-ms", "300")
        windows_s, sends_s, idle_s = (1, 6), (2.0, 0.8), 0.3
    else:
        # rocegen's 1 s retransmission timeout: quiet for 2.5 s is stopped.
        flags = ("--int-collector", "collector", "--int-listen", f"0.0.0.0:{labmod.INT_PORT}",
                 "--release-idle-ms", "2500")
        windows_s, sends_s, idle_s = (1, 10), (3.0, 1.5), 2.5
    lab.start_controller("--follow-traffic", *flags, log_name=f"controller-follow-{source}")
    (a_src, a_dst), (b_src, b_dst) = (hosts[0], hosts[-1]), (hosts[1], hosts[-2])
    now = time.time_ns() + 300_000_000
    # 8 Mbit/s: a window of w seconds is w MB.
    demands = [{"id": name, "src": lab.fabric.ip(src), "dst": lab.fabric.ip(dst), "bytes": w * 10 ** 6,
                "rate_gbps": 0.008, "start_unix_ns": now, "priority": "iteration-blocking"}
               for name, src, dst, w in (("runs-longer", a_src, a_dst, windows_s[0]),
                                         ("stops-early", b_src, b_dst, windows_s[1]))]
    forecast = tempfile.NamedTemporaryFile("w", prefix="foresight-labtest-", suffix=".json", delete=False)
    scratch.append(forecast.name)
    forecast.write(json.dumps(demands))
    forecast.close()
    r = lab.fabric_cmd([labmod.foresight_bin(), "reserve", "batch", "--file", forecast.name, "--json",
                        "--controller", labmod.NDSP_ADDR], check=False)
    granted = {rv["subject"].split(":", 1)[1]: rv for rv in json.loads(r.stdout or "[]")} if r.returncode == 0 else {}
    if not check(f"{source}: two reservations for the follow test ({windows_s[0]} s and {windows_s[1]} s granted)",
                 set(granted) == {"runs-longer", "stops-early"}, r.stderr.strip()[:200]):
        return
    end_a = granted["runs-longer"]["end_unix_ns"]
    end_b = granted["stops-early"]["end_unix_ns"]
    raw = tempfile.mkdtemp(prefix="foresight-labtest-follow-")
    scratch.append(raw)
    if source == "counters":
        procs = [tcp_job.start_sink(lab.host(a_dst)), tcp_job.start_sink(lab.host(b_dst))]
        time.sleep(max(0.0, (now - time.time_ns()) / 1e9))
        # 2 kB every 50 ms.
        a_send = tcp_job.start_bursts(lab.host(a_src), lab.fabric.ip(a_dst), int(sends_s[0] / 0.05), 2000, 0.05)
        b_send = tcp_job.start_bursts(lab.host(b_src), lab.fabric.ip(b_dst), int(sends_s[1] / 0.05), 2000, 0.05)
        procs += [a_send, b_send]
    else:
        a_procs = labkit.start_roce_flow(lab, a_src, a_dst, os.path.join(raw, "a"), sends_s[0])
        b_procs = labkit.start_roce_flow(lab, b_src, b_dst, os.path.join(raw, "b"), sends_s[1])
        procs, a_send, b_send = a_procs + b_procs, a_procs[-1], b_procs[-1]
    seen = {}
    b_stopped = b_gone = None
    deadline = time.time() + sends_s[0] + idle_s + 6
    while time.time() < deadline:
        if b_stopped is None and b_send.poll() is not None:
            b_stopped = time.time_ns()
        r = lab.fabric_cmd([labmod.foresight_bin(), "status", "--json"], check=False)
        listed = json.loads(r.stdout)["reservations"]["list"] if r.returncode == 0 else []
        for x in listed:
            seen[x["subject"].split(":", 1)[1]] = x
        b = seen.get("stops-early")
        if b_gone is None and b and b["state"] not in ("scheduled", "installed"):
            b_gone = time.time_ns()
        if a_send.poll() is not None and b_gone:
            break
        time.sleep(0.1)
    labkit.stop_processes(procs)
    metrics = labkit.follow_metrics(lab)
    a = seen.get("runs-longer", {})
    check(f"{source}: a flow that sends past its window keeps its reservation, extended while it sends",
          a.get("end_unix_ns", 0) > end_a + 400_000_000 and metrics["extensions"] >= 2,
          f"granted end {end_a}, now {a.get('end_unix_ns')} ({(a.get('end_unix_ns', 0) - end_a) / 1e6:.0f} ms "
          f"later), revision {a.get('revision')}, {metrics}")
    check(f"{source}: a flow that stops early gives its reservation back well before its window ends",
          b_gone is not None and b_gone < end_b - 2_000_000_000 and metrics["releases"] >= 1
          and metrics["released_link_s"] > 0,
          f"sender exited at {b_stopped}, reservation gone at {b_gone}, granted end {end_b}, {metrics}")
    lab.stop_controller()
    lab.start_controller()


def crash(name):
    """SIGKILL the `lab.py up` process, then `lab.py down` cleans up."""
    log = tempfile.NamedTemporaryFile(prefix="foresight-labtest-", suffix=".log", delete=False)
    scratch.append(log.name)
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "lab.py"), "up", "--name", name,
                          "--controller"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 90
    while time.time() < deadline and "is up" not in open(log.name).read():
        if p.poll() is not None:
            break
        time.sleep(0.2)
    if not check("lab.py up reports the lab up", "is up" in open(log.name).read(), open(log.name).read()[-300:]):
        p.kill()
        subprocess.run([sys.executable, os.path.join(HERE, "lab.py"), "down", "--name", name])
        return
    state = labmod.load_state(name)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    alive = labmod.leftovers(state)
    check("after SIGKILL of lab.py up, its switches and hosts are still there (the crash case)", bool(alive))
    r = subprocess.run([sys.executable, os.path.join(HERE, "lab.py"), "down", "--name", name],
                       capture_output=True, text=True)
    left = labmod.leftovers(state)
    check("lab.py down after the crash leaves nothing behind", r.returncode == 0 and not left,
          (r.stderr.strip() + " " + ", ".join(left))[:300])


def run_experiment(name, *extra, cmd="allreduce"):
    """One seed of `experiment.py allreduce` (or `cmd`) at a small size; its rows, or None."""
    out = tempfile.mkdtemp(prefix="foresight-labexp-")
    scratch.append(out)
    r = subprocess.run([sys.executable, os.path.join(HERE, "experiment.py"), cmd, "--seeds", "1",
                        "--name", name, "--bytes", str(8 * 2 * 16 * 1024), "--background-lead-ms", "800",
                        "--out", out, *extra], capture_output=True, text=True)
    print(r.stderr[-1500:], flush=True)
    if not check(f"experiment.py {cmd} {' '.join(extra)} runs", r.returncode == 0):
        return None, out
    return list(csv.DictReader(open(os.path.join(out, "runs.csv")))), out


def moe_with_a_link_down(name):
    """alltoall with uneven tokens and leaf1's uplink to spine2 down: every
    run completes, nothing crosses the down link, the flows are uneven, and
    the simulator is handed the topology without the link."""
    rows, out = run_experiment(name, "--moe-skew", "0.5", "--link-down", "leaf1:6", "--modes", "ecmp5,foresight",
                               cmd="alltoall")
    if rows is None:
        return
    check("alltoall --link-down: one completed run per mode, no host failed",
          {r["mode"] for r in rows} == {"ecmp5", "foresight"}
          and all(r["completion_s"] and not r["failed_hosts"] for r in rows), str(rows))
    links = list(csv.DictReader(open(os.path.join(out, "links.csv"))))
    down = [r for r in links if (r["switch"], r["port"]) in (("leaf1", "6"), ("spine2", "1"))]
    check("the down link carried no packet, its twin uplink did",
          len(down) == 4 and all(r["packets"] == "0" for r in down)
          and any(int(r["packets"]) > 0 for r in links if (r["switch"], r["port"]) == ("leaf1", "5")), str(down))
    raw = os.path.join(out, "raw", "s1-foresight")
    spec = json.load(open(os.path.join(raw, "spec.json")))
    sizes = [f["bytes"] for f in spec["flows"] if f["kind"] == "collective"]
    check("MoE's flows are uneven (--moe-skew 0.5)", len(sizes) == 56 and max(sizes) > 2 * min(sizes), str(sizes))
    topo = yaml.safe_load(open(open(os.path.join(raw, "topology.txt")).read().strip()))
    check("topology.txt names the fabric without the down link",
          len(topo["links"]) == 3 and not any(l["node1"] == "leaf1" and l["port1"] == 6 for l in topo["links"]),
          str(topo["links"]))


def two_tenants(name):
    """allreduce --tenants: the ring trains on 6 hosts, the last host of each
    leaf moves KV caches; only the ring is announced and reserved."""
    rows, out = run_experiment(name, "--tenants", "--kv-bursts", "3", "--kv-bytes", "32768", "--modes", "foresight")
    if rows is None:
        return
    r = rows[0] if rows else {}
    check("--tenants: the run completes with the KV transfers delivered",
          r.get("completion_s") and not r.get("failed_hosts") and int(r.get("background_packets") or 0) >= 3 * 32,
          str(rows))
    raw = os.path.join(out, "raw", "s1-foresight")
    forecast = open(os.path.join(raw, "forecast.json")).read()
    spec = json.load(open(os.path.join(raw, "spec.json")))
    ranks = {f["src"] for f in spec["flows"] if f["kind"] == "collective"}
    check("the ring's 12 connections are reserved, the KV bursts are not announced",
          r.get("reserved_flows") == "12" and "kv" not in forecast and ranks == {"h1", "h2", "h3", "h5", "h6", "h7"},
          f"{r.get('reserved_flows')} {sorted(ranks)}")


def ooo_nic_experiment(name):
    """The hosts as out-of-order NICs: the run completes, and runs.csv says so."""
    rows, _ = run_experiment(name, "--nic", "ooo", "--modes", "qp")
    if rows is None:
        return
    check("--nic ooo: the run completes on out-of-order NICs, recorded as such, without NAKs or rewinds",
          len(rows) == 1 and rows[0]["completion_s"] and not rows[0]["failed_hosts"] and rows[0]["nic"] == "ooo"
          and rows[0]["naks"] == "0" and rows[0]["rewinds"] == "0", str(rows))


def entropy_steering(name):
    """foresight-entropy: switches hashing the 5-tuple with nothing installed
    for a reservation; every reserved ring connection is told a source port,
    sends on it, and INT sees each one on exactly its reserved path."""
    rows, out = run_experiment(name, "--modes", "foresight-entropy", "--int-path-check", "--background", "0")
    if rows is None:
        return
    r = rows[0] if rows else {}
    ring_flows = 8 * 2
    check("foresight-entropy: the run completes, every ring connection reserved and told a source port",
          r.get("completion_s") and not r.get("failed_hosts")
          and int(r.get("reserved_flows") or 0) == int(r.get("steered_flows") or -1) == ring_flows, str(rows))
    check("INT saw every steered connection, none off its reserved path",
          r.get("paths_checked") == str(ring_flows) and r.get("paths_off") == "0",
          f"{r.get('paths_off')} off of {r.get('paths_checked')} seen")
    raw = os.path.join(out, "raw", "s1-foresight-entropy")
    granted = {(f["src"], f["dst"], f["dest_qp"]): f["udp_src_port"]
               for rv in json.load(open(os.path.join(raw, "reservations.json"))) for f in rv["flows"]}
    spec = json.load(open(os.path.join(raw, "spec.json")))
    sent = {f["udp_src_port"] for f in spec["flows"] if f["kind"] == "collective"}
    check("the hosts sent on the granted ports", sent == set(granted.values()), f"{sorted(sent)} vs {granted}")


def entropy_steering_described(name, wrong_name):
    """foresight-entropy steered by a file describing the switches' hash:
    the lab's own hash written as a description puts every connection on its
    reserved path; the same description with the address fields swapped (a
    wrong guess at an ASIC's field order) sends some astray, and the INT path
    check says so."""
    lab_dir = os.path.dirname(os.path.abspath(__file__))
    right = os.path.join(lab_dir, "switch-hash-foresight.yaml")
    rows, _ = run_experiment(name, "--modes", "foresight-entropy", "--int-path-check", "--background", "0",
                             "--switch-hash", right)
    if rows is None:
        return
    r = rows[0] if rows else {}
    check("a description of the lab's own hash: every steered connection on its reserved path",
          r.get("paths_checked") == "16" and r.get("paths_off") == "0",
          f"{r.get('paths_off')} off of {r.get('paths_checked')} seen")
    scratch.append(tempfile.mkdtemp(prefix="fs-hash-"))
    wrong = os.path.join(scratch[-1], "wrong.yaml")
    with open(right) as fh, open(wrong, "w") as out:
        out.write(fh.read().replace("[src_ip, dst_ip,", "[dst_ip, src_ip,"))
    rows, _ = run_experiment(wrong_name, "--modes", "foresight-entropy", "--int-path-check",
                             "--background", "0", "--switch-hash", wrong)
    r = rows[0] if rows else {}
    check("a wrong description (address fields swapped): the path check sees connections off their paths",
          r.get("paths_checked") == "16" and int(r.get("paths_off") or 0) > 0,
          f"{r.get('paths_off')} off of {r.get('paths_checked')} seen")


def experiment(name):
    rows, out = run_experiment(name)
    if rows is None:
        return
    modes = {row["mode"]: row for row in rows}
    check("runs.csv records the NIC kind (gbn by default) and the go-back-N counters",
          all(row["nic"] == "gbn" and row["naks"].isdigit() and row["rewinds"].isdigit()
              and row["resent_bytes"].isdigit() for row in rows), str(rows))
    check("one completed run per mode, no host failed",
          set(modes) == {"ecmp5", "qp", "foresight"} and all(row["completion_s"] and not row["failed_hosts"]
                                                               for row in rows), str(rows))
    fs = modes.get("foresight", {})
    ring_flows = 8 * 2
    check("the forecast reserved every ring connection",
          int(fs.get("reserved_flows") or 0) >= ring_flows, f"{fs.get('reserved_flows')}/{fs.get('forecast_flows')}")
    check("links.csv and allreduce.png were written",
          os.path.getsize(os.path.join(out, "links.csv")) > 0 and os.path.getsize(os.path.join(out, "allreduce.png")) > 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("test_lab.py needs root")
    topologies = TOPOLOGIES[:1] if args.quick else TOPOLOGIES
    for i, t in enumerate(topologies):
        reachability(t, f"ft{i}")
    crash("ftc")
    if not args.quick:
        experiment("fte")
        ooo_nic_experiment("ftn")
        moe_with_a_link_down("ftm")
        two_tenants("ftt")
        entropy_steering("ftx")
        entropy_steering_described("fth", "fti")
    failed = [n for n, ok in results if not ok]
    if not failed:
        # The labs' logs are kept on failure only.
        import shutil
        for name in [f"ft{i}" for i in range(len(topologies))] + ["ftc", "fte", "ftn", "ftm", "ftt", "ftx", "fth", "fti"]:
            shutil.rmtree(os.path.join(labmod.STATE_DIR, name), ignore_errors=True)
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
    print(f"bmv2-lab: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
