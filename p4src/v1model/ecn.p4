// v1model/ecn.p4 — DCQCN congestion point and per-flow pre-drain marking.
//
// DCQCN (Zhu et al., SIGCOMM 2015), per egress port: with q the depth of the
// packet's egress queue when it was enqueued,
//     q <= Kmin          no mark
//     Kmin < q <= Kmax   mark with probability Pmax * (q - Kmin) / (Kmax - Kmin)
//     q > Kmax           mark
// Kmin/Kmax are in packets (BMv2 counts queue depth in packets) and Pmax in
// 1/65536 (65535 ~ 1.0). FsEgress.ecn.dcqcn_port holds the profiles per
// (egress port, queue): the queue is ternary, so a port's profile is one
// entry for all its queues, and a higher-priority entry gives one queue its
// own (the controller lowers a port's thresholds around a reserved burst
// for every queue but the reserved one, so reserved traffic is not marked
// by its own protection). Ports without a profile never mark on queue
// depth.
//
// Pre-drain: FsEgress.ecn.predrain lists competing flows per egress port
// that the controller wants slowed before a reserved burst arrives; a match
// marks whatever the queue depth, with probability probability/65536
// (0xffff = always).
//
// Only ECN-capable packets (ECT(0), ECT(1)) are marked CE; CE stays CE and
// Not-ECT packets are never marked (nor dropped: this congestion point does
// no WRED dropping). The IPv4 header is marked also under an SR label stack.
//
// BMv2 quirks: queue depth stays 0 unless the egress queue is rate-limited
// (simple_switch_CLI set_queue_rate), since otherwise egress drains as fast
// as ingress fills; and the rate and capacity are set only over Thrift, not
// P4Runtime. Since BMv2 1.15 enq_qdepth is the depth of the packet's own
// priority queue (older versions summed a port's priority queues).

#ifndef FS_ECN_P4
#define FS_ECN_P4

#include "headers.p4"

control Ecn(inout headers_t hdr, inout fs_metadata_t meta,
            in standard_metadata_t sm) {

    direct_counter(CounterType.packets_and_bytes) predrain_counter;
    // CE marks applied, per egress port (index 0..511) for queue-depth
    // marking and at index 512 + port for pre-drain marking.
    counter(1024, CounterType.packets) ce_marks;

    /// DCQCN marking profile of this egress port.
    action set_dcqcn(bit<19> kmin, bit<19> kmax, bit<16> pmax) {
        meta.ecn.kmin = kmin;
        meta.ecn.kmax = kmax;
        meta.ecn.pmax = pmax;
    }

    table dcqcn_port {
        key = {
            sm.egress_port : exact @name("egress_port");
            // The packet's priority queue, chosen in ingress (qos).
            sm.priority    : ternary @name("qid");
        }
        actions = {
            set_dcqcn;
            @defaultonly NoAction;
        }
        size = FS_DCQCN_PORTS_SIZE;
    }

    /// CE-mark this competing flow on this port, with probability/65536.
    action predrain_mark(bit<16> probability) {
        meta.ecn.predrain_probability = probability;
    }

    table predrain {
        key = {
            sm.egress_port    : exact @name("egress_port");
            hdr.ipv4.src_addr : ternary @name("src_addr");
            hdr.ipv4.dst_addr : ternary @name("dst_addr");
            meta.flow.dst_qp  : ternary @name("dst_qp");
        }
        actions = {
            predrain_mark;
            @defaultonly NoAction;
        }
        counters = predrain_counter;
        size = FS_PREDRAIN_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            bool queue_mark = false;
            if (dcqcn_port.apply().hit) {
                bit<19> q = sm.enq_qdepth;
                if (q > meta.ecn.kmax) {
                    queue_mark = true;
                } else if (q > meta.ecn.kmin) {
                    bit<16> r;
                    random(r, 0, 0xffff);
                    // r/65536 < pmax/65536 * (q - kmin)/(kmax - kmin)
                    bit<64> lhs = (bit<64>)r * (bit<64>)(meta.ecn.kmax - meta.ecn.kmin);
                    bit<64> rhs = (bit<64>)meta.ecn.pmax * (bit<64>)(q - meta.ecn.kmin);
                    if (lhs < rhs) {
                        queue_mark = true;
                    }
                }
            }
            bool predrain_mark_now = false;
            if (predrain.apply().hit) {
                if (meta.ecn.predrain_probability == 0xffff) {
                    predrain_mark_now = true;
                } else {
                    bit<16> r2;
                    random(r2, 0, 0xffff);
                    if (r2 < meta.ecn.predrain_probability) {
                        predrain_mark_now = true;
                    }
                }
            }
            if (hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE) {
                if (queue_mark) {
                    hdr.ipv4.ecn = ECN_CE;
                    ce_marks.count((bit<32>)sm.egress_port);
                } else if (predrain_mark_now) {
                    hdr.ipv4.ecn = ECN_CE;
                    ce_marks.count(512 + (bit<32>)sm.egress_port);
                }
            }
        }
    }
}

#endif  // FS_ECN_P4
