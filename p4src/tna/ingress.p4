// tna/ingress.p4 — the TNA ingress pipeline: validation, forwarding (SR
// adjacency or IPv4 LPM/ECMP), queue selection, INT decisions, counters.
//
// Control and object names are those of the v1model program
// (include/ingress.p4 and the files it includes), so the controller writes
// one P4Runtime name set to both targets. What is done the Tofino way is
// said where it happens.

#ifndef FS_TNA_INGRESS_P4
#define FS_TNA_INGRESS_P4

#include "headers.p4"
#include "../include/ecmp_hash.p4"

// Parser findings and header checks -> drop reason (include/validation.p4).
// Not checked on Tofino: a frame shorter than the IPv4 total length
// (DROP_IPV4_TRUNCATED): ingress does not know the frame length.
//
// The Tofino way: each check is one small condition setting one flag (a
// gateway takes 4 bytes of equality input and 12 bits of magnitude input,
// so the v1model if-else chain does not fit, and a 16-bit `<` is split
// into a zero test of the high bits and a compare of the low ones), all
// in parallel; a table then picks the first failed
// check in v1model's order.
control Validation(in fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    bit<1> partial = 0;
    bit<1> parser_other = 0;
    bit<1> parse_drop = 0;
    bit<1> ipv4_short = 0;
    bit<1> l4_udp_short = 0;
    bit<1> l4_tcp_short = 0;
    bit<1> int_invalid = 0;
    bit<1> checksum = 0;
    bit<1> udp_past_ipv4 = 0;

    // The room is computed by a table's action, so the compiler cannot
    // fold the subtraction back into the condition (a gateway cannot
    // subtract).
    action compute_ipv4_room() { meta.ipv4_room = hdr.ipv4.total_len |-| hdr.udp.length; }
    @hidden
    table ipv4_room {
        actions = { compute_ipv4_room; }
        const default_action = compute_ipv4_room();
        size = 1;
    }

    action set_reason(bit<8> reason) { meta.drop_reason = reason; }
    action use_parse_drop() { meta.drop_reason = meta.parse_drop; }

    @hidden
    table first_failed {
        key = {
            partial               : ternary;
            parser_other          : ternary;
            parse_drop            : ternary;
            hdr.ipv4.isValid()    : ternary;
            ipv4_short            : ternary;
            l4_udp_short          : ternary;
            l4_tcp_short          : ternary;
            int_invalid           : ternary;
            checksum              : ternary;
            udp_past_ipv4         : ternary;
        }
        actions = { set_reason; use_parse_drop; @defaultonly NoAction; }
        const entries = {
            (1, _, _, _, _, _, _, _, _, _): set_reason(DROP_TRUNCATED);
            (_, 1, _, _, _, _, _, _, _, _): set_reason(DROP_PARSER_OTHER);
            (_, _, 1, _, _, _, _, _, _, _): use_parse_drop();
            (_, _, _, false, _, _, _, _, _, _): set_reason(DROP_NOT_IPV4);
            (_, _, _, _, 1, _, _, _, _, _): set_reason(DROP_IPV4_INVALID);
            (_, _, _, _, _, 1, _, _, _, _): set_reason(DROP_L4_INVALID);
            (_, _, _, _, _, _, 1, _, _, _): set_reason(DROP_L4_INVALID);
            (_, _, _, _, _, _, _, 1, _, _): set_reason(DROP_INT_INVALID);
            (_, _, _, _, _, _, _, _, 1, _): set_reason(DROP_IPV4_CHECKSUM);
            (_, _, _, _, _, _, _, _, _, 1): set_reason(DROP_L4_INVALID);
        }
        size = 16;
    }

    apply {
        // UDP longer than the IPv4 payload: total_len - udp.length < 20,
        // saturating so a UDP length past total_len counts too.
        ipv4_room.apply();
        if ((ig_prsr_md.parser_err & PARSER_ERROR_PARTIAL_HDR) != 0) { partial = 1; }
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) { parser_other = 1; }
        if (meta.parse_drop != DROP_NONE) { parse_drop = 1; }
        if (hdr.ipv4.total_len[15:5] == 0 && hdr.ipv4.total_len[4:0] < 20) { ipv4_short = 1; }
        if (hdr.udp.isValid() && hdr.udp.length[15:3] == 0) { l4_udp_short = 1; }
        if (hdr.tcp.isValid() && hdr.tcp.data_offset < 5) { l4_tcp_short = 1; }
        if (hdr.int_shim.isValid() &&
            (hdr.int_shim.int_type != INT_TYPE_MD || hdr.int_shim.npt != 0 ||
             hdr.int_shim.len < INT_MD_HEADER_WORDS || hdr.int_md.ver != INT_MD_VERSION)) {
            int_invalid = 1;
        }
        if (meta.ipv4_checksum_error) { checksum = 1; }
        if (hdr.udp.isValid() && hdr.ipv4.flags[0:0] == 0) {
            if (meta.ipv4_room[15:5] == 0) {
                if (meta.ipv4_room[4:0] < 20) { udp_past_ipv4 = 1; }
            }
        }
        first_failed.apply();
    }
}

// include/flow_key.p4: the parser fills in the ports and the QP (see
// tna/parser.p4); the DSCP without the INT bit is computed here.
control FlowKey(in fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta) {
    apply {
        meta.flow.qos_dscp = hdr.ipv4.dscp & ~INT_DSCP_BIT;
    }
}

// include/routing.p4 the Tofino way: the same CRC-32 over the same fields
// (include/ecmp_hash.p4) computed by Hash<> into meta.flow.ecmp_hash, and an
// ActionSelector whose own hash is the identity over that value. The hash
// value is therefore bit for bit the BMv2 one. Which member a given hash
// picks is the Tofino selector's (FAIR mode: the driver lays the members out
// in the selector RAM and the hardware reduces the hash over the active
// members), not BMv2's `hash mod n` in creation order, so the planner's
// member-level ECMP prediction holds on BMv2 only.
control Routing(inout fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    Hash<bit<32>>(HashAlgorithm_t.CRC32) qp_aware_hash;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) five_tuple_hash;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) selector_hash;
    // The standard P4Info names the selector after its ActionProfile, so
    // the profile carries v1model's name (ecmp_selector).
    ActionProfile(FS_ECMP_SELECTOR_SIZE) ecmp_selector;
    ActionSelector(ecmp_selector, selector_hash, SelectorMode_t.FAIR,
                   FS_ECMP_MAX_GROUP_SIZE, FS_ECMP_GROUPS) ecmp_group_selector;

    bit<1> qp_aware = 1;
    bit<32> ecmp_seed = 0;

    /// Forward to a next hop: egress port and the MACs of the link, TTL - 1.
    action set_nexthop(PortId_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action hash_qp_aware() { qp_aware = 1; }
    action hash_five_tuple() { qp_aware = 0; }

    table hash_mode {
        key = {}
        actions = { hash_qp_aware; hash_five_tuple; }
        default_action = hash_qp_aware();
        size = 1;
    }

    action set_hash_seed(bit<32> seed) { ecmp_seed = seed; }

    table hash_seed {
        key = {}
        actions = { set_hash_seed; }
        default_action = set_hash_seed(0);
        size = 1;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr   : lpm @name("dst_addr");
            meta.flow.ecmp_hash : selector;
        }
        actions = {
            set_nexthop;
            @defaultonly NoAction;
        }
        implementation = ecmp_group_selector;
        size = FS_IPV4_LPM_SIZE;
    }

    // The hash does not wait for segment routing (it depends on the packet
    // only), so it is computed for every packet; the LPM runs for what SR
    // did not take (no label after the reservation lookup) and whose TTL
    // allows forwarding.
    apply {
        hash_mode.apply();
        hash_seed.apply();
        if (meta.flow.is_roce == 1 && qp_aware == 1) {
            meta.flow.ecmp_hash = qp_aware_hash.get(
                FS_ECMP_QP_AWARE_FIELDS(ecmp_seed, hdr, meta.flow));
        } else {
            meta.flow.ecmp_hash = five_tuple_hash.get(
                FS_ECMP_FIVE_TUPLE_FIELDS(ecmp_seed, hdr, meta.flow));
        }
        if (meta.sr.labelled == 0 && meta.ttl_expired == 0) {
            if (!ipv4_lpm.apply().hit) {
                meta.fwd_drop_reason = DROP_NO_ROUTE;
            }
        }
    }
}

// include/segment_routing.p4: reservation push at the ingress leaf, pop of
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

// include/priority.p4: the queue is TNA's qid (and the ingress CoS, for
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

// include/int.p4 (ingress part): the watchlist decides the source, the
// sink ports end INT. The sink mirrors the packet as ingress leaves it
// (I2E, session INT_REPORT_CLONE_SESSION, truncated by the session's
// maximum packet length) with the sink's view in the mirror header; egress
// turns the copy into a Telemetry Report.
control IntIngress(in fs_ingress_headers_t hdr, inout fs_ingress_metadata_t meta,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   in ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) watchlist_counter;

    action int_source(bit<8> max_hop, bit<16> instruction_bitmap,
                      bit<16> ds_instruction) {
        meta.int_source = 1;
        meta.int_max_hop = max_hop;
        meta.int_instruction_bitmap = instruction_bitmap;
        meta.int_ds_instruction = ds_instruction;
        watchlist_counter.count();
    }

    table watchlist {
        key = {
            hdr.ipv4.src_addr     : ternary @name("src_addr");
            hdr.ipv4.dst_addr     : ternary @name("dst_addr");
            meta.flow.l4_src_port : ternary @name("l4_src_port");
            meta.flow.l4_dst_port : ternary @name("l4_dst_port");
            meta.flow.dst_qp      : ternary @name("dst_qp");
        }
        actions = {
            int_source;
            @defaultonly NoAction;
        }
        counters = watchlist_counter;
        size = FS_INT_WATCHLIST_SIZE;
    }

    action set_sink() {
        meta.int_sink = 1;
    }

    table sink_ports {
        key = {
            ig_tm_md.ucast_egress_port : exact @name("egress_port");
        }
        actions = {
            set_sink;
            @defaultonly NoAction;
        }
        size = FS_INT_SINK_PORTS_SIZE;
    }

    // Report sampling (include/int.p4): the sink reports 1 in `every`
    // packets of a flow, counted per flow hash slot.
    action set_report_every(bit<16> every) {
        meta.int_report_every_m1 = every |-| 1;
    }

    table report_sampling {
        key = {}
        actions = { set_report_every; }
        default_action = set_report_every(1);
        size = 1;
    }

    Hash<bit<12>>(HashAlgorithm_t.CRC16) sample_hash;
    Register<bit<16>, bit<12>>(FS_INT_SAMPLE_SLOTS, 0) report_sample_count;
    RegisterAction<bit<16>, bit<12>, bit<1>>(report_sample_count) sample_tick = {
        void apply(inout bit<16> seen, out bit<1> fire) {
            if (seen >= meta.int_report_every_m1) {
                seen = 0;
                fire = 1;
            } else {
                seen = seen + 1;
                fire = 0;
            }
        }
    };

    apply {
        meta.int_source = 0;
        meta.int_sink = 0;
        meta.int_report_now = 0;
        report_sampling.apply();
        meta.int_sample_slot = sample_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                                 meta.flow.l4_src_port, meta.flow.l4_dst_port,
                                                 meta.flow.dst_qp });
        // TCP is watched too, for its entry's counter (what T+5 learns a
        // TCP job from); INT itself rides on UDP only.
        if ((hdr.udp.isValid() || hdr.tcp.isValid()) && !hdr.int_shim.isValid() &&
            hdr.ipv4.flags[0:0] == 0 && hdr.ipv4.frag_offset == 0) {
            watchlist.apply();
        }
        if (!hdr.udp.isValid()) {
            meta.int_source = 0;
        }
        // The sink port is looked up as soon as the egress port is known;
        // whether to report waits for the drop decisions (packets that are
        // dropped are not reported: v1model does not reach INT for them).
        if (hdr.int_shim.isValid() || meta.int_source == 1) {
            sink_ports.apply();
        }
        if (meta.int_sink == 1 &&
            meta.drop_reason == DROP_NONE && meta.fwd_drop_reason == DROP_NONE) {
            meta.int_sink_port = ig_tm_md.ucast_egress_port;
            meta.int_sink_queue = ig_tm_md.qid;
            meta.int_report_now = sample_tick.execute(meta.int_sample_slot);
            if (hdr.int_md.isValid() && hdr.int_md.d == 1) {
                meta.fwd_drop_reason = DROP_INT_DISCARD;
            }
        }
        if (meta.int_report_now == 1) {
            meta.mirror_session = (MirrorId_t)INT_REPORT_CLONE_SESSION;
            meta.mirror_kind = FS_PKT_REPORT;
            ig_dprsr_md.mirror_type = FS_MIRROR_TYPE_REPORT;
        }
    }
}

// include/counters.p4 (ingress part). drop_ctl 1 drops the packet but not
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
