// shared/formats.p4 — header formats and constants of the Foresight pipeline, shared
// by the v1model program (v1model/headers.p4) and the TNA program (tna/headers.p4).
//
// Every format is a published standard so that tshark and scapy decode what
// the switches emit:
//   Ethernet II; SR-MPLS label stack entries (RFC 3032 / RFC 8660, ethertype
//   0x8847); IPv4 (RFC 791, DSCP/ECN per RFC 2474 / RFC 3168); UDP; TCP;
//   InfiniBand Base Transport Header as carried by RoCEv2 (UDP port 4791);
//   INT-MD over UDP (P4.org INT Dataplane Specification v2.1, shim after the
//   UDP header, INT signalled by a DSCP bit); Telemetry Report v2.0 (P4.org).
//
// Nothing here depends on an architecture: the header structs, which differ
// (v1model parses the INT stack as one varbit, TNA as 32-bit words), are in
// v1model/headers.p4 and tna/headers.p4.

#ifndef FS_FORMATS_P4
#define FS_FORMATS_P4

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<20> mpls_label_t;
typedef bit<9>  port_id_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_MPLS = 0x8847;   // MPLS unicast (SR-MPLS, RFC 8660)
const bit<8>  IP_PROTO_TCP = 6;
const bit<8>  IP_PROTO_UDP = 17;
const bit<16> UDP_PORT_ROCEV2 = 4791;    // IANA: RoCEv2

// SR: maximum label stack depth this pipeline parses, pushes and pops.
#define FS_MPLS_MAX_DEPTH 4

// RoCEv2 / DCQCN conventions (DSCP 24 for RoCE data is configured through
// the qos.dscp_priority table; CNPs are recognised by the data plane itself).
const bit<6>  DSCP_CNP = 48;
const bit<8>  BTH_OPCODE_CNP = 0x81;     // RoCEv2 Congestion Notification Packet
// BMv2 priority queue used by CNPs (highest of 8).
const bit<3>  PRIORITY_CNP = 7;
// Queue of reserved traffic beyond its grant (the reservation's meter says
// red): the lowest, so an overrunning job yields to every other class.
const bit<3>  PRIORITY_DEMOTED = 0;

// ECN codepoints (RFC 3168).
const bit<2>  ECN_NOT_ECT = 0;
const bit<2>  ECN_CE = 3;

// ---------------------------------------------------------------------------
// INT (P4.org INT Dataplane Specification v2.1)
// ---------------------------------------------------------------------------
// INT presence is signalled by one DSCP bit (INT v2.1 section 5.7.2, option 2:
// "allocating a bit"), never by a UDP port: a UDP-port signal changes the
// 5-tuple that ECMP hashes, so watched packets would take another path than
// the flow they describe. Bit 0 of the DSCP is in the local/experimental
// codepoint pools (RFC 2474 pools 2 and 3) and no standard PHB used in an AI
// backend fabric sets it; QoS classification masks it out. Within the fabric
// the bit means INT and nothing else: a host packet carrying it must also carry
// a valid INT-MD header or it is dropped as DROP_INT_INVALID.
const bit<6>  INT_DSCP_BIT = 0x01;
const bit<4>  INT_TYPE_MD = 1;           // INT shim type 1 = INT-MD
const bit<4>  INT_MD_VERSION = 2;
// Length of the shim-counted fixed part: the 12-byte INT-MD header, in words.
const bit<8>  INT_MD_HEADER_WORDS = 3;

// Instruction bitmap bits (bit 0 is the MSB), INT v2.1 section 5.8.
const bit<16> INT_INS_NODE_ID      = 0x8000;  // bit 0,  4 B
const bit<16> INT_INS_L1_PORTS     = 0x4000;  // bit 1,  4 B
const bit<16> INT_INS_HOP_LATENCY  = 0x2000;  // bit 2,  4 B
const bit<16> INT_INS_QUEUE        = 0x1000;  // bit 3,  4 B
const bit<16> INT_INS_INGRESS_TS   = 0x0800;  // bit 4,  8 B
const bit<16> INT_INS_EGRESS_TS    = 0x0400;  // bit 5,  8 B
const bit<16> INT_INS_L2_PORTS     = 0x0200;  // bit 6,  8 B
const bit<16> INT_INS_TX_UTIL      = 0x0100;  // bit 7,  4 B (not available: all-ones)
const bit<16> INT_INS_BUFFER       = 0x0080;  // bit 8,  4 B (not available: all-ones)
const bit<16> INT_INS_RESERVED     = 0x007E;  // bits 9..14
const bit<16> INT_INS_CHECKSUM_COMPLEMENT = 0x0001;  // bit 15, 4 B

// Foresight's INT domain. Domain-specific instruction bit 0 requests the
// egress port's transmitted-bytes counter (4 B, modulo 2^32), from which the
// controller derives link load between two reports the way HPCC does
// (INT v2.1 leaves Tx utilization's definition to the device; a counter is
// exact where a utilization estimate would need a rate window).
const bit<16> INT_DOMAIN_FORESIGHT = 0x4653;   // "FS"
const bit<16> INT_DS_INS_TX_BYTES = 0x8000;

// Clone session the controller configures towards the INT collector port
// (P4Runtime CloneSessionEntry), and the metadata field list it preserves.
const bit<32> INT_REPORT_CLONE_SESSION = 64;
const bit<8>  FL_INT_REPORT = 1;

// Telemetry Report v2.0
const bit<4>  REPORT_VERSION = 2;
const bit<4>  REPORT_TYPE_INT = 1;
const bit<4>  REPORT_INNER_IPV4 = 4;
// Report headers in front of the inner IPv4 header, in bytes:
// Ethernet 14 + IPv4 20 + UDP 8 + group header 8 + individual report 12.
const bit<32> REPORT_OUTER_BYTES = 62;


// ---------------------------------------------------------------------------
// Drop reasons: index of the drop counters (FsIngress.counters.*drops*).
// ---------------------------------------------------------------------------
const bit<8> DROP_NONE = 0;
const bit<8> DROP_TRUNCATED = 1;          // frame ends inside a header
const bit<8> DROP_PARSER_OTHER = 2;       // any other parser error
const bit<8> DROP_IPV4_INVALID = 3;       // version != 4, IHL < 5, total length < 20
const bit<8> DROP_IPV4_OPTIONS = 4;       // IHL > 5 (no IPv4 options in this fabric)
const bit<8> DROP_IPV4_CHECKSUM = 5;      // header checksum wrong
const bit<8> DROP_IPV4_TRUNCATED = 6;     // frame shorter than IPv4 total length
const bit<8> DROP_L4_INVALID = 7;         // UDP length < 8, TCP data offset < 5
const bit<8> DROP_MPLS_TOO_DEEP = 8;      // more than FS_MPLS_MAX_DEPTH labels
const bit<8> DROP_MPLS_BAD_PAYLOAD = 9;   // bottom of stack not followed by IPv4
const bit<8> DROP_MPLS_UNKNOWN_LABEL = 10;// top label not in sr.adjacency
const bit<8> DROP_INT_INVALID = 11;       // INT DSCP bit set, INT-MD header bad
const bit<8> DROP_TTL_EXPIRED = 12;       // IPv4 TTL or top label TTL <= 1
const bit<8> DROP_NO_ROUTE = 13;          // IPv4 LPM miss
const bit<8> DROP_NOT_IPV4 = 14;          // neither IPv4 nor MPLS (ARP, IPv6, LLDP...)
const bit<8> DROP_INT_DISCARD = 15;       // INT sink, D bit set: report only

// Parser errors of this program (in addition to core.p4's).
error {
    Ipv4BadVersion,
    Ipv4BadHeaderLength,
    Ipv4OptionsUnsupported,
    Ipv4BadTotalLength,
    UdpBadLength,
    TcpBadDataOffset,
    MplsStackTooDeep,
    MplsBadPayload,
    IntBadShim,
    IntBadVersion
}

// ---------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------
header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// MPLS label stack entry (RFC 3032); TC is the traffic class (RFC 5462).
header mpls_t {
    mpls_label_t label;
    bit<3>       tc;
    bit<1>       bos;
    bit<8>       ttl;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

// InfiniBand Base Transport Header (IBA vol. 1, 9.2), 12 bytes, as carried
// by RoCEv2 after UDP port 4791.
header bth_t {
    bit<8>  opcode;
    bit<1>  se;          // solicited event
    bit<1>  mig_req;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;        // RoCEv2: reserved bit 7 of byte 4 (FECN)
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dst_qp;
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;
}

// INT shim header for TCP/UDP (INT v2.1 5.7.2). NPT = 0 (INT signalled by
// DSCP): the second byte of the last 16 bits carries the original DSCP.
header int_shim_t {
    bit<4> int_type;
    bit<2> npt;
    bit<2> rsvd;
    bit<8> len;          // INT-MD header + metadata stack, in 4-byte words
    bit<8> rsvd2;
    bit<6> orig_dscp;
    bit<2> rsvd3;
}

// INT-MD metadata header (INT v2.1 5.8), 12 bytes.
header int_md_t {
    bit<4>  ver;
    bit<1>  d;           // discard at sink
    bit<1>  e;           // max hop count exceeded
    bit<1>  m;           // MTU exceeded
    bit<12> rsvd;
    bit<5>  hop_ml;      // per-hop metadata length, words
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> domain_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

// Per-hop INT metadata, one header per instruction bit, emitted in bit order.
header int_node_id_t        { bit<32> node_id; }
header int_l1_ports_t       { bit<16> ingress_port; bit<16> egress_port; }
header int_hop_latency_t    { bit<32> hop_latency; }
header int_queue_t          { bit<8> queue_id; bit<24> queue_occupancy; }
header int_ingress_ts_t     { bit<64> ingress_ts; }
header int_egress_ts_t      { bit<64> egress_ts; }
header int_l2_ports_t       { bit<32> ingress_port; bit<32> egress_port; }
header int_tx_util_t        { bit<32> tx_util; }
header int_buffer_t         { bit<8> buffer_id; bit<24> buffer_occupancy; }
header int_ds_tx_bytes_t    { bit<32> tx_bytes; }
header int_checksum_complement_t { bit<32> checksum_complement; }

// Telemetry Report v2.0 group header (8 bytes).
header report_group_t {
    bit<4>  ver;
    bit<6>  hw_id;
    bit<22> seq_no;
    bit<32> node_id;
}

// Telemetry Report v2.0 individual report header (4 bytes) with the fixed
// part of the INT main contents (8 bytes).
header report_individual_t {
    bit<4>  rep_type;
    bit<4>  in_type;
    bit<8>  report_length;   // words after the first one
    bit<8>  md_length;
    bit<1>  d;
    bit<1>  q;
    bit<1>  f;
    bit<1>  i;
    bit<4>  rsvd;
    bit<16> rep_md_bits;
    bit<16> domain_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;
}

// Values stamped by one INT hop (the same layout for transit hops and for
// the sink's entry in a report).
struct int_hop_t {
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<8>  queue_id;
    bit<24> queue_occupancy;
    bit<64> ingress_ts;
    bit<64> egress_ts;
    bit<32> tx_bytes;
}

#endif  // FS_FORMATS_P4
