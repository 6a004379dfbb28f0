"""ECMP through the P4Runtime action selector, with QP-aware hashing.

Hash convention (p4src/include/routing.p4): crc32 over src, dst, UDP source
port and BTH destination QP for RoCEv2; over src, dst, protocol and L4 ports
otherwise. BMv2 picks member (hash mod n) of the group, members in creation
order. Each packet's egress port is predicted here with zlib.crc32.
"""

import logging

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import (FS_DOMAIN, DS_TX_BYTES, FS_INSTRUCTIONS, Flow, crc32_5tuple,
                        crc32_roce, int_headers, int_hop)

MEMBER_PORTS = [2, 3, 4, 5]


class EcmpBase(FsTest):
    def ecmp_group(self, prefix, plen):
        s = self.sw["s1"]
        ids = []
        for i, port in enumerate(MEMBER_PORTS):
            s.add_member("routing.ecmp_selector", 10 + i, "routing.set_nexthop",
                         {"port": port, "src_mac": sw_mac("s1", port),
                          "dst_mac": nbr_mac("s1", port)})
            ids.append(10 + i)
        s.add_group("routing.ecmp_selector", 1, ids)
        s.insert("routing.ipv4_lpm", {"dst_addr": (prefix, plen)}, group_id=1)


class EcmpSpreadsQps(EcmpBase):
    """256 RoCEv2 flows that differ only in the destination QP spread over a
    4-member group: every packet leaves on the member the hash predicts, and
    each member carries 64 +- 28 of them. Two sets: the consecutive QPs a NIC
    allocates (0x100-0x1ff) and 256 pseudo-random 24-bit QPs (seed 4791).

    Bound: under a uniform hash each member's count is Binomial(256, 1/4),
    mean 64, sd 6.9; +-28 is 4 sd, so a fair hash leaves the band with
    probability < 2.5e-4 for any of the 4 members (union bound). Inputs and
    crc32 are fixed, so the test is deterministic; without the QP in the
    hash all 256 flows would share one member (count 256). (CRC is linear:
    a block of 256 QPs that differ only in their low byte spreads exactly
    64/64/64/64 over 4 members.)"""

    def runTest(self):
        import random
        self.ecmp_group("10.2.0.0", 16)
        rng = random.Random(4791)
        qp_sets = {"consecutive": list(range(0x000100, 0x000200)),
                   "random": rng.sample(range(1, 1 << 24), 256)}
        total = {p: 0 for p in MEMBER_PORTS}
        for label, qps in qp_sets.items():
            counts = {p: 0 for p in MEMBER_PORTS}
            for qp in qps:
                f = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=qp)
                port = MEMBER_PORTS[crc32_roce("10.1.0.1", "10.2.0.1", 49152, qp) % 4]
                self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
                self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port),
                                                 ttl=63))
                counts[port] += 1
                total[port] += 1
            logging.info("ECMP spread of %s QPs over ports %s: %s", label, MEMBER_PORTS, counts)
            print("\n  %s QPs over members (port: flows): %s" % (label, counts))
            for port, n in counts.items():
                self.assertTrue(36 <= n <= 92, "%s QPs: member port %d got %d of 256 flows" % (
                    label, port, n))
        self.expect_nothing()
        tx = [self.sw["s1"].read_counter("FsEgress.counters.tx_port", p)[0]
              for p in MEMBER_PORTS]
        self.assertEqual(tx, [total[p] for p in MEMBER_PORTS])


class EcmpFiveTupleForOtherTraffic(EcmpBase):
    """TCP and non-RoCE UDP hash on the 5-tuple (source port varies)."""

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        seen = set()
        for i in range(64):
            sport = 20000 + 7 * i
            for proto, dport in (("tcp", 443), ("udp", 9000)):
                f = Flow("10.1.0.9", "10.2.3.4", sport=sport, dport=dport, proto=proto)
                h = crc32_5tuple("10.1.0.9", "10.2.3.4", 6 if proto == "tcp" else 17, sport, dport)
                port = MEMBER_PORTS[h % 4]
                seen.add(port)
                self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
                self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63))
        self.assertEqual(seen, set(MEMBER_PORTS))
        self.expect_nothing()


class EcmpIntPacketHashesLikeFlow(EcmpBase):
    """A packet carrying INT (DSCP-signalled, stack before the BTH) takes the
    same member as the same flow without INT, for 64 QPs."""

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        upstream = int_hop(FS_INSTRUCTIONS, DS_TX_BYTES, node_id=7, in_port=1, out_port=9,
                           latency=3, qid=3, egress_ts=123456, tx_bytes=4242)
        for qp in range(0x5000, 0x5040):
            f = Flow("10.1.0.1", "10.2.0.1", sport=49200, qp=qp)
            port = MEMBER_PORTS[crc32_roce("10.1.0.1", "10.2.0.1", 49200, qp) % 4]
            # Remaining hop count 0: this switch sets E and pushes nothing,
            # so the expected packet is exact.
            int_in = int_headers(orig_dscp=24, hop_ml=7, rhc=0, ins=FS_INSTRUCTIONS,
                                 ds=DS_TX_BYTES, domain=FS_DOMAIN, stack=upstream)
            int_out = int_headers(orig_dscp=24, hop_ml=7, rhc=0, ins=FS_INSTRUCTIONS,
                                  ds=DS_TX_BYTES, domain=FS_DOMAIN, stack=upstream, e=1)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), dscp=24))
            self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63,
                                             dscp=24))
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), dscp=24, int_dscp=True,
                                        int_bytes=int_in))
            self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63,
                                             dscp=24, int_dscp=True, int_bytes=int_out))
        self.expect_nothing()


class EcmpFiveTupleModeIgnoresQp(EcmpBase):
    """With routing.hash_mode set to hash_five_tuple, RoCEv2 hashes on the
    5-tuple: 64 QPs of one connection (same ports) all take the one member
    crc32_5tuple predicts; back in the QP-aware default they spread again."""

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        s = self.sw["s1"]
        s.set_default("routing.hash_mode", "routing.hash_five_tuple")
        h = crc32_5tuple("10.1.0.1", "10.2.0.1", 17, 49300, 4791)
        port = MEMBER_PORTS[h % 4]
        qps = range(0x7000, 0x7040)
        for qp in qps:
            f = Flow("10.1.0.1", "10.2.0.1", sport=49300, qp=qp)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
            self.expect("s1", port, f.packet(sw_mac("s1", port), nbr_mac("s1", port), ttl=63))
        s.set_default("routing.hash_mode", "routing.hash_qp_aware")
        seen = set()
        for qp in qps:
            f = Flow("10.1.0.1", "10.2.0.1", sport=49300, qp=qp)
            p = MEMBER_PORTS[crc32_roce("10.1.0.1", "10.2.0.1", 49300, qp) % 4]
            seen.add(p)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
            self.expect("s1", p, f.packet(sw_mac("s1", p), nbr_mac("s1", p), ttl=63))
        self.assertEqual(seen, set(MEMBER_PORTS))
        self.expect_nothing()
