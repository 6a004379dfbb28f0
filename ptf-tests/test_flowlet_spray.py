"""Flowlet switching and per-packet spraying: the random modes of
routing.hash_mode (hash_flowlet(timeout_us), hash_spray), statistically.

BMv2 draws the random numbers, so these tests count: every bound below is
an exact binomial tail, and each test states the chance that a correct
switch fails it (the same approach as test_ecn.DcqcnRampProbability). The
group is 4 members on s1 (ports 2-5) toward 10.2.0.0/16.
"""

import math
import time

from fs_common import HOST_MAC, nbr_mac, sw_mac
from fs_packets import DEFAULT_HASH_SEED, Flow, crc32_roce
from test_ecmp import MEMBER_PORTS, EcmpBase

FLOWLET_SLOTS = 16384   # FS_FLOWLET_SLOTS, p4src/v1model/sizes.p4


def binomial_tail_bounds(n, p, alpha):
    """(lo, hi): the widest window such that X ~ Binomial(n, p) falls
    below lo or above hi with probability at most alpha/2 each."""
    pmf = [math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)]
    lo, acc = 0, 0.0
    while acc + pmf[lo] <= alpha / 2:
        acc += pmf[lo]
        lo += 1
    hi, acc = n, 0.0
    while acc + pmf[hi] <= alpha / 2:
        acc += pmf[hi]
        hi -= 1
    return lo, hi


class RandomModeBase(EcmpBase):
    def forward(self, flow):
        """Send one packet of `flow` into s1 port 1; the member port it
        left on, checking the packet is the routed one."""
        self.send("s1", 1, flow.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
        port, frame = self.receive_any("s1")
        self.assertIn(port, MEMBER_PORTS)
        self.assert_frame(frame, flow.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63),
                          what="packet on port %d" % port)
        return port


class FlowletKeepsAMemberUntilAGap(RandomModeBase):
    """Flowlets on 64 RoCEv2 flows (QPs chosen so that each has a flowlet
    slot of its own).

    1. Timeout 10 s: 8 packets of each flow, back to back, all leave on one
       member (deterministic for a correct switch; a switch that drew per
       packet would keep 8 packets together with probability 4^-7 per
       flow). The 64 flows' members cover all 4 ports (a port left out has
       probability 4 (3/4)^64 < 1e-7).
    2. Timeout 50 ms, set at run time: 4 rounds, each after a 250 ms pause,
       of one packet per flow: every packet starts a new flowlet and draws
       its member anew, so it differs from the flow's previous member with
       probability 3/4. Of the 256 draws, the number that changed member
       must lie in the Binomial(256, 3/4) window that holds with
       probability 1 - 1e-6 (a switch that never redraws changes none),
       and each port's share of the draws in the Binomial(256, 1/4) window
       at 1e-6 / 4. A correct switch fails this test with probability
       below 3e-6."""

    FLOWS = 64
    PER_FLOWLET = 8
    ROUNDS = 4
    LONG_US = 10_000_000
    SHORT_US = 50_000
    PAUSE_S = 0.25
    ALPHA = 1e-6

    def flows(self):
        """64 QPs whose flows have distinct flowlet slots (the low 14 bits
        of the seed-0 QP-aware hash), so that no two share a flowlet."""
        flows, slots, qp = [], set(), 0x9000
        while len(flows) < self.FLOWS:
            slot = crc32_roce(DEFAULT_HASH_SEED, "10.1.0.1", "10.2.0.1", 49152, qp) % FLOWLET_SLOTS
            if slot not in slots:
                slots.add(slot)
                flows.append(Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=qp))
            qp += 1
        return flows

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        s = self.sw["s1"]
        flows = self.flows()
        s.set_default("routing.hash_mode", "routing.hash_flowlet", {"timeout_us": self.LONG_US})
        member = []
        for f in flows:
            ports = [self.forward(f) for _ in range(self.PER_FLOWLET)]
            self.assertEqual(len(set(ports)), 1, "one flowlet, several members: %s" % ports)
            member.append(ports[0])
        self.assertEqual(set(member), set(MEMBER_PORTS), "flowlets' members: %s" % member)

        s.set_default("routing.hash_mode", "routing.hash_flowlet", {"timeout_us": self.SHORT_US})
        changed, drawn = 0, {p: 0 for p in MEMBER_PORTS}
        for _ in range(self.ROUNDS):
            time.sleep(self.PAUSE_S)
            for i, f in enumerate(flows):
                port = self.forward(f)
                changed += port != member[i]
                drawn[port] += 1
                member[i] = port
        n = self.ROUNDS * self.FLOWS
        lo, hi = binomial_tail_bounds(n, 0.75, self.ALPHA)
        print("\n  after a gap: %d of %d draws changed member (window %d..%d); per port %s"
              % (changed, n, lo, hi, drawn))
        self.assertTrue(lo <= changed <= hi,
                        "%d of %d flowlets changed member, outside %d..%d" % (changed, n, lo, hi))
        lo, hi = binomial_tail_bounds(n, 0.25, self.ALPHA / 4)
        for port, k in drawn.items():
            self.assertTrue(lo <= k <= hi, "port %d drawn %d of %d times, outside %d..%d"
                            % (port, k, n, lo, hi))
        self.expect_nothing()


class SprayPicksAMemberPerPacket(RandomModeBase):
    """Spraying: 400 packets of one RoCEv2 flow (one QP, one 5-tuple) spread
    over the 4 members, each member's count in the Binomial(400, 1/4)
    window at 1e-6 / 4 (a correct switch fails with probability < 1e-6; a
    hash would put all 400 on one member). Then back to hash_qp_aware at
    run time: 16 packets of the flow all take the member the CRC predicts."""

    N = 400
    ALPHA = 1e-6

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        s = self.sw["s1"]
        f = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x4242)
        s.set_default("routing.hash_mode", "routing.hash_spray")
        counts = {p: 0 for p in MEMBER_PORTS}
        for _ in range(self.N):
            counts[self.forward(f)] += 1
        lo, hi = binomial_tail_bounds(self.N, 0.25, self.ALPHA / 4)
        print("\n  %d packets of one flow per member: %s (window %d..%d)" % (self.N, counts, lo, hi))
        for port, k in counts.items():
            self.assertTrue(lo <= k <= hi, "member port %d carried %d of %d packets, outside %d..%d"
                            % (port, k, self.N, lo, hi))
        s.set_default("routing.hash_mode", "routing.hash_qp_aware")
        want = MEMBER_PORTS[crc32_roce(DEFAULT_HASH_SEED, "10.1.0.1", "10.2.0.1", 49152, 0x4242) % 4]
        for _ in range(16):
            self.assertEqual(self.forward(f), want)
        self.expect_nothing()
