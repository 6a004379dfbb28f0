//! User-space "bump in the wire" between two interfaces of one namespace:
//! a rate-limited FIFO that CE-marks ECN-capable IPv4 packets above a queue
//! threshold and drops at random, like a BMv2 egress queue; it can also
//! hold chosen packets back so that later ones overtake them (reordering,
//! as on two paths of different delay).
//!
//! Exists because minimal kernels (CI VMs) often lack sch_netem, sch_red and
//! fq_codel, so tests cannot rely on qdiscs to mark or lose packets.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::gen::SplitMix64;
use crate::packet::ipv4_checksum;

/// Impairment of the A->B direction (B->A is forwarded untouched).
#[derive(Debug, Clone)]
pub struct Impair {
    /// Dequeue rate of IPv4 packets; 0 = no queue, forward at once.
    pub rate_pps: f64,
    /// Tail-drop limit of the queue.
    pub queue_pkts: usize,
    /// Mark CE on ECT packets arriving to a queue at least this long.
    pub ce_threshold_pkts: usize,
    /// Random loss of UDP packets, probability in [0, 1].
    pub loss: f64,
    pub seed: u64,
    /// Drop exactly these UDP packets, counted from 1 in arrival order
    /// (a chosen loss, e.g. the last packet of a message).
    pub drop_udp: Vec<u64>,
    /// Flip one payload bit of these UDP packets (counted like `drop_udp`):
    /// the IP and UDP checksums still hold, only the ICRC catches it.
    pub corrupt_udp: Vec<u64>,
    /// Hold every Nth UDP packet (counted like `drop_udp`; 0 = none) for
    /// `reorder_delay` while the others pass: it arrives after those sent
    /// in that time.
    pub reorder_every_udp: u64,
    pub reorder_delay: Duration,
    /// Every B->A packet (ACKs, NAKs, CNPs) is this late: a longer round
    /// trip, so that several packets follow a gap before its NAK takes
    /// effect, as on a fabric whose RTT spans several packets.
    pub reverse_delay: Duration,
}

impl Default for Impair {
    fn default() -> Self {
        Impair {
            rate_pps: 0.0,
            queue_pkts: 1000,
            ce_threshold_pkts: usize::MAX,
            loss: 0.0,
            seed: 1,
            drop_udp: Vec::new(),
            corrupt_udp: Vec::new(),
            reorder_every_udp: 0,
            reorder_delay: Duration::ZERO,
            reverse_delay: Duration::ZERO,
        }
    }
}

#[derive(Debug, Default)]
pub struct Stats {
    pub forwarded: AtomicU64,
    pub ce_marked: AtomicU64,
    pub lost: AtomicU64,
    pub tail_dropped: AtomicU64,
    pub corrupted: AtomicU64,
    /// Packets held back (reordered).
    pub delayed: AtomicU64,
}

/// Running relay; stops and joins its threads on drop.
pub struct Relay {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub stats: Arc<Stats>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

struct PacketSock(OwnedFd);

impl PacketSock {
    /// AF_PACKET socket bound to `ifname`, 50 ms receive timeout.
    fn open(ifname: &str) -> io::Result<PacketSock> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let cname = std::ffi::CString::new(ifname).map_err(io::Error::other)?;
        // SAFETY: valid NUL-terminated string.
        let idx = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if idx == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: all-zero sockaddr_ll is valid.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = idx as i32;
        // SAFETY: pointer/size of a live sockaddr_ll.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 50_000,
        };
        // SAFETY: pointer/size of a live timeval.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as u32,
            );
        }
        Ok(PacketSock(fd))
    }

    /// Next frame received from the wire (our own transmissions skipped);
    /// None on timeout.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        loop {
            // SAFETY: all-zero sockaddr_ll is valid.
            let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
            let mut len = size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: buffers valid for the given sizes.
            let n = unsafe {
                libc::recvfrom(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return None;
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(n as usize);
        }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: buffer valid for its length; socket is bound.
        unsafe {
            libc::send(self.0.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0);
        }
    }
}

/// Opens the two packet sockets inside namespace `ns` (on a helper thread,
/// since setns changes only the calling thread).
fn open_in_ns(ns: &str, if_a: &str, if_b: &str) -> Result<(PacketSock, PacketSock)> {
    let (ns, a, b) = (ns.to_string(), if_a.to_string(), if_b.to_string());
    std::thread::spawn(move || -> Result<(PacketSock, PacketSock)> {
        let f = File::open(format!("/run/netns/{ns}"))
            .or_else(|_| File::open(format!("/var/run/netns/{ns}")))
            .with_context(|| format!("opening netns {ns}"))?;
        // SAFETY: valid namespace fd; affects only this helper thread.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            bail!("setns {ns}: {}", io::Error::last_os_error());
        }
        let sa = PacketSock::open(&a).with_context(|| format!("packet socket on {a}"))?;
        let sb = PacketSock::open(&b).with_context(|| format!("packet socket on {b}"))?;
        Ok((sa, sb))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("netns helper thread panicked"))?
}

const ETH_HLEN: usize = 14;

/// ECN-capable IPv4 frame: returns the IP header offset.
fn ipv4(frame: &[u8]) -> Option<usize> {
    (frame.len() >= ETH_HLEN + 20 && frame[12..14] == [0x08, 0x00]).then_some(ETH_HLEN)
}

fn mark_ce(frame: &mut [u8]) -> bool {
    let Some(o) = ipv4(frame) else { return false };
    let ecn = frame[o + 1] & 3;
    if ecn == 0 || ecn == 3 {
        return false;
    }
    frame[o + 1] |= 3;
    let ihl = usize::from(frame[o] & 0xF) * 4;
    if frame.len() < o + ihl {
        return false;
    }
    frame[o + 10] = 0;
    frame[o + 11] = 0;
    let c = ipv4_checksum(&frame[o..o + ihl]);
    frame[o + 10..o + 12].copy_from_slice(&c.to_be_bytes());
    true
}

fn is_udp(frame: &[u8]) -> bool {
    ipv4(frame).is_some_and(|o| frame[o + 9] == 17)
}

/// Frames waiting with the time they are due (queued in time order: every
/// frame of a line waits the same delay).
type DelayLine = Arc<(Mutex<VecDeque<(Instant, Vec<u8>)>>, Condvar)>;

fn hold(line: &DelayLine, at: Instant, frame: Vec<u8>) {
    let (lock, cv) = &**line;
    lock.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back((at, frame));
    cv.notify_one();
}

/// A thread that sends each frame of the returned line on `out` when it is
/// due, calling `sent` after each.
fn delay_line(
    out: Arc<PacketSock>,
    stop: Arc<AtomicBool>,
    sent: impl Fn() + Send + 'static,
) -> (DelayLine, JoinHandle<()>) {
    let line: DelayLine = Arc::default();
    let l = line.clone();
    let t = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let (lock, cv) = &*l;
            let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let wait = match q.front() {
                Some(&(at, _)) if at <= now => Duration::ZERO,
                Some(&(at, _)) => (at - now).min(Duration::from_millis(50)),
                None => Duration::from_millis(50),
            };
            if !wait.is_zero() {
                drop(cv.wait_timeout(q, wait).unwrap_or_else(|e| e.into_inner()));
                continue;
            }
            if let Some((_, frame)) = q.pop_front() {
                drop(q);
                out.send(&frame);
                sent();
            }
        }
    });
    (line, t)
}

/// Starts relaying between `if_a` and `if_b` in namespace `ns`.
pub fn start(ns: &str, if_a: &str, if_b: &str, imp: Impair) -> Result<Relay> {
    let (sa, sb) = open_in_ns(ns, if_a, if_b)?;
    let (sa, sb) = (Arc::new(sa), Arc::new(sb));
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Stats::default());
    let queue: Arc<(Mutex<VecDeque<Vec<u8>>>, Condvar)> = Arc::default();
    let mut threads = Vec::new();
    // A -> B packets held back, each sent at its time.
    let held = (imp.reorder_every_udp > 0).then(|| {
        let stats = stats.clone();
        let (line, t) = delay_line(sb.clone(), stop.clone(), move || {
            stats.forwarded.fetch_add(1, Ordering::Relaxed);
        });
        threads.push(t);
        line
    });

    // B -> A: plain forwarding (ACKs, CNPs, ARP replies), or late by
    // `reverse_delay`.
    {
        let (sa, sb, stop) = (sa.clone(), sb.clone(), stop.clone());
        let late = (!imp.reverse_delay.is_zero()).then(|| {
            let (line, t) = delay_line(sa.clone(), stop.clone(), || {});
            threads.push(t);
            line
        });
        let delay = imp.reverse_delay;
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::Relaxed) {
                if let Some(n) = sb.recv(&mut buf) {
                    match &late {
                        Some(line) => hold(line, Instant::now() + delay, buf[..n].to_vec()),
                        None => sa.send(&buf[..n]),
                    }
                }
            }
        }));
    }
    // A -> B ingress: loss, marking, enqueue.
    {
        let (sa, sb, stop, stats, queue, held) = (
            sa.clone(),
            sb.clone(),
            stop.clone(),
            stats.clone(),
            queue.clone(),
            held.clone(),
        );
        let imp = imp.clone();
        threads.push(std::thread::spawn(move || {
            let mut rng = SplitMix64::new(imp.seed);
            let mut buf = vec![0u8; 65536];
            let mut udp_seen = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Some(n) = sa.recv(&mut buf) else { continue };
                let mut frame = buf[..n].to_vec();
                if is_udp(&frame) {
                    udp_seen += 1;
                    if imp.drop_udp.contains(&udp_seen) {
                        stats.lost.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if imp.corrupt_udp.contains(&udp_seen) {
                        // The byte before the 4-byte ICRC (UDP checksum 0;
                        // the frame may carry Ethernet padding after it).
                        let total = usize::from(u16::from_be_bytes([
                            frame[ETH_HLEN + 2],
                            frame[ETH_HLEN + 3],
                        ]));
                        if let Some(b) = (total > 5)
                            .then(|| frame.get_mut(ETH_HLEN + total - 5))
                            .flatten()
                        {
                            *b ^= 0x01;
                            stats.corrupted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if let Some(line) = held
                        .as_ref()
                        .filter(|_| udp_seen % imp.reorder_every_udp == 0)
                    {
                        stats.delayed.fetch_add(1, Ordering::Relaxed);
                        hold(line, Instant::now() + imp.reorder_delay, frame);
                        continue;
                    }
                }
                if ipv4(&frame).is_none() || imp.rate_pps <= 0.0 {
                    if is_udp(&frame) && imp.loss > 0.0 && rng.unit() < imp.loss {
                        stats.lost.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    sb.send(&frame);
                    stats.forwarded.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if is_udp(&frame) && imp.loss > 0.0 && rng.unit() < imp.loss {
                    stats.lost.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let (lock, cv) = &*queue;
                let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
                if q.len() >= imp.queue_pkts {
                    stats.tail_dropped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if q.len() >= imp.ce_threshold_pkts && mark_ce(&mut frame) {
                    stats.ce_marked.fetch_add(1, Ordering::Relaxed);
                }
                q.push_back(frame);
                cv.notify_one();
            }
        }));
    }
    // A -> B egress: paced dequeue on a deadline schedule.
    if imp.rate_pps > 0.0 {
        let (sb, stop, stats, queue) = (sb.clone(), stop.clone(), stats.clone(), queue.clone());
        let interval = Duration::from_secs_f64(1.0 / imp.rate_pps);
        threads.push(std::thread::spawn(move || {
            let mut next = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let (lock, cv) = &*queue;
                let frame = {
                    let mut q = lock.lock().unwrap_or_else(|e| e.into_inner());
                    if q.is_empty() {
                        let (g, _) = cv
                            .wait_timeout(q, Duration::from_millis(50))
                            .unwrap_or_else(|e| e.into_inner());
                        q = g;
                    }
                    q.pop_front()
                };
                let Some(frame) = frame else { continue };
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else if now > next + interval {
                    next = now; // idle link: no credit accumulates
                }
                sb.send(&frame);
                stats.forwarded.fetch_add(1, Ordering::Relaxed);
                next += interval;
            }
        }));
    }
    Ok(Relay {
        stop,
        threads,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ce_marking_only_for_ect_and_fixes_checksum() {
        let mut f = vec![0u8; 14 + 20];
        f[12] = 0x08;
        f[14] = 0x45;
        f[15] = (24 << 2) | 0b10;
        f[14 + 9] = 17;
        let c = ipv4_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert!(mark_ce(&mut f));
        assert_eq!(f[15] & 3, 3);
        assert_eq!(ipv4_checksum(&f[14..34]), 0);
        assert!(!mark_ce(&mut f), "already CE");
        f[15] = 24 << 2; // not ECT
        assert!(!mark_ce(&mut f));
        f[12] = 0x08;
        f[13] = 0x06; // ARP
        assert!(!mark_ce(&mut f));
    }
}
