//! Subcommands. One module per command family; add a variant here and a
//! `run` function in the module.

mod admin_client;
mod client_tls;
mod controller;
mod demo;
mod doctor;
mod entries;
mod hash;
mod int_collect;
mod link;
mod millis;
mod plan;
mod reserve;
mod scale;
mod scale_moe;
mod sim;
mod status;
mod switch;
mod target_args;
mod text_table;
mod tls_failure;
mod topo;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Command {
    /// Run the whole loop on an embedded default fabric and ring all-reduce
    /// (on BMv2 when installed, planning only otherwise).
    Demo(demo::DemoCmd),
    /// What this machine has of the tools Foresight uses (p4c, BMv2, PI,
    /// Mininet, etcd, Chromium, the Python environments), and what each
    /// missing one disables.
    Doctor(doctor::DoctorCmd),
    /// Talk to one P4Runtime switch: push a pipeline, write or read entries.
    Switch(switch::SwitchCmd),
    /// Fabric topologies: generate, show, validate (YAML).
    Topo(topo::TopoCmd),
    /// Plan reservations for demands or a collective; predicted completion.
    Plan(plan::PlanCmd),
    /// Run the controller daemon: NDSP server, planner, switch sessions.
    Controller(Box<controller::ControllerCmd>),
    /// Reserve a demand or a collective on a running controller.
    Reserve(reserve::ReserveCmd),
    /// Cancel a demand, collective, reservation or job on a running controller.
    Cancel(reserve::CancelCmd),
    /// Register a job's hosts on a running controller, announcing nothing.
    Register(reserve::RegisterCmd),
    /// A running controller's switches, reservations and link loads.
    Status(status::StatusCmd),
    /// What a switch holds, decoded with P4Info names (through the controller).
    Entries(entries::EntriesCmd),
    /// Collect INT telemetry reports into a CSV file (one row per hop).
    IntCollect(int_collect::IntCollectCmd),
    /// Tell a running controller a fabric link went down or came back up.
    Link(link::LinkCmd),
    /// Flow-level simulator: ECMP, QP hashing, adaptive, spraying, flowlets, Foresight.
    Sim(sim::SimCmd),
    /// Check a description of the switches' ECMP hash against observed choices.
    Hash(hash::HashCmd),
    /// What the controller computes for one NDSP batch on a generated
    /// fabric of thousands of switches: plan, intent, diff and encoded
    /// P4Runtime writes, timed, without switches.
    Scale(scale::ScaleCmd),
}

impl Command {
    /// Default log filter (FORESIGHT_LOG overrides) and whether logs are JSON.
    pub fn logging(&self) -> (&'static str, bool) {
        match self {
            Command::Controller(c) => ("info", c.json_logs()),
            _ => ("warn", false),
        }
    }

    /// How long the allocator should keep freed memory, where the default
    /// does not suit the command (the daemon: `controller::KEEP_FREED_MEMORY`).
    pub fn keep_freed_memory(&self) -> Option<std::time::Duration> {
        match self {
            // `scale` times what the daemon computes: with its allocator's
            // settings, or it would time the kernel zeroing fresh pages.
            Command::Controller(_) | Command::Scale(_) => Some(controller::KEEP_FREED_MEMORY),
            _ => None,
        }
    }
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Demo(cmd) => demo::run(cmd),
        Command::Doctor(cmd) => doctor::run(cmd),
        Command::Switch(cmd) => switch::run(cmd),
        Command::Topo(cmd) => topo::run(cmd),
        Command::Plan(cmd) => plan::run(cmd),
        Command::Controller(cmd) => controller::run(*cmd),
        Command::Reserve(cmd) => reserve::run(cmd),
        Command::Cancel(cmd) => reserve::cancel(cmd),
        Command::Register(cmd) => reserve::register(cmd),
        Command::Status(cmd) => status::run(cmd),
        Command::Entries(cmd) => entries::run(cmd),
        Command::Link(cmd) => link::run(cmd),
        Command::Sim(cmd) => sim::run(cmd),
        Command::IntCollect(cmd) => int_collect::run(cmd),
        Command::Hash(cmd) => hash::run(cmd),
        Command::Scale(cmd) => scale::run(cmd),
    }
}
