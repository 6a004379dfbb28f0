"""Packet construction for the Foresight PTF tests, written from the standards
(INT v2.1, Telemetry Report v2.0, RoCEv2, RFC 3032) — independent of the P4
code, so that expected packets are never derived from what a switch emits.
"""

import struct
import zlib

from scapy.contrib.mpls import MPLS
from scapy.contrib.roce import BTH
from scapy.fields import BitField, ByteField, ShortField, IntField, XShortField
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw
from scapy.utils import checksum

ROCE_PORT = 4791

# INT v2.1 instruction bits (bit 0 = MSB).
INS_NODE_ID = 0x8000
INS_L1_PORTS = 0x4000
INS_HOP_LATENCY = 0x2000
INS_QUEUE = 0x1000
INS_INGRESS_TS = 0x0800
INS_EGRESS_TS = 0x0400
INS_L2_PORTS = 0x0200
INS_TX_UTIL = 0x0100
INS_BUFFER = 0x0080
INS_CHECKSUM_COMPLEMENT = 0x0001
FS_DOMAIN = 0x4653
DS_TX_BYTES = 0x8000
INT_DSCP_BIT = 0x01
# The instruction set Foresight's controller requests.
FS_INSTRUCTIONS = INS_NODE_ID | INS_L1_PORTS | INS_HOP_LATENCY | INS_QUEUE | INS_EGRESS_TS

# Drop reasons (index of FsIngress.counters.drops), p4src/README.md.
DROP = {
    "TRUNCATED": 1, "PARSER_OTHER": 2, "IPV4_INVALID": 3, "IPV4_OPTIONS": 4,
    "IPV4_CHECKSUM": 5, "IPV4_TRUNCATED": 6, "L4_INVALID": 7, "MPLS_TOO_DEEP": 8,
    "MPLS_BAD_PAYLOAD": 9, "MPLS_UNKNOWN_LABEL": 10, "INT_INVALID": 11,
    "TTL_EXPIRED": 12, "NO_ROUTE": 13, "NOT_IPV4": 14, "INT_DISCARD": 15,
}


class IntShim(Packet):
    name = "INT shim (TCP/UDP)"
    fields_desc = [
        BitField("int_type", 1, 4), BitField("npt", 0, 2), BitField("rsvd", 0, 2),
        ByteField("length", 3), ByteField("rsvd2", 0),
        BitField("dscp", 0, 6), BitField("rsvd3", 0, 2),
    ]


class IntMd(Packet):
    name = "INT-MD header"
    fields_desc = [
        BitField("ver", 2, 4), BitField("d", 0, 1), BitField("e", 0, 1), BitField("m", 0, 1),
        BitField("rsvd", 0, 12), BitField("hop_ml", 0, 5), ByteField("remaining_hop_cnt", 0),
        XShortField("instructions", 0), XShortField("domain_id", 0),
        XShortField("ds_instructions", 0), XShortField("ds_flags", 0),
    ]


class ReportGroup(Packet):
    name = "Telemetry Report v2.0 group header"
    fields_desc = [BitField("ver", 2, 4), BitField("hw_id", 0, 6), BitField("seq_no", 0, 22),
                   IntField("node_id", 0)]


class ReportIndividual(Packet):
    name = "Telemetry Report v2.0 individual report (INT)"
    fields_desc = [
        BitField("rep_type", 1, 4), BitField("in_type", 4, 4), ByteField("report_length", 0),
        ByteField("md_length", 0), BitField("d", 0, 1), BitField("q", 0, 1),
        BitField("f", 1, 1), BitField("i", 0, 1), BitField("rsvd", 0, 4),
        ShortField("rep_md_bits", 0), ShortField("domain_id", 0),
        ShortField("ds_md_bits", 0), ShortField("ds_md_status", 0),
    ]


def hop_words(ins, ds):
    """Metadata words per hop for an instruction set (INT v2.1 5.8)."""
    words = 0
    for bit, n in ((INS_NODE_ID, 1), (INS_L1_PORTS, 1), (INS_HOP_LATENCY, 1), (INS_QUEUE, 1),
                   (INS_INGRESS_TS, 2), (INS_EGRESS_TS, 2), (INS_L2_PORTS, 2),
                   (INS_TX_UTIL, 1), (INS_BUFFER, 1), (INS_CHECKSUM_COMPLEMENT, 1)):
        if ins & bit:
            words += n
    if ds & DS_TX_BYTES:
        words += 1
    return words


def int_hop(ins, ds, node_id=0, in_port=0, out_port=0, latency=0, qid=0, qocc=0,
            ingress_ts=0, egress_ts=0, tx_bytes=0, cc=0):
    """One hop's metadata, in instruction-bit order; unavailable metadata
    (Tx utilization, buffer) is all-ones, as INT v2.1 requires."""
    out = b""
    if ins & INS_NODE_ID:
        out += struct.pack("!I", node_id)
    if ins & INS_L1_PORTS:
        out += struct.pack("!HH", in_port, out_port)
    if ins & INS_HOP_LATENCY:
        out += struct.pack("!I", latency)
    if ins & INS_QUEUE:
        out += struct.pack("!I", (qid << 24) | qocc)
    if ins & INS_INGRESS_TS:
        out += struct.pack("!Q", ingress_ts)
    if ins & INS_EGRESS_TS:
        out += struct.pack("!Q", egress_ts)
    if ins & INS_L2_PORTS:
        out += struct.pack("!II", in_port, out_port)
    if ins & INS_TX_UTIL:
        out += b"\xff" * 4
    if ins & INS_BUFFER:
        out += b"\xff" * 4
    if ds & DS_TX_BYTES:
        out += struct.pack("!I", tx_bytes)
    if ins & INS_CHECKSUM_COMPLEMENT:
        out += struct.pack("!I", cc)
    assert len(out) == 4 * hop_words(ins, ds)
    return out


def hop_field_offsets(ins, ds):
    """{field: (byte offset within one hop's metadata, length)}."""
    offsets, off = {}, 0
    for name, bit, n in (("node_id", INS_NODE_ID, 4), ("l1_ports", INS_L1_PORTS, 4),
                         ("latency", INS_HOP_LATENCY, 4), ("queue", INS_QUEUE, 4),
                         ("ingress_ts", INS_INGRESS_TS, 8), ("egress_ts", INS_EGRESS_TS, 8),
                         ("l2_ports", INS_L2_PORTS, 8), ("tx_util", INS_TX_UTIL, 4),
                         ("buffer", INS_BUFFER, 4)):
        if ins & bit:
            offsets[name] = (off, n)
            off += n
    if ds & DS_TX_BYTES:
        offsets["tx_bytes"] = (off, 4)
        off += 4
    if ins & INS_CHECKSUM_COMPLEMENT:
        offsets["cc"] = (off, 4)
        off += 4
    return offsets


def int_headers(orig_dscp, hop_ml, rhc, ins, ds, domain, stack=b"", e=0, d=0, m=0):
    """Shim + INT-MD header + metadata stack."""
    length = 3 + len(stack) // 4
    return (bytes(IntShim(length=length, dscp=orig_dscp)) +
            bytes(IntMd(d=d, e=e, m=m, hop_ml=hop_ml, remaining_hop_cnt=rhc, instructions=ins,
                        domain_id=domain, ds_instructions=ds)) + stack)


class Flow:
    """A UDP (optionally RoCEv2) flow: fixed addresses, ports, QP and payload.
    packet() renders it as it looks on one link."""

    def __init__(self, src, dst, sport, dport=ROCE_PORT, qp=None, opcode=0x0a,
                 payload=b"\x11" * 64, udp_checksum=0, psn=1, ip_id=7, proto="udp"):
        self.src, self.dst, self.sport, self.dport = src, dst, sport, dport
        self.qp, self.opcode, self.payload, self.psn = qp, opcode, payload, psn
        self.udp_checksum, self.ip_id, self.proto = udp_checksum, ip_id, proto

    def _l4_payload(self, dscp, ecn):
        """Bytes after the UDP header (BTH + payload + ICRC for RoCEv2)."""
        if self.qp is None:
            return self.payload
        # The ICRC masks TTL, DSCP/ECN and checksums, so it is the same on
        # every link; computed by scapy over the flow without INT.
        ref = (IP(src=self.src, dst=self.dst, tos=(dscp << 2) | ecn, id=self.ip_id) /
               UDP(sport=self.sport, dport=self.dport, chksum=0) /
               BTH(opcode=self.opcode, dqpn=self.qp, psn=self.psn, pkey=0xffff) /
               Raw(self.payload))
        return bytes(ref)[28:]

    def original_udp_checksum(self, dscp=0, ecn=0):
        """The UDP checksum of the flow's packets without INT."""
        if not self.udp_checksum:
            return 0
        p = (IP(src=self.src, dst=self.dst, tos=(dscp << 2) | ecn, id=self.ip_id) /
             UDP(sport=self.sport, dport=self.dport) / Raw(self._l4_payload(dscp, ecn)))
        return IP(bytes(p))[UDP].chksum

    def packet(self, eth_src, eth_dst, ttl=64, dscp=0, ecn=0, int_bytes=b"", labels=(),
               int_dscp=False, udp_checksum=None):
        """labels: [(label, tc, ttl)] top first. int_bytes go between the UDP
        header and its payload; int_dscp sets the INT DSCP bit. The UDP
        checksum is the flow's original one unless udp_checksum is given
        ("auto": computed by scapy over this packet)."""
        l4 = self._l4_payload(dscp, ecn)
        wire_dscp = dscp | (INT_DSCP_BIT if int_dscp else 0)
        if self.proto == "tcp":
            l4pkt = TCP(sport=self.sport, dport=self.dport, flags="A", seq=1000) / Raw(l4)
        else:
            csum = self.original_udp_checksum(dscp, ecn)
            if udp_checksum == "auto":
                csum = None
            elif udp_checksum is not None:
                csum = udp_checksum
            l4pkt = UDP(sport=self.sport, dport=self.dport, chksum=csum,
                        len=8 + len(int_bytes) + len(l4)) / Raw(int_bytes + l4)
        ip = IP(src=self.src, dst=self.dst, ttl=ttl, tos=(wire_dscp << 2) | ecn,
                id=self.ip_id) / l4pkt
        if labels:
            eth = Ether(src=eth_src, dst=eth_dst, type=0x8847)
            mpls = None
            for i, (label, tc, lttl) in enumerate(labels):
                layer = MPLS(label=label, cos=tc, s=1 if i == len(labels) - 1 else 0, ttl=lttl)
                mpls = layer if mpls is None else mpls / layer
            pkt = eth / mpls / ip
        else:
            pkt = Ether(src=eth_src, dst=eth_dst, type=0x0800) / ip
        return Ether(bytes(pkt))

    def inner_from_ip(self, **kw):
        """The packet from its IPv4 header on (a report's inner packet)."""
        return bytes(self.packet("00:00:00:00:00:00", "00:00:00:00:00:00", **kw))[14:]


# The switch's ECMP hash seed when the controller has set none (the default
# action of routing.hash_seed).
DEFAULT_HASH_SEED = 0


def switch_seed(name):
    """The seed Foresight's controller gives a switch by default: CRC-32 of
    its name (planner::ecmp::switch_seed)."""
    return zlib.crc32(name.encode())


def crc32_roce(seed, src, dst, sport, qp):
    """The ECMP hash of a RoCEv2 packet in QP-aware mode on a switch with
    this seed (team convention): CRC-32 of seed(4) src(4) dst(4)
    UDP sport(2) dest QP(3), big-endian."""
    import ipaddress
    data = (seed.to_bytes(4, "big") +
            int(ipaddress.IPv4Address(src)).to_bytes(4, "big") +
            int(ipaddress.IPv4Address(dst)).to_bytes(4, "big") +
            sport.to_bytes(2, "big") + qp.to_bytes(3, "big"))
    return zlib.crc32(data)


def crc32_5tuple(seed, src, dst, proto, sport, dport):
    """The ECMP hash of any other packet: CRC-32 of seed(4) src(4) dst(4)
    protocol(1) sport(2) dport(2)."""
    import ipaddress
    data = (seed.to_bytes(4, "big") +
            int(ipaddress.IPv4Address(src)).to_bytes(4, "big") +
            int(ipaddress.IPv4Address(dst)).to_bytes(4, "big") +
            bytes([proto]) + sport.to_bytes(2, "big") + dport.to_bytes(2, "big"))
    return zlib.crc32(data)


def rotr32(h, n):
    """h rotated right by n bits: what a switch with hash offset n
    (routing.hash_offset) takes the member from."""
    n %= 32
    return ((h >> n) | (h << (32 - n))) & 0xFFFFFFFF


def udp_checksum_ok(frame_bytes):
    """True if the UDP checksum of an Ethernet/IPv4/UDP frame is zero
    (unused) or valid, computed over the whole datagram by scapy."""
    pkt = Ether(frame_bytes)
    ip = pkt[IP]
    udp = pkt[UDP]
    if udp.chksum == 0:
        return True
    raw_udp = bytes(ip)[ip.ihl * 4:ip.len]
    pseudo = struct.pack("!4s4sBBH", bytes(ip)[12:16], bytes(ip)[16:20], 0, 17, len(raw_udp))
    return checksum(pseudo + raw_udp) == 0


def with_complement(frame, cc_offset):
    """The frame with the INT Checksum Complement at cc_offset (4 bytes)
    chosen so that its unchanged UDP checksum is valid, computed over the
    whole datagram (RFC 768 sum; complement = 0x0000 + 16-bit value)."""
    frame = bytearray(frame)
    frame[cc_offset:cc_offset + 4] = b"\0\0\0\0"
    assert frame[12:14] == b"\x08\x00", "IPv4 frames only"
    ip_off = 14
    ihl = (frame[ip_off] & 0x0f) * 4
    total = int.from_bytes(frame[ip_off + 2:ip_off + 4], "big")
    raw_udp = bytes(frame[ip_off + ihl:ip_off + total])
    pseudo = bytes(frame[ip_off + 12:ip_off + 20]) + struct.pack("!BBH", 0, 17, len(raw_udp))
    value = checksum(pseudo + raw_udp) & 0xffff
    frame[cc_offset + 2:cc_offset + 4] = value.to_bytes(2, "big")
    return bytes(frame)
