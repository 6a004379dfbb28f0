//! Controller replicas (`foresight controller --etcd`) as child processes
//! on a test fabric: spawned with a fixed NDSP port, found as leader by
//! their ready file, paused, killed (SIGKILL) and reaped by PID.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::etcd::Cluster;

use super::Fabric;

/// Exit status of a replica that stepped down (`STEP_DOWN_EXIT` in `daemon/ha/fence.rs`).
pub const STEP_DOWN_EXIT: i32 = 75;

pub struct Replica {
    pub name: String,
    pub child: Option<Child>,
    pub ndsp: String,
    /// Admin HTTP address.
    pub http: String,
    pub ready: PathBuf,
    pub log: PathBuf,
}

impl Replica {
    pub fn spawn(fabric: &Fabric, etcd: &str, name: &str) -> Replica {
        let dir = fabric.dir.path();
        let ports = testkit::ports::loopback_ports(2);
        let (ndsp, http) = (
            format!("127.0.0.1:{}", ports[0]),
            format!("127.0.0.1:{}", ports[1]),
        );
        let ready = dir.join(format!("{name}.ready"));
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_foresight"))
            .args(["controller", "--topology"])
            .arg(&fabric.topology)
            .arg("--switches")
            .arg(dir.join("switches.yaml"))
            .args(["--etcd", etcd, "--replica", name, "--lease-ttl-s", "1"])
            .args(["--state-file", "none", "--ready-file"])
            .arg(&ready)
            .args(["--ndsp", &ndsp, "--http", &http])
            .args(["--lead-time-ms", "100"])
            .env("FORESIGHT_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("foresight binary runs");
        Replica {
            name: name.into(),
            child: Some(child),
            ndsp,
            http,
            ready,
            log,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The ready file (written once this replica leads and reconciled).
    pub fn ready(&self) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(&self.ready).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// True while the process runs; forgets it (and its ready file) once
    /// it exited.
    pub fn running(&mut self) -> bool {
        let exited = match self.child.as_mut() {
            None => return false,
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
        };
        if exited {
            self.child = None;
            let _ = std::fs::remove_file(&self.ready);
        }
        !exited
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.child.as_ref().expect("running").id() as i32;
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.ready);
    }

    /// Wait for the process to exit on its own; its status code.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        let child = self.child.as_mut()?;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
        }
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- replica {} log ---\n{}", self.name, self.log_text());
        }
    }
}

/// Three replicas on `fabric` and `etcd`; the index of the first leader.
pub fn start_replicas(fabric: &Fabric, etcd: &Cluster) -> (Vec<Replica>, usize) {
    let mut replicas: Vec<Replica> = ["r0", "r1", "r2"]
        .iter()
        .map(|n| Replica::spawn(fabric, &etcd.endpoints(), n))
        .collect();
    let leader = wait_leader(&mut replicas, None, Duration::from_secs(60));
    (replicas, leader)
}

/// The replica (other than `not`) whose ready file appears.
pub fn wait_leader(replicas: &mut [Replica], not: Option<usize>, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        for (i, r) in replicas.iter_mut().enumerate() {
            if Some(i) != not && r.running() && r.ready().is_some() {
                return i;
            }
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = replicas
                .iter()
                .map(|r| format!("--- {} ---\n{}", r.name, r.log_text()))
                .collect();
            panic!("no leader in {within:?}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
