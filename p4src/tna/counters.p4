// tna/counters.p4 — port, drop and report counters,
// the Tofino way of v1model/counters.p4.

#ifndef FS_TNA_COUNTERS_P4
#define FS_TNA_COUNTERS_P4

#include "headers.p4"

// v1model/counters.p4 (ingress part). drop_ctl 1 drops the packet but not
// its mirror copy, so an INT_DISCARD packet is still reported.
control IngressCounters(inout fs_ingress_metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Counter<bit<64>, PortId_t>(FS_PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) rx_port;
    Counter<bit<64>, bit<5>>(FS_DROP_REASON_COUNT, CounterType_t.PACKETS_AND_BYTES) drops;
    Counter<bit<64>, bit<14>>(FS_PORT_DROP_COUNT, CounterType_t.PACKETS_AND_BYTES) port_drops;

    apply {
        rx_port.count(ig_intr_md.ingress_port);
        // A header check's reason first, as v1model reports it.
        if (meta.drop_reason != DROP_NONE) {
            meta.final_drop_reason = meta.drop_reason;
        } else {
            meta.final_drop_reason = meta.fwd_drop_reason;
        }
        if (meta.final_drop_reason != DROP_NONE) {
            ig_dprsr_md.drop_ctl = 1;
            drops.count(meta.final_drop_reason[4:0]);
            port_drops.count(ig_intr_md.ingress_port ++ meta.final_drop_reason[4:0]);
        }
    }
}

// v1model/counters.p4 (egress part).
control EgressCounters(in fs_egress_metadata_t meta,
                       in egress_intrinsic_metadata_t eg_intr_md,
                       inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Counter<bit<64>, PortId_t>(FS_PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) tx_port;

    apply {
        if (meta.egress_drop == 1) {
            eg_dprsr_md.drop_ctl = 1;
        } else {
            tx_port.count(eg_intr_md.egress_port);
        }
    }
}

#endif  // FS_TNA_COUNTERS_P4
