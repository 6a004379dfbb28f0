//! Mixture-of-experts expert parallelism as one pattern: every step, each
//! expert-parallel (EP) group of ranks runs an all-to-all inside itself,
//! all groups at once, with uneven bytes per (source, destination) pair
//! (tokens are routed to experts unevenly, and differently every step).
//!
//! * [`pattern`] — the groups, and which NICs carry each pair's bytes
//!   ([`NicLayout`]: each rank's own NIC, or rail-aligned);
//! * [`bytes`] — one step's bytes per pair ([`StepBytes`]);
//! * [`routing`] — a path per flow computed from the pattern's structure
//!   ([`MoeRouting`]), at or within one flow of the fabric's lower bound;
//! * [`load`] — one step's bytes on the pinned paths ([`StepLoad`]).
//!
//! **Routing from structure** (details in `planes.rs`). The flows
//! that leave a leaf form a bipartite multigraph of leaves (as in
//! [`crate::assign`]); each leaf's flows, heaviest first, are cut into
//! runs of `S` (spines) and the runs are edge-coloured with `S` colours
//! ([`crate::colouring::Colouring::in_runs`], König): every run spreads
//! over all `S` spines. Every leaf uplink and downlink then carries at
//! most the leaf's bytes ÷ `S` (the fluid bound) plus its heaviest flow;
//! with equal bytes `⌈flows/S⌉` flows (König's bound), which is the fluid
//! bound when `S` divides the leaf's flow count. Among the colours the
//! runs leave free, flows (heaviest first) take the least-loaded spine,
//! which brings uneven bytes close to the fluid bound in practice. On a
//! 3-tier fabric each plane's inter-pod flows are coloured again in runs
//! of `X` (super-spines) per pod; when a pod link is the busiest, a
//! second order that cuts the runs per pod first (each pod's inter-pod
//! bytes spread over the planes) is tried and the lower peak kept. Flows
//! between NICs of one leaf go straight down and never touch an uplink.
//!
//! **Uneven bytes.** Bytes change the best routing only through the order
//! of each leaf's flows by size (which flows share a run) and the
//! least-loaded choices. The routing is computed once for a *shape*
//! (equal bytes, [`StepBytes::even`], routes the structure alone: runs
//! are then cut by NIC, so when a NIC's flows out of its leaf are a
//! multiple of `S`, every uplink carries as many of them, and a hot
//! expert's or a busy source's bytes spread evenly over the spines) and
//! the paths stay pinned: each step is evaluated on them in O(pairs)
//! ([`MoeRouting::evaluate_into`]), which says whether it fits a time
//! budget ([`StepLoad::fits`]) and how far it is from that step's own
//! bound ([`MoeRouting::step_bound`]). Routing again for a step's own
//! bytes ([`MoeRouting::route`]) reaches that step's bound more closely,
//! at the cost of a first step: a re-route when the evaluation says the
//! pinned paths no longer fit, not a per-step operation (figures in
//! `examples/moe_round.rs`).

pub mod bytes;
pub mod load;
pub mod pattern;
mod planes;
pub mod routing;

pub use bytes::StepBytes;
pub use load::{LinkLoad, StepLoad};
pub use pattern::{MoePattern, NicLayout, Rank};
pub use routing::{MoeFlow, MoeRouting};

/// Why a pattern, a step's bytes or a routing was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MoeError {
    /// The pattern has no group.
    #[error("the pattern has no EP group")]
    NoGroups,
    /// A group with fewer than two ranks has no all-to-all.
    #[error("EP group {group} has {size} rank(s): an all-to-all needs at least 2")]
    GroupTooSmall {
        /// Group index.
        group: usize,
        /// Its size.
        size: usize,
    },
    /// A rank names a server the fabric does not have.
    #[error("EP group {group}, rank {position}: server {server} does not exist (the fabric has {servers})")]
    UnknownServer {
        /// Group index.
        group: usize,
        /// Position in the group.
        position: usize,
        /// The server index given.
        server: u32,
        /// Servers in the fabric.
        servers: usize,
    },
    /// A rank names a GPU its server does not have.
    #[error(
        "EP group {group}, rank {position}: server '{server}' has {gpus} GPU(s), no GPU {gpu}"
    )]
    UnknownGpu {
        /// Group index.
        group: usize,
        /// Position in the group.
        position: usize,
        /// Server name.
        server: String,
        /// The GPU given.
        gpu: u32,
        /// GPUs of the server.
        gpus: u32,
    },
    /// A GPU is a rank of two groups, or twice a rank of one.
    #[error("GPU {gpu} of server '{server}' is rank {first_position} of EP group {first_group} and again rank {position} of EP group {group}")]
    RankInTwoGroups {
        /// Server name.
        server: String,
        /// GPU index in the server.
        gpu: u32,
        /// Where it appeared first.
        first_group: usize,
        /// Its position there.
        first_position: usize,
        /// Where it appears again.
        group: usize,
        /// Its position there.
        position: usize,
    },
    /// Rail-aligned traffic needs every server of a group to have the
    /// destination's rail.
    #[error("EP group {group} is rail-aligned but server '{server}' has {nics} NIC(s) and server '{other}' has {other_nics}")]
    RailsDiffer {
        /// Group index.
        group: usize,
        /// One server.
        server: String,
        /// Its NICs.
        nics: usize,
        /// Another server of the group.
        other: String,
        /// Its NICs.
        other_nics: usize,
    },
    /// The fabric's GPUs do not split into groups of this size.
    #[error("{gpus} GPUs do not split into EP groups of {ep}")]
    EpSize {
        /// Requested group size.
        ep: u32,
        /// GPUs in the fabric.
        gpus: u64,
    },
    /// A step's bytes give a different number of matrices than groups.
    #[error("the step has {got} byte matrices for {expected} EP groups")]
    MatrixCount {
        /// Groups in the pattern.
        expected: usize,
        /// Matrices given.
        got: usize,
    },
    /// A byte matrix does not have one entry per (source, destination) rank pair.
    #[error("EP group {group} has {ranks} ranks, so its byte matrix needs {ranks}x{ranks} = {expected} entries, not {got}")]
    MatrixSize {
        /// Group index.
        group: usize,
        /// Ranks in the group.
        ranks: usize,
        /// Entries needed.
        expected: usize,
        /// Entries given.
        got: usize,
    },
}
