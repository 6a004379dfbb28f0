"""ECN marking as a DCQCN congestion point (Kmin/Kmax/Pmax per port, and
per queue above it).

BMv2 quirk that bites here: an egress queue only builds up when it is
rate-limited, and rate and depth are set through the Thrift CLI
(simple_switch_CLI set_queue_rate / set_queue_depth), not P4Runtime. The test
limits s1 port 2 to 10 packets/s and sends a burst, so packet i of the burst
is enqueued behind i minus (packets already dequeued) others; at 10 pps at
most 1 + burst_time/100 ms packets leave during the burst, which bounds each
packet's queue depth from both sides without looking inside the switch.
"""

import time

from fs_common import FsTest, HOST_MAC, sw_mac
from fs_packets import Flow
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

RATE_PPS = 10
KMIN, KMAX = 3, 6
N = 16


class DcqcnBase(FsTest):
    def burst(self, ecn, first_id):
        flows = [Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x77, ip_id=first_id + i)
                 for i in range(N)]
        t0 = time.time()
        for f in flows:
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ecn=ecn, dscp=24))
        elapsed = time.time() - t0
        got = []
        for _ in range(N):
            pkt = Ether(self.receive("s1", 2, timeout=5))
            got.append((pkt[IP].id, pkt[IP].tos & 3))
        self.assertEqual([i for i, _ in got], [first_id + i for i in range(N)], "FIFO order")
        # Dequeues that can have happened while the burst was being enqueued.
        drained = 1 + int(elapsed * RATE_PPS) + 1
        return [ecn_out for _, ecn_out in got], drained


class DcqcnThresholds(DcqcnBase):
    """Kmin 3, Kmax 6 packets, Pmax 0: packets that saw a depth <= Kmin are
    never marked, packets that saw a depth > Kmax are always marked (CE);
    Not-ECT packets are never marked; CE stays CE."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.insert("ecn.dcqcn_port", {"egress_port": 2}, "ecn.set_dcqcn",
                  {"kmin": KMIN, "kmax": KMAX, "pmax": 0}, priority=1)
        self.set_queue("s1", 2, RATE_PPS, depth=64)

        ecn_out, drained = self.burst(ecn=2, first_id=100)     # ECT(0)
        marked = 0
        for i, e in enumerate(ecn_out):
            depth_max, depth_min = i, max(0, i - drained)
            if depth_max <= KMIN:
                self.assertEqual(e, 2, "packet %d (depth <= %d) was marked" % (i, depth_max))
            if depth_min > KMAX:
                self.assertEqual(e, 3, "packet %d (depth >= %d) not marked" % (i, depth_min))
            marked += e == 3
        self.assertGreater(marked, 0)
        self.assertEqual(s1.read_counter("ecn.ce_marks", 2)[0], marked)
        print("\n  ECN out per burst position:", ecn_out, "(drained <= %d)" % drained)

        ecn_out, _ = self.burst(ecn=0, first_id=300)            # Not-ECT
        self.assertEqual(ecn_out, [0] * N, "Not-ECT packets must not be marked")
        ecn_out, _ = self.burst(ecn=3, first_id=500)            # already CE
        self.assertEqual(ecn_out, [3] * N)
        self.assertEqual(s1.read_counter("ecn.ce_marks", 2)[0], marked)


class DcqcnNoProfileNoMarks(DcqcnBase):
    """A port without a DCQCN profile never marks on queue depth."""

    def runTest(self):
        self.route("s1", "10.2.0.0", 16, 2)
        self.set_queue("s1", 2, RATE_PPS, depth=64)
        ecn_out, _ = self.burst(ecn=1, first_id=700)           # ECT(1)
        self.assertEqual(ecn_out, [1] * N)


class DcqcnRuntimeChange(DcqcnBase):
    """The controller rewrites a port's thresholds at run time (MODIFY):
    raising Kmin above any depth of the burst stops the marking."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.insert("ecn.dcqcn_port", {"egress_port": 2}, "ecn.set_dcqcn",
                          {"kmin": 0, "kmax": 0, "pmax": 0}, priority=1)
        self.set_queue("s1", 2, RATE_PPS, depth=64)
        ecn_out, drained = self.burst(ecn=2, first_id=900)
        self.assertTrue(all(e == 3 for e in ecn_out[drained + 1:]), ecn_out)
        s1.modify("ecn.dcqcn_port", {"egress_port": 2}, "ecn.set_dcqcn",
                  {"kmin": 1000, "kmax": 2000, "pmax": 65535}, priority=1)
        ecn_out, _ = self.burst(ecn=2, first_id=1100)
        self.assertEqual(ecn_out, [2] * N)


def ramp_probability(q, kmin, kmax, pmax):
    """p4src/v1model/ecn.p4's marking probability at queue depth q."""
    if q > kmax:
        return 1.0
    if q > kmin:
        return pmax / 65536 * (q - kmin) / (kmax - kmin)
    return 0.0


class DcqcnRampProbability(DcqcnBase):
    """Between Kmin and Kmax a packet is marked with probability
    Pmax (q - Kmin) / (Kmax - Kmin), statistically: a 200-packet burst into
    a 10 packets/s queue sees every depth from 0 to ~200, each packet's depth
    bounded from both sides as in DcqcnThresholds. The expected number of
    marks then lies between the sums of the bounds' probabilities, and the
    observed count must fall in that range widened by 4.5 standard
    deviations (a false failure about once in 10^5 runs). The test also
    checks that the window excludes the counts a wrong marking rule would
    give (flat Pmax, no ramp, or a ramp twice as steep), so it has the power
    to see one."""

    N = 200
    KMIN, KMAX, PMAX = 20, 180, 32768     # Pmax 0.5

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.insert("ecn.dcqcn_port", {"egress_port": 2}, "ecn.set_dcqcn",
                  {"kmin": self.KMIN, "kmax": self.KMAX, "pmax": self.PMAX}, priority=1)
        self.set_queue("s1", 2, RATE_PPS, depth=self.N + 16)

        flows = [Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x78, ip_id=2000 + i)
                 for i in range(self.N)]
        pkts = [f.packet(HOST_MAC, sw_mac("s1", 1), ecn=2, dscp=24) for f in flows]
        # Paced a little: a 200-packet burst in 40 ms overflows the capture
        # buffer between the veth and BMv2.
        t0 = time.time()
        for p in pkts:
            self.send("s1", 1, p)
            time.sleep(0.002)
        elapsed = time.time() - t0
        drained = 1 + int(elapsed * RATE_PPS) + 1
        got = []
        for _ in range(self.N):
            try:
                pkt = Ether(self.receive("s1", 2, timeout=10))
            except AssertionError:
                self.fail("only %d of %d packets left the queue (sent in %.2f s)"
                          % (len(got), self.N, elapsed))
            got.append((pkt[IP].id, pkt[IP].tos & 3))
        self.assertEqual([i for i, _ in got], [2000 + i for i in range(self.N)], "FIFO order")
        marked = sum(e == 3 for _, e in got)

        def expected(rule):
            lo = hi = var = 0.0
            for i in range(self.N):
                p_lo, p_hi = rule(max(0, i - drained)), rule(i)
                lo, hi = lo + p_lo, hi + p_hi
                var += max(p * (1 - p) for p in (p_lo, p_hi, min(max(0.5, p_lo), p_hi)))
            return lo, hi, var ** 0.5

        def rule(q):
            return ramp_probability(q, self.KMIN, self.KMAX, self.PMAX)

        lo, hi, sd = expected(rule)
        window = (lo - 4.5 * sd, hi + 4.5 * sd)
        print("\n  %d of %d marked; expected %.1f..%.1f (sd %.1f, drained <= %d), window %.1f..%.1f"
              % (marked, self.N, lo, hi, sd, drained, window[0], window[1]))
        self.assertTrue(window[0] <= marked <= window[1],
                        "%d marks outside %.1f..%.1f" % (marked, window[0], window[1]))
        self.assertEqual(s1.read_counter("ecn.ce_marks", 2)[0], marked)

        wrong = {
            "flat Pmax between Kmin and Kmax":
                lambda q: 1.0 if q > self.KMAX else (self.PMAX / 65536 if q > self.KMIN else 0.0),
            "marking everything above Kmin": lambda q: 1.0 if q > self.KMIN else 0.0,
            "a ramp twice as steep":
                lambda q: min(1.0, 2 * rule(q)) if q <= self.KMAX else 1.0,
        }
        for name, r in wrong.items():
            w_lo, w_hi, _ = expected(r)
            self.assertTrue(w_lo > window[1] or w_hi < window[0],
                            "the window cannot tell the ramp from %s (%.1f..%.1f)"
                            % (name, w_lo, w_hi))


def ecn_of(frame):
    """The IPv4 ECN bits of a frame, under an MPLS label stack or not."""
    at, ethertype = 14, int.from_bytes(frame[12:14], "big")
    if ethertype == 0x8847:
        while True:
            bottom = frame[at + 2] & 1
            at += 4
            if bottom:
                break
    return frame[at + 1] & 3


class DcqcnReservedQueueKeepsItsProfile(FsTest):
    """What the controller installs around a reserved burst: the lowered
    profile for every queue of the port (priority 10, above the static
    entry) and the reserved queue's own profile (qid 5, priority 20). Into
    a rate-limited port, competing RoCE packets (queue 3) are CE-marked
    once their queue holds any packet, while the reserved flow's packets
    (SR, traffic class 5) in their own queue are not. Without the reserved
    queue's entry the same burst marks them too (the bug the entry fixes)."""

    N = 8

    def burst(self, first_id):
        pkts = []
        for i in range(self.N):
            competing = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x40, ip_id=first_id + i)
            reserved = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x555,
                            ip_id=first_id + 100 + i)
            pkts += [competing.packet(HOST_MAC, sw_mac("s1", 1), ecn=2, dscp=24),
                     reserved.packet(HOST_MAC, sw_mac("s1", 1), ecn=2, dscp=24)]
        for p in pkts:
            self.send("s1", 1, p)
        out = {}
        for _ in range(2 * self.N):
            frame = self.receive("s1", 2, timeout=10)
            reserved = int.from_bytes(frame[12:14], "big") == 0x8847
            out.setdefault("reserved" if reserved else "competing", []).append(ecn_of(frame))
        return out

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.insert("qos.dscp_priority", {"dscp": 24}, "qos.set_priority", {"priority": 3})
        s1.insert("sr.reservation", {"dst_qp": (0x555, 0xffffff)}, "sr.push_2",
                  {"tc": 5, "label0": 1002, "label1": 1099}, priority=10)
        self.adjacency("s1", 2)
        never = {"kmin": 100000, "kmax": 200000, "pmax": 0}
        s1.insert("ecn.dcqcn_port", {"egress_port": 2}, "ecn.set_dcqcn", never, priority=1)
        s1.insert("ecn.dcqcn_port", {"egress_port": 2}, "ecn.set_dcqcn",
                  {"kmin": 0, "kmax": 0, "pmax": 0}, priority=10)
        own = s1.insert("ecn.dcqcn_port", {"egress_port": 2, "qid": (5, 0x7)},
                        "ecn.set_dcqcn", never, priority=20)
        self.set_queue("s1", 2, 10, depth=64)

        out = self.burst(3000)
        print("\n  ECN out with the reserved queue's profile:", out)
        self.assertEqual(out["reserved"], [2] * self.N, "reserved packets were marked")
        self.assertGreaterEqual(out["competing"].count(3), self.N // 2, out)

        s1.delete(own)
        out = self.burst(4000)
        print("  ECN out without it:", out)
        self.assertGreaterEqual(out["reserved"].count(3), self.N // 2,
                                "the lowered profile should mark reserved packets without their own entry")
