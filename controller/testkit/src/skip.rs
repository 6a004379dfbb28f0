//! The SKIPPED line of a test whose tools (BMv2, root, a compiled P4Info)
//! are missing on this machine.
//!
//! The test harness captures `eprintln!` of a passing test, so a skip
//! printed that way shows as a plain "ok". The line is written to the
//! process's standard error directly, which the harness does not capture,
//! so `cargo test` shows it beside the "ok".

use std::fmt::Display;
use std::io::Write;

/// Say on the real standard error that `test` was skipped, and why.
pub fn skipped(test: &str, why: impl Display) {
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {why}");
}

/// The BMv2 toolchain, or `None` after a SKIPPED line naming `test`.
pub fn bmv2(test: &str) -> Option<bmv2::Toolchain> {
    match bmv2::Toolchain::find() {
        Ok(tools) => Some(tools),
        Err(missing) => {
            skipped(test, missing);
            None
        }
    }
}
