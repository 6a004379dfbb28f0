//! Flows and the QPs that tell them apart: the unit every other part of
//! the planner works on. It sits below both [`crate::demand`] (demand files
//! and signals) and [`crate::collectives`] (collective expansion), which
//! each build flows, so neither has to import the other for them.

use std::net::Ipv4Addr;

use serde::Serialize;

use crate::conventions::{transfer_ns, udp_src_port_for_qp, FIRST_QP, QP_MASK};
use crate::ledger::Window;
use crate::topology::{HostIdx, Topology};

/// One RoCEv2 flow: a QP connection moving `bytes` at `rate_bps` from
/// `start_ns` for `duration_ns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Flow {
    /// Source NIC.
    pub src: HostIdx,
    /// Destination NIC.
    pub dst: HostIdx,
    /// Source IPv4.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4.
    pub dst_ip: Ipv4Addr,
    /// UDP source port (the destination port is RoCEv2's 4791).
    pub udp_src_port: u16,
    /// BTH destination QP (24 bits): tells the data plane flows apart.
    pub dest_qp: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// Bytes to move.
    pub bytes: u64,
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// Duration at `rate_bps`, ns.
    pub duration_ns: u64,
}

impl Flow {
    /// A flow whose duration follows from bytes and rate.
    pub fn new(
        topo: &Topology,
        src: HostIdx,
        dst: HostIdx,
        qp: u32,
        start_ns: u64,
        bytes: u64,
        rate_bps: u64,
    ) -> Flow {
        Self::with_duration(
            topo,
            src,
            dst,
            qp,
            start_ns,
            bytes,
            rate_bps,
            transfer_ns(bytes, rate_bps).max(1),
        )
    }

    /// A flow with an explicit duration (e.g. several back-to-back steps).
    #[allow(clippy::too_many_arguments)]
    pub fn with_duration(
        topo: &Topology,
        src: HostIdx,
        dst: HostIdx,
        qp: u32,
        start_ns: u64,
        bytes: u64,
        rate_bps: u64,
        duration_ns: u64,
    ) -> Flow {
        let hosts = topo.hosts();
        Flow {
            src,
            dst,
            src_ip: hosts[src as usize].ip,
            dst_ip: hosts[dst as usize].ip,
            udp_src_port: udp_src_port_for_qp(qp),
            dest_qp: qp & QP_MASK,
            start_ns,
            bytes,
            rate_bps,
            duration_ns: duration_ns.max(1),
        }
    }

    /// First ns after the flow.
    pub fn end_ns(&self) -> u64 {
        self.start_ns + self.duration_ns
    }

    /// `[start, end)`.
    pub fn window(&self) -> Window {
        Window::new(self.start_ns, self.end_ns())
    }
}

/// Hands out destination QP numbers: per destination NIC, sequentially
/// from [`FIRST_QP`], so every flow into a NIC has its own QP.
#[derive(Clone, Debug)]
pub struct QpAllocator {
    next: Vec<u32>,
}

impl QpAllocator {
    /// For a topology.
    pub fn new(topo: &Topology) -> QpAllocator {
        QpAllocator {
            next: vec![FIRST_QP; topo.hosts().len()],
        }
    }

    /// The next QP at `dst`.
    pub fn alloc(&mut self, dst: HostIdx) -> u32 {
        let q = self.next[dst as usize];
        self.next[dst as usize] = if q >= QP_MASK { FIRST_QP } else { q + 1 };
        q
    }
}
