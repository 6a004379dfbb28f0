// v1model/foresight.p4 — Foresight's switch pipeline for BMv2 (v1model).
//
// Every switch of the fabric (leaf, spine, super-spine) runs this program;
// roles differ only in table entries. This file only wires the parser
// (parser.p4), the checksums and the pipelines (ingress.p4, egress.p4) into
// V1Switch. The Tofino program, tna/, has one file per control under the
// same names, so the two compare file by file; what both use (header
// formats, constants, the ECMP hash inputs) is in shared/.
//
// Run with: simple_switch_grpc ... -- --priority-queues 8
// (see v1model/priority.p4). Table names, keys and actions are documented in
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
