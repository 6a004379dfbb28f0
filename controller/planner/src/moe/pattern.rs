//! The EP groups of a MoE job and which NICs carry each pair's bytes.
//!
//! A rank is a GPU of a server; its own NIC is the one its GPU sends
//! through ([`Topology::nic_of_gpu`]): on a rail-optimized fabric GPU `r`
//! of a server is on rail `r`'s leaf. Ranks of one server exchange over
//! NVLink, never over the fabric. Between servers, the layout decides the
//! NICs:
//! * [`NicLayout::Direct`]: from the source rank's NIC to the destination
//!   rank's NIC (a pair on different rails crosses the spines);
//! * [`NicLayout::RailAligned`] (NCCL's PXN): the source server first
//!   moves the bytes over NVLink to its GPU on the destination's rail, so
//!   they leave through the source server's NIC on that rail: on a
//!   rail-optimized fabric every pair stays on one rail, and a group
//!   inside a scalable unit never leaves its rail leaves.

use std::collections::HashMap;

use super::MoeError;
use crate::topology::{HostIdx, ServerIdx, Topology};

/// A GPU taking part: GPU `gpu` (from 0, within its server) of `server`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rank {
    /// Server.
    pub server: ServerIdx,
    /// GPU within the server.
    pub gpu: u32,
}

/// Which NICs carry the bytes between two ranks on different servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NicLayout {
    /// The source rank's NIC to the destination rank's NIC.
    #[default]
    Direct,
    /// The source server's NIC on the destination's rail (its position
    /// among its server's rail-ordered NICs) to the destination rank's NIC.
    RailAligned,
}

/// EP groups validated against one fabric, with each rank's NIC.
#[derive(Clone, Debug)]
pub struct MoePattern {
    groups: Vec<Vec<Rank>>,
    layout: NicLayout,
    /// Per group, per rank: its own NIC.
    nic: Vec<Vec<HostIdx>>,
    /// Per group, per rank: its NIC's position in its server's NICs (its rail).
    rail: Vec<Vec<u32>>,
}

impl MoePattern {
    /// Checks the groups against `topo`: at least one group, each of at
    /// least two ranks, every rank an existing GPU in exactly one group,
    /// and (rail-aligned) every server of a group with as many NICs.
    pub fn new(
        topo: &Topology,
        groups: Vec<Vec<Rank>>,
        layout: NicLayout,
    ) -> Result<MoePattern, MoeError> {
        if groups.is_empty() {
            return Err(MoeError::NoGroups);
        }
        let servers = topo.servers();
        let mut seen: HashMap<Rank, (usize, usize)> = HashMap::new();
        let mut nic = Vec::with_capacity(groups.len());
        let mut rail = Vec::with_capacity(groups.len());
        for (g, ranks) in groups.iter().enumerate() {
            if ranks.len() < 2 {
                return Err(MoeError::GroupTooSmall {
                    group: g,
                    size: ranks.len(),
                });
            }
            let mut nics = Vec::with_capacity(ranks.len());
            let mut rails = Vec::with_capacity(ranks.len());
            for (i, &r) in ranks.iter().enumerate() {
                let Some(sv) = servers.get(r.server as usize) else {
                    return Err(MoeError::UnknownServer {
                        group: g,
                        position: i,
                        server: r.server,
                        servers: servers.len(),
                    });
                };
                let Some(h) = topo.nic_of_gpu(r.server, r.gpu) else {
                    return Err(MoeError::UnknownGpu {
                        group: g,
                        position: i,
                        server: sv.name.clone(),
                        gpu: r.gpu,
                        gpus: sv.gpus,
                    });
                };
                if let Some(&(fg, fi)) = seen.get(&r) {
                    return Err(MoeError::RankInTwoGroups {
                        server: sv.name.clone(),
                        gpu: r.gpu,
                        first_group: fg,
                        first_position: fi,
                        group: g,
                        position: i,
                    });
                }
                seen.insert(r, (g, i));
                let pos = sv
                    .nics
                    .iter()
                    .position(|&n| n == h)
                    .expect("a NIC of its server");
                nics.push(h);
                rails.push(pos as u32);
            }
            if layout == NicLayout::RailAligned {
                let first = &servers[ranks[0].server as usize];
                if let Some(other) = ranks
                    .iter()
                    .map(|r| &servers[r.server as usize])
                    .find(|s| s.nics.len() != first.nics.len())
                {
                    return Err(MoeError::RailsDiffer {
                        group: g,
                        server: first.name.clone(),
                        nics: first.nics.len(),
                        other: other.name.clone(),
                        other_nics: other.nics.len(),
                    });
                }
            }
            nic.push(nics);
            rail.push(rails);
        }
        Ok(MoePattern {
            groups,
            layout,
            nic,
            rail,
        })
    }

    /// Every GPU of the fabric, servers in order, cut into groups of `ep`
    /// consecutive ranks (how a launcher numbers EP groups when expert
    /// parallelism is the innermost dimension).
    pub fn consecutive(
        topo: &Topology,
        ep: u32,
        layout: NicLayout,
    ) -> Result<MoePattern, MoeError> {
        let gpus = topo.gpu_count();
        if ep < 2 {
            return Err(MoeError::GroupTooSmall {
                group: 0,
                size: ep as usize,
            });
        }
        if gpus == 0 || gpus % ep as u64 != 0 {
            return Err(MoeError::EpSize { ep, gpus });
        }
        let ranks: Vec<Rank> = topo
            .servers()
            .iter()
            .enumerate()
            .flat_map(|(s, sv)| {
                (0..sv.gpus).map(move |gpu| Rank {
                    server: s as ServerIdx,
                    gpu,
                })
            })
            .collect();
        let groups = ranks.chunks(ep as usize).map(<[Rank]>::to_vec).collect();
        MoePattern::new(topo, groups, layout)
    }

    /// The groups, ranks in the order their byte matrices use.
    pub fn groups(&self) -> &[Vec<Rank>] {
        &self.groups
    }

    /// The layout.
    pub fn layout(&self) -> NicLayout {
        self.layout
    }

    /// Rank pairs of all groups, diagonals included (Σ size²): the length
    /// of a step's bytes.
    pub fn pair_count(&self) -> usize {
        self.groups.iter().map(|g| g.len() * g.len()).sum()
    }

    /// The NIC a rank sends and receives through.
    pub fn nic(&self, group: usize, position: usize) -> HostIdx {
        self.nic[group][position]
    }

    /// The NICs that carry the bytes from rank `src` to rank `dst` of
    /// `group` (positions in the group), or `None` when both ranks are on
    /// one server (NVLink).
    pub fn pair_nics(
        &self,
        topo: &Topology,
        group: usize,
        src: usize,
        dst: usize,
    ) -> Option<(HostIdx, HostIdx)> {
        let ranks = &self.groups[group];
        let (a, b) = (ranks[src], ranks[dst]);
        if a.server == b.server {
            return None;
        }
        let to = self.nic[group][dst];
        let from = match self.layout {
            NicLayout::Direct => self.nic[group][src],
            NicLayout::RailAligned => {
                topo.servers()[a.server as usize].nics[self.rail[group][dst] as usize]
            }
        };
        Some((from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::generate::{leaf_spine, rail_optimized, LeafSpine, RailOptimized};

    fn fabric() -> Topology {
        // 2 leaves x 4 NICs, servers of 2 one-GPU NICs: 8 GPUs on 4 servers.
        Topology::from_spec(
            leaf_spine(&LeafSpine {
                hosts_per_leaf: 4,
                gpus_per_host: 1,
                nics_per_server: 2,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap()
    }

    fn r(server: u32, gpu: u32) -> Rank {
        Rank { server, gpu }
    }

    #[test]
    fn validation_names_the_problem() {
        let t = fabric();
        let d = NicLayout::Direct;
        assert_eq!(
            MoePattern::new(&t, vec![], d).unwrap_err(),
            MoeError::NoGroups
        );
        let e = MoePattern::new(&t, vec![vec![r(0, 0), r(1, 0)], vec![r(2, 0)]], d).unwrap_err();
        assert_eq!(e, MoeError::GroupTooSmall { group: 1, size: 1 });
        let e = MoePattern::new(&t, vec![vec![r(0, 0), r(9, 0)]], d).unwrap_err();
        assert!(
            matches!(
                e,
                MoeError::UnknownServer {
                    group: 0,
                    position: 1,
                    server: 9,
                    servers: 4
                }
            ),
            "{e}"
        );
        let e = MoePattern::new(&t, vec![vec![r(0, 0), r(1, 2)]], d).unwrap_err();
        assert!(e.to_string().contains("has 2 GPU(s), no GPU 2"), "{e}");
        let e = MoePattern::new(&t, vec![vec![r(0, 0), r(1, 0)], vec![r(2, 1), r(1, 0)]], d)
            .unwrap_err();
        assert_eq!(
            e,
            MoeError::RankInTwoGroups {
                server: "srv2".into(),
                gpu: 0,
                first_group: 0,
                first_position: 1,
                group: 1,
                position: 1
            }
        );
        let e = MoePattern::new(&t, vec![vec![r(0, 0), r(0, 0)]], d).unwrap_err();
        assert!(
            matches!(e, MoeError::RankInTwoGroups { group: 0, .. }),
            "{e}"
        );
        assert_eq!(
            MoePattern::consecutive(&t, 3, d).unwrap_err(),
            MoeError::EpSize { ep: 3, gpus: 8 }
        );
        assert!(matches!(
            MoePattern::consecutive(&t, 1, d).unwrap_err(),
            MoeError::GroupTooSmall { .. }
        ));
    }

    #[test]
    fn rail_aligned_needs_equal_rails() {
        // Two leaf-spine servers of 2 NICs each plus, in a hand-edited
        // spec, one server of 1 NIC.
        let mut spec = leaf_spine(&LeafSpine {
            hosts_per_leaf: 3,
            gpus_per_host: 1,
            nics_per_server: 1,
            ..Default::default()
        })
        .unwrap();
        spec.hosts[1].server = Some("big".into());
        spec.hosts[2].server = Some("big".into());
        let t = Topology::from_spec(spec).unwrap();
        let big = t.servers().iter().position(|s| s.name == "big").unwrap() as u32;
        let small = t.servers().iter().position(|s| s.name == "h1").unwrap() as u32;
        let ranks = vec![r(small, 0), r(big, 1)];
        assert!(MoePattern::new(&t, vec![ranks.clone()], NicLayout::Direct).is_ok());
        let e = MoePattern::new(&t, vec![ranks], NicLayout::RailAligned).unwrap_err();
        assert!(
            matches!(
                e,
                MoeError::RailsDiffer {
                    nics: 1,
                    other_nics: 2,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn layouts_pick_the_nics() {
        let t = Topology::from_spec(rail_optimized(&RailOptimized::default()).unwrap()).unwrap();
        let p = MoePattern::consecutive(&t, 16, NicLayout::Direct).unwrap();
        assert_eq!(p.groups().len(), 4);
        assert_eq!(p.pair_count(), 4 * 256);
        // GPU 3 of server 0 to GPU 5 of server 1: rail 3 to rail 5.
        let (s, d) = p.pair_nics(&t, 0, 3, 8 + 5).unwrap();
        assert_eq!(
            (t.hosts()[s as usize].rail, t.hosts()[d as usize].rail),
            (Some(3), Some(5))
        );
        assert_eq!(p.pair_nics(&t, 0, 3, 5), None, "same server: NVLink");
        let p = MoePattern::consecutive(&t, 16, NicLayout::RailAligned).unwrap();
        let (s, d) = p.pair_nics(&t, 0, 3, 8 + 5).unwrap();
        assert_eq!(
            (
                t.hosts()[s as usize].name.as_str(),
                t.hosts()[d as usize].name.as_str()
            ),
            ("srv1-nic5", "srv2-nic5")
        );
        assert_eq!(
            t.hosts()[s as usize].leaf,
            t.hosts()[d as usize].leaf,
            "one rail leaf"
        );
    }
}
