// tna/validation.p4 — header checks to drop reasons,
// the Tofino way of v1model/validation.p4.

#ifndef FS_TNA_VALIDATION_P4
#define FS_TNA_VALIDATION_P4

#include "headers.p4"

// Parser findings and header checks -> drop reason (v1model/validation.p4).
// Not checked on Tofino: a frame shorter than the IPv4 total length
// (DROP_IPV4_TRUNCATED): ingress does not know the frame length.
//
// The Tofino way: each check is one small condition setting one flag (a
// gateway takes 4 bytes of equality input and 12 bits of magnitude input,
// so the v1model if-else chain does not fit, and a 16-bit `<` is split
// into a zero test of the high bits and a compare of the low ones), all
// in parallel; a table then picks the first failed
// check in v1model's order.
control Validation(in fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    bit<1> partial = 0;
    bit<1> parser_other = 0;
    bit<1> parse_drop = 0;
    bit<1> ipv4_short = 0;
    bit<1> l4_udp_short = 0;
    bit<1> l4_tcp_short = 0;
    bit<1> int_invalid = 0;
    bit<1> checksum = 0;
    bit<1> udp_past_ipv4 = 0;

    // The room is computed by a table's action, so the compiler cannot
    // fold the subtraction back into the condition (a gateway cannot
    // subtract).
    action compute_ipv4_room() { meta.ipv4_room = hdr.ipv4.total_len |-| hdr.udp.length; }
    @hidden
    table ipv4_room {
        actions = { compute_ipv4_room; }
        const default_action = compute_ipv4_room();
        size = 1;
    }

    action set_reason(bit<8> reason) { meta.drop_reason = reason; }
    action use_parse_drop() { meta.drop_reason = meta.parse_drop; }

    @hidden
    table first_failed {
        key = {
            partial               : ternary;
            parser_other          : ternary;
            parse_drop            : ternary;
            hdr.ipv4.isValid()    : ternary;
            ipv4_short            : ternary;
            l4_udp_short          : ternary;
            l4_tcp_short          : ternary;
            int_invalid           : ternary;
            checksum              : ternary;
            udp_past_ipv4         : ternary;
        }
        actions = { set_reason; use_parse_drop; @defaultonly NoAction; }
        const entries = {
            (1, _, _, _, _, _, _, _, _, _): set_reason(DROP_TRUNCATED);
            (_, 1, _, _, _, _, _, _, _, _): set_reason(DROP_PARSER_OTHER);
            (_, _, 1, _, _, _, _, _, _, _): use_parse_drop();
            (_, _, _, false, _, _, _, _, _, _): set_reason(DROP_NOT_IPV4);
            (_, _, _, _, 1, _, _, _, _, _): set_reason(DROP_IPV4_INVALID);
            (_, _, _, _, _, 1, _, _, _, _): set_reason(DROP_L4_INVALID);
            (_, _, _, _, _, _, 1, _, _, _): set_reason(DROP_L4_INVALID);
            (_, _, _, _, _, _, _, 1, _, _): set_reason(DROP_INT_INVALID);
            (_, _, _, _, _, _, _, _, 1, _): set_reason(DROP_IPV4_CHECKSUM);
            (_, _, _, _, _, _, _, _, _, 1): set_reason(DROP_L4_INVALID);
        }
        size = 16;
    }

    apply {
        // UDP longer than the IPv4 payload: total_len - udp.length < 20,
        // saturating so a UDP length past total_len counts too.
        ipv4_room.apply();
        if ((ig_prsr_md.parser_err & PARSER_ERROR_PARTIAL_HDR) != 0) { partial = 1; }
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) { parser_other = 1; }
        if (meta.parse_drop != DROP_NONE) { parse_drop = 1; }
        if (hdr.ipv4.total_len[15:5] == 0 && hdr.ipv4.total_len[4:0] < 20) { ipv4_short = 1; }
        if (hdr.udp.isValid() && hdr.udp.length[15:3] == 0) { l4_udp_short = 1; }
        if (hdr.tcp.isValid() && hdr.tcp.data_offset < 5) { l4_tcp_short = 1; }
        if (hdr.int_shim.isValid() &&
            (hdr.int_shim.int_type != INT_TYPE_MD || hdr.int_shim.npt != 0 ||
             hdr.int_shim.len < INT_MD_HEADER_WORDS || hdr.int_md.ver != INT_MD_VERSION)) {
            int_invalid = 1;
        }
        if (meta.ipv4_checksum_error) { checksum = 1; }
        if (hdr.udp.isValid() && hdr.ipv4.flags[0:0] == 0) {
            if (meta.ipv4_room[15:5] == 0) {
                if (meta.ipv4_room[4:0] < 20) { udp_past_ipv4 = 1; }
            }
        }
        first_failed.apply();
    }
}

#endif  // FS_TNA_VALIDATION_P4
