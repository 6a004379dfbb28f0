//! The file form of a fabric: what `foresight topo generate` writes and
//! `foresight topo validate` checks. Names, not indices, so a person can
//! edit it; [`crate::Topology::from_spec`] validates it and builds the graph.
//!
//! Field names follow Mininet's `addHost(ip=, mac=)` and
//! `addLink(node1, node2, port1=, port2=)` so a p4-utils / Mininet user can
//! read the file and build the same network. The schema is documented in
//! `controller/planner/README.md`.

use serde::{Deserialize, Serialize};

use crate::conventions::DEFAULT_GPUS_PER_HOST;

/// Schema version written by this crate.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole fabric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Schema version; 1.
    #[serde(default = "schema_version")]
    pub version: u32,
    /// Fabric name (free text, used in reports).
    pub name: String,
    /// What generated it; informational, the planner works on any valid fabric.
    #[serde(default)]
    pub kind: FabricKind,
    /// Switches, in any order.
    pub switches: Vec<SwitchSpec>,
    /// Hosts (NICs). Each attaches to one leaf port.
    #[serde(default)]
    pub hosts: Vec<HostSpec>,
    /// Switch-to-switch links (host links are given by the host entries).
    #[serde(default)]
    pub links: Vec<LinkSpec>,
}

fn schema_version() -> u32 {
    SCHEMA_VERSION
}

/// Which generator shape a fabric has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FabricKind {
    /// 2-tier leaf-spine (one pod).
    LeafSpine,
    /// 3-tier: pods of leaf-spine, spines connected to super-spine planes.
    MultiPod,
    /// Rail-optimized: each server's NIC *r* goes to the rail-*r* leaf of its
    /// scalable unit; 2-tier or 3-tier above the rail leaves.
    RailOptimized,
    /// Anything else (hand-written).
    #[default]
    Custom,
}

impl std::fmt::Display for FabricKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FabricKind::LeafSpine => "leaf-spine",
            FabricKind::MultiPod => "multi-pod",
            FabricKind::RailOptimized => "rail-optimized",
            FabricKind::Custom => "custom",
        })
    }
}

/// Tier of a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Top-of-rack / rail switch: hosts attach here.
    Leaf,
    /// Second tier.
    Spine,
    /// Third tier (multi-pod fabrics).
    Superspine,
}

impl Role {
    /// 1 for leaves, 2 for spines, 3 for super-spines.
    pub fn tier(self) -> u8 {
        match self {
            Role::Leaf => 1,
            Role::Spine => 2,
            Role::Superspine => 3,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::Superspine => "superspine",
        })
    }
}

/// One switch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Unique name (also the Mininet node name).
    pub name: String,
    /// Tier.
    pub role: Role,
    /// Numeric id: the P4Runtime device id and the INT switch id. Unique.
    pub id: u32,
    /// Pod of a leaf or spine (3-tier fabrics); absent means pod 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<u32>,
}

/// One host NIC attached to a leaf port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Unique name (also the Mininet node name).
    pub name: String,
    /// IPv4 address with the leaf subnet's prefix length, e.g. `10.0.1.1/24`.
    pub ip: String,
    /// MAC address, `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// The leaf this NIC plugs into.
    pub leaf: String,
    /// The leaf port (from 1).
    pub port: u16,
    /// Link speed of the NIC, Gbit/s.
    pub gbps: f64,
    /// GPUs that send through this NIC (8 for a shared NIC, 1 for a per-GPU NIC).
    #[serde(default = "default_gpus")]
    pub gpus: u32,
    /// Rail index (rail-optimized fabrics): NIC *r* of every server is on rail *r*.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<u32>,
    /// Physical server this NIC belongs to; NICs of one server share NVLink,
    /// so traffic between them never enters the fabric. Absent: the host is
    /// its own server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

fn default_gpus() -> u32 {
    DEFAULT_GPUS_PER_HOST
}

/// One full-duplex switch-to-switch link; each direction has `gbps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// One end (switch name).
    pub node1: String,
    /// Its port.
    pub port1: u16,
    /// Other end (switch name).
    pub node2: String,
    /// Its port.
    pub port2: u16,
    /// Capacity per direction, Gbit/s.
    pub gbps: f64,
}
