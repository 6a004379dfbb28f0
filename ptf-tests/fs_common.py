"""Shared PTF test base for Foresight: switch connections, port naming,
table-programming shortcuts and packet checks.

run.sh starts three BMv2 switches (s1, s2, s3 = PTF devices 0, 1, 2) in a
private network namespace; every switch port is a veth whose other end PTF
owns, so a test is the wire between switches: it sends a packet into one
switch, checks the exact packet that leaves, and feeds an independently built
copy of that packet into the next switch.
"""

import os
import subprocess
import time

import ptf
import ptf.dataplane
import ptf.mask
import ptf.testutils as tu
from ptf.base_tests import BaseTest

from fs_p4rt import Switch

DEVICE = {"s1": 0, "s2": 1, "s3": 2}
# MAC address of switch s<n> port p: 02:fs:00:0n:00:pp; of the neighbour on
# the other end: 02:ne:00:0n:00:pp.
def sw_mac(sw, port):
    return "02:5f:00:%02x:00:%02x" % (DEVICE[sw] + 1, port)


def nbr_mac(sw, port):
    return "02:ee:00:%02x:00:%02x" % (DEVICE[sw] + 1, port)


HOST_MAC = "02:aa:00:00:00:01"


def params():
    p = tu.test_params_get()
    for key in ("switches", "p4info", "bmv2_json"):
        if key not in p:
            raise RuntimeError("missing --test-params %s (run through ptf-tests/run.sh)" % key)
    return p


class FsTest(BaseTest):
    """Connects to the switches a test uses and pushes the pipeline, which
    resets every table, counter and register."""

    SWITCHES = ("s1",)

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        p = params()
        self.params = p
        addrs = dict(item.split("=") for item in p["switches"].split(","))
        self.thrift = dict(item.split("=") for item in p.get("thrift", "").split(",") if item)
        self.sw = {}
        for name in self.SWITCHES:
            s = Switch(name, addrs[name], DEVICE[name], p["p4info"], p["bmv2_json"])
            s.connect()
            s.set_pipeline()
            self.sw[name] = s
        self.queue_rates_set = []
        self.clone_sessions = []
        self.dataplane.flush()

    def tearDown(self):
        # BMv2 keeps its packet replication state across pipeline pushes
        # while PI forgets it, so a session left behind would replicate
        # twice once the next test configures it again: delete it.
        for sw, session in self.clone_sessions:
            self.sw[sw].delete_clone_session(session)
        for sw, port in self.queue_rates_set:
            # BMv2 defaults: rate 0 = unlimited, 64 packets per queue.
            self.cli(sw, "set_queue_rate 0 %d\nset_queue_depth 64 %d" % (port, port))
        for s in self.sw.values():
            s.disconnect()
        BaseTest.tearDown(self)

    # -- Thrift CLI (queue rates/depths exist only there) ----------------------
    def cli(self, sw, commands):
        """Run simple_switch_CLI commands on a switch; returns its output."""
        cmd = self.params["cli"].split() + ["--thrift-port", self.thrift[sw]]
        out = subprocess.run(cmd, input=commands + "\n", capture_output=True, text=True,
                             timeout=60, env=dict(os.environ))
        if out.returncode != 0 or "Error" in out.stdout or "Invalid" in out.stdout:
            self.fail("simple_switch_CLI %s failed: %s %s" % (commands, out.stdout, out.stderr))
        return out.stdout

    def set_queue(self, sw, port, rate_pps, depth=None):
        """Rate-limit every priority queue of a port (packets per second);
        BMv2's egress queues only fill when rate-limited."""
        cmds = "set_queue_rate %d %d" % (rate_pps, port)
        if depth is not None:
            cmds += "\nset_queue_depth %d %d" % (depth, port)
        self.cli(sw, cmds)
        self.queue_rates_set.append((sw, port))

    # -- the controller's CLI ---------------------------------------------------
    def foresight_push(self, sw, *extra):
        """`foresight switch push` of the test pipeline to `sw` (election id 2,
        above the tests' own client); skips the test when the controller is
        not built. Returns the command's stdout."""
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # FORESIGHT_BIN, else the release build in $FORESIGHT_BIN_DIR (as
        # the lab takes it), $CARGO_TARGET_DIR or this checkout's target/.
        target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(repo, "target")
        bin_dir = os.environ.get("FORESIGHT_BIN_DIR") or os.path.join(target, "release")
        binary = os.environ.get("FORESIGHT_BIN", os.path.join(bin_dir, "foresight"))
        if not os.access(binary, os.X_OK):
            self.skipTest("SKIPPED: %s not built (cargo build --release)" % binary)
        addr = dict(item.split("=") for item in self.params["switches"].split(","))[sw]
        out = subprocess.run(
            [binary, "switch", "push", "--addr", addr, "--device-id", str(DEVICE[sw]),
             "--election-id", "2", "--p4info", self.params["p4info"],
             "--config", self.params["bmv2_json"], *extra],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    # -- dataplane --------------------------------------------------------------
    def send(self, sw, port, pkt):
        tu.send_packet(self, (DEVICE[sw], port), bytes(pkt))

    def expect(self, sw, port, pkt, timeout=None):
        tu.verify_packet(self, pkt, (DEVICE[sw], port), timeout=timeout)

    def expect_masked(self, sw, port, pkt, dont_care, timeout=None):
        """dont_care: [(byte offset, length)] ignored in the comparison."""
        m = ptf.mask.Mask(pkt, ignore_extra_bytes=False)
        for off, length in dont_care:
            m.set_do_not_care(off * 8, length * 8)
        tu.verify_packet(self, m, (DEVICE[sw], port), timeout=timeout)

    def receive(self, sw, port, timeout=2.0):
        """The next packet on a port (bytes), failing if none arrives."""
        res = tu.dp_poll(self, device_number=DEVICE[sw], port_number=port, timeout=timeout)
        if not isinstance(res, self.dataplane.PollSuccess):
            self.fail("no packet on %s port %d" % (sw, port))
        return bytes(res.packet)

    def receive_any(self, sw, timeout=2.0):
        """The next packet a switch sends on any port: (port, bytes),
        failing if none arrives."""
        res = tu.dp_poll(self, device_number=DEVICE[sw], timeout=timeout)
        if not isinstance(res, self.dataplane.PollSuccess):
            self.fail("no packet from %s" % sw)
        return res.port, bytes(res.packet)

    def expect_nothing(self, timeout=0.5):
        """No packet on any port of any switch."""
        for dev in sorted(set(DEVICE.values())):
            tu.verify_no_other_packets(self, device_number=dev, timeout=timeout)
            timeout = 0.05

    # -- programming shortcuts --------------------------------------------------
    def clone_session(self, sw, session, replicas):
        self.sw[sw].set_clone_session(session, replicas)
        self.clone_sessions.append((sw, session))

    def route(self, sw, prefix, plen, port, member_id=None):
        """An LPM route to one next hop (a member of the ECMP selector)."""
        s = self.sw[sw]
        mid = member_id if member_id is not None else 1000 + port
        try:
            s.add_member("routing.ecmp_selector", mid, "routing.set_nexthop",
                         {"port": port, "src_mac": sw_mac(sw, port), "dst_mac": nbr_mac(sw, port)})
        except Exception as e:   # member already there (shared by routes)
            if "ALREADY_EXISTS" not in str(e):
                raise
        return s.insert("routing.ipv4_lpm", {"dst_addr": (prefix, plen)}, member_id=mid)

    def adjacency(self, sw, port, label=None):
        """Team convention: adjacency label 1000 + port."""
        label = 1000 + port if label is None else label
        return self.sw[sw].insert("sr.adjacency", {"label": label}, "sr.forward_adjacency",
                                  {"port": port, "src_mac": sw_mac(sw, port),
                                   "dst_mac": nbr_mac(sw, port)})

    def drop_count(self, sw, reason):
        return self.sw[sw].read_counter("FsIngress.counters.drops", reason)[0]

    def wait_counter(self, read, expected, timeout=2.0):
        """Counters update after the packet leaves the pipeline; poll."""
        deadline = time.time() + timeout
        value = read()
        while value != expected and time.time() < deadline:
            time.sleep(0.05)
            value = read()
        return value

    # -- frame comparison with a readable diff -----------------------------------
    def assert_frame(self, actual, expected, dont_care=(), what="packet"):
        """Exact comparison except the [(offset, length)] byte ranges."""
        actual, expected = bytes(actual), bytes(expected)
        m = ptf.mask.Mask(expected)
        for off, length in dont_care:
            m.set_do_not_care(off * 8, length * 8)
        if m.pkt_match(actual):
            return
        care = [True] * len(expected)
        for off, length in dont_care:
            for i in range(off, min(off + length, len(expected))):
                care[i] = False
        diffs = [i for i in range(min(len(actual), len(expected)))
                 if care[i] and actual[i] != expected[i]]
        self.fail("%s differs: length %d (expected %d), differing byte offsets %s\n"
                  "actual:   %s\nexpected: %s" % (
                      what, len(actual), len(expected), diffs[:32], actual.hex(),
                      expected.hex()))
