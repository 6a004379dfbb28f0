// v1model/sizes.p4 — every table, selector, counter and register size of the
// Foresight pipeline, in one place.
//
// Dimensioned for a 32,768-GPU three-tier Clos (one 400G NIC per GPU,
// radix-64 leaves: 32 host ports + 32 uplinks, so 1,024 leaves in 32 pods;
// spines and super-spines of radix 64). BMv2 defaults every table to 1,024
// entries, which the routing and reservation tables outgrow on such a fabric,
// so each size is explicit. BMv2 allocates lazily: a large size costs nothing
// until entries are installed (ternary tables are searched linearly, so the
// entry count, not the size, sets their cost).
//
// Preprocessor macros rather than `const` because @max_group_size takes a
// literal.

#ifndef FS_SIZES_P4
#define FS_SIZES_P4

// v1model ports are bit<9>: 512 port ids.
#define FS_PORT_COUNT 512
// BMv2 priority queues per port (simple_switch_grpc --priority-queues 8;
// standard_metadata.priority is bit<3>).
#define FS_QUEUES_PER_PORT 8
// FS_PORT_COUNT * FS_QUEUES_PER_PORT, for per-(port, queue) registers.
#define FS_PORT_QUEUE_COUNT 4096

// IPv4 LPM: one /32 per GPU NIC (32,768) plus per-leaf subnets, loopbacks and
// fabric point-to-point links (about 1,024 + 2,048 + 2 x 32,768 / 2), rounded
// up to a power of two with headroom.
#define FS_IPV4_LPM_SIZE 65536
// ECMP action selector: members are (port, next-hop MAC) adjacencies, at most
// one per port, shared by all groups; 4,096 leaves room for per-group members
// while a planner migrates groups. A group never has more members than a
// switch has uplinks (64 on a radix-128 spine), 128 allows for LAG-like
// weighting by repeating members.
#define FS_ECMP_SELECTOR_SIZE 4096
#define FS_ECMP_MAX_GROUP_SIZE 128
// Flowlet slots (routing.p4, hash_flowlet mode), indexed by the low bits of
// the flow hash, so a power of two: the flows a spine of that fabric
// forwards at once (32 leaves below x 32 hosts x a few QPs each, about
// 4,096) x4 so that few share a slot (flows that do move together).
#define FS_FLOWLET_SLOTS 16384

// SR reservations installed at an ingress leaf: 32 GPUs x (ring/tree peers x
// QPs per connection, up to 64 concurrent reserved flows per GPU) = 2,048,
// x2 for make-before-break when a plan is replaced, x2 headroom.
#define FS_RESERVATION_SIZE 8192
// SR adjacency labels are local: one per port (1000 + port), so 512 suffice;
// 1,024 leaves room for a second label block during a renumbering.
#define FS_ADJACENCY_SIZE 1024

// INT watchlist at a source leaf: half of the reserved flows watched plus
// sampled background flows.
#define FS_INT_WATCHLIST_SIZE 4096
// INT sink (host-facing) ports: at most one entry per port.
#define FS_INT_SINK_PORTS_SIZE 512
// Report sampling counters at a sink, indexed by a 12-bit flow hash: the
// flows one leaf sinks (32 hosts x 64 reserved flows = 2,048) x2 so that
// few share a counter (flows that do share one are sampled together).
#define FS_INT_SAMPLE_SLOTS 4096

// DCQCN congestion-point profile: one entry per egress port.
#define FS_DCQCN_PORTS_SIZE 512
// Pre-drain marks: competing flows per egress port before a reserved burst;
// 64 ports x 64 flows x 2 (overlapping bursts).
#define FS_PREDRAIN_SIZE 8192
// DSCP -> priority: one entry per codepoint.
#define FS_DSCP_PRIORITY_SIZE 64

// Drop reasons (see headers.p4, DROP_*): room for 32.
#define FS_DROP_REASON_COUNT 32
// FS_PORT_COUNT * FS_DROP_REASON_COUNT, for drops per (ingress port, reason).
#define FS_PORT_DROP_COUNT 16384

#endif  // FS_SIZES_P4
