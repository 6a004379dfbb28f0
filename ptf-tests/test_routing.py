"""IPv4 routing: LPM to a next hop, MAC rewrite, TTL decrement and expiry,
drop on a missing route, port counters."""

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import DROP, Flow


class LpmLongestPrefixWins(FsTest):
    """The longest matching prefix chooses the next hop; MACs rewritten, TTL - 1."""

    def runTest(self):
        self.route("s1", "10.0.0.0", 8, 2)
        self.route("s1", "10.1.0.0", 16, 3)
        self.route("s1", "10.1.2.3", 32, 4)
        for dst, port in (("10.9.9.9", 2), ("10.1.9.9", 3), ("10.1.2.3", 4)):
            f = Flow("10.200.0.1", dst, sport=5000, dport=6000, udp_checksum=1)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
            self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63))
        tcp = Flow("10.200.0.1", "10.1.2.3", sport=33000, dport=80, proto="tcp")
        self.send("s1", 1, tcp.packet(HOST_MAC, sw_mac("s1", 1), ttl=9))
        self.expect("s1", 4, tcp.packet(sw_mac("s1", 4), nbr_mac("s1", 4), ttl=8))
        self.expect_nothing()


class NoRouteIsDropped(FsTest):
    """A destination without a route is dropped and counted (DROP_NO_ROUTE)."""

    def runTest(self):
        self.route("s1", "10.0.0.0", 8, 2)
        f = Flow("10.200.0.1", "192.168.1.1", sport=5000, dport=6000)
        self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1)))
        self.expect_nothing()
        got = self.wait_counter(lambda: self.drop_count("s1", DROP["NO_ROUTE"]), 1)
        self.assertEqual(got, 1)


class TtlDecrementAndExpiry(FsTest):
    """TTL 2 leaves with 1; TTL 1 and 0 are dropped (DROP_TTL_EXPIRED);
    the port counters see every packet in and only the forwarded one out."""

    def runTest(self):
        self.route("s1", "10.2.0.0", 16, 2)
        f = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x42)
        self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=2))
        self.expect("s1", 2, f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=1))
        for ttl in (1, 0):
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=ttl))
        self.expect_nothing()
        s = self.sw["s1"]
        got = self.wait_counter(lambda: self.drop_count("s1", DROP["TTL_EXPIRED"]), 2)
        self.assertEqual(got, 2)
        self.assertEqual(s.read_counter("FsIngress.counters.port_drops",
                                        1 * 32 + DROP["TTL_EXPIRED"])[0], 2)
        self.assertEqual(s.read_counter("FsIngress.counters.rx_port", 1)[0], 3)
        self.assertEqual(s.read_counter("FsEgress.counters.tx_port", 2)[0], 1)


class PipelineUpdateKeepsEntries(FsTest):
    """`foresight switch push --keep-entries` pushes the pipeline and puts
    back what the switch held (routes, ECMP members, defaults, clone
    sessions), so the switch goes on forwarding; counters start from zero.
    A plain push starts from empty tables: the same packet is then dropped
    for want of a route."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.set_default("int_egress.node_config", "int_egress.set_node_id", {"node_id": 77})
        f = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x43)
        sent = f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64)
        forwarded = f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63)
        self.send("s1", 1, sent)
        self.expect("s1", 2, forwarded)
        before = s1.read_entries("routing.ipv4_lpm")
        node_id = s1.read_default("int_egress.node_config")

        out = self.foresight_push("s1", "--keep-entries")
        self.assertIn("put back 1 table entries", out)
        self.assertIn("1 ECMP members, 0 groups", out)
        self.assertEqual(s1.read_entries("routing.ipv4_lpm"), before)
        self.assertEqual(s1.read_default("int_egress.node_config"), node_id)
        self.send("s1", 1, sent)
        self.expect("s1", 2, forwarded)
        self.assertEqual(s1.read_counter("FsEgress.counters.tx_port", 2)[0], 1)

        self.foresight_push("s1")
        self.send("s1", 1, sent)
        self.expect_nothing()
