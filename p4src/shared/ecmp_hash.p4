// shared/ecmp_hash.p4 — the ECMP hash inputs, shared by the v1model and TNA programs
// so that both compute exactly the same CRC-32 (the planner emulates it; see
// routing.p4 for the definition and controller/planner/src/ecmp.rs).
//
// Each macro expands to the field list handed to the hash, in order:
//   seed (32) ++ src (32) ++ dst (32) ++ UDP source port (16) ++ BTH dest QP (24)
//   seed (32) ++ src (32) ++ dst (32) ++ protocol (8) ++ L4 src (16) ++ L4 dst (16)
// `seed` is the switch's hash seed, `hdr` the parsed headers and `flow` the
// flow_key metadata (flow_meta_t) of the program that expands them.

#ifndef FS_ECMP_HASH_P4
#define FS_ECMP_HASH_P4

#define FS_ECMP_QP_AWARE_FIELDS(seed, hdr, flow) \
    { seed, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.udp.src_port, hdr.bth.dst_qp }

#define FS_ECMP_FIVE_TUPLE_FIELDS(seed, hdr, flow) \
    { seed, hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol, \
      flow.l4_src_port, flow.l4_dst_port }

#endif  // FS_ECMP_HASH_P4
