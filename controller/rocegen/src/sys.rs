//! Thin libc wrappers: raw IPv4 send socket, RoCEv2 receive socket (whole
//! packets, for the ICRC), nanosecond-timeout poll, CPU accounting.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(fd: &OwnedFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live i32 with its size.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&v as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn sockaddr(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from(ip).to_be();
    sa
}

/// IPPROTO_RAW socket: we write the whole IPv4 header (IP_HDRINCL implied),
/// so TOS/ECN, identification and UDP source port are ours to choose.
pub struct RawSender {
    fd: OwnedFd,
}

impl RawSender {
    pub fn new() -> io::Result<RawSender> {
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) })?;
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 1 << 20)?;
        Ok(RawSender { fd })
    }

    pub fn send(&self, pkt: &[u8], dst: Ipv4Addr) -> io::Result<()> {
        let sa = sockaddr(dst, 0);
        // SAFETY: buffer and sockaddr pointers are valid for the given sizes.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                pkt.as_ptr().cast(),
                pkt.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// RoCEv2 receive socket. The packets are read whole (from the IPv4
/// header) from a raw socket for UDP, because the ICRC a NIC checks covers
/// IP header fields (identification, flags, lengths) that a UDP socket
/// hides. A UDP socket bound to the port, taking nothing (a BPF filter that
/// drops all), stops the kernel answering the traffic with ICMP port
/// unreachable.
pub struct RoceReceiver {
    fd: OwnedFd,
    _port_holder: OwnedFd,
    port: u16,
}

pub struct Received {
    /// Length of the IPv4 packet in the buffer.
    pub len: usize,
}

impl RoceReceiver {
    pub fn bind(port: u16) -> io::Result<RoceReceiver> {
        // SAFETY: plain socket(2) call; the result is checked.
        let holder = cvt(unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: holder is a fresh descriptor we own.
        let holder = unsafe { OwnedFd::from_raw_fd(holder) };
        let mut drop_all = [libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        }];
        let program = libc::sock_fprog {
            len: 1,
            filter: drop_all.as_mut_ptr(),
        };
        // SAFETY: passes a live sock_fprog with its size; the kernel copies
        // the one-instruction program.
        cvt(unsafe {
            libc::setsockopt(
                holder.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&program as *const libc::sock_fprog).cast(),
                size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        })?;
        let sa = sockaddr(Ipv4Addr::UNSPECIFIED, port);
        // SAFETY: sockaddr pointer valid for its size.
        cvt(unsafe {
            libc::bind(
                holder.as_raw_fd(),
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })?;
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        })?;
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20)?;
        Ok(RoceReceiver {
            fd,
            _port_holder: holder,
            port,
        })
    }

    /// One IPv4 packet for the port (other UDP traffic of the host is
    /// skipped), or None when the queue is empty.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        loop {
            // SAFETY: buf is valid for writes of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                    _ => Err(e),
                };
            }
            let pkt = &buf[..(n as usize).min(buf.len())];
            let ihl = usize::from(pkt.first().copied().unwrap_or(0) & 0xF) * 4;
            let dst_port = pkt
                .get(ihl + 2..ihl + 4)
                .map(|p| u16::from_be_bytes([p[0], p[1]]));
            if dst_port == Some(self.port) {
                return Ok(Some(Received { len: pkt.len() }));
            }
        }
    }

    /// Sleeps until readable or `timeout_ns` passed (ns resolution, unlike
    /// poll's ms, which matters at 5,000 pps).
    pub fn wait(&self, timeout_ns: u64) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: one valid pollfd, valid timespec, no signal mask.
        let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Tighter timer slack (default 50 µs) for lower pacing jitter.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// User+system CPU time of this process, ns.
pub fn cpu_time_ns() -> u64 {
    // SAFETY: getrusage fills a POD struct.
    let mut ru: libc::rusage = unsafe { zeroed() };
    // SAFETY: valid pointer to rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
