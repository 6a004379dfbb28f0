// tna/egress.p4 — the TNA egress pipeline: DCQCN and pre-drain marking, INT
// (source insertion, transit stamp, sink removal, reports), counters.
//
// Names as in the v1model program (include/egress.p4, ecn.p4, int.p4).

#ifndef FS_TNA_EGRESS_P4
#define FS_TNA_EGRESS_P4

#include "headers.p4"

// include/ecn.p4 the Tofino way. The queue depth is eg_intr_md.enq_qdepth,
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
        meta.kmax_slack = kmax |-| eg_intr_md.enq_qdepth;
        meta.kmin_slack = kmin |-| eg_intr_md.enq_qdepth;
        meta.under_pmax = pmax |-| meta.queue_random;
    }

    table dcqcn_port {
        key = {
            eg_intr_md.egress_port : exact @name("egress_port");
        }
        actions = {
            set_dcqcn;
            @defaultonly NoAction;
        }
        size = FS_DCQCN_PORTS_SIZE;
    }

    action predrain_mark(bit<16> probability) {
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

    apply {
        if (hdr.ipv4.isValid()) {
            meta.queue_random = queue_random.get();
            meta.predrain_random = predrain_random.get();
            // Field-to-field magnitude compares are saturating differences
            // the actions compute (a gateway compares with constants only).
            bool queue_mark = false;
            if (dcqcn_port.apply().hit) {
                if (meta.kmax_slack == 0) {
                    queue_mark = true;
                } else if (meta.kmin_slack == 0 && meta.under_pmax != 0) {
                    queue_mark = true;
                }
            }
            bool predrain_now = false;
            if (predrain.apply().hit) {
                if (meta.predrain_probability == 0xffff || meta.under_probability != 0) {
                    predrain_now = true;
                }
            }
            if (hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE) {
                if (queue_mark) {
                    hdr.ipv4.ecn = ECN_CE;
                    ce_marks.count(1w0 ++ eg_intr_md.egress_port);
                } else if (predrain_now) {
                    hdr.ipv4.ecn = ECN_CE;
                    ce_marks.count(1w1 ++ eg_intr_md.egress_port);
                }
            }
        }
    }
}

// include/int.p4 (egress part) the Tofino way.
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

    // Occupancy each (port, queue 0..7) had when its latest packet was
    // enqueued, for the sink's entry in reports.
    Register<bit<32>, bit<12>>(FS_PORT_QUEUE_COUNT, 0) queue_occupancy;
    RegisterAction<bit<32>, bit<12>, bit<32>>(queue_occupancy) occupancy_write = {
        void apply(inout bit<32> value) {
            value = (bit<32>)eg_intr_md.enq_qdepth;
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

    // Metadata words per hop for instruction bits 0-3 (one word each) and
    // bits 4-7 (2, 2, 2, 1 words): the v1model int_hop_words() as lookups,
    // with their bytes (an action cannot shift and then add on Tofino).
    action words_0_3(bit<8> words, bit<16> bytes) {
        meta.hop_words = words;
        meta.hop_bytes = bytes;
    }
    @hidden
    table int_words_0_3 {
        key = { hdr.int_md.instruction_bitmap[15:12] : exact @name("instructions_0_3"); }
        actions = { words_0_3; }
        const entries = {
            0: words_0_3(0, 0);  1: words_0_3(1, 4);  2: words_0_3(1, 4);  3: words_0_3(2, 8);
            4: words_0_3(1, 4);  5: words_0_3(2, 8);  6: words_0_3(2, 8);  7: words_0_3(3, 12);
            8: words_0_3(1, 4);  9: words_0_3(2, 8); 10: words_0_3(2, 8); 11: words_0_3(3, 12);
           12: words_0_3(2, 8); 13: words_0_3(3, 12); 14: words_0_3(3, 12); 15: words_0_3(4, 16);
        }
        size = 16;
    }
    bit<8> words_hi = 0;
    bit<16> bytes_hi = 0;
    action words_4_7(bit<8> words, bit<16> bytes) {
        words_hi = words;
        bytes_hi = bytes;
    }
    @hidden
    table int_words_4_7 {
        key = { hdr.int_md.instruction_bitmap[11:8] : exact @name("instructions_4_7"); }
        actions = { words_4_7; }
        const entries = {
            0: words_4_7(0, 0);  1: words_4_7(1, 4);  2: words_4_7(2, 8);  3: words_4_7(3, 12);
            4: words_4_7(2, 8);  5: words_4_7(3, 12);  6: words_4_7(4, 16);  7: words_4_7(5, 20);
            8: words_4_7(2, 8);  9: words_4_7(3, 12); 10: words_4_7(4, 16); 11: words_4_7(5, 20);
           12: words_4_7(4, 16); 13: words_4_7(5, 20); 14: words_4_7(6, 24); 15: words_4_7(7, 28);
        }
        size = 16;
    }

    // The shim length after this hop's words, computed in a table's action
    // so the compiler cannot fold the add into the condition (a gateway
    // cannot add).
    action compute_len_after() { meta.len_after = hdr.int_shim.len + meta.hop_words; }
    @hidden
    table int_len_after {
        actions = { compute_len_after; }
        const default_action = compute_len_after();
        size = 1;
    }

    // Bytes a sink removes: shim and INT-MD + stack, (len + 1) words, for
    // the lengths a TNA sink parses.
    action strip_len(bit<16> bytes) { meta.strip_bytes = bytes; }
    @hidden
    table int_strip_bytes {
        key = { hdr.int_shim.len : exact; }
        actions = { strip_len; }
        const entries = {
            0: strip_len(4);  1: strip_len(8);  2: strip_len(12);  3: strip_len(16);
            4: strip_len(20);  5: strip_len(24);  6: strip_len(28);  7: strip_len(32);
            8: strip_len(36);  9: strip_len(40);  10: strip_len(44);  11: strip_len(48);
            12: strip_len(52);  13: strip_len(56);  14: strip_len(60);  15: strip_len(64);
            16: strip_len(68);  17: strip_len(72);
        }
        size = 18;
    }

    // A report's lengths for the inner packet's INT shim len and kind:
    // inner words = IPv4 5 + UDP 2 + shim 1 + len (+ BTH 3 for RoCEv2);
    // report_length = 2 + inner words; UDP = 8 + report headers 20 + inner
    // bytes; IPv4 = 20 + UDP. Listed for the lengths a TNA sink parses
    // (len <= FS_TNA_INT_MAX_LEN); a miss is a report too long to send.
    action report_size(bit<8> report_length, bit<16> udp_length, bit<16> ipv4_length) {
        hdr.report_individual.setValid();
        hdr.report_individual.report_length = report_length;
        hdr.report_udp.length = udp_length;
        hdr.report_ipv4.total_len = ipv4_length;
    }
    @hidden
    table report_sizes {
        key = {
            hdr.int_shim.len  : exact;
            meta.report_roce  : exact;
        }
        actions = { report_size; @defaultonly NoAction; }
        const entries = {
            (3, 0): report_size(13, 72, 92);
            (4, 0): report_size(14, 76, 96);
            (5, 0): report_size(15, 80, 100);
            (6, 0): report_size(16, 84, 104);
            (7, 0): report_size(17, 88, 108);
            (8, 0): report_size(18, 92, 112);
            (9, 0): report_size(19, 96, 116);
            (10, 0): report_size(20, 100, 120);
            (11, 0): report_size(21, 104, 124);
            (12, 0): report_size(22, 108, 128);
            (13, 0): report_size(23, 112, 132);
            (14, 0): report_size(24, 116, 136);
            (15, 0): report_size(25, 120, 140);
            (16, 0): report_size(26, 124, 144);
            (17, 0): report_size(27, 128, 148);
            (3, 1): report_size(16, 84, 104);
            (4, 1): report_size(17, 88, 108);
            (5, 1): report_size(18, 92, 112);
            (6, 1): report_size(19, 96, 116);
            (7, 1): report_size(20, 100, 120);
            (8, 1): report_size(21, 104, 124);
            (9, 1): report_size(22, 108, 128);
            (10, 1): report_size(23, 112, 132);
            (11, 1): report_size(24, 116, 136);
            (12, 1): report_size(25, 120, 140);
            (13, 1): report_size(26, 124, 144);
            (14, 1): report_size(27, 128, 148);
            (15, 1): report_size(28, 132, 152);
            (16, 1): report_size(29, 136, 156);
            (17, 1): report_size(30, 140, 160);
        }
        size = 32;
    }

    // Source: shim + INT-MD header for this flow (bits 9-15 cleared: reserved,
    // or Checksum Complement, which the TNA build does not do).
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
    }

    apply {
        node_config.apply();
        meta.report_configured = 0;
        meta.egress_drop = 0;
        bit<16> len_delta = 0xffee;   // -18: the bridged header

        if (meta.report == 1) {
            // The inner packet of a report starts at IPv4.
            hdr.mpls[0].setInvalid();
            hdr.mpls[1].setInvalid();
            hdr.mpls[2].setInvalid();
            hdr.mpls[3].setInvalid();
        }

        // Source (on the report copy only when source and sink are one switch).
        if (hdr.udp.isValid() && !hdr.int_shim.isValid() && hdr.udp.checksum == 0) {
            if (meta.report == 1) {
                if (hdr.report_mirror.int_source == 1 && hdr.report_mirror.int_max_hop != 0) {
                    insert_int_headers(hdr.report_mirror.int_instruction_bitmap,
                                       hdr.report_mirror.int_ds_instruction,
                                       hdr.report_mirror.int_max_hop);
                }
            } else if (hdr.bridge.int_source == 1 && hdr.bridge.int_sink == 0 &&
                       hdr.bridge.int_max_hop != 0) {
                insert_int_headers(hdr.bridge.int_instruction_bitmap,
                                   hdr.bridge.int_ds_instruction,
                                   hdr.bridge.int_max_hop);
                len_delta = 0xfffe;   // -18 + the 16 bytes inserted
            }
        }

        // Words one hop pushes for this packet's instructions.
        meta.hop_words = 0;
        meta.hop_bytes = 0;
        meta.strip_bytes = 0;
        if (hdr.int_md.isValid()) {
            int_words_0_3.apply();
            int_words_4_7.apply();
            meta.hop_words = meta.hop_words + words_hi;
            meta.hop_bytes = meta.hop_bytes + bytes_hi;
            if (hdr.int_md.instruction_bitmap[7:7] == 1) {
                meta.hop_words = meta.hop_words + 1;
                meta.hop_bytes = meta.hop_bytes + 4;
            }
            if (hdr.int_md.domain_id == INT_DOMAIN_FORESIGHT &&
                hdr.int_md.ds_instruction == INT_DS_INS_TX_BYTES) {
                meta.hop_words = meta.hop_words + 1;
                meta.hop_bytes = meta.hop_bytes + 4;
            }
            if (hdr.int_md.hop_ml == 0) {
                // Just inserted by this switch.
                hdr.int_md.hop_ml = (bit<5>)meta.hop_words;
            }
        }

        // What this hop does with INT.
        bool stamp = false;
        bool strip = false;
        if (hdr.int_md.isValid()) {
            if (meta.report == 0 && hdr.bridge.int_sink == 1) {
                strip = true;
                int_strip_bytes.apply();
            } else if (hdr.udp.checksum == 0 &&
                       (hdr.int_md.instruction_bitmap & 0x007f) == 0) {
                // Nested: one gateway takes 4 bytes of input.
                if (hdr.int_md.ds_instruction == 0 ||
                    (hdr.int_md.domain_id == INT_DOMAIN_FORESIGHT &&
                     hdr.int_md.ds_instruction == INT_DS_INS_TX_BYTES)) {
                    if ((bit<8>)hdr.int_md.hop_ml == meta.hop_words) {
                        stamp = true;
                    }
                }
            }
        }

        // Stamp only while the stack stays within what a TNA sink parses
        // (FS_TNA_INT_STACK_WORDS); past that, or past the hop count, the
        // hop sets the E bit instead.
        bool push_hop = false;
        if (stamp) {
            int_len_after.apply();
            if (hdr.int_md.remaining_hop_cnt != 0) {
                if (meta.len_after <= FS_TNA_INT_MAX_LEN) {
                    push_hop = true;
                }
            }
        }

        // The values this hop stamps.
        meta.hop.egress_ts = (bit<64>)eg_prsr_md.global_tstamp;
        if (meta.report == 1) {
            meta.hop.ingress_port = (bit<16>)hdr.report_mirror.ingress_port;
            meta.hop.egress_port = (bit<16>)hdr.report_mirror.sink_egress_port;
            meta.l1_word = (bit<32>)hdr.report_mirror.sink_egress_port;
            meta.hop.ingress_ts = (bit<64>)hdr.report_mirror.ingress_ts;
            meta.hop.hop_latency = eg_prsr_md.global_tstamp[31:0] -
                                   hdr.report_mirror.ingress_ts[31:0];
            meta.queue_word = occupancy_read.execute(hdr.report_mirror.sink_egress_port ++
                                                         hdr.report_mirror.sink_queue[2:0]);
            meta.hop.tx_bytes = tx_bytes_read.execute(hdr.report_mirror.sink_egress_port);
        } else {
            meta.hop.ingress_port = (bit<16>)hdr.bridge.ingress_port;
            meta.hop.egress_port = (bit<16>)eg_intr_md.egress_port;
            meta.l1_word = (bit<32>)eg_intr_md.egress_port;
            meta.queue_word = (bit<32>)eg_intr_md.enq_qdepth;
            meta.hop.ingress_ts = (bit<64>)hdr.bridge.ingress_ts;
            meta.hop.hop_latency = eg_prsr_md.global_tstamp[31:0] - hdr.bridge.ingress_ts[31:0];
            occupancy_write.execute(eg_intr_md.egress_port ++ eg_intr_md.egress_qid[2:0]);
            // Bytes this hop adds or removes (INT), so the counter counts
            // what leaves the port: len_delta started at -18, the bridged
            // header pkt_length includes and which does not leave.
            if (push_hop) {
                len_delta = len_delta + meta.hop_bytes;
            } else if (strip) {
                len_delta = len_delta - meta.strip_bytes;
            }
            meta.tx_bytes_add = eg_intr_md.pkt_length + len_delta;
            meta.hop.tx_bytes = tx_bytes_add.execute(eg_intr_md.egress_port);
        }

        // The L1 ports and queue words are built in two steps in two stages
        // (the low field zero-extended, then the high one deposited over
        // it): one Tofino action takes at most two sources per container.
        if (meta.report == 1) {
            meta.queue_word[28:24] = hdr.report_mirror.sink_queue;
            meta.l1_word[24:16] = hdr.report_mirror.ingress_port;
        } else {
            meta.queue_word[28:24] = eg_intr_md.egress_qid;
            meta.l1_word[24:16] = hdr.bridge.ingress_port;
        }

        if (stamp) {
            if (!push_hop) {
                hdr.int_md.e = 1;   // zero UDP checksum: nothing to fix
            } else {
                bit<16> ins = hdr.int_md.instruction_bitmap;
                if ((ins & INT_INS_NODE_ID) != 0) {
                    hdr.int_node_id.setValid();
                    hdr.int_node_id.node_id = meta.node_id;
                }
                if ((ins & INT_INS_L1_PORTS) != 0) {
                    hdr.int_l1_ports.setValid();
                    hdr.int_l1_ports.word = meta.l1_word;
                }
                if ((ins & INT_INS_HOP_LATENCY) != 0) {
                    hdr.int_hop_latency.setValid();
                    hdr.int_hop_latency.hop_latency = meta.hop.hop_latency;
                }
                if ((ins & INT_INS_QUEUE) != 0) {
                    hdr.int_queue.setValid();
                    hdr.int_queue.word = meta.queue_word;
                }
                if ((ins & INT_INS_INGRESS_TS) != 0) {
                    hdr.int_ingress_ts.setValid();
                    hdr.int_ingress_ts.ingress_ts = meta.hop.ingress_ts;
                }
                if ((ins & INT_INS_EGRESS_TS) != 0) {
                    hdr.int_egress_ts.setValid();
                    hdr.int_egress_ts.egress_ts = meta.hop.egress_ts;
                }
                if ((ins & INT_INS_L2_PORTS) != 0) {
                    hdr.int_l2_ports.setValid();
                    hdr.int_l2_ports.ingress_port = (bit<32>)meta.hop.ingress_port;
                    hdr.int_l2_ports.egress_port = (bit<32>)meta.hop.egress_port;
                }
                if ((ins & INT_INS_TX_UTIL) != 0) {
                    hdr.int_tx_util.setValid();
                    hdr.int_tx_util.tx_util = 0xffffffff;
                }
                if ((ins & INT_INS_BUFFER) != 0) {
                    hdr.int_buffer.setValid();
                    hdr.int_buffer.buffer_id = 0xff;
                    hdr.int_buffer.buffer_occupancy = 0xffffff;
                }
                if (hdr.int_md.ds_instruction == INT_DS_INS_TX_BYTES) {
                    hdr.int_ds_tx_bytes.setValid();
                    hdr.int_ds_tx_bytes.tx_bytes = meta.hop.tx_bytes;
                }
                hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
                hdr.int_shim.len = hdr.int_shim.len + meta.hop_words;
                hdr.udp.length = hdr.udp.length + meta.hop_bytes;
                hdr.ipv4.total_len = hdr.ipv4.total_len + meta.hop_bytes;
            }
        }

        if (strip) {
            if (meta.int_stack_too_deep == 1) {
                meta.report_outcome = 3; meta.count_report = 1;
                meta.egress_drop = 1;
            } else {
                hdr.udp.length = hdr.udp.length - meta.strip_bytes;
                hdr.ipv4.total_len = hdr.ipv4.total_len - meta.strip_bytes;
                hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
                hdr.int_shim.setInvalid();
                hdr.int_md.setInvalid();
                hdr.int_stack.pop_front(FS_TNA_INT_STACK_WORDS);
            }
        }

        if (meta.report == 1) {
            report_config.apply();
            if (meta.report_configured == 0 || !hdr.int_shim.isValid() ||
                !hdr.int_md.isValid()) {
                meta.report_outcome = 1; meta.count_report = 1;
                meta.egress_drop = 1;
            } else {
                meta.report_roce = 0;
                if (hdr.udp.dst_port == UDP_PORT_ROCEV2) {
                    meta.report_roce = 1;
                }
                if (!report_sizes.apply().hit) {
                    meta.report_outcome = 2; meta.count_report = 1;
                    meta.egress_drop = 1;
                } else {
                    bit<32> seq = next_seq_no.execute(0);
                    hdr.report_group.setValid();
                    hdr.report_group.ver = REPORT_VERSION;
                    hdr.report_group.hw_id = 0;
                    hdr.report_group.seq_no = seq[21:0];
                    hdr.report_group.node_id = meta.node_id;
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
                    hdr.ethernet.setInvalid();
                    meta.report_outcome = 0; meta.count_report = 1;
                }
            }
        }

        // One count per packet, here: Tofino counts an indexed counter from
        // one place only.
        if (meta.count_report == 1) {
            reports.count(meta.report_outcome);
        }
    }
}

// include/counters.p4 (egress part).
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

control FsEgress(inout fs_egress_headers_t hdr, inout fs_egress_metadata_t meta,
                 in egress_intrinsic_metadata_t eg_intr_md,
                 in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                 inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                 inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    Ecn() ecn;
    IntEgress() int_egress;
    EgressCounters() counters;

    apply {
        if (meta.report == 0) {
            ecn.apply(hdr, meta, eg_intr_md);
        }
        int_egress.apply(hdr, meta, eg_intr_md, eg_prsr_md);
        // Neither leaves the switch.
        hdr.bridge.setInvalid();
        hdr.report_mirror.setInvalid();
        counters.apply(meta, eg_intr_md, eg_dprsr_md);
    }
}

#endif  // FS_TNA_EGRESS_P4
