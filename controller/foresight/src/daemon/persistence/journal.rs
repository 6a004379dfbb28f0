//! The state file as a snapshot and a journal. A commit appends one line
//! to `<state file>.journal` holding only the records that changed (the
//! same records etcd holds, `state_keys`), fsync'd before the change is
//! answered, so its cost follows the change, not what is held. The first
//! commit writes the snapshot.
//!
//! **Folding.** Once the journal outgrows the snapshot (and
//! [`MIN_COMPACT_BYTES`]), the commit that crossed the line serializes
//! the state, renames the journal to `<state file>.journal.folding` and
//! starts a fresh one; a background thread writes the new snapshot
//! atomically (`state::write_snapshot`) and then removes the folding
//! file. Commits go on meanwhile: the files' fsyncs and the emptying of
//! the journal, which made one commit in thirty a few milliseconds slower
//! in the 1,024-rank loop, are no longer in any commit.
//!
//! Loading replays the snapshot, the folding journal if a fold did not
//! finish, then the journal. A line sets or removes whole records and the
//! last one wins, so replaying lines the snapshot already holds changes
//! nothing: a crash between a new snapshot and the folding file's removal
//! loses nothing. A last line cut short by a crash was never answered: it
//! is dropped, and the journal cut back to its last whole line. A bad line
//! before the last is an error naming it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use super::state::{self, State};
use super::state_keys::{self, Changes, Committed};

/// The journal is folded into the snapshot once it is larger than this
/// and larger than the snapshot. A fold serializes what is held (inside
/// the commit that starts it; the writing is in the background); with a
/// small state and large records (a 1,024-flow collective is ~650 KB a
/// line) 1 MiB meant one every few commits. A restart replays at most
/// this much journal (twice, if it stopped during a fold).
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
    /// The fold writing a snapshot in the background: its size when done.
    fold: Option<std::thread::JoinHandle<anyhow::Result<u64>>>,
    /// Makes the next fold fail after moving the journal aside (a test
    /// cannot otherwise make opening a file fail when running as root).
    #[cfg(test)]
    fail_fold_after_rename: bool,
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

/// Where the journal being folded into state file `path` lives.
pub fn folding_path(path: &Path) -> PathBuf {
    let mut name = journal_path(path).into_os_string();
    name.push(".folding");
    PathBuf::from(name)
}

impl StateFile {
    /// Opens the state file `path` of fabric `fabric`: the state it and its
    /// journal hold (`None` when neither exists), and the file ready for
    /// commits.
    pub fn open(path: &Path, fabric: &str) -> anyhow::Result<(StateFile, Option<State>)> {
        let journal_path = journal_path(path);
        let folding_path = folding_path(path);
        let snapshot = State::load(path, fabric)?;
        let snapshot_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let (folding, _) = read_journal(&folding_path)?;
        let unfinished_fold = folding_path.exists();
        let (lines, whole) = read_journal(&journal_path)?;
        let state = replay(snapshot, folding.into_iter().chain(lines), fabric)
            .with_context(|| format!("state journal {}", journal_path.display()))?;
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
        let mut file = StateFile {
            path: path.to_path_buf(),
            journal_path,
            journal,
            journal_bytes: whole,
            snapshot_bytes,
            min_compact_bytes: MIN_COMPACT_BYTES,
            committed,
            fold: None,
            #[cfg(test)]
            fail_fold_after_rename: false,
        };
        // A fold that did not finish is finished now, with everything read.
        if let (true, Some(state)) = (unfinished_fold, &state) {
            file.compact(state)?;
        }
        Ok((file, state))
    }

    /// Commits `state`: appends what changed since the last commit as one
    /// line, fsync'd; starts folding the journal into the snapshot when it
    /// has grown past it. Returns the bytes appended (0: nothing changed).
    pub fn commit(&mut self, state: &State) -> anyhow::Result<u64> {
        self.collect_fold(false);
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
        if self.snapshot_bytes == 0 {
            self.compact(state)?;
        } else if self.fold.is_none()
            && self.journal_bytes > self.min_compact_bytes.max(self.snapshot_bytes)
        {
            // The change is durable already: a fold that cannot start is
            // tried again at the next commit (the files replay either way).
            if let Err(e) = self.start_fold(state) {
                tracing::error!(state_file = %self.path.display(), "cannot fold the journal: {e:#}");
            }
        }
        Ok(line.len() as u64)
    }

    /// Takes the result of a finished fold (or waits for it with `wait`).
    /// A fold that failed leaves its folding file, which loading replays;
    /// the next fold is then done in the commit.
    fn collect_fold(&mut self, wait: bool) {
        if !wait && !self.fold.as_ref().is_some_and(|f| f.is_finished()) {
            return;
        }
        let Some(fold) = self.fold.take() else { return };
        match fold.join() {
            Ok(Ok(bytes)) => self.snapshot_bytes = bytes,
            Ok(Err(e)) => tracing::error!(
                state_file = %self.path.display(),
                "folding the journal into the state file failed: {e:#}; nothing is lost (the next start replays it)"
            ),
            Err(_) => {
                tracing::error!(state_file = %self.path.display(), "the journal's fold panicked")
            }
        }
    }

    /// Takes a snapshot of `state` (just committed; its records shared),
    /// moves the journal aside and opens a fresh one, and serializes and
    /// writes the snapshot in the background.
    fn start_fold(&mut self, state: &State) -> anyhow::Result<()> {
        let folding = folding_path(&self.path);
        if folding.exists() {
            // A fold failed: its lines are not in the snapshot yet.
            return self.compact(state);
        }
        let snapshot = state.snapshot();
        std::fs::rename(&self.journal_path, &folding).with_context(|| {
            format!(
                "renaming {} to {}",
                self.journal_path.display(),
                folding.display()
            )
        })?;
        #[cfg(test)]
        if std::mem::take(&mut self.fail_fold_after_rename) {
            bail!(
                "opening {}: failed by the test",
                self.journal_path.display()
            );
        }
        self.journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.journal_path)
            .with_context(|| format!("opening {}", self.journal_path.display()))?;
        // The next commit's line must not land in a file a crash forgets.
        state::sync_dir_of(&self.journal_path)?;
        self.journal_bytes = 0;
        let path = self.path.clone();
        self.fold = Some(
            std::thread::Builder::new()
                .name("state-fold".into())
                .spawn(move || {
                    let text = serde_json::to_vec(&snapshot)?;
                    state::write_snapshot(&path, &text)?;
                    std::fs::remove_file(&folding)
                        .with_context(|| format!("removing {}", folding.display()))?;
                    Ok(text.len() as u64)
                })
                .context("starting the journal's fold")?,
        );
        Ok(())
    }

    /// Rewrites the snapshot from `state` (just committed) and empties the
    /// journal, in the commit: the first commit, and after a failed fold.
    fn compact(&mut self, state: &State) -> anyhow::Result<()> {
        self.collect_fold(true);
        state.save(&self.path)?;
        self.snapshot_bytes = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        // Opened by name: after a fold that failed half-way, the handle
        // may still be the folding file's.
        self.journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.journal_path)
            .with_context(|| format!("opening {}", self.journal_path.display()))?;
        self.journal
            .set_len(0)
            .and_then(|_| self.journal.sync_all())
            .with_context(|| format!("emptying {}", self.journal_path.display()))?;
        self.journal_bytes = 0;
        let folding = folding_path(&self.path);
        match std::fs::remove_file(&folding) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", folding.display()))
            }
            _ => {}
        }
        state::sync_dir_of(&self.journal_path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateFile {
    /// A fold under way finishes before the file is let go (a process that
    /// dies instead leaves the folding file, which the next start replays).
    fn drop(&mut self) {
        self.collect_fold(true);
    }
}

/// The state `snapshot` holds with journal `lines` replayed over it, in
/// order (`None`: neither holds anything).
fn replay(
    snapshot: Option<State>,
    lines: impl Iterator<Item = Line>,
    fabric: &str,
) -> anyhow::Result<Option<State>> {
    let mut lines = lines.peekable();
    if lines.peek().is_none() {
        return Ok(snapshot);
    }
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
    state_keys::assemble(&keys, fabric).map(Some)
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
    use crate::daemon::persistence::state_keys::tests::reservation;
    use crate::daemon::persistence::state_records::Job;

    fn reopen(path: &Path) -> (StateFile, State) {
        let (file, state) = StateFile::open(path, "f").unwrap();
        (file, state.expect("a saved state"))
    }

    /// A state file in a directory of its own after one commit (which
    /// writes the snapshot) of reservations 1..=`n`.
    fn committed_with(n: u64) -> (tempfile::TempDir, PathBuf, StateFile, State) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let (mut file, _) = StateFile::open(&path, "f").unwrap();
        let mut s = State::new("f", 1);
        s.reservations = (1..=n).map(reservation).collect();
        file.commit(&s).unwrap();
        (dir, path, file, s)
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
            patterns: Vec::new(),
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
        let (_dir, path, mut file, mut s) = committed_with(50);
        file.min_compact_bytes = 4096;
        assert!(path.exists(), "the first commit writes the snapshot");
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

    /// A fold runs beside the commits: the folding file is gone once it
    /// is done, and the snapshot alone then holds everything committed
    /// before it (the fresh journal only what came after).
    #[test]
    fn a_fold_writes_the_snapshot_while_commits_go_on() {
        let (_dir, path, mut file, mut s) = committed_with(50);
        file.min_compact_bytes = 4096;
        let mut round = 0u64;
        while file.fold.is_none() {
            s.reservations.nth_mut((round % 50) as usize).revision += 1;
            file.commit(&s).unwrap();
            round += 1;
        }
        let folded = ids(&s);
        s.reservations.nth_mut(3).revision += 1;
        file.commit(&s).unwrap();
        file.collect_fold(true);
        assert!(!folding_path(&path).exists(), "the fold removed its file");
        let snapshot = State::load(&path, "f").unwrap().unwrap();
        assert_eq!(
            ids(&snapshot),
            folded,
            "the snapshot is the state at the fold"
        );
        drop(file);
        assert_eq!(ids(&reopen(&path).1), ids(&s));
    }

    /// A crash during a fold leaves the old snapshot, the folding journal
    /// and the fresh one: loading replays them in that order (a record
    /// changed in both ends as the fresh journal says) and finishes the fold.
    #[test]
    fn an_unfinished_fold_is_replayed_in_order_and_finished_at_start() {
        let (_dir, path, mut file, mut s) = committed_with(3);
        s.reservations.nth_mut(0).revision += 1;
        s.reservations.insert(reservation(4));
        file.commit(&s).unwrap();
        let journal = journal_path(&path);
        let older = std::fs::read(&journal).unwrap();
        s.reservations.nth_mut(0).revision += 1;
        s.reservations.remove_nth(1);
        file.commit(&s).unwrap();
        drop(file);
        let both = std::fs::read(&journal).unwrap();
        std::fs::write(folding_path(&path), &older).unwrap();
        std::fs::write(&journal, &both[older.len()..]).unwrap();

        let (_, back) = reopen(&path);
        assert_eq!(ids(&back), ids(&s));
        assert!(!folding_path(&path).exists(), "the fold was finished");
        assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
        assert_eq!(ids(&State::load(&path, "f").unwrap().unwrap()), ids(&s));
    }

    /// A fold that moved the journal aside but could not open a fresh one
    /// loses nothing: a crash then replays the snapshot and the moved
    /// file, and the next commit (its line still going to the moved file)
    /// folds in the commit, which writes the snapshot and opens the
    /// journal by name again.
    #[test]
    fn a_fold_that_fails_half_way_loses_nothing() {
        let (_dir, path, mut file, mut s) = committed_with(50);
        file.min_compact_bytes = 4096;
        file.fail_fold_after_rename = true;
        let mut round = 0u64;
        let mut commit = |file: &mut StateFile, s: &mut State| {
            s.reservations.nth_mut((round % 50) as usize).revision += 1;
            file.commit(s).unwrap();
            round += 1;
        };
        while !folding_path(&path).exists() {
            commit(&mut file, &mut s);
        }
        assert!(file.fold.is_none(), "the fold failed before it started");
        assert!(!journal_path(&path).exists(), "no fresh journal was opened");

        // A crash now: the snapshot and the moved file hold every commit.
        let copy = tempfile::tempdir().unwrap();
        let copied = copy.path().join("state.json");
        std::fs::copy(&path, &copied).unwrap();
        std::fs::copy(folding_path(&path), folding_path(&copied)).unwrap();
        assert_eq!(ids(&reopen(&copied).1), ids(&s), "replayed after a crash");

        commit(&mut file, &mut s);
        assert!(!folding_path(&path).exists(), "folded in the commit");
        assert_eq!(std::fs::metadata(journal_path(&path)).unwrap().len(), 0);
        assert_eq!(ids(&State::load(&path, "f").unwrap().unwrap()), ids(&s));
        for _ in 0..5 {
            commit(&mut file, &mut s);
        }
        assert!(std::fs::metadata(journal_path(&path)).unwrap().len() > 0);
        drop(file);
        assert_eq!(ids(&reopen(&path).1), ids(&s));
    }

    /// A crash after a fold wrote the snapshot but before it emptied the
    /// journal: the journal's lines are all in the snapshot already, and
    /// replaying them changes nothing.
    #[test]
    fn replaying_a_journal_the_snapshot_holds_changes_nothing() {
        let (_dir, path, mut file, mut s) = committed_with(5);
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
        let (_dir, path, mut file, mut s) = committed_with(3);
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
