//! Subcommands. One module per command family; add a variant here and a
//! `run` function in the module.

mod switch;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {
    /// Talk to one P4Runtime switch: push a pipeline, write or read entries.
    Switch(switch::SwitchCmd),
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Switch(cmd) => switch::run(cmd),
    }
}
