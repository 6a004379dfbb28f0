//! Fabrics the simulator generates: the planner's presets, and beyond them
//! the `clos3` shape with oversubscribed leaves.

use anyhow::bail;
use planner::topology::generate::{multi_pod, preset, MultiPod, Preset};
use planner::topology::Topology;

/// The ~100k-GPU size: 12,800 servers; on `clos3` 3,200 leaves in 200
/// pods of 16, on `rail-optimized` 25 pods of 16 scalable units.
pub const GPUS_100K: u32 = 102_400;

/// The `shape` preset for `gpus` GPUs, `oversubscription`:1 at the leaves
/// (only `clos3` is generated oversubscribed).
pub fn generated(shape: Preset, gpus: u32, oversubscription: u32) -> anyhow::Result<Topology> {
    if matches!(shape, Preset::Clos3) {
        return clos3(gpus, oversubscription);
    }
    if oversubscription != 1 {
        bail!("--oversubscription {oversubscription}: only the clos3 fabric is generated oversubscribed");
    }
    let spec = preset(shape, gpus).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Topology::from_spec(spec)?)
}

/// The `clos3` preset for `gpus` GPUs (8 per server, 400G NICs, 32 NICs
/// per leaf, pods of 16 leaves), with `oversubscription`:1 at the leaves:
/// each pod has `32 / oversubscription` spines, so a leaf's uplinks carry
/// that fraction of its hosts' capacity; the spine tier stays 1:1.
pub fn clos3(gpus: u32, oversubscription: u32) -> anyhow::Result<Topology> {
    if oversubscription <= 1 {
        let spec = preset(Preset::Clos3, gpus).map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(Topology::from_spec(spec)?);
    }
    const NIC_GBPS: f64 = 400.0;
    if gpus == 0 || gpus % 32 != 0 {
        bail!("--gpus {gpus}: clos3 needs a positive multiple of 32 GPUs");
    }
    let hosts_per_leaf = 32u32;
    if hosts_per_leaf % oversubscription != 0 {
        bail!(
            "--oversubscription {oversubscription}: must divide the {hosts_per_leaf} NICs of a leaf"
        );
    }
    let leaves = gpus / hosts_per_leaf;
    // As the preset: pods of 16 leaves from 32 leaves on, else two pods.
    let leaves_per_pod = if leaves >= 32 {
        16
    } else {
        leaves.div_ceil(2).max(1)
    };
    if leaves % leaves_per_pod != 0 {
        bail!("--gpus {gpus}: clos3 needs whole pods of {leaves_per_pod} leaves");
    }
    let spec = multi_pod(&MultiPod {
        name: format!("clos3-{gpus}gpu-{oversubscription}to1"),
        pods: leaves / leaves_per_pod,
        leaves_per_pod,
        spines_per_pod: hosts_per_leaf / oversubscription,
        superspines_per_plane: leaves_per_pod,
        hosts_per_leaf,
        host_gbps: NIC_GBPS,
        leaf_uplink_gbps: NIC_GBPS,
        spine_uplink_gbps: NIC_GBPS,
        gpus_per_host: 1,
        nics_per_server: 8,
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Topology::from_spec(spec)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_to_one_halves_the_leaf_uplinks_and_keeps_the_hosts() {
        let full = clos3(1024, 1).unwrap();
        let half = clos3(1024, 2).unwrap();
        assert_eq!(full.hosts().len(), half.hosts().len());
        for (leaf, ratio) in half.leaf_oversubscription() {
            assert_eq!(ratio, Some(2.0), "leaf {leaf}");
        }
        for (leaf, ratio) in full.leaf_oversubscription() {
            assert_eq!(ratio, Some(1.0), "leaf {leaf}");
        }
        assert!(clos3(1024, 3)
            .unwrap_err()
            .to_string()
            .contains("must divide"));
    }

    /// The ~100k preset: whole pods at 1:1 and 2:1, every server's 8 NICs
    /// on one leaf, and EP 256 groups of whole servers inside one pod.
    #[test]
    fn the_100k_fabric_is_whole_pods_and_ep256_groups_are_whole_servers() {
        use planner::topology::Role;
        for over in [1, 2] {
            let t = clos3(GPUS_100K, over).unwrap();
            assert_eq!(t.gpu_count(), GPUS_100K as u64);
            assert_eq!(t.leaves().len(), 3200);
            let spines = t
                .switches()
                .iter()
                .filter(|s| s.role == Role::Spine)
                .count();
            assert_eq!(spines, 200 * 32 / over as usize, "{over}:1");
            let servers: Vec<u32> = (0..t.servers().len() as u32).collect();
            let groups = crate::workload::ep_groups_of(&t, &servers, 256).unwrap();
            assert_eq!(groups.len(), 400);
            for g in &groups {
                assert_eq!(g.len(), 32);
                let gpus: u32 = g.iter().map(|&s| t.servers()[s as usize].gpus).sum();
                assert_eq!(gpus, 256);
                let pod = |s: u32| {
                    let h = t.servers()[s as usize].nics[0];
                    t.switches()[t.hosts()[h as usize].leaf as usize].pod
                };
                assert!(g.iter().all(|&s| pod(s) == pod(g[0])), "group in one pod");
            }
            let err = crate::workload::ep_groups_of(&t, &servers, 260).unwrap_err();
            assert!(err.to_string().contains("--ep-gpus 260"), "{err}");
        }
    }
}
