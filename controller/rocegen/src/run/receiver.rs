//! The receive connections: data placed (only the expected PSN on a
//! go-back-N NIC, by PSN within a window on an out-of-order one), and what
//! goes back: ACKs (with a SACK out of order), NAKs and CNPs.

use std::net::Ipv4Addr;

use super::host::Host;
use super::opts::Nic;
use crate::gen::udp_port_for;
use crate::packet::{
    self, Bth, Ipv4Udp, Opcode, CNP_DSCP, CNP_PAD_LEN, MASK24, SYNDROME_ACK, SYNDROME_NAK_PSN_SEQ,
};
use crate::sack::{Placement, PlacementWindow};

#[derive(Debug)]
pub(super) struct RecvMsg {
    pub(super) flow: usize,
    pub(super) first_seq: u64,
    pub(super) npkts: u64,
    pub(super) start_ns: Option<u64>,
    pub(super) end_ns: Option<u64>,
    pub(super) packets: u64,
    /// Packets not placed: duplicates, out-of-order arrivals at a
    /// go-back-N NIC, and beyond the window at an out-of-order one.
    pub(super) discarded: u64,
    /// Arrivals beyond a PSN gap (dropped by go-back-N, placed by an
    /// out-of-order NIC), and arrivals of PSNs already placed.
    pub(super) out_of_order: u64,
    pub(super) duplicates: u64,
    /// Payload bytes that arrived, and those placed (each PSN once).
    pub(super) wire_bytes: u64,
    pub(super) placed_bytes: u64,
    /// NAKs sent for a PSN of this message.
    pub(super) naks: u64,
    pub(super) ce: u64,
    pub(super) cnps: u64,
}

pub(super) struct RecvConn {
    pub(super) peer: Ipv4Addr,
    pub(super) peer_qp: u32,
    pub(super) dscp: u8,
    pub(super) msgs: Vec<RecvMsg>,
    /// Which PSNs are placed (go-back-N places only the expected one).
    pub(super) win: PlacementWindow,
    /// NAK sent for this expected PSN, and the highest out-of-order PSN
    /// seen since: a lower one means the sender went back, so a gap seen
    /// again (retransmission lost too) is NAKed again instead of waiting
    /// for the sender's timeout.
    pub(super) nak_for: Option<(u64, u64)>,
    pub(super) unacked: u32,
    pub(super) ack_due: Option<u64>,
    pub(super) last_cnp: Option<u64>,
    pub(super) msn: u32,
    /// Unix ns after which a time-bounded flow counts as received.
    pub(super) stop_at: Option<u64>,
}

impl RecvConn {
    fn total(&self) -> u64 {
        self.msgs.last().map_or(0, |m| m.first_seq + m.npkts)
    }
    fn msg_of(&self, seq: u64) -> usize {
        self.msgs
            .partition_point(|m| m.first_seq + m.npkts <= seq)
            .min(self.msgs.len() - 1)
    }
}

/// Notification point's limit: at most one CNP per `interval` per
/// connection. True (and the time noted) when one may go now.
fn cnp_allowed(last: &mut Option<u64>, now: u64, interval: u64) -> bool {
    let ok = last.is_none_or(|t| now >= t + interval);
    if ok {
        *last = Some(now);
    }
    ok
}

/// How long a receiver still counts packets of a stopped flow.
pub(super) const STOP_GRACE_NS: u64 = 500_000_000;

impl Host {
    pub(super) fn receiver_timers(&mut self, now: u64) {
        for ci in 0..self.recv.len() {
            if self.recv[ci].ack_due.is_some_and(|t| t <= now) {
                self.send_ack(ci, false);
            }
        }
    }

    pub(super) fn on_data(&mut self, bth: Bth, len: usize, src: Ipv4Addr, ce: bool, now: u64) {
        let Some(&ci) = self.recv_by_qp.get(&bth.dest_qp) else {
            self.ctr.foreign += 1;
            return;
        };
        let payload_bytes = u64::from(self.spec.payload_bytes);
        let c = &mut self.recv[ci];
        if c.peer != src {
            self.ctr.foreign += 1;
            return;
        }
        let expected = c.win.expected();
        let seq = packet::unwrap_psn(bth.psn, expected);
        if seq >= c.total() {
            self.ctr.foreign += 1;
            return;
        }
        let mi = c.msg_of(seq);
        let m = &mut c.msgs[mi];
        let idx = seq - m.first_seq;
        let bytes = self.spec.flows[m.flow].bytes;
        let want = if idx + 1 == m.npkts {
            bytes - idx * payload_bytes
        } else {
            payload_bytes
        };
        let len = len as u64;
        if len != want {
            // Not a packet of this message: nothing to place.
            self.ctr.malformed += 1;
            return;
        }
        m.packets += 1;
        m.wire_bytes += len;
        m.start_ns.get_or_insert(now);
        let mut send_cnp = false;
        let cnp_interval = self.spec.dcqcn.cnp_interval_ns;
        if ce {
            m.ce += 1;
            if cnp_allowed(&mut c.last_cnp, now, cnp_interval) {
                m.cnps += 1;
                send_cnp = true;
            }
        }
        enum Reply {
            None,
            Ack,
            Nak,
        }
        let mut reply = Reply::None;
        let placement = match self.opts.nic {
            Nic::OutOfOrder => Some(c.win.place(seq)),
            Nic::GoBackN if seq == expected => {
                c.win.place_expected();
                Some(Placement::InOrder { advanced: 1 })
            }
            Nic::GoBackN if seq < expected => Some(Placement::Duplicate),
            Nic::GoBackN => None,
        };
        match placement {
            None => {
                // Go-back-N: dropped; the first of a gap draws a NAK.
                m.discarded += 1;
                m.out_of_order += 1;
                match c.nak_for {
                    Some((e, high)) if e == expected && seq > high => {
                        c.nak_for = Some((e, seq));
                    }
                    _ => {
                        c.nak_for = Some((expected, seq));
                        reply = Reply::Nak;
                        if self.opts.cnp_on_ooo && cnp_allowed(&mut c.last_cnp, now, cnp_interval) {
                            m.cnps += 1;
                            self.ctr.ooo_cnps += 1;
                            send_cnp = true;
                        }
                    }
                }
            }
            Some(Placement::InOrder { .. }) => {
                m.placed_bytes += len;
                c.nak_for = None;
                c.unacked += 1;
                // Messages whose last PSN is now placed are complete.
                let placed = c.win.expected();
                let mut completed = false;
                for m in c.msgs.iter_mut() {
                    if m.end_ns.is_none() && m.first_seq + m.npkts <= placed {
                        m.end_ns = Some(now);
                        self.recv_done[m.flow] = Some(now);
                        c.msn = (c.msn + 1) & MASK24;
                        completed = true;
                    }
                }
                if completed || bth.ack_req || c.unacked >= self.opts.ack_every {
                    reply = Reply::Ack;
                } else if c.ack_due.is_none() {
                    c.ack_due = Some(now + self.opts.ack_delay_ns);
                }
            }
            Some(Placement::OutOfOrder { opened_gap }) => {
                m.placed_bytes += len;
                m.out_of_order += 1;
                c.unacked += 1;
                // A new gap is reported at once (as a NAK would be); then
                // the SACK rides the usual ACK schedule.
                if opened_gap || bth.ack_req || c.unacked >= self.opts.ack_every {
                    reply = Reply::Ack;
                } else if c.ack_due.is_none() {
                    c.ack_due = Some(now + self.opts.ack_delay_ns);
                }
            }
            Some(Placement::Duplicate) => {
                // The sender went back or resent: re-ACK soon (coalesced).
                m.discarded += 1;
                m.duplicates += 1;
                let t = now + self.opts.ack_delay_ns;
                c.ack_due = Some(c.ack_due.map_or(t, |d| d.min(t)));
            }
            Some(Placement::BeyondWindow) => m.discarded += 1,
        }
        if send_cnp {
            self.send_cnp(ci);
        }
        match reply {
            Reply::None => {}
            Reply::Ack => self.send_ack(ci, false),
            Reply::Nak => self.send_ack(ci, true),
        }
    }

    fn send_ack(&mut self, ci: usize, nak: bool) {
        let ident = self.next_ident();
        let c = &mut self.recv[ci];
        c.ack_due = None;
        c.unacked = 0;
        let expected = c.win.expected();
        let sack = if nak { None } else { c.win.bitmap() };
        if !nak && expected == 0 && sack.is_none() {
            return; // nothing received yet
        }
        let (psn, syndrome) = if nak {
            let mi = c.msg_of(expected);
            c.msgs[mi].naks += 1;
            (expected, SYNDROME_NAK_PSN_SEQ)
        } else {
            // The last PSN in order (0xFFFFFF when none is yet, with a SACK).
            (expected.wrapping_sub(1), SYNDROME_ACK)
        };
        let bth = Bth::new(Opcode::Acknowledge, c.peer_qp, (psn as u32) & MASK24);
        let msn = c.msn.to_be_bytes();
        let mut ext = Vec::with_capacity(4 + sack.map_or(0, |s| s.encoded_len()));
        ext.extend_from_slice(&[syndrome, msn[1], msn[2], msn[3]]);
        if let Some(s) = &sack {
            s.encode(&mut ext);
        }
        let ip = Ipv4Udp {
            src: self.ip,
            dst: c.peer,
            tos: self.opts.ack_dscp.unwrap_or(c.dscp) << 2,
            ident,
            udp_src: udp_port_for(c.peer_qp),
        };
        let peer = c.peer;
        packet::build(&ip, &bth, &ext, &[], &mut self.buf);
        if nak {
            self.ctr.naks_sent += 1;
        } else {
            self.ctr.acks_sent += 1;
            if sack.is_some() {
                self.ctr.sacks_sent += 1;
            }
        }
        self.transmit(peer);
    }

    fn send_cnp(&mut self, ci: usize) {
        let ident = self.next_ident();
        let c = &self.recv[ci];
        let mut bth = Bth::new(Opcode::Cnp, c.peer_qp, 0);
        bth.becn = true;
        let ip = Ipv4Udp {
            src: self.ip,
            dst: c.peer,
            tos: CNP_DSCP << 2,
            ident,
            udp_src: udp_port_for(c.peer_qp),
        };
        let peer = c.peer;
        packet::build(&ip, &bth, &[0; CNP_PAD_LEN], &[], &mut self.buf);
        self.transmit(peer);
    }
}
