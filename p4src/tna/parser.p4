// tna/parser.p4 — TNA parsers and deparsers.
//
// The parse graph is the v1model one (include/parser.p4): Ethernet, up to 4
// SR-MPLS labels, IPv4 (IHL 5), UDP or TCP, INT-MD after UDP when the DSCP
// bit says so, then the RoCEv2 BTH. What Tofino changes:
//   * no verify(): a malformed header sets meta.parse_drop to the DROP_*
//     reason and parsing stops there; ingress drops and counts it. A frame
//     that ends inside a header shows as PARSER_ERROR_PARTIAL_HDR;
//   * the IPv4 checksum is verified by the Checksum extern in the parser;
//   * the INT stack is parsed as 32-bit words with the parser counter, at
//     most FS_TNA_INT_STACK_WORDS; a deeper one stays unparsed payload.
// Egress parses again, after the bridged or mirror header, up to the INT
// stack (it never needs the BTH).

#ifndef FS_TNA_PARSER_P4
#define FS_TNA_PARSER_P4

#include "headers.p4"

parser FsIngressParser(packet_in pkt, out fs_ingress_headers_t hdr,
                       out fs_ingress_metadata_t meta,
                       out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;
    ParserCounter() stack_words;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.parse_drop = DROP_NONE;
        meta.ipv4_checksum_error = false;
        meta.int_stack_parsed = 1;
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
    state parse_ipv4_l4 {
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
            0 &&& 0xfc: accept;                               // 0..3
            0 &&& 0xe0: parse_int_stack;                      // 4..31
            default: int_stack_too_deep;
        }
    }
    state parse_int_stack {
        // counter = len - 3 (add 253 = -3 in 8 bits)
        stack_words.set(hdr.int_shim.len, 31, 0, 7, 253);
        transition parse_int_word;
    }
    state parse_int_word {
        pkt.extract(hdr.int_stack.next);
        stack_words.decrement(1);
        transition select(stack_words.is_zero()) {
            true: parse_after_int;
            false: parse_int_word;
        }
    }
    state int_stack_too_deep {
        meta.int_stack_parsed = 0;
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
        transition accept;
    }
}

control FsIngressDeparser(packet_out pkt, inout fs_ingress_headers_t hdr,
                          in fs_ingress_metadata_t meta,
                          in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    Mirror(FS_MIRROR_TYPE_REPORT) report_mirror;

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
                FS_PKT_REPORT, meta.ingress_ts,
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
    ParserCounter() stack_words;

    state start {
        pkt.extract(eg_intr_md);
        meta.report = 0;
        meta.int_stack_parsed = 1;
        transition select(pkt.lookahead<bit<8>>()) {
            FS_PKT_REPORT: parse_report_mirror;
            default: parse_bridge;
        }
    }
    state parse_bridge {
        pkt.extract(hdr.bridge);
        transition parse_ethernet;
    }
    state parse_report_mirror {
        pkt.extract(hdr.report_mirror);
        meta.report = 1;
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
        transition select(hdr.int_shim.len) {
            0 &&& 0xfc: accept;
            0 &&& 0xe0: parse_int_stack;
            default: int_stack_too_deep;
        }
    }
    state parse_int_stack {
        stack_words.set(hdr.int_shim.len, 31, 0, 7, 253);
        transition parse_int_word;
    }
    state parse_int_word {
        pkt.extract(hdr.int_stack.next);
        stack_words.decrement(1);
        transition select(stack_words.is_zero()) {
            true: accept;
            false: parse_int_word;
        }
    }
    state int_stack_too_deep {
        meta.int_stack_parsed = 0;
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
