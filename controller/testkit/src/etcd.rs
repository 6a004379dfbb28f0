//! A throwaway etcd cluster for tests and benchmarks: `n` members of
//! Debian's `etcd` on loopback ports, in a temporary directory, each killed
//! by its PID when dropped (or on `kill`). Raft timings are short (50 ms
//! heartbeat, 500 ms election) so that one-second leases are allowed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The etcd binary: `$FORESIGHT_ETCD` or `etcd` on PATH.
pub fn binary() -> Option<String> {
    let name = std::env::var("FORESIGHT_ETCD").unwrap_or_else(|_| "etcd".into());
    Command::new(&name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()
        .filter(|s| s.success())
        .map(|_| name)
}

pub struct Member {
    pub name: String,
    pub client_url: String,
    child: Option<Child>,
}

pub struct Cluster {
    pub members: Vec<Member>,
    pub dir: tempfile::TempDir,
}

/// Starts of a cluster before giving up: a port chosen free can still be
/// taken before etcd binds it (by another process).
const ATTEMPTS: usize = 3;

/// Why a start did not give a healthy cluster.
enum Failed {
    /// A member could not bind its port: worth trying new ones.
    PortTaken,
    /// Anything else, with what to say.
    Other(String),
}

impl Cluster {
    /// Start `n` members and wait until the cluster answers /health (new
    /// ports, up to three times, when one was taken); `None` after a
    /// SKIPPED line naming `test` when etcd is missing.
    pub fn start(test: &str, n: usize) -> Option<Cluster> {
        let Some(etcd) = binary() else {
            crate::skip::skipped(
                test,
                "etcd not found (Debian package etcd-server, or FORESIGHT_ETCD)",
            );
            return None;
        };
        for attempt in 1..=ATTEMPTS {
            let chosen = crate::ports::loopback_ports(2 * n);
            let ports: Vec<(u16, u16)> = chosen.chunks(2).map(|p| (p[0], p[1])).collect();
            match Cluster::try_start(&etcd, &ports) {
                Ok(cluster) => return Some(cluster),
                Err(Failed::PortTaken) if attempt < ATTEMPTS => {
                    eprintln!("etcd: a chosen port was taken before etcd bound it; new ports");
                }
                Err(Failed::PortTaken) => panic!("etcd: ports taken in {ATTEMPTS} attempts"),
                Err(Failed::Other(why)) => panic!("{why}"),
            }
        }
        unreachable!("every attempt returns or panics")
    }

    /// One start, member `i` on client and peer ports `ports[i]`.
    fn try_start(etcd: &str, ports: &[(u16, u16)]) -> Result<Cluster, Failed> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        // One token per cluster: tests of one process run clusters side by side.
        static CLUSTERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let token = format!(
            "foresight-test-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut members = Vec::new();
        for (i, (client, peer)) in ports.iter().enumerate() {
            let name = format!("m{i}");
            let client_url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let log = std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap();
            let child = Command::new(etcd)
                .args(["--name", &name])
                .arg("--data-dir")
                .arg(dir.path().join(&name))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                .args(["--max-txn-ops", "8192", "--max-request-bytes", "16777216"])
                .args(["--logger", "zap", "--log-level", "warn"])
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("etcd starts");
            members.push(Member {
                name,
                client_url,
                child: Some(child),
            });
        }
        // Dropped on failure: every member killed, the directory removed.
        let mut cluster = Cluster { members, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        for i in 0..cluster.members.len() {
            while !healthy(&cluster.members[i].client_url) {
                let exited = cluster.members[i]
                    .child
                    .as_mut()
                    .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
                // Its log goes with the temporary directory: say why here.
                let m = &cluster.members[i];
                let log =
                    std::fs::read_to_string(cluster.dir.path().join(format!("{}.log", m.name)))
                        .unwrap_or_default();
                if exited && log.contains("address already in use") {
                    return Err(Failed::PortTaken);
                }
                if exited || Instant::now() >= deadline {
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    return Err(Failed::Other(format!(
                        "etcd member {} {} ({}); its log ends:\n{}",
                        m.name,
                        if exited {
                            "exited"
                        } else {
                            "not healthy in 30 s"
                        },
                        m.client_url,
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(cluster)
    }

    /// Client endpoints, comma-separated (for `--etcd`).
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| m.client_url.trim_start_matches("http://").to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// `GET /health` says true.
pub fn healthy(client_url: &str) -> bool {
    let addr = client_url.trim_start_matches("http://");
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member whose port is taken is told apart from other failures
    /// (the start then tries new ports), and nothing of it is left running.
    #[test]
    fn a_taken_port_is_told_apart() {
        let Some(etcd) = binary() else {
            crate::skip::skipped("a_taken_port_is_told_apart", "etcd not found");
            return;
        };
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ports = crate::ports::loopback_ports(1);
        let client = taken.local_addr().unwrap().port();
        match Cluster::try_start(&etcd, &[(client, ports[0])]) {
            Err(Failed::PortTaken) => {}
            Err(Failed::Other(why)) => panic!("not told apart: {why}"),
            Ok(_) => panic!("etcd started on a taken port"),
        }
        let cluster = Cluster::start("a_taken_port_is_told_apart", 1).unwrap();
        assert!(healthy(&cluster.members[0].client_url));
    }
}
