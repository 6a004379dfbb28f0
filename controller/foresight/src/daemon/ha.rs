//! High availability: controller replicas elect one leader through etcd,
//! and only the leader plans and writes to the switches.
//!
//! - Election: each replica holds an etcd lease (kept alive in the
//!   background) and campaigns on `<prefix>/leader` with its addresses as
//!   the value. The winner's leader key has an etcd create revision that
//!   grows with every new leader; it is the leader's P4Runtime election id,
//!   so a new leader is primary on every switch and an old one that wakes
//!   up (SIGSTOP → SIGCONT) is refused by them.
//! - State: the controller's intended state (`State`) lives under
//!   `<prefix>/state/`, a key per job and per reservation (see `layout`),
//!   and each commit is one transaction of the keys that changed, which
//!   only succeeds while this replica's leader key still exists with its
//!   revision. A new leader starts from exactly what the old one
//!   committed, and an old leader cannot commit anything.
//! - Stepping down: a replica that loses its lease, sees a switch primary
//!   with a higher election id, or cannot commit, exits (status 75) without
//!   answering or installing anything more; a supervisor (systemd
//!   `Restart=always`) starts it again as a follower.
//! - Fast takeover: a crashed leader's lease would hold the leadership for
//!   up to a TTL (whole seconds in etcd). Campaigning replicas probe the
//!   leader's NDSP port and revoke its lease once connections are refused,
//!   i.e. no process listens there any more. A paused or unreachable
//!   leader still waits for its TTL. A wrong revoke is harmless: that
//!   leader steps down and its commits are fenced.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use etcd_client::{Client, Compare, CompareOp, ConnectOptions, GetOptions, Txn, TxnOp};
use serde::{Deserialize, Serialize};

use super::state::{self, State};
use super::switch_status::SwitchStatus;

/// TTLs without reaching etcd after which a replica gives its lease up.
const UNREACHABLE_TTLS: u32 = 5;

/// How long one etcd call (other than a campaign) may take.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// How often a campaigning replica checks that the leader's process is
/// still there.
const LEADER_PROBE: Duration = Duration::from_millis(100);

/// Refused connections in a row after which the leader counts as dead.
const REFUSED_PROBES: u32 = 2;

/// Exit status of a replica that stepped down.
pub const STEP_DOWN_EXIT: i32 = 75;

/// Where the replicas meet.
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// etcd client endpoints (`host:port`).
    pub endpoints: Vec<String>,
    /// Key prefix of this controller cluster (one per fabric).
    pub prefix: String,
    /// This replica's name, unique in the cluster.
    pub replica: String,
    /// Lease TTL (whole seconds, etcd's unit): how long a dead leader
    /// keeps the leadership.
    pub lease_ttl_s: i64,
}

/// What a leader publishes about itself (the election value).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LeaderInfo {
    pub replica: String,
    /// NDSP address clients should use.
    pub ndsp: String,
    pub http: String,
}

/// A replica's connection to etcd, before and after it wins.
pub struct Replica {
    client: Client,
    config: HaConfig,
    lease: i64,
    /// Receives `true` once the lease is lost.
    lost: tokio::sync::watch::Receiver<bool>,
    /// Set by [`Replica::leave`]: the lease ends on purpose, which is not
    /// a loss to step down for.
    leaving: Arc<AtomicBool>,
}

/// Won leadership: the fence every commit goes through.
pub struct Leadership {
    client: Client,
    leader_key: Vec<u8>,
    revision: i64,
    /// `<prefix>/state/`: one key per job and reservation, and `meta`.
    state_prefix: String,
    /// What etcd holds under `state_prefix`, as last committed: a commit
    /// writes only the records that differ from it.
    committed: tokio::sync::Mutex<layout::Committed>,
    pub lost: tokio::sync::watch::Receiver<bool>,
}

impl HaConfig {
    fn election(&self) -> String {
        format!("{}/leader", self.prefix)
    }
}

/// Connect to etcd and take a lease kept alive in the background.
pub async fn join(config: HaConfig) -> anyhow::Result<Replica> {
    // No blanket request timeout: a follower's campaign waits as long as
    // the leader lives. Other calls have their own.
    let options = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_millis(500), Duration::from_secs(1));
    let client = Client::connect(&config.endpoints, Some(options))
        .await
        .with_context(|| format!("--etcd {}: cannot connect", config.endpoints.join(",")))?;
    let lease = tokio::time::timeout(
        CALL_TIMEOUT,
        client.lease_client().grant(config.lease_ttl_s, None),
    )
    .await
    .map_err(|_| anyhow::anyhow!("etcd: no answer to a lease grant in {CALL_TIMEOUT:?}"))?
    .context("etcd: cannot grant a lease")?
    .id();
    let (lost_tx, lost) = tokio::sync::watch::channel(false);
    let leaving = Arc::new(AtomicBool::new(false));
    tokio::spawn(keep_alive(
        client.clone(),
        lease,
        Duration::from_secs(config.lease_ttl_s as u64),
        lost_tx,
        leaving.clone(),
    ));
    Ok(Replica {
        client,
        config,
        lease,
        lost,
        leaving,
    })
}

/// Renew the lease every third of its TTL; report it lost when etcd says
/// it expired, or after `UNREACHABLE_TTLS` TTLs without a renewal. Not
/// sooner: an etcd leader election (a member lost) can hold renewals back
/// for about a TTL while etcd keeps the lease, and stepping down early is
/// not what keeps a late leader harmless; the fences are (its commits are
/// refused, and switches prefer the newer leader's election id).
async fn keep_alive(
    client: Client,
    lease: i64,
    ttl: Duration,
    lost: tokio::sync::watch::Sender<bool>,
    leaving: Arc<AtomicBool>,
) {
    let mut last_ok = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(ttl / 3);
    let mut stream = None;
    loop {
        tick.tick().await;
        if last_ok.elapsed() >= ttl * UNREACHABLE_TTLS {
            let _ = lost.send(true);
            return;
        }
        if stream.is_none() {
            let mut leases = client.lease_client();
            stream = tokio::time::timeout(ttl / 3, leases.keep_alive(lease))
                .await
                .ok()
                .and_then(Result::ok);
        }
        let Some((keeper, responses)) = stream.as_mut() else {
            continue;
        };
        let renewed = async {
            keeper.keep_alive().await.ok()?;
            responses.message().await.ok()?
        };
        match tokio::time::timeout(ttl / 3, renewed).await {
            Ok(Some(r)) if r.ttl() > 0 => last_ok = tokio::time::Instant::now(),
            Ok(Some(_)) if leaving.load(Ordering::SeqCst) => return,
            Ok(Some(_)) => {
                tracing::error!(lease, "etcd: the lease expired");
                let _ = lost.send(true);
                return;
            }
            _ => stream = None,
        }
    }
}

impl Replica {
    /// The current leader, if there is one.
    pub async fn leader(&self) -> Option<LeaderInfo> {
        let mut election = self.client.election_client();
        let answer = tokio::time::timeout(
            Duration::from_secs(1),
            election.leader(self.config.election()),
        )
        .await
        .ok()?
        .ok()?;
        serde_json::from_slice(answer.kv()?.value()).ok()
    }

    /// Give up the lease now (a clean shutdown): the leader key goes with
    /// it, so another replica leads without waiting for the TTL.
    pub async fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        let mut leases = self.client.lease_client();
        match tokio::time::timeout(CALL_TIMEOUT, leases.revoke(self.lease)).await {
            Ok(Ok(_)) => tracing::info!(lease = self.lease, "etcd: lease revoked"),
            _ => tracing::warn!(
                lease = self.lease,
                "etcd: could not revoke the lease; it expires on its own"
            ),
        }
    }

    /// Wait until this replica is the leader.
    pub async fn campaign(&self, me: &LeaderInfo) -> anyhow::Result<Leadership> {
        let value = serde_json::to_vec(me)?;
        let mut election = self.client.election_client();
        // A campaign survives etcd hiccups: retried until won or the lease is lost.
        let key = loop {
            if *self.lost.borrow() {
                anyhow::bail!("etcd: lease lost while campaigning");
            }
            let campaign = election.campaign(self.config.election(), value.clone(), self.lease);
            let outcome = tokio::select! {
                outcome = campaign => outcome,
                true = lease_lost(self.lost.clone()) => anyhow::bail!("etcd: lease lost while campaigning"),
                never = revoke_dead_leader(self.client.clone(), self.config.election(), self.lease) => match never {},
            };
            match outcome {
                Ok(mut won) => match won.take_leader() {
                    Some(key) => break key,
                    None => anyhow::bail!("etcd: campaign answered without a leader key"),
                },
                Err(e) => {
                    tracing::warn!(%e, "etcd: campaign failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        tracing::info!(replica = %me.replica, revision = key.rev(), "elected leader");
        Ok(Leadership {
            client: self.client.clone(),
            leader_key: key.key().to_vec(),
            revision: key.rev(),
            state_prefix: format!("{}/state/", self.config.prefix),
            committed: Default::default(),
            lost: self.lost.clone(),
        })
    }
}

/// Revoke the leader's lease once its NDSP port refuses connections
/// `REFUSED_PROBES` times in a row (never returns; dropped when the
/// campaign ends). A leader that listens on an unspecified address
/// (`0.0.0.0`) cannot be probed from here and is left to its TTL.
async fn revoke_dead_leader(
    client: Client,
    election: String,
    own_lease: i64,
) -> std::convert::Infallible {
    let mut tick = tokio::time::interval(LEADER_PROBE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut refused = (0_i64, 0_u32); // (lease, probes refused in a row)
    loop {
        tick.tick().await;
        let mut elections = client.election_client();
        let leader = tokio::time::timeout(CALL_TIMEOUT, elections.leader(election.clone())).await;
        let Some(kv) = leader
            .ok()
            .and_then(Result::ok)
            .and_then(|mut l| l.take_kv())
        else {
            continue;
        };
        let lease = kv.lease();
        let info = serde_json::from_slice::<LeaderInfo>(kv.value()).ok();
        let addr = info
            .as_ref()
            .and_then(|i| i.ndsp.parse::<std::net::SocketAddr>().ok());
        let Some(addr) = addr.filter(|a| !a.ip().is_unspecified() && lease != own_lease) else {
            continue;
        };
        let probe = tokio::time::timeout(LEADER_PROBE, tokio::net::TcpStream::connect(addr)).await;
        let is_refused =
            matches!(probe, Ok(Err(ref e)) if e.kind() == std::io::ErrorKind::ConnectionRefused);
        refused = match (is_refused, refused) {
            (false, _) => (lease, 0),
            (true, (l, n)) if l == lease => (lease, n + 1),
            (true, _) => (lease, 1),
        };
        if refused.1 >= REFUSED_PROBES {
            let mut leases = client.lease_client();
            if let Ok(Ok(_)) = tokio::time::timeout(CALL_TIMEOUT, leases.revoke(lease)).await {
                let name = info.map(|i| i.replica).unwrap_or_default();
                tracing::warn!(leader = %name, lease, %addr,
                    "the leader's NDSP port refuses connections: its lease revoked");
            }
            refused = (lease, 0);
        }
    }
}

impl Leadership {
    /// The P4Runtime election id: the leader key's create revision, which
    /// only grows from one leader to the next.
    pub fn election_id(&self) -> u128 {
        self.revision as u128
    }

    /// The state the previous leaders committed, if any.
    /// A member that is down refuses the read; it is retried, as commits
    /// are, for 2 s (the client spreads calls over the members).
    pub async fn load(&self, fabric: &str) -> anyhow::Result<Option<State>> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        let answer = loop {
            let mut kv = self.client.kv_client();
            let read = kv.get(
                self.state_prefix.clone(),
                Some(GetOptions::new().with_prefix()),
            );
            match tokio::time::timeout(CALL_TIMEOUT, read).await {
                Ok(Ok(answer)) => break answer,
                Ok(Err(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(%e, "etcd: state read failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(Err(e)) => return Err(e).context("etcd: cannot read the state"),
                Err(_) => anyhow::bail!("etcd: no answer to the state read in {CALL_TIMEOUT:?}"),
            }
        };
        let mut keys = BTreeMap::new();
        for kv in answer.kvs() {
            let key = kv.key_str().context("etcd: a state key is not UTF-8")?;
            let name = key.strip_prefix(&self.state_prefix).unwrap_or(key);
            keys.insert(name.to_string(), kv.value().to_vec());
        }
        if keys.is_empty() {
            return Ok(None);
        }
        let state = layout::assemble(&keys, fabric)
            .with_context(|| format!("etcd keys {}*", self.state_prefix))?;
        *self.committed.lock().await = layout::Committed::of(&state, &keys);
        Ok(Some(state))
    }

    /// Commit the state, fenced by this leadership: one transaction that
    /// writes the keys that changed, and only while this replica's leader
    /// key exists with its revision (so never once another replica leads).
    /// Retries etcd errors for up to two seconds; the caller must stop when
    /// this fails.
    pub async fn save(&self, state: &State) -> anyhow::Result<()> {
        let mut committed = self.committed.lock().await;
        let changes = committed.changes(state)?;
        if changes.is_empty() {
            return Ok(());
        }
        let key = |name: String| format!("{}{name}", self.state_prefix);
        let ops: Vec<TxnOp> = changes
            .puts()
            .map(|(name, value)| TxnOp::put(key(name), value, None))
            .chain(changes.deletes().map(|name| TxnOp::delete(key(name), None)))
            .collect();
        let count = ops.len();
        let txn = Txn::new()
            .when(vec![Compare::create_revision(
                self.leader_key.clone(),
                CompareOp::Equal,
                self.revision,
            )])
            .and_then(ops);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let mut kv = self.client.kv_client();
            let attempt = tokio::time::timeout(CALL_TIMEOUT, kv.txn(txn.clone()));
            let outcome = match attempt.await {
                Ok(outcome) => outcome,
                Err(_) => Err(etcd_client::Error::InvalidArgs(format!(
                    "no answer in {CALL_TIMEOUT:?}"
                ))),
            };
            match outcome {
                Ok(answer) if answer.succeeded() => {
                    committed.apply(changes);
                    return Ok(());
                }
                Ok(_) => anyhow::bail!(
                    "etcd: this replica is no longer the leader (its key {} is gone)",
                    String::from_utf8_lossy(&self.leader_key)
                ),
                Err(e @ etcd_client::Error::GRpcStatus(_))
                    if e.to_string().contains("too many operations") =>
                {
                    return Err(e).context(format!(
                        "etcd: one commit changes {count} keys; start etcd with --max-txn-ops {count} or more"
                    ));
                }
                Err(e) if tokio::time::Instant::now() < deadline && !*self.lost.borrow() => {
                    tracing::warn!(%e, "etcd: commit failed; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e).context("etcd: cannot commit the state"),
            }
        }
    }
}

/// Leave now: nothing more is answered or installed by this process.
pub fn step_down(why: &str) -> ! {
    tracing::error!(why, "stepping down");
    eprintln!("foresight controller: stepping down: {why}");
    std::process::exit(STEP_DOWN_EXIT)
}

/// Wait until the lease is reported lost (`true`). `false` when the
/// keep-alive ends without that, which it does only on a clean `leave`:
/// a leader stopped on purpose must exit 0, not as if it had lost etcd.
async fn lease_lost(mut lost: tokio::sync::watch::Receiver<bool>) -> bool {
    lost.wait_for(|l| *l).await.is_ok()
}

/// Step down as soon as the lease is lost or any switch reports a primary
/// with a higher election id than ours (a newer leader).
pub fn watch_fences(
    lost: tokio::sync::watch::Receiver<bool>,
    switches: Vec<(String, tokio::sync::watch::Receiver<SwitchStatus>)>,
    election_id: u128,
) {
    tokio::spawn(async move {
        if lease_lost(lost).await {
            step_down("the etcd lease expired, or etcd was out of reach for 5 lease TTLs (another replica may lead now)");
        }
    });
    for (name, mut status) in switches {
        tokio::spawn(async move {
            loop {
                let newer = status
                    .borrow()
                    .primary_election_id
                    .as_deref()
                    .and_then(|e| e.parse::<u128>().ok())
                    .filter(|e| *e > election_id);
                if let Some(e) = newer {
                    step_down(&format!(
                        "switch {name} has a newer primary (election id {e} > ours {election_id})"
                    ));
                }
                if status.changed().await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The state as etcd keys: `meta` (fabric, epoch, counters, links down),
/// `job/<tenant>/<job>` and `reservation/<seq>` (zero-padded, so that key
/// order is sequence order).
mod layout {
    use std::collections::{BTreeMap, HashSet};

    use anyhow::Context;
    use serde::{Deserialize, Serialize};

    use super::state::{Job, LinkRef, Reservation, State};

    #[derive(Serialize, Deserialize)]
    struct Meta {
        version: u32,
        fabric: String,
        epoch_unix_ns: u64,
        next_seq: u64,
        next_qp: BTreeMap<String, u32>,
        links_down: Vec<LinkRef>,
    }

    fn meta(state: &State) -> anyhow::Result<Vec<u8>> {
        let meta = Meta {
            version: state.version,
            fabric: state.fabric.clone(),
            epoch_unix_ns: state.epoch_unix_ns,
            next_seq: state.next_seq,
            next_qp: state.next_qp.clone(),
            links_down: state.links_down.clone(),
        };
        Ok(serde_json::to_vec(&meta)?)
    }

    fn job_key(j: &Job) -> String {
        format!("job/{}/{}", j.tenant, j.job_id)
    }

    fn reservation_key(seq: u64) -> String {
        format!("reservation/{seq:020}")
    }

    /// The records etcd holds, as last committed. Compared with the state
    /// record by record (`==`), so a commit serializes only what changed,
    /// not every live reservation.
    #[derive(Default)]
    pub struct Committed {
        meta: Vec<u8>,
        jobs: BTreeMap<String, Job>,
        reservations: BTreeMap<u64, Reservation>,
    }

    /// What one commit writes (records with their bytes) and deletes.
    #[derive(Default)]
    pub struct Changes {
        meta: Option<Vec<u8>>,
        jobs: Vec<(String, Job, Vec<u8>)>,
        reservations: Vec<(Reservation, Vec<u8>)>,
        deleted_jobs: Vec<String>,
        deleted_reservations: Vec<u64>,
    }

    impl Changes {
        pub fn is_empty(&self) -> bool {
            self.meta.is_none()
                && self.jobs.is_empty()
                && self.reservations.is_empty()
                && self.deleted_jobs.is_empty()
                && self.deleted_reservations.is_empty()
        }

        /// The keys to write, with their values.
        pub fn puts(&self) -> impl Iterator<Item = (String, &[u8])> {
            let meta = self.meta.iter().map(|m| ("meta".to_string(), m.as_slice()));
            let jobs = self.jobs.iter().map(|(k, _, v)| (k.clone(), v.as_slice()));
            let reservations = self
                .reservations
                .iter()
                .map(|(r, v)| (reservation_key(r.seq), v.as_slice()));
            meta.chain(jobs).chain(reservations)
        }

        /// The keys to delete.
        pub fn deletes(&self) -> impl Iterator<Item = String> + '_ {
            let reservations = self
                .deleted_reservations
                .iter()
                .map(|s| reservation_key(*s));
            self.deleted_jobs.iter().cloned().chain(reservations)
        }
    }

    impl Committed {
        /// What was loaded: `state`, assembled from `keys`.
        pub fn of(state: &State, keys: &BTreeMap<String, Vec<u8>>) -> Committed {
            Committed {
                meta: keys.get("meta").cloned().unwrap_or_default(),
                jobs: state.jobs.iter().map(|j| (job_key(j), j.clone())).collect(),
                reservations: state
                    .reservations
                    .iter()
                    .map(|r| (r.seq, r.clone()))
                    .collect(),
            }
        }

        /// What to write and delete so that etcd holds `state`.
        pub fn changes(&self, state: &State) -> anyhow::Result<Changes> {
            let mut out = Changes::default();
            let meta = meta(state)?;
            if meta != self.meta {
                out.meta = Some(meta);
            }
            let mut jobs = HashSet::new();
            for j in &state.jobs {
                let key = job_key(j);
                if self.jobs.get(&key) != Some(j) {
                    out.jobs
                        .push((key.clone(), j.clone(), serde_json::to_vec(j)?));
                }
                jobs.insert(key);
            }
            out.deleted_jobs = self
                .jobs
                .keys()
                .filter(|k| !jobs.contains(*k))
                .cloned()
                .collect();
            let mut seqs = HashSet::with_capacity(state.reservations.len());
            for r in &state.reservations {
                if self.reservations.get(&r.seq) != Some(r) {
                    out.reservations.push((r.clone(), serde_json::to_vec(r)?));
                }
                seqs.insert(r.seq);
            }
            out.deleted_reservations = self
                .reservations
                .keys()
                .filter(|s| !seqs.contains(*s))
                .copied()
                .collect();
            Ok(out)
        }

        /// `changes` were committed.
        pub fn apply(&mut self, changes: Changes) {
            if let Some(meta) = changes.meta {
                self.meta = meta;
            }
            for key in &changes.deleted_jobs {
                self.jobs.remove(key);
            }
            for seq in &changes.deleted_reservations {
                self.reservations.remove(seq);
            }
            self.jobs
                .extend(changes.jobs.into_iter().map(|(k, j, _)| (k, j)));
            self.reservations
                .extend(changes.reservations.into_iter().map(|(r, _)| (r.seq, r)));
        }
    }

    pub fn assemble(keys: &BTreeMap<String, Vec<u8>>, fabric: &str) -> anyhow::Result<State> {
        let meta = keys.get("meta").context("no meta key")?;
        let meta: Meta = serde_json::from_slice(meta).context("meta: not Foresight state")?;
        let mut state = State::new(&meta.fabric, meta.epoch_unix_ns);
        state.version = meta.version;
        state.next_seq = meta.next_seq;
        state.next_qp = meta.next_qp;
        state.links_down = meta.links_down;
        for (name, value) in keys {
            if name.starts_with("job/") {
                let job: Job = serde_json::from_slice(value).with_context(|| name.clone())?;
                state.jobs.push(job);
            } else if name.starts_with("reservation/") {
                let r: Reservation = serde_json::from_slice(value).with_context(|| name.clone())?;
                state.reservations.push(r);
            } else if name != "meta" {
                anyhow::bail!("{name}: not a key of Foresight state");
            }
        }
        // The same checks as a state file's.
        let bytes = serde_json::to_vec(&state)?;
        State::from_json(&bytes, fabric)
    }
}

#[cfg(test)]
mod tests {
    use super::layout::Committed;
    use super::lease_lost;
    use super::state::{Job, Reason, Reservation, State, Status, Subject};

    fn reservation(seq: u64) -> Reservation {
        Reservation {
            id: format!("r{seq}"),
            seq,
            tenant: "t".into(),
            subject: Subject::Demand(format!("d{seq}")),
            job_id: None,
            request: String::new(),
            priority: 0,
            elastic: false,
            deadline_unix_ns: None,
            status: Status::Admitted,
            reason: Reason::None,
            advisory: None,
            revision: 1,
            flows: Vec::new(),
            cancelled: false,
            predicted: false,
        }
    }

    /// The keys a commit writes, sorted.
    fn written(c: &Committed, s: &State) -> (Vec<String>, Vec<String>) {
        let changes = c.changes(s).unwrap();
        let mut puts: Vec<String> = changes.puts().map(|(k, _)| k).collect();
        let mut deletes: Vec<String> = changes.deletes().collect();
        puts.sort();
        deletes.sort();
        (puts, deletes)
    }

    #[test]
    fn a_commit_writes_only_what_changed() {
        let mut c = Committed::default();
        let mut s = State::new("f", 1);
        s.reservations = (1..=3).map(reservation).collect();
        s.jobs.push(Job {
            tenant: "t".into(),
            job_id: "j".into(),
            generation: 1,
            request: String::new(),
        });
        let (puts, deletes) = written(&c, &s);
        assert_eq!(puts.len(), 5, "meta, one job, three reservations: {puts:?}");
        assert!(deletes.is_empty());
        c.apply(c.changes(&s).unwrap());
        assert!(c.changes(&s).unwrap().is_empty(), "nothing changed since");

        // One record changes, one goes, one comes, the job goes.
        s.reservations[0].revision += 1;
        s.reservations.remove(1);
        s.reservations.push(reservation(4));
        s.jobs.clear();
        let (puts, deletes) = written(&c, &s);
        assert_eq!(
            puts,
            vec![
                "reservation/00000000000000000001",
                "reservation/00000000000000000004"
            ]
        );
        assert_eq!(deletes, vec!["job/t/j", "reservation/00000000000000000002"]);
        c.apply(c.changes(&s).unwrap());
        assert!(c.changes(&s).unwrap().is_empty());

        // The counters are in meta.
        s.next_seq += 1;
        assert_eq!(written(&c, &s).0, vec!["meta"]);
    }

    #[tokio::test]
    async fn a_clean_leave_is_not_a_lost_lease() {
        // The keep-alive ends (its sender dropped) after `leave`: no step-down.
        let (tx, rx) = tokio::sync::watch::channel(false);
        drop(tx);
        assert!(!lease_lost(rx).await);
    }

    #[tokio::test]
    async fn a_lost_lease_is_seen_even_after_the_keep_alive_ended() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tx.send(true).unwrap();
        drop(tx);
        assert!(lease_lost(rx).await);
    }
}
