// v1model/segment_routing.p4 — SR-MPLS push at the ingress leaf, pop at every hop.
//
// Reservation (ingress leaf): FsIngress.sr.reservation matches IPv4
// source/destination and the RoCEv2 destination QP (ternary, with priority)
// and pushes a stack of 1..4 adjacency labels with a traffic class. The stack
// covers the hops starting at the ingress leaf itself, so the same switch pops
// its own label in the same pass.
//
// Pop (every switch, including the ingress leaf right after the push): the top
// label is looked up in FsIngress.sr.adjacency, which names the egress port
// and the link's MACs; the label is popped and the packet leaves on that
// adjacency. Labels are local (the team convention is 1000 + port, but the
// data plane only trusts the table). Popping the bottom label restores
// ethertype IPv4; later hops route the packet by LPM. An unknown label is
// dropped (DROP_MPLS_UNKNOWN_LABEL), a stack deeper than 4 never gets here
// (the parser flags it, DROP_MPLS_TOO_DEEP).
//
// Policing: the entry's direct meter runs at the flow's granted rate (the
// controller writes CIR = PIR = grant and a burst of a few ms). A packet the
// meter does not colour green is beyond the grant: it still takes the pinned
// path (moving it would reorder the flow) but every pushed label carries
// PRIORITY_DEMOTED, so each hop queues it below all other traffic, and
// FsIngress.sr.demoted counts it per ingress port. An entry without a meter
// configuration is never policed (BMv2 colours it green).
//
// TTL, uniform model (RFC 3443): pushed labels take the IPv4 TTL; each hop
// decrements the top label's TTL once and copies it to the next label, or to
// the IPv4 header when it pops the bottom one. A reserved packet therefore
// leaves the fabric with the same IPv4 TTL as a routed one. A top label with
// TTL <= 1 is dropped (DROP_TTL_EXPIRED).

#ifndef FS_SEGMENT_ROUTING_P4
#define FS_SEGMENT_ROUTING_P4

#include "headers.p4"

control SegmentRouting(inout headers_t hdr, inout fs_metadata_t meta,
                       inout standard_metadata_t sm) {

    // Packets and bytes per reservation entry (BMv2 updates a direct
    // counter whenever its entry matches).
    direct_counter(CounterType.packets_and_bytes) reservation_counter;
    // The flow's grant (bytes), configured per entry by the controller.
    direct_meter<bit<2>>(MeterType.bytes) reservation_meter;
    // Packets/bytes beyond their grant, index = ingress port.
    counter(FS_PORT_COUNT, CounterType.packets_and_bytes) demoted;

    action push_common(bit<3> tc) {
        reservation_meter.read(meta.sr.color);
        hdr.ethernet.ether_type = ETHERTYPE_MPLS;
        meta.sr.reserved = 1;
        meta.sr.tc_valid = 1;
        meta.sr.tc = tc;
    }

    /// Push one adjacency label (the ingress leaf's own).
    action push_1(bit<3> tc, mpls_label_t label0) {
        hdr.mpls[0].setValid();
        hdr.mpls[0] = { label0, tc, 1, hdr.ipv4.ttl };
        meta.len_delta = meta.len_delta + 4;
        push_common(tc);
    }
    /// Push two labels; label0 is the top (popped first, at this switch).
    action push_2(bit<3> tc, mpls_label_t label0, mpls_label_t label1) {
        hdr.mpls[0].setValid();
        hdr.mpls[0] = { label0, tc, 0, hdr.ipv4.ttl };
        hdr.mpls[1].setValid();
        hdr.mpls[1] = { label1, tc, 1, hdr.ipv4.ttl };
        meta.len_delta = meta.len_delta + 8;
        push_common(tc);
    }
    action push_3(bit<3> tc, mpls_label_t label0, mpls_label_t label1,
                  mpls_label_t label2) {
        hdr.mpls[0].setValid();
        hdr.mpls[0] = { label0, tc, 0, hdr.ipv4.ttl };
        hdr.mpls[1].setValid();
        hdr.mpls[1] = { label1, tc, 0, hdr.ipv4.ttl };
        hdr.mpls[2].setValid();
        hdr.mpls[2] = { label2, tc, 1, hdr.ipv4.ttl };
        meta.len_delta = meta.len_delta + 12;
        push_common(tc);
    }
    action push_4(bit<3> tc, mpls_label_t label0, mpls_label_t label1,
                  mpls_label_t label2, mpls_label_t label3) {
        hdr.mpls[0].setValid();
        hdr.mpls[0] = { label0, tc, 0, hdr.ipv4.ttl };
        hdr.mpls[1].setValid();
        hdr.mpls[1] = { label1, tc, 0, hdr.ipv4.ttl };
        hdr.mpls[2].setValid();
        hdr.mpls[2] = { label2, tc, 0, hdr.ipv4.ttl };
        hdr.mpls[3].setValid();
        hdr.mpls[3] = { label3, tc, 1, hdr.ipv4.ttl };
        meta.len_delta = meta.len_delta + 16;
        push_common(tc);
    }

    /// Beyond the grant: every pushed label (and so every hop) queues the
    /// packet at PRIORITY_DEMOTED.
    @hidden action demote() {
        hdr.mpls[0].tc = PRIORITY_DEMOTED;
        if (hdr.mpls[1].isValid()) { hdr.mpls[1].tc = PRIORITY_DEMOTED; }
        if (hdr.mpls[2].isValid()) { hdr.mpls[2].tc = PRIORITY_DEMOTED; }
        if (hdr.mpls[3].isValid()) { hdr.mpls[3].tc = PRIORITY_DEMOTED; }
        demoted.count((bit<32>)sm.ingress_port);
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
        meters = reservation_meter;
        size = FS_RESERVATION_SIZE;
    }

    /// Leave through the adjacency the top label names.
    action forward_adjacency(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        sm.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        meta.sr.forwarded = 1;
    }

    action unknown_label() {
        meta.drop_reason = DROP_MPLS_UNKNOWN_LABEL;
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

    apply {
        // Ingress leaf: a plain IPv4 packet may match a reservation.
        if (!hdr.mpls[0].isValid()) {
            meta.sr.color = METER_GREEN;
            if (reservation.apply().hit && meta.sr.color != METER_GREEN) {
                demote();
            }
        }
        if (hdr.mpls[0].isValid()) {
            if (hdr.mpls[0].ttl <= 1) {
                meta.drop_reason = DROP_TTL_EXPIRED;
            } else {
                meta.sr.tc_valid = 1;
                meta.sr.tc = hdr.mpls[0].tc;
                adjacency.apply();
                if (meta.sr.forwarded == 1) {
                    bit<8> ttl = hdr.mpls[0].ttl - 1;
                    hdr.mpls.pop_front(1);
                    meta.len_delta = meta.len_delta - 4;
                    if (hdr.mpls[0].isValid()) {
                        hdr.mpls[0].ttl = ttl;
                    } else {
                        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
                        hdr.ipv4.ttl = ttl;
                    }
                }
            }
        }
    }
}

#endif  // FS_SEGMENT_ROUTING_P4
