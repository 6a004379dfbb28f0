// v1model/priority.p4 — choose the BMv2 egress priority queue.
//
// In order:
//   1. CNPs (DSCP 48 or BTH opcode 0x81) -> queue 7, so congestion feedback
//      overtakes the data it throttles;
//   2. packets carrying an SR stack at this switch (reserved flows, pushed
//      here or upstream) -> the label's traffic class, which the controller
//      chose in the reservation entry;
//   3. everything else -> FsIngress.qos.dscp_priority (exact DSCP with the
//      INT bit masked out), default queue 0.
// BMv2 serves the highest priority queue first (strict priority); it needs
// simple_switch_grpc -- --priority-queues 8, otherwise any priority > 0 is
// out of range and BMv2 drops the packet ("Priority out of range").

#ifndef FS_PRIORITY_P4
#define FS_PRIORITY_P4

#include "headers.p4"

control Qos(in headers_t hdr, in fs_metadata_t meta,
            inout standard_metadata_t sm) {

    action set_priority(bit<3> priority) {
        sm.priority = priority;
    }

    table dscp_priority {
        key = {
            meta.flow.qos_dscp : exact @name("dscp");
        }
        actions = {
            set_priority;
            @defaultonly NoAction;
        }
        size = FS_DSCP_PRIORITY_SIZE;
    }

    apply {
        sm.priority = 0;
        if (meta.flow.qos_dscp == DSCP_CNP ||
            (hdr.bth.isValid() && hdr.bth.opcode == BTH_OPCODE_CNP)) {
            sm.priority = PRIORITY_CNP;
        } else if (meta.sr.tc_valid == 1) {
            sm.priority = meta.sr.tc;
        } else {
            dscp_priority.apply();
        }
    }
}

#endif  // FS_PRIORITY_P4
