// v1model/parser.p4 — architecture-neutral parser and deparser.
//
// FsParser is a sub-parser over (packet, headers) only, so a TNA top file can
// call it from its ingress parser. A frame that ends inside a header fails
// with error.PacketTooShort; malformed headers fail with this program's
// errors (headers.p4). On v1model the packet still reaches ingress, with
// standard_metadata.parser_error set, and validation.p4 drops and counts it.
//
// Parse graph:
//   ethernet -+- 0x0800 --------------------------------+
//             +- 0x8847 -> mpls[0] .. mpls[3] (BoS) -> ipv4 (first nibble 4)
//   ipv4 (IHL 5, unfragmented or first fragment) -+- UDP -+- INT (DSCP bit) -> BTH if dport 4791
//                                                 |       +- BTH (dport 4791)
//                                                 +- TCP

#ifndef FS_PARSER_P4
#define FS_PARSER_P4

#include "headers.p4"

parser FsParser(packet_in packet, out headers_t hdr) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_MPLS: parse_mpls0;
            default: accept;
        }
    }

    // The label stack is unrolled (no parser loop) so that its depth bound
    // is explicit and the states map one-to-one onto a TNA parser.
    state parse_mpls0 {
        packet.extract(hdr.mpls[0]);
        transition select(hdr.mpls[0].bos) {
            1: parse_mpls_payload;
            default: parse_mpls1;
        }
    }
    state parse_mpls1 {
        packet.extract(hdr.mpls[1]);
        transition select(hdr.mpls[1].bos) {
            1: parse_mpls_payload;
            default: parse_mpls2;
        }
    }
    state parse_mpls2 {
        packet.extract(hdr.mpls[2]);
        transition select(hdr.mpls[2].bos) {
            1: parse_mpls_payload;
            default: parse_mpls3;
        }
    }
    state parse_mpls3 {
        packet.extract(hdr.mpls[3]);
        transition select(hdr.mpls[3].bos) {
            1: parse_mpls_payload;
            default: parse_mpls_too_deep;
        }
    }
    state parse_mpls_too_deep {
        // A fifth label: the stack is deeper than this pipeline handles.
        verify(false, error.MplsStackTooDeep);
        transition accept;
    }
    state parse_mpls_payload {
        // SR-MPLS carries IPv4 below the bottom label (no control word).
        transition select(packet.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: parse_mpls_bad_payload;
        }
    }
    state parse_mpls_bad_payload {
        verify(false, error.MplsBadPayload);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.Ipv4BadVersion);
        verify(hdr.ipv4.ihl >= 5, error.Ipv4BadHeaderLength);
        verify(hdr.ipv4.ihl == 5, error.Ipv4OptionsUnsupported);
        verify(hdr.ipv4.total_len >= 20, error.Ipv4BadTotalLength);
        // Only an unfragmented datagram or a first fragment has an L4 header.
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            (0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        verify(hdr.tcp.data_offset >= 5, error.TcpBadDataOffset);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        verify(hdr.udp.length >= 8, error.UdpBadLength);
        transition select(hdr.ipv4.dscp & INT_DSCP_BIT, hdr.udp.dst_port) {
            (INT_DSCP_BIT, _): parse_int_shim;
            (_, UDP_PORT_ROCEV2): parse_bth;
            default: accept;
        }
    }

    state parse_int_shim {
        packet.extract(hdr.int_shim);
        verify(hdr.int_shim.int_type == INT_TYPE_MD, error.IntBadShim);
        verify(hdr.int_shim.npt == 0, error.IntBadShim);
        verify(hdr.int_shim.len >= INT_MD_HEADER_WORDS, error.IntBadShim);
        packet.extract(hdr.int_md);
        verify(hdr.int_md.ver == INT_MD_VERSION, error.IntBadVersion);
        transition select(hdr.int_shim.len) {
            INT_MD_HEADER_WORDS: parse_after_int;
            default: parse_int_stack;
        }
    }
    state parse_int_stack {
        // Metadata of the upstream hops, kept opaque and re-emitted as is.
        packet.extract(hdr.int_stack,
                       ((bit<32>)(hdr.int_shim.len - INT_MD_HEADER_WORDS)) << 5);
        transition parse_after_int;
    }
    state parse_after_int {
        transition select(hdr.udp.dst_port) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }
}

control FsDeparser(packet_out packet, in headers_t hdr) {
    apply {
        // Telemetry report encapsulation (report copies only); the report's
        // inner packet starts at the IPv4 header (InType 4).
        packet.emit(hdr.report_ethernet);
        packet.emit(hdr.report_ipv4);
        packet.emit(hdr.report_udp);
        packet.emit(hdr.report_group);
        packet.emit(hdr.report_individual);
        // The packet.
        packet.emit(hdr.ethernet);
        packet.emit(hdr.mpls);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.int_shim);
        packet.emit(hdr.int_md);
        // This hop's INT metadata, in instruction-bit order, on top of the
        // upstream stack.
        packet.emit(hdr.int_node_id);
        packet.emit(hdr.int_l1_ports);
        packet.emit(hdr.int_hop_latency);
        packet.emit(hdr.int_queue);
        packet.emit(hdr.int_ingress_ts);
        packet.emit(hdr.int_egress_ts);
        packet.emit(hdr.int_l2_ports);
        packet.emit(hdr.int_tx_util);
        packet.emit(hdr.int_buffer);
        packet.emit(hdr.int_ds_tx_bytes);
        packet.emit(hdr.int_checksum_complement);
        packet.emit(hdr.int_stack);
        packet.emit(hdr.bth);
    }
}

#endif  // FS_PARSER_P4
