//! `foresight`: the operator CLI and controller daemon.
//!
//! Each subcommand lives in its own module under `cmd/`; `main` only parses
//! arguments, sets up logging and dispatches.

mod cmd;
mod daemon;
mod fabric;

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
    let (level, json) = cli.command.logging();
    let filter = tracing_subscriber::EnvFilter::try_from_env("FORESIGHT_LOG")
        .unwrap_or_else(|_| level.into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
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
