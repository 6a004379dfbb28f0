// v1model/flow_key.p4 — the flow identity every feature matches on.
//
// L4 ports are zero for anything but an unfragmented (or first-fragment)
// TCP/UDP datagram, and IPv4 fragments hash on the 3-tuple, so all fragments
// of a datagram take one path. dst_qp is the RoCEv2 BTH destination QP and
// zero otherwise (QP 0 is InfiniBand's subnet-management QP, which RoCEv2
// never uses, so it cannot be confused with a real flow).

#ifndef FS_FLOW_KEY_P4
#define FS_FLOW_KEY_P4

#include "headers.p4"

control FlowKey(in headers_t hdr, inout fs_metadata_t meta) {
    apply {
        meta.flow.l4_src_port = 0;
        meta.flow.l4_dst_port = 0;
        meta.flow.dst_qp = 0;
        meta.flow.is_roce = 0;
        bool fragment = hdr.ipv4.flags[0:0] == 1 || hdr.ipv4.frag_offset != 0;
        if (!fragment) {
            if (hdr.udp.isValid()) {
                meta.flow.l4_src_port = hdr.udp.src_port;
                meta.flow.l4_dst_port = hdr.udp.dst_port;
            } else if (hdr.tcp.isValid()) {
                meta.flow.l4_src_port = hdr.tcp.src_port;
                meta.flow.l4_dst_port = hdr.tcp.dst_port;
            }
            if (hdr.bth.isValid()) {
                meta.flow.dst_qp = hdr.bth.dst_qp;
                meta.flow.is_roce = 1;
            }
        }
        meta.flow.qos_dscp = hdr.ipv4.dscp & ~INT_DSCP_BIT;
    }
}

#endif  // FS_FLOW_KEY_P4
