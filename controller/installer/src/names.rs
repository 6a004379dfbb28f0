//! P4Runtime names of `p4src/v1model/foresight.p4` that the controller writes.
//! Kept in one place: `p4src/README.md` documents them, and a test resolves
//! every one against the committed P4Info.

pub const IPV4_LPM: &str = "FsIngress.routing.ipv4_lpm";
pub const SET_NEXTHOP: &str = "FsIngress.routing.set_nexthop";
pub const ECMP_SELECTOR: &str = "FsIngress.routing.ecmp_selector";

pub const SR_RESERVATION: &str = "FsIngress.sr.reservation";
/// `push_1` .. `push_4`, indexed by stack depth - 1.
pub const SR_PUSH: [&str; 4] = [
    "FsIngress.sr.push_1",
    "FsIngress.sr.push_2",
    "FsIngress.sr.push_3",
    "FsIngress.sr.push_4",
];
pub const SR_ADJACENCY: &str = "FsIngress.sr.adjacency";
pub const FORWARD_ADJACENCY: &str = "FsIngress.sr.forward_adjacency";

pub const DSCP_PRIORITY: &str = "FsIngress.qos.dscp_priority";
pub const SET_PRIORITY: &str = "FsIngress.qos.set_priority";

pub const INT_WATCHLIST: &str = "FsIngress.int_ingress.watchlist";
pub const INT_SOURCE: &str = "FsIngress.int_ingress.int_source";
pub const INT_SINK_PORTS: &str = "FsIngress.int_ingress.sink_ports";
pub const INT_SET_SINK: &str = "FsIngress.int_ingress.set_sink";
pub const INT_REPORT_SAMPLING: &str = "FsIngress.int_ingress.report_sampling";
pub const INT_SET_REPORT_EVERY: &str = "FsIngress.int_ingress.set_report_every";
pub const HASH_MODE: &str = "FsIngress.routing.hash_mode";
pub const HASH_QP_AWARE: &str = "FsIngress.routing.hash_qp_aware";
pub const HASH_FIVE_TUPLE: &str = "FsIngress.routing.hash_five_tuple";
pub const HASH_FLOWLET: &str = "FsIngress.routing.hash_flowlet";
pub const HASH_SPRAY: &str = "FsIngress.routing.hash_spray";
pub const HASH_SEED: &str = "FsIngress.routing.hash_seed";
pub const SET_HASH_SEED: &str = "FsIngress.routing.set_hash_seed";
pub const HASH_OFFSET: &str = "FsIngress.routing.hash_offset";
pub const SET_HASH_OFFSET: &str = "FsIngress.routing.set_hash_offset";
pub const INT_NODE_CONFIG: &str = "FsEgress.int_egress.node_config";
pub const INT_SET_NODE_ID: &str = "FsEgress.int_egress.set_node_id";
pub const INT_REPORT_CONFIG: &str = "FsEgress.int_egress.report_config";
pub const INT_SET_COLLECTOR: &str = "FsEgress.int_egress.set_collector";
pub const INT_PORT_MTU: &str = "FsEgress.int_egress.port_mtu";
pub const INT_SET_PORT_MTU: &str = "FsEgress.int_egress.set_port_mtu";
/// Clone session the INT sink mirrors report copies to
/// (`INT_REPORT_CLONE_SESSION` in `p4src/shared/formats.p4`).
pub const INT_REPORT_CLONE_SESSION: u32 = 64;

pub const DCQCN_PORT: &str = "FsEgress.ecn.dcqcn_port";
pub const SET_DCQCN: &str = "FsEgress.ecn.set_dcqcn";
pub const PREDRAIN: &str = "FsEgress.ecn.predrain";
pub const PREDRAIN_MARK: &str = "FsEgress.ecn.predrain_mark";

/// Every table the controller owns entries of (reconciliation reads these).
pub const OWNED_TABLES: [&str; 9] = [
    IPV4_LPM,
    SR_RESERVATION,
    SR_ADJACENCY,
    DSCP_PRIORITY,
    INT_WATCHLIST,
    INT_SINK_PORTS,
    INT_PORT_MTU,
    DCQCN_PORT,
    PREDRAIN,
];

/// Names the v1model program has and the TNA program does not have yet
/// (`p4src/README.md`, "Baselines on Tofino"): the controller writes them
/// only where the pipeline has them, and `tests/tna_names.rs` checks the
/// TNA P4Info still lacks them (so this list shrinks when it gains them).
pub const V1MODEL_ONLY: [&str; 4] = [HASH_OFFSET, SET_HASH_OFFSET, HASH_FLOWLET, HASH_SPRAY];
