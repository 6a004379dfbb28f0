//! Errors of the P4Runtime client, each naming what was wrong.

use std::fmt;

/// Anything that can go wrong talking to a switch or building an entity.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{rpc} on {addr}: {status}")]
    Rpc {
        rpc: &'static str,
        addr: String,
        status: Box<tonic::Status>,
    },
    #[error("{addr}: the stream channel closed ({reason})")]
    StreamClosed { addr: String, reason: String },
    #[error("{addr}: no arbitration answer within {waited_ms} ms")]
    ArbitrationTimeout { addr: String, waited_ms: u64 },
    #[error("{addr}: not primary for device {device_id} (election id {election_id}); primary holds {primary:?}")]
    NotPrimary {
        addr: String,
        device_id: u64,
        election_id: u128,
        primary: Option<u128>,
    },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    P4Info(#[from] P4InfoError),
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("reading {path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A name that P4Info does not know, or a malformed P4Info.
#[derive(Debug, thiserror::Error)]
pub enum P4InfoError {
    #[error("unknown {kind} `{name}`{}", suggest(.suggestions))]
    Unknown {
        kind: &'static str,
        name: String,
        suggestions: Vec<String>,
    },
    #[error("unknown {kind} id {id}")]
    UnknownId { kind: &'static str, id: u32 },
    #[error("cannot parse P4Info {source_name}: {reason}")]
    Parse { source_name: String, reason: String },
}

fn suggest(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        String::new()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

/// A value that does not fit the field it is meant for.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValueError {
    /// e.g. `table ipv4_lpm, match field dst_addr`.
    pub field: String,
    pub reason: String,
}

/// One update of a batch that the switch refused.
#[derive(Debug, Clone)]
pub struct UpdateFailure {
    /// Index of the update in the caller's list (not the batch).
    pub index: usize,
    /// Human description of the entity, e.g. `table_entry ipv4_lpm`.
    pub entity: String,
    /// gRPC canonical code, e.g. 6 for ALREADY_EXISTS.
    pub code: i32,
    pub message: String,
}

/// A Write RPC that failed; lists exactly which updates failed and why.
/// Updates not listed in `failures` were applied (BMv2 applies a batch
/// update by update, as the P4Runtime spec allows).
#[derive(Debug, thiserror::Error)]
pub struct WriteError {
    pub addr: String,
    pub failures: Vec<UpdateFailure>,
    /// Set when the whole RPC failed without per-update details.
    pub status: Option<String>,
    /// Updates that were not sent because an earlier batch failed.
    pub not_sent: usize,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "write to {} failed", self.addr)?;
        if let Some(status) = &self.status {
            write!(f, ": {status}")?;
        }
        for failure in self.failures.iter().take(5) {
            write!(
                f,
                "; update #{} ({}): code {} {}",
                failure.index, failure.entity, failure.code, failure.message
            )?;
        }
        if self.failures.len() > 5 {
            write!(f, "; and {} more", self.failures.len() - 5)?;
        }
        if self.not_sent > 0 {
            write!(f, "; {} later updates not sent", self.not_sent)?;
        }
        Ok(())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
