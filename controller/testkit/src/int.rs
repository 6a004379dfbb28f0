//! INT telemetry reports as `p4src/v1model/int.p4` sends them to the collector.

/// One hop's metadata: (node id, ingress port, egress port, queue
/// occupancy, egress timestamp in µs, egress port tx bytes).
pub type Hop = (u32, u16, u16, u32, u64, u32);

/// A Telemetry Report v2.0 (the UDP payload) carrying an INT-MD stack:
/// instructions 0xF400 and Foresight's domain-specific 0x8000, so 7 words
/// per hop; `hops` sink first, as the sink's stack is read. The inner
/// packet is RoCEv2 from 10.0.1.1 to 10.0.2.1 with destination QP 0.
pub fn report(sink: u32, seq: u32, hops: &[Hop]) -> Vec<u8> {
    let mut b = Vec::new();
    // Telemetry report header: version 2, sequence number, node id.
    b.extend_from_slice(&((2u32 << 28) | seq).to_be_bytes());
    b.extend_from_slice(&sink.to_be_bytes());
    let inner_words = (20 + 8 + 4 + 12 + hops.len() * 28 + 12) / 4;
    b.extend_from_slice(&[0x14, inner_words as u8, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0]);
    // Inner IPv4 (no options), UDP to 4791.
    b.extend_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 1,
    ]);
    b.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 0, 0, 0]);
    // Shim: type 1, length 3 + 7 words per hop.
    b.extend_from_slice(&[0x10, (3 + 7 * hops.len()) as u8, 0, 0]);
    // INT-MD: version 2, hop_ml 7, remaining hop count 4; instructions,
    // domain id, domain-specific instructions, flags.
    b.extend_from_slice(&((2u32 << 28) | (7 << 8) | 4).to_be_bytes());
    b.extend_from_slice(&[0xf4, 0x00, 0x46, 0x53, 0x80, 0x00, 0, 0]);
    for &(node, ingress, egress, occupancy, egress_ts, tx_bytes) in hops {
        b.extend_from_slice(&node.to_be_bytes());
        b.extend_from_slice(&ingress.to_be_bytes());
        b.extend_from_slice(&egress.to_be_bytes());
        b.extend_from_slice(&5u32.to_be_bytes());
        b.extend_from_slice(&((3u32 << 24) | occupancy).to_be_bytes());
        b.extend_from_slice(&egress_ts.to_be_bytes());
        b.extend_from_slice(&tx_bytes.to_be_bytes());
    }
    // RoCEv2 base transport header.
    b.extend_from_slice(&[0u8; 12]);
    b
}

/// [`report`] of a packet to RoCE destination queue pair `qp` (24 bits).
pub fn report_to_qp(sink: u32, seq: u32, qp: u32, hops: &[Hop]) -> Vec<u8> {
    let mut b = report(sink, seq, hops);
    let n = b.len();
    // The BTH's destination QP: bytes 5..8 of its 12.
    b[n - 7..n - 4].copy_from_slice(&qp.to_be_bytes()[1..]);
    b
}

/// [`report`] of a packet from `src` to `dst` that carried `wire_bytes`
/// without its INT headers (the inner IPv4 total length says so).
pub fn report_between(
    src: std::net::Ipv4Addr,
    dst: std::net::Ipv4Addr,
    wire_bytes: u16,
    sink: u32,
    seq: u32,
    hops: &[Hop],
) -> Vec<u8> {
    let mut b = report(sink, seq, hops);
    let int_bytes = (3 + 7 * hops.len() as u16) * 4;
    // The inner IPv4 header starts after the 20-byte report headers.
    b[22..24].copy_from_slice(&(wire_bytes + int_bytes).to_be_bytes());
    b[32..36].copy_from_slice(&src.octets());
    b[36..40].copy_from_slice(&dst.octets());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_follow_the_hop_count() {
        for hops in 0..4usize {
            let stack: Vec<Hop> = (0..hops as u32).map(|i| (i, 1, 2, 0, 0, 0)).collect();
            let b = report(1, 7, &stack);
            // Report header 20, inner IPv4 20, UDP 8, shim 4, INT-MD 12, BTH 12.
            assert_eq!(b.len(), 20 + 20 + 8 + 4 + 12 + 28 * hops + 12);
            assert_eq!(usize::from(b[9]) * 4, b.len() - 20, "inner length");
            assert_eq!(usize::from(b[20 + 20 + 8 + 1]), 3 + 7 * hops, "shim length");
        }
    }

    #[test]
    fn the_queue_pair_lands_in_the_bth() {
        let b = report_to_qp(2, 1, 700, &[(1, 1, 3, 0, 0, 0)]);
        let bth = &b[b.len() - 12..];
        assert_eq!(&bth[4..8], &[0, 0, 0x02, 0xbc]);
    }
}
