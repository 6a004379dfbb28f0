#!/usr/bin/python3
"""Mininet smoke test: two hosts, one BMv2 switch, routes installed by Foresight.

    sudo /usr/bin/python3 bmv2-lab/smoke/smoke.py --foresight target/debug/foresight

Checks that h1 cannot reach h2 before the routes are written (the pipeline
drops what it has no route for) and can after `foresight switch write` has
installed them over P4Runtime. With --entries pointing at a broken file the
second ping fails and so does the test. Mininet removes its hosts and links in
`finally`; the switch is stopped by its PID. The switch's log is removed when
the test passes and kept (its path printed) when it fails.

Runs under Debian's /usr/bin/python3, which has Mininet.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Switch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.join(REPO, "p4src", "build")
GATEWAY_MAC = {"h1": "00:aa:00:00:00:01", "h2": "00:aa:00:00:00:02"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bmv2(Switch):
    """A BMv2 simple_switch_grpc switch with P4Runtime on a loopback port."""

    def __init__(self, name, binary, **kwargs):
        Switch.__init__(self, name, **kwargs)
        self.binary = binary
        self.grpc_port = free_port()
        self.thrift_port = free_port()
        self.process = None
        self.log = tempfile.NamedTemporaryFile(prefix=f"foresight-smoke-{name}-", suffix=".log", delete=False)

    def start(self, controllers):
        args = [self.binary, "--no-p4", "--device-id", "0", "--thrift-port", str(self.thrift_port)]
        for port, intf in self.intfs.items():
            if intf.name != "lo":
                args += ["-i", f"{port}@{intf.name}"]
        args += ["--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name}: simple_switch_grpc exited; log {self.log.name}")
            try:
                socket.create_connection(("127.0.0.1", self.grpc_port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name}: gRPC port {self.grpc_port} not ready; log {self.log.name}")

    def stop(self, deleteIntfs=True):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        Switch.stop(self, deleteIntfs)


def foresight(binary, switch, *args):
    cmd = [binary, "switch", *args, "--addr", f"127.0.0.1:{switch.grpc_port}", "--device-id", "0",
           "--p4info", os.path.join(BUILD, "ipv4_forward.p4info.binpb")]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def ping(src, dst):
    out = src.cmd(f"ping -c 3 -i 0.2 -W 1 {dst.IP()}")
    return " 0% packet loss" in out, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--foresight", required=True, help="path of the foresight binary")
    parser.add_argument("--simple-switch-grpc", default="simple_switch_grpc")
    parser.add_argument("--entries", default=os.path.join(HERE, "entries.yaml"))
    args = parser.parse_args()
    setLogLevel("warning")

    # Names unique to this test, so cleanup can never touch anything else.
    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False)
    failures = []
    try:
        h1 = net.addHost("fsh1", ip="10.0.1.1/24", mac="00:00:0a:00:01:01")
        h2 = net.addHost("fsh2", ip="10.0.2.1/24", mac="00:00:0a:00:02:01")
        s1 = net.addSwitch("fss1", cls=Bmv2, binary=args.simple_switch_grpc)
        net.addLink(h1, s1, port2=1)
        net.addLink(h2, s1, port2=2)
        net.build()
        net.start()
        for host, gw, name in ((h1, "10.0.1.254", "h1"), (h2, "10.0.2.254", "h2")):
            host.cmd(f"ip route add default via {gw}")
            host.cmd(f"ip neigh replace {gw} lladdr {GATEWAY_MAC[name]} dev {host.defaultIntf()}")
            host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")

        print(foresight(args.foresight, s1, "push", "--config", os.path.join(BUILD, "ipv4_forward.json")).strip())
        ok, out = ping(h1, h2)
        print(f"ping h1 -> h2 without routes: {'replies' if ok else 'no replies'} (expected: no replies)")
        if ok:
            failures.append("ping passed before any route was installed")

        print(foresight(args.foresight, s1, "write", "--entries", args.entries).strip())
        print(foresight(args.foresight, s1, "read").strip())
        ok, out = ping(h1, h2)
        print(f"ping h1 -> h2 with routes: {'replies' if ok else 'no replies'} (expected: replies)")
        if not ok:
            failures.append("ping failed with the routes installed:\n" + out)
    finally:
        net.stop()

    s1.log.close()
    if failures:
        for failure in failures:
            print(f"FAIL: {failure}")
        print(f"switch log kept: {s1.log.name}")
        print("mininet-smoke: 0 passed, 1 failed")
        return 1
    os.unlink(s1.log.name)
    print("mininet-smoke: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
