// tna/priority.p4 — queue selection, the Tofino way of v1model/priority.p4.

#ifndef FS_TNA_PRIORITY_P4
#define FS_TNA_PRIORITY_P4

#include "headers.p4"

// v1model/priority.p4: the queue is TNA's qid (and the ingress CoS, for
// PFC): CNPs 7, reserved traffic its SR traffic class, the rest by DSCP.
// The controller maps queues to priorities in the traffic manager's
// configuration, which P4Runtime does not reach (see p4src/README.md).
control Qos(in fs_ingress_headers_t hdr, in fs_ingress_metadata_t meta,
            inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    action set_priority(bit<3> priority) {
        ig_tm_md.qid = (QueueId_t)priority;
        ig_tm_md.ingress_cos = priority;
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
        ig_tm_md.qid = 0;
        ig_tm_md.ingress_cos = 0;
        if (meta.flow.qos_dscp == DSCP_CNP ||
            (hdr.bth.isValid() && hdr.bth.opcode == BTH_OPCODE_CNP)) {
            ig_tm_md.qid = (QueueId_t)PRIORITY_CNP;
            ig_tm_md.ingress_cos = PRIORITY_CNP;
        } else if (meta.sr.tc_valid == 1) {
            ig_tm_md.qid = (QueueId_t)meta.sr.tc;
            ig_tm_md.ingress_cos = meta.sr.tc;
        } else {
            dscp_priority.apply();
        }
    }
}

#endif  // FS_TNA_PRIORITY_P4
