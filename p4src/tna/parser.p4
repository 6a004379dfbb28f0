// tna/parser.p4 — TNA parsers and deparsers.
//
// The parse graph is the v1model one (v1model/parser.p4): Ethernet, up to 4
// SR-MPLS labels, IPv4 (IHL 5), UDP or TCP, INT-MD after UDP when the DSCP
// bit says so, then the RoCEv2 BTH. What Tofino changes:
//   * no verify(): a malformed header sets meta.parse_drop to the DROP_*
//     reason and parsing stops there; ingress drops and counts it. A frame
//     that ends inside a header shows as PARSER_ERROR_PARTIAL_HDR;
//   * the IPv4 checksum is verified by the Checksum extern in the parser;
//   * the INT stack is parsed as 32-bit words, one state per word, at most
//     FS_TNA_INT_STACK_WORDS (Tofino parses 160 bytes at most); in ingress
//     a deeper stack stays unparsed payload (and so does the BTH after it).
// Egress parses again, after the bridged or mirror header: up to the INT-MD
// header on transit hops and report copies (a hop's words go in front of
// the stack), and the whole stack at the sink, which removes it.

#ifndef FS_TNA_PARSER_P4
#define FS_TNA_PARSER_P4

#include "headers.p4"

parser FsIngressParser(packet_in pkt, out fs_ingress_headers_t hdr,
                       out fs_ingress_metadata_t meta,
                       out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        // Metadata starts at zero (@pa_auto_init_metadata): parse_drop is
        // DROP_NONE, int_stack_too_deep 0. Tofino parsers cannot write a
        // field twice on one path, so only the exceptions are written.
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_MPLS: parse_mpls0;
            default: accept;
        }
    }

    state parse_mpls0 {
        pkt.extract(hdr.mpls[0]);
        meta.sr.labelled = 1;
        transition select(hdr.mpls[0].bos) {
            1: parse_mpls_payload;
            default: parse_mpls1;
        }
    }
    state parse_mpls1 {
        pkt.extract(hdr.mpls[1]);
        transition select(hdr.mpls[1].bos) {
            1: parse_mpls_payload;
            default: parse_mpls2;
        }
    }
    state parse_mpls2 {
        pkt.extract(hdr.mpls[2]);
        transition select(hdr.mpls[2].bos) {
            1: parse_mpls_payload;
            default: parse_mpls3;
        }
    }
    state parse_mpls3 {
        pkt.extract(hdr.mpls[3]);
        transition select(hdr.mpls[3].bos) {
            1: parse_mpls_payload;
            default: mpls_too_deep;
        }
    }
    state mpls_too_deep {
        meta.parse_drop = DROP_MPLS_TOO_DEEP;
        transition accept;
    }
    state parse_mpls_payload {
        transition select(pkt.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: mpls_bad_payload;
        }
    }
    state mpls_bad_payload {
        meta.parse_drop = DROP_MPLS_BAD_PAYLOAD;
        transition accept;
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        meta.ipv4_checksum_error = ipv4_checksum.verify();
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4, 5): parse_ipv4_l4;
            (4, 0 &&& 0xc): ipv4_invalid;     // IHL 0..3
            (4, 4): ipv4_invalid;
            (4, _): ipv4_options;             // IHL > 5
            default: ipv4_invalid;            // version != 4
        }
    }
    state ipv4_invalid {
        meta.parse_drop = DROP_IPV4_INVALID;
        transition accept;
    }
    state ipv4_options {
        meta.parse_drop = DROP_IPV4_OPTIONS;
        transition accept;
    }
    // The flow key (v1model/flow_key.p4) is filled in here, as the headers
    // are extracted, which saves ingress two stages. L4 is parsed only
    // for unfragmented packets (offset 0, MF clear): the ports of a first
    // fragment are not the flow's (v1model parses its L4 header but leaves
    // the flow key's ports zero).
    state parse_ipv4_l4 {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.flags[0:0], hdr.ipv4.protocol) {
            (0, 0, IP_PROTO_UDP): parse_udp;
            (0, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.flow.l4_src_port = hdr.tcp.src_port;
        meta.flow.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        meta.flow.l4_src_port = hdr.udp.src_port;
        meta.flow.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.ipv4.dscp[0:0], hdr.udp.dst_port) {
            (1, _): parse_int;
            (0, UDP_PORT_ROCEV2): parse_bth;
            default: accept;
        }
    }

    state parse_int {
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        // len counts the 3-word INT-MD header and the stack; ingress checks
        // type, NPT, version and len >= 3 (DROP_INT_INVALID).
        transition select(hdr.int_shim.len) {
            0 &&& 0xfc: int_too_short;                        // 0..3
            4 .. FS_TNA_INT_MAX_LEN: parse_int_word1;
            default: int_stack_too_deep;
        }
    }
    state int_too_short {
        transition select(hdr.int_shim.len) {
            3: parse_after_int;                               // no stack yet
            default: accept;                                  // dropped in ingress
        }
    }
#if FS_TNA_INT_STACK_WORDS != 14
#error "parse_int_word1..14 are written for FS_TNA_INT_STACK_WORDS 14"
#endif
    // One state per word (as in the egress parser), not the parser counter:
    // the compiler cannot load the counter from the shim's len here.
    state parse_int_word1 {
        pkt.extract(hdr.int_stack[0]);
        transition select(hdr.int_shim.len) { 4: parse_after_int; default: parse_int_word2; }
    }
    state parse_int_word2 {
        pkt.extract(hdr.int_stack[1]);
        transition select(hdr.int_shim.len) { 5: parse_after_int; default: parse_int_word3; }
    }
    state parse_int_word3 {
        pkt.extract(hdr.int_stack[2]);
        transition select(hdr.int_shim.len) { 6: parse_after_int; default: parse_int_word4; }
    }
    state parse_int_word4 {
        pkt.extract(hdr.int_stack[3]);
        transition select(hdr.int_shim.len) { 7: parse_after_int; default: parse_int_word5; }
    }
    state parse_int_word5 {
        pkt.extract(hdr.int_stack[4]);
        transition select(hdr.int_shim.len) { 8: parse_after_int; default: parse_int_word6; }
    }
    state parse_int_word6 {
        pkt.extract(hdr.int_stack[5]);
        transition select(hdr.int_shim.len) { 9: parse_after_int; default: parse_int_word7; }
    }
    state parse_int_word7 {
        pkt.extract(hdr.int_stack[6]);
        transition select(hdr.int_shim.len) { 10: parse_after_int; default: parse_int_word8; }
    }
    state parse_int_word8 {
        pkt.extract(hdr.int_stack[7]);
        transition select(hdr.int_shim.len) { 11: parse_after_int; default: parse_int_word9; }
    }
    state parse_int_word9 {
        pkt.extract(hdr.int_stack[8]);
        transition select(hdr.int_shim.len) { 12: parse_after_int; default: parse_int_word10; }
    }
    state parse_int_word10 {
        pkt.extract(hdr.int_stack[9]);
        transition select(hdr.int_shim.len) { 13: parse_after_int; default: parse_int_word11; }
    }
    state parse_int_word11 {
        pkt.extract(hdr.int_stack[10]);
        transition select(hdr.int_shim.len) { 14: parse_after_int; default: parse_int_word12; }
    }
    state parse_int_word12 {
        pkt.extract(hdr.int_stack[11]);
        transition select(hdr.int_shim.len) { 15: parse_after_int; default: parse_int_word13; }
    }
    state parse_int_word13 {
        pkt.extract(hdr.int_stack[12]);
        transition select(hdr.int_shim.len) { 16: parse_after_int; default: parse_int_word14; }
    }
    state parse_int_word14 {
        pkt.extract(hdr.int_stack[13]);
        transition parse_after_int;
    }
    state int_stack_too_deep {
        meta.int_stack_too_deep = 1;
        transition accept;
    }
    state parse_after_int {
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        pkt.extract(hdr.bth);
        meta.flow.dst_qp = hdr.bth.dst_qp;
        meta.flow.is_roce = 1;
        transition accept;
    }
}

control FsIngressDeparser(packet_out pkt, inout fs_ingress_headers_t hdr,
                          in fs_ingress_metadata_t meta,
                          in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    Mirror() report_mirror;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        if (ig_dprsr_md.mirror_type == FS_MIRROR_TYPE_REPORT) {
            report_mirror.emit<fs_report_mirror_t>(meta.mirror_session, {
                meta.mirror_kind, meta.ingress_ts,
                0, meta.ingress_port,
                0, meta.int_sink_port,
                0, meta.int_sink_queue,
                0, meta.int_source, meta.int_max_hop,
                meta.int_instruction_bitmap, meta.int_ds_instruction });
        }
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.mpls);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.int_shim);
        pkt.emit(hdr.int_md);
        pkt.emit(hdr.int_stack);
        pkt.emit(hdr.bth);
    }
}

parser FsEgressParser(packet_in pkt, out fs_egress_headers_t hdr,
                      out fs_egress_metadata_t meta,
                      out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition select(pkt.lookahead<bit<8>>()) {
            FS_PKT_REPORT: parse_report_mirror;
            default: parse_bridge;
        }
    }
    state parse_bridge {
        pkt.extract(hdr.bridge);
        transition select(hdr.bridge.int_sink) {
            1: parse_sink_ethernet;
            default: parse_ethernet;
        }
    }
    state parse_report_mirror {
        pkt.extract(hdr.report_mirror);
        meta.report = 1;
        transition parse_ethernet;
    }

    // Transit hops and report copies: up to the INT-MD header. A hop's
    // metadata goes in front of the stack, which can stay payload.
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_MPLS: parse_mpls0;
            default: accept;
        }
    }
    state parse_mpls0 {
        pkt.extract(hdr.mpls[0]);
        transition select(hdr.mpls[0].bos) {
            1: parse_ipv4;
            default: parse_mpls1;
        }
    }
    state parse_mpls1 {
        pkt.extract(hdr.mpls[1]);
        transition select(hdr.mpls[1].bos) {
            1: parse_ipv4;
            default: parse_mpls2;
        }
    }
    state parse_mpls2 {
        pkt.extract(hdr.mpls[2]);
        transition select(hdr.mpls[2].bos) {
            1: parse_ipv4;
            default: parse_mpls3;
        }
    }
    state parse_mpls3 {
        pkt.extract(hdr.mpls[3]);
        transition parse_ipv4;
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            (0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        transition accept;
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.ipv4.dscp[0:0]) {
            1: parse_int;
            default: accept;
        }
    }
    state parse_int {
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        transition accept;
    }

    // The sink's egress: the stack is parsed so the deparser can leave it
    // out. Tofino parses at most 160 bytes, so this path has no MPLS (the
    // last label is popped before the sink's egress). A stack deeper than
    // FS_TNA_INT_STACK_WORDS is dropped and counted; Foresight's own
    // switches never build one (egress stops stamping first).
    state parse_sink_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_sink_ipv4;
            default: sink_not_parsed;
        }
    }
    state parse_sink_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol, hdr.ipv4.dscp[0:0]) {
            (0, IP_PROTO_UDP, 1): parse_sink_udp;
            default: sink_not_parsed;
        }
    }
    state parse_sink_udp {
        pkt.extract(hdr.udp);
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        transition select(hdr.int_shim.len) {
            0 &&& 0xfc: accept;                               // 0..3
            4 .. FS_TNA_INT_MAX_LEN: parse_sink_int_word1;
            default: sink_not_parsed;
        }
    }
#if FS_TNA_INT_STACK_WORDS != 14
#error "parse_sink_int_word1..14 are written for FS_TNA_INT_STACK_WORDS 14"
#endif
    // One state per word, not the parser counter: the egress parser must
    // also pad short paths to Tofino's minimum parse depth, which the
    // compiler does only in a parser without a counter.
    state parse_sink_int_word1 {
        pkt.extract(hdr.int_stack[0]);
        transition select(hdr.int_shim.len) { 4: accept; default: parse_sink_int_word2; }
    }
    state parse_sink_int_word2 {
        pkt.extract(hdr.int_stack[1]);
        transition select(hdr.int_shim.len) { 5: accept; default: parse_sink_int_word3; }
    }
    state parse_sink_int_word3 {
        pkt.extract(hdr.int_stack[2]);
        transition select(hdr.int_shim.len) { 6: accept; default: parse_sink_int_word4; }
    }
    state parse_sink_int_word4 {
        pkt.extract(hdr.int_stack[3]);
        transition select(hdr.int_shim.len) { 7: accept; default: parse_sink_int_word5; }
    }
    state parse_sink_int_word5 {
        pkt.extract(hdr.int_stack[4]);
        transition select(hdr.int_shim.len) { 8: accept; default: parse_sink_int_word6; }
    }
    state parse_sink_int_word6 {
        pkt.extract(hdr.int_stack[5]);
        transition select(hdr.int_shim.len) { 9: accept; default: parse_sink_int_word7; }
    }
    state parse_sink_int_word7 {
        pkt.extract(hdr.int_stack[6]);
        transition select(hdr.int_shim.len) { 10: accept; default: parse_sink_int_word8; }
    }
    state parse_sink_int_word8 {
        pkt.extract(hdr.int_stack[7]);
        transition select(hdr.int_shim.len) { 11: accept; default: parse_sink_int_word9; }
    }
    state parse_sink_int_word9 {
        pkt.extract(hdr.int_stack[8]);
        transition select(hdr.int_shim.len) { 12: accept; default: parse_sink_int_word10; }
    }
    state parse_sink_int_word10 {
        pkt.extract(hdr.int_stack[9]);
        transition select(hdr.int_shim.len) { 13: accept; default: parse_sink_int_word11; }
    }
    state parse_sink_int_word11 {
        pkt.extract(hdr.int_stack[10]);
        transition select(hdr.int_shim.len) { 14: accept; default: parse_sink_int_word12; }
    }
    state parse_sink_int_word12 {
        pkt.extract(hdr.int_stack[11]);
        transition select(hdr.int_shim.len) { 15: accept; default: parse_sink_int_word13; }
    }
    state parse_sink_int_word13 {
        pkt.extract(hdr.int_stack[12]);
        transition select(hdr.int_shim.len) { 16: accept; default: parse_sink_int_word14; }
    }
    state parse_sink_int_word14 {
        pkt.extract(hdr.int_stack[13]);
        transition accept;
    }
    state sink_not_parsed {
        meta.int_stack_too_deep = 1;
        transition accept;
    }
}

control FsEgressDeparser(packet_out pkt, inout fs_egress_headers_t hdr,
                         in fs_egress_metadata_t meta,
                         in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    Checksum() report_ipv4_checksum;

    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        if (hdr.report_ipv4.isValid()) {
            hdr.report_ipv4.hdr_checksum = report_ipv4_checksum.update({
                hdr.report_ipv4.version, hdr.report_ipv4.ihl, hdr.report_ipv4.dscp,
                hdr.report_ipv4.ecn, hdr.report_ipv4.total_len,
                hdr.report_ipv4.identification, hdr.report_ipv4.flags,
                hdr.report_ipv4.frag_offset, hdr.report_ipv4.ttl,
                hdr.report_ipv4.protocol, hdr.report_ipv4.src_addr,
                hdr.report_ipv4.dst_addr });
        }
        pkt.emit(hdr.report_ethernet);
        pkt.emit(hdr.report_ipv4);
        pkt.emit(hdr.report_udp);
        pkt.emit(hdr.report_group);
        pkt.emit(hdr.report_individual);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.mpls);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.int_shim);
        pkt.emit(hdr.int_md);
        pkt.emit(hdr.int_node_id);
        pkt.emit(hdr.int_l1_ports);
        pkt.emit(hdr.int_hop_latency);
        pkt.emit(hdr.int_queue);
        pkt.emit(hdr.int_ingress_ts);
        pkt.emit(hdr.int_egress_ts);
        pkt.emit(hdr.int_l2_ports);
        pkt.emit(hdr.int_tx_util);
        pkt.emit(hdr.int_buffer);
        pkt.emit(hdr.int_ds_tx_bytes);
        pkt.emit(hdr.int_stack);
    }
}

#endif  // FS_TNA_PARSER_P4
