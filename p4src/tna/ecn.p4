// tna/ecn.p4 — DCQCN and pre-drain ECN marking,
// the Tofino way of v1model/ecn.p4.

#ifndef FS_TNA_ECN_P4
#define FS_TNA_ECN_P4

#include "headers.p4"

// v1model/ecn.p4 the Tofino way. The queue depth is eg_intr_md.enq_qdepth,
// in 80-byte cells (not packets as on BMv2): the controller converts Kmin
// and Kmax (controller/foresight target module). Between Kmin and Kmax a
// packet is marked with probability Pmax, flat, not the linear DCQCN ramp:
// the ramp needs a multiply the MAU does not have, and the Wred extern,
// which ramps in hardware, is configured through BF-RT only, so a
// P4Runtime controller could not set it. Above Kmax every packet is marked.
control Ecn(inout fs_egress_headers_t hdr, inout fs_egress_metadata_t meta,
            in egress_intrinsic_metadata_t eg_intr_md) {

    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) predrain_counter;
    // CE marks per egress port (0..511: queue depth, 512 + port: pre-drain).
    Counter<bit<32>, bit<10>>(1024, CounterType_t.PACKETS) ce_marks;
    Random<bit<16>>() queue_random;
    Random<bit<16>>() predrain_random;

    action set_dcqcn(bit<19> kmin, bit<19> kmax, bit<16> pmax) {
        // Zero once the queue reaches the threshold (the subtrahend of a
        // Tofino subtraction cannot be action data, so the test is q >= K
        // where v1model has q > K).
        meta.dcqcn_hit = 1;
        meta.kmax_slack = kmax |-| eg_intr_md.enq_qdepth;
        meta.kmin_slack = kmin |-| eg_intr_md.enq_qdepth;
        meta.under_pmax = pmax |-| meta.queue_random;
    }

    table dcqcn_port {
        key = {
            eg_intr_md.egress_port : exact @name("egress_port");
            // The packet's egress queue, its low 3 bits (the traffic
            // class, as v1model's priority: 8 queues per port).
            eg_intr_md.egress_qid[2:0] : ternary @name("qid");
        }
        actions = {
            set_dcqcn;
            @defaultonly NoAction;
        }
        size = FS_DCQCN_PORTS_SIZE;
    }

    action predrain_mark(bit<16> probability) {
        meta.predrain_hit = 1;
        meta.predrain_probability = probability;
        meta.under_probability = probability |-| meta.predrain_random;
        predrain_counter.count();
    }

    table predrain {
        key = {
            eg_intr_md.egress_port : exact @name("egress_port");
            hdr.ipv4.src_addr      : ternary @name("src_addr");
            hdr.ipv4.dst_addr      : ternary @name("dst_addr");
            hdr.bridge.dst_qp      : ternary @name("dst_qp");
        }
        actions = {
            predrain_mark;
            @defaultonly NoAction;
        }
        counters = predrain_counter;
        size = FS_PREDRAIN_SIZE;
    }

    action mark_queue() {
        hdr.ipv4.ecn = ECN_CE;
        meta.ce_marked = 1;
        meta.ce_index = 1w0 ++ eg_intr_md.egress_port;
    }
    action mark_predrain() {
        hdr.ipv4.ecn = ECN_CE;
        meta.ce_marked = 1;
        meta.ce_index = 1w1 ++ eg_intr_md.egress_port;
    }
    action no_mark() {}

    // The v1model marking decision in one lookup. An ECN-capable packet that
    // is not yet CE is marked for its queue when the port has a DCQCN
    // profile and the queue is at Kmax, or at Kmin with the draw under Pmax;
    // otherwise for pre-drain when its flow has a probability, 1 (0xffff) or
    // with the draw under it. A zero slack is a threshold reached; a
    // non-zero "under" is a draw that falls under its probability.
    @hidden
    table mark {
        key = {
            hdr.ipv4.ecn              : ternary;
            meta.dcqcn_hit            : ternary;
            meta.kmax_slack           : ternary;
            meta.kmin_slack           : ternary;
            meta.under_pmax           : ternary;
            meta.predrain_hit         : ternary;
            meta.predrain_probability : ternary;
            meta.under_probability    : ternary;
        }
        actions = { mark_queue; mark_predrain; no_mark; }
        const default_action = no_mark();
        // ecn, DCQCN: hit, Kmax slack, Kmin slack, under Pmax;
        // pre-drain: hit, probability, under it.
        const entries = {
            (ECN_NOT_ECT, _, _, _, _, _, _, _): no_mark();
            (ECN_CE, _, _, _, _, _, _, _): no_mark();
            (_, 1, 0, _, _, _, _, _): mark_queue();
            (_, 1, _, 0, 0, 1, 0xffff, _): mark_predrain();
            (_, 1, _, 0, 0, 1, _, 0): no_mark();
            (_, 1, _, 0, 0, 1, _, _): mark_predrain();
            (_, 1, _, 0, 0, _, _, _): no_mark();
            (_, 1, _, 0, _, _, _, _): mark_queue();
            (_, _, _, _, _, 1, 0xffff, _): mark_predrain();
            (_, _, _, _, _, 1, _, 0): no_mark();
            (_, _, _, _, _, 1, _, _): mark_predrain();
        }
        size = 16;
    }

    // Flat on purpose: on Tofino 1 a condition guarding several tables makes
    // everything after it wait for all of them.
    apply {
        meta.queue_random = queue_random.get();
        meta.predrain_random = predrain_random.get();
        // Not on report copies: their inner packet is not on this port.
        if (meta.report == 0 && hdr.ipv4.isValid()) {
            dcqcn_port.apply();
        }
        if (meta.report == 0 && hdr.ipv4.isValid()) {
            predrain.apply();
        }
        mark.apply();
        if (meta.ce_marked == 1) {
            ce_marks.count(meta.ce_index);
        }
    }
}

#endif  // FS_TNA_ECN_P4
