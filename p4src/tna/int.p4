// tna/int.p4 — INT-MD source, transit, sink and reports,
// the Tofino way of v1model/int.p4.

#ifndef FS_TNA_INT_P4
#define FS_TNA_INT_P4

#include "headers.p4"

// v1model/int.p4 (ingress part): the watchlist decides the source, the
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

    // Report sampling (v1model/int.p4): the sink reports 1 in `every`
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

// v1model/int.p4 (egress part) the Tofino way.
//   * Units: timestamps and hop latency in nanoseconds (global timestamp,
//     48 bits, zero-extended); queue occupancy = enq_qdepth in 80-byte
//     cells; queue id = TNA qid (egress_qid).
//   * Reports: built from the sink's I2E mirror copy, as on BMv2; the sink's
//     own entry takes its ports, queue and ingress time from the mirror
//     header and its occupancy and transmitted bytes from the registers the
//     data packets update. The copy's length is the mirror session's
//     maximum packet length (the controller sets it, see the target module);
//     the report's lengths end the inner packet after the BTH / INT stack as
//     on BMv2, so any bytes past them are IP padding to the collector.
//   * No Checksum Complement: INT is inserted only into, and stamped only
//     onto, packets whose UDP checksum is zero (RoCEv2 always is); others
//     pass untouched.
//   * The stack is parsed up to FS_TNA_INT_STACK_WORDS words; a sink that
//     sees a deeper one cannot remove it and drops the packet (reports
//     counter index 3).
//
// The v1model control is a chain of decisions, each waiting for the one
// before; on Tofino every link of such a chain is a stage. Here the steps
// are laid out so that each waits only for what it needs:
//   1. `int_role` (one TCAM lookup) says what this hop does with INT and
//      which instruction bitmap sizes its metadata; a source inserts the
//      INT headers in the same action;
//   2. `hop_size_a` and `hop_size_b` size this hop's metadata from that
//      bitmap; their sum is the hop's words and bytes;
//   3. one decision pushes the hop (source, or a transit whose stack has
//      room), sets the E bit (out of hops) or the M bit (past the port's
//      MTU), or strips the stack (sink);
//   4. the stamp values, computed beside all this, are written into the
//      headers the instructions ask for; a report copy becomes a report.
const bit<3> FS_INT_PASS = 0;       // no INT work at this hop
const bit<3> FS_INT_SOURCE = 1;     // insert INT, then stamp this hop
const bit<3> FS_INT_TRANSIT = 2;    // stamp this hop if the stack has room
const bit<3> FS_INT_SINK = 3;       // remove INT
const bit<3> FS_INT_SINK_TOO_DEEP = 4;  // remove INT: the stack was not parsed

// pkt_length counts the 18-byte bridged header, which does not leave.
const bit<16> FS_MINUS_BRIDGE = 0xffee;         // -18
const bit<16> FS_MINUS_BRIDGE_PLUS_INT = 0xfffe;  // -18 + the 16 bytes a source inserts

control IntEgress(inout fs_egress_headers_t hdr, inout fs_egress_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md) {

    Register<bit<32>, PortId_t>(FS_PORT_COUNT, 0) port_tx_bytes;
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_tx_bytes) tx_bytes_add = {
        void apply(inout bit<32> value, out bit<32> before) {
            before = value;
            value = value + (bit<32>)meta.tx_bytes_add;
        }
    };
    RegisterAction<bit<32>, PortId_t, bit<32>>(port_tx_bytes) tx_bytes_read = {
        void apply(inout bit<32> value, out bit<32> now) {
            now = value;
        }
    };

    // The INT queue word (queue id 8 ++ occupancy 24) each (port, queue
    // 0..7) had when its latest packet was enqueued, for the sink's entry
    // in reports.
    Register<bit<32>, bit<12>>(FS_PORT_QUEUE_COUNT, 0) queue_occupancy;
    RegisterAction<bit<32>, bit<12>, bit<32>>(queue_occupancy) occupancy_write = {
        void apply(inout bit<32> value) {
            value = meta.queue_word;
        }
    };
    RegisterAction<bit<32>, bit<12>, bit<32>>(queue_occupancy) occupancy_read = {
        void apply(inout bit<32> value, out bit<32> now) {
            now = value;
        }
    };

    Register<bit<32>, bit<1>>(1, 0) report_seq_no;
    RegisterAction<bit<32>, bit<1>, bit<32>>(report_seq_no) next_seq_no = {
        void apply(inout bit<32> value, out bit<32> seq) {
            seq = value;
            value = value + 1;
        }
    };

    // Report copies: 0 sent, 1 no collector configured, 2 too long (> 255
    // words), 3 (TNA only) data packets dropped at a sink whose INT stack
    // was deeper than the parser holds.
    Counter<bit<64>, bit<2>>(4, CounterType_t.PACKETS_AND_BYTES) reports;

    action set_node_id(bit<32> node_id) {
        meta.node_id = node_id;
    }

    table node_config {
        key = {}
        actions = { set_node_id; }
        default_action = set_node_id(0);
        size = 1;
    }

    // The report encapsulation, whole but for its lengths and sequence
    // number (a copy that is not sent never leaves, so its headers may be
    // set before that is known).
    action set_collector(mac_addr_t src_mac, mac_addr_t dst_mac,
                         ipv4_addr_t src_addr, ipv4_addr_t collector_addr,
                         bit<16> src_port, bit<16> collector_port) {
        hdr.report_ethernet.setValid();
        hdr.report_ethernet.dst_addr = dst_mac;
        hdr.report_ethernet.src_addr = src_mac;
        hdr.report_ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.report_ipv4.setValid();
        hdr.report_ipv4.version = 4;
        hdr.report_ipv4.ihl = 5;
        hdr.report_ipv4.dscp = 0;
        hdr.report_ipv4.ecn = 0;
        hdr.report_ipv4.identification = 0;
        hdr.report_ipv4.flags = 0b010;
        hdr.report_ipv4.frag_offset = 0;
        hdr.report_ipv4.ttl = 64;
        hdr.report_ipv4.protocol = IP_PROTO_UDP;
        hdr.report_ipv4.src_addr = src_addr;
        hdr.report_ipv4.dst_addr = collector_addr;
        hdr.report_udp.setValid();
        hdr.report_udp.src_port = src_port;
        hdr.report_udp.dst_port = collector_port;
        hdr.report_udp.checksum = 0;
        hdr.report_group.setValid();
        hdr.report_group.ver = REPORT_VERSION;
        hdr.report_group.hw_id = 0;
        hdr.report_group.node_id = meta.node_id;
        hdr.report_individual.setValid();
        hdr.report_individual.rep_type = REPORT_TYPE_INT;
        hdr.report_individual.in_type = REPORT_INNER_IPV4;
        hdr.report_individual.md_length = 0;
        hdr.report_individual.d = 0;
        hdr.report_individual.q = 0;
        hdr.report_individual.f = 1;
        hdr.report_individual.i = 0;
        hdr.report_individual.rsvd = 0;
        hdr.report_individual.rep_md_bits = 0;
        hdr.report_individual.domain_id = 0;
        hdr.report_individual.ds_md_bits = 0;
        hdr.report_individual.ds_md_status = 0;
        meta.report_configured = 1;
    }

    table report_config {
        key = {}
        actions = {
            set_collector;
            NoAction;
        }
        default_action = NoAction();
        size = 1;
    }

    // Step 1: the hop's role. A source inserts shim + INT-MD for the flow
    // (bits 9-15 cleared: reserved, or Checksum Complement, which the TNA
    // build does not do); hop_ml is filled in once the hop is sized.
    action insert_int_headers(bit<16> ins, bit<16> ds, bit<8> max_hop) {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_MD;
        hdr.int_shim.npt = 0;
        hdr.int_shim.rsvd = 0;
        hdr.int_shim.len = INT_MD_HEADER_WORDS;
        hdr.int_shim.rsvd2 = 0;
        hdr.int_shim.orig_dscp = hdr.ipv4.dscp;
        hdr.int_shim.rsvd3 = 0;
        hdr.int_md.setValid();
        hdr.int_md.ver = INT_MD_VERSION;
        hdr.int_md.d = 0;
        hdr.int_md.e = 0;
        hdr.int_md.m = 0;
        hdr.int_md.rsvd = 0;
        hdr.int_md.hop_ml = 0;
        hdr.int_md.remaining_hop_cnt = max_hop;
        hdr.int_md.instruction_bitmap = ins & 0xff80;
        hdr.int_md.domain_id = INT_DOMAIN_FORESIGHT;
        hdr.int_md.ds_instruction = ds & INT_DS_INS_TX_BYTES;
        hdr.int_md.ds_flags = 0;
        hdr.ipv4.dscp = hdr.ipv4.dscp | INT_DSCP_BIT;
        hdr.udp.length = hdr.udp.length + 16;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 16;
        meta.int_ins = ins & 0xff80;
        meta.int_role = FS_INT_SOURCE;
        meta.len_base = FS_MINUS_BRIDGE_PLUS_INT;
    }
    action role_source(bit<1> ds_on) {
        insert_int_headers(hdr.bridge.int_instruction_bitmap,
                           hdr.bridge.int_ds_instruction, hdr.bridge.int_max_hop);
        meta.int_ds_on = ds_on;
    }
    // On the report copy when source and sink are one switch.
    action role_report_source(bit<1> ds_on) {
        insert_int_headers(hdr.report_mirror.int_instruction_bitmap,
                           hdr.report_mirror.int_ds_instruction,
                           hdr.report_mirror.int_max_hop);
        meta.int_ds_on = ds_on;
    }
    action role_transit(bit<1> ds_on) {
        meta.int_role = FS_INT_TRANSIT;
        meta.int_ins = hdr.int_md.instruction_bitmap;
        meta.int_ds_on = ds_on;
        meta.len_base = FS_MINUS_BRIDGE;
    }
    action role_sink() {
        meta.int_role = FS_INT_SINK;
        meta.len_base = FS_MINUS_BRIDGE;
    }
    action role_sink_too_deep() {
        meta.int_role = FS_INT_SINK_TOO_DEEP;
        meta.len_base = FS_MINUS_BRIDGE;
    }
    action role_pass() {
        meta.int_role = FS_INT_PASS;
        meta.len_base = FS_MINUS_BRIDGE;
    }

    // The v1model conditions as one priority-ordered lookup. Transit (and
    // the sink's own entry on a report copy) needs a zero UDP checksum, no
    // reserved or Checksum Complement instruction bits, and either no
    // domain-specific instructions or Foresight's tx-bytes one; a source
    // needs a UDP packet without INT, a zero checksum and a hop budget.
    @hidden
    table int_role {
        key = {
            meta.report                          : ternary;
            hdr.int_md.isValid()                 : ternary;
            meta.int_stack_too_deep              : ternary;
            hdr.bridge.int_sink                  : ternary;
            hdr.udp.checksum                     : ternary;
            hdr.int_md.instruction_bitmap        : ternary;
            hdr.int_md.domain_id                 : ternary;
            hdr.int_md.ds_instruction            : ternary;
            hdr.udp.isValid()                    : ternary;
            hdr.bridge.int_source                : ternary;
            hdr.bridge.int_max_hop               : ternary;
            hdr.bridge.int_ds_instruction        : ternary;
            hdr.report_mirror.int_source         : ternary;
            hdr.report_mirror.int_max_hop        : ternary;
            hdr.report_mirror.int_ds_instruction : ternary;
        }
        actions = {
            role_pass; role_source; role_report_source; role_transit;
            role_sink; role_sink_too_deep;
        }
        const default_action = role_pass();
        // report, INT, too deep, sink, checksum, bitmap, domain, ds,
        // UDP, source, max hop, ds, (report copy:) source, max hop, ds.
        const entries = {
            // Sink: the data packet leaves without INT.
            (0, true, 1, 1, _, _, _, _, _, _, _, _, _, _, _): role_sink_too_deep();
            (0, true, _, 1, _, _, _, _, _, _, _, _, _, _, _): role_sink();
            // Transit, or the sink's entry on the report copy.
            (_, true, _, _, 0, 0 &&& 0x007f, _, 0, _, _, _, _, _, _, _): role_transit(0);
            (_, true, _, _, 0, 0 &&& 0x007f, INT_DOMAIN_FORESIGHT, INT_DS_INS_TX_BYTES,
             _, _, _, _, _, _, _): role_transit(1);
            (_, true, _, _, _, _, _, _, _, _, _, _, _, _, _): role_pass();
            // Source on the report copy (source and sink on this switch).
            (1, false, _, _, 0, _, _, _, true, _, _, _, 1, 0, _): role_pass();
            (1, false, _, _, 0, _, _, _, true, _, _, _, 1, _,
             INT_DS_INS_TX_BYTES &&& INT_DS_INS_TX_BYTES): role_report_source(1);
            (1, false, _, _, 0, _, _, _, true, _, _, _, 1, _, _): role_report_source(0);
            // Source: the watchlist matched and this port is not the sink.
            (0, false, _, 0, 0, _, _, _, true, 1, 0, _, _, _, _): role_pass();
            (0, false, _, 0, 0, _, _, _, true, 1, _,
             INT_DS_INS_TX_BYTES &&& INT_DS_INS_TX_BYTES, _, _, _): role_source(1);
            (0, false, _, 0, 0, _, _, _, true, 1, _, _, _, _, _): role_source(0);
        }
        size = 16;
    }

    // Step 2: metadata words (and bytes) per hop: instruction bits 0-3 (one
    // word each) with bit 8 (one), and bits 4-7 (2, 2, 2, 1 words) with the
    // tx-bytes domain-specific word. The v1model int_hop_words() as two
    // lookups whose results one add combines.
    action hop_size_a(bit<8> words, bit<16> bytes) {
        meta.a_words = words;
        meta.a_ml = (bit<5>)words;
        meta.a_bytes = bytes;
    }
    @hidden
    table hop_size_a_table {
        key = {
            meta.int_ins[15:12] : exact @name("instructions_0_3");
            meta.int_ins[7:7]   : exact @name("instruction_8");
        }
        actions = { hop_size_a; }
        const entries = {
            (0, 0): hop_size_a(0, 0);  (0, 1): hop_size_a(1, 4);
            (1, 0): hop_size_a(1, 4);  (1, 1): hop_size_a(2, 8);
            (2, 0): hop_size_a(1, 4);  (2, 1): hop_size_a(2, 8);
            (3, 0): hop_size_a(2, 8);  (3, 1): hop_size_a(3, 12);
            (4, 0): hop_size_a(1, 4);  (4, 1): hop_size_a(2, 8);
            (5, 0): hop_size_a(2, 8);  (5, 1): hop_size_a(3, 12);
            (6, 0): hop_size_a(2, 8);  (6, 1): hop_size_a(3, 12);
            (7, 0): hop_size_a(3, 12);  (7, 1): hop_size_a(4, 16);
            (8, 0): hop_size_a(1, 4);  (8, 1): hop_size_a(2, 8);
            (9, 0): hop_size_a(2, 8);  (9, 1): hop_size_a(3, 12);
            (10, 0): hop_size_a(2, 8);  (10, 1): hop_size_a(3, 12);
            (11, 0): hop_size_a(3, 12);  (11, 1): hop_size_a(4, 16);
            (12, 0): hop_size_a(2, 8);  (12, 1): hop_size_a(3, 12);
            (13, 0): hop_size_a(3, 12);  (13, 1): hop_size_a(4, 16);
            (14, 0): hop_size_a(3, 12);  (14, 1): hop_size_a(4, 16);
            (15, 0): hop_size_a(4, 16);  (15, 1): hop_size_a(5, 20);
        }
        size = 32;
    }
    action hop_size_b(bit<8> words, bit<16> bytes) {
        meta.b_words = words;
        meta.b_ml = (bit<5>)words;
        meta.b_bytes = bytes;
        // What the packet's length changes by if the hop pushes.
        meta.b_delta = meta.len_base + bytes;
    }
    @hidden
    table hop_size_b_table {
        key = {
            meta.int_ins[11:8] : exact @name("instructions_4_7");
            meta.int_ds_on     : exact @name("ds_tx_bytes");
        }
        actions = { hop_size_b; }
        const entries = {
            (0, 0): hop_size_b(0, 0);  (0, 1): hop_size_b(1, 4);
            (1, 0): hop_size_b(1, 4);  (1, 1): hop_size_b(2, 8);
            (2, 0): hop_size_b(2, 8);  (2, 1): hop_size_b(3, 12);
            (3, 0): hop_size_b(3, 12);  (3, 1): hop_size_b(4, 16);
            (4, 0): hop_size_b(2, 8);  (4, 1): hop_size_b(3, 12);
            (5, 0): hop_size_b(3, 12);  (5, 1): hop_size_b(4, 16);
            (6, 0): hop_size_b(4, 16);  (6, 1): hop_size_b(5, 20);
            (7, 0): hop_size_b(5, 20);  (7, 1): hop_size_b(6, 24);
            (8, 0): hop_size_b(2, 8);  (8, 1): hop_size_b(3, 12);
            (9, 0): hop_size_b(3, 12);  (9, 1): hop_size_b(4, 16);
            (10, 0): hop_size_b(4, 16);  (10, 1): hop_size_b(5, 20);
            (11, 0): hop_size_b(5, 20);  (11, 1): hop_size_b(6, 24);
            (12, 0): hop_size_b(4, 16);  (12, 1): hop_size_b(5, 20);
            (13, 0): hop_size_b(5, 20);  (13, 1): hop_size_b(6, 24);
            (14, 0): hop_size_b(6, 24);  (14, 1): hop_size_b(7, 28);
            (15, 0): hop_size_b(7, 28);  (15, 1): hop_size_b(8, 32);
        }
        size = 32;
    }

    // A transit hop's stack after its words: shim len + hop_ml (a transit
    // hop stamps only when hop_ml is its own word count), hop_ml as action
    // data (Tofino adds a 5-bit field to an 8-bit one only through a table).
    action len_plus_hop_ml(bit<8> hop_ml) { meta.len_after = hdr.int_shim.len + hop_ml; }
    @hidden
    table int_len_after {
        key = { hdr.int_md.hop_ml : exact; }
        actions = { len_plus_hop_ml; }
        const entries = {
            0: len_plus_hop_ml(0);  1: len_plus_hop_ml(1);  2: len_plus_hop_ml(2);  3: len_plus_hop_ml(3);
            4: len_plus_hop_ml(4);  5: len_plus_hop_ml(5);  6: len_plus_hop_ml(6);  7: len_plus_hop_ml(7);
            8: len_plus_hop_ml(8);  9: len_plus_hop_ml(9);  10: len_plus_hop_ml(10);  11: len_plus_hop_ml(11);
            12: len_plus_hop_ml(12);  13: len_plus_hop_ml(13);  14: len_plus_hop_ml(14);  15: len_plus_hop_ml(15);
            16: len_plus_hop_ml(16);  17: len_plus_hop_ml(17);  18: len_plus_hop_ml(18);  19: len_plus_hop_ml(19);
            20: len_plus_hop_ml(20);  21: len_plus_hop_ml(21);  22: len_plus_hop_ml(22);  23: len_plus_hop_ml(23);
            24: len_plus_hop_ml(24);  25: len_plus_hop_ml(25);  26: len_plus_hop_ml(26);  27: len_plus_hop_ml(27);
            28: len_plus_hop_ml(28);  29: len_plus_hop_ml(29);  30: len_plus_hop_ml(30);  31: len_plus_hop_ml(31);
        }
        size = 32;
    }

    // Bytes a sink removes: shim and INT-MD + stack, (len + 1) words, for
    // the lengths a TNA sink parses; with the bridged header, what the
    // packet's length changes by.
    action strip_len(bit<16> bytes, bit<16> delta) {
        meta.strip_bytes = bytes;
        meta.strip_delta = delta;
    }
    @hidden
    table int_strip_bytes {
        key = { hdr.int_shim.len : exact; }
        actions = { strip_len; }
        const entries = {
            0: strip_len(4, 0xffea);  1: strip_len(8, 0xffe6);  2: strip_len(12, 0xffe2);
            3: strip_len(16, 0xffde);  4: strip_len(20, 0xffda);  5: strip_len(24, 0xffd6);
            6: strip_len(28, 0xffd2);  7: strip_len(32, 0xffce);  8: strip_len(36, 0xffca);
            9: strip_len(40, 0xffc6);  10: strip_len(44, 0xffc2);  11: strip_len(48, 0xffbe);
            12: strip_len(52, 0xffba);  13: strip_len(56, 0xffb6);  14: strip_len(60, 0xffb2);
            15: strip_len(64, 0xffae);  16: strip_len(68, 0xffaa);  17: strip_len(72, 0xffa6);
        }
        size = 18;
    }

    // A report's lengths for the inner packet's INT shim len and kind:
    // inner words = IPv4 5 + UDP 2 + shim 1 + len (+ BTH 3 for RoCEv2);
    // report_length = 2 + inner words; UDP = 8 + report headers 20 + inner
    // bytes; IPv4 = 20 + UDP. Listed for the lengths a TNA sink parses
    // (len <= FS_TNA_INT_MAX_LEN); a miss is a report too long to send.
    // The UDP destination port says whether the inner packet is RoCEv2.
    action report_size(bit<8> report_length, bit<16> udp_length, bit<16> ipv4_length) {
        hdr.report_individual.report_length = report_length;
        hdr.report_udp.length = udp_length;
        hdr.report_ipv4.total_len = ipv4_length;
        meta.report_sized = 1;
    }
    @hidden
    table report_sizes {
        key = {
            hdr.int_shim.len : ternary;
            hdr.udp.dst_port : ternary;
        }
        actions = { report_size; @defaultonly NoAction; }
        const default_action = NoAction();
        const entries = {
            (3, UDP_PORT_ROCEV2): report_size(16, 84, 104);
            (4, UDP_PORT_ROCEV2): report_size(17, 88, 108);
            (5, UDP_PORT_ROCEV2): report_size(18, 92, 112);
            (6, UDP_PORT_ROCEV2): report_size(19, 96, 116);
            (7, UDP_PORT_ROCEV2): report_size(20, 100, 120);
            (8, UDP_PORT_ROCEV2): report_size(21, 104, 124);
            (9, UDP_PORT_ROCEV2): report_size(22, 108, 128);
            (10, UDP_PORT_ROCEV2): report_size(23, 112, 132);
            (11, UDP_PORT_ROCEV2): report_size(24, 116, 136);
            (12, UDP_PORT_ROCEV2): report_size(25, 120, 140);
            (13, UDP_PORT_ROCEV2): report_size(26, 124, 144);
            (14, UDP_PORT_ROCEV2): report_size(27, 128, 148);
            (15, UDP_PORT_ROCEV2): report_size(28, 132, 152);
            (16, UDP_PORT_ROCEV2): report_size(29, 136, 156);
            (17, UDP_PORT_ROCEV2): report_size(30, 140, 160);
            (3, _): report_size(13, 72, 92);
            (4, _): report_size(14, 76, 96);
            (5, _): report_size(15, 80, 100);
            (6, _): report_size(16, 84, 104);
            (7, _): report_size(17, 88, 108);
            (8, _): report_size(18, 92, 112);
            (9, _): report_size(19, 96, 116);
            (10, _): report_size(20, 100, 120);
            (11, _): report_size(21, 104, 124);
            (12, _): report_size(22, 108, 128);
            (13, _): report_size(23, 112, 132);
            (14, _): report_size(24, 116, 136);
            (15, _): report_size(25, 120, 140);
            (16, _): report_size(26, 124, 144);
            (17, _): report_size(27, 128, 148);
        }
        size = 32;
    }

    // What becomes of a report copy: sent (numbered), or dropped and
    // counted because no collector is configured or it would be too long.
    action report_send() {
        bit<32> seq = next_seq_no.execute(0);
        hdr.report_group.seq_no = seq[21:0];
        meta.report_outcome = 0;
        meta.count_report = 1;
    }
    action report_unconfigured() {
        meta.report_outcome = 1;
        meta.count_report = 1;
        meta.egress_drop = 1;
    }
    action report_too_long() {
        meta.report_outcome = 2;
        meta.count_report = 1;
        meta.egress_drop = 1;
    }
    action not_a_report() {}
    @hidden
    table report_outcome {
        key = {
            meta.report            : exact;
            meta.report_configured : ternary;
            hdr.int_md.isValid()   : ternary;
            meta.report_sized      : ternary;
        }
        actions = { report_send; report_unconfigured; report_too_long; not_a_report; }
        const default_action = not_a_report();
        const entries = {
            (1, 0, _, _): report_unconfigured();
            (1, _, false, _): report_unconfigured();
            (1, _, _, 0): report_too_long();
            (1, _, _, _): report_send();
        }
        size = 4;
    }

    // Step 3: what the hop does.
    action push_hop() {
        meta.push = 1;
        meta.tx_bytes_add = eg_intr_md.pkt_length + meta.push_delta;
        hdr.int_md.hop_ml = meta.hop_ml;
        hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
        hdr.int_shim.len = hdr.int_shim.len + meta.hop_words;
        hdr.udp.length = hdr.udp.length + meta.hop_bytes;
        hdr.ipv4.total_len = hdr.ipv4.total_len + meta.hop_bytes;
    }
    // Out of hops, or of stack a TNA sink parses: E bit (zero UDP checksum:
    // nothing to fix).
    action exceed_hop() {
        hdr.int_md.e = 1;
        meta.tx_bytes_add = eg_intr_md.pkt_length + meta.len_base;
    }
    action strip_int() {
        meta.tx_bytes_add = eg_intr_md.pkt_length + meta.strip_delta;
        hdr.udp.length = hdr.udp.length - meta.strip_bytes;
        hdr.ipv4.total_len = hdr.ipv4.total_len - meta.strip_bytes;
        hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
        hdr.int_shim.setInvalid();
        hdr.int_md.setInvalid();
        hdr.int_stack.pop_front(FS_TNA_INT_STACK_WORDS);
    }
    action drop_too_deep() {
        meta.report_outcome = 3;
        meta.count_report = 1;
        meta.egress_drop = 1;
    }
    action leave_int() {
        meta.tx_bytes_add = eg_intr_md.pkt_length + meta.len_base;
    }
    // The metadata would pass the egress MTU: M bit, nothing pushed.
    action mtu_exceeded() {
        hdr.int_md.m = 1;
        meta.tx_bytes_add = eg_intr_md.pkt_length + meta.len_base;
    }
    // A source whose INT headers alone pass the MTU: the packet leaves as
    // it came (v1model does not insert them).
    action unsource() {
        hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
        hdr.udp.length = hdr.udp.length - 16;
        hdr.ipv4.total_len = hdr.ipv4.total_len - 16;
        hdr.int_shim.setInvalid();
        hdr.int_md.setInvalid();
        meta.tx_bytes_add = eg_intr_md.pkt_length + FS_MINUS_BRIDGE;
    }

    // INT v2.1 5.3 as in v1model/int.p4: the egress port's MTU covers the
    // IPv4 packet and any MPLS labels. Budget: the MTU less the labels.
    action labels(bit<16> bytes) { meta.label_bytes = bytes; }
    @hidden
    table label_bytes {
        key = {
            hdr.mpls[0].isValid() : exact;
            hdr.mpls[1].isValid() : exact;
            hdr.mpls[2].isValid() : exact;
            hdr.mpls[3].isValid() : exact;
        }
        actions = { labels; }
        const default_action = labels(0);
        const entries = {
            (true, false, false, false): labels(4);
            (true, true, false, false): labels(8);
            (true, true, true, false): labels(12);
            (true, true, true, true): labels(16);
        }
        size = 8;
    }

    action set_port_mtu(bit<16> mtu) {
        meta.mtu_budget = mtu |-| meta.label_bytes;
    }

    table port_mtu {
        key = {
            eg_intr_md.egress_port : exact @name("egress_port");
        }
        actions = {
            set_port_mtu;
            @defaultonly NoAction;
        }
        size = FS_PORT_COUNT;
    }

    // After the role (a source's headers are in the length) ...
    action mtu_room() {
        meta.mtu_room = meta.mtu_budget |-| hdr.ipv4.total_len;
        meta.mtu_head_over = hdr.ipv4.total_len |-| meta.mtu_budget;
    }
    // ... and the hop's size.
    action mtu_hop() {
        meta.mtu_hop_over = meta.hop_bytes |-| meta.mtu_room;
    }

    // hop_ml == this hop's word count (Tofino compares two fields this way
    // only when they sit alike in their containers, so as an exact match).
    action ml_matches() { meta.ml_match = 1; }
    @hidden
    table hop_ml_check {
        key = {
            hdr.int_md.hop_ml : exact;
            meta.hop_ml       : exact;
        }
        actions = { ml_matches; @defaultonly NoAction; }
        const default_action = NoAction();
        const entries = {
            (0, 0): ml_matches();  (1, 1): ml_matches();  (2, 2): ml_matches();  (3, 3): ml_matches();
            (4, 4): ml_matches();  (5, 5): ml_matches();  (6, 6): ml_matches();  (7, 7): ml_matches();
            (8, 8): ml_matches();  (9, 9): ml_matches();  (10, 10): ml_matches();  (11, 11): ml_matches();
            (12, 12): ml_matches();  (13, 13): ml_matches();  (14, 14): ml_matches();  (15, 15): ml_matches();
            (16, 16): ml_matches();  (17, 17): ml_matches();  (18, 18): ml_matches();  (19, 19): ml_matches();
            (20, 20): ml_matches();  (21, 21): ml_matches();  (22, 22): ml_matches();  (23, 23): ml_matches();
            (24, 24): ml_matches();  (25, 25): ml_matches();  (26, 26): ml_matches();  (27, 27): ml_matches();
            (28, 28): ml_matches();  (29, 29): ml_matches();  (30, 30): ml_matches();  (31, 31): ml_matches();
        }
        size = 32;
    }

    // The v1model decision in one lookup: a transit hop stamps only a stack
    // whose hop_ml is its own word count, while it has hops left and the
    // stack stays within what a TNA sink parses (FS_TNA_INT_MAX_LEN, 17).
    @hidden
    table int_hop_action {
        key = {
            meta.int_role                  : exact;
            meta.ml_match                  : ternary;
            hdr.int_md.remaining_hop_cnt   : ternary;
            meta.len_after                 : ternary;
            meta.mtu_head_over             : ternary;
            meta.mtu_hop_over              : ternary;
        }
        actions = {
            push_hop; exceed_hop; strip_int; drop_too_deep; leave_int; mtu_exceeded; unsource;
        }
        const default_action = leave_int();
        // role, hop_ml matches, hops left, stack length after this hop,
        // headers past the MTU, metadata past the MTU.
        const entries = {
            (FS_INT_SOURCE, _, _, _, 0, 0): push_hop();
            (FS_INT_SOURCE, _, _, _, 0, _): mtu_exceeded();
            (FS_INT_SOURCE, _, _, _, _, _): unsource();
            (FS_INT_TRANSIT, 1, 0, _, _, _): exceed_hop();
            (FS_INT_TRANSIT, 1, _, 0 &&& 0xf0, _, 0): push_hop();        // 0..15
            (FS_INT_TRANSIT, 1, _, 16 &&& 0xfe, _, 0): push_hop();       // 16, 17
            (FS_INT_TRANSIT, 1, _, _, _, 0): exceed_hop();
            (FS_INT_TRANSIT, 1, _, _, _, _): mtu_exceeded();
            (FS_INT_SINK, _, _, _, _, _): strip_int();
            (FS_INT_SINK_TOO_DEEP, _, _, _, _, _): drop_too_deep();
        }
        size = 12;
    }

    action report_values() {
        // The inner packet of a report starts at IPv4.
        hdr.ethernet.setInvalid();
        hdr.mpls[0].setInvalid();
        hdr.mpls[1].setInvalid();
        hdr.mpls[2].setInvalid();
        hdr.mpls[3].setInvalid();
        meta.hop.ingress_port = (bit<16>)hdr.report_mirror.ingress_port;
        meta.hop.egress_port = (bit<16>)hdr.report_mirror.sink_egress_port;
        meta.l1_word = (bit<32>)hdr.report_mirror.sink_egress_port;
        meta.hop.ingress_ts = (bit<64>)hdr.report_mirror.ingress_ts;
        meta.hop.hop_latency = eg_prsr_md.global_tstamp[31:0] -
                               hdr.report_mirror.ingress_ts[31:0];
    }
    action packet_values() {
        meta.hop.ingress_port = (bit<16>)hdr.bridge.ingress_port;
        meta.hop.egress_port = (bit<16>)eg_intr_md.egress_port;
        meta.l1_word = (bit<32>)eg_intr_md.egress_port;
        meta.queue_word = (bit<32>)eg_intr_md.enq_qdepth;
        meta.hop.ingress_ts = (bit<64>)hdr.bridge.ingress_ts;
        meta.hop.hop_latency = eg_prsr_md.global_tstamp[31:0] - hdr.bridge.ingress_ts[31:0];
    }
    // The L1 ports and queue words are built in two steps (the low field
    // zero-extended, then the high one deposited over it): one Tofino
    // action takes at most two sources per container.
    action report_values_high() {
        meta.l1_word[24:16] = hdr.report_mirror.ingress_port;
    }
    action packet_values_high() {
        meta.queue_word[28:24] = eg_intr_md.egress_qid;
        meta.l1_word[24:16] = hdr.bridge.ingress_port;
    }
    action sums() {
        meta.hop_words = meta.a_words + meta.b_words;
        meta.hop_ml = meta.a_ml + meta.b_ml;
        meta.hop_bytes = meta.a_bytes + meta.b_bytes;
        meta.push_delta = meta.a_bytes + meta.b_delta;
    }

    // Flat on purpose: on Tofino 1 a condition guarding several tables makes
    // everything after it wait for all of them, so every condition here
    // guards one action, and decisions are lookups.
    apply {
        // Values this hop may stamp, beside everything else.
        node_config.apply();
        if (meta.report == 1) {
            report_config.apply();   // makes the report encapsulation valid
        }
        meta.hop.egress_ts = (bit<64>)eg_prsr_md.global_tstamp;
        if (meta.report == 1) { report_values(); } else { packet_values(); }
        if (meta.report == 1) { report_values_high(); } else { packet_values_high(); }
        // The report copy reads the word the sink's queue last held; data
        // packets record theirs (one register: both in one if-else).
        if (meta.report == 1) {
            meta.queue_word = occupancy_read.execute(hdr.report_mirror.sink_egress_port ++
                                                     hdr.report_mirror.sink_queue[2:0]);
        } else {
            occupancy_write.execute(eg_intr_md.egress_port ++ eg_intr_md.egress_qid[2:0]);
        }

        // The MTU budget (report copies, truncated anyway, are unchecked).
        meta.mtu_budget = 0xffff;
        label_bytes.apply();
        if (meta.report == 0) {
            port_mtu.apply();
        }

        // Steps 1 and 2: role, then size.
        int_role.apply();
        int_len_after.apply();
        int_strip_bytes.apply();
        hop_size_a_table.apply();
        hop_size_b_table.apply();
        sums();
        mtu_room();
        mtu_hop();

        // Step 3.
        hop_ml_check.apply();
        int_hop_action.apply();

        // Step 4: the port's transmitted bytes (this packet's included
        // after its stamp, as on BMv2), the stamp, the report.
        if (meta.report == 1) {
            hdr.int_ds_tx_bytes.tx_bytes =
                tx_bytes_read.execute(hdr.report_mirror.sink_egress_port);
        } else {
            hdr.int_ds_tx_bytes.tx_bytes = tx_bytes_add.execute(eg_intr_md.egress_port);
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_NODE_ID) != 0) {
            hdr.int_node_id.setValid();
            hdr.int_node_id.node_id = meta.node_id;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_L1_PORTS) != 0) {
            hdr.int_l1_ports.setValid();
            hdr.int_l1_ports.word = meta.l1_word;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_HOP_LATENCY) != 0) {
            hdr.int_hop_latency.setValid();
            hdr.int_hop_latency.hop_latency = meta.hop.hop_latency;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_QUEUE) != 0) {
            hdr.int_queue.setValid();
            hdr.int_queue.word = meta.queue_word;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_INGRESS_TS) != 0) {
            hdr.int_ingress_ts.setValid();
            hdr.int_ingress_ts.ingress_ts = meta.hop.ingress_ts;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_EGRESS_TS) != 0) {
            hdr.int_egress_ts.setValid();
            hdr.int_egress_ts.egress_ts = meta.hop.egress_ts;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_L2_PORTS) != 0) {
            hdr.int_l2_ports.setValid();
            hdr.int_l2_ports.ingress_port = (bit<32>)meta.hop.ingress_port;
            hdr.int_l2_ports.egress_port = (bit<32>)meta.hop.egress_port;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_TX_UTIL) != 0) {
            hdr.int_tx_util.setValid();
            hdr.int_tx_util.tx_util = 0xffffffff;
        }
        if (meta.push == 1 && (meta.int_ins & INT_INS_BUFFER) != 0) {
            hdr.int_buffer.setValid();
            hdr.int_buffer.buffer_id = 0xff;
            hdr.int_buffer.buffer_occupancy = 0xffffff;
        }
        if (meta.push == 1 && meta.int_ds_on == 1) {
            hdr.int_ds_tx_bytes.setValid();
        }
        report_sizes.apply();
        report_outcome.apply();

        // One count per packet, here: Tofino counts an indexed counter from
        // one place only.
        if (meta.count_report == 1) {
            reports.count(meta.report_outcome);
        }
    }
}

#endif  // FS_TNA_INT_P4
