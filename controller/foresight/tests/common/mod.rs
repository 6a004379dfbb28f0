//! Shared fixture of the controller tests: BMv2 switches for the lab's
//! small leaf-spine (started by the test, so they outlive a killed
//! controller), the `foresight controller` binary as a child process
//! (killed on drop), an NDSP client, and direct P4Runtime reads of the
//! switches as a backup client (independent of the controller). The NDSP
//! request and INT report builders come from `testkit`, shared with the
//! daemon's unit tests.
#![allow(dead_code)]

pub mod certs;
pub mod http;
pub mod openssl;
pub mod replica;
pub mod tls;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ndsp::proto::demand_signaling_client::DemandSignalingClient;
use p4rt::proto::p4::v1 as p4;
use p4rt::{EntrySpec, P4Info, Switch, SwitchOptions};
// Each test binary uses some of these.
#[allow(unused_imports)]
pub use testkit::int::report as int_report;
#[allow(unused_imports)]
pub use testkit::requests::{demand, header, register, ring_allreduce};
use tonic::transport::Channel;

pub const TOPOLOGY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../bmv2-lab/topologies/leaf-spine-small.yaml"
);
/// The controller's election id; the test reads as a backup with 1.
pub const CONTROLLER_ELECTION_ID: u128 = 10;

/// Serialize the BMv2 tests of one binary (they are timing-sensitive and
/// the machine may have two cores).
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// A switches file for `leaf-spine-small` whose every switch is unreachable
/// (port 1): for tests of the controller's NDSP and HTTP side, which plans
/// and answers while it keeps retrying the switches.
pub fn unreachable_switches(dir: &Path) -> PathBuf {
    let path = dir.join("switches.yaml");
    let text: String = ["leaf1", "leaf2", "spine1", "spine2"]
        .iter()
        .map(|s| format!("{s}: {{addr: \"127.0.0.1:1\"}}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// The four switches of `leaf-spine-small` on BMv2.
pub struct Fabric {
    pub tools: bmv2::Toolchain,
    pub switches: BTreeMap<String, bmv2::Bmv2Switch>,
    pub dir: tempfile::TempDir,
    /// The topology file the controller is given.
    pub topology: PathBuf,
}

impl Fabric {
    /// The lab's small leaf-spine; `None` (with a SKIPPED line) without BMv2.
    pub fn start(test: &str) -> Option<Fabric> {
        let names = [("leaf1", 1), ("leaf2", 2), ("spine1", 3), ("spine2", 4)];
        Fabric::start_with(test, Path::new(TOPOLOGY), &names)
    }

    /// One BMv2 switch per switch of `topology` (a file the test wrote),
    /// with the topology's ids as device ids.
    pub fn start_topology(test: &str, topology: &Path) -> Option<Fabric> {
        let topo = planner::topology::yaml::load_file(topology).unwrap();
        let names: Vec<(String, u64)> = topo
            .switches()
            .iter()
            .map(|s| (s.name.clone(), u64::from(s.id)))
            .collect();
        let names: Vec<(&str, u64)> = names.iter().map(|(n, id)| (n.as_str(), *id)).collect();
        Fabric::start_with(test, topology, &names)
    }

    /// The small leaf-spine, each switch with `target_args` added.
    pub fn start_with_args(test: &str, target_args: &[String]) -> Option<Fabric> {
        let names = [("leaf1", 1), ("leaf2", 2), ("spine1", 3), ("spine2", 4)];
        Fabric::start_with_target_args(test, Path::new(TOPOLOGY), &names, target_args)
    }

    fn start_with(test: &str, topology: &Path, names: &[(&str, u64)]) -> Option<Fabric> {
        Fabric::start_with_target_args(test, topology, names, &[])
    }

    fn start_with_target_args(
        test: &str,
        topology: &Path,
        names: &[(&str, u64)],
        target_args: &[String],
    ) -> Option<Fabric> {
        let tools = testkit::skip::bmv2(test)?;
        let mut switches = BTreeMap::new();
        for &(name, id) in names {
            let mut spec = bmv2::SwitchSpec::new(name, id)
                .target_arg("--priority-queues")
                .target_arg("8");
            for a in target_args {
                spec = spec.target_arg(a.clone());
            }
            switches.insert(
                name.to_string(),
                bmv2::Bmv2Switch::start(&tools, spec).expect("BMv2 starts"),
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let mut yaml = String::new();
        for (name, sw) in &switches {
            yaml.push_str(&format!(
                "{name}: {{addr: \"{}\", device_id: {}}}\n",
                sw.grpc_addr(),
                sw.device_id()
            ));
        }
        std::fs::write(dir.path().join("switches.yaml"), yaml).unwrap();
        Some(Fabric {
            tools,
            switches,
            dir,
            topology: topology.to_path_buf(),
        })
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.path().join("state.json")
    }

    /// What the controller saved: the state file and its journal.
    pub fn saved_state(&self) -> Vec<u8> {
        let mut bytes = std::fs::read(self.state_file()).unwrap();
        bytes.extend(std::fs::read(self.dir.path().join("state.json.journal")).unwrap_or_default());
        bytes
    }

    /// Start the controller on this fabric.
    pub fn controller(&self, lead_ms: u64) -> Controller {
        self.controller_with(lead_ms, &[])
    }

    /// Start the controller with extra arguments.
    pub fn controller_with(&self, lead_ms: u64, extra: &[&str]) -> Controller {
        Controller::spawn_on(
            self.dir.path(),
            &self.topology,
            &self.dir.path().join("switches.yaml"),
            lead_ms,
            extra,
        )
    }

    /// A backup session with every switch, for reads (election id 1).
    pub async fn reader(&self) -> Reader {
        self.reader_with_id(1).await
    }

    /// A backup session with every switch, with its own election id
    /// (two live readers must differ).
    pub async fn reader_with_id(&self, election_id: u128) -> Reader {
        let mut sessions = BTreeMap::new();
        for (name, sw) in &self.switches {
            let options =
                SwitchOptions::new(sw.grpc_addr(), sw.device_id()).election_id(election_id);
            let s = Switch::connect_with_retry(options, Duration::from_secs(10))
                .await
                .expect("reader connects");
            sessions.insert(name.clone(), s);
        }
        Reader {
            sessions,
            info: None,
        }
    }
}

/// The controller binary as a child process.
pub struct Controller {
    pub child: Child,
    pub ndsp: String,
    pub http: String,
    pub ready: serde_json::Value,
    pub log: PathBuf,
}

impl Controller {
    /// On the lab's small leaf-spine.
    pub fn spawn(dir: &Path, switches: &Path, lead_ms: u64, extra: &[&str]) -> Controller {
        Controller::spawn_on(dir, Path::new(TOPOLOGY), switches, lead_ms, extra)
    }

    pub fn spawn_on(
        dir: &Path,
        topology: &Path,
        switches: &Path,
        lead_ms: u64,
        extra: &[&str],
    ) -> Controller {
        let ready = dir.join("ready.json");
        let _ = std::fs::remove_file(&ready);
        let log = dir.join(format!("controller-{}.log", now_unix_ns()));
        let child = Command::new(env!("CARGO_BIN_EXE_foresight"))
            .args(["controller", "--topology"])
            .arg(topology)
            .arg("--switches")
            .arg(switches)
            .arg("--state-file")
            .arg(dir.join("state.json"))
            .arg("--ready-file")
            .arg(&ready)
            .args(["--ndsp", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .args(if extra.contains(&"--election-id") {
                vec![]
            } else {
                vec![
                    "--election-id".to_string(),
                    CONTROLLER_ELECTION_ID.to_string(),
                ]
            })
            .args(["--lead-time-ms", &lead_ms.to_string()])
            .args(extra)
            .env("FORESIGHT_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("foresight binary runs");
        let mut c = Controller {
            child,
            ndsp: String::new(),
            http: String::new(),
            ready: serde_json::Value::Null,
            log,
        };
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                    c.ndsp = v["ndsp"].as_str().unwrap().to_string();
                    c.http = v["http"].as_str().unwrap().to_string();
                    c.ready = v;
                    return c;
                }
            }
            if let Ok(Some(status)) = c.child.try_wait() {
                panic!(
                    "controller exited with {status}:\n{}",
                    std::fs::read_to_string(&c.log).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "controller not ready in 60 s:\n{}",
                c.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no shutdown, no last words.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub async fn client(&self) -> DemandSignalingClient<Channel> {
        DemandSignalingClient::connect(format!("http://{}", self.ndsp))
            .await
            .expect("NDSP connects")
    }

    /// `GET path` on the admin endpoint, the body.
    pub fn get_text(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.http).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.split_once("\r\n\r\n").unwrap().1.to_string()
    }

    /// `POST path` on the admin endpoint: (status code, JSON body).
    pub fn post_json(&self, path: &str) -> (u16, serde_json::Value) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.http).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let json = serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        (code, json)
    }

    /// `GET path` on the admin endpoint, as JSON.
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let body = self.get_text(path);
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- controller log ---\n{}", self.log_text());
        }
    }
}

/// Reads of the switches (as a backup client), decoded by name.
pub struct Reader {
    pub sessions: BTreeMap<String, Switch>,
    info: Option<P4Info>,
}

/// Tables reservations write.
pub const DYNAMIC_TABLES: [&str; 4] = [
    "FsIngress.sr.reservation",
    "FsIngress.int_ingress.watchlist",
    "FsEgress.ecn.predrain",
    "FsEgress.ecn.dcqcn_port",
];

impl Reader {
    /// The P4Info the controller pushed (read back from a switch).
    pub async fn info(&mut self) -> &P4Info {
        if self.info.is_none() {
            let sw = self.sessions.values().next().unwrap();
            let config = sw
                .get_pipeline(
                    p4::get_forwarding_pipeline_config_request::ResponseType::P4infoAndCookie,
                )
                .await
                .unwrap()
                .expect("a pipeline is installed");
            self.info = Some(P4Info::new(config.p4info.unwrap()));
        }
        self.info.as_ref().unwrap()
    }

    /// The entries of `tables` on every switch, as read (meters included).
    pub async fn tables(&mut self, tables: &[&str]) -> BTreeMap<String, Vec<p4::TableEntry>> {
        let info = self.info().await.clone();
        let mut out = BTreeMap::new();
        for (name, sw) in &self.sessions {
            let wanted: Vec<p4::Entity> = tables
                .iter()
                .map(|t| p4rt::entity::all_table_entries(&info, t).unwrap())
                .collect();
            let read = sw.read(wanted).await.unwrap();
            let entries = read
                .into_iter()
                .filter_map(|e| match e.entity {
                    Some(p4::entity::Entity::TableEntry(t)) => Some(t),
                    _ => None,
                })
                .collect();
            out.insert(name.clone(), entries);
        }
        out
    }

    /// Entries of `tables` on every switch, as `table|match|action(params)` strings.
    pub async fn entries(&mut self, tables: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        let info = self.info().await.clone();
        let mut out = BTreeMap::new();
        for (name, read) in self.tables(tables).await {
            let mut set = BTreeSet::new();
            for t in read {
                let spec = EntrySpec::from_entry(&info, &t).unwrap();
                let line = entry_line(&spec);
                assert!(
                    set.insert(line.clone()),
                    "duplicate entry on {name}: {line}"
                );
            }
            out.insert(name, set);
        }
        out
    }

    /// Everything the controller owns on every switch (tables, members,
    /// groups, clone session), encoded, for exact before/after comparison.
    pub async fn everything(&mut self) -> BTreeMap<String, BTreeSet<Vec<u8>>> {
        use prost::Message;
        let info = self.info().await.clone();
        let mut out = BTreeMap::new();
        for (name, sw) in &self.sessions {
            let mut wanted: Vec<p4::Entity> = info
                .raw()
                .tables
                .iter()
                .map(|t| p4rt::entity::table_wildcard(&info, t.preamble.as_ref().unwrap().id))
                .collect();
            for p in &info.raw().action_profiles {
                let id = p.preamble.as_ref().unwrap().id;
                wanted.push(
                    p4::ActionProfileMember {
                        action_profile_id: id,
                        ..Default::default()
                    }
                    .into(),
                );
                wanted.push(
                    p4::ActionProfileGroup {
                        action_profile_id: id,
                        ..Default::default()
                    }
                    .into(),
                );
            }
            let read = sw.read(wanted).await.unwrap();
            let mut set = BTreeSet::new();
            for e in read {
                let mut e = installer::intent::normal_form(e);
                if let Some(p4::entity::Entity::TableEntry(t)) = &mut e.entity {
                    t.counter_data = None;
                }
                assert!(set.insert(e.encode_to_vec()), "duplicate entity on {name}");
            }
            out.insert(name.clone(), set);
        }
        out
    }
}

pub fn entry_line(spec: &EntrySpec) -> String {
    let matches: Vec<String> = spec
        .matches
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let params: Vec<String> = spec
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!(
        "{}|{}|{}({})",
        spec.table,
        matches.join(","),
        spec.action.clone().unwrap_or_default(),
        params.join(",")
    )
}

/// A UDP port free now (for `--int-listen`).
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
