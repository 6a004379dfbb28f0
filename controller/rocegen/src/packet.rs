//! RoCEv2 wire format: IPv4 + UDP(4791) + BTH [+ AETH | CNP pad] + payload + ICRC.
//!
//! Decoding works on the UDP payload (what a UDP socket hands us) and returns
//! errors for anything malformed: a lab generator must never panic on a
//! stray packet.

use std::fmt;
use std::net::Ipv4Addr;

/// IANA UDP port of RoCEv2.
pub const ROCE_PORT: u16 = 4791;
pub const BTH_LEN: usize = 12;
pub const AETH_LEN: usize = 4;
pub const ICRC_LEN: usize = 4;
/// CNP carries 16 reserved bytes after the BTH (RoCEv2 annex A17.9.3).
pub const CNP_PAD_LEN: usize = 16;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
pub const PKEY_DEFAULT: u16 = 0xFFFF;
/// 24-bit fields (QPN, PSN, MSN).
pub const MASK24: u32 = 0x00FF_FFFF;

/// ECN codepoints in the low two bits of the IPv4 TOS byte.
pub const ECN_ECT0: u8 = 0b10;
pub const ECN_CE: u8 = 0b11;
/// DSCP of CNPs (the usual RoCE deployment value).
pub const CNP_DSCP: u8 = 48;

/// The RC opcodes this generator uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    SendFirst,
    SendMiddle,
    SendLast,
    SendOnly,
    Acknowledge,
    Cnp,
}

impl Opcode {
    pub fn code(self) -> u8 {
        match self {
            Opcode::SendFirst => 0x00,
            Opcode::SendMiddle => 0x01,
            Opcode::SendLast => 0x02,
            Opcode::SendOnly => 0x04,
            Opcode::Acknowledge => 0x11,
            Opcode::Cnp => 0x81,
        }
    }

    pub fn from_code(c: u8) -> Option<Opcode> {
        Some(match c {
            0x00 => Opcode::SendFirst,
            0x01 => Opcode::SendMiddle,
            0x02 => Opcode::SendLast,
            0x04 => Opcode::SendOnly,
            0x11 => Opcode::Acknowledge,
            0x81 => Opcode::Cnp,
            _ => return None,
        })
    }

    pub fn is_send(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst | Opcode::SendMiddle | Opcode::SendLast | Opcode::SendOnly
        )
    }

    /// Opcode of packet `index` (0-based) of a message of `count` packets.
    pub fn for_send(index: u64, count: u64) -> Opcode {
        match (index == 0, index + 1 == count) {
            (true, true) => Opcode::SendOnly,
            (true, false) => Opcode::SendFirst,
            (false, true) => Opcode::SendLast,
            (false, false) => Opcode::SendMiddle,
        }
    }
}

/// Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bth {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    pub pad: u8,
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub psn: u32,
}

impl Bth {
    pub fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Bth {
        Bth {
            opcode,
            solicited: false,
            mig_req: false,
            pad: 0,
            tver: 0,
            pkey: PKEY_DEFAULT,
            fecn: false,
            becn: false,
            dest_qp: dest_qp & MASK24,
            ack_req: false,
            psn: psn & MASK24,
        }
    }

    pub fn encode(&self, out: &mut [u8; BTH_LEN]) {
        out[0] = self.opcode.code();
        out[1] = (u8::from(self.solicited) << 7)
            | (u8::from(self.mig_req) << 6)
            | ((self.pad & 3) << 4)
            | (self.tver & 0xF);
        out[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        out[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        out[5..8].copy_from_slice(&(self.dest_qp & MASK24).to_be_bytes()[1..]);
        let w = (u32::from(self.ack_req) << 31) | (self.psn & MASK24);
        out[8..12].copy_from_slice(&w.to_be_bytes());
    }

    pub fn decode(b: &[u8]) -> Result<Bth, PacketError> {
        if b.len() < BTH_LEN {
            return Err(PacketError::Truncated {
                what: "BTH",
                need: BTH_LEN,
                got: b.len(),
            });
        }
        let opcode = Opcode::from_code(b[0]).ok_or(PacketError::UnknownOpcode(b[0]))?;
        let tver = b[1] & 0xF;
        if tver != 0 {
            return Err(PacketError::BadTransportVersion(tver));
        }
        Ok(Bth {
            opcode,
            solicited: b[1] & 0x80 != 0,
            mig_req: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 3,
            tver,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_req: b[8] & 0x80 != 0,
            psn: u32::from_be_bytes([0, b[9], b[10], b[11]]),
        })
    }
}

/// ACK Extended Transport Header: syndrome + MSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: u32,
}

/// Syndrome of a positive ACK with "invalid credit count" (0b000_11111): we
/// do not do end-to-end credits.
pub const SYNDROME_ACK: u8 = 0x1F;
/// Syndrome of a NAK, PSN sequence error (0b011_00000).
pub const SYNDROME_NAK_PSN_SEQ: u8 = 0x60;

impl Aeth {
    pub fn is_nak(&self) -> bool {
        self.syndrome >> 5 == 0b011
    }
}

/// Kind byte opening rocegen's SACK extension (ASCII 'S').
pub const SACK_KIND: u8 = 0x53;
/// Most bitmap words a SACK extension carries: 256 PSNs beyond the
/// expected one, the out-of-order receiver's placement window.
pub const SACK_MAX_WORDS: usize = 8;
/// PSNs a SACK bitmap can cover.
pub const SACK_WINDOW: u64 = 32 * SACK_MAX_WORDS as u64;

/// Selective acknowledgement carried after the AETH of an Acknowledge from
/// rocegen's out-of-order receiver (not an InfiniBand header: only
/// rocegen's own sender reads it). Wire format: kind byte [`SACK_KIND`],
/// word count N (1..=8), two zero bytes, then N big-endian 32-bit words.
/// Bit i (word i/32, most significant bit first) set means PSN
/// `expected + 1 + i` has been placed, where `expected = BTH PSN + 1` is the
/// first PSN not yet received (the BTH PSN being the last in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBitmap {
    words: [u32; SACK_MAX_WORDS],
    len: usize,
}

impl SackBitmap {
    /// Marks offset `i` (PSN expected + 1 + i); false if beyond the bitmap.
    pub fn set(&mut self, i: u64) -> bool {
        if i >= SACK_WINDOW {
            return false;
        }
        let w = (i / 32) as usize;
        self.words[w] |= 1 << (31 - i % 32);
        self.len = self.len.max(w + 1);
        true
    }

    pub fn contains(&self, i: u64) -> bool {
        i < 32 * self.len as u64 && self.words[(i / 32) as usize] & (1 << (31 - i % 32)) != 0
    }

    /// Offsets covered by the words carried (a multiple of 32).
    pub fn span(&self) -> u64 {
        32 * self.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.words[..self.len].iter().all(|&w| w == 0)
    }

    /// Bytes on the wire: header + words.
    pub fn encoded_len(&self) -> usize {
        4 + 4 * self.len
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[SACK_KIND, self.len as u8, 0, 0]);
        for w in &self.words[..self.len] {
            out.extend_from_slice(&w.to_be_bytes());
        }
    }

    pub fn decode(b: &[u8]) -> Result<SackBitmap, PacketError> {
        if b.len() < 4 {
            return Err(PacketError::Truncated {
                what: "SACK extension header",
                need: 4,
                got: b.len(),
            });
        }
        let n = usize::from(b[1]);
        if b[0] != SACK_KIND || !(1..=SACK_MAX_WORDS).contains(&n) || b[2..4] != [0, 0] {
            return Err(PacketError::BadSack(
                "kind 0x53, 1..=8 words and two zero bytes expected",
            ));
        }
        if b.len() != 4 + 4 * n {
            return Err(PacketError::BadSack(
                "length after the AETH disagrees with the word count",
            ));
        }
        let mut s = SackBitmap {
            len: n,
            ..SackBitmap::default()
        };
        for (w, c) in s.words.iter_mut().zip(b[4..].chunks_exact(4)) {
            *w = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        Ok(s)
    }
}

/// One decoded RoCEv2 packet (the UDP payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roce<'a> {
    Data {
        bth: Bth,
        payload: &'a [u8],
    },
    /// `sack`: the SACK extension of an out-of-order receiver's ACK.
    Ack {
        bth: Bth,
        aeth: Aeth,
        sack: Option<SackBitmap>,
    },
    Cnp {
        bth: Bth,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketError {
    Truncated {
        what: &'static str,
        need: usize,
        got: usize,
    },
    UnknownOpcode(u8),
    BadTransportVersion(u8),
    BadPad {
        pad: u8,
        payload: usize,
    },
    /// IPv4 header with options, or not IPv4/UDP: not what RoCEv2 sends.
    NotRoceIpv4(&'static str),
    /// Bytes after an AETH that are no valid SACK extension.
    BadSack(&'static str),
    /// The ICRC the packet carries is not the one computed over it.
    BadIcrc {
        carried: u32,
        computed: u32,
    },
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::Truncated { what, need, got } => {
                write!(f, "truncated {what}: need {need} bytes, got {got}")
            }
            PacketError::UnknownOpcode(c) => {
                write!(f, "unsupported BTH opcode 0x{c:02x}")
            }
            PacketError::BadTransportVersion(v) => write!(f, "BTH transport version {v} != 0"),
            PacketError::BadSack(why) => write!(f, "bad SACK extension: {why}"),
            PacketError::NotRoceIpv4(why) => write!(f, "not a RoCEv2 IPv4 packet: {why}"),
            PacketError::BadIcrc { carried, computed } => {
                write!(f, "ICRC 0x{carried:08x}, computed 0x{computed:08x}")
            }
            PacketError::BadPad { pad, payload } => {
                write!(f, "BTH pad count {pad} exceeds payload of {payload} bytes")
            }
        }
    }
}

impl std::error::Error for PacketError {}

/// What a received IPv4 packet carries for RoCEv2, once its ICRC checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received<'a> {
    pub src: Ipv4Addr,
    /// TOS byte (DSCP and ECN).
    pub tos: u8,
    pub udp_payload: &'a [u8],
}

/// Checks a whole IPv4 packet as a RoCEv2 NIC does before it looks inside:
/// a 20-byte IPv4 header, UDP, lengths that agree with what arrived, and
/// the ICRC (which covers the IP header, so this needs the packet from its
/// first byte). A packet that fails is dropped by the caller, and counted.
pub fn check_ipv4(pkt: &[u8]) -> Result<Received<'_>, PacketError> {
    if pkt.len() < IPV4_LEN + UDP_LEN + BTH_LEN + ICRC_LEN {
        return Err(PacketError::Truncated {
            what: "IPv4+UDP+BTH+ICRC",
            need: IPV4_LEN + UDP_LEN + BTH_LEN + ICRC_LEN,
            got: pkt.len(),
        });
    }
    if pkt[0] != 0x45 {
        return Err(PacketError::NotRoceIpv4(
            "IPv4 header with options or not version 4",
        ));
    }
    if pkt[9] != 17 {
        return Err(PacketError::NotRoceIpv4("IP protocol is not UDP"));
    }
    let total = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
    let udp_len = usize::from(u16::from_be_bytes([pkt[IPV4_LEN + 4], pkt[IPV4_LEN + 5]]));
    if total != pkt.len() || udp_len != total - IPV4_LEN {
        return Err(PacketError::NotRoceIpv4(
            "IP or UDP length disagrees with the packet",
        ));
    }
    let (covered, tail) = pkt.split_at(pkt.len() - ICRC_LEN);
    let carried = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    let computed = icrc(covered);
    if carried != computed {
        return Err(PacketError::BadIcrc { carried, computed });
    }
    Ok(Received {
        src: Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]),
        tos: pkt[1],
        udp_payload: &pkt[IPV4_LEN + UDP_LEN..],
    })
}

/// Decodes a UDP payload (its ICRC is checked by [`check_ipv4`]).
pub fn decode(udp_payload: &[u8]) -> Result<Roce<'_>, PacketError> {
    let bth = Bth::decode(udp_payload)?;
    let rest = &udp_payload[BTH_LEN..];
    match bth.opcode {
        Opcode::Acknowledge => {
            let need = AETH_LEN + ICRC_LEN;
            if rest.len() < need {
                return Err(PacketError::Truncated {
                    what: "Acknowledge (AETH+ICRC)",
                    need: BTH_LEN + need,
                    got: udp_payload.len(),
                });
            }
            let aeth = Aeth {
                syndrome: rest[0],
                msn: u32::from_be_bytes([0, rest[1], rest[2], rest[3]]),
            };
            let ext = &rest[AETH_LEN..rest.len() - ICRC_LEN];
            let sack = if ext.is_empty() {
                None
            } else {
                Some(SackBitmap::decode(ext)?)
            };
            Ok(Roce::Ack { bth, aeth, sack })
        }
        Opcode::Cnp => {
            let need = CNP_PAD_LEN + ICRC_LEN;
            if rest.len() < need {
                return Err(PacketError::Truncated {
                    what: "CNP (reserved+ICRC)",
                    need: BTH_LEN + need,
                    got: udp_payload.len(),
                });
            }
            Ok(Roce::Cnp { bth })
        }
        _ => {
            if rest.len() < ICRC_LEN {
                return Err(PacketError::Truncated {
                    what: "SEND (ICRC)",
                    need: BTH_LEN + ICRC_LEN,
                    got: udp_payload.len(),
                });
            }
            let body = &rest[..rest.len() - ICRC_LEN];
            let pad = usize::from(bth.pad);
            if pad > body.len() {
                return Err(PacketError::BadPad {
                    pad: bth.pad,
                    payload: body.len(),
                });
            }
            Ok(Roce::Data {
                bth,
                payload: &body[..body.len() - pad],
            })
        }
    }
}

/// Addressing and marking of one outgoing packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Udp {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// Full TOS byte (DSCP << 2 | ECN).
    pub tos: u8,
    /// Never 0: with IP_HDRINCL the kernel would rewrite a zero ID, which is
    /// covered by the ICRC.
    pub ident: u16,
    pub udp_src: u16,
}

/// Builds a full IPv4 packet: header + UDP (checksum 0, allowed by RoCEv2)
/// + BTH + `ext` (AETH or CNP pad) + payload + pad + ICRC.
pub fn build(ip: &Ipv4Udp, bth: &Bth, ext: &[u8], payload: &[u8], out: &mut Vec<u8>) {
    let pad = (4 - payload.len() % 4) % 4;
    let mut bth = *bth;
    bth.pad = pad as u8;
    let roce_len = BTH_LEN + ext.len() + payload.len() + pad + ICRC_LEN;
    let udp_len = UDP_LEN + roce_len;
    let total = IPV4_LEN + udp_len;
    out.clear();
    out.reserve(total);
    out.extend_from_slice(&[0x45, ip.tos]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(&ip.ident.to_be_bytes());
    out.extend_from_slice(&[0x40, 0x00, 64, 17, 0, 0]); // DF, TTL 64, UDP, csum
    out.extend_from_slice(&ip.src.octets());
    out.extend_from_slice(&ip.dst.octets());
    let csum = ipv4_checksum(&out[..IPV4_LEN]);
    out[10..12].copy_from_slice(&csum.to_be_bytes());
    out.extend_from_slice(&ip.udp_src.to_be_bytes());
    out.extend_from_slice(&ROCE_PORT.to_be_bytes());
    out.extend_from_slice(&(udp_len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let mut b = [0u8; BTH_LEN];
    bth.encode(&mut b);
    out.extend_from_slice(&b);
    out.extend_from_slice(ext);
    out.extend_from_slice(payload);
    out.extend(std::iter::repeat_n(0u8, pad));
    let icrc = icrc(out);
    out.extend_from_slice(&icrc.to_le_bytes());
}

/// RFC 791 header checksum.
pub fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in h.chunks(2) {
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Invariant CRC of a RoCEv2-over-IPv4 packet without its ICRC (`pkt` starts
/// at the IPv4 header). Per the RoCEv2 annex: CRC-32 over 8 bytes of 0xFF
/// (stand-in for the LRH), then IP/UDP/BTH with the variant fields (TOS,
/// TTL, IP checksum, UDP checksum, BTH byte 4) set to all ones, then the
/// rest. Sent least-significant byte first, like the Ethernet FCS.
pub fn icrc(pkt: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xFF; 8]);
    let hdr_len = (IPV4_LEN + UDP_LEN + BTH_LEN).min(pkt.len());
    let mut hdr = [0u8; IPV4_LEN + UDP_LEN + BTH_LEN];
    hdr[..hdr_len].copy_from_slice(&pkt[..hdr_len]);
    hdr[1] = 0xFF; // TOS (DSCP+ECN)
    hdr[8] = 0xFF; // TTL
    hdr[10] = 0xFF; // IP header checksum
    hdr[11] = 0xFF;
    hdr[IPV4_LEN + 6] = 0xFF; // UDP checksum
    hdr[IPV4_LEN + 7] = 0xFF;
    hdr[IPV4_LEN + UDP_LEN + 4] = 0xFF; // BTH FECN/BECN/resv6a
    h.update(&hdr[..hdr_len]);
    if pkt.len() > hdr_len {
        h.update(&pkt[hdr_len..]);
    }
    h.finalize()
}

/// Extends a 24-bit PSN to the 64-bit sequence nearest to `reference`.
pub fn unwrap_psn(psn: u32, reference: u64) -> u64 {
    let d = psn.wrapping_sub(reference as u32) & MASK24;
    if d < (1 << 23) {
        reference + u64::from(d)
    } else {
        reference.saturating_sub(u64::from((1u32 << 24) - d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip() -> Ipv4Udp {
        Ipv4Udp {
            src: Ipv4Addr::new(10, 0, 1, 1),
            dst: Ipv4Addr::new(10, 0, 1, 2),
            tos: (24 << 2) | ECN_ECT0,
            ident: 1,
            udp_src: 49408,
        }
    }

    #[test]
    fn bth_round_trip_all_fields() {
        let mut b = Bth::new(Opcode::SendMiddle, 0xABCDEF, 0x123456);
        b.solicited = true;
        b.pad = 3;
        b.becn = true;
        b.ack_req = true;
        b.pkey = 0x8001;
        let mut raw = [0u8; BTH_LEN];
        b.encode(&mut raw);
        assert_eq!(
            raw,
            [0x01, 0xB0, 0x80, 0x01, 0x40, 0xAB, 0xCD, 0xEF, 0x80, 0x12, 0x34, 0x56]
        );
        assert_eq!(Bth::decode(&raw).unwrap(), b);
    }

    #[test]
    fn data_packet_round_trip_with_padding() {
        let payload: Vec<u8> = (0..1021u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        let bth = Bth::new(Opcode::SendLast, 256, 7);
        build(&ip(), &bth, &[], &payload, &mut out);
        assert_eq!(out.len(), 20 + 8 + 12 + 1024 + 4);
        assert_eq!(ipv4_checksum(&out[..20]), 0, "header checksum verifies");
        assert_eq!(u16::from_be_bytes([out[22], out[23]]), ROCE_PORT);
        match decode(&out[28..]).unwrap() {
            Roce::Data {
                bth: got,
                payload: p,
            } => {
                assert_eq!(got.opcode, Opcode::SendLast);
                assert_eq!(got.pad, 3);
                assert_eq!(got.dest_qp, 256);
                assert_eq!(got.psn, 7);
                assert_eq!(p, &payload[..]);
            }
            other => panic!("wrong kind {other:?}"),
        }
    }

    #[test]
    fn ack_and_cnp_round_trip() {
        let mut out = Vec::new();
        let aeth = [SYNDROME_NAK_PSN_SEQ, 0, 0, 9];
        build(
            &ip(),
            &Bth::new(Opcode::Acknowledge, 4097, 41),
            &aeth,
            &[],
            &mut out,
        );
        assert_eq!(out.len(), 20 + 8 + 12 + 4 + 4);
        match decode(&out[28..]).unwrap() {
            Roce::Ack { bth, aeth, sack } => {
                assert_eq!((bth.dest_qp, bth.psn), (4097, 41));
                assert!(aeth.is_nak());
                assert_eq!(aeth.msn, 9);
                assert_eq!(sack, None);
            }
            other => panic!("wrong kind {other:?}"),
        }
        build(
            &ip(),
            &Bth::new(Opcode::Cnp, 4097, 0),
            &[0; CNP_PAD_LEN],
            &[],
            &mut out,
        );
        assert_eq!(out.len(), 20 + 8 + 12 + 16 + 4);
        assert!(matches!(decode(&out[28..]).unwrap(), Roce::Cnp { bth } if bth.dest_qp == 4097));
    }

    #[test]
    fn malformed_input_gives_errors() {
        assert_eq!(
            decode(&[0u8; 5]),
            Err(PacketError::Truncated {
                what: "BTH",
                need: 12,
                got: 5
            })
        );
        let mut raw = [0u8; 40];
        Bth::new(Opcode::SendOnly, 1, 1).encode((&mut raw[..12]).try_into().unwrap());
        raw[0] = 0x06; // SEND Only with Immediate: not supported
        let e = decode(&raw).unwrap_err();
        assert_eq!(e.to_string(), "unsupported BTH opcode 0x06");
        raw[0] = 0x11;
        assert!(matches!(
            decode(&raw[..14]),
            Err(PacketError::Truncated { what, .. }) if what.starts_with("Acknowledge")
        ));
        raw[0] = 0x81;
        assert!(decode(&raw[..20]).is_err());
        raw[0] = 0x04;
        assert!(decode(&raw[..13]).is_err());
        raw[1] = 0x30; // pad 3 but only 1 payload byte before ICRC
        assert_eq!(
            decode(&raw[..17]),
            Err(PacketError::BadPad { pad: 3, payload: 1 })
        );
        raw[1] = 0x01;
        assert_eq!(decode(&raw), Err(PacketError::BadTransportVersion(1)));
        // Every prefix of a valid packet decodes or errors, never panics.
        let mut out = Vec::new();
        build(
            &ip(),
            &Bth::new(Opcode::SendFirst, 2, 3),
            &[],
            &[1; 64],
            &mut out,
        );
        for n in 0..out.len() - 28 {
            let _ = decode(&out[28..28 + n]);
        }
    }

    #[test]
    fn icrc_ignores_variant_fields_only() {
        let mut a = Vec::new();
        build(
            &ip(),
            &Bth::new(Opcode::SendOnly, 256, 0),
            &[],
            &[7; 32],
            &mut a,
        );
        let mut marked = ip();
        marked.tos = (24 << 2) | ECN_CE;
        let mut b = Vec::new();
        build(
            &marked,
            &Bth::new(Opcode::SendOnly, 256, 0),
            &[],
            &[7; 32],
            &mut b,
        );
        assert_ne!(a[1], b[1]);
        assert_eq!(a[a.len() - 4..], b[b.len() - 4..], "CE marking keeps ICRC");
        let mut c = Vec::new();
        build(
            &ip(),
            &Bth::new(Opcode::SendOnly, 256, 1),
            &[],
            &[7; 32],
            &mut c,
        );
        assert_ne!(a[a.len() - 4..], c[c.len() - 4..], "PSN is covered");
    }

    #[test]
    fn check_ipv4_passes_what_a_switch_may_change_and_nothing_else() {
        let mut sent = Vec::new();
        build(
            &ip(),
            &Bth::new(Opcode::SendOnly, 256, 5),
            &[],
            &[7; 32],
            &mut sent,
        );
        let r = check_ipv4(&sent).unwrap();
        assert_eq!((r.src, r.tos), (ip().src, ip().tos));
        assert!(matches!(decode(r.udp_payload), Ok(Roce::Data { .. })));

        // A hop's changes: TTL down, CE marked, checksum redone.
        let mut hop = sent.clone();
        hop[8] -= 1;
        hop[1] |= ECN_CE;
        hop[10..12].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(&hop[..IPV4_LEN]);
        hop[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(check_ipv4(&hop).unwrap().tos & 3, ECN_CE);

        // Any covered byte changed (payload, PSN, IP identification): dropped.
        for at in [sent.len() - 5, IPV4_LEN + UDP_LEN + 11, 5] {
            let mut bad = sent.clone();
            bad[at] ^= 0x01;
            assert!(
                matches!(check_ipv4(&bad), Err(PacketError::BadIcrc { .. })),
                "byte {at} flipped"
            );
        }
        // Lengths that disagree, options, other protocols, too short.
        let mut short = sent.clone();
        short.pop();
        assert!(matches!(
            check_ipv4(&short),
            Err(PacketError::NotRoceIpv4(_))
        ));
        let mut options = sent.clone();
        options[0] = 0x46;
        assert!(matches!(
            check_ipv4(&options),
            Err(PacketError::NotRoceIpv4(_))
        ));
        let mut tcp = sent.clone();
        tcp[9] = 6;
        assert!(matches!(check_ipv4(&tcp), Err(PacketError::NotRoceIpv4(_))));
        assert!(matches!(
            check_ipv4(&sent[..30]),
            Err(PacketError::Truncated { .. })
        ));
    }

    /// Vectors computed by an independent implementation (scapy's
    /// contrib/roce ICRC) for the same headers and payload.
    #[test]
    fn icrc_matches_reference_vectors() {
        let mut out = Vec::new();
        build(
            &ip(),
            &Bth::new(Opcode::SendOnly, 256, 0),
            &[],
            &[7; 32],
            &mut out,
        );
        assert_eq!(out.len(), 76);
        assert_eq!(out[72..], [0x4c, 0xe8, 0x65, 0x6b]);
        let nak = Ipv4Udp {
            tos: 24 << 2,
            ident: 2,
            udp_src: 49152 + 4097,
            ..ip()
        };
        let aeth = [SYNDROME_NAK_PSN_SEQ, 0, 0, 9];
        build(
            &nak,
            &Bth::new(Opcode::Acknowledge, 4097, 41),
            &aeth,
            &[],
            &mut out,
        );
        assert_eq!(out.len(), 48);
        assert_eq!(out[44..], [0xa7, 0x7d, 0x11, 0xe8]);
    }

    #[test]
    fn sack_extension_round_trip_and_errors() {
        let mut sack = SackBitmap::default();
        assert!(sack.is_empty());
        for i in [0, 5, 33] {
            assert!(sack.set(i));
        }
        assert!(!sack.set(SACK_WINDOW), "beyond the bitmap");
        assert_eq!((sack.span(), sack.encoded_len()), (64, 12));
        let mut aeth = vec![SYNDROME_ACK, 0, 0, 1];
        sack.encode(&mut aeth);
        assert_eq!(aeth[4..], [0x53, 2, 0, 0, 0x84, 0, 0, 0, 0x40, 0, 0, 0]);
        let mut out = Vec::new();
        build(
            &ip(),
            &Bth::new(Opcode::Acknowledge, 4097, 9),
            &aeth,
            &[],
            &mut out,
        );
        let Roce::Ack {
            sack: Some(got), ..
        } = decode(&out[28..]).unwrap()
        else {
            panic!("no SACK decoded");
        };
        assert_eq!(got, sack);
        let set: Vec<u64> = (0..got.span()).filter(|&i| got.contains(i)).collect();
        assert_eq!(set, [0, 5, 33]);
        assert!(!got.contains(1000));
        // A word count that disagrees with the length, a wrong kind, a
        // stray byte after the AETH: errors, not guesses.
        for (at, v) in [(1, 3u8), (0, 0x54), (2, 1)] {
            let mut bad = out[28..].to_vec();
            bad[BTH_LEN + AETH_LEN + at] = v;
            assert!(
                matches!(decode(&bad), Err(PacketError::BadSack(_))),
                "byte {at} = {v}"
            );
        }
        let mut stray = out[28..28 + BTH_LEN + AETH_LEN].to_vec();
        stray.extend_from_slice(&[0x53, 0, 0, 0, 0]);
        assert!(decode(&stray).is_err());
    }

    #[test]
    fn psn_unwrap_handles_wrap() {
        assert_eq!(unwrap_psn(5, 3), 5);
        assert_eq!(unwrap_psn(1, 3), 1);
        assert_eq!(unwrap_psn(2, (1 << 24) - 3), (1 << 24) + 2);
        assert_eq!(unwrap_psn(MASK24, 1 << 24), (1 << 24) - 1);
        assert_eq!(unwrap_psn(MASK24, 0), 0, "never below zero");
    }
}
