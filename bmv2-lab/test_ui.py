#!/usr/bin/python3
"""The operator's web page in a real browser, against a running controller on BMv2.

    sudo bmv2-lab/test_ui.py [--soak-s 60] [--sample-s 30] [--soak-csv FILE] [--screenshots DIR]

Brings up the lab's leaf-spine (4 BMv2 switches, 8 hosts, the INT
collector) with the controller (INT reports and learning on), then drives
headless Chromium (Debian's chromium and chromium-driver, with
python3-selenium) inside the fabric namespace, where the controller's admin
port is. It checks that the page draws the fabric; that a reservation
submitted with `foresight reserve demand` appears on the timeline and, once
running, on the links of its path (and in the clicked link's list); that
`foresight link down` marks the link; that expiry takes the reservation off
its links and shows it expired. Then it leaves the page open for --soak-s
seconds while reservations come and go every second and checks that the
page's JavaScript heap stays flat (after a forced garbage collection).
Last, with real traffic: a reserved RoCEv2 flow the switches report on by
INT, and a registered TCP job that announces nothing; the page must show
the INT-measured load and queue depths of the flow's links, the job
learned (locked, with its period) and its predicted reservations.
--screenshots writes the page's pictures (the README's). Without the
browser, the driver or selenium it prints SKIPPED and why.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lab as labmod  # noqa: E402
import labkit  # noqa: E402
import tcp_job  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TOPOLOGY = os.path.join(HERE, "topologies", "leaf-spine-lab.yaml")
# What the controller runs with: INT reports straight to it (the collector's
# NIC is in the fabric namespace with it), and T+5 learning of registered jobs.
CONTROLLER_FLAGS = ("--int-collector", "collector", "--int-listen", f"0.0.0.0:{labmod.INT_PORT}",
                    "--learn-iterations", "--learn-idle-ms", "400", "--learn-jitter", "0.2",
                    "--learn-bytes-tolerance", "0.3", "--learn-horizon", "1")
LEARNED_JOB = "ui-learned"
TRAFFIC_S = 35
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""), flush=True)
    return ok


def missing_parts():
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} not found (Debian package chromium)"
    if not os.path.exists(CHROMEDRIVER):
        return f"{CHROMEDRIVER} not found (Debian package chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not importable by /usr/bin/python3 (Debian package python3-selenium)"
    return None


def browser(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1600,1000", f"--user-data-dir={profile}", "--no-first-run",
              "--disable-background-networking", "--disable-extensions"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def wait_for(driver, script, timeout=10.0, every=0.2):
    """The value of `script` once it is truthy, or None after `timeout` s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(every)
    return None


def foresight(*args):
    return subprocess.run([os.environ["FORESIGHT_BIN"], *args], capture_output=True, text=True)


def heap_mb(driver):
    driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
    metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
    return next(m["value"] for m in metrics if m["name"] == "JSHeapUsedSize") / 2**20


def browser_rss_mb(profile):
    """The resident memory of the browser's processes (those started with
    this test's profile), MiB."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if profile.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
    return total / 1024


def soak(driver, args, profile):
    """Reservations come and go every second (and a link goes down for ten
    seconds every five minutes) for --soak-s seconds while the page is open; its JS heap (after a forced collection) must stay flat.
    Prints a sample every --sample-s (and writes them to --soak-csv)."""
    driver.execute_cdp_cmd("Performance.enable", {})
    first = heap_mb(driver)
    samples = [(0.0, 0, first, browser_rss_mb(profile))]
    t0 = time.time()
    n = 0
    next_sample = args.sample_s
    while time.time() - t0 < args.soak_s:
        foresight("reserve", "demand", "--id", f"ui-soak-{n}", "--src", "10.0.1.2", "--dst", "10.0.2.2",
                  "--bytes", "100MB", "--start-in-ms", "500", "--duration-ms", "1500")
        n += 1
        if n % 300 == 150:
            foresight("link", "down", "leaf2:5")  # a link event every five minutes, and back
        elif n % 300 == 160:
            foresight("link", "up", "leaf2:5")
        time.sleep(1.0)
        if time.time() - t0 >= next_sample:
            next_sample += args.sample_s
            samples.append((time.time() - t0, n, heap_mb(driver), browser_rss_mb(profile)))
            print(f"soak {samples[-1][0]:6.0f} s: {n} reservations, JS heap {samples[-1][2]:.2f} MB, "
                  f"browser RSS {samples[-1][3]:.0f} MiB, load {os.getloadavg()[0]:.2f}", flush=True)
    samples.append((time.time() - t0, n, heap_mb(driver), browser_rss_mb(profile)))
    last = samples[-1][2]
    renders = driver.execute_script("return window.foresight.stats.renders")
    events = driver.execute_script("return window.foresight.stats.events")
    print(f"soak: {args.soak_s:.0f} s, {n} reservations, {events} events, {renders} renders; "
          f"JS heap {first:.2f} MB -> {last:.2f} MB (max {max(s[2] for s in samples):.2f}); "
          f"browser RSS {samples[0][3]:.0f} -> {samples[-1][3]:.0f} MiB", flush=True)
    if args.soak_csv:
        with open(args.soak_csv, "w") as f:
            f.write("seconds,reservations,js_heap_mb,browser_rss_mib\n")
            for t, k, heap, rss in samples:
                f.write(f"{t:.0f},{k},{heap:.3f},{rss:.1f}\n")
    check(f"after {args.soak_s:.0f} s of reservations coming and going the page's heap stays flat",
          last <= first * 1.5 + 2.0, f"{first:.1f} MB -> {last:.1f} MB")


def with_traffic(driver, args):
    """The page beside real traffic (started by the outer part): INT-measured
    load and queue depths on the reserved flow's links, the learned job."""
    driver.get(f"http://{args.http}/ui")
    check("with traffic running, the page loads", wait_for(driver, "return document.body.dataset.ready", 15) == "1")
    measured = wait_for(driver, """return [...document.querySelectorAll('.link[data-cable]')]
          .filter(g => g.dataset.util !== '').map(g => g.dataset.cable);""", 20)
    check("links the reserved RoCEv2 flow crosses show the load INT measured on them", measured,
          "no link has a measured load")
    if measured:
        driver.execute_script(f"""
            const c = document.querySelector('.link[data-cable="{measured[0]}"]');
            c.dispatchEvent(new MouseEvent('click', {{bubbles: true}}));""")
        measured_cells = wait_for(driver, """return [...document.querySelectorAll('#link-directions tr')].slice(1)
              .filter(r => r.cells[3].textContent !== '–' && r.cells[4].textContent !== '–')
              .map(r => r.cells[0].textContent + ': ' + r.cells[3].textContent + ', queue ' + r.cells[4].textContent);""", 5)
        check(f"clicking {measured[0]} lists its measured load and INT queue depth", measured_cells)
        spark = wait_for(driver, "return document.querySelectorAll('#link-queue polyline').length", 8)
        check("and draws its recent INT queue depths", spark)
        queue_max = driver.execute_script(
            "return Math.max(0, ...[...window.foresight.queues.values()].flat().map(s => s.q))")
        print(f"traffic: measured on {', '.join(measured)}; {measured_cells}; largest queue seen {queue_max} packets",
              flush=True)
    job = json.dumps(f'[data-job$="/{LEARNED_JOB}"]')
    locked = wait_for(driver, f"""const r = document.querySelector({job});
          return r && r.cells[3].textContent === 'locked' ? r.cells[4].textContent : '';""", 30)
    check(f"the job that announces nothing is listed learned (locked, its period {locked or '?'})", locked)
    predicted = wait_for(driver, f"""return (window.foresight.timeline.reservations || [])
          .filter(x => x.predicted && x.job_id === {json.dumps(LEARNED_JOB)}).length;""", 10)
    check("its predicted reservations are on the timeline", predicted)
    ahead = wait_for(driver, f"""const r = document.querySelector({job});
          return r && Number(r.cells[6].textContent) > 0 ? r.cells[6].textContent : '';""", 10)
    check(f"and the jobs table counts the iterations reserved ahead of it ({ahead or 0})", ahead)
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
        driver.save_screenshot(os.path.join(args.screenshots, "ui-traffic.png"))


def inside(args):
    """The browser part, run inside the fabric namespace."""
    profile = tempfile.mkdtemp(prefix="foresight-ui-")
    driver = browser(profile)
    try:
        if args.phase == "traffic":
            with_traffic(driver, args)
            return
        driver.get(f"http://{args.http}/ui")
        ready = wait_for(driver, "return document.body.dataset.ready", 15)
        check("the page loads and reads the fabric, the status and the timeline", ready == "1",
              driver.execute_script("return document.getElementById('status-line').textContent"))
        switches = driver.execute_script("return document.querySelectorAll('[data-switch]').length")
        cables = driver.execute_script("return document.querySelectorAll('.link[data-cable]').length")
        check("the fabric shows its 4 switches and 4 switch-to-switch cables", (switches, cables) == (4, 4),
              f"{switches} switches, {cables} cables")
        live = wait_for(driver, "return document.getElementById('live').dataset.live === 'open'", 10)
        check("the page follows the controller's events (SSE open)", live)

        pushed_before = driver.execute_script("return window.foresight.stats.events")
        r = foresight("reserve", "demand", "--id", "ui-demo", "--src", "10.0.1.1", "--dst", "10.0.2.1",
                      "--bytes", "2GB", "--start-in-ms", "3000", "--duration-ms", "7000")
        if not check("`foresight reserve demand` is admitted", r.returncode == 0, r.stderr.strip()[:300]):
            return
        rid = wait_for(driver, "const r = window.foresight.timeline && window.foresight.timeline.reservations"
                               ".find(x => x.subject === 'demand:ui-demo'); return r ? r.id : '';", 5)
        check("the reservation appears on the timeline within 5 s of the CLI's answer", rid, "not on the page")
        pushed = wait_for(driver, f"return window.foresight.stats.events > {pushed_before}", 2)
        check("the controller pushed the change (a `state` event on /v1/events)", pushed)
        rid = rid or "ui-demo"
        sel = json.dumps(f'[data-reservation="{rid}"]')
        bar = driver.execute_script(f"const b = document.querySelector({sel}); return b ? b.dataset.state : '';")
        check("drawn as a bar, planned or installed", bar in ("scheduled", "installed"), f"state {bar!r}")
        links = driver.execute_script(
            f"const r = window.foresight.timeline.reservations.find(x => x.id === {json.dumps(rid)});"
            "return r ? r.flows[0].links : [];")
        check("its path is known to the page", len(links) >= 2, f"{links}")
        if args.screenshots:
            time.sleep(0.5)
        running = wait_for(driver, f"const b = document.querySelector({sel}); return b && b.dataset.state === 'running';", 8)
        check("it runs at its start", running)
        reserved = wait_for(driver, f"""
            const c = [...document.querySelectorAll('.link[data-cable]')]
              .find(g => g.dataset.link.split(' | ').includes({json.dumps(links[0] if links else '')}));
            return c && Number(c.dataset.reserved) > 0 ? c.dataset.reserved : '';""", 4)
        check("while it runs, its first link shows bandwidth reserved", reserved, f"{reserved!r}")
        driver.execute_script(f"""
            const c = [...document.querySelectorAll('.link[data-cable]')]
              .find(g => g.dataset.link.split(' | ').includes({json.dumps(links[0] if links else '')}));
            if (c) c.dispatchEvent(new MouseEvent('click', {{bubbles: true}}));""")
        in_list = json.dumps(f'#link-reservations [data-reservation="{rid}"]')
        listed = wait_for(driver, f"return document.querySelector({in_list}) ? true : false", 3)
        check("clicking the link lists the reservation on it", listed)
        if args.screenshots:
            os.makedirs(args.screenshots, exist_ok=True)
            driver.save_screenshot(os.path.join(args.screenshots, "ui-running.png"))

        cable = links[0].split(" -> ")[0] if links else "leaf1:3"
        r = foresight("link", "down", cable)
        check(f"`foresight link down {cable}` is taken", r.returncode == 0, r.stderr.strip()[:300])
        down = wait_for(driver, f"""
            const c = [...document.querySelectorAll('.link[data-cable]')]
              .find(g => g.dataset.link.split(' | ').includes({json.dumps(links[0] if links else '')}));
            return c && c.dataset.down === 'true';""", 5)
        check("the page marks the link down within 5 s", down)
        moved = wait_for(driver, f"const r = window.foresight.timeline.reservations.find(x => x.id === {json.dumps(rid)});"
                                 "return r && r.revision > 1;", 5)
        check("the reservation, re-planned around it, shows a new revision", moved)
        if args.screenshots:
            driver.save_screenshot(os.path.join(args.screenshots, "ui-link-down.png"))
        foresight("link", "up", cable)

        expired = wait_for(driver, f"const b = document.querySelector({sel}); return b && b.dataset.state === 'expired';", 14)
        check("at its end the reservation shows expired", expired)
        off = wait_for(driver, """return [...document.querySelectorAll('.link[data-cable]')]
              .every(g => Number(g.dataset.reserved) === 0);""", 5)
        check("and no link shows it reserved any more", off)

        if args.soak_s > 0:
            soak(driver, args, profile)
            still = driver.execute_script("return document.body.dataset.ready === '1' && "
                                          "document.getElementById('live').dataset.live === 'open'")
            check("and the page is still live", still)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def traffic(lab, inner):
    """Starts the traffic the page is checked beside, runs the browser part
    (`inner`) and stops the traffic: a registered TCP job h3 -> h7 that
    announces nothing (a burst every 1.5 s), and a reserved RoCEv2 flow
    h1 -> h5, which the switches report on by INT."""
    f, bin_ = lab.fabric, labmod.foresight_bin()
    raw = tempfile.mkdtemp(prefix="foresight-ui-traffic-")
    procs = []
    try:
        r = lab.fabric_cmd([bin_, "register", "--job", LEARNED_JOB, "--hosts", f"{f.ip('h3')},{f.ip('h7')}",
                            "--library", "gloo", "--controller", labmod.NDSP_ADDR], check=False)
        check("`foresight register` registers a job that announces nothing", r.returncode == 0, r.stderr[:300])
        procs.append(tcp_job.start_sink(lab.host("h7")))
        time.sleep(0.5)
        procs.append(tcp_job.start_bursts(lab.host("h3"), f.ip("h7"), int(TRAFFIC_S / 1.5), 20000, 1.5))
        r = lab.fabric_cmd([bin_, "reserve", "demand", "--id", "ui-int", "--src", f.ip("h1"), "--dst", f.ip("h5"),
                            "--bytes", "1GB", "--start-in-ms", "500", "--duration-ms", str((TRAFFIC_S + 5) * 1000),
                            "--controller", labmod.NDSP_ADDR], check=False)
        check("the RoCEv2 flow's reservation is admitted", r.returncode == 0, r.stderr[:300])
        procs += labkit.start_roce_flow(lab, "h1", "h5", raw, TRAFFIC_S)
        time.sleep(2.0)
        check("the browser checks beside the traffic", inner().returncode == 0)
    finally:
        labkit.stop_processes(procs)
        shutil.rmtree(raw, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soak-s", type=float, default=60.0)
    ap.add_argument("--sample-s", type=float, default=30.0, help="seconds between the soak's memory samples")
    ap.add_argument("--soak-csv", help="write the soak's memory samples here")
    ap.add_argument("--screenshots")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--phase", default="page", choices=("page", "traffic"), help=argparse.SUPPRESS)
    ap.add_argument("--http", default="127.0.0.1:9090", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        inside(args)
        failed = [n for n, ok in results if not ok]
        return 1 if failed else 0
    why = missing_parts()
    if why:
        print(f"SKIPPED bmv2-lab UI test: {why}")
        return 0
    if os.geteuid() != 0:
        sys.exit("test_ui.py needs root")
    lab = labmod.Lab(TOPOLOGY, name="ftu")
    state = None
    with lab:
        state = dict(lab.state)
        lab.start_controller(*CONTROLLER_FLAGS)
        env = dict(os.environ, FORESIGHT_BIN=labmod.foresight_bin())
        cmd = [sys.executable, os.path.abspath(__file__), "--inside", "--http", labmod.HTTP_ADDR,
               "--soak-s", str(args.soak_s), "--sample-s", str(args.sample_s)]
        if args.soak_csv:
            cmd += ["--soak-csv", os.path.abspath(args.soak_csv)]
        if args.screenshots:
            cmd += ["--screenshots", os.path.abspath(args.screenshots)]
        r = subprocess.run(["ip", "netns", "exec", lab.ns, *cmd], env=env)
        check("the browser checks inside the fabric namespace", r.returncode == 0)
        traffic(lab, lambda: subprocess.run(["ip", "netns", "exec", lab.ns, *cmd, "--phase", "traffic"], env=env))
    left = labmod.leftovers(state)
    check("down leaves nothing behind", not left, ", ".join(left))
    failed = [n for n, ok in results if not ok]
    if not failed:
        shutil.rmtree(os.path.join(labmod.STATE_DIR, "ftu"), ignore_errors=True)
    print(f"bmv2-lab UI: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
