// v1model/counters.p4 — the counters the controller and the lab read.
//
//   FsIngress.counters.rx_port         packets/bytes received, index = ingress port
//   FsIngress.counters.drops           packets/bytes dropped, index = DROP_* reason
//   FsIngress.counters.port_drops      packets/bytes dropped, index = port * 32 + reason
//   FsEgress.counters.tx_port          packets/bytes transmitted, index = egress port
// Per-entry (direct) counters live with their tables: sr.reservation,
// int_ingress.watchlist, ecn.predrain. CE marks: FsEgress.ecn.ce_marks.
// BMv2 drops in its traffic manager (full egress queue) are not visible to
// the P4 program and are not counted here.

#ifndef FS_COUNTERS_P4
#define FS_COUNTERS_P4

#include "headers.p4"

// Applied last in ingress: counts every received packet and, if the
// pipeline decided to drop it, drops it and counts the reason.
control IngressCounters(in fs_metadata_t meta, inout standard_metadata_t sm) {
    counter(FS_PORT_COUNT, CounterType.packets_and_bytes) rx_port;
    counter(FS_DROP_REASON_COUNT, CounterType.packets_and_bytes) drops;
    counter(FS_PORT_DROP_COUNT, CounterType.packets_and_bytes) port_drops;

    apply {
        rx_port.count((bit<32>)sm.ingress_port);
        if (meta.drop_reason != DROP_NONE) {
            mark_to_drop(sm);
            drops.count((bit<32>)meta.drop_reason);
            port_drops.count(((bit<32>)sm.ingress_port << 5) + (bit<32>)meta.drop_reason);
        }
    }
}

// Applied last in egress: counts what leaves each port.
control EgressCounters(in fs_metadata_t meta, in standard_metadata_t sm) {
    counter(FS_PORT_COUNT, CounterType.packets_and_bytes) tx_port;

    apply {
        if (meta.egress_drop == 0) {
            tx_port.count((bit<32>)sm.egress_port);
        }
    }
}

#endif  // FS_COUNTERS_P4
