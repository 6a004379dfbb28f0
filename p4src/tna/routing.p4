// tna/routing.p4 — IPv4 LPM and QP-aware ECMP,
// the Tofino way of v1model/routing.p4.

#ifndef FS_TNA_ROUTING_P4
#define FS_TNA_ROUTING_P4

#include "headers.p4"
#include "../shared/ecmp_hash.p4"

// v1model/routing.p4 the Tofino way: the same CRC-32 over the same fields
// (shared/ecmp_hash.p4) computed by Hash<> into meta.flow.ecmp_hash, and an
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

#endif  // FS_TNA_ROUTING_P4
