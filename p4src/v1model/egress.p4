// v1model/egress.p4 — the v1model egress pipeline: ECN/pre-drain marking, INT
// (source, transit, sink, reports), counters.

#ifndef FS_EGRESS_P4
#define FS_EGRESS_P4

#include "headers.p4"
#include "ecn.p4"
#include "int.p4"
#include "counters.p4"

control FsEgress(inout headers_t hdr, inout fs_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    Ecn() ecn;
    IntEgress() int_egress;
    EgressCounters() counters;

    apply {
        meta.egress_drop = 0;
        if (standard_metadata.instance_type != INSTANCE_TYPE_INGRESS_CLONE) {
            ecn.apply(hdr, meta, standard_metadata);
        }
        int_egress.apply(hdr, meta, standard_metadata);
        counters.apply(meta, standard_metadata);
    }
}

#endif  // FS_EGRESS_P4
