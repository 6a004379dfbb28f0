// tna/foresight.p4 — Foresight's switch pipeline for Tofino (TNA).
//
// The same data plane as v1model/foresight.p4 with the same
// P4Runtime names: SR-MPLS push/pop, QP-aware ECMP (the same CRC-32),
// INT-MD with Telemetry Reports, DCQCN and pre-drain ECN marking, priority
// queues, counters and drop reasons. Formats and constants are shared
// (shared/formats.p4, shared/ecmp_hash.p4); sizes are tna/sizes.p4. Each
// control is in the file of the v1model program's name for it, so the two
// programs compare file by file (no checksums.p4: Tofino checks and updates
// the IPv4 checksum in its parser and deparser, tna/parser.p4).
// Compiled by p4c's Tofino backend: p4src/compile.sh --tna.

#include <core.p4>
#include <tna.p4>

#include "sizes.p4"
#include "headers.p4"
#include "parser.p4"
#include "ingress.p4"
#include "egress.p4"

// Metadata starts at zero, as in v1model (Tofino otherwise leaves a field
// undefined until written; the program reads some only where it set them).
@pa_auto_init_metadata
Pipeline(FsIngressParser(), FsIngress(), FsIngressDeparser(),
         FsEgressParser(), FsEgress(), FsEgressDeparser()) pipe;

Switch(pipe) main;
