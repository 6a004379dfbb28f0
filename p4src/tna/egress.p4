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
        meta.kmin = kmin;
        meta.kmax = kmax;
        meta.pmax = pmax;
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
            bit<16> r1 = queue_random.get();
            bit<16> r2 = predrain_random.get();
            bool queue_mark = false;
            if (dcqcn_port.apply().hit) {
                if (eg_intr_md.enq_qdepth > meta.kmax) {
                    queue_mark = true;
                } else if (eg_intr_md.enq_qdepth > meta.kmin && r1 < meta.pmax) {
                    queue_mark = true;
                }
            }
            bool predrain_now = false;
            if (predrain.apply().hit) {
                if (meta.predrain_probability == 0xffff || r2 < meta.predrain_probability) {
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
            value = value + meta.tx_bytes_add;
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
            value = (bit<32>)meta.hop.queue_occupancy;
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
    // bits 4-7 (2, 2, 2, 1 words): the v1model int_hop_words() as lookups.
    action words_0_3(bit<8> words) { meta.hop_words = words; }
    @hidden
    table int_words_0_3 {
        key = { hdr.int_md.instruction_bitmap[15:12] : exact; }
        actions = { words_0_3; }
        const entries = {
            0: words_0_3(0);  1: words_0_3(1);  2: words_0_3(1);  3: words_0_3(2);
            4: words_0_3(1);  5: words_0_3(2);  6: words_0_3(2);  7: words_0_3(3);
            8: words_0_3(1);  9: words_0_3(2); 10: words_0_3(2); 11: words_0_3(3);
           12: words_0_3(2); 13: words_0_3(3); 14: words_0_3(3); 15: words_0_3(4);
        }
        size = 16;
    }
    bit<8> words_hi = 0;
    action words_4_7(bit<8> words) { words_hi = words; }
    @hidden
    table int_words_4_7 {
        key = { hdr.int_md.instruction_bitmap[11:8] : exact; }
        actions = { words_4_7; }
        const entries = {
            0: words_4_7(0);  1: words_4_7(1);  2: words_4_7(2);  3: words_4_7(3);
            4: words_4_7(2);  5: words_4_7(3);  6: words_4_7(4);  7: words_4_7(5);
            8: words_4_7(2);  9: words_4_7(3); 10: words_4_7(4); 11: words_4_7(5);
           12: words_4_7(4); 13: words_4_7(5); 14: words_4_7(6); 15: words_4_7(7);
        }
        size = 16;
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
        bit<32> len_delta = 0;

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
                len_delta = 16;
            }
        }

        // Words one hop pushes for this packet's instructions.
        meta.hop_words = 0;
        if (hdr.int_md.isValid()) {
            int_words_0_3.apply();
            int_words_4_7.apply();
            meta.hop_words = meta.hop_words + words_hi;
            if (hdr.int_md.instruction_bitmap[7:7] == 1) {
                meta.hop_words = meta.hop_words + 1;
            }
            if (hdr.int_md.domain_id == INT_DOMAIN_FORESIGHT &&
                hdr.int_md.ds_instruction == INT_DS_INS_TX_BYTES) {
                meta.hop_words = meta.hop_words + 1;
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
            } else if (hdr.udp.checksum == 0 &&
                       (hdr.int_md.instruction_bitmap & 0x007f) == 0 &&
                       (hdr.int_md.ds_instruction == 0 ||
                        (hdr.int_md.domain_id == INT_DOMAIN_FORESIGHT &&
                         hdr.int_md.ds_instruction == INT_DS_INS_TX_BYTES)) &&
                       (bit<8>)hdr.int_md.hop_ml == meta.hop_words) {
                stamp = true;
            }
        }

        // The values this hop stamps.
        meta.hop.egress_ts = (bit<64>)eg_prsr_md.global_tstamp;
        if (meta.report == 1) {
            meta.hop.ingress_port = (bit<16>)hdr.report_mirror.ingress_port;
            meta.hop.egress_port = (bit<16>)hdr.report_mirror.sink_egress_port;
            meta.hop.ingress_ts = (bit<64>)hdr.report_mirror.ingress_ts;
            meta.hop.hop_latency = eg_prsr_md.global_tstamp[31:0] -
                                   hdr.report_mirror.ingress_ts[31:0];
            meta.hop.queue_id = (bit<8>)hdr.report_mirror.sink_queue;
            bit<32> occupancy = occupancy_read.execute(hdr.report_mirror.sink_egress_port ++
                                                       hdr.report_mirror.sink_queue[2:0]);
            meta.hop.queue_occupancy = occupancy[23:0];
            meta.hop.tx_bytes = tx_bytes_read.execute(hdr.report_mirror.sink_egress_port);
        } else {
            meta.hop.ingress_port = (bit<16>)hdr.bridge.ingress_port;
            meta.hop.egress_port = (bit<16>)eg_intr_md.egress_port;
            meta.hop.ingress_ts = (bit<64>)hdr.bridge.ingress_ts;
            meta.hop.hop_latency = eg_prsr_md.global_tstamp[31:0] - hdr.bridge.ingress_ts[31:0];
            meta.hop.queue_id = (bit<8>)eg_intr_md.egress_qid;
            meta.hop.queue_occupancy = (bit<24>)eg_intr_md.enq_qdepth;
            occupancy_write.execute(eg_intr_md.egress_port ++ eg_intr_md.egress_qid[2:0]);
            // Bytes this hop adds or removes (INT), so the counter counts
            // what leaves the port; pkt_length includes the 18-byte bridged
            // header, which does not leave.
            bit<32> hop_bytes = (bit<32>)meta.hop_words << 2;
            bit<32> int_bytes = ((bit<32>)hdr.int_shim.len << 2) + 4;
            if (stamp && hdr.int_md.remaining_hop_cnt != 0) {
                len_delta = len_delta + hop_bytes;
            } else if (strip) {
                len_delta = len_delta - int_bytes;
            }
            bit<32> sent = (bit<32>)eg_intr_md.pkt_length - 18;
            meta.tx_bytes_add = sent + len_delta;
            meta.hop.tx_bytes = tx_bytes_add.execute(eg_intr_md.egress_port);
        }

        if (stamp) {
            if (hdr.int_md.remaining_hop_cnt == 0) {
                hdr.int_md.e = 1;   // zero UDP checksum: nothing to fix
            } else {
                bit<16> ins = hdr.int_md.instruction_bitmap;
                if ((ins & INT_INS_NODE_ID) != 0) {
                    hdr.int_node_id.setValid();
                    hdr.int_node_id.node_id = meta.node_id;
                }
                if ((ins & INT_INS_L1_PORTS) != 0) {
                    hdr.int_l1_ports.setValid();
                    hdr.int_l1_ports.ingress_port = meta.hop.ingress_port;
                    hdr.int_l1_ports.egress_port = meta.hop.egress_port;
                }
                if ((ins & INT_INS_HOP_LATENCY) != 0) {
                    hdr.int_hop_latency.setValid();
                    hdr.int_hop_latency.hop_latency = meta.hop.hop_latency;
                }
                if ((ins & INT_INS_QUEUE) != 0) {
                    hdr.int_queue.setValid();
                    hdr.int_queue.queue_id = meta.hop.queue_id;
                    hdr.int_queue.queue_occupancy = meta.hop.queue_occupancy;
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
                bit<16> bytes = (bit<16>)meta.hop_words << 2;
                hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
                hdr.int_shim.len = hdr.int_shim.len + meta.hop_words;
                hdr.udp.length = hdr.udp.length + bytes;
                hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
            }
        }

        if (strip) {
            if (meta.int_stack_parsed == 0) {
                reports.count(3);
                meta.egress_drop = 1;
            } else {
                bit<16> int_bytes = ((bit<16>)hdr.int_shim.len + 1) << 2;
                hdr.udp.length = hdr.udp.length - int_bytes;
                hdr.ipv4.total_len = hdr.ipv4.total_len - int_bytes;
                hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
                hdr.int_shim.setInvalid();
                hdr.int_md.setInvalid();
                hdr.int_stack.pop_front(FS_TNA_INT_STACK_WORDS);
            }
        }

        if (meta.report == 1) {
            report_config.apply();
            if (meta.report_configured == 0 || !hdr.int_md.isValid()) {
                reports.count(1);
                meta.egress_drop = 1;
            } else {
                // Inner packet: IPv4 20 + UDP 8 + shim 4 + INT-MD and stack
                // (+ BTH 12 for RoCEv2).
                bit<16> inner_bytes = 32 + ((bit<16>)hdr.int_shim.len << 2);
                if (hdr.udp.dst_port == UDP_PORT_ROCEV2) {
                    inner_bytes = inner_bytes + 12;
                }
                bit<16> report_words = 2 + (inner_bytes >> 2);
                if (report_words > 255) {
                    reports.count(2);
                    meta.egress_drop = 1;
                } else {
                    bit<32> seq = next_seq_no.execute(0);
                    hdr.report_group.setValid();
                    hdr.report_group.ver = REPORT_VERSION;
                    hdr.report_group.hw_id = 0;
                    hdr.report_group.seq_no = seq[21:0];
                    hdr.report_group.node_id = meta.node_id;
                    hdr.report_individual.setValid();
                    hdr.report_individual.rep_type = REPORT_TYPE_INT;
                    hdr.report_individual.in_type = REPORT_INNER_IPV4;
                    hdr.report_individual.report_length = report_words[7:0];
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
                    hdr.report_udp.length = 8 + 20 + inner_bytes;
                    hdr.report_ipv4.total_len = 20 + 8 + 20 + inner_bytes;
                    hdr.ethernet.setInvalid();
                    reports.count(0);
                }
            }
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
