"""Priority queues: CNPs (DSCP 48 or BTH opcode 0x81) and reserved flows use
higher BMv2 priority queues than bulk traffic.

The queue a packet was put in is read from the INT queue id an INT source
stamps (BMv2 reports the priority queue as qid), so the first test needs no
timing. The other two rate-limit the egress port through the Thrift CLI to
watch strict-priority service and per-queue depth.
"""

import time

import ptf.testutils as tu

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import FS_DOMAIN, INS_NODE_ID, INS_QUEUE, Flow, int_headers, int_hop
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

INS = INS_NODE_ID | INS_QUEUE      # 2 words: node id, queue id + occupancy
STACK_OFF = 14 + 20 + 8 + 4 + 12


class PriorityBase(FsTest):
    def common(self, watch=True):
        s1 = self.sw["s1"]
        self.route("s1", "10.2.0.0", 16, 2)
        s1.insert("qos.dscp_priority", {"dscp": 24}, "qos.set_priority", {"priority": 3})
        if watch:
            s1.insert("int_ingress.watchlist", {"src_addr": ("10.1.0.0", 0xffff0000)},
                      "int_ingress.int_source",
                      {"max_hop": 4, "instruction_bitmap": INS, "ds_instruction": 0},
                      priority=1)


class QueueSelection(PriorityBase):
    """RoCE data DSCP 24 -> queue 3 (qos table), DSCP 0 -> 0, CNP by DSCP 48
    -> 7, CNP by opcode 0x81 -> 7, a reserved flow -> its traffic class 5."""

    def runTest(self):
        self.common()
        s1 = self.sw["s1"]
        s1.insert("sr.reservation", {"dst_qp": (0x555, 0xffffff)}, "sr.push_2",
                  {"tc": 5, "label0": 1002, "label1": 1099}, priority=10)
        self.adjacency("s1", 2)
        cases = [
            # flow, dscp, queue, labels after s1
            (Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x10), 24, 3, ()),
            (Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x11), 0, 0, ()),
            (Flow("10.1.0.1", "10.2.0.1", sport=5000, dport=6000), 48, 7, ()),
            (Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x12, opcode=0x81,
                  payload=b"\x00" * 16), 0, 7, ()),
            (Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x555), 24, 5, [(1099, 5, 63)]),
        ]
        for f, dscp, queue, labels in cases:
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), dscp=dscp))
            stack = int_hop(INS, 0, node_id=0, qid=queue, qocc=0)
            ttl = 64 if labels else 63
            self.expect("s1", 2, f.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=ttl, dscp=dscp,
                                          int_dscp=True, labels=labels,
                                          int_bytes=int_headers(dscp, 2, 3, INS, 0, FS_DOMAIN,
                                                                        stack)))
        self.expect_nothing()


class StrictPriorityScheduling(PriorityBase):
    """Port 2 limited to 5 packets/s: a CNP sent behind 6 bulk packets
    overtakes all but at most the first two (BMv2 serves the highest
    priority queue first)."""

    def runTest(self):
        self.common(watch=False)
        self.set_queue("s1", 2, 5)
        for i in range(6):
            f = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x20, ip_id=10 + i)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1), dscp=0))
        cnp = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x21, opcode=0x81,
                   payload=b"\x00" * 16, ip_id=99)
        self.send("s1", 1, cnp.packet(HOST_MAC, sw_mac("s1", 1), dscp=48))
        order = [Ether(self.receive("s1", 2, timeout=5))[IP].id for _ in range(7)]
        print("\n  departure order (ip id; 99 = CNP):", order)
        self.assertLessEqual(order.index(99), 2, order)
        self.assertEqual([i for i in order if i != 99], list(range(10, 16)))


class QueueDepthPerPriority(PriorityBase):
    """BMv2 1.15 reports a packet's enqueue depth for its own priority queue:
    behind a backlog of bulk packets in queue 0, a CNP in queue 7 sees
    occupancy 0 while the next bulk packet sees the backlog. (BMv2 before
    1.15 summed a port's priority queues, the quirk the issue warns of.)"""

    def runTest(self):
        self.common()
        self.set_queue("s1", 2, 5)
        t0 = time.time()
        for i in range(6):
            f = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x30, ip_id=20 + i)
            self.send("s1", 1, f.packet(HOST_MAC, sw_mac("s1", 1)))
        cnp = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x31, opcode=0x81,
                   payload=b"\x00" * 16, ip_id=98)
        self.send("s1", 1, cnp.packet(HOST_MAC, sw_mac("s1", 1), dscp=48))
        last = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x30, ip_id=26)
        self.send("s1", 1, last.packet(HOST_MAC, sw_mac("s1", 1)))
        elapsed = time.time() - t0
        seen = {}
        for _ in range(8):
            frame = self.receive("s1", 2, timeout=5)
            ip_id = Ether(frame)[IP].id
            qid = frame[STACK_OFF + 4]
            qocc = int.from_bytes(frame[STACK_OFF + 5:STACK_OFF + 8], "big")
            seen[ip_id] = (qid, qocc)
        print("\n  (queue id, occupancy) by ip id:", seen)
        self.assertEqual(seen[98], (7, 0))
        drained = 1 + int(elapsed * 5) + 1
        qid, qocc = seen[26]
        self.assertEqual(qid, 0)
        self.assertGreaterEqual(qocc, 6 - drained)
        self.assertLessEqual(qocc, 6)
        self.assertGreater(qocc, 0)


class PortShapedAcrossQueues(PriorityBase):
    """The lab's port shaper (bmv2-lab/shaper.py) on BMv2's per-queue
    limiters: with the RoCE queue (3) at 6 packets/s and the reserved queue
    (5) at 4 on a 10 packets/s port, 30 competing and 20 reserved packets
    sent at once take 5 s to leave, the port's rate, where BMv2's default
    (every queue at the port's rate) would let them out in 3 s. Reserved
    packets, served first, leave at their own 4 packets/s."""

    def runTest(self):
        self.common(watch=False)
        s1 = self.sw["s1"]
        s1.insert("sr.reservation", {"dst_qp": (0x555, 0xffffff)}, "sr.push_2",
                  {"tc": 5, "label0": 1002, "label1": 1099}, priority=10)
        self.adjacency("s1", 2)
        self.set_queue("s1", 2, 10, depth=64)
        self.cli("s1", "set_queue_rate 6 2 3\nset_queue_rate 4 2 5")
        pkts = []
        for i in range(20):
            pkts.append(Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x40, ip_id=100 + i)
                        .packet(HOST_MAC, sw_mac("s1", 1), dscp=24))
            pkts.append(Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x555, ip_id=200 + i)
                        .packet(HOST_MAC, sw_mac("s1", 1), dscp=24))
        for i in range(20, 30):
            pkts.append(Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x40, ip_id=100 + i)
                        .packet(HOST_MAC, sw_mac("s1", 1), dscp=24))
        # Paced a little (the capture buffer between the veth and BMv2
        # overflows on a burst); 0.1 s in all against 5 s of draining.
        t0 = time.time()
        for p in pkts:
            self.send("s1", 1, p)
            time.sleep(0.002)
        last, count = {}, {"reserved": 0, "competing": 0}
        for _ in range(len(pkts)):
            res = tu.dp_poll(self, device_number=0, port_number=2, timeout=10)
            if not isinstance(res, self.dataplane.PollSuccess):
                self.fail("only %s of 30 competing and 20 reserved packets left" % count)
            frame = bytes(res.packet)
            kind = "reserved" if int.from_bytes(frame[12:14], "big") == 0x8847 else "competing"
            last[kind] = time.time() - t0
            count[kind] += 1
        total = max(last.values())
        print("\n  last departure: competing %.2f s, reserved %.2f s" % (
            last["competing"], last["reserved"]))
        # 50 packets at 10/s; the first of each queue leaves at once.
        self.assertGreater(total, 4.2, "the port sent faster than its rate")
        self.assertLess(total, 6.5)
        # 20 reserved packets at 4/s.
        self.assertGreater(last["reserved"], 4.0)
