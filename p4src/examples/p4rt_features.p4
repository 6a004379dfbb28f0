// p4rt_features: exercises every P4Runtime entity kind the Foresight client
// supports, on BMv2 with no data-plane interfaces at all.
//
// Packet-out with egress_port == CPU_PORT comes straight back as packet-in
// (so packet I/O is testable without veths); every packet-out also raises a
// digest with its source MAC; other tables/externs exist to be written and
// read: exact (benchmarks), ternary/range/optional with a direct counter and
// idle timeout, an ECMP action selector, an indirect counter, a register, a
// meter, multicast groups and clone sessions.

#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;  // simple_switch_grpc --cpu-port 255

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
}

struct learn_t {
    bit<48> src_addr;
    bit<9>  ingress_port;
}

struct metadata_t {
    bit<32> meter_color;
}

parser FeatParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control FeatVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control FeatIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    register<bit<32>>(64) scratch;
    meter(64, MeterType.packets) port_meter;
    direct_counter(CounterType.packets_and_bytes) acl_counter;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    action set_nexthop(bit<9> port, bit<48> dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    action acl_permit(bit<32> tag) {
        acl_counter.count();
        scratch.write(0, tag);
    }

    action acl_deny() {
        acl_counter.count();
        mark_to_drop(standard_metadata);
    }

    /// Large exact-match table: the write-rate benchmark fills it.
    table exact_table {
        key = { hdr.ethernet.dst_addr : exact @name("dst_addr"); }
        actions = { set_port; drop; }
        default_action = drop();
        size = 65536;
    }

    table acl {
        key = {
            hdr.ethernet.src_addr   : ternary  @name("src_addr");
            hdr.ethernet.ether_type : range    @name("ether_type");
            standard_metadata.ingress_port : optional @name("ingress_port");
        }
        actions = { acl_permit; acl_deny; NoAction; }
        default_action = NoAction();
        counters = acl_counter;
        support_timeout = true;
        size = 1024;
    }

    action_selector(HashAlgorithm.crc32, 32w1024, 32w16) ecmp_selector;

    table ecmp {
        key = {
            hdr.ethernet.dst_addr : exact    @name("dst_addr");
            hdr.ethernet.src_addr : selector @name("src_addr");
        }
        actions = { set_nexthop; }
        implementation = ecmp_selector;
        size = 1024;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            // Every packet-out is learned, so digests are testable.
            digest<learn_t>(1, { hdr.ethernet.src_addr, standard_metadata.ingress_port });
            if (hdr.packet_out.egress_port == CPU_PORT) {
                // Loop back to the controller as a packet-in.
                standard_metadata.egress_spec = CPU_PORT;
            } else {
                standard_metadata.egress_spec = hdr.packet_out.egress_port;
            }
            hdr.packet_out.setInvalid();
            return;
        }
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.meter_color);
        acl.apply();
        if (!ecmp.apply().hit) {
            exact_table.apply();
        }
    }
}

control FeatEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        }
    }
}

control FeatComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {}
}

control FeatDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
    }
}

V1Switch(FeatParser(), FeatVerifyChecksum(), FeatIngress(), FeatEgress(),
         FeatComputeChecksum(), FeatDeparser()) main;
