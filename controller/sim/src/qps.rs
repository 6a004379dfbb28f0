//! The K QPs of a connection under the `qp-hash-K` policy, numbered as a
//! real NIC numbers them.
//!
//! NCCL opens K QPs per connection (`NCCL_IB_QPS_PER_CONNECTION`), one
//! after another, and splits every message evenly over them. A NIC hands
//! out QP numbers in increasing order, so the K destination QPs of a
//! connection are consecutive numbers at the receiving NIC, and no two QPs
//! of that NIC share a number. Here, per receiving NIC and in workload
//! order (connections, then background flows and background streams with
//! one QP each), a block
//! starts at the flow's own QP (the planner's allocator, or a random QP
//! with `--seed`) or just above the NIC's previous block, whichever is
//! higher; a block that would pass the 24-bit QP space starts again at
//! [`FIRST_QP`], as the planner's allocator does. Each QP's UDP source
//! port is the NIC convention [`udp_src_port_for_qp`], so the sub-flows
//! differ in QP and in source port.

use planner::conventions::{udp_src_port_for_qp, FIRST_QP, QP_MASK};
use planner::demand::Flow;
use planner::ecmp::HashKey;

use crate::routing::FlowKey;

use crate::workload::Workload;

/// Where each flow's block of QPs starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpBlocks {
    /// First QP of each connection's `k`, in [`Workload::connections`] order.
    pub connections: Vec<u32>,
    /// The one QP of each background flow.
    pub background: Vec<u32>,
    /// The one QP of each background stream.
    pub streams: Vec<u32>,
}

/// Numbers `k` QPs per connection and one per background flow or stream
/// (module docs).
pub fn qp_blocks(w: &Workload, k: u32) -> QpBlocks {
    assert!(k > 0, "a connection has at least one QP");
    // Per receiving NIC, the lowest QP not yet handed out.
    let mut next: Vec<u32> = Vec::new();
    let mut block = |f: &Flow, k: u32| {
        let d = f.dst as usize;
        if next.len() <= d {
            next.resize(d + 1, FIRST_QP);
        }
        let free = &mut next[d];
        let mut start = f.dest_qp.max(*free);
        if start + (k - 1) > QP_MASK {
            start = FIRST_QP;
        }
        *free = start + k;
        start
    };
    QpBlocks {
        connections: w.connections().map(|f| block(f, k)).collect(),
        background: w.background.iter().map(|f| block(f, 1)).collect(),
        streams: w.streams.iter().map(|f| block(f, 1)).collect(),
    }
}

/// The QP-aware key of `f` sent on QP `qp` (with that QP's source port):
/// [`HashKey::of_flow`] in QP-aware mode of `f` moved to that QP.
pub fn key_on_qp(f: &Flow, qp: u32) -> HashKey {
    HashKey::roce_qp(f.src_ip, f.dst_ip, udp_src_port_for_qp(qp), qp)
}

/// What a described switch hashes of a flow moved to `qp` (besides the
/// addresses): the port and QP of [`key_on_qp`].
pub fn flow_key_on_qp(qp: u32) -> FlowKey {
    FlowKey {
        udp_src_port: udp_src_port_for_qp(qp),
        dest_qp: qp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{build, WorkloadKind, WorkloadSpec};
    use planner::topology::generate::{preset, Preset};
    use planner::Topology;
    use std::collections::HashSet;

    fn workload(seed: u64) -> Workload {
        let t = Topology::from_spec(preset(Preset::LeafSpine, 256).unwrap()).unwrap();
        build(
            &t,
            &WorkloadSpec {
                kind: WorkloadKind::Ring,
                background: 40,
                background_load: 0.1,
                seed,
                ..Default::default()
            },
        )
        .unwrap()
    }

    /// With the planner's allocator (0x100 up, per receiving NIC, in
    /// connection order), the i-th connection into a NIC gets QPs
    /// 0x100 + K·i ... 0x100 + K·i + K − 1; background flows follow.
    #[test]
    fn allocator_qps_become_consecutive_blocks_of_k() {
        let w = workload(0);
        let b = qp_blocks(&w, 4);
        for (f, &start) in w.connections().zip(&b.connections) {
            assert_eq!(start, FIRST_QP + 4 * (f.dest_qp - FIRST_QP), "{f:?}");
        }
        assert_eq!(b.background.len(), 40);
        assert_eq!(b.streams.len(), w.streams.len());
        assert!(!b.streams.is_empty());
    }

    /// No two QPs of a receiving NIC share a number, with allocated or
    /// random QPs; random QPs keep their own number where it is free.
    #[test]
    fn no_receiving_nic_reuses_a_qp() {
        for seed in [0, 7] {
            let w = workload(seed);
            let b = qp_blocks(&w, 4);
            let mut seen = HashSet::new();
            for (f, &start) in w.connections().zip(&b.connections) {
                for q in start..start + 4 {
                    assert!(seen.insert((f.dst, q)), "seed {seed}: QP {q:#x} twice");
                }
            }
            let one_each = w.background.iter().chain(&w.streams);
            for (f, &q) in one_each.zip(b.background.iter().chain(&b.streams)) {
                assert!(seen.insert((f.dst, q)), "seed {seed}: background QP {q:#x}");
            }
            if seed != 0 {
                let own = w
                    .connections()
                    .zip(&b.connections)
                    .filter(|(f, &s)| f.dest_qp == s)
                    .count();
                assert!(own * 10 > w.connections().count() * 9, "{own}");
            }
        }
    }

    /// The key is what a QP-aware switch takes from the connection's
    /// packets on that QP, whose source port is the QP's own.
    #[test]
    fn each_qp_hashes_with_its_own_source_port() {
        let w = workload(0);
        let f = w.connections().next().unwrap();
        let on_qp = Flow {
            dest_qp: 0x1234,
            udp_src_port: udp_src_port_for_qp(0x1234),
            ..f.clone()
        };
        assert_ne!(on_qp.udp_src_port, f.udp_src_port);
        let want = HashKey::of_flow(&on_qp, planner::ecmp::HashMode::QpAware);
        assert_eq!(key_on_qp(f, 0x1234), want);
        assert_ne!(key_on_qp(f, 0x1234), key_on_qp(f, 0x1235));
    }
}
