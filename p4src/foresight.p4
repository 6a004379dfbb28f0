// foresight.p4 — Foresight's switch pipeline for BMv2 (v1model).
//
// Every switch of the fabric (leaf, spine, super-spine) runs this program;
// roles differ only in table entries. This file only wires the
// architecture-neutral parts (include/headers.p4, include/parser.p4) and the
// v1model pipelines (include/ingress.p4, include/egress.p4) into V1Switch.
// A TNA top file would do the same with its own parser/pipeline wrappers.
//
// Run with: simple_switch_grpc ... -- --priority-queues 8
// (see include/priority.p4). Table names, keys and actions are documented in
// p4src/README.md.

#include <core.p4>
#include <v1model.p4>

#include "headers.p4"
#include "parser.p4"
#include "checksums.p4"
#include "ingress.p4"
#include "egress.p4"

parser FsV1Parser(packet_in packet, out headers_t hdr, inout fs_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    FsParser() fs_parser;
    state start {
        fs_parser.apply(packet, hdr);
        transition accept;
    }
}

V1Switch(FsV1Parser(), FsVerifyChecksum(), FsIngress(), FsEgress(),
         FsComputeChecksum(), FsDeparser()) main;
