// v1model/ingress.p4 — the v1model ingress pipeline: validation, forwarding (SR
// adjacency or IPv4 LPM/ECMP), queue selection, INT decisions, counters.

#ifndef FS_INGRESS_P4
#define FS_INGRESS_P4

#include "headers.p4"
#include "validation.p4"
#include "flow_key.p4"
#include "routing.p4"
#include "segment_routing.p4"
#include "priority.p4"
#include "int.p4"
#include "counters.p4"

control FsIngress(inout headers_t hdr, inout fs_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    Validation() validation;
    FlowKey() flow_key;
    SegmentRouting() sr;
    Routing() routing;
    Qos() qos;
    IntIngress() int_ingress;
    IngressCounters() counters;

    apply {
        meta.drop_reason = DROP_NONE;
        meta.len_delta = 0;
        validation.apply(hdr, meta, standard_metadata);
        if (meta.drop_reason == DROP_NONE) {
            flow_key.apply(hdr, meta);
            if (!hdr.mpls[0].isValid() && hdr.ipv4.ttl <= 1) {
                meta.drop_reason = DROP_TTL_EXPIRED;
            } else {
                // An SR stack (received, or pushed here by a reservation)
                // names the adjacency; otherwise route by LPM.
                sr.apply(hdr, meta, standard_metadata);
                if (meta.drop_reason == DROP_NONE && meta.sr.forwarded == 0) {
                    routing.apply(hdr, meta, standard_metadata);
                }
            }
        }
        if (meta.drop_reason == DROP_NONE) {
            qos.apply(hdr, meta, standard_metadata);
            int_ingress.apply(hdr, meta, standard_metadata);
        }
        counters.apply(meta, standard_metadata);
    }
}

#endif  // FS_INGRESS_P4
