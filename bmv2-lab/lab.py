#!/usr/bin/python3
"""bmv2-lab: a Mininet fabric of BMv2 switches built from a Foresight topology YAML.

    sudo bmv2-lab/lab.py up   --topology bmv2-lab/topologies/leaf-spine-lab.yaml [--controller]
    sudo bmv2-lab/lab.py down [--name fl]          # also after a crash
    sudo bmv2-lab/lab.py status [--name fl]
    sudo bmv2-lab/lab.py exec h1 -- ping -c1 10.0.2.1

Layout. Every host of the YAML is a Mininet host (its own network
namespace, address, MAC, static neighbours: the P4 program drops ARP).
Every switch is a BMv2 simple_switch_grpc process. The switches' ports,
their gRPC (P4Runtime) and Thrift servers, the controller and the INT
collector's NIC all live in ONE network namespace, `<name>-fabric`: BMv2's
Thrift server listens on every interface of the namespace it runs in, so
nothing outside the lab (and no lab host) can reach it. Use
`ip netns exec <name>-fabric ...` (or `lab.py fabric-exec -- ...`) to talk
to a switch or to the controller.

Links are shaped inside BMv2 (egress queue rate and depth per port, every
priority queue, through the Thrift CLI) so queues build where the P4
program sees them: a link of G Gbit/s drains at G * --pps-per-gbps packets/s.

Nothing is left behind: every name the lab creates is written to
/run/foresight-lab/<name>.json before it is created, and `down` removes
them all (processes by PID and by namespace membership, the namespace,
interfaces by name), whether `up` ended cleanly or crashed.

Runs under Debian's /usr/bin/python3 (Mininet, PyYAML).
"""

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
STATE_DIR = "/run/foresight-lab"
GRPC_BASE = 50100      # switch with id N: P4Runtime on 127.0.0.1:(GRPC_BASE + N) in the fabric namespace
THRIFT_BASE = 19100    # ... and Thrift on port THRIFT_BASE + N
NDSP_ADDR = "127.0.0.1:50051"
HTTP_ADDR = "127.0.0.1:9090"
INT_PORT = 32766
FABRIC_MTU = 9000
MGMT_FABRIC_IP, MGMT_HOST_IP = "192.168.254.1", "192.168.254.2"   # Lab.management_link
PRIORITIES = 8
# The lab's longest unloaded round trip (pod3's cross-pod paths: 5 switches
# of 250-packets/s ports plus BMv2's processing; leaf-spine's is about 20 ms).
LAB_RTT_MS = 30.0


def load_1m():
    """The machine's 1-minute load average, recorded with every run: lab
    figures are only comparable from an otherwise idle machine."""
    return round(os.getloadavg()[0], 2)


def tail_probe_ms(ack_delay_ms):
    """rocegen's tail-loss probe for the lab: a sender at its tail waits for
    a sparse ACK (up to ack_delay_ms) plus a round trip, so a probe sooner
    than that is always spurious (rocegen's 20 ms default, made for
    microsecond RTTs, sent ~30 needless probes per host and run)."""
    return ack_delay_ms + 2 * LAB_RTT_MS


def log(msg):
    print(f"[lab] {msg}", file=sys.stderr, flush=True)


def run(args, check=True, **kw):
    r = subprocess.run(args, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    return r


def find_tool(name, env_var=None):
    """A toolchain binary: $env_var, PATH, or $FORESIGHT_P4_PREFIX/bin (default /opt/p4tools)."""
    if env_var and os.environ.get(env_var):
        return os.environ[env_var]
    prefix = os.environ.get("FORESIGHT_P4_PREFIX", "/opt/p4tools")
    for d in os.environ.get("PATH", "").split(os.pathsep) + [os.path.join(prefix, "bin")]:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


_warned_stale = set()

# The crates each lab binary is built from (its path dependencies).
BINARY_CRATES = {
    "foresight": ("foresight", "p4rt", "installer", "bmv2", "planner", "sim", "ndsp", "rocegen"),
    "rocegen": ("rocegen",),
}


def newest_source(name):
    """The newest modification time of what `name` is built from in this
    checkout (its crates' src/, build.rs and Cargo.toml, the protos, the
    workspace's Cargo files); 0 for a binary not listed."""
    crates = BINARY_CRATES.get(name, ())
    paths = [os.path.join(REPO, f) for f in ("Cargo.toml", "Cargo.lock")] if crates else []
    tops = [os.path.join(REPO, "proto")] if name == "foresight" else []
    for c in crates:
        base = os.path.join(REPO, "controller", c)
        paths += [os.path.join(base, "Cargo.toml"), os.path.join(base, "build.rs")]
        tops.append(os.path.join(base, "src"))
    for top in tops:
        for d, _, files in os.walk(top):
            paths += [os.path.join(d, f) for f in files]
    return max((os.path.getmtime(p) for p in paths if os.path.exists(p)), default=0.0)


def foresight_bin(name="foresight"):
    """$FORESIGHT_BIN_DIR/<name>, target/release/<name> of this checkout, or <name> on PATH.
    A target/release binary older than the sources is used, with a warning:
    an experiment would otherwise measure old code without saying so."""
    bin_dir = os.environ.get("FORESIGHT_BIN_DIR")
    p = os.path.join(bin_dir or os.path.join(REPO, "target", "release"), name)
    if os.access(p, os.X_OK):
        if not bin_dir and name not in _warned_stale and os.path.getmtime(p) < newest_source(name):
            _warned_stale.add(name)
            print(f"[lab] WARNING: {p} is older than its sources; "
                  f"rebuild it (`cargo build --release -p {name}`) or this runs old code", file=sys.stderr)
        return p
    found = find_tool(name)
    if not found:
        raise RuntimeError(f"{name} not found: build it with `cargo build --release -p {name}`")
    return found


class Fabric:
    """The topology YAML, reduced to what the lab needs."""

    def __init__(self, path):
        with open(path) as f:
            doc = yaml.safe_load(f)
        self.path = os.path.abspath(path)
        self.name = doc.get("name", os.path.basename(path))
        self.switches = {s["name"]: s for s in doc["switches"]}
        self.hosts = {h["name"]: h for h in doc["hosts"]}
        self.links = doc.get("links", [])
        for h in self.hosts.values():
            if h["leaf"] not in self.switches:
                raise ValueError(f"{path}: host {h['name']}: leaf {h['leaf']!r} is not a switch")
        for i, l in enumerate(self.links):
            for end in ("node1", "node2"):
                if l[end] not in self.switches:
                    raise ValueError(f"{path}: links[{i}].{end}: {l[end]!r} is not a switch")

    def ip(self, host):
        return self.hosts[host]["ip"].split("/")[0]

    def port_gbps(self):
        """(switch, port) -> Gbit/s of the link leaving through it."""
        out = {}
        for h in self.hosts.values():
            out[(h["leaf"], h["port"])] = float(h.get("gbps", 100.0))
        for l in self.links:
            out[(l["node1"], l["port1"])] = float(l["gbps"])
            out[(l["node2"], l["port2"])] = float(l["gbps"])
        return out


def switch_port_mac(switch_id, port):
    """The MAC of a switch port (installer::addressing::switch_port_mac)."""
    return "06:00:%02x:%02x:%02x:%02x" % ((switch_id >> 8) & 0xFF, switch_id & 0xFF, port >> 8, port & 0xFF)


class Lab:
    def __init__(self, topology, name="fl", pps_per_gbps=4.0, queue_depth=128, collector="collector",
                 simple_switch=None):
        if not (1 <= len(name) <= 4 and name.isalnum()):
            raise ValueError(f"--name {name!r}: 1 to 4 letters or digits (it prefixes interface names)")
        self.fabric = Fabric(topology)
        self.name = name
        self.ns = f"{name}-fabric"
        self.pps_per_gbps = pps_per_gbps
        self.queue_depth = queue_depth
        self.collector = collector if collector in self.fabric.hosts else None
        self.simple_switch = simple_switch or find_tool("simple_switch_grpc", "SIMPLE_SWITCH_GRPC")
        self.cli = find_tool("simple_switch_CLI")
        if not self.simple_switch or not self.cli:
            raise RuntimeError("simple_switch_grpc / simple_switch_CLI not found on PATH or in "
                               "$FORESIGHT_P4_PREFIX/bin (see docs/data-plane.md, The P4 toolchain)")
        self.dir = os.path.join(STATE_DIR, name)
        self.state_path = os.path.join(STATE_DIR, f"{name}.json")
        self.net = None
        self.procs = {}        # switch name -> Popen
        self.controller = None
        self.state = None

    # -- names -------------------------------------------------------------
    def sw_intf(self, switch, port):
        return f"{self.name}s{self.fabric.switches[switch]['id']}p{port}"

    def host_intf(self, host):
        idx = sorted(self.fabric.hosts).index(host)
        return f"{self.name}h{idx}"

    def grpc_addr(self, switch):
        return f"127.0.0.1:{GRPC_BASE + self.fabric.switches[switch]['id']}"

    def thrift_port(self, switch):
        return THRIFT_BASE + self.fabric.switches[switch]["id"]

    # -- state file --------------------------------------------------------
    def save(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, self.state_path)

    # -- up ----------------------------------------------------------------
    def up(self):
        if os.path.exists(self.state_path):
            raise RuntimeError(f"lab {self.name!r} is up or was not taken down ({self.state_path}): "
                               f"run `lab.py down --name {self.name}` first")
        from mininet.net import Mininet
        from mininet.log import setLogLevel
        setLogLevel("warning")
        os.makedirs(self.dir, exist_ok=True)
        hosts = [h for h in self.fabric.hosts if h != self.collector]
        intfs = [self.sw_intf(h["leaf"], h["port"]) for h in self.fabric.hosts.values()]
        intfs += [self.host_intf(h) for h in self.fabric.hosts]
        for l in self.fabric.links:
            intfs += [self.sw_intf(l["node1"], l["port1"]), self.sw_intf(l["node2"], l["port2"])]
        self.state = {"name": self.name, "topology": self.fabric.path, "namespace": self.ns,
                      "interfaces": intfs, "pids": {}, "host_pids": {}, "host_netns": {}, "started": time.time(),
                      "owner_pid": os.getpid(), "dir": self.dir}
        self.save()
        run(["ip", "netns", "add", self.ns])
        run(["ip", "-n", self.ns, "link", "set", "lo", "up"])
        run(["ip", "netns", "exec", self.ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
        run(["ip", "netns", "exec", self.ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])

        net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False, autoStaticArp=False)
        self.net = net
        nodes = {}
        for s in self.fabric.switches:
            nodes[s] = net.addSwitch(f"{self.name}{self.fabric.switches[s]['id']}", cls=_PortHolder,
                                     dpid="%016x" % self.fabric.switches[s]["id"])
        for h in hosts:
            spec = self.fabric.hosts[h]
            nodes[h] = net.addHost(h, ip=spec["ip"], mac=spec["mac"])
            net.addLink(nodes[h], nodes[spec["leaf"]], intfName1=self.host_intf(h),
                        intfName2=self.sw_intf(spec["leaf"], spec["port"]), port2=spec["port"])
        for l in self.fabric.links:
            net.addLink(nodes[l["node1"]], nodes[l["node2"]], port1=l["port1"], port2=l["port2"],
                        intfName1=self.sw_intf(l["node1"], l["port1"]),
                        intfName2=self.sw_intf(l["node2"], l["port2"]))
        net.build()
        for h in hosts:
            self.state["host_pids"][h] = net.get(h).pid
            self.state["host_netns"][h] = os.readlink(f"/proc/{net.get(h).pid}/ns/net")
        self.save()

        # Switch ports into the fabric namespace.
        for s in self.fabric.switches:
            for intf in nodes[s].intfList():
                if intf.name == "lo":
                    continue
                run(["ip", "link", "set", "dev", intf.name, "netns", self.ns])
                self._fabric_link_up(intf.name)
        if self.collector:
            self._collector_nic()
        for h in hosts:
            self._configure_host(net.get(h), h)
        for s in self.fabric.switches:
            self._start_switch(s)
        for s in self.fabric.switches:
            self._wait_grpc(s)
            self._shape(s)
        with open(os.path.join(self.dir, "switches.yaml"), "w") as f:
            for s, spec in self.fabric.switches.items():
                f.write(f"{s}: {{addr: \"{self.grpc_addr(s)}\", device_id: {spec['id']}}}\n")
        log(f"up: {len(self.fabric.switches)} BMv2 switches, {len(hosts)} hosts"
            f"{', collector NIC ' + self.fabric.ip(self.collector) if self.collector else ''}; "
            f"namespace {self.ns}; logs in {self.dir}")

    def _fabric_link_up(self, name):
        # Jumbo frames on the switches' ports, as fabrics run them: a
        # full-size host frame grows by its SR labels (and INT) inside the
        # fabric, and a veth drops what exceeds its MTU.
        run(["ip", "-n", self.ns, "link", "set", name, "mtu", str(FABRIC_MTU), "up"])
        # BMv2 sees frames as the kernel hands them: no offloads.
        run(["ip", "netns", "exec", self.ns, "ethtool", "-K", name, "tx", "off", "rx", "off"], check=False)

    def _collector_nic(self):
        """The collector host's NIC lives in the fabric namespace, so the
        controller (or `foresight int-collect`) there receives INT reports."""
        spec = self.fabric.hosts[self.collector]
        sw = self.sw_intf(spec["leaf"], spec["port"])
        nic = self.host_intf(self.collector)
        run(["ip", "-n", self.ns, "link", "add", sw, "type", "veth", "peer", "name", nic])
        self._fabric_link_up(sw)
        run(["ip", "-n", self.ns, "link", "set", nic, "address", spec["mac"]])
        run(["ip", "-n", self.ns, "addr", "add", spec["ip"], "dev", nic])
        self._fabric_link_up(nic)

    def management_link(self, host):
        """An out-of-band link from `host` to the fabric namespace (the
        controller's NDSP port), as a management network gives a job
        scheduler: MGMT_FABRIC_IP in the fabric namespace, MGMT_HOST_IP in
        the host. Returns the fabric side's address."""
        fabric_end, host_end = f"{self.name}mg", f"{self.name}mh"
        self.state["interfaces"] += [fabric_end, host_end]
        self.save()
        run(["ip", "-n", self.ns, "link", "add", fabric_end, "type", "veth", "peer", "name", host_end])
        run(["ip", "-n", self.ns, "link", "set", host_end, "netns", str(self.host(host).pid)])
        run(["ip", "-n", self.ns, "addr", "add", f"{MGMT_FABRIC_IP}/30", "dev", fabric_end])
        run(["ip", "-n", self.ns, "link", "set", fabric_end, "up"])
        node = self.host(host)
        node.cmd(f"ip addr add {MGMT_HOST_IP}/30 dev {host_end} && ip link set {host_end} up")
        return MGMT_FABRIC_IP

    def _configure_host(self, node, name):
        """Routes and static neighbours: the fabric routes every packet by
        IPv4 and drops ARP, so each host reaches every other host (same
        subnet or not) through its leaf port's MAC."""
        spec = self.fabric.hosts[name]
        leaf = self.fabric.switches[spec["leaf"]]
        gw_mac = switch_port_mac(leaf["id"], spec["port"])
        intf = node.defaultIntf().name
        node.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        node.cmd(f"ethtool -K {intf} tx off rx off >/dev/null 2>&1")
        net_addr = spec["ip"]
        prefix = net_addr.split("/")[0].rsplit(".", 1)[0]
        gw = f"{prefix}.254"
        node.cmd(f"ip neigh replace {gw} lladdr {gw_mac} dev {intf} nud permanent")
        node.cmd(f"ip route replace default via {gw} dev {intf}")
        for other in self.fabric.hosts:
            if other != name:
                node.cmd(f"ip neigh replace {self.fabric.ip(other)} lladdr {gw_mac} dev {intf} nud permanent")

    def _start_switch(self, s):
        spec = self.fabric.switches[s]
        ports = sorted({p for (sw, p) in self.fabric.port_gbps() if sw == s})
        args = ["ip", "netns", "exec", self.ns, self.simple_switch, "--no-p4", "--device-id", str(spec["id"]),
                "--thrift-port", str(self.thrift_port(s))]
        for p in ports:
            args += ["-i", f"{p}@{self.sw_intf(s, p)}"]
        args += ["--", "--grpc-server-addr", self.grpc_addr(s), "--priority-queues", str(PRIORITIES)]
        logf = open(os.path.join(self.dir, f"{s}.log"), "w")
        p = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[s] = p
        self.state["pids"][s] = p.pid
        self.save()

    def _wait_grpc(self, s, timeout=20):
        port = self.grpc_addr(s).rsplit(":", 1)[1]
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.procs[s].poll() is not None:
                raise RuntimeError(f"{s}: simple_switch_grpc exited; see {self.dir}/{s}.log")
            r = run(["ip", "netns", "exec", self.ns, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
                    check=False)
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"{s}: P4Runtime port {port} not ready after {timeout}s; see {self.dir}/{s}.log")

    def cli_command(self):
        """simple_switch_CLI under this (Debian's) Python, which has
        python3-thrift, with BMv2's own modules from its install prefix: the
        script's `env python3` may find another interpreter first."""
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(self.cli)))
        sites = sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")))
        env = ["env", f"PYTHONPATH={sites[0]}"] if sites else []
        return [*env, sys.executable, self.cli]

    def switch_cli(self, s, commands):
        """Run simple_switch_CLI commands on a switch (Thrift, inside the namespace)."""
        r = run(["ip", "netns", "exec", self.ns, *self.cli_command(), "--thrift-port",
                 str(self.thrift_port(s))],
                input="\n".join(commands) + "\n")
        if "Error" in r.stdout or "Invalid" in r.stdout:
            raise RuntimeError(f"{s}: simple_switch_CLI: {r.stdout.strip()}")
        return r.stdout

    def _shape(self, s):
        cmds = []
        for (sw, port), gbps in sorted(self.fabric.port_gbps().items()):
            if sw != s:
                continue
            if self.collector and (sw, port) == (self.fabric.hosts[self.collector]["leaf"],
                                                 self.fabric.hosts[self.collector]["port"]):
                continue        # reports to the collector are not shaped
            cmds.append(f"set_queue_rate {self.rate_pps(gbps)} {port}")
            cmds.append(f"set_queue_depth {self.queue_depth} {port}")
        if cmds:
            self.switch_cli(s, cmds)

    def rate_pps(self, gbps):
        return max(1, int(round(gbps * self.pps_per_gbps)))

    # -- controller --------------------------------------------------------
    def start_controller(self, *extra, log_name="controller", ndsp=NDSP_ADDR):
        """`foresight controller` in the fabric namespace, against the lab's
        switches; returns once every switch is reconciled."""
        ready = os.path.join(self.dir, f"{log_name}.ready.json")
        if os.path.exists(ready):
            os.unlink(ready)
        args = ["ip", "netns", "exec", self.ns, foresight_bin(), "controller",
                "--topology", self.fabric.path, "--switches", os.path.join(self.dir, "switches.yaml"),
                "--state-file", "none", "--ndsp", ndsp, "--http", HTTP_ADDR,
                "--ready-file", ready, *extra]
        logf = open(os.path.join(self.dir, f"{log_name}.log"), "w")
        self.controller = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        self.state["pids"]["controller"] = self.controller.pid
        self.save()
        deadline = time.time() + 60
        while not os.path.exists(ready):
            if self.controller.poll() is not None:
                raise RuntimeError(f"controller exited ({self.controller.returncode}); see {logf.name}")
            if time.time() > deadline:
                raise RuntimeError(f"controller not ready after 60 s; see {logf.name}")
            time.sleep(0.1)

    def stop_controller(self):
        if self.controller and self.controller.poll() is None:
            self.controller.send_signal(signal.SIGTERM)
            try:
                self.controller.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.controller.kill()
                self.controller.wait()
        self.controller = None
        self.state["pids"].pop("controller", None)
        self.save()

    def fabric_cmd(self, args, **kw):
        """Run a command in the fabric namespace (the controller's CLI, a switch's CLI)."""
        return run(["ip", "netns", "exec", self.ns, *args], **kw)

    def fabric_popen(self, args, log_path):
        logf = open(log_path, "w")
        p = subprocess.Popen(["ip", "netns", "exec", self.ns, *args], stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.state["pids"][f"proc-{p.pid}"] = p.pid
        self.save()
        return p

    def host(self, name):
        return self.net.get(name)

    # -- down --------------------------------------------------------------
    def down(self):
        self.stop_controller()
        # Not Mininet's stop(): it talks to the host shells, which teardown
        # kills; their namespaces take the veths with them.
        teardown(self.state)
        self.net = None

    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down_quietly()
            raise
        return self

    def __exit__(self, *exc):
        self.down_quietly()

    def down_quietly(self):
        try:
            self.down()
        except Exception as e:              # noqa: BLE001
            log(f"down: {e}")
            if self.state:
                teardown(self.state)


def _alive(pid):
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill(pids):
    for pid in pids:
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except OSError:
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
    deadline = time.time() + 5
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def in_netns(links):
    """PIDs of the processes whose network namespace is one of `links`
    (as /proc/PID/ns/net reads, e.g. 'net:[4026532]')."""
    out = []
    if not links:
        return out
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink(f"/proc/{d}/ns/net") in links:
                    out.append(int(d))
            except OSError:
                pass
    return out


def teardown(state):
    """Remove everything a lab's state names: processes (by PID, and every
    process still inside the fabric namespace), host shells, the
    namespace, interfaces left in the root namespace, the state file."""
    if not state:
        return
    ns = state["namespace"]
    pids = list(state.get("pids", {}).values())
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    if r.returncode == 0:
        pids += [int(p) for p in r.stdout.split()]
    # Host namespaces are Mininet's (unnamed): find what runs in them by
    # their inode, recorded at start-up.
    # Their processes (shells, traffic generators) are the lab's own: SIGKILL.
    host_netns = set(state.get("host_netns", {}).values())
    for pid in in_netns(host_netns):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    # SIGKILL takes a moment to land: wait (5 s at most) until they are
    # gone, so that whoever checks right after (leftovers) finds nothing.
    deadline = time.time() + 5
    while time.time() < deadline and [p for p in in_netns(host_netns) if p != os.getpid()]:
        time.sleep(0.05)
    _kill([p for p in pids if p != os.getpid()])
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    for intf in state.get("interfaces", []):
        if os.path.exists(f"/sys/class/net/{intf}"):
            subprocess.run(["ip", "link", "del", intf], capture_output=True)
    path = os.path.join(STATE_DIR, f"{state['name']}.json")
    if os.path.exists(path):
        os.unlink(path)


def leftovers(state):
    """What of a lab still exists (empty when it is fully gone)."""
    out = []
    if subprocess.run(["ip", "netns", "pids", state["namespace"]], capture_output=True).returncode == 0:
        out.append(f"namespace {state['namespace']}")
    out += [f"process {n} ({p})" for n, p in state.get("pids", {}).items() if _alive(p)]
    out += [f"process {p} in a host namespace" for p in in_netns(set(state.get("host_netns", {}).values()))]
    out += [f"interface {i}" for i in state.get("interfaces", []) if os.path.exists(f"/sys/class/net/{i}")]
    return out


# Mininet needs a node at each end of a link; the lab's switches are BMv2
# processes started by Lab, so the Mininet node only holds the ports.
try:
    from mininet.node import Switch

    class _PortHolder(Switch):
        def start(self, controllers):
            pass

        def stop(self, deleteIntfs=True):
            # The ports went to the fabric namespace; deleting that namespace
            # removed them.
            pass
except ImportError:                          # lab.py down works without Mininet
    _PortHolder = None


def load_state(name):
    path = os.path.join(STATE_DIR, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="bring a lab up and keep it up until Ctrl-C, SIGTERM or `down`")
    up.add_argument("--topology", default=os.path.join(HERE, "topologies", "leaf-spine-lab.yaml"))
    up.add_argument("--controller", action="store_true", help="also run `foresight controller` in the lab")
    up.add_argument("--pps-per-gbps", type=float, default=4.0,
                    help="BMv2 egress rate per Gbit/s of link speed (packets/s)")
    up.add_argument("--queue-depth", type=int, default=128, help="egress queue depth, packets")
    for name in ("down", "status"):
        p = sub.add_parser(name)
        p.add_argument("--name", default="fl")
    for p in (up,):
        p.add_argument("--name", default="fl", help="lab name: prefixes interfaces, names the namespace")
    ex = sub.add_parser("exec", help="run a command in a host of a running lab")
    ex.add_argument("--name", default="fl")
    ex.add_argument("host")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    fx = sub.add_parser("fabric-exec", help="run a command in the fabric namespace (switch CLIs, controller)")
    fx.add_argument("--name", default="fl")
    fx.add_argument("argv", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("lab.py needs root (network namespaces)")

    if args.cmd == "up":
        lab = Lab(args.topology, name=args.name, pps_per_gbps=args.pps_per_gbps, queue_depth=args.queue_depth)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        with lab:
            if args.controller:
                lab.start_controller()
                log(f"controller up: NDSP {NDSP_ADDR}, metrics http://{HTTP_ADDR} (in namespace {lab.ns})")
            log(f"lab {args.name} is up; `lab.py down --name {args.name}` or Ctrl-C takes it down")
            try:
                while not stop and os.path.exists(lab.state_path):
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
        log("down")
        return 0
    state = load_state(args.name)
    if args.cmd == "down":
        if state is None:
            log(f"lab {args.name!r} is not up (no {STATE_DIR}/{args.name}.json)")
            return 0
        owner = state.get("owner_pid")
        if owner and _alive(owner) and owner != os.getpid():
            os.kill(owner, signal.SIGTERM)
            deadline = time.time() + 15
            while _alive(owner) and time.time() < deadline:
                time.sleep(0.2)
        teardown(state)
        left = leftovers(state)
        if left:
            log("left behind: " + ", ".join(left))
            return 1
        log(f"lab {args.name} is down; nothing left behind")
        return 0
    if state is None:
        sys.exit(f"lab {args.name!r} is not up")
    if args.cmd == "status":
        print(json.dumps({"state": state, "alive": leftovers(state)}, indent=1))
        return 0
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if args.cmd == "exec":
        pid = state["host_pids"].get(args.host)
        if pid is None:
            sys.exit(f"{args.host}: not a host of lab {args.name} ({', '.join(state['host_pids'])})")
        return subprocess.call(["nsenter", "-t", str(pid), "-n", "--", *argv])
    if args.cmd == "fabric-exec":
        return subprocess.call(["ip", "netns", "exec", state["namespace"], *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main())
