"""Policing of reserved flows: a reservation entry's direct meter holds the
flow to its grant. Packets within it keep the reservation's traffic class;
packets beyond it (the meter's colour is not green) still follow the pinned
labels, but every label carries the lowest queue (0), and
FsIngress.sr.demoted counts them per ingress port.

The meter runs at a few kB/s with a burst of about three packets, so the
refill during a test (milliseconds) is a few bytes: which packets are green
does not depend on timing."""

from fs_common import FsTest, HOST_MAC, sw_mac
from fs_packets import INS_NODE_ID, INS_QUEUE, Flow
from scapy.contrib.mpls import MPLS
from scapy.layers.l2 import Ether

SRC, DST, QP = "10.1.0.1", "10.2.0.1", 0x000777
INS = INS_NODE_ID | INS_QUEUE
# Ethernet, one MPLS label, IPv4, UDP, BTH, INT shim + MD header: the INT
# stack's first word (node id), then queue id + occupancy.
QID_OFF = 14 + 4 + 20 + 8 + 4 + 12 + 4
PAYLOAD = b"\x22" * 1000
RESERVED_TC, DEMOTED_TC = 5, 0


class PolicingBase(FsTest):
    def reserve(self, meter):
        s1 = self.sw["s1"]
        s1.insert("int_ingress.watchlist", {"src_addr": (SRC, 0xffffffff)},
                  "int_ingress.int_source",
                  {"max_hop": 4, "instruction_bitmap": INS, "ds_instruction": 0},
                  priority=1)
        self.adjacency("s1", 2)
        return s1.insert("sr.reservation",
                         {"src_addr": (SRC, 0xffffffff), "dst_addr": (DST, 0xffffffff),
                          "dst_qp": (QP, 0xffffff)},
                         "sr.push_2", {"tc": RESERVED_TC, "label0": 1002, "label1": 1099},
                         priority=10, meter=meter)

    def burst(self, count, first_id):
        """Send `count` packets of the reserved flow; (ip id, label TC, s1's
        queue) of each, in departure order."""
        for i in range(count):
            f = Flow(SRC, DST, sport=49152, qp=QP, payload=PAYLOAD, ip_id=first_id + i)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), dscp=24))
        out = []
        for _ in range(count):
            frame = self.receive("s1", 2)
            pkt = Ether(frame)
            self.assertEqual(pkt.type, 0x8847, "a reserved packet left without its label")
            out.append((pkt["IP"].id, pkt[MPLS].label, pkt[MPLS].cos, frame[QID_OFF]))
        return out


class ExcessIsDemoted(PolicingBase):
    """Grant 2,000 B/s, burst 3,000 B: of 8 packets of 1,058 B sent at once,
    the first 2 keep class 5 and the other 6 leave on the same label in
    queue 0; raising the grant (a MODIFY of the entry's meter) lets the next
    ones through at class 5; the switch reads the grant back as written."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.reserve(meter=(2000, 3000, 2000, 3000))
        first = self.burst(8, 10)
        print("\n  (ip id, label, tc, queue):", first)
        self.assertEqual([p[0] for p in first], list(range(10, 18)), "reordered")
        self.assertTrue(all(p[1] == 1099 for p in first), "left the pinned path")
        self.assertEqual([p[2] for p in first], [RESERVED_TC] * 2 + [DEMOTED_TC] * 6)
        self.assertEqual([p[3] for p in first], [RESERVED_TC] * 2 + [DEMOTED_TC] * 6)
        packets, octets = s1.read_counter("FsIngress.sr.demoted", 1)
        self.assertEqual(packets, 6)
        self.assertEqual(octets, 6 * (14 + 20 + 8 + 12 + len(PAYLOAD) + 4))
        self.assertEqual(s1.read_counter("FsIngress.sr.demoted", 2), (0, 0))

        granted = (10_000_000, 1_000_000, 10_000_000, 1_000_000)
        s1.modify("sr.reservation",
                  {"src_addr": (SRC, 0xffffffff), "dst_addr": (DST, 0xffffffff),
                   "dst_qp": (QP, 0xffffff)},
                  "sr.push_2", {"tc": RESERVED_TC, "label0": 1002, "label1": 1099},
                  priority=10, meter=granted)
        after = self.burst(4, 30)
        self.assertEqual([p[2] for p in after], [RESERVED_TC] * 4, after)
        self.assertEqual(s1.read_counter("FsIngress.sr.demoted", 1)[0], 6)

        [entry] = s1.read_entries("sr.reservation", with_meter=True)
        cfg = entry.meter_config
        self.assertEqual((cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), granted)
        self.expect_nothing()


class UnmeteredEntryIsNotPoliced(PolicingBase):
    """An entry written without a meter configuration keeps its class
    whatever the flow sends (BMv2 colours an unconfigured meter green), and
    reads back without one."""

    def runTest(self):
        s1 = self.sw["s1"]
        self.reserve(meter=None)
        out = self.burst(8, 50)
        self.assertEqual([p[2] for p in out], [RESERVED_TC] * 8, out)
        self.assertEqual(s1.read_counter("FsIngress.sr.demoted", 1), (0, 0))
        [entry] = s1.read_entries("sr.reservation", with_meter=True)
        self.assertFalse(entry.HasField("meter_config"))
        self.expect_nothing()


class RecycledHandleKeepsItsMeter(PolicingBase):
    """Why the controller writes a meter nothing reaches on an unpoliced
    entry rather than none (installer::policing::UNLIMITED): BMv2 reuses a
    deleted entry's handle with its meter configuration, so an entry
    inserted without one is policed at the earlier entry's grant and reads
    back with it. With the unlimited configuration it is not policed."""

    MATCH = {"src_addr": (SRC, 0xffffffff), "dst_addr": (DST, 0xffffffff),
             "dst_qp": (QP, 0xffffff)}
    PUSH = {"tc": RESERVED_TC, "label0": 1002, "label1": 1099}
    UNLIMITED = (10 ** 12, 2 ** 32 - 2, 10 ** 12, 2 ** 32 - 2)

    def runTest(self):
        s1 = self.sw["s1"]
        entry = self.reserve(meter=(2000, 3000, 2000, 3000))
        self.burst(4, 70)
        s1.delete(entry)
        entry = s1.insert("sr.reservation", self.MATCH, "sr.push_2", self.PUSH, priority=10)
        out = self.burst(8, 80)
        [read] = s1.read_entries("sr.reservation", with_meter=True)
        print("\n  inserted without a meter:", [p[2] for p in out], "reads back cir",
              read.meter_config.cir)
        self.assertEqual(read.meter_config.cir, 2000, "BMv2 no longer recycles meters?")
        self.assertIn(DEMOTED_TC, [p[2] for p in out])

        s1.delete(entry)
        s1.insert("sr.reservation", self.MATCH, "sr.push_2", self.PUSH, priority=10,
                  meter=self.UNLIMITED)
        out = self.burst(8, 90)
        self.assertEqual([p[2] for p in out], [RESERVED_TC] * 8, out)
        [read] = s1.read_entries("sr.reservation", with_meter=True)
        cfg = read.meter_config
        self.assertEqual((cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), self.UNLIMITED)
        self.expect_nothing()
