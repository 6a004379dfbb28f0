// v1model/checksums.p4 — IPv4 header checksum verification and update (v1model).
//
// UDP checksums are never recomputed: INT keeps them valid incrementally
// (int.p4), and nothing else in this pipeline changes UDP- or TCP-checksummed
// bytes (TTL, DSCP and ECN are outside the pseudo-header).

#ifndef FS_CHECKSUMS_P4
#define FS_CHECKSUMS_P4

#include "headers.p4"

control FsVerifyChecksum(inout headers_t hdr, inout fs_metadata_t meta) {
    apply {
        // A mismatch sets standard_metadata.checksum_error; validation.p4
        // drops the packet (DROP_IPV4_CHECKSUM). Options are rejected by the
        // parser, so the header is always 20 bytes here.
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control FsComputeChecksum(inout headers_t hdr, inout fs_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.report_ipv4.isValid(),
            { hdr.report_ipv4.version, hdr.report_ipv4.ihl, hdr.report_ipv4.dscp,
              hdr.report_ipv4.ecn, hdr.report_ipv4.total_len,
              hdr.report_ipv4.identification, hdr.report_ipv4.flags,
              hdr.report_ipv4.frag_offset, hdr.report_ipv4.ttl,
              hdr.report_ipv4.protocol, hdr.report_ipv4.src_addr,
              hdr.report_ipv4.dst_addr },
            hdr.report_ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif  // FS_CHECKSUMS_P4
