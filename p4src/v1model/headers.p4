// v1model/headers.p4 — the v1model program's header and metadata structs.
//
// Formats and constants are in shared/formats.p4 (shared with the TNA program);
// here the INT stack is one varbit header, which BMv2 parses and re-emits
// whole.

#ifndef FS_HEADERS_P4
#define FS_HEADERS_P4

#include "sizes.p4"
#include "../shared/formats.p4"

// v1model instance type of an ingress clone (BMv2 PKT_INSTANCE_TYPE_INGRESS_CLONE).
const bit<32> INSTANCE_TYPE_INGRESS_CLONE = 1;

// Metadata pushed by upstream hops. The shim length is 8 bits, so at most
// 255 - 3 words follow the INT-MD header.
#define INT_MAX_STACK_BITS 8064
header int_stack_t {
    varbit<INT_MAX_STACK_BITS> data;
}

struct headers_t {
    // Telemetry report encapsulation (valid only in report copies).
    ethernet_t          report_ethernet;
    ipv4_t              report_ipv4;
    udp_t               report_udp;
    report_group_t      report_group;
    report_individual_t report_individual;
    // The packet.
    ethernet_t          ethernet;
    mpls_t[FS_MPLS_MAX_DEPTH] mpls;
    ipv4_t              ipv4;
    udp_t               udp;
    tcp_t               tcp;
    int_shim_t          int_shim;
    int_md_t            int_md;
    int_node_id_t       int_node_id;
    int_l1_ports_t      int_l1_ports;
    int_hop_latency_t   int_hop_latency;
    int_queue_t         int_queue;
    int_ingress_ts_t    int_ingress_ts;
    int_egress_ts_t     int_egress_ts;
    int_l2_ports_t      int_l2_ports;
    int_tx_util_t       int_tx_util;
    int_buffer_t        int_buffer;
    int_ds_tx_bytes_t   int_ds_tx_bytes;
    int_checksum_complement_t int_checksum_complement;
    int_stack_t         int_stack;
    bth_t               bth;
}

// ---------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------
// Flow identity, computed once in ingress (flow_key.p4).
struct flow_meta_t {
    bit<16> l4_src_port;     // 0 for non-TCP/UDP and IPv4 fragments
    bit<16> l4_dst_port;
    bit<24> dst_qp;          // BTH destination QP; 0 when not RoCEv2
    bit<1>  is_roce;
    bit<6>  qos_dscp;        // DSCP with the INT bit masked out
    bit<32> ecmp_hash;
}

// v1model meter colours (BMv2: RFC 2698 two-rate three-colour marking).
const bit<2> METER_GREEN = 0;

struct sr_meta_t {
    bit<1> forwarded;        // an adjacency label chose the egress port
    bit<1> tc_valid;         // tc below carries the packet's traffic class
    bit<3> tc;
    bit<1> reserved;         // matched a reservation at this switch
    bit<2> color;            // the reservation's meter: 0 green, 1 yellow, 2 red
}

struct int_meta_t {
    // Decided in ingress. Fields tagged FL_INT_REPORT travel with the I2E
    // clone that becomes the telemetry report.
    @field_list(FL_INT_REPORT) bit<1>  source;          // insert INT at this switch
    @field_list(FL_INT_REPORT) bit<1>  sink;            // egress port is an INT sink port
    @field_list(FL_INT_REPORT) bit<8>  max_hop;
    @field_list(FL_INT_REPORT) bit<16> instruction_bitmap;
    @field_list(FL_INT_REPORT) bit<16> ds_instruction;
    @field_list(FL_INT_REPORT) bit<9>  ingress_port;
    @field_list(FL_INT_REPORT) bit<9>  sink_egress_port;
    @field_list(FL_INT_REPORT) bit<3>  sink_queue;
    @field_list(FL_INT_REPORT) bit<48> ingress_ts;
    bit<16> report_every;    // the sink reports 1 in this many packets of a flow
    bit<12> sample_slot;     // the flow's report sampling counter
    bit<1>  report_now;      // this packet of the flow is reported
    // Egress working state.
    bit<32> node_id;
    bit<32> csum_delta;      // one's-complement sum of UDP-checksummed changes
    bit<1>  report_configured;
    bit<16> mtu;             // egress port's MTU (0: unchecked), INT's M bit
    bit<16> label_bytes;     // MPLS labels still on the packet at egress
}

struct ecn_meta_t {
    bit<19> kmin;
    bit<19> kmax;
    bit<16> pmax;
    bit<16> predrain_probability;
}

struct fs_metadata_t {
    flow_meta_t flow;
    sr_meta_t   sr;
    int_meta_t  telemetry;
    ecn_meta_t  ecn;
    bit<8>      drop_reason;
    bit<1>      egress_drop;     // egress decided to drop (report copies only)
    // Bytes added (positive) or removed (negative, two's complement) by this
    // switch, so the per-port transmitted-bytes counter is exact.
    bit<32>     len_delta;
}

#endif  // FS_HEADERS_P4
