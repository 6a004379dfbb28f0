//! The state file as a snapshot and a journal. A commit appends one line
//! to `<state file>.journal` holding only the records that changed (the
//! same records etcd holds, `state_keys`), fsync'd before the change is
//! answered, so its cost follows the change, not what is held. The first
//! commit writes the snapshot; once the journal outgrows it (and
//! [`MIN_COMPACT_BYTES`]), the snapshot is rewritten atomically
//! (`State::save`) and the journal emptied.
//!
//! Loading replays the journal over the snapshot. A line sets or removes
//! whole records and the last one wins, so replaying lines the snapshot
//! already holds changes nothing: a crash between a new snapshot and the
//! journal's truncation loses nothing. A last line cut short by a crash
//! was never answered: it is dropped, and the journal cut back to its last
//! whole line. A bad line before the last is an error naming it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use super::state::State;
use super::state_keys::{self, Changes, Committed};

/// The journal is folded into the snapshot once it is larger than this
/// and larger than the snapshot. A rewrite runs inside a commit and costs
/// what is held; with a small state and large records (a 1,024-flow
/// collective is ~650 KB a line) 1 MiB meant one every few commits. A
/// restart replays at most this much journal.
pub const MIN_COMPACT_BYTES: u64 = 16 << 20;

/// A state file and its journal, open for commits.
pub struct StateFile {
    path: PathBuf,
    journal_path: PathBuf,
    journal: File,
    journal_bytes: u64,
    /// 0 while there is no snapshot.
    snapshot_bytes: u64,
    /// [`MIN_COMPACT_BYTES`], lower in tests.
    min_compact_bytes: u64,
    committed: Committed,
}

/// One commit as read back.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    put: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    delete: Vec<String>,
}

/// Where the journal of state file `path` lives.
pub fn journal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

impl StateFile {
    /// Opens the state file `path` of fabric `fabric`: the state it and its
    /// journal hold (`None` when neither exists), and the file ready for
    /// commits.
    pub fn open(path: &Path, fabric: &str) -> anyhow::Result<(StateFile, Option<State>)> {
        let journal_path = journal_path(path);
        let snapshot = State::load(path, fabric)?;
        let snapshot_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let (lines, whole) = read_journal(&journal_path)?;
        let state = match (snapshot, lines.is_empty()) {
            (snapshot, true) => snapshot,
            (snapshot, false) => {
                let mut keys = match &snapshot {
                    Some(s) => state_keys::keys_of(s)?,
                    None => BTreeMap::new(),
                };
                for line in lines {
                    for key in line.delete {
                        keys.remove(&key);
                    }
                    for (key, value) in line.put {
                        keys.insert(key, serde_json::to_vec(&value)?);
                    }
                }
                Some(
                    state_keys::assemble(&keys, fabric)
                        .with_context(|| format!("state journal {}", journal_path.display()))?,
                )
            }
        };
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)
            .with_context(|| format!("opening {}", journal_path.display()))?;
        // A torn last line goes, so that the next commit starts a line.
        journal
            .set_len(whole)
            .and_then(|_| journal.sync_all())
            .with_context(|| format!("truncating {}", journal_path.display()))?;
        let committed = match &state {
            Some(s) => Committed::of(s, &state_keys::keys_of(s)?),
            None => Committed::default(),
        };
        let file = StateFile {
            path: path.to_path_buf(),
            journal_path,
            journal,
            journal_bytes: whole,
            snapshot_bytes,
            min_compact_bytes: MIN_COMPACT_BYTES,
            committed,
        };
        Ok((file, state))
    }

    /// Commits `state`: appends what changed since the last commit as one
    /// line, fsync'd; folds the journal into the snapshot when it has grown
    /// past it. Returns the bytes appended (0: nothing changed).
    pub fn commit(&mut self, state: &State) -> anyhow::Result<u64> {
        let changes = self.committed.changes(state)?;
        if changes.is_empty() {
            return Ok(0);
        }
        let line = line(&changes);
        self.journal
            .write_all(&line)
            .and_then(|_| self.journal.sync_data())
            .with_context(|| format!("appending to {}", self.journal_path.display()))?;
        self.journal_bytes += line.len() as u64;
        self.committed.apply(changes);
        if self.snapshot_bytes == 0
            || self.journal_bytes > self.min_compact_bytes.max(self.snapshot_bytes)
        {
            self.compact(state)?;
        }
        Ok(line.len() as u64)
    }

    /// Rewrites the snapshot from `state` (just committed) and empties the
    /// journal.
    fn compact(&mut self, state: &State) -> anyhow::Result<()> {
        state.save(&self.path)?;
        self.snapshot_bytes = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        self.journal
            .set_len(0)
            .and_then(|_| self.journal.sync_all())
            .with_context(|| format!("emptying {}", self.journal_path.display()))?;
        self.journal_bytes = 0;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `{"put":{key:record,...},"delete":[key,...]}` and a newline. The records
/// are already JSON, so they are copied, not encoded again.
fn line(changes: &Changes) -> Vec<u8> {
    // Sized for the records (a large one is hundreds of kilobytes).
    let bytes: usize = changes.puts().map(|(k, v)| k.len() + v.len() + 4).sum();
    let mut out = Vec::with_capacity(128 + bytes);
    out.extend_from_slice(b"{\"put\":{");
    for (i, (key, value)) in changes.puts().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &key).expect("a key is a string");
        out.push(b':');
        out.extend_from_slice(value);
    }
    out.extend_from_slice(b"},\"delete\":");
    let deletes: Vec<String> = changes.deletes().collect();
    serde_json::to_writer(&mut out, &deletes).expect("keys are strings");
    out.extend_from_slice(b"}\n");
    out
}

/// The journal's whole lines and their length in bytes; a last line cut
/// short (no newline, or not JSON) is left out.
fn read_journal(path: &Path) -> anyhow::Result<(Vec<Line>, u64)> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut lines = Vec::new();
    let mut whole = 0usize;
    let mut rest = &bytes[..];
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            tracing::warn!(
                journal = %path.display(),
                line = number,
                "the journal's last line was cut short (a crash while committing); dropped"
            );
            break;
        };
        match serde_json::from_slice::<Line>(&rest[..end]) {
            Ok(line) => lines.push(line),
            Err(_) if end + 1 == rest.len() => {
                tracing::warn!(
                    journal = %path.display(),
                    line = number,
                    "the journal's last line is not a whole commit; dropped"
                );
                break;
            }
            Err(e) => bail!(
                "state journal {} line {number}: {e} (not a commit; fix or remove the journal)",
                path.display()
            ),
        }
        whole += end + 1;
        rest = &rest[end + 1..];
    }
    Ok((lines, whole as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::state_keys::tests::reservation;
    use crate::daemon::state_records::Job;

    fn reopen(path: &Path) -> (StateFile, State) {
        let (file, state) = StateFile::open(path, "f").unwrap();
        (file, state.expect("a saved state"))
    }

    fn ids(s: &State) -> Vec<(String, u64)> {
        s.reservations
            .iter()
            .map(|r| (r.id.clone(), r.revision))
            .collect()
    }

    /// Commits append what changed (one reservation's line does not grow
    /// with the thousand held beside it), and a reopened file holds every
    /// commit: changed, removed, added records, jobs and counters.
    #[test]
    fn a_commit_appends_what_changed_and_reopening_replays_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut file, none) = StateFile::open(&path, "f").unwrap();
        assert!(none.is_none());
        let mut s = State::new("f", 7);
        s.reservations = (1..=1000).map(reservation).collect();
        let first = file.commit(&s).unwrap();
        assert!(first > 1000 * 100, "the first commit holds everything");
        assert_eq!(file.commit(&s).unwrap(), 0, "nothing changed");
        s.reservations.nth_mut(10).revision += 1;
        let one = file.commit(&s).unwrap();
        assert!(one < 1000, "one record's line: {one} bytes");
        s.reservations.remove_nth(20);
        s.reservations.insert(reservation(1001));
        s.next_seq = 1002;
        s.jobs.push(Job {
            tenant: "t".into(),
            job_id: "j".into(),
            generation: 3,
            request: String::new(),
        });
        file.commit(&s).unwrap();
        drop(file);
        let (_, back) = reopen(&path);
        assert_eq!(ids(&back), ids(&s));
        assert_eq!(back.next_seq, 1002);
        assert_eq!(back.jobs.len(), 1);
        assert_eq!(back.epoch_unix_ns, 7);
    }

    /// Past the threshold the journal is folded into the snapshot and
    /// emptied, and the state reads back the same.
    #[test]
    fn a_grown_journal_is_folded_into_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut file, _) = StateFile::open(&path, "f").unwrap();
        file.min_compact_bytes = 4096;
        let mut s = State::new("f", 1);
        s.reservations = (1..=50).map(reservation).collect();
        file.commit(&s).unwrap();
        assert!(
            path.exists(),
            "the first commit outgrew 4 KiB: folded at once"
        );
        let journal_len = || std::fs::metadata(journal_path(&path)).unwrap().len();
        assert_eq!(journal_len(), 0);
        let mut folds = 0;
        for round in 0..500u64 {
            s.reservations.nth_mut((round % 50) as usize).revision += 1;
            let before = journal_len();
            file.commit(&s).unwrap();
            if journal_len() < before {
                folds += 1;
            }
        }
        assert!(folds >= 2, "{folds} folds");
        drop(file);
        assert_eq!(ids(&reopen(&path).1), ids(&s));
    }

    /// A crash after a fold wrote the snapshot but before it emptied the
    /// journal: the journal's lines are all in the snapshot already, and
    /// replaying them changes nothing.
    #[test]
    fn replaying_a_journal_the_snapshot_holds_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut file, _) = StateFile::open(&path, "f").unwrap();
        let mut s = State::new("f", 1);
        s.reservations = (1..=5).map(reservation).collect();
        file.commit(&s).unwrap();
        for round in 0..20u64 {
            let n = s.reservations.len() as u64;
            s.reservations.nth_mut((round % n) as usize).revision += 1;
            if round == 7 {
                s.reservations.remove_nth(2);
            }
            file.commit(&s).unwrap();
        }
        drop(file);
        s.save(&path).unwrap();
        assert!(std::fs::metadata(journal_path(&path)).unwrap().len() > 0);
        assert_eq!(ids(&reopen(&path).1), ids(&s));
    }

    /// A last line cut short by a crash is dropped (that commit was never
    /// answered) and cut off, so the next commit starts a line of its own;
    /// a bad line before the last is an error that names it.
    #[test]
    fn a_torn_last_line_is_dropped_and_a_bad_middle_line_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut file, _) = StateFile::open(&path, "f").unwrap();
        let mut s = State::new("f", 1);
        s.reservations = (1..=3).map(reservation).collect();
        file.commit(&s).unwrap();
        s.reservations.nth_mut(0).revision += 1;
        file.commit(&s).unwrap();
        drop(file);
        let journal = journal_path(&path);
        let whole = std::fs::read(&journal).unwrap();
        assert!(!whole.is_empty());
        let mut torn = whole.clone();
        torn.extend_from_slice(b"{\"put\":{\"reservation/0000");
        std::fs::write(&journal, &torn).unwrap();
        let (mut file, back) = reopen(&path);
        assert_eq!(ids(&back), ids(&s));
        assert_eq!(std::fs::read(&journal).unwrap(), whole, "cut back");
        s.reservations.insert(reservation(4));
        file.commit(&s).unwrap();
        drop(file);
        assert_eq!(ids(&reopen(&path).1), ids(&s));

        let mut bad = b"{\"put\":{},\"delete\":[]}\nnot json\n".to_vec();
        bad.extend_from_slice(&whole);
        std::fs::write(&journal, &bad).unwrap();
        let e = format!("{:#}", StateFile::open(&path, "f").err().unwrap());
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("fix or remove the journal"), "{e}");
    }

    /// A journal of another fabric's records is refused as a state file is.
    #[test]
    fn a_journal_is_checked_like_a_state_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut file, _) = StateFile::open(&path, "other").unwrap();
        file.commit(&State::new("other", 1)).unwrap();
        drop(file);
        let e = format!("{:#}", StateFile::open(&path, "f").err().unwrap());
        assert!(e.contains("belongs to fabric"), "{e}");
    }
}
