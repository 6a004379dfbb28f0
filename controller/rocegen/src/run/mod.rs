//! `rocegen run`: one host's sender + receiver as a single-threaded event
//! loop (no locks; sleeps in ppoll until the next deadline or packet).
//!
//! Flows sharing a QP pair are messages of one RC connection: one PSN space
//! starting at 0, sent in spec order, one DCQCN rate limiter.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::dcqcn::Rp;
use crate::gen::udp_port_for;
use crate::packet::{
    self, Bth, Ipv4Udp, Opcode, PacketError, Roce, CNP_DSCP, CNP_PAD_LEN, ECN_CE, ECN_ECT0, MASK24,
    ROCE_PORT, SACK_WINDOW, SYNDROME_ACK, SYNDROME_NAK_PSN_SEQ,
};
use crate::sack::{Placement, PlacementWindow, Scoreboard};
use crate::spec::Spec;
use crate::sys::{self, RawSender, RoceReceiver};

/// The kind of RoCE NIC a host plays: how its receiver treats a PSN gap and
/// how its sender recovers. Every host of a run must play the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nic {
    /// RC without out-of-order placement: the receiver drops everything
    /// after a gap and NAKs it once; the sender goes back to the NAKed PSN.
    GoBackN,
    /// Out-of-order placement (as in IRN, Spectrum-X SuperNIC, UET): the
    /// receiver places by PSN and acknowledges selectively; the sender
    /// resends only what is missing.
    OutOfOrder,
}

impl Nic {
    pub fn as_str(self) -> &'static str {
        match self {
            Nic::GoBackN => "gbn",
            Nic::OutOfOrder => "ooo",
        }
    }
}

impl std::str::FromStr for Nic {
    type Err = String;
    fn from_str(s: &str) -> Result<Nic, String> {
        match s {
            "gbn" => Ok(Nic::GoBackN),
            "ooo" => Ok(Nic::OutOfOrder),
            _ => Err(format!(
                "unknown NIC kind {s:?}: gbn (go-back-N) or ooo (out-of-order placement)"
            )),
        }
    }
}

/// Runtime knobs that are not part of the shared spec (lab defaults).
#[derive(Debug, Clone)]
pub struct RunOpts {
    pub spec: PathBuf,
    pub host: String,
    pub out: PathBuf,
    /// Give up this long after start_unix_ns.
    pub timeout_ns: u64,
    /// Go-back-N retransmit timeout without ACK progress.
    pub rto_ns: u64,
    /// Tail-loss probe: with nothing new to send and no ACK progress for
    /// this long, resend the last packet once, so that a lost tail is
    /// answered (ACK or NAK) well before the RTO. 0 disables it.
    pub tlp_ns: u64,
    /// Receiver ACKs every N in-order packets...
    pub ack_every: u32,
    /// ...or this long after the first unacknowledged one.
    pub ack_delay_ns: u64,
    /// DSCP of ACKs and NAKs; `None`: the flow's own (as a NIC does by
    /// default). A class above data keeps them flowing when strict-priority
    /// reserved traffic fills a port.
    pub ack_dscp: Option<u8>,
    pub rate_sample_ns: u64,
    /// Keep answering (re-ACKing) this long after our own work is done, so
    /// a peer whose last ACK was lost can still finish.
    pub linger_ns: u64,
    /// Catch-up bound after a stall: at most this much schedule is sent
    /// back-to-back.
    pub max_burst_ns: u64,
    pub nic: Nic,
    /// Out-of-order NIC: a packet sent once counts as lost when this many
    /// packets beyond it have been acknowledged (shallower reordering costs
    /// nothing).
    pub ooo_threshold: u64,
    /// Go-back-N NIC: also send a CNP (rate-limited like the CE ones) with
    /// the NAK of a PSN gap, as some NICs can be set to do.
    pub cnp_on_ooo: bool,
    pub quiet: bool,
}

impl RunOpts {
    pub fn new(spec: PathBuf, host: String, out: PathBuf) -> RunOpts {
        RunOpts {
            spec,
            host,
            out,
            timeout_ns: 120_000_000_000,
            rto_ns: 200_000_000,
            tlp_ns: 20_000_000,
            ack_every: 16,
            ack_delay_ns: 2_000_000,
            ack_dscp: None,
            rate_sample_ns: 5_000_000,
            linger_ns: 1_000_000_000,
            max_burst_ns: 2_000_000,
            nic: Nic::GoBackN,
            ooo_threshold: 8,
            cnp_on_ooo: false,
            quiet: false,
        }
    }
}

/// What a run achieved.
#[derive(Debug)]
pub struct Outcome {
    pub complete: bool,
    pub incomplete: Vec<String>,
    pub cpu_ns: u64,
    pub wall_ns: u64,
}

#[derive(Debug)]
struct SendMsg {
    flow: usize,
    first_seq: u64,
    npkts: u64,
    ready_ns: Option<u64>,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    sent: u64,
    retx: u64,
    /// Payload bytes sent, resends included, and those of resends.
    sent_bytes: u64,
    resent_bytes: u64,
    /// NAKs received for a PSN of this message, and go-back-N rewinds
    /// (NAK or timeout) from one.
    naks: u64,
    rewinds: u64,
    cnps: u64,
    min_rate: f64,
}

impl SendMsg {
    fn end_seq(&self) -> u64 {
        self.first_seq + self.npkts
    }
}

struct SendConn {
    peer: Ipv4Addr,
    dest_qp: u32,
    udp_sport: u16,
    tos: u8,
    msgs: Vec<SendMsg>,
    /// Messages [0, released) may be sent.
    released: usize,
    next_seq: u64,
    una: u64,
    high_seq: u64,
    /// Scheduled (not actual) time of the last send: the deadline schedule.
    last_sched: u64,
    sendable: bool,
    last_progress: u64,
    timeouts: u64,
    /// A tail-loss probe went out since the last ACK progress.
    probed: bool,
    probes: u64,
    /// Out-of-order NIC: what the receiver holds and what is to be resent
    /// (None: go-back-N).
    board: Option<Scoreboard>,
    rp: Rp,
    /// Unix ns at which a time-bounded (background) flow stops.
    stop_at: Option<u64>,
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
    fn msg_of(&self, seq: u64) -> usize {
        self.msgs
            .partition_point(|m| m.end_seq() <= seq)
            .min(self.msgs.len() - 1)
    }
    fn interval_ns(&self) -> u64 {
        (1e9 / self.rp.rate()).round() as u64
    }
    fn next_due(&self) -> u64 {
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
    fn done(&self) -> bool {
        self.msgs.iter().all(|m| m.end_ns.is_some())
    }
}

#[derive(Debug)]
struct RecvMsg {
    flow: usize,
    first_seq: u64,
    npkts: u64,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    packets: u64,
    /// Packets not placed: duplicates, out-of-order arrivals at a
    /// go-back-N NIC, and beyond the window at an out-of-order one.
    discarded: u64,
    /// Arrivals beyond a PSN gap (dropped by go-back-N, placed by an
    /// out-of-order NIC), and arrivals of PSNs already placed.
    out_of_order: u64,
    duplicates: u64,
    /// Payload bytes that arrived, and those placed (each PSN once).
    wire_bytes: u64,
    placed_bytes: u64,
    /// NAKs sent for a PSN of this message.
    naks: u64,
    ce: u64,
    cnps: u64,
}

struct RecvConn {
    peer: Ipv4Addr,
    peer_qp: u32,
    dscp: u8,
    msgs: Vec<RecvMsg>,
    /// Which PSNs are placed (go-back-N places only the expected one).
    win: PlacementWindow,
    /// NAK sent for this expected PSN, and the highest out-of-order PSN
    /// seen since: a lower one means the sender went back, so a gap seen
    /// again (retransmission lost too) is NAKed again instead of waiting
    /// for the sender's timeout.
    nak_for: Option<(u64, u64)>,
    unacked: u32,
    ack_due: Option<u64>,
    last_cnp: Option<u64>,
    msn: u32,
    /// Unix ns after which a time-bounded flow counts as received.
    stop_at: Option<u64>,
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

/// Monotonic clock expressed in unix ns.
struct Clock {
    base_unix: u64,
    base: Instant,
}

impl Clock {
    fn now(&self) -> u64 {
        self.base_unix + self.base.elapsed().as_nanos() as u64
    }
}

#[derive(Default)]
struct Counters {
    foreign: u64,
    malformed: u64,
    send_errors: u64,
    /// Packets dropped because their ICRC did not match.
    bad_icrc: u64,
    acks_sent: u64,
    naks_sent: u64,
    /// ACKs that carried a SACK extension (out-of-order NIC).
    sacks_sent: u64,
    /// CNPs sent with a NAK (`--cnp-on-ooo`).
    ooo_cnps: u64,
}

struct Host {
    spec: Spec,
    opts: RunOpts,
    ip: Ipv4Addr,
    send: Vec<SendConn>,
    recv: Vec<RecvConn>,
    /// local QP -> index into send (our src_qp) / recv (our dest_qp).
    send_by_qp: HashMap<u32, usize>,
    recv_by_qp: HashMap<u32, usize>,
    /// Completion time of each incoming flow (indexed by spec flow).
    recv_done: Vec<Option<u64>>,
    /// `after` of each flow as flow indices.
    deps: Vec<Vec<usize>>,
    raw: RawSender,
    ident: u16,
    buf: Vec<u8>,
    ctr: Counters,
    rate_csv: BufWriter<File>,
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
const STOP_GRACE_NS: u64 = 500_000_000;

pub fn run(opts: RunOpts) -> Result<Outcome> {
    let spec = Spec::load(&opts.spec)?;
    let Some(ip) = spec.ip(&opts.host) else {
        bail!("--host {}: not in the spec's hosts", opts.host);
    };
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let raw = RawSender::new().context("raw socket (needs root / CAP_NET_RAW)")?;
    let rx =
        RoceReceiver::bind(ROCE_PORT).context("opening the RoCEv2 receive socket (UDP 4791)")?;
    sys::set_timer_slack_ns(10_000);
    let rate_path = opts.out.join(format!("rate-{}.csv", opts.host));
    let mut rate_csv = BufWriter::new(
        File::create(&rate_path).with_context(|| format!("creating {}", rate_path.display()))?,
    );
    writeln!(rate_csv, "time_ns,flow,rate_pps,alpha,target_pps")?;
    let mut h = Host::new(spec, opts, ip, raw, rate_csv);
    let clock = Clock {
        base_unix: sys::unix_now_ns(),
        base: Instant::now(),
    };
    let start = h.spec.start_unix_ns;
    // Sleep until the common start; early packets wait in the socket buffer.
    loop {
        let now = clock.now();
        if now >= start {
            break;
        }
        std::thread::sleep(std::time::Duration::from_nanos(
            (start - now).min(100_000_000),
        ));
    }
    let cpu0 = sys::cpu_time_ns();
    let t0 = clock.now();
    for c in &mut h.send {
        c.last_progress = t0;
        c.last_sched = t0;
    }
    let outcome = h.event_loop(&clock, &rx)?;
    let cpu_ns = sys::cpu_time_ns() - cpu0;
    let wall_ns = clock.now() - t0;
    h.rate_csv.flush()?;
    h.write_flows_csv()?;
    let out = Outcome {
        complete: outcome.is_empty(),
        incomplete: outcome,
        cpu_ns,
        wall_ns,
    };
    h.summary(&out);
    Ok(out)
}

impl Host {
    fn new(
        spec: Spec,
        opts: RunOpts,
        ip: Ipv4Addr,
        raw: RawSender,
        rate_csv: BufWriter<File>,
    ) -> Self {
        let payload = spec.payload_bytes;
        let mut send = Vec::new();
        let mut recv = Vec::new();
        let mut send_by_qp = HashMap::new();
        let mut recv_by_qp = HashMap::new();
        for ((src, _), msgs) in spec.connections() {
            let f0 = &spec.flows[msgs[0]];
            let mut seq = 0u64;
            let mut sm = Vec::new();
            let mut rm = Vec::new();
            for &i in &msgs {
                let n = spec.flows[i].packets(payload);
                sm.push(SendMsg {
                    flow: i,
                    first_seq: seq,
                    npkts: n,
                    ready_ns: None,
                    start_ns: None,
                    end_ns: None,
                    sent: 0,
                    retx: 0,
                    sent_bytes: 0,
                    resent_bytes: 0,
                    naks: 0,
                    rewinds: 0,
                    cnps: 0,
                    min_rate: f0.line_rate_pps,
                });
                rm.push(RecvMsg {
                    flow: i,
                    first_seq: seq,
                    npkts: n,
                    start_ns: None,
                    end_ns: None,
                    packets: 0,
                    discarded: 0,
                    out_of_order: 0,
                    duplicates: 0,
                    wire_bytes: 0,
                    placed_bytes: 0,
                    naks: 0,
                    ce: 0,
                    cnps: 0,
                });
                seq += n;
            }
            if src == opts.host {
                send_by_qp.insert(f0.src_qp, send.len());
                send.push(SendConn {
                    peer: spec.ip(&f0.dst).unwrap_or(Ipv4Addr::UNSPECIFIED),
                    dest_qp: f0.dest_qp,
                    udp_sport: f0.udp_src_port,
                    tos: (f0.dscp << 2) | ECN_ECT0,
                    msgs: sm,
                    released: 0,
                    next_seq: 0,
                    una: 0,
                    high_seq: 0,
                    last_sched: 0,
                    sendable: false,
                    last_progress: 0,
                    timeouts: 0,
                    probed: false,
                    probes: 0,
                    board: (opts.nic == Nic::OutOfOrder).then(Scoreboard::default),
                    rp: Rp::new(&spec.dcqcn, f0.line_rate_pps, u64::from(payload)),
                    stop_at: f0.stop_offset_ns.map(|s| spec.start_unix_ns + s),
                });
            } else if f0.dst == opts.host {
                recv_by_qp.insert(f0.dest_qp, recv.len());
                recv.push(RecvConn {
                    peer: spec.ip(&f0.src).unwrap_or(Ipv4Addr::UNSPECIFIED),
                    peer_qp: f0.src_qp,
                    dscp: f0.dscp,
                    msgs: rm,
                    win: PlacementWindow::default(),
                    nak_for: None,
                    unacked: 0,
                    ack_due: None,
                    last_cnp: None,
                    msn: 0,
                    // In-flight packets still count for a moment after the stop.
                    stop_at: f0
                        .stop_offset_ns
                        .map(|s| spec.start_unix_ns + s + STOP_GRACE_NS),
                });
            }
        }
        let n = spec.flows.len();
        let ids: HashMap<&str, usize> = spec
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| (f.id.as_str(), i))
            .collect();
        let deps = spec
            .flows
            .iter()
            .map(|f| f.after.iter().map(|d| ids[d.as_str()]).collect())
            .collect();
        Host {
            spec,
            opts,
            ip,
            send,
            recv,
            send_by_qp,
            recv_by_qp,
            recv_done: vec![None; n],
            deps,
            raw,
            ident: 0,
            buf: Vec::with_capacity(2048),
            ctr: Counters::default(),
            rate_csv,
        }
    }

    fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1).max(1);
        self.ident
    }

    fn transmit(&mut self, dst: Ipv4Addr) {
        if self.raw.send(&self.buf, dst).is_err() {
            self.ctr.send_errors += 1;
        }
    }

    /// Returns the ids of incomplete flows (empty = success).
    fn event_loop(&mut self, clock: &Clock, rx: &RoceReceiver) -> Result<Vec<String>> {
        let start = self.spec.start_unix_ns;
        let deadline = start.saturating_add(self.opts.timeout_ns);
        let mut next_sample = clock.now();
        let mut next_progress = clock.now() + 1_000_000_000;
        let mut done_at: Option<u64> = None;
        let mut rbuf = vec![0u8; 65536];
        loop {
            // 1. Drain the socket.
            while let Some(r) = rx.recv(&mut rbuf)? {
                let now = clock.now();
                match packet::check_ipv4(&rbuf[..r.len]) {
                    Ok(p) => self.on_packet(p.udp_payload, p.src, p.tos, now)?,
                    // As a NIC does: dropped and counted; the sender resends.
                    Err(PacketError::BadIcrc { .. }) => self.ctr.bad_icrc += 1,
                    Err(_) => self.ctr.malformed += 1,
                }
            }
            let now = clock.now();
            // 2. Timers.
            self.stop_bounded(now);
            self.receiver_timers(now);
            self.sender_timers(now);
            self.release(now);
            // 3. Paced sends.
            self.pace(now);
            // 4. Records.
            if now >= next_sample {
                self.sample_rates(now)?;
                next_sample += self.opts.rate_sample_ns;
                if next_sample < now {
                    next_sample = now + self.opts.rate_sample_ns;
                }
            }
            if now >= next_progress {
                if !self.opts.quiet {
                    self.progress(now);
                }
                next_progress += 1_000_000_000;
            }
            let finished = self.send.iter().all(SendConn::done)
                && self
                    .recv
                    .iter()
                    .all(|c| c.msgs.iter().all(|m| m.end_ns.is_some()));
            if finished && done_at.is_none() {
                done_at = Some(now);
            }
            if let Some(d) = done_at {
                // Only a receiver's ACKs are still needed by peers.
                if self.recv.is_empty() || now >= d + self.opts.linger_ns {
                    return Ok(Vec::new());
                }
            }
            if now >= deadline {
                return Ok(self.incomplete());
            }
            // 5. Sleep until the next thing to do.
            let mut wake = deadline.min(next_sample).min(next_progress);
            if let Some(d) = done_at {
                wake = wake.min(d + self.opts.linger_ns);
            }
            for (ci, c) in self.send.iter().enumerate() {
                if c.sendable {
                    wake = wake.min(c.next_due()).min(c.rp.next_deadline());
                }
                if c.una < c.high_seq {
                    wake = wake.min(c.last_progress + self.opts.rto_ns);
                }
                if let Some(t) = self.tail_probe_at(ci) {
                    wake = wake.min(t);
                }
                if let Some(m) = c.msgs.get(c.released) {
                    if m.ready_ns.is_none() {
                        let t = start + self.spec.flows[m.flow].start_offset_ns;
                        if t > now {
                            wake = wake.min(t);
                        }
                    }
                }
            }
            for c in &self.recv {
                if let Some(t) = c.ack_due {
                    wake = wake.min(t);
                }
                if let (Some(t), None) = (c.stop_at, c.msgs[0].end_ns) {
                    wake = wake.min(t);
                }
            }
            for c in &self.send {
                if let (Some(t), None) = (c.stop_at, c.msgs[0].end_ns) {
                    wake = wake.min(t);
                }
            }
            let now = clock.now();
            if wake > now {
                rx.wait(wake - now)?;
            }
        }
    }

    /// Ends time-bounded flows whose stop time has come: the sender stops
    /// (nothing more is sent or retransmitted), the receiver keeps what
    /// arrived.
    fn stop_bounded(&mut self, now: u64) {
        for c in &mut self.send {
            if let Some(t) = c.stop_at {
                if now >= t && c.msgs[0].end_ns.is_none() {
                    c.msgs[0].end_ns = Some(now);
                    c.una = c.high_seq;
                    c.next_seq = c.high_seq;
                    if let Some(b) = &mut c.board {
                        b.reset(c.high_seq);
                    }
                }
            }
        }
        for c in &mut self.recv {
            if let Some(t) = c.stop_at {
                if now >= t && c.msgs[0].end_ns.is_none() {
                    c.msgs[0].end_ns = Some(now);
                }
            }
        }
    }

    fn incomplete(&self) -> Vec<String> {
        let mut v = Vec::new();
        for c in &self.send {
            for m in c.msgs.iter().filter(|m| m.end_ns.is_none()) {
                v.push(format!("{} (send)", self.spec.flows[m.flow].id));
            }
        }
        for c in &self.recv {
            for m in c.msgs.iter().filter(|m| m.end_ns.is_none()) {
                v.push(format!("{} (recv)", self.spec.flows[m.flow].id));
            }
        }
        v
    }

    /// Lets the next message of each connection start once the previous one
    /// is fully sent, its start offset has passed and its dependencies have
    /// been received here.
    fn release(&mut self, now: u64) {
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

    fn pace(&mut self, now: u64) {
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

    fn sender_timers(&mut self, now: u64) {
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
    fn tail_probe_at(&self, ci: usize) -> Option<u64> {
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

    fn receiver_timers(&mut self, now: u64) {
        for ci in 0..self.recv.len() {
            if self.recv[ci].ack_due.is_some_and(|t| t <= now) {
                self.send_ack(ci, false);
            }
        }
    }

    /// Errors only when the peer is a different kind of NIC (a run's
    /// hosts disagree on `--nic`); anything malformed is counted and dropped.
    fn on_packet(&mut self, data: &[u8], src: Ipv4Addr, tos: u8, now: u64) -> Result<()> {
        let pkt = match packet::decode(data) {
            Ok(p) => p,
            Err(_) => {
                self.ctr.malformed += 1;
                return Ok(());
            }
        };
        match pkt {
            Roce::Data { bth, payload } => {
                self.on_data(bth, payload.len(), src, tos & 3 == ECN_CE, now)
            }
            Roce::Ack { bth, aeth, sack } => {
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
            }
            Roce::Cnp { bth } => {
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
            }
        }
        Ok(())
    }

    fn on_data(&mut self, bth: Bth, len: usize, src: Ipv4Addr, ce: bool, now: u64) {
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

    fn sample_rates(&mut self, now: u64) -> Result<()> {
        for c in &mut self.send {
            if c.released == 0 || c.done() {
                continue;
            }
            c.rp.advance(now);
            let mi = c.msg_of(c.una);
            let id = &self.spec.flows[c.msgs[mi].flow].id;
            writeln!(
                self.rate_csv,
                "{now},{id},{:.3},{:.6},{:.3}",
                c.rp.rate(),
                c.rp.alpha(),
                c.rp.target()
            )?;
        }
        Ok(())
    }

    fn progress(&self, now: u64) {
        let payload = u64::from(self.spec.payload_bytes);
        let (mut sd, mut st, mut rd, mut rt) = (0u64, 0u64, 0u64, 0u64);
        for c in &self.send {
            for m in &c.msgs {
                let b = self.spec.flows[m.flow].bytes;
                st += b;
                let acked = c.una.clamp(m.first_seq, m.end_seq()) - m.first_seq;
                sd += (acked * payload).min(b);
            }
        }
        for c in &self.recv {
            for m in &c.msgs {
                let b = self.spec.flows[m.flow].bytes;
                rt += b;
                let got = c.win.expected().clamp(m.first_seq, m.first_seq + m.npkts) - m.first_seq;
                rd += (got * payload).min(b);
            }
        }
        let secs = now.saturating_sub(self.spec.start_unix_ns) as f64 / 1e9;
        eprintln!(
            "rocegen {} +{secs:.1}s: sent+acked {sd}/{st} B, received {rd}/{rt} B",
            self.opts.host
        );
    }

    fn write_flows_csv(&self) -> Result<()> {
        let path = self.opts.out.join(format!("flows-{}.csv", self.opts.host));
        let mut w = BufWriter::new(
            File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        writeln!(
            w,
            "flow,kind,src,dst,src_qp,dest_qp,bytes,role,ready_ns,start_ns,end_ns,fct_ns,\
             packets,retransmits,ce_marked,cnps,min_rate_pps,complete,\
             nic,wire_bytes,resent_bytes,naks,rewinds,out_of_order,duplicates,placed_bytes"
        )?;
        let nic = self.opts.nic.as_str();
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        let fct = |s: Option<u64>, e: Option<u64>| match (s, e) {
            (Some(s), Some(e)) => e.saturating_sub(s).to_string(),
            _ => String::new(),
        };
        for c in &self.send {
            for m in &c.msgs {
                let f = &self.spec.flows[m.flow];
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},send,{},{},{},{},{},{},,{},{:.3},{},{nic},{},{},{},{},,,",
                    f.id,
                    f.kind.as_str(),
                    f.src,
                    f.dst,
                    f.src_qp,
                    f.dest_qp,
                    f.bytes,
                    opt(m.ready_ns),
                    opt(m.start_ns),
                    opt(m.end_ns),
                    fct(m.start_ns, m.end_ns),
                    m.sent,
                    m.retx,
                    m.cnps,
                    m.min_rate,
                    m.end_ns.is_some(),
                    m.sent_bytes,
                    m.resent_bytes,
                    m.naks,
                    m.rewinds,
                )?;
            }
        }
        for c in &self.recv {
            for m in &c.msgs {
                let f = &self.spec.flows[m.flow];
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},recv,,{},{},{},{},{},{},{},,{},{nic},{},,{},,{},{},{}",
                    f.id,
                    f.kind.as_str(),
                    f.src,
                    f.dst,
                    f.src_qp,
                    f.dest_qp,
                    f.bytes,
                    opt(m.start_ns),
                    opt(m.end_ns),
                    fct(m.start_ns, m.end_ns),
                    m.packets,
                    m.discarded,
                    m.ce,
                    m.cnps,
                    m.end_ns.is_some(),
                    m.wire_bytes,
                    m.naks,
                    m.out_of_order,
                    m.duplicates,
                    m.placed_bytes,
                )?;
            }
        }
        w.flush()?;
        Ok(())
    }

    fn summary(&self, o: &Outcome) {
        let sent: u64 = self.send.iter().flat_map(|c| &c.msgs).map(|m| m.sent).sum();
        let retx: u64 = self.send.iter().flat_map(|c| &c.msgs).map(|m| m.retx).sum();
        let cnps_in: u64 = self.send.iter().map(|c| c.rp.cnps()).sum();
        let timeouts: u64 = self.send.iter().map(|c| c.timeouts).sum();
        let probes: u64 = self.send.iter().map(|c| c.probes).sum();
        let send_msgs = || self.send.iter().flat_map(|c| &c.msgs);
        let naks_in: u64 = send_msgs().map(|m| m.naks).sum();
        let rewinds: u64 = send_msgs().map(|m| m.rewinds).sum();
        let resent: u64 = send_msgs().map(|m| m.resent_bytes).sum();
        let recv_msgs = || self.recv.iter().flat_map(|c| &c.msgs);
        let ooo: u64 = recv_msgs().map(|m| m.out_of_order).sum();
        let dups: u64 = recv_msgs().map(|m| m.duplicates).sum();
        let recvd: u64 = self
            .recv
            .iter()
            .flat_map(|c| &c.msgs)
            .map(|m| m.packets)
            .sum();
        let ce: u64 = self.recv.iter().flat_map(|c| &c.msgs).map(|m| m.ce).sum();
        let cnps_out: u64 = self.recv.iter().flat_map(|c| &c.msgs).map(|m| m.cnps).sum();
        let wall = o.wall_ns.max(1) as f64;
        eprintln!(
            "rocegen {} (nic {}): {} in {:.3}s; sent {sent} pkts ({retx} retransmitted, {probes} tail probes, {timeouts} timeouts), \
             NAKs in {naks_in}, rewinds {rewinds}, resent {resent} B; \
             recv {recvd} pkts ({ce} CE, {ooo} out of order, {dups} duplicates), CNPs in {cnps_in} out {cnps_out} ({} on out-of-order), \
             ACKs {} ({} with SACK) NAKs {}, \
             send errors {}, foreign {}, malformed {}, bad ICRC {}; cpu {:.1} ms ({:.1}% of a core)",
            self.opts.host,
            self.opts.nic.as_str(),
            if o.complete { "complete" } else { "INCOMPLETE" },
            wall / 1e9,
            self.ctr.ooo_cnps,
            self.ctr.acks_sent,
            self.ctr.sacks_sent,
            self.ctr.naks_sent,
            self.ctr.send_errors,
            self.ctr.foreign,
            self.ctr.malformed,
            self.ctr.bad_icrc,
            o.cpu_ns as f64 / 1e6,
            100.0 * o.cpu_ns as f64 / wall
        );
    }
}
