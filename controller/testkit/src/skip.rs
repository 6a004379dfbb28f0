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

#[cfg(test)]
mod tests {
    use std::process::Command;

    const CHILD: &str = "TESTKIT_SKIP_CHILD";

    /// Run by `the_line_survives_output_capture` in a child process of
    /// this test binary; a no-op otherwise.
    #[test]
    fn child_reports_a_skip() {
        if std::env::var_os(CHILD).is_some() {
            eprintln!("captured by the harness");
            super::skipped("child test", "a tool is missing");
        }
    }

    /// A passing test's SKIPPED line reaches the terminal even though the
    /// harness captures its `eprintln!` (the reason this module exists).
    #[test]
    fn the_line_survives_output_capture() {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "skip::tests::child_reports_a_skip",
                "--test-threads",
                "1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("1 passed"), "{stdout}");
        assert!(
            stderr.contains("SKIPPED child test: a tool is missing"),
            "stderr: {stderr}"
        );
        assert!(
            !stderr.contains("captured by the harness")
                && !stdout.contains("captured by the harness"),
            "the harness did not capture eprintln!: {stdout}\n{stderr}"
        );
    }
}
