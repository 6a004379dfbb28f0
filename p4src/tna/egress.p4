// tna/egress.p4 — the TNA egress pipeline: DCQCN and pre-drain marking, INT
// (source insertion, transit stamp, sink removal, reports), counters.
//
// Names as in the v1model program (v1model/egress.p4, ecn.p4, int.p4).

#ifndef FS_TNA_EGRESS_P4
#define FS_TNA_EGRESS_P4

#include "headers.p4"
#include "ecn.p4"
#include "int.p4"
#include "counters.p4"

control FsEgress(inout fs_egress_headers_t hdr, inout fs_egress_metadata_t meta,
                 in egress_intrinsic_metadata_t eg_intr_md,
                 in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                 inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                 inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    Ecn() ecn;
    IntEgress() int_egress;
    EgressCounters() counters;

    apply {
        ecn.apply(hdr, meta, eg_intr_md);
        int_egress.apply(hdr, meta, eg_intr_md, eg_prsr_md);
        // Neither leaves the switch.
        hdr.bridge.setInvalid();
        hdr.report_mirror.setInvalid();
        counters.apply(meta, eg_intr_md, eg_dprsr_md);
    }
}

#endif  // FS_TNA_EGRESS_P4
