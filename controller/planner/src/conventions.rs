//! Conventions shared with the data plane, the lab and the other controller
//! components. Changing one of these is a cross-team change: the P4 program,
//! the Mininet lab and the installer rely on the same numbers.

/// SR-MPLS adjacency label for "leave this switch through port P" is
/// `ADJ_LABEL_BASE + P`. Labels are local to each switch; the data plane maps
/// label → egress port.
pub const ADJ_LABEL_BASE: u32 = 1000;

/// Most labels the ingress leaf pushes. The stack covers the hops starting at
/// the ingress leaf itself (which pops its own top label at once); any hops
/// beyond this depth must be deterministic downward hops that IPv4 LPM
/// routing handles (always true in a Clos: the last hop leaf → host).
pub const MAX_SR_DEPTH: usize = 4;

/// UDP destination port of RoCEv2. Packets to this port are hashed with the
/// BTH destination QP (QP-aware ECMP).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// IP protocol number of UDP (a field of the 5-tuple hash).
pub const IP_PROTO_UDP: u8 = 17;

/// GPUs behind a host entry when the topology does not say.
pub const DEFAULT_GPUS_PER_HOST: u32 = 8;

/// Prefix length of the subnet each leaf owns (hosts `10.<pod>.<leaf>.<n>`).
pub const LEAF_PREFIX_LEN: u8 = 24;

/// Switch ports are numbered from 1 on every switch.
pub const FIRST_PORT: u16 = 1;

/// All times (flow start, duration, deadline) are integer **nanoseconds**
/// since the plan's epoch (time 0 = when the plan is computed, or the start
/// of the collective). Durations are rounded up to whole nanoseconds.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// Link capacities are written in Gbit/s in files; internally rates are
/// integer bit/s so the ledger adds and removes exactly.
pub const BPS_PER_GBPS: f64 = 1e9;

/// Destination QPs are 24-bit (InfiniBand BTH field).
pub const QP_MASK: u32 = 0x00ff_ffff;

/// First destination QP number the collective generators hand out (QPs 0
/// and 1 are special in InfiniBand).
pub const FIRST_QP: u32 = 0x000100;

/// RoCEv2 NICs pick the UDP source port per QP from this range
/// (`49152 + qp % 16384`, the usual ephemeral range), so the 5-tuple varies
/// between QPs of the same host pair.
pub const UDP_SRC_PORT_BASE: u16 = 49152;

/// The UDP source port a RoCEv2 NIC uses for a QP (see [`UDP_SRC_PORT_BASE`]).
pub fn udp_src_port_for_qp(qp: u32) -> u16 {
    UDP_SRC_PORT_BASE + (qp % 16384) as u16
}

/// Converts Gbit/s (as written in files) to integer bit/s.
pub fn gbps_to_bps(gbps: f64) -> u64 {
    (gbps * BPS_PER_GBPS).round() as u64
}

/// Converts integer bit/s to Gbit/s for display.
pub fn bps_to_gbps(bps: u64) -> f64 {
    bps as f64 / BPS_PER_GBPS
}

/// Time to send `bytes` at `rate_bps`, in nanoseconds, rounded up.
pub fn transfer_ns(bytes: u64, rate_bps: u64) -> u64 {
    assert!(rate_bps > 0, "transfer_ns: zero rate");
    let bits = bytes as u128 * 8 * NS_PER_SEC as u128;
    bits.div_ceil(rate_bps as u128).min(u64::MAX as u128) as u64
}

/// Rate (bit/s, rounded up) that moves `bytes` in `duration_ns`.
pub fn rate_for(bytes: u64, duration_ns: u64) -> u64 {
    assert!(duration_ns > 0, "rate_for: zero duration");
    let bits = bytes as u128 * 8 * NS_PER_SEC as u128;
    bits.div_ceil(duration_ns as u128).min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_time_rounds_up() {
        // 1 GB at 100 Gbit/s = 80 ms.
        assert_eq!(transfer_ns(1_000_000_000, 100_000_000_000), 80_000_000);
        // 1 byte at 3 bit/s = 8/3 s, rounded up.
        assert_eq!(transfer_ns(1, 3), 2_666_666_667);
        assert_eq!(rate_for(1_000_000_000, 80_000_000), 100_000_000_000);
    }

    #[test]
    fn udp_port_in_ephemeral_range() {
        for qp in [0, 1, 16383, 16384, QP_MASK] {
            let p = udp_src_port_for_qp(qp);
            assert!(p >= UDP_SRC_PORT_BASE);
        }
        assert_ne!(udp_src_port_for_qp(0x100), udp_src_port_for_qp(0x101));
    }
}
