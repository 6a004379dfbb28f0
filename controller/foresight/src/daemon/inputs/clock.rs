//! The controller's clock: Unix time in ns, the unit of every window,
//! install time and expiry in the state and on the wire. One function, so
//! that every part reads time the same way.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time in ns.
pub fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
