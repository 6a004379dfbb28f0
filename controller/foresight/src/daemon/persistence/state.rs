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
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::history::History;
use super::live_reservations::LiveReservations;
use super::state_records::{Job, LinkRef, Reservation};

/// Version of the state file format.
pub const STATE_VERSION: u32 = 1;

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
    pub history: History,
}

/// What the state file holds, taken from a [`State`] by sharing its
/// records: the journal's fold serializes it in a thread of its own, so the
/// commit that starts a fold copies pointers, not what is held. It
/// serializes exactly as the state it was taken from (tested).
#[derive(Serialize)]
pub struct Snapshot {
    version: u32,
    fabric: String,
    epoch_unix_ns: u64,
    next_seq: u64,
    next_qp: BTreeMap<String, u32>,
    jobs: Vec<Job>,
    reservations: Vec<Arc<Reservation>>,
    links_down: Vec<LinkRef>,
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
            history: History::default(),
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
        write_snapshot(path, &serde_json::to_vec(self)?)
    }

    /// What [`State::save`] would write, to serialize elsewhere.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: self.version,
            fabric: self.fabric.clone(),
            epoch_unix_ns: self.epoch_unix_ns,
            next_seq: self.next_seq,
            next_qp: self.next_qp.clone(),
            jobs: self.jobs.clone(),
            reservations: self.reservations.iter_shared().cloned().collect(),
            links_down: self.links_down.clone(),
        }
    }

    /// Move the finished reservation `seq` to the history (bounded).
    pub fn retire(&mut self, seq: u64) -> &Arc<Reservation> {
        let r = self
            .reservations
            .remove(seq)
            .unwrap_or_else(|| panic!("retiring reservation seq {seq}, which is not live"));
        self.history.push(r)
    }

    /// A live or finished reservation by id.
    pub fn find(&self, id: &str) -> Option<&Reservation> {
        self.find_shared(id).map(|r| &**r)
    }

    /// [`State::find`], the record itself (to answer with, not copied).
    pub fn find_shared(&self, id: &str) -> Option<&Arc<Reservation>> {
        self.reservations
            .find_shared(id)
            .or_else(|| self.history.shared(id))
    }
}

/// Replaces the state file `path` with `text` (a serialized [`State`])
/// atomically: a temporary file, synced, renamed over it, the directory
/// synced. A crash leaves the old file or the new one, never a mix.
pub fn write_snapshot(path: &Path, text: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = temp_path(path);
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    file.write_all(text)
        .and_then(|_| file.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(file);
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    sync_dir_of(path)
}

/// Syncs the directory holding `path`, so that a rename or a new file in
/// it survives a machine crash.
pub fn sync_dir_of(path: &Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing directory {}", dir.display()))
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
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
    fn a_snapshot_serializes_as_its_state() {
        let mut s = State::new("f", 42);
        s.next_seq = 9;
        s.next_qp.insert("h1".into(), 17);
        s.jobs.push(Job {
            tenant: "t".into(),
            job_id: "j".into(),
            generation: 2,
            request: "0a".into(),
            patterns: Vec::new(),
        });
        s.reservations = (1..=3)
            .map(crate::daemon::persistence::state_keys::tests::reservation)
            .collect();
        s.links_down.push(LinkRef {
            a: "leaf1".into(),
            a_port: 3,
            b: "spine1".into(),
            b_port: 1,
        });
        let snapshot = s.snapshot();
        s.retire(2);
        s.next_seq = 10;
        let mut before = s.clone();
        before.next_seq = 9;
        before
            .reservations
            .insert(crate::daemon::persistence::state_keys::tests::reservation(
                2,
            ));
        assert_eq!(
            serde_json::to_string(&snapshot).unwrap(),
            serde_json::to_string(&before).unwrap(),
            "the state as it was when the snapshot was taken"
        );
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
