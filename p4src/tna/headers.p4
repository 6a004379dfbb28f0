// tna/headers.p4 — the TNA program's header and metadata structs.
//
// Formats and constants come from shared/formats.p4, shared with the
// v1model program. What differs on Tofino:
//   * the INT metadata stack is parsed as 32-bit words (PHV holds no varbit),
//     at most FS_TNA_INT_STACK_WORDS of them;
//   * ingress hands egress what it decided in a bridged header, and the INT
//     report copy carries the sink's ingress-side values in a mirror header;
//     the first byte of both says which one follows (FS_PKT_*).

#ifndef FS_TNA_HEADERS_P4
#define FS_TNA_HEADERS_P4

#include "../shared/formats.p4"

// What precedes the packet in egress.
const bit<8> FS_PKT_BRIDGED = 1;    // ingress -> egress, every normal packet
const bit<8> FS_PKT_REPORT = 2;     // I2E mirror copy that becomes an INT report

// TNA mirror type of the INT report copy (ig_dprsr_md.mirror_type).
const bit<3> FS_MIRROR_TYPE_REPORT = 1;

header int_word_t {
    bit<32> data;
}

// INT-MD words whose two fields the egress writes as one (their formats,
// int_l1_ports_t and int_queue_t, are in shared/formats.p4).
header fs_int_l1_ports_word_t {
    bit<32> word;                   // ingress port 16 ++ egress port 16
}
header fs_int_queue_word_t {
    bit<32> word;                   // queue id 8 ++ occupancy 24
}

// Ingress -> egress. Byte-aligned: Tofino bridges whole bytes.
header fs_bridge_t {
    bit<8>  pkt_kind;               // FS_PKT_BRIDGED
    bit<24> dst_qp;                 // flow_key: predrain matches on it
    bit<48> ingress_ts;             // ns, global timestamp at the ingress parser
    @padding bit<7> _pad0;
    bit<9>  ingress_port;
    @padding bit<5> _pad1;
    bit<1>  int_source;             // insert INT in egress (watchlist hit)
    bit<1>  int_sink;               // egress port ends INT
    bit<1>  int_stack_too_deep;     // deeper than FS_TNA_INT_STACK_WORDS: not parsed
    bit<8>  int_max_hop;
    bit<16> int_instruction_bitmap;
    bit<16> int_ds_instruction;
}

// The INT report copy: what the sink knew in ingress.
header fs_report_mirror_t {
    bit<8>  pkt_kind;               // FS_PKT_REPORT
    bit<48> ingress_ts;
    @padding bit<7> _pad0;
    bit<9>  ingress_port;
    @padding bit<7> _pad1;
    bit<9>  sink_egress_port;
    @padding bit<3> _pad2;
    bit<5>  sink_queue;
    @padding bit<7> _pad3;
    bit<1>  int_source;             // source and sink on this switch
    bit<8>  int_max_hop;
    bit<16> int_instruction_bitmap;
    bit<16> int_ds_instruction;
}

struct fs_ingress_headers_t {
    fs_bridge_t         bridge;
    ethernet_t          ethernet;
    mpls_t[FS_MPLS_MAX_DEPTH] mpls;
    ipv4_t              ipv4;
    udp_t               udp;
    tcp_t               tcp;
    int_shim_t          int_shim;
    int_md_t            int_md;
    int_word_t[FS_TNA_INT_STACK_WORDS] int_stack;
    bth_t               bth;
}

struct fs_egress_headers_t {
    fs_bridge_t         bridge;
    fs_report_mirror_t  report_mirror;
    // Telemetry report encapsulation (report copies only).
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
    fs_int_l1_ports_word_t int_l1_ports;
    int_hop_latency_t   int_hop_latency;
    fs_int_queue_word_t int_queue;
    int_ingress_ts_t    int_ingress_ts;
    int_egress_ts_t     int_egress_ts;
    int_l2_ports_t      int_l2_ports;
    int_tx_util_t       int_tx_util;
    int_buffer_t        int_buffer;
    int_ds_tx_bytes_t   int_ds_tx_bytes;
    int_word_t[FS_TNA_INT_STACK_WORDS] int_stack;
}

// Flow identity (as flow_meta_t in the v1model program).
struct fs_flow_t {
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<24> dst_qp;
    bit<1>  is_roce;
    bit<6>  qos_dscp;
    bit<32> ecmp_hash;
}

struct fs_sr_t {
    bit<1> labelled;                // arrived with, or was pushed, an SR label stack
    bit<1> forwarded;
    bit<1> tc_valid;
    bit<3> tc;
}

struct fs_ingress_metadata_t {
    fs_flow_t flow;
    fs_sr_t   sr;
    bit<8>    parse_drop;           // drop reason the parser found (DROP_*)
    bool      ipv4_checksum_error;
    bit<16>   ipv4_room;            // IPv4 total length minus UDP length, saturating
    bit<1>    int_stack_too_deep;
    bit<8>    drop_reason;          // header checks (Validation)
    bit<8>    fwd_drop_reason;      // forwarding: TTL, no route, unknown label, INT discard
    bit<1>    ttl_expired;          // unlabelled packet with IPv4 TTL <= 1
    bit<8>    final_drop_reason;
    bit<1>    int_source;
    bit<1>    int_sink;
    bit<8>    int_max_hop;
    bit<16>   int_instruction_bitmap;
    bit<16>   int_ds_instruction;
    MirrorId_t mirror_session;
    bit<8>    mirror_kind;          // FS_PKT_REPORT (the mirror list takes no constants)
    bit<48>   ingress_ts;
    PortId_t  ingress_port;
    PortId_t  int_sink_port;        // the report copy's view of the data packet
    QueueId_t int_sink_queue;
    bit<16>   int_report_every_m1;  // report sampling: 1 in (this + 1) packets
    bit<12>   int_sample_slot;      // the flow's report sampling counter
    bit<1>    int_report_now;
}

struct fs_egress_metadata_t {
    bit<1>  report;                 // this is an INT report copy
    bit<1>  int_stack_too_deep;
    // DCQCN and pre-drain. Magnitude compares are saturating differences
    // (a |-| b is non-zero exactly when a > b), computed in the actions that
    // know the thresholds; ecn.mark matches on them.
    bit<16> queue_random;
    bit<16> predrain_random;
    bit<1>  dcqcn_hit;
    bit<19> kmax_slack;
    bit<19> kmin_slack;
    bit<16> under_pmax;
    bit<1>  predrain_hit;
    bit<16> predrain_probability;
    bit<16> under_probability;
    bit<1>  ce_marked;
    bit<10> ce_index;               // ecn.ce_marks index: kind ++ port
    // INT.
    bit<32> node_id;
    bit<3>  int_role;               // FS_INT_*: what this hop does with INT
    bit<16> int_ins;                // the instruction bitmap that sizes this hop
    bit<1>  int_ds_on;              // this hop adds the tx-bytes word
    bit<16> len_base;               // packet length change without this hop's words
    bit<8>  a_words;                // hop_size_a / hop_size_b results
    bit<16> a_bytes;
    bit<8>  b_words;
    bit<16> b_bytes;
    bit<16> b_delta;
    bit<5>  a_ml;                   // the same word counts as INT-MD hop_ml
    bit<5>  b_ml;
    bit<8>  hop_words;              // metadata words one hop pushes
    bit<5>  hop_ml;                 // the same, the width of INT-MD hop_ml
    bit<16> hop_bytes;              // the same in bytes
    bit<16> push_delta;             // packet length change if the hop pushes
    bit<8>  len_after;              // transit: INT shim len once this hop's words are in
    bit<1>  ml_match;               // the stack's hop_ml is this hop's word count
    bit<16> label_bytes;            // MPLS labels on the packet at egress
    bit<16> mtu_budget;             // port MTU less the labels (0xffff: unchecked)
    bit<16> mtu_room;               // bytes the IPv4 packet may still grow
    bit<16> mtu_head_over;          // non-zero: the packet (with new INT headers) exceeds the MTU
    bit<16> mtu_hop_over;           // non-zero: this hop's metadata would exceed the MTU
    bit<1>  push;                   // this hop stamps its metadata
    bit<16> strip_bytes;            // bytes a sink removes (shim, INT-MD, stack)
    bit<16> strip_delta;            // packet length change at a sink
    bit<16> tx_bytes_add;           // bytes this packet adds to port_tx_bytes
    int_hop_t hop;                  // values this hop stamps
    bit<32> queue_word;             // int_queue: queue id 8 ++ occupancy 24
    bit<32> l1_word;                // int_l1_ports: ingress 16 ++ egress 16
    // Reports.
    bit<1>  report_configured;
    bit<1>  report_sized;           // report_sizes knows the lengths
    bit<1>  egress_drop;
    bit<1>  count_report;           // count int_egress.reports[report_outcome]
    bit<2>  report_outcome;
}

#endif  // FS_TNA_HEADERS_P4
