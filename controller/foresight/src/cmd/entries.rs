//! `foresight entries <switch>`: what a switch holds, read through the
//! running controller and decoded with P4Info names, with its drift from
//! the controller's intended state.

use clap::Args;

use super::admin_client::Admin;
use super::client_tls::ClientTls;
use super::controller::DEFAULT_HTTP;
use crate::daemon::monitoring::api::EntriesView;

#[derive(Args)]
pub struct EntriesCmd {
    /// Switch name (as in the topology).
    switch: String,
    /// Only entries of tables whose name contains this (e.g. `sr.reservation`).
    #[arg(long)]
    table: Option<String>,
    /// The controller's metrics/admin HTTP address.
    #[arg(long, default_value = DEFAULT_HTTP)]
    http: String,
    #[command(flatten)]
    tls: ClientTls,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: EntriesCmd) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let admin = Admin {
        addr: &cmd.http,
        tls: &cmd.tls,
    };
    let body = runtime.block_on(admin.get(&format!("/v1/entries/{}", cmd.switch)))?;
    let mut view: EntriesView = serde_json::from_slice(&body)
        .map_err(|e| anyhow::anyhow!("{} did not answer with Foresight entries ({e}); is --http the controller's admin address?", cmd.http))?;
    if let Some(t) = &cmd.table {
        view.entities.retain(|e| {
            e.entry
                .as_ref()
                .is_some_and(|x| x.table.contains(t.as_str()))
                || e.profile.as_ref().is_some_and(|p| p.contains(t.as_str()))
        });
    }
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(());
    }
    println!(
        "{} ({}): {} entities",
        view.switch,
        view.addr,
        view.entities.len()
    );
    for e in &view.entities {
        println!("  {}", e.line());
    }
    let d = &view.drift;
    if d.missing.is_empty() && d.unexpected.is_empty() && d.different.is_empty() {
        println!("in sync with the controller's intended state");
    } else {
        println!(
            "drift from the intended state: {} missing, {} unexpected, {} different (the controller reconciles them)",
            d.missing.len(),
            d.unexpected.len(),
            d.different.len()
        );
        for (what, list) in [
            ("missing", &d.missing),
            ("unexpected", &d.unexpected),
            ("different", &d.different),
        ] {
            for line in list {
                println!("  {what}: {line}");
            }
        }
    }
    Ok(())
}
