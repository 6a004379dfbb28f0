//! A throwaway etcd cluster for tests and benchmarks: `n` members of
//! Debian's `etcd` on loopback ports, in a temporary directory, each killed
//! by its PID when dropped (or on `kill`). Raft timings are short (50 ms
//! heartbeat, 500 ms election) so that one-second leases are allowed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Cluster {
    /// Start `n` members and wait until the cluster answers /health;
    /// `None` after a SKIPPED line naming `test` when etcd is missing.
    pub fn start(test: &str, n: usize) -> Option<Cluster> {
        let Some(etcd) = binary() else {
            crate::skip::skipped(
                test,
                "etcd not found (Debian package etcd-server, or FORESIGHT_ETCD)",
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("temporary directory");
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
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
            let child = Command::new(&etcd)
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
        let cluster = Cluster { members, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        for m in &cluster.members {
            while !healthy(&m.client_url) {
                if Instant::now() >= deadline {
                    // Its log goes with the temporary directory: say why here.
                    let log =
                        std::fs::read_to_string(cluster.dir.path().join(format!("{}.log", m.name)))
                            .unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    panic!(
                        "etcd member {} not healthy in 30 s ({}); its log ends:\n{}",
                        m.name,
                        m.client_url,
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Some(cluster)
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
