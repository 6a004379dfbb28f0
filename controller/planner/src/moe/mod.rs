//! Mixture-of-experts expert parallelism as one pattern: every step, each
//! expert-parallel (EP) group of ranks runs an all-to-all inside itself,
//! all groups at once, with uneven bytes per (source, destination) pair
//! (tokens are routed to experts unevenly, and differently every step).
//!
//! * [`pattern`] — the groups, and which NICs carry each pair's bytes
//!   ([`NicLayout`]: each rank's own NIC, or rail-aligned);
//! * [`bytes`] — one step's bytes per pair ([`StepBytes`]).

pub mod bytes;
pub mod pattern;

pub use bytes::StepBytes;
pub use pattern::{MoePattern, NicLayout, Rank};

/// Why a pattern or a step's bytes was refused.
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
