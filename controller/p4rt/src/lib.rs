//! P4Runtime for Foresight: the official message and service definitions
//! (generated at build time, see `build.rs`) and an async client.
//!
//! - [`P4Info`] resolves names to ids, with suggestions for typos;
//! - [`entity`] builds table entries, action profiles, counters, registers…
//!   with values width-checked by the bytestring rules;
//! - [`Switch`] is one session with a device: arbitration, pipeline,
//!   batched writes, streamed reads, packet I/O and digests.

pub mod bytestring;
pub mod entity;
pub mod entry_spec;
pub mod error;
pub mod p4info;
pub mod prepared;
pub mod shared_write;
pub mod switch;
pub mod value;

pub use entity::TableEntryBuilder;
pub use entry_spec::{EntrySpec, MeterRates};
pub use error::{Error, Result, WriteError};
pub use p4info::P4Info;
pub use shared_write::{SharedEntity, SharedUpdate, SharedWriteRequest};
pub use switch::{Mastership, StreamEvent, Switch, SwitchOptions};
pub use value::Value;

/// Generated P4Runtime types, laid out by protobuf package.
pub mod proto {
    pub mod p4 {
        pub mod v1 {
            tonic::include_proto!("p4.v1");
        }
        pub mod config {
            pub mod v1 {
                tonic::include_proto!("p4.config.v1");
            }
        }
    }
    pub mod google {
        pub mod rpc {
            tonic::include_proto!("google.rpc");
        }
    }
}
