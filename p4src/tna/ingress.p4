// tna/ingress.p4 — the TNA ingress pipeline: validation, forwarding (SR
// adjacency or IPv4 LPM/ECMP), queue selection, INT decisions, counters.
//
// Control and object names are those of the v1model program
// (v1model/ingress.p4 and the files it includes), so the controller writes
// one P4Runtime name set to both targets. What is done the Tofino way is
// said where it happens.

#ifndef FS_TNA_INGRESS_P4
#define FS_TNA_INGRESS_P4

#include "headers.p4"
#include "validation.p4"
#include "flow_key.p4"
#include "routing.p4"
#include "segment_routing.p4"
#include "priority.p4"
#include "int.p4"
#include "counters.p4"

control FsIngress(inout fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta,
                  in ingress_intrinsic_metadata_t ig_intr_md,
                  in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                  inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                  inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Validation() validation;
    FlowKey() flow_key;
    SegmentRouting() sr;
    Routing() routing;
    Qos() qos;
    IntIngress() int_ingress;
    IngressCounters() counters;

    // Unlike v1model, forwarding does not wait for the header checks: they
    // run side by side and the drop is decided at the end (header checks'
    // reasons in meta.drop_reason, forwarding's in meta.fwd_drop_reason).
    // A chain of dependent steps costs a Tofino stage each; 12 is all there is.
    apply {
        meta.ingress_ts = ig_prsr_md.global_tstamp;
        meta.ingress_port = ig_intr_md.ingress_port;
        validation.apply(hdr, meta, ig_prsr_md);
        flow_key.apply(hdr, meta);
        if (!hdr.mpls[0].isValid() && hdr.ipv4.ttl <= 1) {
            meta.ttl_expired = 1;
            meta.fwd_drop_reason = DROP_TTL_EXPIRED;
        }
        sr.apply(hdr, meta, ig_tm_md);
        routing.apply(hdr, meta, ig_tm_md);
        qos.apply(hdr, meta, ig_tm_md);
        int_ingress.apply(hdr, meta, ig_dprsr_md, ig_tm_md);

        // What egress needs to know (fs_bridge_t).
        hdr.bridge.setValid();
        hdr.bridge.pkt_kind = FS_PKT_BRIDGED;
        hdr.bridge.dst_qp = meta.flow.dst_qp;
        hdr.bridge.ingress_ts = meta.ingress_ts;
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;
        hdr.bridge.int_source = meta.int_source;
        hdr.bridge.int_sink = meta.int_sink;
        hdr.bridge.int_stack_too_deep = meta.int_stack_too_deep;
        hdr.bridge.int_max_hop = meta.int_max_hop;
        hdr.bridge.int_instruction_bitmap = meta.int_instruction_bitmap;
        hdr.bridge.int_ds_instruction = meta.int_ds_instruction;

        counters.apply(meta, ig_intr_md, ig_dprsr_md);
    }
}

#endif  // FS_TNA_INGRESS_P4
