"""Debian's tshark decodes what a switch emits: an SR-MPLS packet (label
stack over IPv4/UDP/RoCEv2) and a plain RoCEv2 packet (InfiniBand BTH on UDP
4791, Wireshark's default decode for that port). The frames are captured
from the switch's egress ports, written to a pcap and read back by tshark."""

import os
import shutil
import subprocess
import tempfile

from fs_common import FsTest, HOST_MAC, sw_mac
from fs_packets import Flow
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

FIELDS = ["eth.type", "mpls.label", "mpls.exp", "mpls.bottom", "mpls.ttl", "ip.src", "ip.dst",
          "ip.ttl", "udp.dstport", "infiniband.bth.opcode", "infiniband.bth.destqp",
          "infiniband.bth.psn"]


class TsharkDecodesSrAndRoce(FsTest):
    """tshark shows labels 1003/1004 (TC 5, bottom-of-stack on the second)
    and the BTH opcode, destination QP and PSN of both packets."""

    def runTest(self):
        tshark = shutil.which("tshark")
        if tshark is None:
            self.skipTest("tshark not installed (apt-get install tshark)")
        s1 = self.sw["s1"]
        s1.insert("sr.reservation", {"dst_qp": (0x1234, 0xffffff)}, "sr.push_3",
                  {"tc": 5, "label0": 1002, "label1": 1003, "label2": 1004}, priority=10)
        self.adjacency("s1", 2)
        self.route("s1", "10.2.0.0", 16, 3)
        sr = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x1234, opcode=0x0a, psn=777)
        plain = Flow("10.1.0.1", "10.2.0.1", sport=49152, qp=0x5678, opcode=0x04, psn=4242)
        self.send("s1", 1, sr.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
        frames = [self.receive("s1", 2)]
        self.send("s1", 1, plain.packet(HOST_MAC, sw_mac("s1", 1), ttl=64))
        frames.append(self.receive("s1", 3))

        with tempfile.TemporaryDirectory() as tmp:
            pcap = os.path.join(tmp, "switch-output.pcap")
            wrpcap(pcap, [Ether(f) for f in frames])
            cmd = [tshark, "-r", pcap, "-T", "fields", "-E", "separator=|", "-E",
                   "aggregator=,"]
            for fld in FIELDS:
                cmd += ["-e", fld]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            verbose = subprocess.run([tshark, "-r", pcap, "-V"], capture_output=True,
                                     text=True, timeout=60).stdout
        rows = [dict(zip(FIELDS, line.split("|"))) for line in out.stdout.strip().splitlines()]
        print("\n  tshark fields:")
        for r in rows:
            print("   ", r)
        self.assertEqual(len(rows), 2, out.stdout)
        mpls, roce = rows

        self.assertEqual(mpls["eth.type"], "0x8847")
        self.assertEqual(mpls["mpls.label"], "1003,1004")
        self.assertEqual(mpls["mpls.exp"], "5,5")
        self.assertEqual(mpls["mpls.bottom"], "0,1")
        self.assertEqual(mpls["mpls.ttl"], "63,64")
        for r, qp, opcode, psn, ttl in ((mpls, 0x1234, 0x0a, 777, "64"),
                                        (roce, 0x5678, 0x04, 4242, "63")):
            self.assertEqual(r["ip.src"], "10.1.0.1")
            self.assertEqual(r["ip.dst"], "10.2.0.1")
            self.assertEqual(r["ip.ttl"], ttl)
            self.assertEqual(r["udp.dstport"], "4791")
            self.assertEqual(int(r["infiniband.bth.opcode"], 0), opcode)
            self.assertEqual(int(r["infiniband.bth.destqp"], 0), qp)
            self.assertEqual(int(r["infiniband.bth.psn"], 0), psn)
        self.assertEqual(roce["eth.type"], "0x0800")
        self.assertEqual(roce["mpls.label"], "")
        self.assertIn("MultiProtocol Label Switching Header", verbose)
        self.assertIn("InfiniBand", verbose)
        self.assertNotIn("Malformed", verbose)
