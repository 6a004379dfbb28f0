"""Truncated and malformed packets are dropped and counted by reason, never
forwarded. Every case has a route that a misparsed packet could take; each
is checked on every port of the switch and on both drop counters
(FsIngress.counters.drops[reason], .port_drops[port * 32 + reason]).
A well-formed control packet is forwarded after each case."""

from fs_common import FsTest, HOST_MAC, nbr_mac, sw_mac
from fs_packets import DROP, FS_DOMAIN, FS_INSTRUCTIONS, DS_TX_BYTES, Flow, IntMd, IntShim
from scapy.contrib.mpls import MPLS
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

DMAC = sw_mac("s1", 1)
SRC, DST = "10.1.0.1", "10.2.0.1"
ETH = Ether(src=HOST_MAC, dst=DMAC)
ETH_IPV4 = bytes(Ether(src=HOST_MAC, dst=DMAC, type=0x0800))
GOOD = Flow(SRC, DST, sport=49152, qp=0x31)
ROCE = bytes(GOOD.packet(HOST_MAC, DMAC))


def ipv4_bytes(**kw):
    return bytes(IP(src=SRC, dst=DST, **kw) / UDP(sport=1, dport=2) / Raw(b"x" * 20))


def patched(frame, offset, value):
    b = bytearray(frame)
    b[offset:offset + len(value)] = value
    return bytes(b)


def int_frame(shim=None, md=None, stack=b"", extra=b"\x00" * 32):
    shim = shim if shim is not None else IntShim(length=3 + len(stack) // 4)
    md = md if md is not None else IntMd(hop_ml=7, remaining_hop_cnt=4,
                                         instructions=FS_INSTRUCTIONS,
                                         domain_id=FS_DOMAIN, ds_instructions=DS_TX_BYTES)
    return bytes(ETH / IP(src=SRC, dst=DST, tos=1 << 2) / UDP(sport=1, dport=9000) /
                 Raw(bytes(shim) + bytes(md) + stack + extra))


CASES = {
    # name: (reason, frame)
    "EthernetOnly": ("TRUNCATED", ETH_IPV4),
    "TruncatedIpv4": ("TRUNCATED", ETH_IPV4 + ipv4_bytes()[:12]),
    "TruncatedUdp": ("TRUNCATED", ETH_IPV4 + ipv4_bytes()[:24]),
    "TruncatedBth": ("TRUNCATED", ROCE[:14 + 20 + 8 + 6]),
    "Ipv4BadVersion": ("IPV4_INVALID", patched(bytes(ETH / IP(src=SRC, dst=DST) / UDP()),
                                               14, b"\x65")),
    "Ipv4HeaderTooShort": ("IPV4_INVALID", patched(bytes(ETH / IP(src=SRC, dst=DST) / UDP()),
                                                   14, b"\x44")),
    "Ipv4TotalLenTooSmall": ("IPV4_INVALID", bytes(ETH / IP(src=SRC, dst=DST, len=16) /
                                                   Raw(b"y" * 30))),
    "Ipv4Options": ("IPV4_OPTIONS", bytes(ETH / IP(src=SRC, dst=DST, options=b"\x01\x01\x01\x00")
                                          / UDP(sport=1, dport=2))),
    "Ipv4BadChecksum": ("IPV4_CHECKSUM", bytes(ETH / IP(src=SRC, dst=DST, chksum=0x1234) /
                                               UDP(sport=1, dport=2) / Raw(b"z" * 20))),
    "Ipv4LongerThanFrame": ("IPV4_TRUNCATED", bytes(ETH / IP(src=SRC, dst=DST, len=200) /
                                                    UDP(sport=1, dport=2, len=28) /
                                                    Raw(b"z" * 20))),
    "UdpLengthTooSmall": ("L4_INVALID", bytes(ETH / IP(src=SRC, dst=DST) /
                                              UDP(sport=1, dport=2, len=4) / Raw(b"z" * 20))),
    "UdpLongerThanIp": ("L4_INVALID", bytes(ETH / IP(src=SRC, dst=DST) /
                                            UDP(sport=1, dport=2, len=300) / Raw(b"z" * 20))),
    "TcpBadDataOffset": ("L4_INVALID", bytes(ETH / IP(src=SRC, dst=DST) /
                                             TCP(sport=1, dport=2, dataofs=3) / Raw(b"z" * 20))),
    "MplsIpv6Payload": ("MPLS_BAD_PAYLOAD", bytes(Ether(src=HOST_MAC, dst=DMAC, type=0x8847) /
                                                  MPLS(label=1002, s=1, ttl=64) /
                                                  IPv6() / UDP())),
    "IntBadType": ("INT_INVALID", int_frame(shim=IntShim(int_type=3, length=3))),
    "IntBadNpt": ("INT_INVALID", int_frame(shim=IntShim(npt=1, length=3))),
    "IntShimTooShort": ("INT_INVALID", int_frame(shim=IntShim(length=2))),
    "IntBadVersion": ("INT_INVALID", int_frame(md=IntMd(ver=1, hop_ml=7))),
    "IntStackTruncated": ("TRUNCATED", int_frame(shim=IntShim(length=3 + 40), stack=b"\x01" * 8,
                                                 extra=b"")),
    "Arp": ("NOT_IPV4", bytes(Ether(src=HOST_MAC, dst="ff:ff:ff:ff:ff:ff") /
                              ARP(psrc=SRC, pdst=DST))),
}


class MalformedCase(FsTest):
    """Base: one malformed frame (CASES[self.CASE]); no runTest of its own,
    so PTF only runs the generated subclasses."""

    CASE = None

    def check_case(self):
        reason, frame = CASES[self.CASE]
        self.route("s1", "10.0.0.0", 8, 2)
        self.adjacency("s1", 3, label=1002)
        s1 = self.sw["s1"]
        code = DROP[reason]
        before = self.drop_count("s1", code)
        self.send("s1", 1, frame)
        self.expect_nothing()
        got = self.wait_counter(lambda: self.drop_count("s1", code), before + 1)
        self.assertEqual(got, before + 1, "%s: drops[%s]" % (self.CASE, reason))
        self.assertEqual(s1.read_counter("FsIngress.counters.port_drops", 32 + code)[0], 1)
        for other, c in DROP.items():
            if c != code:
                self.assertEqual(self.drop_count("s1", c), 0, "%s counted as %s" % (
                    self.CASE, other))
        # The route works: a well-formed packet right after is forwarded.
        self.send("s1", 1, GOOD.packet(HOST_MAC, DMAC))
        self.expect("s1", 2, GOOD.packet(sw_mac("s1", 2), nbr_mac("s1", 2), ttl=63))
        self.expect_nothing()


for _name in CASES:
    _cls = type("Malformed" + _name, (MalformedCase,),
                {"CASE": _name, "runTest": MalformedCase.check_case,
                 "__doc__": "%s is dropped as %s." % (_name, CASES[_name][0])})
    globals()[_cls.__name__] = _cls
del _name, _cls
