//! The host: its send and receive connections, and the single-threaded
//! event loop (`run`) that drains the socket and dispatches each packet,
//! runs the timers, paces the sends and sleeps in ppoll until the next
//! deadline or packet.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::Ipv4Addr;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::opts::{Nic, Outcome, RunOpts};
use super::receiver::{RecvConn, RecvMsg, STOP_GRACE_NS};
use super::sender::{SendConn, SendMsg};
use crate::dcqcn::Rp;
use crate::packet::{self, PacketError, Roce, ECN_CE, ECN_ECT0, ROCE_PORT};
use crate::sack::{PlacementWindow, Scoreboard};
use crate::spec::Spec;
use crate::sys::{self, RawSender, RoceReceiver};

/// Monotonic clock expressed in unix ns.
pub(super) struct Clock {
    pub(super) base_unix: u64,
    pub(super) base: Instant,
}

impl Clock {
    fn now(&self) -> u64 {
        self.base_unix + self.base.elapsed().as_nanos() as u64
    }
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) foreign: u64,
    pub(super) malformed: u64,
    pub(super) send_errors: u64,
    /// Packets dropped because their ICRC did not match.
    pub(super) bad_icrc: u64,
    pub(super) acks_sent: u64,
    pub(super) naks_sent: u64,
    /// ACKs that carried a SACK extension (out-of-order NIC).
    pub(super) sacks_sent: u64,
    /// CNPs sent with a NAK (`--cnp-on-ooo`).
    pub(super) ooo_cnps: u64,
}

pub(super) struct Host {
    pub(super) spec: Spec,
    pub(super) opts: RunOpts,
    pub(super) ip: Ipv4Addr,
    pub(super) send: Vec<SendConn>,
    pub(super) recv: Vec<RecvConn>,
    /// local QP -> index into send (our src_qp) / recv (our dest_qp).
    pub(super) send_by_qp: HashMap<u32, usize>,
    pub(super) recv_by_qp: HashMap<u32, usize>,
    /// Completion time of each incoming flow (indexed by spec flow).
    pub(super) recv_done: Vec<Option<u64>>,
    /// `after` of each flow as flow indices.
    pub(super) deps: Vec<Vec<usize>>,
    pub(super) raw: RawSender,
    pub(super) ident: u16,
    pub(super) buf: Vec<u8>,
    pub(super) ctr: Counters,
    pub(super) rate_csv: BufWriter<File>,
}

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

    pub(super) fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1).max(1);
        self.ident
    }

    pub(super) fn transmit(&mut self, dst: Ipv4Addr) {
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
            Roce::Ack { bth, aeth, sack } => self.on_ack(bth, aeth, sack, src, now)?,
            Roce::Cnp { bth } => self.on_cnp(bth, src, now)?,
        }
        Ok(())
    }
}
