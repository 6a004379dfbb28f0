//! Validation of inbound NDSP messages into the domain types of
//! [`crate::types`].
//!
//! Every message a peer can send implements [`Validate`]: the requests (on
//! the controller) and the responses and watch events (on a client). A
//! message either becomes a domain value as a whole or yields a
//! [`ValidationError`] whose `field` is the path of the offending field,
//! relative to the message (for example `demands[2].size_bytes` or
//! `topology.ranks[3].host_address`). Validation has no side effects, so a
//! rejected request has changed nothing; on the server, `?` turns the error
//! into gRPC `INVALID_ARGUMENT` (see the `From` impl for `tonic::Status`).
//!
//! Checks that need controller state (does this job have a registered
//! topology, is this rank in it) are separate:
//! [`ValidatedDemandBatch::check_ranks`] and
//! [`ValidatedCollective::check_ranks`].
//!
//! The checks by what they apply to: `path.rs` (the field path an error
//! names), `fields.rs` (scalars, enums and the small shared messages),
//! `requests.rs`, `registered.rs` (against registered topologies) and
//! `responses.rs` (responses and watch events).

mod fields;
mod path;
mod registered;
mod requests;
mod responses;
#[cfg(test)]
mod tests;

/// A message that failed validation: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    /// Path of the offending field relative to the validated message,
    /// e.g. `topology.ranks[3].host_address`.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ValidationError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ValidationError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// gRPC metadata key under which a rejected request's field path is also
/// returned (the status message starts with it too).
pub const FIELD_METADATA_KEY: &str = "ndsp-field";

impl From<ValidationError> for tonic::Status {
    fn from(e: ValidationError) -> Self {
        let mut status = tonic::Status::invalid_argument(e.to_string());
        if let Ok(value) = e.field.parse() {
            status.metadata_mut().insert(FIELD_METADATA_KEY, value);
        }
        status
    }
}

/// Result of a validation.
pub type Result<T> = std::result::Result<T, ValidationError>;

/// A message that can be validated into a domain value.
pub trait Validate {
    /// The domain value.
    type Output;
    /// Validates the whole message; on error nothing of it is usable.
    fn validate(&self) -> Result<Self::Output>;
}
