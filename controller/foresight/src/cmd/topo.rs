//! `foresight topo generate|show|validate`: fabric topologies as YAML.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use planner::topology::generate::{self, LeafSpine, MultiPod, Preset, RailOptimized};
use planner::topology::{yaml, Role, Topology, TopologyError, TopologySpec};
use serde::Serialize;

use super::text_table;

#[derive(Args)]
pub struct TopoCmd {
    #[command(subcommand)]
    action: TopoAction,
}

#[derive(Subcommand)]
enum TopoAction {
    /// Generate a fabric and write it as YAML (stdout unless -o).
    Generate {
        #[command(subcommand)]
        shape: Shape,
        /// Write to this file instead of stdout.
        #[arg(short, long, global = true)]
        output: Option<PathBuf>,
    },
    /// Print a fabric: totals, oversubscription, switches, hosts, links.
    Show {
        /// Topology YAML file.
        file: PathBuf,
        /// List every switch, host and link (default: the first 40 of each).
        #[arg(long)]
        all: bool,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a fabric file; lists every problem with the element it is in.
    Validate {
        /// Topology YAML file.
        file: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Preset fabric shapes sized for a GPU count.
#[derive(Clone, Copy, ValueEnum)]
pub enum FabricPreset {
    /// 2-tier leaf-spine, per-GPU 400G NICs, 32 NICs per leaf.
    LeafSpine,
    /// Plain 3-tier Clos (pods + super-spine planes), servers' 8 NICs on one leaf.
    Clos3,
    /// Rail-optimized (8 rails, 32 servers per SU, 16 SUs per pod).
    RailOptimized,
}

impl FabricPreset {
    pub fn preset(self) -> Preset {
        match self {
            FabricPreset::LeafSpine => Preset::LeafSpine,
            FabricPreset::Clos3 => Preset::Clos3,
            FabricPreset::RailOptimized => Preset::RailOptimized,
        }
    }
}

#[derive(Subcommand)]
enum Shape {
    /// 2-tier leaf-spine.
    LeafSpine {
        #[arg(long, default_value = "leaf-spine")]
        name: String,
        #[arg(long, default_value_t = 2)]
        leaves: u32,
        #[arg(long, default_value_t = 2)]
        spines: u32,
        #[arg(long, default_value_t = 2)]
        hosts_per_leaf: u32,
        /// NIC speed, Gbit/s.
        #[arg(long, default_value_t = 100.0)]
        host_gbps: f64,
        /// Leaf-spine link speed, Gbit/s.
        #[arg(long, default_value_t = 100.0)]
        uplink_gbps: f64,
        #[arg(long, default_value_t = 8)]
        gpus_per_host: u32,
        /// Consecutive NICs of a leaf forming one server.
        #[arg(long, default_value_t = 1)]
        nics_per_server: u32,
    },
    /// 3-tier: pods of leaf-spine joined by super-spine planes.
    MultiPod {
        #[arg(long, default_value = "multi-pod")]
        name: String,
        #[arg(long, default_value_t = 2)]
        pods: u32,
        #[arg(long, default_value_t = 2)]
        leaves_per_pod: u32,
        #[arg(long, default_value_t = 2)]
        spines_per_pod: u32,
        #[arg(long, default_value_t = 2)]
        superspines_per_plane: u32,
        #[arg(long, default_value_t = 2)]
        hosts_per_leaf: u32,
        #[arg(long, default_value_t = 100.0)]
        host_gbps: f64,
        #[arg(long, default_value_t = 100.0)]
        leaf_uplink_gbps: f64,
        #[arg(long, default_value_t = 100.0)]
        spine_uplink_gbps: f64,
        #[arg(long, default_value_t = 8)]
        gpus_per_host: u32,
        #[arg(long, default_value_t = 1)]
        nics_per_server: u32,
    },
    /// Rail-optimized: NIC r of every server on the rail-r leaf of its SU.
    RailOptimized {
        #[arg(long, default_value = "rail-optimized")]
        name: String,
        #[arg(long, default_value_t = 8)]
        rails: u32,
        #[arg(long, default_value_t = 8)]
        servers: u32,
        #[arg(long, default_value_t = 4)]
        servers_per_su: u32,
        #[arg(long, default_value_t = 2)]
        sus_per_pod: u32,
        #[arg(long, default_value_t = 4)]
        spines_per_pod: u32,
        #[arg(long, default_value_t = 2)]
        superspines_per_plane: u32,
        #[arg(long, default_value_t = 400.0)]
        nic_gbps: f64,
        #[arg(long, default_value_t = 400.0)]
        leaf_uplink_gbps: f64,
        #[arg(long, default_value_t = 400.0)]
        spine_uplink_gbps: f64,
        #[arg(long, default_value_t = 1)]
        gpus_per_nic: u32,
    },
    /// A non-blocking fabric of a preset shape for N GPUs (8 per server).
    ForGpus {
        #[arg(long, value_enum)]
        fabric: FabricPreset,
        #[arg(long)]
        gpus: u32,
    },
}

fn generate_spec(shape: Shape) -> anyhow::Result<TopologySpec> {
    Ok(match shape {
        Shape::LeafSpine {
            name,
            leaves,
            spines,
            hosts_per_leaf,
            host_gbps,
            uplink_gbps,
            gpus_per_host,
            nics_per_server,
        } => generate::leaf_spine(&LeafSpine {
            name,
            leaves,
            spines,
            hosts_per_leaf,
            host_gbps,
            uplink_gbps,
            gpus_per_host,
            nics_per_server,
        })?,
        Shape::MultiPod {
            name,
            pods,
            leaves_per_pod,
            spines_per_pod,
            superspines_per_plane,
            hosts_per_leaf,
            host_gbps,
            leaf_uplink_gbps,
            spine_uplink_gbps,
            gpus_per_host,
            nics_per_server,
        } => generate::multi_pod(&MultiPod {
            name,
            pods,
            leaves_per_pod,
            spines_per_pod,
            superspines_per_plane,
            hosts_per_leaf,
            host_gbps,
            leaf_uplink_gbps,
            spine_uplink_gbps,
            gpus_per_host,
            nics_per_server,
        })?,
        Shape::RailOptimized {
            name,
            rails,
            servers,
            servers_per_su,
            sus_per_pod,
            spines_per_pod,
            superspines_per_plane,
            nic_gbps,
            leaf_uplink_gbps,
            spine_uplink_gbps,
            gpus_per_nic,
        } => generate::rail_optimized(&RailOptimized {
            name,
            rails,
            servers,
            servers_per_su,
            sus_per_pod,
            spines_per_pod,
            superspines_per_plane,
            nic_gbps,
            leaf_uplink_gbps,
            spine_uplink_gbps,
            gpus_per_nic,
        })?,
        Shape::ForGpus { fabric, gpus } => generate::preset(fabric.preset(), gpus)?,
    })
}

pub fn run(cmd: TopoCmd) -> anyhow::Result<()> {
    match cmd.action {
        TopoAction::Generate { shape, output } => {
            let spec = generate_spec(shape)?;
            // Generated specs are valid by construction; check anyway so a
            // generator bug never writes a bad file.
            let topo = Topology::from_spec(spec).context("generated topology failed validation")?;
            match output {
                Some(path) => {
                    yaml::save_file(topo.spec(), &path)?;
                    eprintln!("wrote {}: {topo}", path.display());
                }
                None => {
                    std::io::stdout().write_all(yaml::to_string(topo.spec()).as_bytes())?;
                }
            }
            Ok(())
        }
        TopoAction::Show { file, all, json } => {
            let topo = yaml::load_file(&file)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&ShowJson::new(&topo))?);
            } else {
                print!("{}", show_text(&topo, if all { usize::MAX } else { 40 }));
            }
            Ok(())
        }
        TopoAction::Validate { file, json } => validate(&file, json),
    }
}

#[derive(Serialize)]
struct ShowJson<'a> {
    summary: String,
    leaves: usize,
    spines: usize,
    superspines: usize,
    hosts: usize,
    servers: usize,
    gpus: u64,
    max_leaf_oversubscription: Option<f64>,
    max_spine_oversubscription: Option<f64>,
    topology: &'a TopologySpec,
}

impl<'a> ShowJson<'a> {
    fn new(t: &'a Topology) -> Self {
        let count = |r: Role| t.switches().iter().filter(|s| s.role == r).count();
        ShowJson {
            summary: t.to_string(),
            leaves: count(Role::Leaf),
            spines: count(Role::Spine),
            superspines: count(Role::Superspine),
            hosts: t.hosts().len(),
            servers: t.servers().len(),
            gpus: t.gpu_count(),
            max_leaf_oversubscription: t
                .leaf_oversubscription()
                .into_iter()
                .filter_map(|x| x.1)
                .reduce(f64::max),
            max_spine_oversubscription: t
                .spine_oversubscription()
                .into_iter()
                .map(|x| x.1)
                .reduce(f64::max),
            topology: t.spec(),
        }
    }
}

fn show_text(t: &Topology, limit: usize) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "{t}");
    let j = ShowJson::new(t);
    let _ = writeln!(
        o,
        "oversubscription: leaves up to {}, spines up to {}",
        j.max_leaf_oversubscription
            .map_or("-".into(), |x| format!("{x:.2}:1")),
        j.max_spine_oversubscription
            .map_or("-".into(), |x| format!("{x:.2}:1"))
    );
    let spec = t.spec();
    let more = |o: &mut String, n: usize| {
        if n > limit {
            let _ = writeln!(o, "  ... {} more (--all to list them)", n - limit);
        }
    };
    let _ = writeln!(o, "\nswitches:");
    let mut switches = text_table::new(&["NAME", "ROLE", "ID", "POD", "PORTS"], &[2, 3, 4]);
    for (i, s) in t.switches().iter().enumerate().take(limit) {
        let ports = t.switch_out_edges(i as u32).len()
            + t.hosts().iter().filter(|h| h.leaf == i as u32).count();
        switches.add_row(vec![
            s.name.clone(),
            s.role.to_string(),
            s.id.to_string(),
            s.pod.to_string(),
            ports.to_string(),
        ]);
    }
    o.push_str(&text_table::indented(&switches));
    more(&mut o, t.switches().len());
    let _ = writeln!(o, "\nhosts:");
    let mut hosts = text_table::new(
        &[
            "NAME",
            "IP",
            "MAC",
            "LEAF:PORT",
            "GBPS",
            "GPUS",
            "RAIL",
            "SERVER",
        ],
        &[4, 5, 6],
    );
    for h in spec.hosts.iter().take(limit) {
        hosts.add_row(vec![
            h.name.clone(),
            h.ip.to_string(),
            h.mac.to_string(),
            format!("{}:{}", h.leaf, h.port),
            h.gbps.to_string(),
            h.gpus.to_string(),
            h.rail.map_or("-".into(), |r| r.to_string()),
            h.server.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    o.push_str(&text_table::indented(&hosts));
    more(&mut o, spec.hosts.len());
    let _ = writeln!(o, "\nlinks:");
    let mut links = text_table::new(&["NODE1:PORT", "NODE2:PORT", "GBPS"], &[2]);
    for l in spec.links.iter().take(limit) {
        links.add_row(vec![
            format!("{}:{}", l.node1, l.port1),
            format!("{}:{}", l.node2, l.port2),
            l.gbps.to_string(),
        ]);
    }
    o.push_str(&text_table::indented(&links));
    more(&mut o, spec.links.len());
    o
}

#[derive(Serialize)]
struct IssueJson {
    location: String,
    message: String,
}

fn validate(file: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let result = yaml::load_file(file);
    let (summary, issues): (Option<String>, Vec<IssueJson>) = match result {
        Ok(t) => (Some(t.to_string()), Vec::new()),
        Err(TopologyError::Invalid { issues, .. }) => (
            None,
            issues
                .into_iter()
                .map(|i| IssueJson {
                    location: i.location,
                    message: i.message,
                })
                .collect(),
        ),
        Err(TopologyError::Parse(m)) => (
            None,
            vec![IssueJson {
                location: file.display().to_string(),
                message: m,
            }],
        ),
        Err(e) => return Err(e.into()),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({ "file": file.display().to_string(), "valid": issues.is_empty(), "summary": summary, "issues": issues })
        );
    } else if let Some(s) = &summary {
        println!("{}: valid: {s}", file.display());
    } else {
        println!("{}: {} problem(s):", file.display(), issues.len());
        for i in &issues {
            println!("  {}: {}", i.location, i.message);
        }
    }
    if !issues.is_empty() {
        bail!("{} is not a valid topology", file.display());
    }
    Ok(())
}
