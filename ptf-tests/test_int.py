"""INT-MD over UDP (INT v2.1) along s1 (source) -> s2 (transit) -> s3 (sink),
with Telemetry Report v2.0 reports to a collector port.

Each hop's output is compared with a packet built here from the spec. Fields
a test cannot know (hop latency and timestamps in microseconds, and the sink
report's copy of the host port's transmitted bytes, which races the data
packet) are masked and checked for plausibility instead; everything else,
including queue ids, occupancies, ports, node ids, lengths and checksums, is
exact. The next hop's input is rebuilt with chosen values for those fields.
"""

import struct

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import (DROP, DS_TX_BYTES, FS_DOMAIN, FS_INSTRUCTIONS, INS_BUFFER, INT_DSCP_BIT,
                        INS_CHECKSUM_COMPLEMENT, INS_INGRESS_TS, INS_L2_PORTS, INS_TX_UTIL,
                        Flow, ReportGroup, ReportIndividual, hop_field_offsets, hop_words,
                        int_headers, int_hop, udp_checksum_ok, with_complement)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

NODE = {"s1": 101, "s2": 102, "s3": 103}
COLLECTOR_MAC = "02:cc:00:00:00:01"
REPORT_SRC_IP, COLLECTOR_IP = "192.0.2.3", "192.0.2.100"
REPORT_SPORT, COLLECTOR_PORT = 40000, 32766
REPORT_SESSION = 64
SRC, DST, QP = "10.1.0.1", "10.2.0.1", 0x0abcde
ROCE_DSCP, ROCE_QUEUE = 24, 3
STACK_OFF = 14 + 20 + 8 + 4 + 12          # first metadata byte in a frame
REPORT_INNER_OFF = 14 + 20 + 8 + 8 + 12   # inner IPv4 header in a report
REPORT_STACK_OFF = REPORT_INNER_OFF + 20 + 8 + 4 + 12
MAX_PLAUSIBLE_US = 10_000_000


def field(frame, base, offsets, name):
    off, n = offsets[name]
    return int.from_bytes(frame[base + off:base + off + n], "big")


def masks(base, offsets, names):
    return [(base + offsets[n][0], offsets[n][1]) for n in names if n in offsets]


class IntBase(FsTest):
    SWITCHES = ("s1", "s2", "s3")
    INS, DS = FS_INSTRUCTIONS, DS_TX_BYTES

    def setUp(self):
        FsTest.setUp(self)
        for name, s in self.sw.items():
            s.set_default("int_egress.node_config", "int_egress.set_node_id",
                          {"node_id": NODE[name]})
            s.insert("qos.dscp_priority", {"dscp": ROCE_DSCP}, "qos.set_priority",
                     {"priority": ROCE_QUEUE})

    def watch(self, sw, ins, ds, max_hop=8, qp=QP, src=SRC):
        return self.sw[sw].insert(
            "int_ingress.watchlist",
            {"src_addr": (src, 0xffffffff), "dst_addr": (DST, 0xffffffff),
             "dst_qp": (qp, 0xffffff)},
            "int_ingress.int_source",
            {"max_hop": max_hop, "instruction_bitmap": ins, "ds_instruction": ds},
            priority=10)

    def sink(self, sw, host_port, collector_port):
        s = self.sw[sw]
        s.insert("int_ingress.sink_ports", {"egress_port": host_port}, "int_ingress.set_sink")
        self.clone_session(sw, REPORT_SESSION, [(collector_port, 1)])
        s.set_default("int_egress.report_config", "int_egress.set_collector",
                      {"src_mac": sw_mac(sw, collector_port), "dst_mac": COLLECTOR_MAC,
                       "src_addr": REPORT_SRC_IP, "collector_addr": COLLECTOR_IP,
                       "src_port": REPORT_SPORT, "collector_port": COLLECTOR_PORT})

    def path(self):
        self.route("s1", "10.2.0.0", 16, 2)
        self.route("s2", "10.2.0.0", 16, 3)
        self.route("s3", DST, 32, 4)
        self.sink("s3", 4, 3)

    def check_times(self, frame, base, offsets):
        if "latency" in offsets:
            lat = field(frame, base, offsets, "latency")
            self.assertLess(lat, MAX_PLAUSIBLE_US, "hop latency %d us" % lat)
        if "egress_ts" in offsets:
            self.assertGreater(field(frame, base, offsets, "egress_ts"), 0)
        if "ingress_ts" in offsets and "egress_ts" in offsets:
            ing = field(frame, base, offsets, "ingress_ts")
            eg = field(frame, base, offsets, "egress_ts")
            self.assertLessEqual(ing, eg)
            if "latency" in offsets:
                self.assertEqual(field(frame, base, offsets, "latency"), eg - ing)

    def report(self, node, seq, inner):
        pkt = (Ether(src=sw_mac("s3", 3), dst=COLLECTOR_MAC) /
               IP(src=REPORT_SRC_IP, dst=COLLECTOR_IP, ttl=64, id=0, flags="DF", tos=0) /
               UDP(sport=REPORT_SPORT, dport=COLLECTOR_PORT, chksum=0) /
               ReportGroup(ver=2, hw_id=0, seq_no=seq, node_id=node) /
               ReportIndividual(rep_type=1, in_type=4, report_length=2 + len(inner) // 4,
                                md_length=0, f=1) /
               Raw(inner))
        return bytes(pkt)


class IntSourceTransitSink(IntBase):
    """RoCEv2 flow with Foresight's instruction set (node id, ports, hop
    latency, queue id + occupancy, egress timestamp, DS tx bytes): each hop
    stamps on top of the stack and decrements the hop count; the sink hands
    the host the original packet byte for byte and reports the full stack."""

    def runTest(self):
        ins, ds = self.INS, self.DS
        ml = hop_words(ins, ds)
        off = hop_field_offsets(ins, ds)
        self.watch("s1", ins, ds, max_hop=8)
        self.path()
        f = Flow(SRC, DST, sport=49152, qp=QP, payload=bytes(range(64)))
        kw = dict(dscp=ROCE_DSCP, ecn=2)

        # Hop 1: s1 is the source and stamps its own entry.
        self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, **kw))
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, qid=ROCE_QUEUE, qocc=0,
                     tx_bytes=0)
        exp1 = f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, int_dscp=True,
                        int_bytes=int_headers(ROCE_DSCP, ml, 7, ins, ds, FS_DOMAIN, h1), **kw)
        got = self.receive("s1", 2)
        self.assert_frame(got, exp1, masks(STACK_OFF, off, ["latency", "egress_ts"]), "hop 1")
        self.check_times(got, STACK_OFF, off)

        # Hop 2: s2 transit, input rebuilt with chosen times.
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, latency=11, qid=ROCE_QUEUE,
                     egress_ts=1000, tx_bytes=0)
        self.send("s2", 1, f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, int_dscp=True,
                                    int_bytes=int_headers(ROCE_DSCP, ml, 7, ins, ds, FS_DOMAIN,
                                                          h1), **kw))
        h2 = int_hop(ins, ds, node_id=102, in_port=1, out_port=3, qid=ROCE_QUEUE, qocc=0,
                     tx_bytes=0)
        exp2 = f.packet(sw_mac("s2", 3), nbr_mac("s2", 3), ttl=62, int_dscp=True,
                        int_bytes=int_headers(ROCE_DSCP, ml, 6, ins, ds, FS_DOMAIN, h2 + h1),
                        **kw)
        got = self.receive("s2", 3)
        self.assert_frame(got, exp2, masks(STACK_OFF, off, ["latency", "egress_ts"]), "hop 2")
        self.check_times(got, STACK_OFF, off)

        # Hop 3: s3 is the sink.
        h2 = int_hop(ins, ds, node_id=102, in_port=1, out_port=3, latency=13, qid=ROCE_QUEUE,
                     egress_ts=2000, tx_bytes=0)
        self.send("s3", 1, f.packet(sw_mac("s2", 3), nbr_mac("s2", 3), ttl=62, int_dscp=True,
                                    int_bytes=int_headers(ROCE_DSCP, ml, 6, ins, ds, FS_DOMAIN,
                                                          h2 + h1), **kw))
        host = f.packet(sw_mac("s3", 4), nbr_mac("s3", 4), ttl=61, **kw)
        self.assert_frame(self.receive("s3", 4), host, (), "packet to the host")

        h3 = int_hop(ins, ds, node_id=103, in_port=1, out_port=4, qid=ROCE_QUEUE, qocc=0)
        inner = f.inner_from_ip(ttl=62, int_dscp=True,
                                int_bytes=int_headers(ROCE_DSCP, ml, 5, ins, ds, FS_DOMAIN,
                                                      h3 + h2 + h1), **kw)
        inner = inner[:20 + 8 + 16 + 3 * 4 * ml + 12]      # truncated after the BTH
        exp_report = self.report(103, 0, inner)
        got = self.receive("s3", 3)
        self.assert_frame(got, exp_report,
                          masks(REPORT_STACK_OFF, off, ["latency", "egress_ts", "tx_bytes"]),
                          "telemetry report")
        self.check_times(got, REPORT_STACK_OFF, off)
        # The host port's byte counter: before or after the data packet left.
        self.assertIn(field(got, REPORT_STACK_OFF, off, "tx_bytes"), (0, len(bytes(host))))
        self.expect_nothing()
        self.assertEqual(self.sw["s3"].read_counter("int_egress.reports", 0)[0], 1)


class IntAllInstructions(IntBase):
    """Every baseline instruction: ingress/egress timestamps (hop latency is
    exactly their difference), level-2 ports, and all-ones for Tx
    utilization and buffer occupancy, which BMv2 cannot provide."""

    def runTest(self):
        ins = (FS_INSTRUCTIONS | INS_INGRESS_TS | INS_L2_PORTS | INS_TX_UTIL | INS_BUFFER)
        ds = DS_TX_BYTES
        ml = hop_words(ins, ds)
        off = hop_field_offsets(ins, ds)
        self.watch("s1", ins, ds, max_hop=3)
        self.route("s1", "10.2.0.0", 16, 2)
        f = Flow(SRC, DST, sport=49152, qp=QP)
        for i in range(2):    # the second packet sees the first one's bytes
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP))
            h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, qid=ROCE_QUEUE, qocc=0,
                         tx_bytes=0)
            exp = f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, dscp=ROCE_DSCP,
                           int_dscp=True,
                           int_bytes=int_headers(ROCE_DSCP, ml, 2, ins, ds, FS_DOMAIN, h1))
            if i == 0:
                first_len = len(bytes(exp))
            else:
                h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, qid=ROCE_QUEUE,
                             qocc=0, tx_bytes=first_len)
                exp = f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, dscp=ROCE_DSCP,
                               int_dscp=True,
                               int_bytes=int_headers(ROCE_DSCP, ml, 2, ins, ds, FS_DOMAIN, h1))
            got = self.receive("s1", 2)
            self.assert_frame(got, exp, masks(STACK_OFF, off,
                                              ["latency", "ingress_ts", "egress_ts"]),
                              "packet %d" % i)
            self.check_times(got, STACK_OFF, off)
        self.expect_nothing()


class IntHopLimit(IntBase):
    """A packet that arrives with Remaining Hop Count 0 gets the E bit and no
    metadata; the sink still strips it and reports the stack it has."""

    def runTest(self):
        ins, ds = self.INS, self.DS
        ml = hop_words(ins, ds)
        self.path()
        f = Flow(SRC, DST, sport=49153, qp=QP)
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, latency=5, qid=3,
                     egress_ts=77, tx_bytes=100)
        self.send("s2", 1, f.packet(HOST_MAC, sw_mac("s2", 1), ttl=63, int_dscp=True,
                                    int_bytes=int_headers(0, ml, 0, ins, ds, FS_DOMAIN, h1)))
        self.expect("s2", 3, f.packet(sw_mac("s2", 3), nbr_mac("s2", 3), ttl=62, int_dscp=True,
                                      int_bytes=int_headers(0, ml, 0, ins, ds, FS_DOMAIN, h1,
                                                            e=1)))
        self.send("s3", 1, f.packet(HOST_MAC, sw_mac("s3", 1), ttl=62, int_dscp=True,
                                    int_bytes=int_headers(0, ml, 0, ins, ds, FS_DOMAIN, h1,
                                                          e=1)))
        self.expect("s3", 4, f.packet(sw_mac("s3", 4), nbr_mac("s3", 4), ttl=61))
        inner = f.inner_from_ip(ttl=62, int_dscp=True,
                                int_bytes=int_headers(0, ml, 0, ins, ds, FS_DOMAIN, h1, e=1))
        inner = inner[:20 + 8 + 16 + 4 * ml + 12]
        self.assert_frame(self.receive("s3", 3), self.report(103, 0, inner), (), "report")
        self.expect_nothing()


class IntChecksumNeutral(IntBase):
    """A UDP flow with a non-zero checksum: the source adds the Checksum
    Complement instruction, every hop keeps the checksum valid without
    changing it (verified by a full RFC 768 computation), setting E updates
    it, and the sink hands the host the original packet and checksum."""

    def runTest(self):
        ins_req, ds = self.INS, self.DS
        ins = ins_req | INS_CHECKSUM_COMPLEMENT
        ml = hop_words(ins, ds)
        off = hop_field_offsets(ins, ds)
        self.watch("s1", ins_req, ds, max_hop=8, qp=0)
        self.path()
        f = Flow(SRC, DST, sport=7000, dport=9999, udp_checksum=1, payload=b"foresight" * 7)
        orig_csum = f.original_udp_checksum()
        self.assertNotEqual(orig_csum, 0)

        self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, qid=0, qocc=0, tx_bytes=0)
        exp1 = f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, int_dscp=True,
                        int_bytes=int_headers(0, ml, 7, ins, ds, FS_DOMAIN, h1))
        got = self.receive("s1", 2)
        self.assert_frame(got, exp1, masks(STACK_OFF, off, ["latency", "egress_ts", "cc"]),
                          "hop 1")
        self.assertTrue(udp_checksum_ok(got), "hop 1 UDP checksum invalid")
        self.assertEqual(Ether(got)[UDP].chksum, orig_csum)

        # Transit with a valid input (complement computed by full sum here).
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, latency=9, egress_ts=555)
        in2 = with_complement(bytes(f.packet(
            sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, int_dscp=True,
            int_bytes=int_headers(0, ml, 7, ins, ds, FS_DOMAIN, h1))), STACK_OFF + off["cc"][0])
        self.assertTrue(udp_checksum_ok(in2))
        self.send("s2", 1, in2)
        h2 = int_hop(ins, ds, node_id=102, in_port=1, out_port=3, qid=0, qocc=0, tx_bytes=0)
        exp2 = bytearray(bytes(f.packet(sw_mac("s2", 3), nbr_mac("s2", 3), ttl=62,
                                        int_dscp=True,
                                        int_bytes=int_headers(0, ml, 6, ins, ds, FS_DOMAIN,
                                                              h2 + h1))))
        # The upstream entry keeps the complement it arrived with.
        up = STACK_OFF + 4 * ml + off["cc"][0]
        exp2[up:up + 4] = in2[STACK_OFF + off["cc"][0]:STACK_OFF + off["cc"][0] + 4]
        got = self.receive("s2", 3)
        self.assert_frame(got, exp2, masks(STACK_OFF, off, ["latency", "egress_ts", "cc"]),
                          "hop 2")
        self.assertTrue(udp_checksum_ok(got), "hop 2 UDP checksum invalid")

        # Hop limit reached at s2: E set, the checksum itself is updated.
        h2 = int_hop(ins, ds, node_id=102, in_port=1, out_port=3, latency=4, egress_ts=999)
        stack = h2 + h1
        base = bytes(f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, int_dscp=True,
                              int_bytes=int_headers(0, ml, 0, ins, ds, FS_DOMAIN, stack)))
        base = with_complement(base, STACK_OFF + off["cc"][0])
        base = with_complement(base, STACK_OFF + 4 * ml + off["cc"][0])
        self.send("s2", 1, base)
        got = self.receive("s2", 3)
        exp_e = bytearray(base)
        exp_e[0:12] = bytes(Ether(src=sw_mac("s2", 3), dst=nbr_mac("s2", 3)))[0:12]
        exp_e[14 + 8] = 62                                   # TTL
        ip = IP(bytes(exp_e[14:]))
        del ip.chksum
        exp_e[14:34] = bytes(IP(bytes(ip)))[:20]             # IPv4 checksum
        exp_e[14 + 20 + 8 + 4] |= 0x04                       # E bit
        udp = Ether(bytes(exp_e))
        del udp[UDP].chksum                                   # recomputed in full
        exp_e = bytes(udp)
        self.assertTrue(udp_checksum_ok(exp_e))
        self.assert_frame(got, exp_e, (), "hop 2 with E set")

        # The sink restores the original checksum (undoing the E update).
        self.send("s3", 1, exp_e)
        self.assert_frame(self.receive("s3", 4),
                          f.packet(sw_mac("s3", 4), nbr_mac("s3", 4), ttl=61), (),
                          "packet to the host")
        self.receive("s3", 3)     # its report
        self.expect_nothing()


class IntSourceIsSink(IntBase):
    """Source and sink on one switch (both hosts on s1): the host gets the
    plain packet; the report holds a one-entry stack; sequence numbers count."""

    SWITCHES = ("s1",)

    def runTest(self):
        ins, ds = self.INS, self.DS
        ml = hop_words(ins, ds)
        off = hop_field_offsets(ins, ds)
        s1 = self.sw["s1"]
        self.watch("s1", ins, ds, max_hop=4)
        self.route("s1", DST, 32, 6)
        s1.insert("int_ingress.sink_ports", {"egress_port": 6}, "int_ingress.set_sink")
        self.clone_session("s1", REPORT_SESSION, [(7, 1)])
        s1.set_default("int_egress.report_config", "int_egress.set_collector",
                       {"src_mac": sw_mac("s3", 3), "dst_mac": COLLECTOR_MAC,
                        "src_addr": REPORT_SRC_IP, "collector_addr": COLLECTOR_IP,
                        "src_port": REPORT_SPORT, "collector_port": COLLECTOR_PORT})
        f = Flow(SRC, DST, sport=49160, qp=QP)
        for seq in range(2):
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP))
            self.assert_frame(self.receive("s1", 6),
                              f.packet(sw_mac("s1", 6), nbr_mac("s1", 6), ttl=63,
                                       dscp=ROCE_DSCP), (), "packet to the host")
            h = int_hop(ins, ds, node_id=101, in_port=1, out_port=6, qid=ROCE_QUEUE, qocc=0)
            inner = f.inner_from_ip(ttl=64, dscp=ROCE_DSCP, int_dscp=True,
                                    int_bytes=int_headers(ROCE_DSCP, ml, 3, ins, ds,
                                                          FS_DOMAIN, h))
            inner = inner[:20 + 8 + 16 + 4 * ml + 12]
            got = self.receive("s1", 7)
            self.assert_frame(got, self.report(101, seq, inner),
                              masks(REPORT_STACK_OFF, off, ["latency", "egress_ts", "tx_bytes"]),
                              "report %d" % seq)
            self.check_times(got, REPORT_STACK_OFF, off)
        self.expect_nothing()


class IntReportOnceAfterRepush(IntBase):
    """The controller's forced pipeline push (`foresight switch push`) deletes
    the report clone session first: BMv2 keeps clone sessions across a push
    while PI forgets them, so without that the session configured again
    after the push would send every report twice."""

    SWITCHES = ("s1",)

    def configure(self, add_session):
        s1 = self.sw["s1"]
        self.watch("s1", self.INS, self.DS, max_hop=4)
        self.route("s1", DST, 32, 6)
        s1.insert("int_ingress.sink_ports", {"egress_port": 6}, "int_ingress.set_sink")
        add_session("s1", REPORT_SESSION, [(7, 1)])
        s1.set_default("int_egress.report_config", "int_egress.set_collector",
                       {"src_mac": sw_mac("s1", 7), "dst_mac": COLLECTOR_MAC,
                        "src_addr": REPORT_SRC_IP, "collector_addr": COLLECTOR_IP,
                        "src_port": REPORT_SPORT, "collector_port": COLLECTOR_PORT})

    def runTest(self):
        self.configure(self.clone_session)
        out = self.foresight_push("s1")
        self.assertIn("1 clone session(s) deleted first", out)
        # The push reset the tables: configure again (the session is already
        # in self.clone_sessions for tearDown).
        s1 = self.sw["s1"]
        s1.set_default("int_egress.node_config", "int_egress.set_node_id", {"node_id": 101})
        s1.insert("qos.dscp_priority", {"dscp": ROCE_DSCP}, "qos.set_priority",
                  {"priority": ROCE_QUEUE})
        self.configure(lambda sw, session, replicas: s1.set_clone_session(session, replicas))

        f = Flow(SRC, DST, sport=49161, qp=QP)
        for _ in range(3):
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP))
            self.receive("s1", 6)
            self.receive("s1", 7)
            self.expect_nothing()


class IntDiscardBit(IntBase):
    """D bit: the sink reports the packet and drops it (DROP_INT_DISCARD)."""

    def runTest(self):
        ins, ds = self.INS, self.DS
        ml = hop_words(ins, ds)
        off = hop_field_offsets(ins, ds)
        self.path()
        f = Flow(SRC, DST, sport=49170, qp=QP)
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, latency=5, qid=3,
                     egress_ts=77, tx_bytes=100)
        self.send("s3", 1, f.packet(HOST_MAC, sw_mac("s3", 1), ttl=62, int_dscp=True,
                                    int_bytes=int_headers(0, ml, 4, ins, ds, FS_DOMAIN, h1,
                                                          d=1)))
        h3 = int_hop(ins, ds, node_id=103, in_port=1, out_port=4, qid=0, qocc=0)
        inner = f.inner_from_ip(ttl=62, int_dscp=True,
                                int_bytes=int_headers(0, ml, 3, ins, ds, FS_DOMAIN, h3 + h1,
                                                      d=1))
        inner = inner[:20 + 8 + 16 + 2 * 4 * ml + 12]
        self.assert_frame(self.receive("s3", 3), self.report(103, 0, inner),
                          masks(REPORT_STACK_OFF, off, ["latency", "egress_ts", "tx_bytes"]),
                          "report")
        self.expect_nothing()
        got = self.wait_counter(lambda: self.drop_count("s3", DROP["INT_DISCARD"]), 1)
        self.assertEqual(got, 1)


class IntReportSampling(IntBase):
    """Report sampling 1 in N per flow (`int_ingress.report_sampling`): every
    packet still reaches the host, and the sink reports exactly each flow's
    Nth, 2Nth, ... packet, counted per flow however the flows interleave;
    N = 1 reports every packet again."""

    SWITCHES = ("s1",)
    EVERY = 4

    def qp_of_report(self, frame):
        """(sequence number, destination QP of the reported packet)."""
        seq = int.from_bytes(frame[42:46], "big") & 0x3fffff
        bth = REPORT_STACK_OFF + 4 * hop_words(self.INS, self.DS)
        return seq, int.from_bytes(frame[bth + 5:bth + 8], "big")

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", DST, 32, 6)
        s1.insert("int_ingress.watchlist",
                  {"src_addr": (SRC, 0xffffffff), "dst_addr": (DST, 0xffffffff)},
                  "int_ingress.int_source",
                  {"max_hop": 4, "instruction_bitmap": self.INS, "ds_instruction": self.DS},
                  priority=10)
        s1.insert("int_ingress.sink_ports", {"egress_port": 6}, "int_ingress.set_sink")
        self.clone_session("s1", REPORT_SESSION, [(7, 1)])
        s1.set_default("int_egress.report_config", "int_egress.set_collector",
                       {"src_mac": sw_mac("s1", 7), "dst_mac": COLLECTOR_MAC,
                        "src_addr": REPORT_SRC_IP, "collector_addr": COLLECTOR_IP,
                        "src_port": REPORT_SPORT, "collector_port": COLLECTOR_PORT})
        s1.set_default("int_ingress.report_sampling", "int_ingress.set_report_every",
                       {"every": self.EVERY})
        flows = {"a": Flow(SRC, DST, sport=49180, qp=0x0000a1),
                 "b": Flow(SRC, DST, sport=49181, qp=0x0000b2)}
        order = "aabababbaaabbaaabaab" * 2         # 24 of a, 16 of b, interleaved
        sent = {"a": 0, "b": 0}
        expected = []
        for name in order:
            f = flows[name]
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP))
            self.assert_frame(self.receive("s1", 6),
                              f.packet(sw_mac("s1", 6), nbr_mac("s1", 6), ttl=63, dscp=ROCE_DSCP),
                              (), "packet %d of flow %s to the host" % (sent[name] + 1, name))
            sent[name] += 1
            if sent[name] % self.EVERY == 0:
                got = self.qp_of_report(self.receive("s1", 7))
                expected.append(got)
                self.assertEqual(got, (len(expected) - 1, f.qp),
                                 "report after packet %d of flow %s" % (sent[name], name))
            self.expect_nothing(timeout=0.05)
        self.assertEqual(len(expected), (24 + 16) // self.EVERY)

        # Back to every packet.
        s1.set_default("int_ingress.report_sampling", "int_ingress.set_report_every",
                       {"every": 1})
        for i in range(3):
            self.send("s1", 1, flows["b"].packet(HOST_MAC, sw_mac("s1", 1), ttl=64,
                                                 dscp=ROCE_DSCP))
            self.receive("s1", 6)
            self.assertEqual(self.qp_of_report(self.receive("s1", 7)),
                             (len(expected) + i, flows["b"].qp))
        self.expect_nothing()


class IntMtu(IntBase):
    """INT v2.1 5.3 with `int_egress.port_mtu` (IPv4 total length + MPLS
    labels): a transit hop whose metadata would exceed its egress port's MTU
    pushes nothing, keeps Remaining Hop Count and sets M; with one byte more
    of MTU it pushes. A source whose INT headers alone would not fit leaves
    the packet without INT; the sink strips a packet with M set as usual."""

    def mtu(self, sw, port, mtu):
        self.sw[sw].insert("int_egress.port_mtu", {"egress_port": port},
                           "int_egress.set_port_mtu", {"mtu": mtu})

    def runTest(self):
        ins, ds = self.INS, self.DS
        ml = hop_words(ins, ds)
        self.path()
        f = Flow(SRC, DST, sport=49190, qp=QP)
        h1 = int_hop(ins, ds, node_id=101, in_port=1, out_port=2, latency=5, qid=3,
                     egress_ts=77, tx_bytes=100)
        arriving = f.packet(HOST_MAC, sw_mac("s2", 1), ttl=63, int_dscp=True,
                            int_bytes=int_headers(0, ml, 7, ins, ds, FS_DOMAIN, h1))
        ip_len = len(bytes(arriving)) - 14
        # One byte short of room for s2's metadata: M, nothing pushed, RHC kept.
        self.mtu("s2", 3, ip_len + 4 * ml - 1)
        self.send("s2", 1, arriving)
        self.expect("s2", 3, f.packet(sw_mac("s2", 3), nbr_mac("s2", 3), ttl=62, int_dscp=True,
                                      int_bytes=int_headers(0, ml, 7, ins, ds, FS_DOMAIN, h1,
                                                            m=1)))
        self.expect_nothing()

        # Exactly enough room: s2 pushes its entry (M stays clear).
        self.sw["s2"].modify("int_egress.port_mtu", {"egress_port": 3},
                             "int_egress.set_port_mtu", {"mtu": ip_len + 4 * ml})
        self.send("s2", 1, arriving)
        got = self.receive("s2", 3)
        self.assertEqual(len(got) - 14, ip_len + 4 * ml, "s2 pushed its %d words" % ml)
        md = got[14 + 20 + 8 + 4:]
        self.assertEqual((md[0] >> 1) & 1, 0, "M bit clear")
        self.assertEqual(md[3], 6, "Remaining Hop Count decremented")
        self.expect_nothing()

        # The sink strips a packet that carries M and reports it.
        self.send("s3", 1, f.packet(HOST_MAC, sw_mac("s3", 1), ttl=62, int_dscp=True,
                                    int_bytes=int_headers(0, ml, 7, ins, ds, FS_DOMAIN, h1,
                                                          m=1)))
        self.expect("s3", 4, f.packet(sw_mac("s3", 4), nbr_mac("s3", 4), ttl=61))
        self.receive("s3", 3)
        self.expect_nothing()

        # Source: 15 bytes of room cannot take the 16-byte INT headers, so
        # the packet leaves s1 without INT; 16 bytes take the headers, and
        # the source's own entry then sets M.
        self.watch("s1", ins, ds)
        plain = f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP)
        plain_len = len(bytes(plain)) - 14
        self.mtu("s1", 2, plain_len + 15)
        self.send("s1", 1, plain)
        self.expect("s1", 2, f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63,
                                      dscp=ROCE_DSCP))
        self.expect_nothing()
        self.sw["s1"].modify("int_egress.port_mtu", {"egress_port": 2},
                             "int_egress.set_port_mtu", {"mtu": plain_len + 16})
        self.send("s1", 1, plain)
        self.expect("s1", 2, f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63,
                                      dscp=ROCE_DSCP, int_dscp=True,
                                      int_bytes=int_headers(ROCE_DSCP, ml, 8, ins, ds,
                                                            FS_DOMAIN, m=1)))
        self.expect_nothing()


class TcpIsCountedNotInstrumented(IntBase):
    """A host-pair watch entry (any port, any QP: how the controller watches a
    job it learns, T+5) counts the pair's TCP packets in its direct counter
    and forwards them unchanged, since INT rides on UDP only; the pair's
    RoCEv2 packets still get INT."""

    def runTest(self):
        ins, ds = self.INS, self.DS
        entry = self.sw["s1"].insert(
            "int_ingress.watchlist",
            {"src_addr": (SRC, 0xffffffff), "dst_addr": (DST, 0xffffffff)},
            "int_ingress.int_source",
            {"max_hop": 8, "instruction_bitmap": ins, "ds_instruction": ds},
            priority=50)
        self.path()
        tcp = Flow(SRC, DST, sport=40000, dport=5000, payload=b"gloo" * 16, proto="tcp")
        for _ in range(2):
            self.send("s1", 1, tcp.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP))
            self.expect("s1", 2, tcp.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63, dscp=ROCE_DSCP))
        self.expect_nothing()
        read = self.sw["s1"].read_direct_counter
        self.assertEqual(self.wait_counter(lambda: read(entry)[0], 2), 2)

        # The same pair's RoCEv2 still gets INT at the source.
        roce = Flow(SRC, DST, sport=49152, qp=QP, payload=bytes(range(64)))
        self.send("s1", 1, roce.packet(HOST_MAC, sw_mac("s1", 1), ttl=64, dscp=ROCE_DSCP))
        got = self.receive("s1", 2)
        self.assertTrue((got[14 + 1] >> 2) & INT_DSCP_BIT, "INT's DSCP bit is set")
        self.assertGreater(len(got), len(bytes(roce.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63,
                                                               dscp=ROCE_DSCP))),
                           "the RoCEv2 packet grew by its INT headers")
        self.assertEqual(self.wait_counter(lambda: read(entry)[0], 3), 3)
