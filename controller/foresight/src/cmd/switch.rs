//! `foresight switch push|write|read`: talk to one P4Runtime switch directly.
//!
//! For bring-up and debugging: push a compiled pipeline, write entries from
//! a YAML file (all validated before anything is sent; an insert batch that
//! fails is rolled back), read entries back decoded with P4Info names.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use installer::device::Artifacts;
use p4rt::proto::p4::v1 as p4;
use p4rt::{EntrySpec, P4Info, Switch, SwitchOptions};

use super::target_args::TargetArgs;

#[derive(Args)]
pub struct SwitchCmd {
    #[command(subcommand)]
    action: SwitchAction,
}

/// How to reach the switch.
#[derive(Args, Clone)]
struct Conn {
    /// P4Runtime server, host:port.
    #[arg(long, default_value = "127.0.0.1:9559")]
    addr: String,
    /// P4Runtime device id (simple_switch_grpc's default is 0).
    #[arg(long, default_value_t = 0)]
    device_id: u64,
    /// Election id; the highest connected client is primary.
    #[arg(long, default_value_t = 1)]
    election_id: u128,
    /// P4Info of the pipeline (binary .binpb or text .txtpb).
    #[arg(long)]
    p4info: PathBuf,
    /// Seconds to keep retrying the connection (switch still starting).
    #[arg(long, default_value_t = 10)]
    connect_timeout: u64,
}

#[derive(Subcommand)]
enum SwitchAction {
    /// Push a pipeline (SetForwardingPipelineConfig, VERIFY_AND_COMMIT: the
    /// switch starts from empty tables).
    Push {
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        target: TargetArgs,
        /// BMv2: the device config, the BMv2 JSON from p4c.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Put back what the switch held (table and default entries, ECMP
        /// members and groups, clone sessions), read before the push;
        /// counters and registers start from zero.
        #[arg(long)]
        keep_entries: bool,
    },
    /// Write table entries from a YAML list of {table, match, action, params, priority}.
    Write {
        #[command(flatten)]
        conn: Conn,
        /// YAML file with a list of entries.
        #[arg(long)]
        entries: PathBuf,
        /// What to do with them.
        #[arg(long, value_enum, default_value = "insert")]
        op: WriteOp,
        /// Updates per Write RPC.
        #[arg(long, default_value_t = 500)]
        batch_size: usize,
    },
    /// Read table entries (one table, or all) and print them by name.
    Read {
        #[command(flatten)]
        conn: Conn,
        /// Only this table.
        #[arg(long)]
        table: Option<String>,
        /// JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::ValueEnum, Clone, Copy)]
enum WriteOp {
    Insert,
    Modify,
    Delete,
    /// Insert, or modify what already exists.
    Upsert,
}

pub fn run(cmd: SwitchCmd) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        match cmd.action {
            SwitchAction::Push {
                conn,
                target,
                config,
                keep_entries,
            } => push(conn, artifacts(&target, config)?, keep_entries).await,
            SwitchAction::Write {
                conn,
                entries,
                op,
                batch_size,
            } => write(conn, entries, op, batch_size).await,
            SwitchAction::Read { conn, table, json } => read(conn, table, json).await,
        }
    })
}

async fn connect(conn: &Conn) -> anyhow::Result<(Switch, P4Info)> {
    let info = P4Info::load(&conn.p4info)?;
    let options = SwitchOptions::new(&conn.addr, conn.device_id).election_id(conn.election_id);
    let switch =
        Switch::connect_with_retry(options, Duration::from_secs(conn.connect_timeout)).await?;
    Ok((switch, info))
}

async fn connect_primary(conn: &Conn) -> anyhow::Result<(Switch, P4Info)> {
    let (switch, info) = connect(conn).await?;
    switch.wait_primary(Duration::from_secs(2)).await.context(
        "another client with a higher election id is primary; pass a higher --election-id",
    )?;
    Ok((switch, info))
}

/// Where the pipeline to push is: `--config` for BMv2, the Tofino flags
/// for Tofino.
fn artifacts(target: &TargetArgs, config: Option<PathBuf>) -> anyhow::Result<Artifacts> {
    match (target.tofino()?, config) {
        (None, Some(json)) => Ok(Artifacts::Bmv2 { json }),
        (None, None) => bail!("--target bmv2 needs --config FILE, the BMv2 JSON from p4c"),
        (Some(out), None) => Ok(Artifacts::Tofino(out)),
        (Some(_), Some(_)) => bail!(
            "--config is the BMv2 JSON; with --target tofino the pipeline comes from --tofino-out"
        ),
    }
}

async fn push(conn: Conn, artifacts: Artifacts, keep_entries: bool) -> anyhow::Result<()> {
    // Built before connecting: a missing file fails at once.
    let device_config = artifacts.device_config()?;
    let device_config_len = device_config.len();
    let (switch, info) = connect_primary(&conn).await?;
    let what = match &artifacts {
        Artifacts::Bmv2 { json } => json.display().to_string(),
        Artifacts::Tofino(out) => format!("Tofino pipeline of {}", out.dir.display()),
    };
    let how = if keep_entries {
        let k = installer::pipeline::push_keeping_entries(&switch, &info, device_config).await?;
        format!(
            "; put back {} table entries, {} default entries, {} ECMP members, {} groups, \
             {} clone sessions (counters and registers start from zero)",
            k.table_entries, k.default_entries, k.members, k.groups, k.clone_sessions
        )
    } else {
        match installer::pipeline::push(&switch, &info, device_config).await? {
            0 => String::new(),
            n => format!(", {n} clone session(s) deleted first"),
        }
    };
    println!(
        "pushed {what} ({device_config_len} bytes) to {} (device {}){how}",
        conn.addr, conn.device_id
    );
    switch.shutdown().await;
    Ok(())
}

async fn write(conn: Conn, path: PathBuf, op: WriteOp, batch_size: usize) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let specs: Vec<EntrySpec> = serde_yaml::from_str(&text)
        .with_context(|| format!("{}: not a YAML list of entries", path.display()))?;
    let (switch, info) = connect_primary(&conn).await?;
    // Build everything first: a bad entry stops the command before any write.
    let entities = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            spec.to_entry(&info).map(p4::Entity::from).with_context(|| {
                format!(
                    "{}: entry #{} (table {})",
                    path.display(),
                    i + 1,
                    spec.table
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let count = entities.len();
    use p4::update::Type;
    let result = match op {
        WriteOp::Insert => insert_all_or_nothing(&switch, entities, batch_size).await,
        WriteOp::Modify => switch
            .apply(Type::Modify, entities, batch_size)
            .await
            .map_err(Into::into),
        WriteOp::Delete => switch
            .apply(Type::Delete, entities, batch_size)
            .await
            .map_err(Into::into),
        WriteOp::Upsert => switch
            .insert_or_modify(entities, batch_size)
            .await
            .map_err(Into::into),
    };
    switch.shutdown().await;
    result?;
    println!("wrote {count} entries to {}", conn.addr);
    Ok(())
}

/// Insert; if any insert fails, delete the ones that went in, so the switch
/// ends as it was.
async fn insert_all_or_nothing(
    switch: &Switch,
    entities: Vec<p4::Entity>,
    batch_size: usize,
) -> anyhow::Result<()> {
    let Err(err) = switch
        .apply(p4::update::Type::Insert, entities.clone(), batch_size)
        .await
    else {
        return Ok(());
    };
    let sent = entities.len() - err.not_sent;
    let applied: Vec<p4::Entity> = entities
        .into_iter()
        .enumerate()
        .take(sent)
        .filter(|(i, _)| err.status.is_none() && !err.failures.iter().any(|f| f.index == *i))
        .map(|(_, e)| e)
        .collect();
    let rolled_back = applied.len();
    if let Err(rollback) = switch
        .apply(p4::update::Type::Delete, applied, batch_size)
        .await
    {
        bail!("{err}; rolling back {rolled_back} inserted entries also failed: {rollback}");
    }
    bail!("{err}; rolled back the {rolled_back} entries that were inserted")
}

async fn read(conn: Conn, table: Option<String>, json: bool) -> anyhow::Result<()> {
    let (switch, info) = connect(&conn).await?;
    let tables: Vec<String> = match table {
        Some(t) => vec![t],
        None => info.table_names().to_vec(),
    };
    let mut wanted = Vec::new();
    for t in &tables {
        wanted.push(p4rt::entity::all_table_entries(&info, t)?);
    }
    let entities = switch.read(wanted).await?;
    switch.shutdown().await;
    let specs = entities
        .iter()
        .filter_map(|e| match &e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => Some(EntrySpec::from_entry(&info, t)),
            _ => None,
        })
        .collect::<Result<Vec<_>, _>>()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&specs)?);
    } else if specs.is_empty() {
        println!("# no entries");
    } else {
        print!("{}", serde_yaml::to_string(&specs)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        action: SwitchAction,
    }

    fn push_artifacts(args: &[&str]) -> anyhow::Result<Artifacts> {
        let base = ["t", "push", "--p4info", "x.binpb"];
        match Cli::try_parse_from(base.iter().chain(args))?.action {
            SwitchAction::Push { target, config, .. } => artifacts(&target, config),
            _ => unreachable!("parsed a push"),
        }
    }

    #[test]
    fn push_takes_the_bmv2_json_or_the_tofino_output() {
        assert_eq!(
            push_artifacts(&["--config", "f.json"]).unwrap(),
            Artifacts::Bmv2 {
                json: "f.json".into()
            }
        );
        let e = push_artifacts(&[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "--target bmv2 needs --config FILE, the BMv2 JSON from p4c"
        );
        let Artifacts::Tofino(out) =
            push_artifacts(&["--target", "tofino", "--tofino-out", "/out"]).unwrap()
        else {
            panic!("not Tofino");
        };
        assert_eq!(out.dir, PathBuf::from("/out"));
        let e = push_artifacts(&["--target", "tofino", "--tofino-out", "/o", "--config", "f"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--config is the BMv2 JSON"), "{e}");
        let e = push_artifacts(&["--target", "tofino", "--config", "f"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs --tofino-out DIR"), "{e}");
    }
}
