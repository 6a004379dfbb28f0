"""Per-flow pre-drain: ECN-capable packets of flows listed for an egress port
are CE-marked with an empty queue; nothing else is."""

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import Flow
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

SRC = "10.1.0.1"


class PredrainListedFlowsOnly(FsTest):
    """Listed flow (port 2, QP 0x100) ECT(0) -> CE; another QP, another egress
    port, and a Not-ECT packet of the listed flow are untouched; the entry's
    direct counter sees both packets of the listed flow."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        self.route("s1", "10.3.0.0", 16, 3)
        entry = s1.insert("ecn.predrain",
                          {"egress_port": 2, "src_addr": (SRC, 0xffffffff),
                           "dst_qp": (0x100, 0xffffff)},
                          "ecn.predrain_mark", {"probability": 0xffff}, priority=10)
        cases = [
            # flow, ecn in, egress port, ecn out
            (Flow(SRC, "10.2.0.1", sport=49152, qp=0x100), 2, 2, 3),
            (Flow(SRC, "10.2.0.1", sport=49152, qp=0x100), 1, 2, 3),
            (Flow(SRC, "10.2.0.1", sport=49152, qp=0x101), 2, 2, 2),
            (Flow(SRC, "10.3.0.1", sport=49152, qp=0x100), 2, 3, 2),
            (Flow(SRC, "10.2.0.1", sport=49152, qp=0x100), 0, 2, 0),
            (Flow("10.1.0.2", "10.2.0.1", sport=49152, qp=0x100), 2, 2, 2),
        ]
        for f, ecn_in, port, ecn_out in cases:
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ecn=ecn_in, dscp=24))
            self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63,
                                             ecn=ecn_out, dscp=24))
        self.expect_nothing()
        self.assertEqual(s1.read_direct_counter(entry)[0], 3)
        self.assertEqual(s1.read_counter("ecn.ce_marks", 512 + 2)[0], 2)
        self.assertEqual(s1.read_counter("ecn.ce_marks", 2)[0], 0)


class PredrainProbability(FsTest):
    """probability 0 never marks; 0x8000 marks about half: 400 packets give
    200 +- 60 marks (binomial sd 10, so 6 sd: a correct switch fails with
    probability < 1e-8)."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.insert("ecn.predrain", {"egress_port": 2, "dst_qp": (0x200, 0xffffff)},
                  "ecn.predrain_mark", {"probability": 0}, priority=10)
        s1.insert("ecn.predrain", {"egress_port": 2, "dst_qp": (0x201, 0xffffff)},
                  "ecn.predrain_mark", {"probability": 0x8000}, priority=10)
        never = Flow(SRC, "10.2.0.1", sport=49152, qp=0x200)
        half = Flow(SRC, "10.2.0.1", sport=49152, qp=0x201)
        for _ in range(50):
            self.send("s1", 1, never.packet(HOST_MAC, sw_mac("s1", 1), ecn=2))
            self.expect("s1", 2, never.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, ecn=2))
        marks = 0
        for _ in range(400):
            self.send("s1", 1, half.packet(HOST_MAC, sw_mac("s1", 1), ecn=2))
            pkt = Ether(self.receive("s1", 2))
            ecn = pkt[IP].tos & 3
            self.assertIn(ecn, (2, 3))
            marks += ecn == 3
        print("\n  pre-drain with probability 0x8000: %d of 400 marked" % marks)
        self.assertTrue(140 <= marks <= 260, "%d of 400 marked" % marks)
        self.expect_nothing()
