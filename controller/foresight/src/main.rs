//! `foresight`: the operator CLI and controller daemon.
//!
//! Each subcommand lives in its own module under `cmd/`; `main` only parses
//! arguments, sets up logging and dispatches.

mod allocator;
mod cmd;
mod daemon;
mod fabric;

use std::ffi::OsStr;
use std::io::IsTerminal;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "foresight",
    version,
    about = "Predictive traffic engineering for AI data-center fabrics"
)]
struct Cli {
    #[command(subcommand)]
    command: cmd::Command,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(delay) = cli.command.keep_freed_memory() {
        // Before the command allocates anything it would free.
        allocator::keep_freed_memory(delay);
    }
    let (level, json) = cli.command.logging();
    let filter = tracing_subscriber::EnvFilter::try_from_env("FORESIGHT_LOG")
        .unwrap_or_else(|_| level.into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_logs(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ));
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    match cmd::run(cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Colour codes only for a person at a terminal: a log file, a pipe or a
/// journal gets plain text, and a non-empty `NO_COLOR` turns colour off
/// anywhere (no-color.org).
fn colour_logs(stderr_is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_logs(true, None));
        assert!(colour_logs(true, Some(OsStr::new(""))));
        assert!(!colour_logs(true, Some(OsStr::new("1"))));
        assert!(!colour_logs(false, None));
        assert!(!colour_logs(false, Some(OsStr::new(""))));
    }
}
