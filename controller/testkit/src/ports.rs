//! Loopback ports for servers a test starts as separate processes. A port
//! found free by binding port 0 comes from the kernel's ephemeral range,
//! which is also where every outgoing connection draws its local port: in
//! the time between choosing it and the server binding it, a connection
//! (the tests' own, a switch's, a health probe's) can take it, and the
//! server fails with "address already in use". Ports below the ephemeral
//! range are never handed out that way.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// Below Linux's default ephemeral range (32768-60999) and above the
/// well-known and most registered service ports.
const FIRST: u32 = 20_000;
const LAST: u32 = 32_767;

/// Ports this process has tried so far (one is tried again only after the
/// whole range).
static NEXT: AtomicU32 = AtomicU32::new(0);

/// `n` distinct loopback ports that were free a moment ago and that the
/// kernel will not give to a connection meanwhile.
pub fn loopback_ports(n: usize) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    let mut tried = 0;
    while out.len() < n {
        assert!(
            tried <= LAST - FIRST,
            "no free loopback port in {FIRST}-{LAST}"
        );
        tried += 1;
        let port = candidate(NEXT.fetch_add(1, Ordering::Relaxed));
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            out.push(port);
        }
    }
    out
}

/// The `i`-th port this process tries. Each process starts at its own
/// place in the range (by PID), so that test processes running side by
/// side rarely try the same ports.
fn candidate(i: u32) -> u16 {
    let span = LAST - FIRST + 1;
    let start = std::process::id().wrapping_mul(7_919) % span;
    (FIRST + (start + i % span) % span) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ports are distinct and outside the ephemeral range.
    #[test]
    fn ports_are_distinct_and_below_the_ephemeral_range() {
        let mut ports = loopback_ports(50);
        ports.extend(loopback_ports(50));
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 100);
        for p in &ports {
            assert!((FIRST..=LAST).contains(&u32::from(*p)), "{p}");
        }
    }

    /// A port something listens on is skipped.
    #[test]
    fn a_port_in_use_is_skipped() {
        let next = NEXT.load(Ordering::Relaxed);
        // Occupy the ports the next few calls would try first.
        let held: Vec<TcpListener> = (0..20)
            .filter_map(|k| TcpListener::bind(("127.0.0.1", candidate(next + k))).ok())
            .collect();
        let taken: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        for p in loopback_ports(5) {
            assert!(!taken.contains(&p), "{p} is held");
        }
    }
}
