// routing.p4 — IPv4 LPM to a next hop, ECMP through an action selector,
// QP-aware hashing.
//
// The controller programs FsIngress.routing.ipv4_lpm through the action
// profile FsIngress.routing.ecmp_selector: every next hop is a member
// (set_nexthop: port + MACs), an ECMP set is a group of members; a route
// points at a member (single path) or a group.
//
// ECMP hash (the Rust planner emulates it to predict collisions; keep the
// field order and widths exactly):
//   RoCEv2 (UDP dport 4791, BTH parsed):
//     crc32(seed[32] ++ ipv4.src_addr ++ ipv4.dst_addr ++ udp.src_port ++ bth.dst_qp[24])
//   anything else:
//     crc32(seed[32] ++ ipv4.src_addr ++ ipv4.dst_addr ++ ipv4.protocol ++ l4 src ++ l4 dst)
// `seed` is the switch's own hash seed (table hash_seed, default 0), set by
// the controller, as real switches seed their ECMP hash per switch.
// Prepending the seed is equivalent to starting the CRC from another
// initial value, and works the same on TNA, whose CRC init is a
// compile-time constant. CRC is affine, so a seed XORs a per-switch
// constant into one shared hash: it ends the fabric-wide repetition of one
// choice, but flows that collided at one tier still travel together at the
// next when groups are powers of two (controller/planner/src/ecmp.rs).
// The hash mode is a switch-wide setting (table hash_mode, default action
// QP-aware): `hash_five_tuple` makes RoCEv2 hash like everything else, on
// the 5-tuple, which is what a fabric without QP-aware hashing does; the
// lab compares the two on the same traffic.
// Both inputs are 17 bytes (4 of seed + 13 of key), big-endian, no padding. crc32 is BMv2's
// HashAlgorithm.crc32: CRC-32/ISO-HDLC (poly 0x04C11DB7 reflected, init and
// final XOR 0xFFFFFFFF), the same as zlib.crc32. The selector then uses the
// hash unchanged (HashAlgorithm.identity over the 32-bit value) and BMv2
// picks member (hash mod n) of the group's members in ascending member-handle
// order, i.e. in the order the members were created on a fresh switch.
//
// A packet carrying INT hashes like the same flow without INT: INT is
// signalled by a DSCP bit (not hashed) and the BTH is parsed after the INT
// stack, so none of the hashed fields moves.

#ifndef FS_ROUTING_P4
#define FS_ROUTING_P4

#include "headers.p4"
#include "ecmp_hash.p4"

control Routing(inout headers_t hdr, inout fs_metadata_t meta,
                inout standard_metadata_t sm) {

    @max_group_size(FS_ECMP_MAX_GROUP_SIZE)
    action_selector(HashAlgorithm.identity, FS_ECMP_SELECTOR_SIZE, 32w32) ecmp_selector;

    /// Forward to a next hop: egress port and the MACs of the link, TTL - 1.
    action set_nexthop(port_id_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        sm.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    bit<1> qp_aware = 1;
    bit<32> ecmp_seed = 0;

    /// This switch's ECMP hash seed (prepended to every hash input).
    action set_hash_seed(bit<32> seed) { ecmp_seed = seed; }

    /// Switch-wide ECMP hash seed: the default action only (no key).
    table hash_seed {
        key = {}
        actions = { set_hash_seed; }
        default_action = set_hash_seed(0);
        size = 1;
    }

    /// RoCEv2 hashes (src, dst, UDP source port, destination QP).
    action hash_qp_aware() { qp_aware = 1; }
    /// RoCEv2 hashes on the 5-tuple like any other UDP traffic.
    action hash_five_tuple() { qp_aware = 0; }

    /// Switch-wide ECMP hash mode: the default action only (no key).
    table hash_mode {
        key = {}
        actions = { hash_qp_aware; hash_five_tuple; }
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
        if (meta.flow.is_roce == 1 && qp_aware == 1) {
            hash(meta.flow.ecmp_hash, HashAlgorithm.crc32, 32w0,
                 FS_ECMP_QP_AWARE_FIELDS(ecmp_seed, hdr, meta.flow),
                 64w0x100000000);
        } else {
            hash(meta.flow.ecmp_hash, HashAlgorithm.crc32, 32w0,
                 FS_ECMP_FIVE_TUPLE_FIELDS(ecmp_seed, hdr, meta.flow),
                 64w0x100000000);
        }
        if (!ipv4_lpm.apply().hit) {
            meta.drop_reason = DROP_NO_ROUTE;
        }
    }
}

#endif  // FS_ROUTING_P4
