//! Expanding collectives into fabric flows with start times and sizes.
//!
//! Ranks are GPUs of whole servers; traffic between GPUs of one server goes
//! over NVLink and never becomes a flow. A collective runs on `channels`
//! channels (NCCL's term); channel `c` leaves and enters each server through
//! the NIC of GPU `c mod G` (`G` = GPUs per server), so on a rail-optimized
//! fabric channel `c` stays on rail `c` and on a shared-NIC server all
//! channels share the NIC with different QPs. Every channel between two
//! NICs is one RoCE QP connection.
//!
//! Models (`N` ranks, `S` servers, `C` = `bytes`, `k` channels):
//! * **ring all-reduce**: per channel a ring over all ranks, server-major;
//!   `2(N−1)` steps, in each step every rank sends `C/(kN)` to its successor.
//!   The server-crossing edges are the flows (`S` per channel). Default: one
//!   flow per connection covering all steps back to back (the steps of a
//!   connection share the QP, so they must share the path); `per_step`: one
//!   flow per step with its own start time.
//! * **all-gather / reduce-scatter**: the same ring with `N−1` steps (`C` is
//!   the full output / input buffer).
//! * **tree all-reduce**: per channel a binary tree over the servers (heap
//!   order, rotated by the channel so channels use different trees); reduce
//!   level by level from the deepest, then broadcast back down; each level is
//!   one step moving `C/k` per edge. No intra-step pipelining (conservative).
//! * **all-to-all**: every rank sends `C/N` to every other rank; between two
//!   servers that is `G²·C/N`, split over the channels.
//! * **pipeline**: servers split into `stages` consecutive groups; for each
//!   micro-batch `m` stage `i` sends `C` per GPU (activations) to stage
//!   `i+1` at step `i + m` (GPipe forward schedule), server by position.
//! * **KV transfer** (prefill → decode): the first `prefill_servers` servers
//!   each send `C` of KV cache to decode server `i mod D`.
//!
//! Unless a rate is given, each flow gets `line_rate_fraction` of the
//! slower NIC's speed, divided by how many flows of the collective share
//! that NIC at the same moment, so the collective never asks more of a NIC
//! than it has.

use serde::{Deserialize, Serialize};

use crate::conventions::transfer_ns;
use crate::flow::{Flow, QpAllocator};
use crate::topology::{HostIdx, ServerIdx, Topology};

/// Kinds of collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CollectiveKind {
    /// Ring all-reduce.
    RingAllreduce,
    /// Binary-tree all-reduce.
    TreeAllreduce,
    /// Ring all-gather.
    AllGather,
    /// Ring reduce-scatter.
    ReduceScatter,
    /// All-to-all.
    AllToAll,
    /// Pipeline-parallel stage sends.
    Pipeline,
    /// Prefill → decode KV-cache transfer.
    KvTransfer,
}

impl CollectiveKind {
    /// All kinds.
    pub const ALL: [CollectiveKind; 7] = [
        CollectiveKind::RingAllreduce,
        CollectiveKind::TreeAllreduce,
        CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter,
        CollectiveKind::AllToAll,
        CollectiveKind::Pipeline,
        CollectiveKind::KvTransfer,
    ];

    /// The kebab-case name used in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveKind::RingAllreduce => "ring-allreduce",
            CollectiveKind::TreeAllreduce => "tree-allreduce",
            CollectiveKind::AllGather => "all-gather",
            CollectiveKind::ReduceScatter => "reduce-scatter",
            CollectiveKind::AllToAll => "all-to-all",
            CollectiveKind::Pipeline => "pipeline",
            CollectiveKind::KvTransfer => "kv-transfer",
        }
    }

    /// Parses a kebab-case name.
    pub fn parse(s: &str) -> Option<CollectiveKind> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

impl std::fmt::Display for CollectiveKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A collective to expand.
#[derive(Clone, Debug)]
pub struct Collective {
    /// Kind.
    pub kind: CollectiveKind,
    /// Participating servers (all their GPUs are ranks), in ring order.
    pub servers: Vec<ServerIdx>,
    /// Buffer size `C` (see the module docs for its meaning per kind).
    pub bytes: u64,
    /// Channels (QPs per neighbour pair); default 8.
    pub channels: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// Rate per flow, bit/s; `None` = fair share of `line_rate_fraction`.
    pub rate_bps: Option<u64>,
    /// Fraction of NIC speed the collective may use (default 0.9).
    pub line_rate_fraction: f64,
    /// Ring kinds: one flow per step.
    pub per_step: bool,
    /// Pipeline stages (default 2).
    pub stages: u32,
    /// Pipeline micro-batches (default 4).
    pub microbatches: u32,
    /// KV transfer: prefill servers (default half).
    pub prefill_servers: Option<u32>,
}

impl Collective {
    /// A collective with default options.
    pub fn new(kind: CollectiveKind, servers: Vec<ServerIdx>, bytes: u64) -> Collective {
        Collective {
            kind,
            servers,
            bytes,
            channels: 8,
            start_ns: 0,
            rate_bps: None,
            line_rate_fraction: 0.9,
            per_step: false,
            stages: 2,
            microbatches: 4,
            prefill_servers: None,
        }
    }
}

/// A collective that cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct CollectiveError {
    /// Kind (or "gpus" for rank selection).
    pub kind: String,
    /// What is wrong.
    pub message: String,
}

fn cerr(kind: CollectiveKind, m: impl Into<String>) -> CollectiveError {
    CollectiveError {
        kind: kind.name().into(),
        message: m.into(),
    }
}

/// The first servers of the topology (in order) that hold exactly `gpus` GPUs.
pub fn select_servers(topo: &Topology, gpus: u32) -> Result<Vec<ServerIdx>, CollectiveError> {
    let err = |m: String| CollectiveError {
        kind: "gpus".into(),
        message: m,
    };
    if gpus == 0 {
        return Err(err("gpus must be at least 1".into()));
    }
    let mut out = Vec::new();
    let mut have = 0u64;
    for (i, s) in topo.servers().iter().enumerate() {
        if have >= gpus as u64 {
            break;
        }
        out.push(i as u32);
        have += s.gpus as u64;
    }
    if have < gpus as u64 {
        return Err(err(format!(
            "{gpus} GPUs requested but fabric '{}' has only {have}",
            topo.name()
        )));
    }
    if have != gpus as u64 {
        return Err(err(format!(
            "{gpus} GPUs is not a whole number of servers (the first {} servers hold {have})",
            out.len()
        )));
    }
    Ok(out)
}

struct Ctx<'a> {
    topo: &'a Topology,
    c: &'a Collective,
    g: u32,
    /// Most channels sharing one NIC of a server.
    m: u32,
}

impl Ctx<'_> {
    fn nic(&self, server_pos: usize, channel: u32) -> HostIdx {
        self.topo
            .nic_of_gpu(self.c.servers[server_pos], channel % self.g)
            .expect("GPU index below the server's GPU count")
    }

    fn rate(&self, src: HostIdx, dst: HostIdx, share: u64) -> u64 {
        if let Some(r) = self.c.rate_bps {
            return r;
        }
        let h = self.topo.hosts();
        let nic = h[src as usize]
            .capacity_bps
            .min(h[dst as usize].capacity_bps);
        ((nic as f64 * self.c.line_rate_fraction) / (share as f64 * self.m as f64)).max(1.0) as u64
    }
}

/// Checks what every kind needs (servers, bytes, channels, rates, uniform
/// servers) and works out the GPUs per server and the NIC sharing.
fn context<'a>(topo: &'a Topology, c: &'a Collective) -> Result<Ctx<'a>, CollectiveError> {
    let k = c.kind;
    if c.servers.is_empty() {
        return Err(cerr(k, "no servers"));
    }
    if c.bytes == 0 {
        return Err(cerr(k, "bytes must be at least 1"));
    }
    if c.channels == 0 {
        return Err(cerr(k, "channels must be at least 1"));
    }
    if !(c.line_rate_fraction > 0.0 && c.line_rate_fraction <= 1.0) {
        return Err(cerr(
            k,
            format!(
                "line-rate fraction {} must be in (0, 1]",
                c.line_rate_fraction
            ),
        ));
    }
    if c.rate_bps == Some(0) {
        return Err(cerr(k, "rate must be positive"));
    }
    let g = topo.servers()[c.servers[0] as usize].gpus;
    for &s in &c.servers {
        let sv = &topo.servers()[s as usize];
        if sv.gpus != g {
            return Err(cerr(
                k,
                format!(
                    "server '{}' has {} GPUs, others {g}; ranks must be uniform",
                    sv.name, sv.gpus
                ),
            ));
        }
    }
    let m = {
        let mut count = std::collections::HashMap::new();
        for ch in 0..c.channels {
            *count
                .entry(topo.nic_of_gpu(c.servers[0], ch % g))
                .or_insert(0u32) += 1;
        }
        count.into_values().max().unwrap_or(1)
    };
    Ok(Ctx { topo, c, g, m })
}

impl Ctx<'_> {
    /// Servers and ranks (servers × GPUs).
    fn shape(&self) -> (usize, u64) {
        let s = self.c.servers.len();
        (s, s as u64 * self.g as u64)
    }

    /// Ring all-reduce, all-gather, reduce-scatter: one flow per ring edge and channel (or per step).
    fn ring(&self, qps: &mut QpAllocator, flows: &mut Vec<Flow>) -> Result<(), CollectiveError> {
        let (topo, c) = (self.topo, self.c);
        let k = c.kind;
        let (s, n) = self.shape();
        if s < 2 {
            return Ok(());
        }
        let steps = if k == CollectiveKind::RingAllreduce {
            2 * (n - 1)
        } else {
            n - 1
        };
        let chunk = c.bytes.div_ceil(c.channels as u64 * n).max(1);
        for ch in 0..c.channels {
            for i in 0..s {
                let (a, b) = (self.nic(i, ch), self.nic((i + 1) % s, ch));
                let rate = self.rate(a, b, 1);
                let step_ns = transfer_ns(chunk, rate).max(1);
                let qp = qps.alloc(b);
                if c.per_step {
                    for t in 0..steps {
                        flows.push(Flow::with_duration(
                            topo,
                            a,
                            b,
                            qp,
                            c.start_ns + t * step_ns,
                            chunk,
                            rate,
                            step_ns,
                        ));
                    }
                } else {
                    flows.push(Flow::with_duration(
                        topo,
                        a,
                        b,
                        qp,
                        c.start_ns,
                        chunk * steps,
                        rate,
                        step_ns * steps,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Tree all-reduce: reduce up each channel's tree, then broadcast down.
    fn tree(&self, qps: &mut QpAllocator, flows: &mut Vec<Flow>) -> Result<(), CollectiveError> {
        let (topo, c) = (self.topo, self.c);
        let s = c.servers.len();
        if s < 2 {
            return Ok(());
        }
        let depth = |i: usize| usize::BITS - 1 - (i + 1).leading_zeros();
        let dmax = depth(s - 1) as u64;
        let per = c.bytes.div_ceil(c.channels as u64).max(1);
        for ch in 0..c.channels {
            let rot = ch as usize % s;
            let pos = |i: usize| (i + rot) % s;
            for i in 1..s {
                let parent = (i - 1) / 2;
                let (child_nic, parent_nic) = (self.nic(pos(i), ch), self.nic(pos(parent), ch));
                let rate = self.rate(child_nic, parent_nic, 2);
                let step_ns = transfer_ns(per, rate).max(1);
                let d = depth(i) as u64;
                let up_qp = qps.alloc(parent_nic);
                let down_qp = qps.alloc(child_nic);
                // Reduce: deepest level first (step dmax - d); broadcast: step dmax + d - 1.
                flows.push(Flow::with_duration(
                    topo,
                    child_nic,
                    parent_nic,
                    up_qp,
                    c.start_ns + (dmax - d) * step_ns,
                    per,
                    rate,
                    step_ns,
                ));
                flows.push(Flow::with_duration(
                    topo,
                    parent_nic,
                    child_nic,
                    down_qp,
                    c.start_ns + (dmax + d - 1) * step_ns,
                    per,
                    rate,
                    step_ns,
                ));
            }
        }
        Ok(())
    }

    /// All-to-all: every server pair, split over the channels.
    fn all_to_all(
        &self,
        qps: &mut QpAllocator,
        flows: &mut Vec<Flow>,
    ) -> Result<(), CollectiveError> {
        let (topo, c, g) = (self.topo, self.c, self.g);
        let (s, n) = self.shape();
        if s < 2 {
            return Ok(());
        }
        let pair_bytes = ((g as u128 * g as u128 * c.bytes as u128)
            .div_ceil(n as u128 * c.channels as u128))
        .max(1) as u64;
        for ch in 0..c.channels {
            for a in 0..s {
                for b in 0..s {
                    if a == b {
                        continue;
                    }
                    let (x, y) = (self.nic(a, ch), self.nic(b, ch));
                    let rate = self.rate(x, y, s as u64 - 1);
                    let qp = qps.alloc(y);
                    flows.push(Flow::new(topo, x, y, qp, c.start_ns, pair_bytes, rate));
                }
            }
        }
        Ok(())
    }

    /// Pipeline sends: stage to next stage, per micro-batch.
    fn pipeline(
        &self,
        qps: &mut QpAllocator,
        flows: &mut Vec<Flow>,
    ) -> Result<(), CollectiveError> {
        let (topo, c, g) = (self.topo, self.c, self.g);
        let k = c.kind;
        let s = c.servers.len();
        let p = c.stages as usize;
        if p < 2 || s % p != 0 {
            return Err(cerr(
                k,
                format!(
                    "{} stages must be at least 2 and divide the {s} servers",
                    c.stages
                ),
            ));
        }
        if c.microbatches == 0 {
            return Err(cerr(k, "microbatches must be at least 1"));
        }
        let per_stage = s / p;
        let per = (c.bytes as u128 * g as u128)
            .div_ceil(c.channels as u128)
            .max(1) as u64;
        for ch in 0..c.channels {
            for i in 0..p - 1 {
                for j in 0..per_stage {
                    let (x, y) = (
                        self.nic(i * per_stage + j, ch),
                        self.nic((i + 1) * per_stage + j, ch),
                    );
                    let rate = self.rate(x, y, 1);
                    let step_ns = transfer_ns(per, rate).max(1);
                    let qp = qps.alloc(y);
                    for mb in 0..c.microbatches as u64 {
                        let t = i as u64 + mb;
                        flows.push(Flow::with_duration(
                            topo,
                            x,
                            y,
                            qp,
                            c.start_ns + t * step_ns,
                            per,
                            rate,
                            step_ns,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// KV transfer: each prefill server to its decode server.
    fn kv_transfer(
        &self,
        qps: &mut QpAllocator,
        flows: &mut Vec<Flow>,
    ) -> Result<(), CollectiveError> {
        let (topo, c) = (self.topo, self.c);
        let k = c.kind;
        let s = c.servers.len();
        let pf = c.prefill_servers.unwrap_or((s as u32 / 2).max(1)) as usize;
        if pf == 0 || pf >= s {
            return Err(cerr(k, format!("prefill servers {pf}: need at least one prefill and one decode server among {s}")));
        }
        let d = s - pf;
        let fan_in = pf.div_ceil(d) as u64;
        let per = c.bytes.div_ceil(c.channels as u64).max(1);
        for ch in 0..c.channels {
            for i in 0..pf {
                let (x, y) = (self.nic(i, ch), self.nic(pf + i % d, ch));
                let rate = self.rate(x, y, fan_in);
                let qp = qps.alloc(y);
                flows.push(Flow::new(topo, x, y, qp, c.start_ns, per, rate));
            }
        }
        Ok(())
    }
}

/// Expands a collective into flows. QPs come from `qps`, one per connection.
pub fn expand(
    topo: &Topology,
    c: &Collective,
    qps: &mut QpAllocator,
) -> Result<Vec<Flow>, CollectiveError> {
    let cx = context(topo, c)?;
    let mut flows = Vec::new();
    match c.kind {
        CollectiveKind::RingAllreduce
        | CollectiveKind::AllGather
        | CollectiveKind::ReduceScatter => cx.ring(qps, &mut flows)?,
        CollectiveKind::TreeAllreduce => cx.tree(qps, &mut flows)?,
        CollectiveKind::AllToAll => cx.all_to_all(qps, &mut flows)?,
        CollectiveKind::Pipeline => cx.pipeline(qps, &mut flows)?,
        CollectiveKind::KvTransfer => cx.kv_transfer(qps, &mut flows)?,
    }
    Ok(flows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::*;

    fn rail(servers: u32) -> Topology {
        Topology::from_spec(
            rail_optimized(&RailOptimized {
                servers,
                servers_per_su: 4,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn ring_allreduce_bytes_per_rank_match_2_n_minus_1_over_n() {
        let t = rail(4);
        let mut q = QpAllocator::new(&t);
        let servers = select_servers(&t, 32).unwrap();
        let c = Collective::new(CollectiveKind::RingAllreduce, servers, 32 * 1024 * 1024);
        let flows = expand(&t, &c, &mut q).unwrap();
        // 8 channels x 4 server-crossing edges.
        assert_eq!(flows.len(), 32);
        // What leaves each server = 2(N-1)/N * C (per rank traffic B), N = 32.
        let per_server: u64 = flows
            .iter()
            .filter(|f| t.hosts()[f.src as usize].server == 0)
            .map(|f| f.bytes)
            .sum();
        let b = 2 * 31 * (32 * 1024 * 1024) / 32;
        assert_eq!(per_server, b);
        // Channel c stays on rail c.
        for f in &flows {
            assert_eq!(
                t.hosts()[f.src as usize].rail,
                t.hosts()[f.dst as usize].rail
            );
        }
        // Default rate: 0.9 of a 400G NIC, one channel per NIC.
        assert_eq!(flows[0].rate_bps, 360_000_000_000);
    }

    #[test]
    fn per_step_flows_tile_the_merged_flow() {
        let t = rail(3);
        let servers = select_servers(&t, 24).unwrap();
        let mut c = Collective::new(CollectiveKind::AllGather, servers, 24 * 1000);
        let merged = expand(&t, &c, &mut QpAllocator::new(&t)).unwrap();
        c.per_step = true;
        let steps = expand(&t, &c, &mut QpAllocator::new(&t)).unwrap();
        assert_eq!(steps.len(), merged.len() * 23);
        let first: Vec<_> = steps
            .iter()
            .filter(|f| f.src == merged[0].src && f.dst == merged[0].dst)
            .collect();
        assert_eq!(first.len(), 23);
        assert_eq!(first[0].start_ns, merged[0].start_ns);
        assert_eq!(first.last().unwrap().end_ns(), merged[0].end_ns());
        assert!(first
            .windows(2)
            .all(|w| w[0].end_ns() == w[1].start_ns && w[0].dest_qp == w[1].dest_qp));
    }

    #[test]
    fn tree_levels_are_ordered() {
        let t = rail(7);
        let servers = select_servers(&t, 56).unwrap();
        let mut c = Collective::new(CollectiveKind::TreeAllreduce, servers, 8000);
        c.channels = 1;
        let flows = expand(&t, &c, &mut QpAllocator::new(&t)).unwrap();
        // 6 tree edges, up and down.
        assert_eq!(flows.len(), 12);
        let step = flows[0].duration_ns;
        let starts: std::collections::BTreeSet<u64> =
            flows.iter().map(|f| f.start_ns / step).collect();
        // Depth 2 tree: reduce steps 0,1 and broadcast steps 2,3.
        assert_eq!(starts.into_iter().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn all_to_all_pairs_and_rates() {
        let t = rail(4);
        let servers = select_servers(&t, 32).unwrap();
        let c = Collective::new(CollectiveKind::AllToAll, servers, 32 * 100);
        let flows = expand(&t, &c, &mut QpAllocator::new(&t)).unwrap();
        assert_eq!(flows.len(), 4 * 3 * 8);
        // Each flow: G^2 * C / N / k = 64 * 3200 / 32 / 8 = 800 bytes.
        assert!(flows.iter().all(|f| f.bytes == 800));
        // 3 concurrent peers per NIC share 0.9 x 400G.
        assert_eq!(flows[0].rate_bps, 120_000_000_000);
    }

    #[test]
    fn pipeline_and_kv() {
        let t = rail(4);
        let servers = select_servers(&t, 32).unwrap();
        let mut c = Collective::new(CollectiveKind::Pipeline, servers.clone(), 1000);
        c.stages = 4;
        c.microbatches = 2;
        c.channels = 1;
        let flows = expand(&t, &c, &mut QpAllocator::new(&t)).unwrap();
        assert_eq!(flows.len(), 3 * 2);
        c.stages = 3;
        assert!(expand(&t, &c, &mut QpAllocator::new(&t))
            .unwrap_err()
            .message
            .contains("divide"));
        let mut kv = Collective::new(CollectiveKind::KvTransfer, servers, 1 << 20);
        kv.prefill_servers = Some(3);
        let flows = expand(&t, &kv, &mut QpAllocator::new(&t)).unwrap();
        assert_eq!(flows.len(), 3 * 8);
        let decode = t.hosts()[flows[0].dst as usize].server;
        assert_eq!(t.servers()[decode as usize].name, "srv4");
    }

    #[test]
    fn gpu_selection_errors() {
        let t = rail(2);
        assert!(select_servers(&t, 12)
            .unwrap_err()
            .message
            .contains("whole number of servers"));
        assert!(select_servers(&t, 64)
            .unwrap_err()
            .message
            .contains("has only 16"));
    }
}
