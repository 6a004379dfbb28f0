//! Fabric generators: 2-tier leaf-spine, 3-tier multi-pod with super-spine
//! planes, and rail-optimized fabrics (2- or 3-tier above the rail leaves).
//!
//! Numbering is deterministic so a lab can rebuild the same network from
//! the YAML:
//! * switch ids: leaves from 1, then spines, then super-spines;
//! * leaf ports: hosts `1..=H` in host order, then one uplink per pod spine
//!   in spine order;
//! * spine ports: one downlink per pod leaf `1..=L` in leaf order, then one
//!   uplink per super-spine of its plane;
//! * super-spine ports: one per pod, in pod order;
//! * host `n` (from 1) of leaf `l` (from 1 within its pod) of pod `p` has IPv4
//!   `10.p.l.n/24` and MAC `02:00:0a:p:l:n`.
//!
//! 3-tier fabrics are built in *planes*: spine `j` of every pod connects to
//! the super-spines of plane `j` (the usual 5-stage fat tree), so an
//! inter-pod path is fixed by (plane, super-spine).

use super::spec::{FabricKind, HostSpec, LinkSpec, Role, SwitchSpec, TopologySpec, SCHEMA_VERSION};

/// Why a generator refused its parameters.
#[derive(Debug, thiserror::Error)]
#[error("cannot generate {fabric}: {message}")]
pub struct GenerateError {
    /// Which generator.
    pub fabric: &'static str,
    /// What is wrong with the parameters.
    pub message: String,
}

/// Parameters of a 2-tier leaf-spine fabric.
#[derive(Clone, Debug)]
pub struct LeafSpine {
    /// Fabric name.
    pub name: String,
    /// Leaves.
    pub leaves: u32,
    /// Spines (every leaf has one link to every spine).
    pub spines: u32,
    /// Host NICs per leaf.
    pub hosts_per_leaf: u32,
    /// NIC speed, Gbit/s.
    pub host_gbps: f64,
    /// Leaf-spine link speed, Gbit/s.
    pub uplink_gbps: f64,
    /// GPUs behind each NIC (8 = one shared NIC per server).
    pub gpus_per_host: u32,
    /// Consecutive NICs of a leaf that form one server (1 = every NIC is a server).
    pub nics_per_server: u32,
}

impl Default for LeafSpine {
    fn default() -> Self {
        LeafSpine {
            name: "leaf-spine".into(),
            leaves: 2,
            spines: 2,
            hosts_per_leaf: 2,
            host_gbps: 100.0,
            uplink_gbps: 100.0,
            gpus_per_host: crate::conventions::DEFAULT_GPUS_PER_HOST,
            nics_per_server: 1,
        }
    }
}

/// Parameters of a 3-tier multi-pod fabric.
#[derive(Clone, Debug)]
pub struct MultiPod {
    /// Fabric name.
    pub name: String,
    /// Pods.
    pub pods: u32,
    /// Leaves per pod.
    pub leaves_per_pod: u32,
    /// Spines per pod (= number of planes).
    pub spines_per_pod: u32,
    /// Super-spines in each plane.
    pub superspines_per_plane: u32,
    /// Host NICs per leaf.
    pub hosts_per_leaf: u32,
    /// NIC speed, Gbit/s.
    pub host_gbps: f64,
    /// Leaf-spine link speed, Gbit/s.
    pub leaf_uplink_gbps: f64,
    /// Spine-superspine link speed, Gbit/s.
    pub spine_uplink_gbps: f64,
    /// GPUs behind each NIC.
    pub gpus_per_host: u32,
    /// Consecutive NICs of a leaf that form one server.
    pub nics_per_server: u32,
}

impl Default for MultiPod {
    fn default() -> Self {
        MultiPod {
            name: "multi-pod".into(),
            pods: 2,
            leaves_per_pod: 2,
            spines_per_pod: 2,
            superspines_per_plane: 2,
            hosts_per_leaf: 2,
            host_gbps: 100.0,
            leaf_uplink_gbps: 100.0,
            spine_uplink_gbps: 100.0,
            gpus_per_host: crate::conventions::DEFAULT_GPUS_PER_HOST,
            nics_per_server: 1,
        }
    }
}

/// Parameters of a rail-optimized fabric: servers with one NIC per rail;
/// a scalable unit (SU) has one leaf per rail, and NIC *r* of each of the
/// SU's servers plugs into the SU's rail-*r* leaf.
#[derive(Clone, Debug)]
pub struct RailOptimized {
    /// Fabric name.
    pub name: String,
    /// Rails = NICs per server.
    pub rails: u32,
    /// Servers.
    pub servers: u32,
    /// Servers per scalable unit (= hosts per rail leaf).
    pub servers_per_su: u32,
    /// Scalable units per pod; more SUs than this add pods and super-spines.
    pub sus_per_pod: u32,
    /// Spines per pod.
    pub spines_per_pod: u32,
    /// Super-spines per plane (3-tier only).
    pub superspines_per_plane: u32,
    /// NIC speed, Gbit/s.
    pub nic_gbps: f64,
    /// Leaf-spine link speed, Gbit/s.
    pub leaf_uplink_gbps: f64,
    /// Spine-superspine link speed, Gbit/s.
    pub spine_uplink_gbps: f64,
    /// GPUs behind each NIC (1 for per-GPU NICs).
    pub gpus_per_nic: u32,
}

impl Default for RailOptimized {
    fn default() -> Self {
        RailOptimized {
            name: "rail-optimized".into(),
            rails: 8,
            servers: 8,
            servers_per_su: 4,
            sus_per_pod: 2,
            spines_per_pod: 4,
            superspines_per_plane: 2,
            nic_gbps: 400.0,
            leaf_uplink_gbps: 400.0,
            spine_uplink_gbps: 400.0,
            gpus_per_nic: 1,
        }
    }
}

struct HostPlan {
    name: String,
    server: Option<String>,
    rail: Option<u32>,
    gbps: f64,
    gpus: u32,
}

struct Layout {
    name: String,
    kind: FabricKind,
    pods: u32,
    leaves_per_pod: u32,
    spines_per_pod: u32,
    /// 0 = 2-tier.
    superspines_per_plane: u32,
    leaf_uplink_gbps: f64,
    spine_uplink_gbps: f64,
    /// Leaf names and host plans per (pod, leaf in pod).
    leaves: Vec<Vec<(String, Vec<HostPlan>)>>,
}

fn err(fabric: &'static str, message: impl Into<String>) -> GenerateError {
    GenerateError {
        fabric,
        message: message.into(),
    }
}

fn check_count(fabric: &'static str, what: &str, v: u32, max: u32) -> Result<(), GenerateError> {
    if v == 0 || v > max {
        return Err(err(fabric, format!("{what} = {v}: must be 1..={max}")));
    }
    Ok(())
}

fn check_speed(fabric: &'static str, what: &str, v: f64) -> Result<(), GenerateError> {
    if !v.is_finite() || v <= 0.0 {
        return Err(err(
            fabric,
            format!("{what} = {v} Gbit/s: must be positive"),
        ));
    }
    Ok(())
}

fn build(l: Layout) -> TopologySpec {
    let three_tier = l.superspines_per_plane > 0;
    let mut switches = Vec::new();
    let mut hosts = Vec::new();
    let mut links = Vec::new();
    let mut next_id = 1u32;
    let mut leaf_names = Vec::new();
    for (p, pod) in l.leaves.iter().enumerate() {
        for (name, _) in pod {
            switches.push(SwitchSpec {
                name: name.clone(),
                role: Role::Leaf,
                id: next_id,
                pod: three_tier.then_some(p as u32),
            });
            next_id += 1;
            leaf_names.push(name.clone());
        }
    }
    let spine_name = |p: u32, j: u32| {
        if three_tier {
            format!("p{}-spine{}", p + 1, j + 1)
        } else {
            format!("spine{}", j + 1)
        }
    };
    for p in 0..l.pods {
        for j in 0..l.spines_per_pod {
            switches.push(SwitchSpec {
                name: spine_name(p, j),
                role: Role::Spine,
                id: next_id,
                pod: three_tier.then_some(p),
            });
            next_id += 1;
        }
    }
    let ss_name = |j: u32, x: u32| format!("ss{}-{}", j + 1, x + 1);
    if three_tier {
        for j in 0..l.spines_per_pod {
            for x in 0..l.superspines_per_plane {
                switches.push(SwitchSpec {
                    name: ss_name(j, x),
                    role: Role::Superspine,
                    id: next_id,
                    pod: None,
                });
                next_id += 1;
            }
        }
    }
    for (p, pod) in l.leaves.iter().enumerate() {
        for (li, (leaf, plans)) in pod.iter().enumerate() {
            for (n, h) in plans.iter().enumerate() {
                let (a, b, c) = (p as u32, li as u32 + 1, n as u32 + 1);
                hosts.push(HostSpec {
                    name: h.name.clone(),
                    ip: format!("10.{a}.{b}.{c}/24"),
                    mac: format!("02:00:0a:{a:02x}:{b:02x}:{c:02x}"),
                    leaf: leaf.clone(),
                    port: n as u16 + 1,
                    gbps: h.gbps,
                    gpus: h.gpus,
                    rail: h.rail,
                    server: h.server.clone(),
                });
            }
            let h = plans.len() as u16;
            for j in 0..l.spines_per_pod {
                links.push(LinkSpec {
                    node1: leaf.clone(),
                    port1: h + 1 + j as u16,
                    node2: spine_name(p as u32, j),
                    port2: li as u16 + 1,
                    gbps: l.leaf_uplink_gbps,
                });
            }
        }
    }
    if three_tier {
        for p in 0..l.pods {
            for j in 0..l.spines_per_pod {
                for x in 0..l.superspines_per_plane {
                    links.push(LinkSpec {
                        node1: spine_name(p, j),
                        port1: (l.leaves_per_pod + 1 + x) as u16,
                        node2: ss_name(j, x),
                        port2: p as u16 + 1,
                        gbps: l.spine_uplink_gbps,
                    });
                }
            }
        }
    }
    TopologySpec {
        version: SCHEMA_VERSION,
        name: l.name,
        kind: l.kind,
        switches,
        hosts,
        links,
    }
}

fn plain_hosts(
    count: u32,
    nics_per_server: u32,
    gbps: f64,
    gpus: u32,
    global_first: u32,
) -> Vec<HostPlan> {
    (0..count)
        .map(|n| {
            let g = global_first + n;
            if nics_per_server > 1 {
                let server = g / nics_per_server + 1;
                let nic = g % nics_per_server;
                HostPlan {
                    name: format!("srv{server}-nic{nic}"),
                    server: Some(format!("srv{server}")),
                    rail: None,
                    gbps,
                    gpus,
                }
            } else {
                HostPlan {
                    name: format!("h{}", g + 1),
                    server: None,
                    rail: None,
                    gbps,
                    gpus,
                }
            }
        })
        .collect()
}

/// A 2-tier leaf-spine fabric.
pub fn leaf_spine(p: &LeafSpine) -> Result<TopologySpec, GenerateError> {
    const F: &str = "leaf-spine";
    check_count(F, "leaves", p.leaves, 254)?;
    check_count(F, "spines", p.spines, 4096)?;
    check_count(F, "hosts_per_leaf", p.hosts_per_leaf, 254)?;
    check_count(F, "gpus_per_host", p.gpus_per_host, 1024)?;
    check_count(F, "nics_per_server", p.nics_per_server, 64)?;
    check_speed(F, "host_gbps", p.host_gbps)?;
    check_speed(F, "uplink_gbps", p.uplink_gbps)?;
    if p.hosts_per_leaf % p.nics_per_server != 0 {
        return Err(err(
            F,
            "hosts_per_leaf must be a multiple of nics_per_server (a server's NICs share a leaf)",
        ));
    }
    if p.hosts_per_leaf as u64 + p.spines as u64 > u16::MAX as u64 {
        return Err(err(F, "too many ports on a leaf"));
    }
    let leaves = (0..p.leaves)
        .map(|l| {
            (
                format!("leaf{}", l + 1),
                plain_hosts(
                    p.hosts_per_leaf,
                    p.nics_per_server,
                    p.host_gbps,
                    p.gpus_per_host,
                    l * p.hosts_per_leaf,
                ),
            )
        })
        .collect();
    Ok(build(Layout {
        name: p.name.clone(),
        kind: FabricKind::LeafSpine,
        pods: 1,
        leaves_per_pod: p.leaves,
        spines_per_pod: p.spines,
        superspines_per_plane: 0,
        leaf_uplink_gbps: p.uplink_gbps,
        spine_uplink_gbps: p.uplink_gbps,
        leaves: vec![leaves],
    }))
}

/// A 3-tier multi-pod fabric with super-spine planes.
pub fn multi_pod(p: &MultiPod) -> Result<TopologySpec, GenerateError> {
    const F: &str = "multi-pod";
    check_count(F, "pods", p.pods, 256)?;
    check_count(F, "leaves_per_pod", p.leaves_per_pod, 254)?;
    check_count(F, "spines_per_pod", p.spines_per_pod, 1024)?;
    check_count(F, "superspines_per_plane", p.superspines_per_plane, 1024)?;
    check_count(F, "hosts_per_leaf", p.hosts_per_leaf, 254)?;
    check_count(F, "gpus_per_host", p.gpus_per_host, 1024)?;
    check_count(F, "nics_per_server", p.nics_per_server, 64)?;
    check_speed(F, "host_gbps", p.host_gbps)?;
    check_speed(F, "leaf_uplink_gbps", p.leaf_uplink_gbps)?;
    check_speed(F, "spine_uplink_gbps", p.spine_uplink_gbps)?;
    if p.hosts_per_leaf % p.nics_per_server != 0 {
        return Err(err(
            F,
            "hosts_per_leaf must be a multiple of nics_per_server (a server's NICs share a leaf)",
        ));
    }
    let mut pods = Vec::new();
    for pod in 0..p.pods {
        let mut leaves = Vec::new();
        for l in 0..p.leaves_per_pod {
            let global_leaf = pod * p.leaves_per_pod + l;
            leaves.push((
                format!("p{}-leaf{}", pod + 1, l + 1),
                plain_hosts(
                    p.hosts_per_leaf,
                    p.nics_per_server,
                    p.host_gbps,
                    p.gpus_per_host,
                    global_leaf * p.hosts_per_leaf,
                ),
            ));
        }
        pods.push(leaves);
    }
    Ok(build(Layout {
        name: p.name.clone(),
        kind: FabricKind::MultiPod,
        pods: p.pods,
        leaves_per_pod: p.leaves_per_pod,
        spines_per_pod: p.spines_per_pod,
        superspines_per_plane: p.superspines_per_plane,
        leaf_uplink_gbps: p.leaf_uplink_gbps,
        spine_uplink_gbps: p.spine_uplink_gbps,
        leaves: pods,
    }))
}

/// A rail-optimized fabric. One pod (2-tier) when all SUs fit in a pod,
/// otherwise pods joined by super-spine planes.
pub fn rail_optimized(p: &RailOptimized) -> Result<TopologySpec, GenerateError> {
    const F: &str = "rail-optimized";
    check_count(F, "rails", p.rails, 64)?;
    check_count(F, "servers", p.servers, 1 << 20)?;
    check_count(F, "servers_per_su", p.servers_per_su, 254)?;
    check_count(F, "sus_per_pod", p.sus_per_pod, 1024)?;
    check_count(F, "spines_per_pod", p.spines_per_pod, 1024)?;
    check_count(F, "gpus_per_nic", p.gpus_per_nic, 64)?;
    check_speed(F, "nic_gbps", p.nic_gbps)?;
    check_speed(F, "leaf_uplink_gbps", p.leaf_uplink_gbps)?;
    let sus = p.servers.div_ceil(p.servers_per_su);
    let pods = sus.div_ceil(p.sus_per_pod);
    let three_tier = pods > 1;
    if three_tier {
        check_count(F, "superspines_per_plane", p.superspines_per_plane, 1024)?;
        check_speed(F, "spine_uplink_gbps", p.spine_uplink_gbps)?;
    }
    let sus_in_pod0 = sus.min(p.sus_per_pod);
    if sus_in_pod0 * p.rails > 254 {
        return Err(err(
            F,
            format!(
                "{} rail leaves in a pod: at most 254 (the third IPv4 octet)",
                sus_in_pod0 * p.rails
            ),
        ));
    }
    if pods > 256 {
        return Err(err(
            F,
            format!("{pods} pods: at most 256 (the second IPv4 octet)"),
        ));
    }
    let mut all = Vec::new();
    for pod in 0..pods {
        let mut leaves = Vec::new();
        let first_su = pod * p.sus_per_pod;
        let last_su = (first_su + p.sus_per_pod).min(sus);
        for su in first_su..last_su {
            let first_server = su * p.servers_per_su;
            let last_server = (first_server + p.servers_per_su).min(p.servers);
            for r in 0..p.rails {
                let name = if three_tier {
                    format!("p{}-su{}-rail{}", pod + 1, su + 1, r)
                } else {
                    format!("su{}-rail{}", su + 1, r)
                };
                let plans = (first_server..last_server)
                    .map(|s| HostPlan {
                        name: format!("srv{}-nic{r}", s + 1),
                        server: Some(format!("srv{}", s + 1)),
                        rail: Some(r),
                        gbps: p.nic_gbps,
                        gpus: p.gpus_per_nic,
                    })
                    .collect();
                leaves.push((name, plans));
            }
        }
        all.push(leaves);
    }
    // Pods must have the same leaf count for the plane wiring; a short last
    // pod simply has fewer leaves (spine ports stay numbered by leaf order).
    Ok(build(Layout {
        name: p.name.clone(),
        kind: FabricKind::RailOptimized,
        pods,
        leaves_per_pod: sus_in_pod0 * p.rails,
        spines_per_pod: p.spines_per_pod,
        superspines_per_plane: if three_tier {
            p.superspines_per_plane
        } else {
            0
        },
        leaf_uplink_gbps: p.leaf_uplink_gbps,
        spine_uplink_gbps: p.spine_uplink_gbps,
        leaves: all,
    }))
}

/// Fabric shapes the presets size for a GPU count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// 2-tier leaf-spine, 8 per-GPU 400G NICs per server, 32 NICs per leaf.
    LeafSpine,
    /// Plain 3-tier Clos: servers with 8 per-GPU 400G NICs all on one leaf
    /// (4 servers per leaf), 16 leaves per pod, non-blocking.
    Clos3,
    /// Rail-optimized: 8 rails, 32 servers per SU, 16 SUs per pod, 400G,
    /// non-blocking; 3-tier when it takes more than one pod.
    RailOptimized,
}

/// A non-blocking fabric of the given shape for `gpus` GPUs (8 per server).
pub fn preset(kind: Preset, gpus: u32) -> Result<TopologySpec, GenerateError> {
    const GPUS_PER_SERVER: u32 = 8;
    const NIC: f64 = 400.0;
    if gpus == 0 || gpus % GPUS_PER_SERVER != 0 {
        return Err(err(
            "preset",
            format!(
                "--gpus {gpus}: must be a positive multiple of {GPUS_PER_SERVER} (GPUs per server)"
            ),
        ));
    }
    let servers = gpus / GPUS_PER_SERVER;
    match kind {
        Preset::LeafSpine => {
            let hosts_per_leaf = (servers * 8).min(32);
            let leaves = (servers * 8).div_ceil(hosts_per_leaf);
            if (servers * 8) % hosts_per_leaf != 0 {
                return Err(err(
                    "preset",
                    format!("--gpus {gpus}: leaf-spine needs a multiple of 32 GPUs above 32"),
                ));
            }
            leaf_spine(&LeafSpine {
                name: format!("leaf-spine-{gpus}gpu"),
                leaves,
                spines: hosts_per_leaf,
                hosts_per_leaf,
                host_gbps: NIC,
                uplink_gbps: NIC,
                gpus_per_host: 1,
                nics_per_server: 8,
            })
        }
        Preset::Clos3 => {
            let nics = servers * 8;
            let hosts_per_leaf = nics.min(32);
            if nics % hosts_per_leaf != 0 {
                return Err(err(
                    "preset",
                    format!("--gpus {gpus}: clos3 needs a multiple of 32 GPUs above 32"),
                ));
            }
            let leaves = nics / hosts_per_leaf;
            let leaves_per_pod = if leaves >= 32 {
                16
            } else {
                leaves.div_ceil(2).max(1)
            };
            if leaves % leaves_per_pod != 0 {
                return Err(err(
                    "preset",
                    format!("--gpus {gpus}: clos3 needs whole pods of {leaves_per_pod} leaves"),
                ));
            }
            multi_pod(&MultiPod {
                name: format!("clos3-{gpus}gpu"),
                pods: leaves / leaves_per_pod,
                leaves_per_pod,
                spines_per_pod: hosts_per_leaf,
                superspines_per_plane: leaves_per_pod,
                hosts_per_leaf,
                host_gbps: NIC,
                leaf_uplink_gbps: NIC,
                spine_uplink_gbps: NIC,
                gpus_per_host: 1,
                nics_per_server: 8,
            })
        }
        Preset::RailOptimized => {
            let servers_per_su = servers.min(32);
            let sus_per_pod = 16;
            let leaves_per_pod = sus_per_pod * 8;
            let superspines_per_plane = 16;
            rail_optimized(&RailOptimized {
                name: format!("rail-optimized-{gpus}gpu"),
                rails: 8,
                servers,
                servers_per_su,
                sus_per_pod,
                spines_per_pod: servers_per_su,
                superspines_per_plane,
                nic_gbps: NIC,
                leaf_uplink_gbps: NIC,
                spine_uplink_gbps: NIC * leaves_per_pod as f64 / superspines_per_plane as f64,
                gpus_per_nic: 1,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn leaf_spine_is_valid_and_numbered() {
        let spec = leaf_spine(&LeafSpine::default()).unwrap();
        let t = Topology::from_spec(spec).unwrap();
        assert_eq!(t.switches().len(), 4);
        assert_eq!(t.hosts().len(), 4);
        let h1 = &t.hosts()[0];
        assert_eq!(h1.ip.to_string(), "10.0.1.1");
        assert_eq!(
            (t.switches()[h1.leaf as usize].name.as_str(), h1.port),
            ("leaf1", 1)
        );
        // leaf1's uplinks are ports 3 and 4 toward spine1 and spine2.
        let leaf1 = t.switch_by_name("leaf1").unwrap();
        let ports: Vec<_> = t
            .switch_out_edges(leaf1)
            .iter()
            .map(|&e| t.edge(e).from_port)
            .collect();
        assert_eq!(ports, vec![3, 4]);
        let ids: Vec<_> = t.switches().iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4]);
    }

    #[test]
    fn multi_pod_planes() {
        let spec = multi_pod(&MultiPod::default()).unwrap();
        let t = Topology::from_spec(spec).unwrap();
        // 2 pods x (2 leaves + 2 spines) + 2 planes x 2 superspines.
        assert_eq!(t.switches().len(), 12);
        let l = t.switch_by_name("p1-leaf1").unwrap();
        let r = t.switch_by_name("p2-leaf1").unwrap();
        assert_eq!(t.dist_to_leaf(l, r), Some(4));
        // From p1-spine1 toward pod 2: the two super-spines of plane 1.
        let s = t.switch_by_name("p1-spine1").unwrap();
        let nh: Vec<_> = t
            .next_hops(s, r)
            .map(|e| t.node_name(t.edge(e).to).to_string())
            .collect();
        assert_eq!(nh, vec!["ss1-1", "ss1-2"]);
    }

    #[test]
    fn rail_optimized_rails() {
        let spec = rail_optimized(&RailOptimized::default()).unwrap();
        let t = Topology::from_spec(spec).unwrap();
        assert_eq!(t.servers().len(), 8);
        for s in t.servers() {
            assert_eq!(s.nics.len(), 8);
            for (r, &n) in s.nics.iter().enumerate() {
                let h = &t.hosts()[n as usize];
                assert_eq!(h.rail, Some(r as u32));
                assert!(t.switches()[h.leaf as usize]
                    .name
                    .ends_with(&format!("rail{r}")));
            }
        }
        assert_eq!(t.gpu_count(), 64);
    }

    #[test]
    fn presets_build_valid_fabrics() {
        for (kind, gpus) in [
            (Preset::LeafSpine, 64),
            (Preset::Clos3, 1024),
            (Preset::RailOptimized, 1024),
            (Preset::RailOptimized, 8192),
        ] {
            let t = Topology::from_spec(preset(kind, gpus).unwrap()).unwrap();
            assert_eq!(t.gpu_count(), gpus as u64, "{kind:?}");
            for (_, o) in t.leaf_oversubscription() {
                assert!((o.unwrap() - 1.0).abs() < 1e-9, "{kind:?} not non-blocking");
            }
            for (_, o) in t.spine_oversubscription() {
                assert!((o - 1.0).abs() < 1e-9, "{kind:?} spine not non-blocking");
            }
        }
        assert!(preset(Preset::Clos3, 12).is_err());
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = leaf_spine(&LeafSpine {
            spines: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("spines = 0"), "{e}");
    }
}

#[cfg(test)]
mod dist_tests {
    use super::*;
    use crate::topology::{NodeRef, Topology};
    use petgraph::graph::NodeIndex;

    /// The shared-BFS shortcut gives the same distances as a plain search.
    #[test]
    fn distances_match_dijkstra() {
        let specs = [
            multi_pod(&MultiPod {
                pods: 3,
                leaves_per_pod: 3,
                ..Default::default()
            })
            .unwrap(),
            rail_optimized(&RailOptimized {
                servers: 12,
                ..Default::default()
            })
            .unwrap(),
            leaf_spine(&LeafSpine {
                leaves: 5,
                spines: 3,
                ..Default::default()
            })
            .unwrap(),
        ];
        for spec in specs {
            let t = Topology::from_spec(spec).unwrap();
            for &l in t.leaves() {
                let d =
                    petgraph::algo::dijkstra(t.graph(), NodeIndex::new(l as usize), None, |_| 1u32);
                for (n, &w) in &d {
                    if let NodeRef::Switch(s) = t.graph()[*n] {
                        assert_eq!(
                            t.dist_to_leaf(s, l),
                            Some(w as u8),
                            "{}: {} to {}",
                            t.name(),
                            t.switches()[s as usize].name,
                            t.switches()[l as usize].name
                        );
                    }
                }
            }
        }
    }
}
