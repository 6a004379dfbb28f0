//! The Network Demand Signal Protocol (NDSP), version 1.
//!
//! - [`proto`]: the messages and the `DemandSignaling` gRPC client and
//!   server, generated at build time from `proto/ndsp/v1/ndsp.proto` (with
//!   `protox`, so no system `protoc` is needed).
//! - [`validate`]: turns every inbound message (requests on the controller,
//!   responses and events on a client) into plain domain types from
//!   [`types`], or into a [`ValidationError`] naming the offending field.
//!   Validation is pure: a rejected message has changed nothing.
//! - [`encode`]: the reverse direction, domain types to messages.
//!
//! See `proto/ndsp/README.md` for the RPCs, the versioning rule and the
//! error model.

pub mod encode;
pub mod types;
pub mod validate;

pub use types::Version;
pub use validate::{Validate, ValidationError};

/// Generated protobuf messages and gRPC stubs (package `foresight.ndsp.v1`).
#[allow(clippy::large_enum_variant, clippy::doc_lazy_continuation)]
pub mod proto {
    tonic::include_proto!("foresight.ndsp.v1");
}

/// The encoded `FileDescriptorSet` of `ndsp.proto` (with its imports), for
/// gRPC server reflection and tools.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ndsp_descriptors.bin"));

/// The protocol version this crate implements.
pub const PROTOCOL_VERSION: Version = Version { major: 1, minor: 3 };

/// Limits of protocol version 1, enforced by [`validate`].
pub mod limits {
    /// Nanoseconds per second.
    pub const NS_PER_SEC: u64 = 1_000_000_000;
    /// Longest client identifier (tenant, job, demand, collective ids).
    pub const MAX_ID_LEN: usize = 128;
    /// Longest controller-assigned identifier (reservation and flow ids).
    pub const MAX_CONTROLLER_ID_LEN: usize = 256;
    /// Most demands in one `SubmitDemand` request.
    pub const MAX_DEMANDS_PER_REQUEST: usize = 4096;
    /// Largest `Topology.world_size`.
    pub const MAX_WORLD_SIZE: u32 = 1 << 20;
    /// Largest start offset and largest duration: 24 hours.
    pub const MAX_HORIZON_NS: u64 = 24 * 3600 * NS_PER_SEC;
    /// Largest rate, given or implied: 10 Tbit/s.
    pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;
    /// Most channels of a collective.
    pub const MAX_CHANNELS: u32 = 64;
    /// Most occurrences of a recurrence.
    pub const MAX_OCCURRENCES: u32 = 1_000_000;
    /// Deepest SR label stack the protocol carries (the fabric may push
    /// fewer; `HandshakeResponse.max_label_stack_depth` says how many).
    pub const MAX_LABEL_STACK_DEPTH: usize = 16;
    /// Largest MPLS label (20 bits).
    pub const MPLS_LABEL_MAX: u32 = (1 << 20) - 1;
    /// Labels 0 to 15 are special-purpose (RFC 3032); the first usable one.
    pub const MPLS_FIRST_UNRESERVED_LABEL: u32 = 16;
    /// Largest RoCE queue pair number (24 bits).
    pub const QP_MAX: u32 = (1 << 24) - 1;
    /// Queue pairs 0 and 1 are special; the first one a flow can use.
    pub const QP_MIN: u32 = 2;
    /// Shortest telemetry interval: 10 ms.
    pub const MIN_TELEMETRY_INTERVAL_NS: u64 = 10_000_000;
    /// Longest telemetry interval: 1 hour.
    pub const MAX_TELEMETRY_INTERVAL_NS: u64 = 3600 * NS_PER_SEC;
    /// Largest `ListReservations` page.
    pub const MAX_PAGE_SIZE: u32 = 1000;
    /// Page size when the request says 0.
    pub const DEFAULT_PAGE_SIZE: u32 = 100;
    /// Longest page token.
    pub const MAX_PAGE_TOKEN_LEN: usize = 1024;
    /// Longest free-form text (advisories, abort reasons, warnings).
    pub const MAX_TEXT_LEN: usize = 1024;
    /// Longest short free-form text (client name).
    pub const MAX_NAME_LEN: usize = 256;
    /// Longest NIC name.
    pub const MAX_NIC_LEN: usize = 64;
    /// Longest library version string.
    pub const MAX_LIBRARY_VERSION_LEN: usize = 64;
    /// Longest device id.
    pub const MAX_DEVICE_ID_LEN: usize = 128;
    /// Longest switch or host name in paths and link ids.
    pub const MAX_NODE_NAME_LEN: usize = 128;
}
