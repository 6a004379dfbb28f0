"""SR-MPLS: reservation push at the ingress leaf, one pop per hop along a
3-switch path, unknown labels, over-deep stacks, label TTL.

TTL (uniform model): pushed labels copy the IPv4 TTL; each hop decrements the
top label's TTL and copies it to the next label, or to IPv4 after the bottom
label, so the packet leaves the path with IPv4 TTL - (number of hops)."""

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import DROP, Flow

SRC, DST, QP = "10.1.0.1", "10.2.0.1", 0x00abcd


def reserve(sw, action, params, qp=QP, priority=10):
    return sw.insert("sr.reservation",
                     {"src_addr": (SRC, 0xffffffff), "dst_addr": (DST, 0xffffffff),
                      "dst_qp": (qp, 0xffffff)},
                     action, params, priority=priority)


class SrThreeHopPushPop(FsTest):
    """s1 reserves the flow with [1002, 1003, 1004]: s1 pops 1002 (port 2),
    s2 pops 1003 (port 3), s3 pops the bottom 1004 (port 4) and restores IPv4.
    The reservation overrides s1's route; an unreserved QP is routed."""

    SWITCHES = ("s1", "s2", "s3")

    def runTest(self):
        s1 = self.sw["s1"]
        entry = reserve(s1, "sr.push_3", {"tc": 5, "label0": 1002, "label1": 1003,
                                          "label2": 1004})
        self.adjacency("s1", 2)
        self.route("s1", "10.2.0.0", 16, 3)       # what an unreserved flow takes
        self.adjacency("s2", 3)
        self.adjacency("s3", 4)

        f = Flow(SRC, DST, sport=49152, qp=QP)
        self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=24, ecn=2))
        hop1 = f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=64, dscp=24, ecn=2,
                        labels=[(1003, 5, 63), (1004, 5, 64)])
        self.expect("s1", 2, hop1)
        self.expect_nothing()

        self.send("s2", 1, f.packet(nbr_mac("s1", 2), sw_mac("s2", 1), ttl=64, dscp=24, ecn=2,
                                    labels=[(1003, 5, 63), (1004, 5, 64)]))
        self.expect("s2", 3, f.packet(sw_mac("s2", 3), nbr_mac("s2", 3), ttl=64, dscp=24,
                                      ecn=2, labels=[(1004, 5, 62)]))
        self.expect_nothing()

        self.send("s3", 1, f.packet(nbr_mac("s2", 3), sw_mac("s3", 1), ttl=64, dscp=24, ecn=2,
                                    labels=[(1004, 5, 62)]))
        self.expect("s3", 4, f.packet(sw_mac("s3", 4), nbr_mac("s3", 4), ttl=61, dscp=24,
                                      ecn=2))
        self.expect_nothing()

        # The reservation's direct counter saw exactly that packet.
        self.assertEqual(s1.read_direct_counter(entry)[0], 1)
        # Another QP of the same host pair is not reserved: routed by LPM.
        g = Flow(SRC, DST, sport=49152, qp=QP + 1)
        self.send("s1", 1, g.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
        self.expect("s1", 3, g.packet(sw_mac("s1", 3), nbr_mac("s1", 3), ttl=63))
        self.expect_nothing()
        self.assertEqual(s1.read_direct_counter(entry)[0], 1)


class SrPushOneAndFour(FsTest):
    """A 1-label reservation leaves the ingress leaf as plain IPv4 (pushed and
    popped in one pass); a 4-label one leaves with the 3 labels below its own."""

    def runTest(self):
        s1 = self.sw["s1"]
        reserve(s1, "sr.push_1", {"tc": 3, "label0": 1002}, qp=0x10)
        reserve(s1, "sr.push_4", {"tc": 6, "label0": 1003, "label1": 1101, "label2": 1102,
                                  "label3": 1103}, qp=0x20)
        self.adjacency("s1", 2)
        self.adjacency("s1", 3)
        f1 = Flow(SRC, DST, sport=50000, qp=0x10)
        self.send("s1", 1, f1.packet(HOST_MAC, sw_mac("s1", 1), ttl=30))
        self.expect("s1", 2, f1.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=29))
        f4 = Flow(SRC, DST, sport=50000, qp=0x20)
        self.send("s1", 1, f4.packet(HOST_MAC, sw_mac("s1", 1), ttl=30))
        self.expect("s1", 3, f4.packet(sw_mac("s1", 3), nbr_mac("s1", 3), ttl=30,
                                       labels=[(1101, 6, 29), (1102, 6, 30), (1103, 6, 30)]))
        self.expect_nothing()


class SrReservationPriority(FsTest):
    """Ternary reservations: the higher-priority entry wins (a per-QP entry
    over a host-pair wildcard); other QPs fall back to the wildcard."""

    def runTest(self):
        s1 = self.sw["s1"]
        s1.insert("sr.reservation", {"src_addr": (SRC, 0xffffffff),
                                     "dst_addr": ("10.2.0.0", 0xffff0000)},
                  "sr.push_1", {"tc": 1, "label0": 1002}, priority=10)
        reserve(s1, "sr.push_1", {"tc": 1, "label0": 1003}, qp=0x77, priority=20)
        self.adjacency("s1", 2)
        self.adjacency("s1", 3)
        for qp, port in ((0x77, 3), (0x78, 2)):
            f = Flow(SRC, DST, sport=50001, qp=qp)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
            self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63))
        self.expect_nothing()


class SrBadStacksDropped(FsTest):
    """Unknown top label, a fifth label, and a top label with TTL 1 are all
    dropped and counted; a valid 4-label stack is forwarded."""

    def runTest(self):
        self.adjacency("s1", 2)
        f = Flow(SRC, DST, sport=50002, qp=0x99)
        cases = [
            ("MPLS_UNKNOWN_LABEL", [(1999, 0, 64)]),
            ("MPLS_TOO_DEEP", [(1002, 0, 64), (1101, 0, 64), (1102, 0, 64), (1103, 0, 64),
                               (1104, 0, 64)]),
            ("TTL_EXPIRED", [(1002, 0, 1), (1101, 0, 64)]),
        ]
        for reason, labels in cases:
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), labels=labels))
            self.expect_nothing()
            got = self.wait_counter(lambda: self.drop_count("s1", DROP[reason]), 1)
            self.assertEqual(got, 1, reason)
        # Four labels are within bounds.
        self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1),
                                    labels=[(1002, 2, 9), (1101, 2, 9), (1102, 2, 9),
                                            (1103, 2, 9)]))
        self.expect("s1", 2, f.packet(sw_mac("s1", 2), nbr_mac("s1", 2),
                                      labels=[(1101, 2, 8), (1102, 2, 9), (1103, 2, 9)]))
        self.expect_nothing()
