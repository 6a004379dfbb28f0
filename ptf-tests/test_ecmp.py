"""ECMP through the P4Runtime action selector, with QP-aware hashing,
per-switch hash seeds and hash offsets.

Hash convention (p4src/v1model/routing.p4): crc32 over the switch's seed
(table routing.hash_seed, 4 bytes, default 0) then src, dst, UDP source port
and BTH destination QP for RoCEv2; seed then src, dst, protocol and L4 ports
otherwise. The selector takes that CRC rotated right by the switch's hash
offset (table routing.hash_offset, default 0) and BMv2 picks member
(value mod n) of the group, members in creation order. Each packet's egress
port is predicted here with zlib.crc32, and in
EcmpSeedsMatchTheRustEmulation by the controller's own emulation.
"""

import json
import logging
import os

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import (DEFAULT_HASH_SEED, FS_DOMAIN, DS_TX_BYTES, FS_INSTRUCTIONS, Flow,
                        crc32_5tuple, crc32_roce, int_headers, int_hop, rotr32, switch_seed)

MEMBER_PORTS = [2, 3, 4, 5]


class EcmpBase(FsTest):
    def ecmp_group(self, prefix, plen, sw="s1", ports=MEMBER_PORTS, group_id=1):
        """A group of one member per port (member id 10 + port, created in
        port order unless it exists already) routing prefix/plen."""
        s = self.sw[sw]
        # Members this test created, per switch (PI answers a second insert
        # of the same member with UNKNOWN, not ALREADY_EXISTS).
        created = self.__dict__.setdefault("_ecmp_members", {}).setdefault(sw, set())
        ids = []
        for port in ports:
            if 10 + port not in created:
                s.add_member("routing.ecmp_selector", 10 + port, "routing.set_nexthop",
                             {"port": port, "src_mac": sw_mac(sw, port),
                              "dst_mac": nbr_mac(sw, port)})
                created.add(10 + port)
            ids.append(10 + port)
        s.add_group("routing.ecmp_selector", group_id, ids)
        s.insert("routing.ipv4_lpm", {"dst_addr": (prefix, plen)}, group_id=group_id)

    def set_seed(self, sw, seed):
        self.sw[sw].set_default("routing.hash_seed", "routing.set_hash_seed", {"seed": seed})

    def set_offset(self, sw, offset):
        self.sw[sw].set_default("routing.hash_offset", "routing.set_hash_offset",
                                {"offset": offset})


class EcmpSpreadsQps(EcmpBase):
    """256 RoCEv2 flows that differ only in the destination QP spread over a
    4-member group of a switch left with the default seed (0): every packet
    leaves on the member the hash predicts, and
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
                h = crc32_roce(DEFAULT_HASH_SEED, "10.1.0.1", "10.2.0.1", 49152, qp)
                port = MEMBER_PORTS[h % 4]
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
    """TCP and non-RoCE UDP hash on the seed and the 5-tuple (source port
    varies)."""

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        seed = switch_seed("s1")
        self.set_seed("s1", seed)
        seen = set()
        for i in range(64):
            sport = 20000 + 7 * i
            for proto, dport in (("tcp", 443), ("udp", 9000)):
                f = Flow("10.1.0.9", "10.2.3.4", sport=sport, dport=dport, proto=proto)
                h = crc32_5tuple(seed, "10.1.0.9", "10.2.3.4", 6 if proto == "tcp" else 17,
                                 sport, dport)
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
        seed = 0x5EED0001
        self.set_seed("s1", seed)
        upstream = int_hop(FS_INSTRUCTIONS, DS_TX_BYTES, node_id=7, in_port=1, out_port=9,
                           latency=3, qid=3, egress_ts=123456, tx_bytes=4242)
        for qp in range(0x5000, 0x5040):
            f = Flow("10.1.0.1", "10.2.0.1", sport=49200, qp=qp)
            port = MEMBER_PORTS[crc32_roce(seed, "10.1.0.1", "10.2.0.1", 49200, qp) % 4]
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
    seed and the 5-tuple: 64 QPs of one connection (same ports) all take the
    one member crc32_5tuple predicts; back in the QP-aware default they
    spread again."""

    def runTest(self):
        self.ecmp_group("10.2.0.0", 16)
        s = self.sw["s1"]
        seed = switch_seed("leaf1")
        self.set_seed("s1", seed)
        s.set_default("routing.hash_mode", "routing.hash_five_tuple")
        h = crc32_5tuple(seed, "10.1.0.1", "10.2.0.1", 17, 49300, 4791)
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
            p = MEMBER_PORTS[crc32_roce(seed, "10.1.0.1", "10.2.0.1", 49300, qp) % 4]
            seen.add(p)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
            self.expect("s1", p, f.packet(sw_mac("s1", p), nbr_mac("s1", p), ttl=63))
        self.assertEqual(seen, set(MEMBER_PORTS))
        self.expect_nothing()


# Where the vectors' groups live on each switch: 10.2.0.0/16 has 4 members,
# 10.3.0.0/16 has 3; packets come in on the switch's port 1 (a member may be
# the ingress port: BMv2 sends it back out there).
SEED_GROUPS = {
    "s1": {4: [2, 3, 4, 5], 3: [6, 7, 8]},
    "s2": {4: [1, 2, 3, 4], 3: [2, 3, 4]},
}


class EcmpSeedsMatchTheRustEmulation(EcmpBase):
    """The controller's emulation of the hash (planner::ecmp, which the
    planner and the simulator use) picks the member BMv2 picks, on two
    switches with different seeds and hash offsets: ptf-tests/ecmp_vectors.json
    is the emulation's output for 96 packets (RoCEv2 in both hash modes, TCP,
    UDP) and groups of 4 and 3 (`cargo run -p planner --example
    ecmp_vectors`; a Rust test keeps the file equal to the emulation). The
    seeds are the controller's per-switch ones, CRC-32 of the switch name,
    and the offsets its tier offsets (s1 hashes as a spine, 10 bits; s2 as
    a super-spine, 20); every prediction also equals zlib's CRC rotated."""

    SWITCHES = ("s1", "s2")

    def runTest(self):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ecmp_vectors.json")
        with open(path) as f:
            vectors = json.load(f)
        switches = vectors["switches"]
        self.assertEqual(sorted(switches), list(self.SWITCHES))
        seeds = {sw: v["seed"] for sw, v in switches.items()}
        offsets = {sw: v["offset"] for sw, v in switches.items()}
        self.assertNotEqual(seeds["s1"], seeds["s2"])
        self.assertNotEqual(offsets["s1"], offsets["s2"])
        for sw, seed in seeds.items():
            self.assertEqual(seed, switch_seed(sw), "%s: seed is not crc32 of its name" % sw)
            self.set_seed(sw, seed)
            self.set_offset(sw, offsets[sw])
            self.ecmp_group("10.2.0.0", 16, sw, SEED_GROUPS[sw][4], group_id=1)
            self.ecmp_group("10.3.0.0", 16, sw, SEED_GROUPS[sw][3], group_id=2)
        mode = {sw: "qp-aware" for sw in self.SWITCHES}
        differ = 0
        for v in vectors["flows"]:
            proto = {6: "tcp", 17: "udp"}[v["protocol"]]
            roce = proto == "udp" and v["dport"] == 4791
            flow = Flow(v["src"], v["dst"], sport=v["sport"], dport=v["dport"],
                        qp=v["qp"] if roce else None, proto=proto)
            for sw in self.SWITCHES:
                if mode[sw] != v["hash_mode"]:
                    action = {"qp-aware": "routing.hash_qp_aware",
                              "five-tuple": "routing.hash_five_tuple"}[v["hash_mode"]]
                    self.sw[sw].set_default("routing.hash_mode", action)
                    mode[sw] = v["hash_mode"]
                member = v["member"][sw]
                if roce and v["hash_mode"] == "qp-aware":
                    h = crc32_roce(seeds[sw], v["src"], v["dst"], v["sport"], v["qp"])
                else:
                    h = crc32_5tuple(seeds[sw], v["src"], v["dst"], v["protocol"], v["sport"],
                                     v["dport"])
                self.assertEqual(member, rotr32(h, offsets[sw]) % v["group_size"],
                                 "%s: emulation vs zlib: %s" % (sw, v))
                port = SEED_GROUPS[sw][v["group_size"]][member]
                self.send(sw, 1, flow.packet(HOST_MAC, sw_mac(sw, 1), ttl=64))
                self.expect(sw, port, flow.packet(sw_mac(sw, port), nbr_mac(sw, port), ttl=63))
            differ += v["member"]["s1"] != v["member"]["s2"]
        print("\n  %d packets; s1 and s2 chose different members for %d" % (
            len(vectors["flows"]), differ))
        self.assertGreater(differ, len(vectors["flows"]) // 2)
        self.expect_nothing()


class EcmpTierOffsetsDecideIndependently(EcmpBase):
    """Two tiers in a row, s1 (a leaf, offset 0) then s2 (a spine), each
    with its own seed and a 4-member group toward 10.2.0.0/16; 128 RoCEv2
    flows (random QPs) cross both, every packet on the member the rotated
    CRC predicts at each hop. With seeds alone (s2 offset 0) CRC's
    affinity makes s2's choice a function of s1's: all flows that left s1
    on one member leave s2 on one member. With s2 at the spine offset (10
    bits), s2 reads other bits of the hash: the flows of every s1 member
    spread over all 4 of s2's (about 32 flows per s1 member; a member of
    s2 unused by them has probability 4 (3/4)^32 < 5e-4 under independent
    choices, and the inputs are fixed, so the test is deterministic)."""

    SWITCHES = ("s1", "s2")
    FLOWS = 128

    def runTest(self):
        import random
        rng = random.Random(2024)
        seeds = {sw: switch_seed(sw) for sw in self.SWITCHES}
        for sw in self.SWITCHES:
            self.set_seed(sw, seeds[sw])
            self.ecmp_group("10.2.0.0", 16, sw, SEED_GROUPS[sw][4], group_id=1)
        qps = rng.sample(range(1, 1 << 24), self.FLOWS)
        for label, s2_offset, independent in (("seeds only", 0, False), ("offsets", 10, True)):
            self.set_offset("s2", s2_offset)
            below = {}
            for qp in qps:
                f = Flow("10.1.0.1", "10.2.0.1", sport=49152 + qp % 16384, qp=qp)
                h = {sw: crc32_roce(seeds[sw], "10.1.0.1", "10.2.0.1", 49152 + qp % 16384, qp)
                     for sw in self.SWITCHES}
                p1 = SEED_GROUPS["s1"][4][h["s1"] % 4]
                p2 = SEED_GROUPS["s2"][4][rotr32(h["s2"], s2_offset) % 4]
                self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
                self.expect("s1", p1, f.packet(sw_mac("s1", p1), nbr_mac("s1", p1), ttl=63))
                self.send("s2", 1, f.packet(nbr_mac("s1", p1), sw_mac("s2", 1), ttl=63))
                self.expect("s2", p2, f.packet(sw_mac("s2", p2), nbr_mac("s2", p2), ttl=62))
                below.setdefault(p1, set()).add(p2)
            print("\n  %s: s2 members used per s1 member: %s" % (
                label, {p: sorted(v) for p, v in sorted(below.items())}))
            self.assertEqual(len(below), 4, label)
            want = 4 if independent else 1
            for p1, used in below.items():
                self.assertEqual(len(used), want, "%s: s1 member %d -> s2 %s" % (label, p1, used))
        self.expect_nothing()
