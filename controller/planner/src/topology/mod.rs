//! The fabric: switches, host NICs and directed links with capacities, as a
//! petgraph [`DiGraph`], plus the shortest-path distances every path choice
//! and every ECMP group is derived from.
//!
//! * [`spec`] — the YAML form ([`TopologySpec`]), names instead of indices;
//! * [`validate`] — checks with errors that name the element;
//! * [`generate`] — leaf-spine, multi-pod (super-spine) and rail-optimized
//!   generators;
//! * [`yaml`] — load and save.
//!
//! Every full-duplex link becomes two directed edges; a directed edge's
//! [`EdgeId`] (its petgraph edge index) is what the ledger reserves.

pub mod generate;
pub mod spec;
pub mod validate;
pub mod yaml;

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};

pub use spec::{FabricKind, HostSpec, LinkSpec, Role, SwitchSpec, TopologySpec};
pub use validate::Issue;

use crate::conventions::gbps_to_bps;

/// Index of a switch in [`Topology::switches`].
pub type SwitchIdx = u32;
/// Index of a host (NIC) in [`Topology::hosts`].
pub type HostIdx = u32;
/// Index of a server in [`Topology::servers`].
pub type ServerIdx = u32;
/// A directed link (petgraph edge index); the unit the ledger reserves.
pub type EdgeId = u32;

/// Distance value meaning "unreachable".
const UNREACHABLE: u8 = u8::MAX;

/// Why a topology could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file is not valid YAML or does not have the schema's shape.
    #[error("{0}")]
    Parse(String),
    /// The file parsed but describes an invalid fabric.
    #[error("invalid topology '{name}': {} problem(s):\n{}", issues.len(), issues.iter().map(|i| format!("  - {i}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// Fabric name.
        name: String,
        /// Every problem found.
        issues: Vec<Issue>,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {io}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        io: std::io::Error,
    },
}

/// A switch of a validated fabric.
#[derive(Clone, Debug)]
pub struct Switch {
    /// Name.
    pub name: String,
    /// Tier.
    pub role: Role,
    /// P4Runtime device id / INT switch id.
    pub id: u32,
    /// Pod (0 when the spec gives none).
    pub pod: u32,
}

/// A host NIC of a validated fabric.
#[derive(Clone, Debug)]
pub struct Host {
    /// Name.
    pub name: String,
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of the leaf subnet.
    pub prefix_len: u8,
    /// MAC address.
    pub mac: [u8; 6],
    /// Leaf it attaches to.
    pub leaf: SwitchIdx,
    /// Leaf port.
    pub port: u16,
    /// NIC speed, bit/s.
    pub capacity_bps: u64,
    /// GPUs sending through this NIC.
    pub gpus: u32,
    /// Rail (rail-optimized fabrics).
    pub rail: Option<u32>,
    /// Server it belongs to.
    pub server: ServerIdx,
}

/// A physical server: the NICs that share NVLink.
#[derive(Clone, Debug)]
pub struct Server {
    /// Name (the host's own name when the spec gives no server).
    pub name: String,
    /// Its NICs, ordered by rail (then by file order).
    pub nics: Vec<HostIdx>,
    /// GPUs in the server (sum over its NICs).
    pub gpus: u32,
}

/// A graph node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeRef {
    /// A switch.
    Switch(SwitchIdx),
    /// A host NIC.
    Host(HostIdx),
}

/// A directed link.
#[derive(Clone, Debug)]
pub struct DirLink {
    /// Sending end.
    pub from: NodeRef,
    /// Receiving end.
    pub to: NodeRef,
    /// Egress port on `from` (0 when `from` is a host NIC: hosts have one port).
    pub from_port: u16,
    /// Ingress port on `to` (0 when `to` is a host NIC).
    pub to_port: u16,
    /// Capacity, bit/s.
    pub capacity_bps: u64,
}

/// A validated fabric with routing distances.
#[derive(Clone, Debug)]
pub struct Topology {
    spec: TopologySpec,
    graph: DiGraph<NodeRef, DirLink>,
    switches: Vec<Switch>,
    hosts: Vec<Host>,
    servers: Vec<Server>,
    names: HashMap<String, NodeRef>,
    host_up: Vec<EdgeId>,
    host_down: Vec<EdgeId>,
    /// Switch-to-switch out edges of each switch, ordered by egress port.
    sw_out: Vec<Vec<EdgeId>>,
    leaves: Vec<SwitchIdx>,
    leaf_pos: Vec<u32>,
    /// Hops from switch s to leaf l: `dist[s * leaves + l]`.
    dist: Vec<u8>,
}

impl Topology {
    /// Validates a spec and builds the graph. All problems are reported at once.
    pub fn from_spec(spec: TopologySpec) -> Result<Self, TopologyError> {
        let issues = validate::validate(&spec);
        if !issues.is_empty() {
            return Err(TopologyError::Invalid {
                name: spec.name.clone(),
                issues,
            });
        }
        Ok(Self::build(spec))
    }

    fn build(spec: TopologySpec) -> Self {
        let n_sw = spec.switches.len();
        let mut graph: DiGraph<NodeRef, DirLink> = DiGraph::with_capacity(
            n_sw + spec.hosts.len(),
            2 * (spec.links.len() + spec.hosts.len()),
        );
        let mut names = HashMap::new();
        let mut switches = Vec::with_capacity(n_sw);
        for (i, s) in spec.switches.iter().enumerate() {
            let n = graph.add_node(NodeRef::Switch(i as u32));
            debug_assert_eq!(n.index(), i);
            names.insert(s.name.clone(), NodeRef::Switch(i as u32));
            switches.push(Switch {
                name: s.name.clone(),
                role: s.role,
                id: s.id,
                pod: s.pod.unwrap_or(0),
            });
        }
        let mut server_ix: HashMap<String, ServerIdx> = HashMap::new();
        let mut servers: Vec<Server> = Vec::new();
        let mut hosts = Vec::with_capacity(spec.hosts.len());
        for (j, h) in spec.hosts.iter().enumerate() {
            graph.add_node(NodeRef::Host(j as u32));
            names.insert(h.name.clone(), NodeRef::Host(j as u32));
            let (ip, prefix_len) = validate::parse_ip_prefix(&h.ip).expect("validated");
            let sname = h.server.clone().unwrap_or_else(|| h.name.clone());
            let server = *server_ix.entry(sname.clone()).or_insert_with(|| {
                servers.push(Server {
                    name: sname,
                    nics: Vec::new(),
                    gpus: 0,
                });
                (servers.len() - 1) as u32
            });
            servers[server as usize].nics.push(j as u32);
            servers[server as usize].gpus += h.gpus;
            let NodeRef::Switch(leaf) = names[&h.leaf] else {
                unreachable!("validated: host leaf is a switch")
            };
            hosts.push(Host {
                name: h.name.clone(),
                ip,
                prefix_len,
                mac: validate::parse_mac(&h.mac).expect("validated"),
                leaf,
                port: h.port,
                capacity_bps: gbps_to_bps(h.gbps),
                gpus: h.gpus,
                rail: h.rail,
                server,
            });
        }
        for s in &mut servers {
            s.nics
                .sort_by_key(|&n| (hosts[n as usize].rail.unwrap_or(0), n));
        }
        let sw = |name: &str| match names[name] {
            NodeRef::Switch(i) => i,
            NodeRef::Host(_) => unreachable!("validated: links join switches"),
        };
        let mut sw_out = vec![Vec::new(); n_sw];
        for l in &spec.links {
            let (a, b) = (sw(&l.node1), sw(&l.node2));
            let cap = gbps_to_bps(l.gbps);
            for (x, px, y, py) in [(a, l.port1, b, l.port2), (b, l.port2, a, l.port1)] {
                let e = graph.add_edge(
                    NodeIndex::new(x as usize),
                    NodeIndex::new(y as usize),
                    DirLink {
                        from: NodeRef::Switch(x),
                        to: NodeRef::Switch(y),
                        from_port: px,
                        to_port: py,
                        capacity_bps: cap,
                    },
                );
                sw_out[x as usize].push(e.index() as EdgeId);
            }
        }
        let mut host_up = Vec::with_capacity(hosts.len());
        let mut host_down = Vec::with_capacity(hosts.len());
        for (j, h) in hosts.iter().enumerate() {
            let hn = NodeIndex::new(n_sw + j);
            let ln = NodeIndex::new(h.leaf as usize);
            let up = graph.add_edge(
                hn,
                ln,
                DirLink {
                    from: NodeRef::Host(j as u32),
                    to: NodeRef::Switch(h.leaf),
                    from_port: 0,
                    to_port: h.port,
                    capacity_bps: h.capacity_bps,
                },
            );
            let down = graph.add_edge(
                ln,
                hn,
                DirLink {
                    from: NodeRef::Switch(h.leaf),
                    to: NodeRef::Host(j as u32),
                    from_port: h.port,
                    to_port: 0,
                    capacity_bps: h.capacity_bps,
                },
            );
            host_up.push(up.index() as EdgeId);
            host_down.push(down.index() as EdgeId);
        }
        for out in &mut sw_out {
            out.sort_by_key(|&e| graph[EdgeIndex::new(e as usize)].from_port);
        }
        let leaves: Vec<SwitchIdx> = (0..n_sw as u32)
            .filter(|&i| switches[i as usize].role == Role::Leaf)
            .collect();
        let mut leaf_pos = vec![u32::MAX; n_sw];
        for (k, &l) in leaves.iter().enumerate() {
            leaf_pos[l as usize] = k as u32;
        }
        // BFS from every leaf over switch-to-switch links (links are
        // symmetric, so distance to the leaf = distance from it). Leaves
        // with the same neighbour set (all leaves of a pod, in a Clos) have
        // the same distances except to each other, so one BFS serves them all.
        let nl = leaves.len();
        let mut dist = vec![UNREACHABLE; n_sw * nl];
        let mut queue = Vec::with_capacity(n_sw);
        let mut reps: HashMap<Vec<SwitchIdx>, (SwitchIdx, usize)> = HashMap::new();
        for (k, &l) in leaves.iter().enumerate() {
            let mut key: Vec<SwitchIdx> = sw_out[l as usize]
                .iter()
                .filter_map(|&e| match graph[EdgeIndex::new(e as usize)].to {
                    NodeRef::Switch(t) => Some(t),
                    NodeRef::Host(_) => None,
                })
                .collect();
            key.sort_unstable();
            if let Some(&(rep, rk)) = reps.get(&key) {
                let rep_to_l = dist[l as usize * nl + rk];
                for s in 0..n_sw {
                    dist[s * nl + k] = dist[s * nl + rk];
                }
                dist[l as usize * nl + k] = 0;
                dist[rep as usize * nl + k] = rep_to_l;
                continue;
            }
            reps.insert(key, (l, k));
            queue.clear();
            dist[l as usize * nl + k] = 0;
            queue.push(l);
            let mut head = 0;
            while head < queue.len() {
                let s = queue[head];
                head += 1;
                let d = dist[s as usize * nl + k];
                for &e in &sw_out[s as usize] {
                    let NodeRef::Switch(t) = graph[EdgeIndex::new(e as usize)].to else {
                        continue;
                    };
                    let slot = &mut dist[t as usize * nl + k];
                    if *slot == UNREACHABLE {
                        *slot = d.saturating_add(1).min(UNREACHABLE - 1);
                        queue.push(t);
                    }
                }
            }
        }
        Topology {
            spec,
            graph,
            switches,
            hosts,
            servers,
            names,
            host_up,
            host_down,
            sw_out,
            leaves,
            leaf_pos,
            dist,
        }
    }

    /// The spec this fabric was built from (what [`yaml::save`] writes).
    pub fn spec(&self) -> &TopologySpec {
        &self.spec
    }
    /// Fabric name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }
    /// Generator shape.
    pub fn kind(&self) -> FabricKind {
        self.spec.kind
    }
    /// The petgraph graph: node `i < switches().len()` is switch `i`, node
    /// `switches().len() + j` is host `j`; edge indices are [`EdgeId`]s.
    pub fn graph(&self) -> &DiGraph<NodeRef, DirLink> {
        &self.graph
    }
    /// Switches.
    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }
    /// Host NICs.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }
    /// Servers (groups of NICs sharing NVLink), in file order of their first NIC.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }
    /// Leaves, in file order.
    pub fn leaves(&self) -> &[SwitchIdx] {
        &self.leaves
    }
    /// Looks a node up by name.
    pub fn node(&self, name: &str) -> Option<NodeRef> {
        self.names.get(name).copied()
    }
    /// Looks a host up by name.
    pub fn host_by_name(&self, name: &str) -> Option<HostIdx> {
        match self.names.get(name)? {
            NodeRef::Host(h) => Some(*h),
            NodeRef::Switch(_) => None,
        }
    }
    /// Looks a switch up by name.
    pub fn switch_by_name(&self, name: &str) -> Option<SwitchIdx> {
        match self.names.get(name)? {
            NodeRef::Switch(s) => Some(*s),
            NodeRef::Host(_) => None,
        }
    }
    /// Name of a node.
    pub fn node_name(&self, n: NodeRef) -> &str {
        match n {
            NodeRef::Switch(s) => &self.switches[s as usize].name,
            NodeRef::Host(h) => &self.hosts[h as usize].name,
        }
    }
    /// Number of directed edges.
    pub fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }
    /// A directed edge.
    pub fn edge(&self, e: EdgeId) -> &DirLink {
        &self.graph[EdgeIndex::new(e as usize)]
    }
    /// `leaf1:3 -> spine2:1` (host ends are written without a port).
    pub fn describe_edge(&self, e: EdgeId) -> String {
        let l = self.edge(e);
        let end = |n: NodeRef, p: u16| match n {
            NodeRef::Switch(_) => format!("{}:{p}", self.node_name(n)),
            NodeRef::Host(_) => self.node_name(n).to_string(),
        };
        format!("{} -> {}", end(l.from, l.from_port), end(l.to, l.to_port))
    }
    /// The NIC's transmit edge (host → leaf).
    pub fn host_up_edge(&self, h: HostIdx) -> EdgeId {
        self.host_up[h as usize]
    }
    /// The edge into the NIC (leaf → host).
    pub fn host_down_edge(&self, h: HostIdx) -> EdgeId {
        self.host_down[h as usize]
    }
    /// Switch-to-switch out edges of a switch, ordered by egress port.
    pub fn switch_out_edges(&self, s: SwitchIdx) -> &[EdgeId] {
        &self.sw_out[s as usize]
    }
    /// Hops from switch `s` to leaf `leaf` over switch links (`None`: unreachable
    /// or `leaf` is not a leaf).
    pub fn dist_to_leaf(&self, s: SwitchIdx, leaf: SwitchIdx) -> Option<u8> {
        let k = *self.leaf_pos.get(leaf as usize)?;
        if k == u32::MAX {
            return None;
        }
        let d = self.dist[s as usize * self.leaves.len() + k as usize];
        (d != UNREACHABLE).then_some(d)
    }
    /// The equal-cost next hops from switch `s` toward leaf `dst_leaf`, ordered
    /// by egress port: exactly the members of the ECMP group a switch
    /// programs for the leaf's subnet. Empty when `s == dst_leaf`.
    pub fn next_hops(
        &self,
        s: SwitchIdx,
        dst_leaf: SwitchIdx,
    ) -> impl Iterator<Item = EdgeId> + '_ {
        let nl = self.leaves.len();
        let k = self.leaf_pos[dst_leaf as usize] as usize;
        let d = self.dist[s as usize * nl + k];
        self.sw_out[s as usize].iter().copied().filter(move |&e| {
            let NodeRef::Switch(t) = self.edge(e).to else {
                return false;
            };
            d != 0 && d != UNREACHABLE && self.dist[t as usize * nl + k] == d - 1
        })
    }
    /// Oversubscription of each leaf: host-facing capacity / uplink capacity
    /// (`None` for leaves without uplinks).
    pub fn leaf_oversubscription(&self) -> Vec<(SwitchIdx, Option<f64>)> {
        let mut down = vec![0u64; self.switches.len()];
        for h in &self.hosts {
            down[h.leaf as usize] += h.capacity_bps;
        }
        self.leaves
            .iter()
            .map(|&l| {
                let up: u64 = self.sw_out[l as usize]
                    .iter()
                    .map(|&e| self.edge(e).capacity_bps)
                    .sum();
                (l, (up > 0).then(|| down[l as usize] as f64 / up as f64))
            })
            .collect()
    }
    /// Oversubscription of each spine that has super-spine uplinks:
    /// (capacity toward leaves) / (capacity toward super-spines).
    pub fn spine_oversubscription(&self) -> Vec<(SwitchIdx, f64)> {
        let mut out = Vec::new();
        for (i, s) in self.switches.iter().enumerate() {
            if s.role != Role::Spine {
                continue;
            }
            let (mut down, mut up) = (0u64, 0u64);
            for &e in &self.sw_out[i] {
                let l = self.edge(e);
                if let NodeRef::Switch(t) = l.to {
                    if self.switches[t as usize].role == Role::Leaf {
                        down += l.capacity_bps;
                    } else {
                        up += l.capacity_bps;
                    }
                }
            }
            if up > 0 {
                out.push((i as u32, down as f64 / up as f64));
            }
        }
        out
    }
    /// Total GPUs.
    pub fn gpu_count(&self) -> u64 {
        self.hosts.iter().map(|h| h.gpus as u64).sum()
    }
    /// The NIC GPU `gpu` (0-based, within the server) sends through: the NICs'
    /// GPU counts are laid out in rail order.
    pub fn nic_of_gpu(&self, server: ServerIdx, gpu: u32) -> Option<HostIdx> {
        let mut g = gpu;
        for &n in &self.servers[server as usize].nics {
            let c = self.hosts[n as usize].gpus;
            if g < c {
                return Some(n);
            }
            g -= c;
        }
        None
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |r: Role| self.switches.iter().filter(|s| s.role == r).count();
        write!(
            f,
            "{} ({}): {} leaves, {} spines, {} superspines, {} hosts in {} servers, {} GPUs, {} links",
            self.name(),
            self.kind(),
            count(Role::Leaf),
            count(Role::Spine),
            count(Role::Superspine),
            self.hosts.len(),
            self.servers.len(),
            self.gpu_count(),
            self.spec.links.len()
        )
    }
}
