// v1model/routing.p4 — IPv4 LPM to a next hop, ECMP through an action selector,
// QP-aware hashing, independent tiers, flowlet switching and per-packet
// spraying.
//
// The controller programs FsIngress.routing.ipv4_lpm through the action
// profile FsIngress.routing.ecmp_selector: every next hop is a member
// (set_nexthop: port + MACs), an ECMP set is a group of members; a route
// points at a member (single path) or a group.
//
// How a packet picks its member (table hash_mode, switch-wide, default
// action hash_qp_aware; one P4Runtime name set for all modes):
//   hash_qp_aware()          ECMP on the flow hash below, RoCEv2 by QP;
//   hash_five_tuple()        ECMP on the flow hash, RoCEv2 on its 5-tuple
//                            like everything else (a fabric without
//                            QP-aware hashing);
//   hash_flowlet(timeout_us) flowlet switching (LetFlow): a flow keeps a
//                            random member while its packets come less than
//                            timeout_us apart, and draws a new one after a
//                            longer gap;
//   hash_spray()             per-packet spraying: a random member per packet.
// The lab compares them on the same traffic.
//
// ECMP flow hash (the Rust planner emulates it to predict paths; keep the
// field order and widths exactly):
//   RoCEv2 (UDP dport 4791, BTH parsed), QP-aware:
//     crc32(seed[32] ++ ipv4.src_addr ++ ipv4.dst_addr ++ udp.src_port ++ bth.dst_qp[24])
//   anything else:
//     crc32(seed[32] ++ ipv4.src_addr ++ ipv4.dst_addr ++ ipv4.protocol ++ l4 src ++ l4 dst)
// `seed` is the switch's own hash seed (table hash_seed, default 0), set by
// the controller, as real switches seed their ECMP hash per switch.
// Prepending the seed is equivalent to starting the CRC from another
// initial value, and works the same on TNA, whose CRC init is a
// compile-time constant. CRC is affine, so a seed only XORs a per-switch
// constant into one shared hash: flows that collided at one tier would
// still travel together at the next when groups are powers of two
// (controller/planner/src/ecmp.rs).
//
// Independent tiers: the selector takes the flow hash rotated right by the
// switch's hash offset (table hash_offset, default 0), so each tier reads
// the member from its own bits of the CRC. This is the ECMP hash offset of
// fixed-function switch ASICs, which SAI exposes as
// SAI_SWITCH_ATTR_ECMP_DEFAULT_HASH_OFFSET and SONiC sets per device role
// (ecmp_hash_offset): a barrel shift of the hash result before the member
// is chosen. The controller gives each tier a window of its own (leaves 0,
// spines 10, super-spines 20 bits), so power-of-two groups of up to 1,024
// members read disjoint bits at consecutive tiers and decide independently.
//
// Both hash inputs are 17 bytes (4 of seed + 13 of key), big-endian, no
// padding. crc32 is BMv2's HashAlgorithm.crc32: CRC-32/ISO-HDLC (poly
// 0x04C11DB7 reflected, init and final XOR 0xFFFFFFFF), the same as
// zlib.crc32. The selector then uses its 32-bit key unchanged
// (HashAlgorithm.identity) and BMv2 picks member (key mod n) of the group's
// members in ascending member-handle order, i.e. in the order the members
// were created on a fresh switch. So in the hashed modes the member is
// rotr32(crc, offset) mod n.
//
// Flowlets: registers indexed by the low bits of the flow hash (the
// QP-aware key for RoCEv2: a QP is what must stay in order) keep each
// slot's last-seen ingress timestamp (BMv2: microseconds since the switch
// started; 0 = never seen) and its current random draw, which is the
// selector key while the flowlet lasts. Flows that share a slot share a
// flowlet. Spraying draws the selector key per packet. Both ignore the
// offset: independent draws need none.
//
// A packet carrying INT hashes like the same flow without INT: INT is
// signalled by a DSCP bit (not hashed) and the BTH is parsed after the INT
// stack, so none of the hashed fields moves.

#ifndef FS_ROUTING_P4
#define FS_ROUTING_P4

#include "headers.p4"
#include "../shared/ecmp_hash.p4"

// How the selector key is made (set by the hash_mode actions).
#define FS_CHOOSE_BY_HASH 2w0
#define FS_CHOOSE_FLOWLET 2w1
#define FS_CHOOSE_SPRAY   2w2

control Routing(inout headers_t hdr, inout fs_metadata_t meta,
                inout standard_metadata_t sm) {

    @max_group_size(FS_ECMP_MAX_GROUP_SIZE)
    action_selector(HashAlgorithm.identity, FS_ECMP_SELECTOR_SIZE, 32w32) ecmp_selector;

    /// Per flowlet slot: ingress timestamp of its latest packet (0: never).
    register<bit<48>>(FS_FLOWLET_SLOTS) flowlet_last_seen;
    /// Per flowlet slot: the random selector key of its current flowlet.
    register<bit<32>>(FS_FLOWLET_SLOTS) flowlet_draw;

    /// Forward to a next hop: egress port and the MACs of the link, TTL - 1.
    action set_nexthop(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        sm.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    bit<1> qp_aware = 1;
    bit<2> choose = FS_CHOOSE_BY_HASH;
    bit<48> flowlet_timeout = 0;
    bit<32> ecmp_seed = 0;
    bit<5> ecmp_offset = 0;

    /// This switch's ECMP hash seed (prepended to every hash input).
    action set_hash_seed(bit<32> seed) { ecmp_seed = seed; }

    /// Switch-wide ECMP hash seed: the default action only (no key).
    table hash_seed {
        key = {}
        actions = { set_hash_seed; }
        default_action = set_hash_seed(0);
        size = 1;
    }

    /// This switch's hash offset: the selector reads the flow hash rotated
    /// right by `offset` bits (an ASIC's ECMP hash offset).
    action set_hash_offset(bit<5> offset) { ecmp_offset = offset; }

    /// Switch-wide hash offset: the default action only (no key).
    table hash_offset {
        key = {}
        actions = { set_hash_offset; }
        default_action = set_hash_offset(0);
        size = 1;
    }

    /// ECMP; RoCEv2 hashes (src, dst, UDP source port, destination QP).
    action hash_qp_aware() { qp_aware = 1; choose = FS_CHOOSE_BY_HASH; }
    /// ECMP; RoCEv2 hashes on the 5-tuple like any other UDP traffic.
    action hash_five_tuple() { qp_aware = 0; choose = FS_CHOOSE_BY_HASH; }
    /// Flowlet switching: a new random member after a gap above
    /// `timeout_us` (in ingress timestamp units, microseconds on BMv2).
    action hash_flowlet(bit<32> timeout_us) {
        qp_aware = 1;
        choose = FS_CHOOSE_FLOWLET;
        flowlet_timeout = (bit<48>)timeout_us;
    }
    /// Per-packet spraying: a random member for every packet.
    action hash_spray() { qp_aware = 1; choose = FS_CHOOSE_SPRAY; }

    /// Switch-wide ECMP mode: the default action only (no key).
    table hash_mode {
        key = {}
        actions = { hash_qp_aware; hash_five_tuple; hash_flowlet; hash_spray; }
        default_action = hash_qp_aware();
        size = 1;
    }

    // p4c's BMv2 backend warns that it cannot give a table with an action
    // profile a default action ("Target does not support default_action ...
    // due to action profiles") for every such table, because its frontend
    // always adds NoAction; a miss is handled below (DROP_NO_ROUTE).
    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr   : lpm @name("dst_addr");
            meta.flow.ecmp_hash : selector;
        }
        actions = {
            set_nexthop;
            @defaultonly NoAction;
        }
        implementation = ecmp_selector;
        size = FS_IPV4_LPM_SIZE;
    }

    apply {
        hash_mode.apply();
        hash_seed.apply();
        hash_offset.apply();
        bit<32> flow_hash;
        if (meta.flow.is_roce == 1 && qp_aware == 1) {
            hash(flow_hash, HashAlgorithm.crc32, 32w0,
                 FS_ECMP_QP_AWARE_FIELDS(ecmp_seed, hdr, meta.flow),
                 64w0x100000000);
        } else {
            hash(flow_hash, HashAlgorithm.crc32, 32w0,
                 FS_ECMP_FIVE_TUPLE_FIELDS(ecmp_seed, hdr, meta.flow),
                 64w0x100000000);
        }
        if (choose == FS_CHOOSE_SPRAY) {
            random(meta.flow.ecmp_hash, 32w0, 32w0xFFFFFFFF);
        } else if (choose == FS_CHOOSE_FLOWLET) {
            bit<32> slot = flow_hash & (FS_FLOWLET_SLOTS - 1);
            bit<48> now = sm.ingress_global_timestamp;
            bit<48> last;
            bit<32> draw;
            flowlet_last_seen.read(last, slot);
            flowlet_draw.read(draw, slot);
            if (last == 0 || now - last > flowlet_timeout) {
                random(draw, 32w0, 32w0xFFFFFFFF);
                flowlet_draw.write(slot, draw);
            }
            flowlet_last_seen.write(slot, now);
            meta.flow.ecmp_hash = draw;
        } else {
            // rotr32(flow_hash, offset): the low word of the doubled hash
            // shifted right.
            bit<64> doubled = flow_hash ++ flow_hash;
            meta.flow.ecmp_hash = (doubled >> ecmp_offset)[31:0];
        }
        if (!ipv4_lpm.apply().hit) {
            meta.drop_reason = DROP_NO_ROUTE;
        }
    }
}

#endif  // FS_ROUTING_P4
