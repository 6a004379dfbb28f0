// v1model/int.p4 — In-band Network Telemetry, INT-MD over UDP (P4.org INT v2.1),
// with Telemetry Report v2.0 reports from the sink.
//
// Roles (one switch may play several):
//   source  first hop of a flow in FsIngress.int_ingress.watchlist: inserts
//           the INT shim (type INT-MD, NPT 0, original DSCP) and the INT-MD
//           header after the UDP header, sets the INT DSCP bit, and stamps
//           its own metadata.
//   transit every switch that sees an INT-MD header and whose egress port is
//           not a sink port: pushes Hop ML words of metadata on top of the
//           stack and decrements Remaining Hop Count; at 0 it sets E instead.
//   sink    the switch whose egress port is in FsIngress.int_ingress.sink_ports
//           (host-facing): removes shim, INT-MD header and stack and restores
//           the DSCP, so the host receives the packet it would have received
//           without INT, byte for byte; and sends a telemetry report.
//
// Metadata a hop can provide (instruction bit: value):
//   0 node id (FsEgress.int_egress.node_config); 1 ingress/egress port;
//   2 hop latency (egress - ingress global timestamp, microseconds on BMv2);
//   3 queue id (BMv2 priority queue) + occupancy (packets at enqueue);
//   4/5 ingress/egress timestamp (microseconds since switch start, BMv2);
//   6 ports again as 32-bit level-2 ids; 7 Tx utilization and 8 buffer:
//   not available on BMv2, all-ones as the spec requires; 15 checksum
//   complement; Foresight domain (0x4653) DS bit 0: egress port transmitted
//   bytes modulo 2^32 (HPCC's txBytes).
//   A hop skips (pushes nothing, does not decrement) packets whose
//   instructions it cannot honour exactly: reserved bits 9-14, unknown
//   domain-specific bits, a Hop ML that disagrees with the bitmap, or a
//   non-zero UDP checksum without bit 15 (see below).
//   MTU (INT v2.1 5.3): FsEgress.int_egress.port_mtu gives an egress
//   port's MTU (IPv4 total length plus any MPLS labels, in bytes; ports
//   without an entry are unchecked). A hop whose metadata would take the
//   packet past it pushes nothing, does not decrement Remaining Hop Count
//   and sets the M bit; a source whose INT headers alone would not fit
//   leaves the packet without INT. BMv2 ports themselves have no MTU.
//
// UDP checksum: RoCEv2 sends zero UDP checksums, which stay zero. For a
// non-zero checksum the source also sets instruction bit 15 and every hop
// fills its Checksum Complement so that its changes are checksum-neutral
// (INT v2.1 5.6); the checksum field itself never changes, and once the sink
// removes INT the original checksum is valid again. The one direct update is
// setting the E bit (no metadata, so no complement); the sink reverts it.
//
// Reports: the sink clones the packet as it arrived (I2E clone, session
// INT_REPORT_CLONE_SESSION, which the controller points at the collector
// port). The copy's egress pass removes any MPLS labels, pushes the sink's own
// metadata on the stack and wraps the packet in Ethernet/IPv4/UDP + Telemetry
// Report v2.0 (group header, one individual report: RepType INT, InType IPv4,
// F=1, no report-header metadata), truncated after the BTH (RoCEv2) or the
// INT stack. Sequence numbers count reports per switch (22 bits).
//   BMv2/v1model limit: the original packet's egress pass (where its queue
//   on the host port is known) cannot hand its metadata stack to a clone —
//   an E2E clone copies the packet after the stack was removed and v1model
//   field lists carry only fixed-size fields. So the report is built from the
//   ingress copy, and the sink's entry uses the data packet's own ports, queue
//   id and ingress timestamp, the host port's transmitted bytes and last
//   observed occupancy of that queue (registers updated by every packet), and
//   the report copy's egress time for the egress timestamp and hop latency.

#ifndef FS_INT_P4
#define FS_INT_P4

#include "headers.p4"

// --- one's-complement arithmetic (RFC 1071 / RFC 1624) ---------------------
bit<16> ones_fold(in bit<32> acc) {
    bit<32> t = (acc & 0xffff) + (acc >> 16);
    t = (t & 0xffff) + (t >> 16);
    return t[15:0];
}
// Checksum after one 16-bit word changed from old_value to new_value
// (RFC 1624, eq. 3); a result of 0 is sent as 0xffff (RFC 768).
bit<16> csum_replace16(in bit<16> csum, in bit<16> old_value, in bit<16> new_value) {
    bit<16> c = ~ones_fold((bit<32>)(~csum) + (bit<32>)(~old_value) + (bit<32>)new_value);
    return c == 0 ? 16w0xffff : c;
}
// Sum of the two halves of a 32-bit value.
bit<32> halves32(in bit<32> v) {
    return (bit<32>)v[31:16] + (bit<32>)v[15:0];
}
bit<32> halves64(in bit<64> v) {
    return (bit<32>)v[63:48] + (bit<32>)v[47:32] + (bit<32>)v[31:16] + (bit<32>)v[15:0];
}

// Metadata words a hop pushes for these instructions.
bit<8> int_hop_words(in bit<16> ins, in bit<16> ds) {
    bit<8> w = 0;
    if ((ins & INT_INS_NODE_ID) != 0)     { w = w + 1; }
    if ((ins & INT_INS_L1_PORTS) != 0)    { w = w + 1; }
    if ((ins & INT_INS_HOP_LATENCY) != 0) { w = w + 1; }
    if ((ins & INT_INS_QUEUE) != 0)       { w = w + 1; }
    if ((ins & INT_INS_INGRESS_TS) != 0)  { w = w + 2; }
    if ((ins & INT_INS_EGRESS_TS) != 0)   { w = w + 2; }
    if ((ins & INT_INS_L2_PORTS) != 0)    { w = w + 2; }
    if ((ins & INT_INS_TX_UTIL) != 0)     { w = w + 1; }
    if ((ins & INT_INS_BUFFER) != 0)      { w = w + 1; }
    if ((ins & INT_INS_CHECKSUM_COMPLEMENT) != 0) { w = w + 1; }
    if ((ds & INT_DS_INS_TX_BYTES) != 0)  { w = w + 1; }
    return w;
}

// ---------------------------------------------------------------------------
// Ingress: watchlist (source), sink detection and the report clone.
// ---------------------------------------------------------------------------
control IntIngress(in headers_t hdr, inout fs_metadata_t meta,
                   inout standard_metadata_t sm) {

    direct_counter(CounterType.packets_and_bytes) watchlist_counter;

    /// Insert INT into this flow at this switch. max_hop: Remaining Hop Count
    /// (>= 1, this switch included); instruction_bitmap: INT v2.1 bits
    /// (reserved bits are ignored; bit 15 is added for non-zero UDP checksums);
    /// ds_instruction: Foresight domain bits (0x8000 = tx bytes).
    action int_source(bit<8> max_hop, bit<16> instruction_bitmap,
                      bit<16> ds_instruction) {
        meta.telemetry.source = 1;
        meta.telemetry.max_hop = max_hop;
        meta.telemetry.instruction_bitmap = instruction_bitmap;
        meta.telemetry.ds_instruction = ds_instruction;
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

    /// The egress port faces hosts: INT ends here.
    action set_sink() {
        meta.telemetry.sink = 1;
    }

    table sink_ports {
        key = {
            sm.egress_spec : exact @name("egress_port");
        }
        actions = {
            set_sink;
            @defaultonly NoAction;
        }
        size = FS_INT_SINK_PORTS_SIZE;
    }

    /// Packets of a flow the sink counts per report: it reports one in
    /// `every` (0 and 1 report every packet). Set by the controller, which
    /// scales what it derives from report counts by the same factor.
    action set_report_every(bit<16> every) {
        meta.telemetry.report_every = every;
    }

    table report_sampling {
        key = {}
        actions = { set_report_every; }
        default_action = set_report_every(1);
        size = 1;
    }

    // Packets of the flow in each slot since its last report.
    register<bit<16>>(FS_INT_SAMPLE_SLOTS) report_sample_count;

    /// The sink's sampling decision (`report_now`): counts the flow's
    /// packets in its hash slot, so its reports are evenly spaced whatever
    /// other flows do (unless they share its slot).
    @hidden
    action sample_report() {
        hash(meta.telemetry.sample_slot, HashAlgorithm.crc16, 12w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, meta.flow.l4_src_port,
               meta.flow.l4_dst_port, meta.flow.dst_qp }, (bit<32>)FS_INT_SAMPLE_SLOTS);
        bit<16> seen;
        report_sample_count.read(seen, (bit<32>)meta.telemetry.sample_slot);
        seen = seen + 1;
        meta.telemetry.report_now = (bit<1>)(seen >= meta.telemetry.report_every);
        report_sample_count.write((bit<32>)meta.telemetry.sample_slot,
                                  seen >= meta.telemetry.report_every ? 16w0 : seen);
    }

    apply {
        bool fragment = hdr.ipv4.flags[0:0] == 1 || hdr.ipv4.frag_offset != 0;
        // TCP is watched too, for its entry's counter (what T+5 learns a
        // TCP job from); INT itself rides on UDP only.
        if ((hdr.udp.isValid() || hdr.tcp.isValid()) && !hdr.int_shim.isValid() && !fragment) {
            watchlist.apply();
            if (!hdr.udp.isValid()) {
                meta.telemetry.source = 0;
            }
        }
        if (hdr.int_shim.isValid() || meta.telemetry.source == 1) {
            sink_ports.apply();
            if (meta.telemetry.sink == 1) {
                meta.telemetry.ingress_port = sm.ingress_port;
                meta.telemetry.sink_egress_port = sm.egress_spec;
                meta.telemetry.sink_queue = sm.priority;
                meta.telemetry.ingress_ts = sm.ingress_global_timestamp;
                report_sampling.apply();
                sample_report();
                if (meta.telemetry.report_now == 1) {
                    clone_preserving_field_list(CloneType.I2E, INT_REPORT_CLONE_SESSION,
                                                FL_INT_REPORT);
                }
                if (hdr.int_md.isValid() && hdr.int_md.d == 1) {
                    // D bit: the sink reports and discards.
                    meta.drop_reason = DROP_INT_DISCARD;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Push one hop's metadata (transit hops, the source's own entry, the sink's
// entry in a report).
// ---------------------------------------------------------------------------
control IntStamp(inout headers_t hdr, inout fs_metadata_t meta, in int_hop_t v) {
    apply {
        bit<16> ins = hdr.int_md.instruction_bitmap;
        bit<16> ds = 0;
        bool ok = true;
        if (hdr.int_md.domain_id == INT_DOMAIN_FORESIGHT) {
            ds = hdr.int_md.ds_instruction;
            if ((ds & ~INT_DS_INS_TX_BYTES) != 0) { ok = false; }
        } else if (hdr.int_md.ds_instruction != 0) {
            ok = false;   // another domain's metadata: skip (INT v2.1 5.8)
        }
        if ((ins & INT_INS_RESERVED) != 0) { ok = false; }
        if (int_hop_words(ins, ds) != (bit<8>)hdr.int_md.hop_ml) { ok = false; }
        if (hdr.udp.checksum != 0 && (ins & INT_INS_CHECKSUM_COMPLEMENT) == 0) {
            ok = false;   // could not stay checksum-neutral, see the file comment
        }

        bit<16> hop_bytes = ((bit<16>)hdr.int_md.hop_ml) << 2;
        bool too_big = meta.telemetry.mtu != 0 &&
            hdr.ipv4.total_len + meta.telemetry.label_bytes + hop_bytes > meta.telemetry.mtu;
        if (hdr.int_md.remaining_hop_cnt == 0) {
            // Max hop count exceeded: push nothing, set E once.
            if (hdr.int_md.e == 0) {
                bit<16> hi_old = hdr.int_md.ver ++ hdr.int_md.d ++ hdr.int_md.e ++
                                 hdr.int_md.m ++ hdr.int_md.rsvd[11:3];
                hdr.int_md.e = 1;
                bit<16> hi_new = hdr.int_md.ver ++ hdr.int_md.d ++ hdr.int_md.e ++
                                 hdr.int_md.m ++ hdr.int_md.rsvd[11:3];
                if (hdr.udp.checksum != 0) {
                    hdr.udp.checksum = csum_replace16(hdr.udp.checksum, hi_old, hi_new);
                }
            }
        } else if (ok && too_big) {
            // The metadata would not fit the egress MTU: push nothing, set M
            // once (the sink reverts its checksum change, as for E).
            if (hdr.int_md.m == 0) {
                bit<16> hi_old = hdr.int_md.ver ++ hdr.int_md.d ++ hdr.int_md.e ++
                                 hdr.int_md.m ++ hdr.int_md.rsvd[11:3];
                hdr.int_md.m = 1;
                bit<16> hi_new = hdr.int_md.ver ++ hdr.int_md.d ++ hdr.int_md.e ++
                                 hdr.int_md.m ++ hdr.int_md.rsvd[11:3];
                if (hdr.udp.checksum != 0) {
                    hdr.udp.checksum = csum_replace16(hdr.udp.checksum, hi_old, hi_new);
                }
            }
        } else if (ok) {
            if ((ins & INT_INS_NODE_ID) != 0) {
                hdr.int_node_id.setValid();
                hdr.int_node_id.node_id = meta.telemetry.node_id;
            }
            if ((ins & INT_INS_L1_PORTS) != 0) {
                hdr.int_l1_ports.setValid();
                hdr.int_l1_ports.ingress_port = v.ingress_port;
                hdr.int_l1_ports.egress_port = v.egress_port;
            }
            if ((ins & INT_INS_HOP_LATENCY) != 0) {
                hdr.int_hop_latency.setValid();
                hdr.int_hop_latency.hop_latency = v.hop_latency;
            }
            if ((ins & INT_INS_QUEUE) != 0) {
                hdr.int_queue.setValid();
                hdr.int_queue.queue_id = v.queue_id;
                hdr.int_queue.queue_occupancy = v.queue_occupancy;
            }
            if ((ins & INT_INS_INGRESS_TS) != 0) {
                hdr.int_ingress_ts.setValid();
                hdr.int_ingress_ts.ingress_ts = v.ingress_ts;
            }
            if ((ins & INT_INS_EGRESS_TS) != 0) {
                hdr.int_egress_ts.setValid();
                hdr.int_egress_ts.egress_ts = v.egress_ts;
            }
            if ((ins & INT_INS_L2_PORTS) != 0) {
                hdr.int_l2_ports.setValid();
                hdr.int_l2_ports.ingress_port = (bit<32>)v.ingress_port;
                hdr.int_l2_ports.egress_port = (bit<32>)v.egress_port;
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
            if ((ds & INT_DS_INS_TX_BYTES) != 0) {
                hdr.int_ds_tx_bytes.setValid();
                hdr.int_ds_tx_bytes.tx_bytes = v.tx_bytes;
            }

            // Header fields this push changes.
            bit<16> bytes = ((bit<16>)hdr.int_md.hop_ml) << 2;
            hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
            hdr.int_shim.len = hdr.int_shim.len + (bit<8>)hdr.int_md.hop_ml;
            hdr.udp.length = hdr.udp.length + bytes;
            hdr.ipv4.total_len = hdr.ipv4.total_len + bytes;
            meta.len_delta = meta.len_delta + (bit<32>)bytes;

            if ((ins & INT_INS_CHECKSUM_COMPLEMENT) != 0) {
                hdr.int_checksum_complement.setValid();
                hdr.int_checksum_complement.checksum_complement = 0xffffffff;
                if (hdr.udp.checksum != 0) {
                    // One's-complement sum of everything this switch changed
                    // under the UDP checksum (RoCEv2's zero checksum skips
                    // this): earlier changes (the source's headers), the
                    // metadata pushed now, and the old -> new header words.
                    bit<32> acc = meta.telemetry.csum_delta;
                    if (hdr.int_node_id.isValid())  { acc = acc + halves32(hdr.int_node_id.node_id); }
                    if (hdr.int_l1_ports.isValid()) {
                        acc = acc + (bit<32>)v.ingress_port + (bit<32>)v.egress_port;
                    }
                    if (hdr.int_hop_latency.isValid()) { acc = acc + halves32(v.hop_latency); }
                    if (hdr.int_queue.isValid()) {
                        acc = acc + halves32(v.queue_id ++ v.queue_occupancy);
                    }
                    if (hdr.int_ingress_ts.isValid()) { acc = acc + halves64(v.ingress_ts); }
                    if (hdr.int_egress_ts.isValid())  { acc = acc + halves64(v.egress_ts); }
                    if (hdr.int_l2_ports.isValid()) {
                        acc = acc + (bit<32>)v.ingress_port + (bit<32>)v.egress_port;
                    }
                    if (hdr.int_tx_util.isValid()) { acc = acc + 0x1fffe; }
                    if (hdr.int_buffer.isValid())  { acc = acc + 0x1fffe; }
                    if (hdr.int_ds_tx_bytes.isValid()) { acc = acc + halves32(v.tx_bytes); }
                    // Old values, from the new ones.
                    bit<8> rhc_old = hdr.int_md.remaining_hop_cnt + 1;
                    bit<8> len_old = hdr.int_shim.len - (bit<8>)hdr.int_md.hop_ml;
                    bit<16> udp_len_old = hdr.udp.length - bytes;
                    bit<16> md_lo_old = hdr.int_md.rsvd[2:0] ++ hdr.int_md.hop_ml ++ rhc_old;
                    bit<16> md_lo_new = hdr.int_md.rsvd[2:0] ++ hdr.int_md.hop_ml ++
                                        hdr.int_md.remaining_hop_cnt;
                    bit<16> shim_old = hdr.int_shim.int_type ++ hdr.int_shim.npt ++
                                       hdr.int_shim.rsvd ++ len_old;
                    bit<16> shim_new = hdr.int_shim.int_type ++ hdr.int_shim.npt ++
                                       hdr.int_shim.rsvd ++ hdr.int_shim.len;
                    // The UDP length is counted twice: pseudo-header and UDP header.
                    acc = acc + (bit<32>)(~md_lo_old) + (bit<32>)md_lo_new
                              + (bit<32>)(~shim_old) + (bit<32>)shim_new
                              + (bit<32>)(~udp_len_old) + (bit<32>)hdr.udp.length
                              + (bit<32>)(~udp_len_old) + (bit<32>)hdr.udp.length;
                    hdr.int_checksum_complement.checksum_complement =
                        16w0 ++ ~ones_fold(acc);
                }
            }
            meta.telemetry.csum_delta = 0;
        }
    }
}

// ---------------------------------------------------------------------------
// Egress: source insertion, transit stamping, sink removal, reports, and the
// per-port state the stamps read.
// ---------------------------------------------------------------------------
control IntEgress(inout headers_t hdr, inout fs_metadata_t meta,
                  inout standard_metadata_t sm) {

    // Transmitted bytes per egress port (modulo 2^32), stamped as the
    // Foresight DS metadata and read by the controller like HPCC's txBytes.
    register<bit<32>>(FS_PORT_COUNT) port_tx_bytes;
    // Occupancy (packets) each (port, queue) had when its latest packet was
    // enqueued; index port * 8 + queue. Used for the sink's report entry.
    register<bit<32>>(FS_PORT_QUEUE_COUNT) queue_occupancy;
    register<bit<32>>(1) report_seq_no;
    // Report copies: index 0 sent, 1 dropped (no collector configured),
    // 2 dropped (report would exceed 255 words).
    counter(4, CounterType.packets_and_bytes) reports;

    IntStamp() transit_stamp;
    IntStamp() report_stamp;

    /// Node id stamped by this switch (INT bit 0) and used in reports.
    action set_node_id(bit<32> node_id) {
        meta.telemetry.node_id = node_id;
    }

    table node_config {
        key = {}
        actions = { set_node_id; }
        default_action = set_node_id(0);
        size = 1;
    }

    /// Where reports go: outer Ethernet/IPv4/UDP of the report packet.
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
        hdr.report_ipv4.flags = 0b010;     // DF (Telemetry Report v2.0, 3.1)
        hdr.report_ipv4.frag_offset = 0;
        hdr.report_ipv4.ttl = 64;
        hdr.report_ipv4.protocol = IP_PROTO_UDP;
        hdr.report_ipv4.src_addr = src_addr;
        hdr.report_ipv4.dst_addr = collector_addr;
        hdr.report_udp.setValid();
        hdr.report_udp.src_port = src_port;
        hdr.report_udp.dst_port = collector_port;
        hdr.report_udp.checksum = 0;
        meta.telemetry.report_configured = 1;
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

    /// The port's MTU in bytes (IPv4 total length plus MPLS labels).
    action set_port_mtu(bit<16> mtu) {
        meta.telemetry.mtu = mtu;
    }

    table port_mtu {
        key = {
            sm.egress_port : exact @name("egress_port");
        }
        actions = {
            set_port_mtu;
            @defaultonly NoAction;
        }
        size = FS_PORT_COUNT;
    }

    // Source: insert shim + INT-MD header (the source's own entry is pushed
    // by the stamp that follows). Called from apply only, not a table action.
    @hidden
    action insert_int_headers(bit<16> ins, bit<16> ds, bit<8> words) {
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
        hdr.int_md.hop_ml = (bit<5>)words;
        hdr.int_md.remaining_hop_cnt = meta.telemetry.max_hop;
        hdr.int_md.instruction_bitmap = ins;
        hdr.int_md.domain_id = INT_DOMAIN_FORESIGHT;
        hdr.int_md.ds_instruction = ds;
        hdr.int_md.ds_flags = 0;
        hdr.ipv4.dscp = hdr.ipv4.dscp | INT_DSCP_BIT;
        hdr.udp.length = hdr.udp.length + 16;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 16;
        meta.len_delta = meta.len_delta + 16;
    }

    apply {
        node_config.apply();
        meta.telemetry.csum_delta = 0;
        bool report = sm.instance_type == INSTANCE_TYPE_INGRESS_CLONE;

        if (report) {
            // The report copy: the packet as the sink received it, without
            // its SR labels (the inner packet of a report starts at IPv4).
            hdr.mpls[0].setInvalid();
            hdr.mpls[1].setInvalid();
            hdr.mpls[2].setInvalid();
            hdr.mpls[3].setInvalid();
        }

        // The MTU the stamps respect (a report copy is truncated: none).
        meta.telemetry.mtu = 0;
        meta.telemetry.label_bytes = 0;
        if (!report) {
            port_mtu.apply();
            if (hdr.mpls[0].isValid()) { meta.telemetry.label_bytes = 4; }
            if (hdr.mpls[1].isValid()) { meta.telemetry.label_bytes = 8; }
            if (hdr.mpls[2].isValid()) { meta.telemetry.label_bytes = 12; }
            if (hdr.mpls[3].isValid()) { meta.telemetry.label_bytes = 16; }
        }
        bool headers_fit = meta.telemetry.mtu == 0 ||
            hdr.ipv4.total_len + meta.telemetry.label_bytes + 16 <= meta.telemetry.mtu;

        // Source (on a report copy only when source and sink are one switch).
        if (meta.telemetry.source == 1 && !hdr.int_shim.isValid() &&
            hdr.udp.isValid() && (report || meta.telemetry.sink == 0) &&
            meta.telemetry.max_hop != 0 && headers_fit) {
            bit<16> ins = meta.telemetry.instruction_bitmap & ~INT_INS_RESERVED;
            if (hdr.udp.checksum != 0) {
                ins = ins | INT_INS_CHECKSUM_COMPLEMENT;
            }
            bit<16> ds = meta.telemetry.ds_instruction & INT_DS_INS_TX_BYTES;
            bit<8> words = int_hop_words(ins, ds);
            insert_int_headers(ins, ds, words);
            if (hdr.udp.checksum != 0) {
                // Changes under the UDP checksum, neutralised by this
                // switch's Checksum Complement in the stamp that follows.
                bit<16> udp_len_old = hdr.udp.length - 16;
                meta.telemetry.csum_delta =
                      (bit<32>)(hdr.int_shim.int_type ++ hdr.int_shim.npt ++
                                hdr.int_shim.rsvd ++ hdr.int_shim.len)
                    + (bit<32>)(hdr.int_shim.rsvd2 ++ hdr.int_shim.orig_dscp ++
                                hdr.int_shim.rsvd3)
                    + (bit<32>)(hdr.int_md.ver ++ hdr.int_md.d ++ hdr.int_md.e ++
                                hdr.int_md.m ++ hdr.int_md.rsvd[11:3])
                    + (bit<32>)(hdr.int_md.rsvd[2:0] ++ hdr.int_md.hop_ml ++
                                hdr.int_md.remaining_hop_cnt)
                    + (bit<32>)hdr.int_md.instruction_bitmap
                    + (bit<32>)hdr.int_md.domain_id
                    + (bit<32>)hdr.int_md.ds_instruction
                    + (bit<32>)hdr.int_md.ds_flags
                    + (bit<32>)(~udp_len_old) + (bit<32>)hdr.udp.length
                    + (bit<32>)(~udp_len_old) + (bit<32>)hdr.udp.length;
            }
        }

        if (report) {
            report_config.apply();
            bit<32> report_bytes = 0;
            if (meta.telemetry.report_configured == 0 || !hdr.int_md.isValid()) {
                reports.count(1);
                mark_to_drop(sm);
                meta.egress_drop = 1;
            } else {
                // The sink's own entry (see the BMv2/v1model note above).
                bit<32> qindex = ((bit<32>)meta.telemetry.sink_egress_port << 3)
                               + (bit<32>)meta.telemetry.sink_queue;
                bit<32> occupancy;
                queue_occupancy.read(occupancy, qindex);
                bit<32> tx_bytes;
                port_tx_bytes.read(tx_bytes, (bit<32>)meta.telemetry.sink_egress_port);
                int_hop_t hop;
                hop.ingress_port = (bit<16>)meta.telemetry.ingress_port;
                hop.egress_port = (bit<16>)meta.telemetry.sink_egress_port;
                hop.hop_latency = (bit<32>)(sm.egress_global_timestamp -
                                            meta.telemetry.ingress_ts);
                hop.queue_id = (bit<8>)meta.telemetry.sink_queue;
                hop.queue_occupancy = occupancy[23:0];
                hop.ingress_ts = (bit<64>)meta.telemetry.ingress_ts;
                hop.egress_ts = (bit<64>)sm.egress_global_timestamp;
                hop.tx_bytes = tx_bytes;
                report_stamp.apply(hdr, meta, hop);

                // Inner packet: IPv4 20 + UDP 8 + shim 4 + INT-MD and stack
                // + BTH 12 (RoCEv2); the rest is truncated.
                bit<32> inner_bytes = 32 + ((bit<32>)hdr.int_shim.len << 2);
                if (hdr.bth.isValid()) {
                    inner_bytes = inner_bytes + 12;
                }
                bit<32> report_words = 2 + (inner_bytes >> 2);
                if (report_words > 255) {
                    reports.count(2);
                    mark_to_drop(sm);
                    meta.egress_drop = 1;
                } else {
                    bit<32> seq;
                    report_seq_no.read(seq, 0);
                    report_seq_no.write(0, seq + 1);
                    hdr.report_group.setValid();
                    hdr.report_group.ver = REPORT_VERSION;
                    hdr.report_group.hw_id = 0;
                    hdr.report_group.seq_no = seq[21:0];
                    hdr.report_group.node_id = meta.telemetry.node_id;
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
                    hdr.report_udp.length = (bit<16>)(8 + 20 + inner_bytes);
                    hdr.report_ipv4.total_len = (bit<16>)(20 + 8 + 20 + inner_bytes);
                    hdr.ethernet.setInvalid();
                    report_bytes = REPORT_OUTER_BYTES + inner_bytes;
                    truncate(report_bytes);
                    reports.count(0);
                }
            }
            // The report copy is what leaves the collector port.
            bit<32> sent;
            port_tx_bytes.read(sent, (bit<32>)sm.egress_port);
            port_tx_bytes.write((bit<32>)sm.egress_port, sent + report_bytes);
        } else {
            if (hdr.int_md.isValid()) {
                if (meta.telemetry.sink == 1) {
                    // Sink: remove INT, restore the DSCP (and the checksum, if
                    // a hop set E or M).
                    if (hdr.udp.checksum != 0 && (hdr.int_md.e == 1 || hdr.int_md.m == 1)) {
                        bit<16> hi_set = hdr.int_md.ver ++ hdr.int_md.d ++ hdr.int_md.e ++
                                         hdr.int_md.m ++ hdr.int_md.rsvd[11:3];
                        bit<16> hi_clear = hdr.int_md.ver ++ hdr.int_md.d ++ 1w0 ++
                                           1w0 ++ hdr.int_md.rsvd[11:3];
                        hdr.udp.checksum = csum_replace16(hdr.udp.checksum, hi_set, hi_clear);
                    }
                    bit<16> int_bytes = ((bit<16>)hdr.int_shim.len + 1) << 2;
                    hdr.udp.length = hdr.udp.length - int_bytes;
                    hdr.ipv4.total_len = hdr.ipv4.total_len - int_bytes;
                    hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
                    meta.len_delta = meta.len_delta - (bit<32>)int_bytes;
                    hdr.int_shim.setInvalid();
                    hdr.int_md.setInvalid();
                    hdr.int_stack.setInvalid();
                } else {
                    // Transit (or the source's own entry).
                    bit<32> tx_bytes;
                    port_tx_bytes.read(tx_bytes, (bit<32>)sm.egress_port);
                    int_hop_t hop;
                    hop.ingress_port = (bit<16>)sm.ingress_port;
                    hop.egress_port = (bit<16>)sm.egress_port;
                    hop.hop_latency = (bit<32>)(sm.egress_global_timestamp -
                                                sm.ingress_global_timestamp);
                    hop.queue_id = (bit<8>)sm.priority;
                    hop.queue_occupancy = (bit<24>)sm.enq_qdepth;
                    hop.ingress_ts = (bit<64>)sm.ingress_global_timestamp;
                    hop.egress_ts = (bit<64>)sm.egress_global_timestamp;
                    hop.tx_bytes = tx_bytes;
                    transit_stamp.apply(hdr, meta, hop);
                }
            }
            // Per-port state for later stamps and reports.
            bit<32> sent;
            port_tx_bytes.read(sent, (bit<32>)sm.egress_port);
            port_tx_bytes.write((bit<32>)sm.egress_port,
                                sent + sm.packet_length + meta.len_delta);
            queue_occupancy.write(((bit<32>)sm.egress_port << 3) + (bit<32>)sm.priority,
                                  (bit<32>)sm.enq_qdepth);
        }
    }
}

#endif  // FS_INT_P4
