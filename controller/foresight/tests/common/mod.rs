//! Shared fixture of the controller tests: BMv2 switches for the lab's
//! small leaf-spine (started by the test, so they outlive a killed
//! controller), the `foresight controller` binary as a child process
//! (killed on drop), an NDSP client, and direct P4Runtime reads of the
//! switches as a backup client (independent of the controller).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ndsp::proto::demand_signaling_client::DemandSignalingClient;
use ndsp::proto::{self, collective, demand_signal, endpoint};
use p4rt::proto::p4::v1 as p4;
use p4rt::{EntrySpec, P4Info, Switch, SwitchOptions};
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

/// The four switches of `leaf-spine-small` on BMv2.
pub struct Fabric {
    pub tools: bmv2::Toolchain,
    pub switches: BTreeMap<String, bmv2::Bmv2Switch>,
    pub dir: tempfile::TempDir,
}

impl Fabric {
    /// `None` (with a SKIPPED line) without BMv2.
    pub fn start(test: &str) -> Option<Fabric> {
        let tools = match bmv2::Toolchain::find() {
            Ok(t) => t,
            Err(missing) => {
                eprintln!("SKIPPED {test}: {missing}");
                return None;
            }
        };
        let mut switches = BTreeMap::new();
        for (name, id) in [("leaf1", 1), ("leaf2", 2), ("spine1", 3), ("spine2", 4)] {
            let spec = bmv2::SwitchSpec::new(name, id)
                .target_arg("--priority-queues")
                .target_arg("8");
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
        })
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.path().join("state.json")
    }

    /// Start the controller on this fabric.
    pub fn controller(&self, lead_ms: u64) -> Controller {
        self.controller_with(lead_ms, &[])
    }

    /// Start the controller with extra arguments.
    pub fn controller_with(&self, lead_ms: u64, extra: &[&str]) -> Controller {
        Controller::spawn(
            self.dir.path(),
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
    pub fn spawn(dir: &Path, switches: &Path, lead_ms: u64, extra: &[&str]) -> Controller {
        let ready = dir.join("ready.json");
        let _ = std::fs::remove_file(&ready);
        let log = dir.join(format!("controller-{}.log", now_unix_ns()));
        let child = Command::new(env!("CARGO_BIN_EXE_foresight"))
            .args(["controller", "--topology", TOPOLOGY, "--switches"])
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

pub fn header() -> Option<proto::RequestHeader> {
    Some(proto::RequestHeader {
        protocol_version: Some(ndsp::PROTOCOL_VERSION.into()),
        tenant: "acme".into(),
    })
}

/// Register job `job` with 8 ranks on each of `hosts`.
pub fn register(job: &str, hosts: &[&str]) -> proto::RegisterTopologyRequest {
    proto::RegisterTopologyRequest {
        header: header(),
        topology: Some(proto::Topology {
            job_id: job.into(),
            workload_kind: proto::WorkloadKind::Training as i32,
            world_size: 8 * hosts.len() as u32,
            ranks: (0..8 * hosts.len() as u32)
                .map(|r| proto::RankEndpoint {
                    rank: r,
                    device_id: format!("GPU-{}", r % 8),
                    host_address: hosts[(r / 8) as usize].into(),
                    nic: "mlx5_0".into(),
                    qp_range: None,
                })
                .collect(),
            library: proto::CollectiveLibrary::Nccl as i32,
            library_version: "2.21.5".into(),
            algorithms: vec![proto::CollectiveAlgorithm::Ring as i32],
        }),
    }
}

/// A ring all-reduce over every rank of `job`.
pub fn ring_allreduce(
    id: &str,
    job: &str,
    ranks: u32,
    channels: u32,
    start_offset_ns: u64,
    duration_ns: u64,
) -> proto::SubmitCollectiveRequest {
    proto::SubmitCollectiveRequest {
        header: header(),
        reference_unix_ns: 0,
        collective: Some(proto::Collective {
            collective_id: id.into(),
            job_id: job.into(),
            kind: proto::CollectiveKind::RingAllReduce as i32,
            ranks: (0..ranks).collect(),
            peer_ranks: vec![],
            size_bytes: 64 << 20,
            channels,
            start: Some(collective::Start::StartOffsetNs(start_offset_ns)),
            pacing: Some(collective::Pacing::DurationNs(duration_ns)),
            priority: proto::PriorityClass::IterationBlocking as i32,
            elasticity: proto::Elasticity::Inelastic as i32,
            deadline: None,
            recurrence: None,
        }),
    }
}

/// A host-to-host demand.
pub fn demand(
    id: &str,
    src: &str,
    dst: &str,
    start_offset_ns: u64,
    duration_ns: u64,
    rate_bps: u64,
    qp: Option<u32>,
) -> proto::DemandSignal {
    let host = |a: &str| {
        Some(proto::Endpoint {
            address: Some(endpoint::Address::HostAddress(a.into())),
        })
    };
    proto::DemandSignal {
        demand_id: id.into(),
        job_id: String::new(),
        source: host(src),
        destination: host(dst),
        start: Some(demand_signal::Start::StartOffsetNs(start_offset_ns)),
        size_bytes: (rate_bps as u128 * duration_ns as u128 / 8_000_000_000) as u64,
        pacing: Some(demand_signal::Pacing::DurationNs(duration_ns)),
        priority: proto::PriorityClass::Standard as i32,
        elasticity: proto::Elasticity::Inelastic as i32,
        deadline: None,
        dest_qp: qp,
        recurrence: None,
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

    /// Entries of `tables` on every switch, as `table|match|action(params)` strings.
    pub async fn entries(&mut self, tables: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        let info = self.info().await.clone();
        let mut out = BTreeMap::new();
        for (name, sw) in &self.sessions {
            let wanted: Vec<p4::Entity> = tables
                .iter()
                .map(|t| p4rt::entity::all_table_entries(&info, t).unwrap())
                .collect();
            let read = sw.read(wanted).await.unwrap();
            let mut set = BTreeSet::new();
            for e in read {
                let Some(p4::entity::Entity::TableEntry(t)) = e.entity else {
                    continue;
                };
                let spec = EntrySpec::from_entry(&info, &t).unwrap();
                let line = entry_line(&spec);
                assert!(
                    set.insert(line.clone()),
                    "duplicate entry on {name}: {line}"
                );
            }
            out.insert(name.clone(), set);
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
                .map(|t| {
                    p4::TableEntry {
                        table_id: t.preamble.as_ref().unwrap().id,
                        ..Default::default()
                    }
                    .into()
                })
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

/// A Telemetry Report v2.0 as `int.p4` sends it (UDP payload): INT-MD
/// instructions 0xF400 and Foresight DS 0x8000 (7 words per hop); `hops`
/// = (node id, ingress port, egress port, queue occupancy, egress
/// timestamp in µs, egress port tx bytes), the sink's first.
pub fn int_report(sink: u32, seq: u32, hops: &[(u32, u16, u16, u32, u64, u32)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&((2u32 << 28) | seq).to_be_bytes());
    b.extend_from_slice(&sink.to_be_bytes());
    let inner_words = (20 + 8 + 4 + 12 + hops.len() * 28 + 12) / 4;
    b.extend_from_slice(&[0x14, inner_words as u8, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 1,
    ]);
    b.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 0, 0, 0]);
    b.extend_from_slice(&[0x10, (3 + 7 * hops.len()) as u8, 0, 0]);
    b.extend_from_slice(&((2u32 << 28) | (7 << 8) | 4).to_be_bytes());
    b.extend_from_slice(&[0xf4, 0x00, 0x46, 0x53, 0x80, 0x00, 0, 0]);
    for &(node, ip, ep, occ, ts, tx) in hops {
        b.extend_from_slice(&node.to_be_bytes());
        b.extend_from_slice(&ip.to_be_bytes());
        b.extend_from_slice(&ep.to_be_bytes());
        b.extend_from_slice(&5u32.to_be_bytes());
        b.extend_from_slice(&((3u32 << 24) | occ).to_be_bytes());
        b.extend_from_slice(&ts.to_be_bytes());
        b.extend_from_slice(&tx.to_be_bytes());
    }
    b.extend_from_slice(&[0u8; 12]);
    b
}

/// A UDP port free now (for `--int-listen`).
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
