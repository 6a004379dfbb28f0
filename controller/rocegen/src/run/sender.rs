//! The send connections: messages released in order, paced by the DCQCN
//! reaction point, data packets sent and resent (go-back-N rewinds, or the
//! selective resends of an out-of-order NIC), retransmission timeouts and
//! tail-loss probes, and what comes back: ACKs, NAKs and CNPs.

use std::net::Ipv4Addr;

use anyhow::{bail, Result};

use super::host::Host;
use crate::dcqcn::Rp;
use crate::packet::{self, Aeth, Bth, Ipv4Udp, Opcode, SackBitmap, MASK24, SACK_WINDOW};
use crate::sack::Scoreboard;

#[derive(Debug)]
pub(super) struct SendMsg {
    pub(super) flow: usize,
    pub(super) first_seq: u64,
    pub(super) npkts: u64,
    pub(super) ready_ns: Option<u64>,
    pub(super) start_ns: Option<u64>,
    pub(super) end_ns: Option<u64>,
    pub(super) sent: u64,
    pub(super) retx: u64,
    /// Payload bytes sent, resends included, and those of resends.
    pub(super) sent_bytes: u64,
    pub(super) resent_bytes: u64,
    /// NAKs received for a PSN of this message, and go-back-N rewinds
    /// (NAK or timeout) from one.
    pub(super) naks: u64,
    pub(super) rewinds: u64,
    pub(super) cnps: u64,
    pub(super) min_rate: f64,
}

impl SendMsg {
    pub(super) fn end_seq(&self) -> u64 {
        self.first_seq + self.npkts
    }
}

pub(super) struct SendConn {
    pub(super) peer: Ipv4Addr,
    pub(super) dest_qp: u32,
    pub(super) udp_sport: u16,
    pub(super) tos: u8,
    pub(super) msgs: Vec<SendMsg>,
    /// Messages [0, released) may be sent.
    pub(super) released: usize,
    pub(super) next_seq: u64,
    pub(super) una: u64,
    pub(super) high_seq: u64,
    /// Scheduled (not actual) time of the last send: the deadline schedule.
    pub(super) last_sched: u64,
    pub(super) sendable: bool,
    pub(super) last_progress: u64,
    pub(super) timeouts: u64,
    /// A tail-loss probe went out since the last ACK progress.
    pub(super) probed: bool,
    pub(super) probes: u64,
    /// Out-of-order NIC: what the receiver holds and what is to be resent
    /// (None: go-back-N).
    pub(super) board: Option<Scoreboard>,
    pub(super) rp: Rp,
    /// Unix ns at which a time-bounded (background) flow stops.
    pub(super) stop_at: Option<u64>,
}

impl SendConn {
    fn released_end(&self) -> u64 {
        self.released
            .checked_sub(1)
            .map_or(0, |k| self.msgs[k].end_seq())
    }
    fn can_send(&self) -> bool {
        self.stop_at.is_none_or(|_| self.msgs[0].end_ns.is_none())
            && (self.board.as_ref().is_some_and(Scoreboard::has_lost) || self.can_send_next())
    }
    /// Whether `next_seq` may go: released, and within the receiver's
    /// placement window for an out-of-order NIC (go-back-N has no window:
    /// the rate limiter bounds what is in flight).
    fn can_send_next(&self) -> bool {
        self.next_seq < self.released_end()
            && (self.board.is_none() || self.next_seq < self.una + SACK_WINDOW)
    }
    /// The PSN to send now: a lost one first (out-of-order NIC), else the
    /// next.
    fn seq_to_send(&self) -> u64 {
        self.board
            .as_ref()
            .and_then(Scoreboard::next_lost)
            .unwrap_or(self.next_seq)
    }
    pub(super) fn msg_of(&self, seq: u64) -> usize {
        self.msgs
            .partition_point(|m| m.end_seq() <= seq)
            .min(self.msgs.len() - 1)
    }
    fn interval_ns(&self) -> u64 {
        (1e9 / self.rp.rate()).round() as u64
    }
    pub(super) fn next_due(&self) -> u64 {
        self.last_sched.saturating_add(self.interval_ns())
    }
    /// Go-back-N: resend from the first unacknowledged PSN (counted when
    /// it moves the send point back).
    fn rewind(&mut self) {
        if self.next_seq > self.una {
            self.next_seq = self.una;
            let mi = self.msg_of(self.una);
            self.msgs[mi].rewinds += 1;
        }
    }
    pub(super) fn done(&self) -> bool {
        self.msgs.iter().all(|m| m.end_ns.is_some())
    }
}

impl Host {
    /// Lets the next message of each connection start once the previous one
    /// is fully sent, its start offset has passed and its dependencies have
    /// been received here.
    pub(super) fn release(&mut self, now: u64) {
        let start = self.spec.start_unix_ns;
        for c in &mut self.send {
            while let Some(m) = c.msgs.get(c.released) {
                if c.released > 0 && c.high_seq < m.first_seq {
                    break;
                }
                let f = &self.spec.flows[m.flow];
                if now < start + f.start_offset_ns {
                    break;
                }
                let deps_ok = self.deps[m.flow]
                    .iter()
                    .all(|&j| self.recv_done[j].is_some());
                if !deps_ok {
                    break;
                }
                c.msgs[c.released].ready_ns = Some(now);
                c.released += 1;
            }
        }
    }

    pub(super) fn pace(&mut self, now: u64) {
        for ci in 0..self.send.len() {
            let c = &mut self.send[ci];
            c.rp.advance(now);
            let s = c.can_send();
            if s && !c.sendable {
                // Coming back from idle: no catch-up burst.
                let iv = c.interval_ns();
                c.last_sched = c.last_sched.max(now.saturating_sub(iv));
            }
            c.sendable = s;
            let mut budget = 64;
            while budget > 0 && self.send[ci].can_send() && self.send[ci].next_due() <= now {
                budget -= 1;
                let c = &mut self.send[ci];
                let due = c.next_due();
                c.last_sched = due.max(now.saturating_sub(self.opts.max_burst_ns));
                let seq = c.seq_to_send();
                self.send_data(ci, seq, now);
            }
            let c = &mut self.send[ci];
            c.sendable = c.can_send();
        }
    }

    /// Sends PSN `seq` of connection `ci`: the next one, a go-back-N
    /// resend (after a rewind, `seq` is `next_seq`) or a selective one.
    fn send_data(&mut self, ci: usize, seq: u64, now: u64) {
        let payload_bytes = u64::from(self.spec.payload_bytes);
        let ident = self.next_ident();
        let c = &mut self.send[ci];
        let mi = c.msg_of(seq);
        let m = &mut c.msgs[mi];
        let f = &self.spec.flows[m.flow];
        let idx = seq - m.first_seq;
        let len = if idx + 1 == m.npkts {
            f.bytes - idx * payload_bytes
        } else {
            payload_bytes
        };
        let mut bth = Bth::new(
            Opcode::for_send(idx, m.npkts),
            c.dest_qp,
            (seq as u32) & MASK24,
        );
        bth.ack_req = idx + 1 == m.npkts;
        let ip = Ipv4Udp {
            src: self.ip,
            dst: c.peer,
            tos: c.tos,
            ident,
            udp_src: c.udp_sport,
        };
        static ZEROS: [u8; 1500] = [0; 1500];
        packet::build(&ip, &bth, &[], &ZEROS[..len as usize], &mut self.buf);
        m.start_ns.get_or_insert(now);
        m.sent += 1;
        m.sent_bytes += len;
        if seq < c.high_seq {
            m.retx += 1;
            m.resent_bytes += len;
        }
        m.min_rate = m.min_rate.min(c.rp.rate());
        if c.una == c.high_seq {
            c.last_progress = now; // RTO runs from the first outstanding packet
        }
        c.high_seq = c.high_seq.max(seq + 1);
        if seq == c.next_seq {
            c.next_seq = seq + 1;
        }
        if let Some(b) = &mut c.board {
            b.on_sent(seq);
        }
        c.rp.on_sent(len, now);
        let peer = c.peer;
        self.transmit(peer);
    }

    pub(super) fn sender_timers(&mut self, now: u64) {
        for ci in 0..self.send.len() {
            let c = &mut self.send[ci];
            if c.una < c.high_seq && now >= c.last_progress + self.opts.rto_ns {
                c.timeouts += 1;
                match &mut c.board {
                    Some(b) => b.all_unacknowledged_lost(),
                    None => c.rewind(),
                }
                c.last_progress = now;
            } else if self.tail_probe_due(ci, now) {
                let c = &mut self.send[ci];
                c.probed = true;
                c.probes += 1;
                if let Some(b) = &mut c.board {
                    // The gaps the receiver reports below its highest PSN
                    // go again (paced), or else the last packet.
                    b.tail_lost();
                } else {
                    // Resend the last packet: the receiver answers with an
                    // ACK (it had everything) or a NAK (the tail was lost).
                    c.next_seq = c.high_seq - 1;
                    let seq = c.next_seq;
                    self.send_data(ci, seq, now);
                }
            }
        }
    }

    /// When the tail-loss probe of a connection is due, if it is armed: the
    /// connection is at its tail (everything released sent, some of it
    /// unacknowledged) and has not probed since its last progress. Only an
    /// armed probe may wake the loop: one still sending would otherwise
    /// spin from the probe time to its next ACK.
    pub(super) fn tail_probe_at(&self, ci: usize) -> Option<u64> {
        let c = &self.send[ci];
        let armed = self.opts.tlp_ns > 0
            && !c.probed
            && c.una < c.high_seq
            && c.next_seq == c.high_seq
            && !c.can_send();
        armed.then(|| c.last_progress + self.opts.tlp_ns)
    }

    fn tail_probe_due(&self, ci: usize, now: u64) -> bool {
        self.tail_probe_at(ci).is_some_and(|t| now >= t)
    }

    /// An ACK or NAK from the receiver of one of our connections: what it
    /// holds moves the send point on; a NAK rewinds go-back-N, a SACK
    /// marks losses. Errors when the receiver is another kind of NIC.
    pub(super) fn on_ack(
        &mut self,
        bth: Bth,
        aeth: Aeth,
        sack: Option<SackBitmap>,
        src: Ipv4Addr,
        now: u64,
    ) -> Result<()> {
        let Some(&ci) = self.send_by_qp.get(&bth.dest_qp) else {
            self.ctr.foreign += 1;
            return Ok(());
        };
        let c = &mut self.send[ci];
        if c.peer != src {
            self.ctr.foreign += 1;
            return Ok(());
        }
        let nak = aeth.is_nak();
        let host = &self.opts.host;
        if c.board.is_some() && nak {
            bail!(
                "{host} runs --nic ooo but {src} answered with a NAK (a go-back-N \
                 receiver): every host of a run needs the same --nic"
            );
        }
        if c.board.is_none() && sack.is_some() {
            bail!(
                "{host} runs --nic gbn but {src} answered with a selective ACK (an \
                 out-of-order receiver): every host of a run needs the same --nic"
            );
        }
        // The first PSN the receiver lacks: a NAK names it, an ACK
        // names the one before.
        let expected_psn = if nak { bth.psn } else { (bth.psn + 1) & MASK24 };
        let expected = packet::unwrap_psn(expected_psn, c.una).min(c.high_seq);
        let mut progress = false;
        if expected > c.una {
            c.una = expected;
            progress = true;
            if c.next_seq < c.una {
                c.next_seq = c.una;
            }
            for m in c.msgs.iter_mut() {
                if m.end_ns.is_none() && m.end_seq() <= c.una {
                    m.end_ns = Some(now);
                }
            }
        }
        if let Some(b) = &mut c.board {
            progress |= b.on_ack(expected, sack.as_ref());
            b.detect_losses(self.opts.ooo_threshold);
        }
        if progress {
            c.last_progress = now;
            c.probed = false;
        }
        if nak && expected == c.una {
            let mi = c.msg_of(c.una);
            c.msgs[mi].naks += 1;
            c.rewind();
        }
        Ok(())
    }

    /// A CNP from the receiver of one of our connections: its rate
    /// limiter slows down.
    pub(super) fn on_cnp(&mut self, bth: Bth, src: Ipv4Addr, now: u64) -> Result<()> {
        let Some(&ci) = self.send_by_qp.get(&bth.dest_qp) else {
            self.ctr.foreign += 1;
            return Ok(());
        };
        let c = &mut self.send[ci];
        if c.peer != src {
            self.ctr.foreign += 1;
            return Ok(());
        }
        c.rp.on_cnp(now);
        let mi = c.msg_of(c.una.min(c.high_seq.saturating_sub(1)));
        let rate = c.rp.rate();
        let m = &mut c.msgs[mi];
        m.cnps += 1;
        m.min_rate = m.min_rate.min(rate);
        Ok(())
    }
}
