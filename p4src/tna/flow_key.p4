// tna/flow_key.p4 — the flow key, the Tofino way of v1model/flow_key.p4.

#ifndef FS_TNA_FLOW_KEY_P4
#define FS_TNA_FLOW_KEY_P4

#include "headers.p4"

// v1model/flow_key.p4: the parser fills in the ports and the QP (see
// tna/parser.p4); the DSCP without the INT bit is computed here.
control FlowKey(in fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta) {
    apply {
        meta.flow.qos_dscp = hdr.ipv4.dscp & ~INT_DSCP_BIT;
    }
}

#endif  // FS_TNA_FLOW_KEY_P4
