// v1model/validation.p4 — turn parser and checksum errors into drop reasons.
//
// Nothing that failed to parse is forwarded: a truncated or malformed packet
// gets a DROP_* reason here and FsIngress drops and counts it before any
// forwarding table is consulted.

#ifndef FS_VALIDATION_P4
#define FS_VALIDATION_P4

#include "headers.p4"

control Validation(in headers_t hdr, inout fs_metadata_t meta,
                   in standard_metadata_t sm) {
    apply {
        if (sm.parser_error != error.NoError) {
            if (sm.parser_error == error.PacketTooShort) {
                meta.drop_reason = DROP_TRUNCATED;
            } else if (sm.parser_error == error.Ipv4BadVersion ||
                       sm.parser_error == error.Ipv4BadHeaderLength ||
                       sm.parser_error == error.Ipv4BadTotalLength) {
                meta.drop_reason = DROP_IPV4_INVALID;
            } else if (sm.parser_error == error.Ipv4OptionsUnsupported) {
                meta.drop_reason = DROP_IPV4_OPTIONS;
            } else if (sm.parser_error == error.UdpBadLength ||
                       sm.parser_error == error.TcpBadDataOffset) {
                meta.drop_reason = DROP_L4_INVALID;
            } else if (sm.parser_error == error.MplsStackTooDeep) {
                meta.drop_reason = DROP_MPLS_TOO_DEEP;
            } else if (sm.parser_error == error.MplsBadPayload) {
                meta.drop_reason = DROP_MPLS_BAD_PAYLOAD;
            } else if (sm.parser_error == error.IntBadShim ||
                       sm.parser_error == error.IntBadVersion) {
                meta.drop_reason = DROP_INT_INVALID;
            } else {
                meta.drop_reason = DROP_PARSER_OTHER;
            }
        } else if (!hdr.ipv4.isValid()) {
            meta.drop_reason = DROP_NOT_IPV4;
        } else if (sm.checksum_error == 1) {
            meta.drop_reason = DROP_IPV4_CHECKSUM;
        } else {
            // The frame must hold the whole IPv4 datagram (Ethernet padding
            // may make it longer). L2 = Ethernet + 4 bytes per label.
            bit<32> l2_len = 14;
            if (hdr.mpls[0].isValid()) { l2_len = l2_len + 4; }
            if (hdr.mpls[1].isValid()) { l2_len = l2_len + 4; }
            if (hdr.mpls[2].isValid()) { l2_len = l2_len + 4; }
            if (hdr.mpls[3].isValid()) { l2_len = l2_len + 4; }
            if (sm.packet_length < l2_len + (bit<32>)hdr.ipv4.total_len) {
                meta.drop_reason = DROP_IPV4_TRUNCATED;
            } else if (hdr.udp.isValid() && hdr.ipv4.flags[0:0] == 0 &&
                       hdr.udp.length > hdr.ipv4.total_len - 20) {
                // Unfragmented UDP datagram longer than its IPv4 payload.
                meta.drop_reason = DROP_L4_INVALID;
            }
        }
    }
}

#endif  // FS_VALIDATION_P4
