// tna/sizes.p4 — table, selector, counter and register sizes of the TNA
// (Tofino) build, in one place, under the macro names of v1model/sizes.p4.
//
// The v1model sizes (v1model/sizes.p4) are dimensioned for a 32,768-GPU
// three-tier Clos, which BMv2 allocates lazily. On Tofino every entry costs
// SRAM or TCAM whether used or not, so where a size differs from the
// v1model one the comment says why, and p4src/tna/RESOURCES.md gives what
// the compiler allocated.

#ifndef FS_SIZES_P4
#define FS_SIZES_P4

// Tofino PortId_t is bit<9>: 512 device ports per chip (4 pipes x 72 in
// use); the same index space as v1model.
#define FS_PORT_COUNT 512
// Queues per port used by the program (TNA qid is 5 bits; Foresight uses
// the 8 queues a default TM configuration maps to the 8 traffic classes).
#define FS_QUEUES_PER_PORT 8
#define FS_PORT_QUEUE_COUNT 4096

// Routes: a switch holds its own hosts' /32s and one prefix per leaf, so
// 4,096 serves 4,000 leaves (128k NICs at 32 per leaf). The v1model 65,536
// would take six of the twelve stages on Tofino.
#define FS_IPV4_LPM_SIZE 4096
#define FS_ECMP_SELECTOR_SIZE 4096
#define FS_ECMP_MAX_GROUP_SIZE 128
// ECMP groups the selector holds (TNA sizes groups explicitly): one per
// set of equal-cost next hops a switch uses, at most its uplink count times
// the make-before-break factor.
#define FS_ECMP_GROUPS 1024

// Reserved flows whose source is on this leaf: one TCAM stage (16 of 24
// blocks at 4,096 88-bit entries).
#define FS_RESERVATION_SIZE 4096
#define FS_ADJACENCY_SIZE 1024
#define FS_INT_WATCHLIST_SIZE 2048
#define FS_INT_SINK_PORTS_SIZE 512
// Report sampling counters (16-bit, one per 12-bit flow hash): 8 KB of SRAM.
#define FS_INT_SAMPLE_SLOTS 4096
#define FS_DCQCN_PORTS_SIZE 512
// Watched and pre-drained flows: half a stage of TCAM each.
#define FS_PREDRAIN_SIZE 2048
#define FS_DSCP_PRIORITY_SIZE 64

#define FS_DROP_REASON_COUNT 32
#define FS_PORT_DROP_COUNT 16384

// INT metadata stack words the TNA parsers hold. Tofino parses at most
// 160 bytes of a packet; the sink's egress path (intrinsic metadata 27 B,
// bridged header 18, Ethernet, IPv4, UDP, INT shim and INT-MD 58) leaves 57
// bytes, 14 words: two hops of Foresight's 7-word instruction set (node id,
// L1 ports, hop latency, queue, egress timestamp, tx bytes), or four hops of
// a 3-word one. A hop whose words would not fit sets the INT-MD E bit
// instead of stamping, as when the hop count is exhausted.
#define FS_TNA_INT_STACK_WORDS 14
// The largest INT shim length (INT-MD header 3 words + the stack).
#define FS_TNA_INT_MAX_LEN 17

#endif  // FS_SIZES_P4
