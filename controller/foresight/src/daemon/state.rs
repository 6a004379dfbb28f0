//! The controller's intended state: registered jobs and reservations with
//! their flows, windows and paths. Everything the switches should hold is
//! derived from it (see `desired.rs`), so it is the one thing that must
//! survive a restart: every change is committed before it is answered (to
//! the state file's journal, `journal.rs`, or to etcd), and a restarted
//! controller reloads it and reconciles the switches with it. The JSON
//! snapshot is written atomically (temp file + rename, the temp file
//! fsync'd before the rename and the directory after it), so neither a
//! killed controller nor a machine crash loses an answered change.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use ndsp::types::{ReasonCode, ReservationStatus};
use serde::{Deserialize, Serialize};

use super::live_reservations::LiveReservations;

/// Version of the state file format.
pub const STATE_VERSION: u32 = 1;

/// Finished (expired or cancelled) reservations kept for `GetReservation`.
pub const HISTORY_LIMIT: usize = 1000;

/// Everything the controller must remember.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// Name of the fabric the state belongs to (checked on load).
    pub fabric: String,
    /// Unix ns of the planner's time 0 (planner times are ns since then).
    pub epoch_unix_ns: u64,
    /// Next sequence number (orders reservations; later ones never evict
    /// the entries of earlier ones).
    pub next_seq: u64,
    /// Next destination QP the controller hands out, per destination host.
    pub next_qp: BTreeMap<String, u32>,
    /// Registered job topologies.
    pub jobs: Vec<Job>,
    /// Live reservations (scheduled or installed), in sequence order.
    pub reservations: LiveReservations,
    /// Fabric links an operator took down (`foresight link down`), both
    /// directions of each; absent in files written before link state.
    #[serde(default)]
    pub links_down: Vec<LinkRef>,
    /// Finished reservations (expired or cancelled), oldest first; kept in
    /// memory for `GetReservation`, not in the file (a restart forgets them).
    #[serde(skip)]
    pub history: Vec<Reservation>,
}

impl State {
    pub fn new(fabric: &str, epoch_unix_ns: u64) -> State {
        State {
            version: STATE_VERSION,
            fabric: fabric.to_string(),
            epoch_unix_ns,
            next_seq: 1,
            next_qp: BTreeMap::new(),
            jobs: Vec::new(),
            reservations: LiveReservations::default(),
            links_down: Vec::new(),
            history: Vec::new(),
        }
    }

    /// Load a state file; `Ok(None)` if it does not exist.
    pub fn load(path: &Path, fabric: &str) -> anyhow::Result<Option<State>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(e).with_context(|| format!("reading state file {}", path.display()))
            }
        };
        let state = State::from_json(text.as_bytes(), fabric)
            .map_err(|e| anyhow::anyhow!("state file {}: {e:#}", path.display()))?;
        Ok(Some(state))
    }

    /// Parse a saved state (a file's or etcd's) and check it belongs to
    /// `fabric` and is a version this controller reads.
    pub fn from_json(bytes: &[u8], fabric: &str) -> anyhow::Result<State> {
        let state: State =
            serde_json::from_slice(bytes).context("not a Foresight state (fix or remove it)")?;
        if state.version != STATE_VERSION {
            bail!(
                "version {} but this controller reads version {STATE_VERSION}",
                state.version
            );
        }
        if state.fabric != fabric {
            bail!(
                "belongs to fabric {:?}, not {fabric:?}: pass the right --topology or another --state-file",
                state.fabric
            );
        }
        Ok(state)
    }

    /// Write durably and atomically: a temporary file beside `path`,
    /// fsync'd, renamed over `path`, then the directory fsync'd so the
    /// rename itself survives a machine crash.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::io::Write;
        let text = serde_json::to_vec(self)?;
        let tmp = temp_path(path);
        let mut file =
            std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        file.write_all(&text)
            .and_then(|_| file.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        drop(file);
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing directory {}", dir.display()))?;
        Ok(())
    }

    /// Move the finished reservation `seq` to the history (bounded).
    pub fn retire(&mut self, seq: u64) -> &Reservation {
        let r = self
            .reservations
            .remove(seq)
            .unwrap_or_else(|| panic!("retiring reservation seq {seq}, which is not live"));
        self.history.push(r);
        if self.history.len() > HISTORY_LIMIT {
            let excess = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..excess);
        }
        self.history.last().expect("just pushed")
    }

    /// A live or finished reservation by id.
    pub fn find(&self, id: &str) -> Option<&Reservation> {
        self.reservations
            .find(id)
            .or_else(|| self.history.iter().rev().find(|r| r.id == id))
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// One fabric link between two switches, named by both ends; `a` is the
/// end whose (switch, port) sorts first, so each link has one name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinkRef {
    pub a: String,
    pub a_port: u16,
    pub b: String,
    pub b_port: u16,
}

impl std::fmt::Display for LinkRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} <-> {}:{}",
            self.a, self.a_port, self.b, self.b_port
        )
    }
}

/// A registered job topology (the `RegisterTopologyRequest`, kept encoded
/// so it re-validates into exactly what was registered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub tenant: String,
    pub job_id: String,
    pub generation: u64,
    /// Hex of the encoded `RegisterTopologyRequest`.
    pub request: String,
}

/// What a reservation answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Demand(String),
    Collective(String),
}

impl Subject {
    pub fn id(&self) -> &str {
        match self {
            Subject::Demand(id) | Subject::Collective(id) => id,
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            Subject::Demand(_) => "demand",
            Subject::Collective(_) => "collective",
        }
    }
}

/// Outcome of a reservation or flow (NDSP `ReservationStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Admitted,
    Partial,
    Deferred,
    FallbackEcmp,
    Rejected,
    Cancelled,
}

impl Status {
    pub fn reserves(self) -> bool {
        matches!(self, Status::Admitted | Status::Partial | Status::Deferred)
    }
    pub fn name(self) -> &'static str {
        match self {
            Status::Admitted => "admitted",
            Status::Partial => "partial",
            Status::Deferred => "deferred",
            Status::FallbackEcmp => "fallback_ecmp",
            Status::Rejected => "rejected",
            Status::Cancelled => "cancelled",
        }
    }
}

impl From<Status> for ReservationStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Admitted => ReservationStatus::Admitted,
            Status::Partial => ReservationStatus::Partial,
            Status::Deferred => ReservationStatus::Deferred,
            Status::FallbackEcmp => ReservationStatus::FallbackEcmp,
            Status::Rejected => ReservationStatus::Rejected,
            Status::Cancelled => ReservationStatus::Cancelled,
        }
    }
}

/// Why a reservation is not simply admitted (NDSP `ReasonCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    None,
    InsufficientCapacity,
    DeadlineUnmeetable,
    NoPath,
    LabelStackTooDeep,
    UnknownEndpoint,
    WorkloadDeviation,
    LinkDown,
}

impl From<Reason> for ReasonCode {
    fn from(r: Reason) -> Self {
        match r {
            Reason::None => ReasonCode::None,
            Reason::InsufficientCapacity => ReasonCode::InsufficientCapacity,
            Reason::DeadlineUnmeetable => ReasonCode::DeadlineUnmeetable,
            Reason::NoPath => ReasonCode::NoPath,
            Reason::LabelStackTooDeep => ReasonCode::LabelStackTooDeep,
            Reason::UnknownEndpoint => ReasonCode::UnknownEndpoint,
            Reason::WorkloadDeviation => ReasonCode::WorkloadDeviation,
            Reason::LinkDown => ReasonCode::LinkDown,
        }
    }
}

/// Where a reservation is in its life (for status and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// Nothing installed yet: the first install is in the future.
    Scheduled,
    /// Some flow's entries are (to be) on the switches.
    Installed,
    /// Every flow window is over; entries removed.
    Expired,
    /// Cancelled by the client (or finished early / aborted).
    Cancelled,
    /// Nothing to install (ECMP fallback or rejected), not yet over.
    Fallback,
}

impl Lifecycle {
    pub const ALL: [Lifecycle; 5] = [
        Lifecycle::Scheduled,
        Lifecycle::Installed,
        Lifecycle::Fallback,
        Lifecycle::Expired,
        Lifecycle::Cancelled,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Lifecycle::Scheduled => "scheduled",
            Lifecycle::Installed => "installed",
            Lifecycle::Expired => "expired",
            Lifecycle::Cancelled => "cancelled",
            Lifecycle::Fallback => "fallback",
        }
    }
}

/// One reservation: the answer to a demand or a collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub id: String,
    pub seq: u64,
    pub tenant: String,
    pub subject: Subject,
    pub job_id: Option<String>,
    /// Hex of the encoded `DemandSignal` or `Collective` as submitted: an
    /// identical resubmission returns this reservation, another is refused.
    pub request: String,
    /// Planning inputs.
    pub priority: u8,
    pub elastic: bool,
    pub deadline_unix_ns: Option<u64>,
    /// Outcome.
    pub status: Status,
    pub reason: Reason,
    pub advisory: Option<String>,
    pub revision: u64,
    pub flows: Vec<FlowRecord>,
    /// Set when the reservation was cancelled (or finished early).
    pub cancelled: bool,
    /// Made by the controller from the job's learned iterations (T+5);
    /// absent in files written before learning.
    #[serde(default)]
    pub predicted: bool,
}

impl Reservation {
    pub fn start_unix_ns(&self) -> u64 {
        self.flows
            .iter()
            .map(|f| f.start_unix_ns)
            .min()
            .unwrap_or(0)
    }
    pub fn end_unix_ns(&self) -> u64 {
        self.flows.iter().map(|f| f.end_unix_ns).max().unwrap_or(0)
    }
    /// Flows that put entries on switches.
    pub fn installing(&self) -> impl Iterator<Item = &FlowRecord> {
        self.flows.iter().filter(|f| f.installs())
    }
    /// When the first entry goes in, given the lead time.
    pub fn install_unix_ns(&self, lead_ns: u64) -> Option<u64> {
        self.installing().map(|f| f.install_unix_ns(lead_ns)).min()
    }
    pub fn lifecycle(&self, now: u64, lead_ns: u64) -> Lifecycle {
        if self.cancelled {
            return Lifecycle::Cancelled;
        }
        if now >= self.end_unix_ns() {
            return Lifecycle::Expired;
        }
        match self.install_unix_ns(lead_ns) {
            None => Lifecycle::Fallback,
            Some(t) if now < t => Lifecycle::Scheduled,
            Some(_) => Lifecycle::Installed,
        }
    }
}

/// One hop of a path: a switch and the port the flow leaves it through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    pub switch: String,
    pub port: u16,
}

/// One flow of a reservation: what was asked and what was granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowRecord {
    pub flow_id: String,
    pub src: String,
    pub dst: String,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_rank: Option<u32>,
    pub dst_rank: Option<u32>,
    /// Destination QP used for planning (and the ECMP hash).
    pub qp: u32,
    /// Whether the entries match only that QP (else every QP of the pair).
    pub steer_qp: bool,
    pub bytes: u64,
    pub rate_bps: u64,
    pub duration_ns: u64,
    /// Start as asked (before any deferral).
    pub requested_start_unix_ns: u64,
    /// Granted.
    pub status: Status,
    pub reason: Reason,
    pub accepted_bps: u64,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// SR-MPLS labels the ingress leaf pushes, top first (empty: none).
    pub labels: Vec<u32>,
    /// The reserved path, or the ECMP path of a fallback flow.
    pub hops: Vec<Hop>,
    /// The UDP source port the sender was told to use, when the fabric's
    /// own ECMP hash carries the flow along `hops` (entropy steering;
    /// `labels` is then empty and nothing is installed for the flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_src_port: Option<u16>,
    /// The destination QPs the client let the controller choose among;
    /// `qp` is the one chosen (entropy steering may choose again when a
    /// link changes the hash's groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qp_choices: Option<QpChoices>,
}

/// A client's destination QP choices, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpChoices {
    pub first: u32,
    pub last: u32,
}

impl QpChoices {
    pub fn range(self) -> std::ops::RangeInclusive<u32> {
        self.first..=self.last
    }
}

impl From<ndsp::types::QpRange> for QpChoices {
    fn from(q: ndsp::types::QpRange) -> QpChoices {
        QpChoices {
            first: q.first_qp,
            last: q.last_qp(),
        }
    }
}

impl FlowRecord {
    /// Whether the flow puts entries on switches (a pinned, reserved path).
    pub fn installs(&self) -> bool {
        self.status.reserves() && !self.labels.is_empty() && !self.hops.is_empty()
    }
    pub fn install_unix_ns(&self, lead_ns: u64) -> u64 {
        self.start_unix_ns.saturating_sub(lead_ns)
    }
    /// Whether its entries belong on the switches at `now`.
    pub fn active(&self, now: u64, lead_ns: u64) -> bool {
        self.installs() && self.install_unix_ns(lead_ns) <= now && now < self.end_unix_ns
    }
    pub fn dst_qp(&self) -> Option<u32> {
        self.steer_qp.then_some(self.qp)
    }
}

/// Lower-case hex. (A large collective's request is megabytes: a `String`
/// per byte was ~15 % of planning an 8k-GPU ring.)
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// Inverse of [`to_hex`] (either case).
pub fn from_hex(text: &str) -> anyhow::Result<Vec<u8>> {
    let digits = text.as_bytes();
    if digits.len() & 1 == 1 {
        bail!("odd number of hex digits");
    }
    let digit = |i: usize| {
        char::from(digits[i])
            .to_digit(16)
            .with_context(|| format!("bad hex at {i}"))
    };
    (0..digits.len())
        .step_by(2)
        .map(|i| Ok((digit(i)? << 4 | digit(i + 1)?) as u8))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_is_atomic_and_load_checks_the_fabric() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert!(State::load(&path, "f").unwrap().is_none());
        let mut s = State::new("f", 42);
        s.next_seq = 7;
        s.save(&path).unwrap();
        assert!(!temp_path(&path).exists());
        let back = State::load(&path, "f").unwrap().unwrap();
        assert_eq!((back.epoch_unix_ns, back.next_seq), (42, 7));
        let err = State::load(&path, "other").unwrap_err().to_string();
        assert!(err.contains("belongs to fabric"), "{err}");
    }

    #[test]
    fn a_failed_save_leaves_the_previous_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut s = State::new("f", 1);
        s.save(&path).unwrap();
        // The temp file cannot be created: nothing is renamed over the file.
        std::fs::create_dir(temp_path(&path)).unwrap();
        s.next_seq = 99;
        let err = format!("{:#}", s.save(&path).unwrap_err());
        assert!(err.contains("state.json.tmp"), "{err}");
        assert_eq!(State::load(&path, "f").unwrap().unwrap().next_seq, 1);
        // Nowhere to write at all: a clear error, not a panic.
        let err = format!(
            "{:#}",
            s.save(&dir.path().join("missing/state.json")).unwrap_err()
        );
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn hex_round_trips() {
        assert_eq!(
            from_hex(&to_hex(&[0, 1, 0xab, 0xff])).unwrap(),
            vec![0, 1, 0xab, 0xff]
        );
        assert!(from_hex("abc").is_err());
        let every: Vec<u8> = (0..=255).collect();
        assert_eq!(to_hex(&every[..3]), "000102");
        assert_eq!(from_hex(&to_hex(&every)).unwrap(), every);
        assert_eq!(from_hex("ABff").unwrap(), vec![0xab, 0xff]);
        // Not a digit, also where a character is wider than one byte.
        for bad in ["0g", "éé", "é0", "+1"] {
            assert!(from_hex(bad).is_err(), "{bad}");
        }
    }
}
