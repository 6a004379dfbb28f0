// tna/segment_routing.p4 — SR-MPLS push and pop,
// the Tofino way of v1model/segment_routing.p4.

#ifndef FS_TNA_SEGMENT_ROUTING_P4
#define FS_TNA_SEGMENT_ROUTING_P4

#include "headers.p4"

// v1model/segment_routing.p4: reservation push at the ingress leaf, pop of
// the top label at every hop. TNA direct counters count in the actions.
control SegmentRouting(inout fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) reservation_counter;

    // Label i of the pushed stack (Tofino's instruction selection does not
    // take a whole header from a list expression).
#define FS_SET_MPLS(I) \
    action set_mpls_##I(mpls_label_t label, bit<3> tc, bit<1> bos) { \
        hdr.mpls[I].setValid(); \
        hdr.mpls[I].label = label; \
        hdr.mpls[I].tc = tc; \
        hdr.mpls[I].bos = bos; \
        hdr.mpls[I].ttl = hdr.ipv4.ttl; \
    }
    FS_SET_MPLS(0)
    FS_SET_MPLS(1)
    FS_SET_MPLS(2)
    FS_SET_MPLS(3)

    action push_1(bit<3> tc, mpls_label_t label0) {
        set_mpls_0(label0, tc, 1);
        hdr.ethernet.ether_type = ETHERTYPE_MPLS;
        meta.sr.labelled = 1;
        reservation_counter.count();
    }
    action push_2(bit<3> tc, mpls_label_t label0, mpls_label_t label1) {
        set_mpls_0(label0, tc, 0);
        set_mpls_1(label1, tc, 1);
        hdr.ethernet.ether_type = ETHERTYPE_MPLS;
        meta.sr.labelled = 1;
        reservation_counter.count();
    }
    action push_3(bit<3> tc, mpls_label_t label0, mpls_label_t label1,
                  mpls_label_t label2) {
        set_mpls_0(label0, tc, 0);
        set_mpls_1(label1, tc, 0);
        set_mpls_2(label2, tc, 1);
        hdr.ethernet.ether_type = ETHERTYPE_MPLS;
        meta.sr.labelled = 1;
        reservation_counter.count();
    }
    action push_4(bit<3> tc, mpls_label_t label0, mpls_label_t label1,
                  mpls_label_t label2, mpls_label_t label3) {
        set_mpls_0(label0, tc, 0);
        set_mpls_1(label1, tc, 0);
        set_mpls_2(label2, tc, 0);
        set_mpls_3(label3, tc, 1);
        hdr.ethernet.ether_type = ETHERTYPE_MPLS;
        meta.sr.labelled = 1;
        reservation_counter.count();
    }

    table reservation {
        key = {
            hdr.ipv4.src_addr : ternary @name("src_addr");
            hdr.ipv4.dst_addr : ternary @name("dst_addr");
            meta.flow.dst_qp  : ternary @name("dst_qp");
        }
        actions = {
            push_1;
            push_2;
            push_3;
            push_4;
            @defaultonly NoAction;
        }
        counters = reservation_counter;
        size = FS_RESERVATION_SIZE;
    }

    action forward_adjacency(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        meta.sr.forwarded = 1;
    }

    action unknown_label() {
        meta.fwd_drop_reason = DROP_MPLS_UNKNOWN_LABEL;
    }

    table adjacency {
        key = {
            hdr.mpls[0].label : exact @name("label");
        }
        actions = {
            forward_adjacency;
            @defaultonly unknown_label;
        }
        const default_action = unknown_label();
        size = FS_ADJACENCY_SIZE;
    }

    // The pop in one step: the labels below the top move up and the new top
    // (or, for the last label, IPv4) takes the top label's TTL - 1, as
    // pop_front followed by a TTL write would do in two dependent stages.
    action pop_to_label() {
        hdr.mpls[1].ttl = hdr.mpls[0].ttl - 1;
        hdr.mpls.pop_front(1);
    }
    action pop_to_ipv4() {
        hdr.ipv4.ttl = hdr.mpls[0].ttl - 1;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.mpls.pop_front(1);
    }

    apply {
        meta.sr.forwarded = 0;
        meta.sr.tc_valid = 0;
        // Ingress leaf: a plain IPv4 packet whose TTL allows forwarding may
        // match a reservation.
        if (!hdr.mpls[0].isValid() && hdr.ipv4.ttl > 1) {
            reservation.apply();
        }
        if (hdr.mpls[0].isValid()) {
            if (hdr.mpls[0].ttl <= 1) {
                meta.fwd_drop_reason = DROP_TTL_EXPIRED;
            } else {
                meta.sr.tc_valid = 1;
                meta.sr.tc = hdr.mpls[0].tc;
                adjacency.apply();
                if (meta.sr.forwarded == 1) {
                    if (hdr.mpls[1].isValid()) {
                        pop_to_label();
                    } else {
                        pop_to_ipv4();
                    }
                }
            }
        }
    }
}

#endif  // FS_TNA_SEGMENT_ROUTING_P4
