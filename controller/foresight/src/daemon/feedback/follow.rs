//! Reservations that follow their traffic (`--follow-traffic`): every
//! tick, each reservation running within a step of its end whose
//! flows still send is extended by a step (the engine checks the ledger,
//! `engine/follow.rs`); one whose flows all went quiet for `idle_ns` after
//! they had sent is released early. Whether a flow sends comes from the
//! INT reports of its watch entry (`--follow-from int`), or from the watch
//! counters of its host pair at its ingress leaf, polled every tick
//! (`--follow-from counters`: TCP too). Every change goes through `transact`, so the
//! switches get only the difference and `WatchEvents` tell the client; a
//! refused extension is published once per reservation end, with the
//! binding link.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::watch_counters::WatchCounters;
use crate::daemon::control::controller::{Controller, Inner, Mutation};
use crate::daemon::control::events::Event;
use crate::daemon::engine::{Engine, Extended, NoExtension, Released};
use crate::daemon::inputs::clock::now_unix_ns;
use crate::daemon::persistence::live_reservations::LiveReservations;
use crate::daemon::persistence::state_records::{FlowRecord, Lifecycle, Reservation};

/// Where the follow loop sees a flow's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowFrom {
    /// INT reports of the flow's watch entry (RoCEv2; needs the collector).
    Int,
    /// The watch counters of its host pair at its ingress leaf, polled
    /// every tick (UDP and TCP).
    Counters,
}

/// The policy (docs/operations.md, "Reservations that follow the traffic").
#[derive(Debug, Clone, Copy)]
pub struct FollowConfig {
    /// How often reservations are looked at.
    pub tick_ns: u64,
    /// A reservation is extended once it is this close to its end (or a
    /// step, if that is less).
    pub before_end_ns: u64,
    /// A step is this share of a flow's granted duration, at least
    /// `min_step_ns`.
    pub step_fraction: f64,
    pub min_step_ns: u64,
    /// The total extension of a flow is at most this share of its granted
    /// duration.
    pub max_fraction: f64,
    /// A flow is sending if traffic was seen this recently; once all of a
    /// reservation's flows are quiet this long after they sent, it is
    /// released early. It must outlast the transport's longest stall (a
    /// RoCE NIC's retransmission timeout, TCP's): a flow waiting on a
    /// retransmission is still sending.
    pub idle_ns: u64,
    pub from: FollowFrom,
}

impl Default for FollowConfig {
    fn default() -> FollowConfig {
        FollowConfig {
            tick_ns: 20_000_000,
            before_end_ns: 50_000_000,
            step_fraction: 0.25,
            min_step_ns: 20_000_000,
            max_fraction: 1.0,
            idle_ns: 200_000_000,
            from: FollowFrom::Int,
        }
    }
}

/// When traffic of each host pair was last seen growing, from the watch
/// counters (the INT reports keep their own, `LinkLoads::flow`).
#[derive(Default)]
pub struct PairActivity {
    last_growth_unix_ns: HashMap<(Ipv4Addr, Ipv4Addr), u64>,
}

impl PairActivity {
    pub fn record(&mut self, src: Ipv4Addr, dst: Ipv4Addr, bytes: u64, at_ns: u64) {
        if bytes > 0 {
            self.last_growth_unix_ns.insert((src, dst), at_ns);
        }
    }

    fn last(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Option<u64> {
        self.last_growth_unix_ns.get(&(src, dst)).copied()
    }
}

/// What one tick decided.
#[derive(Debug, Default)]
struct Decisions {
    /// Reservation, step, and the flows (ids) to extend.
    extend: Vec<(String, u64, Vec<String>)>,
    release: Vec<(String, String)>,
    /// Ingress leaves of the installed reserved flows: whose counters to
    /// poll.
    leaves: BTreeSet<String>,
}

/// Start following (after learning, if any, is started): the loop, and
/// with `--follow-from counters` the poll of the watch counters at the
/// ingress leaves of installed reserved flows.
pub(in crate::daemon) fn start(
    controller: &Arc<Controller>,
    config: FollowConfig,
) -> anyhow::Result<()> {
    let activity = Arc::new(Mutex::new(PairActivity::default()));
    let leaves = Arc::new(Mutex::new(BTreeSet::new()));
    if config.from == FollowFrom::Counters {
        let counters = WatchCounters::new(&controller.info)?;
        let (activity, leaves) = (activity.clone(), leaves.clone());
        tokio::spawn(controller.clone().poll_watch_counters(
            counters,
            config.tick_ns,
            move |_| {
                leaves
                    .lock()
                    .expect("leaves lock")
                    .iter()
                    .cloned()
                    .collect()
            },
            move |src, dst, bytes, at| {
                activity
                    .lock()
                    .expect("activity lock")
                    .record(src, dst, bytes, at)
            },
        ));
    }
    tokio::spawn(controller.clone().follow(config, activity, leaves));
    Ok(())
}

impl Controller {
    /// When `f`'s traffic was last seen (INT or the counters).
    fn last_seen(&self, f: &FlowRecord, pairs: &PairActivity) -> Option<u64> {
        let int = self.loads.last_seen(f.src_ip, f.dst_ip, f.dst_qp());
        int.max(pairs.last(f.src_ip, f.dst_ip))
    }

    /// The follow loop; runs until the process ends.
    async fn follow(
        self: Arc<Self>,
        config: FollowConfig,
        pairs: Arc<Mutex<PairActivity>>,
        leaves: Arc<Mutex<BTreeSet<String>>>,
    ) {
        let mut ticker = tokio::time::interval(Duration::from_nanos(config.tick_ns));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Reservation ends a refusal was already told for.
        let mut refused: HashSet<(String, u64)> = HashSet::new();
        loop {
            ticker.tick().await;
            let decisions = {
                let inner = self.inner.lock().await;
                let pairs = pairs.lock().expect("activity lock");
                let reservations = &inner.engine.state.reservations;
                decide(
                    reservations,
                    self.lead_ns,
                    &config,
                    |f| self.last_seen(f, &pairs),
                    now_unix_ns(),
                )
            };
            *leaves.lock().expect("leaves lock") = decisions.leaves;
            if decisions.extend.is_empty() && decisions.release.is_empty() {
                continue;
            }
            let Ok((done, _)) = self
                .transact(|inner: &mut Inner, now| {
                    Ok::<_, Infallible>(apply(
                        &mut inner.engine,
                        &decisions.extend,
                        &decisions.release,
                        config.max_fraction,
                        now,
                    ))
                })
                .await;
            for (id, took) in done.extended {
                self.metrics.follow_extensions.inc();
                self.metrics
                    .follow_extended_link_seconds
                    .inc_by(took.link_seconds);
                tracing::info!(%id, end = took.end_unix_ns, "extended: its flows still send");
            }
            for (id, freed) in done.released {
                tracing::info!(%id, link_seconds = freed.link_seconds, "released early");
                self.metrics.follow_releases.inc();
                self.metrics
                    .follow_released_link_seconds
                    .inc_by(freed.link_seconds);
            }
            for (r, why) in done.refused {
                if refused.insert((r.id.clone(), r.end_unix_ns())) {
                    self.metrics.follow_refusals.inc();
                    self.tell_refusal(r, &why);
                }
            }
            refused.retain(|(_, end)| *end + 60_000_000_000 > now_unix_ns());
        }
    }

    /// A refused extension, told on `WatchEvents`: the reservation as it
    /// stands, its advisory saying what bound it.
    fn tell_refusal(&self, mut r: Reservation, why: &NoExtension) {
        tracing::info!(id = %r.id, %why, "not extended");
        r.advisory = Some(format!(
            "its flows still send but it was not extended: {why}"
        ));
        let _ = self.events.send(Event::reservation(r));
    }
}

/// What one tick changed.
#[derive(Default)]
struct Applied {
    extended: Vec<(String, Extended)>,
    released: Vec<(String, Released)>,
    /// Extensions refused: the reservation as it stands, and why.
    refused: Vec<(Reservation, NoExtension)>,
}

/// The event telling watchers what reservation `id` is now.
fn changed_event(engine: &Engine, id: &str) -> Option<Event> {
    engine
        .state
        .find_shared(id)
        .cloned()
        .map(Event::reservation)
}

/// Take one tick's decisions in the engine, as one change: extensions
/// (of the flows decided, each at most `max_fraction` of its granted
/// duration past it), then early releases.
fn apply(
    engine: &mut Engine,
    extend: &[(String, u64, Vec<String>)],
    release: &[(String, String)],
    max_fraction: f64,
    now: u64,
) -> Mutation<Applied> {
    let mut done = Applied::default();
    let mut events = Vec::new();
    for (id, step, flows) in extend {
        let Some(r) = engine.state.find(id) else {
            continue;
        };
        let max_ns = r
            .flows
            .iter()
            .map(|f| (f.duration_ns as f64 * max_fraction) as u64)
            .max()
            .unwrap_or(0);
        let sending = |f: &FlowRecord| flows.contains(&f.flow_id);
        match engine.extend(id, *step, max_ns, now, sending) {
            Ok(took) => {
                events.extend(changed_event(engine, id));
                done.extended.push((id.clone(), took));
            }
            Err(NoExtension::NotLive) => {}
            Err(why) => done
                .refused
                .extend(engine.state.find(id).cloned().map(|r| (r, why))),
        }
    }
    for (id, why) in release {
        if let Some(freed) = engine.release_early(id, now, why) {
            events.extend(changed_event(engine, id));
            done.released.push((id.clone(), freed));
        }
    }
    Mutation {
        changed: !done.extended.is_empty() || !done.released.is_empty(),
        value: done,
        events,
    }
}

/// When each job's live reservations start, per host pair: the traffic of
/// a pair belongs to the job's latest reservation that has started.
struct JobStarts<'a> {
    starts: HashMap<(&'a str, &'a str, Ipv4Addr, Ipv4Addr), Vec<u64>>,
}

impl<'a> JobStarts<'a> {
    /// Of the jobs of `installed` only (the reservations a tick follows),
    /// so a tick does not walk what is held for later.
    fn of(
        reservations: &'a LiveReservations,
        installed: &[&'a Reservation],
        now: u64,
    ) -> JobStarts<'a> {
        let jobs: BTreeSet<(&str, &str)> = installed
            .iter()
            .filter_map(|r| Some((r.tenant.as_str(), r.job_id.as_deref()?)))
            .collect();
        let mut starts: HashMap<_, Vec<u64>> = HashMap::new();
        for (tenant, job) in jobs {
            for r in reservations.of_job(tenant, job).filter(|r| !r.cancelled) {
                for f in r
                    .flows
                    .iter()
                    .filter(|f| f.status.reserves() && f.end_unix_ns > now)
                {
                    starts
                        .entry((r.tenant.as_str(), job, f.src_ip, f.dst_ip))
                        .or_default()
                        .push(f.start_unix_ns);
                }
            }
        }
        JobStarts { starts }
    }

    /// Whether flow `f` of `r` is followed, before `until`, by a later
    /// reservation of the same job for its host pair.
    fn handed_over(&self, r: &Reservation, f: &FlowRecord, until: u64) -> bool {
        let Some(job) = r.job_id.as_deref() else {
            return false;
        };
        self.starts
            .get(&(r.tenant.as_str(), job, f.src_ip, f.dst_ip))
            .is_some_and(|s| s.iter().any(|&t| t > f.start_unix_ns && t <= until))
    }
}

/// What to extend and release at `now`, given when each flow's traffic was
/// `last_seen`; reservations are installed `lead_ns` ahead of their start.
fn decide(
    reservations: &LiveReservations,
    lead_ns: u64,
    c: &FollowConfig,
    last_seen: impl Fn(&FlowRecord) -> Option<u64>,
    now: u64,
) -> Decisions {
    let mut out = Decisions::default();
    // Only what has been installed by now can be followed.
    let installed: Vec<&Reservation> = reservations
        .starting_by(now.saturating_add(lead_ns))
        .filter(|r| r.lifecycle(now, lead_ns) == Lifecycle::Installed)
        .collect();
    let next_of_job = JobStarts::of(reservations, &installed, now);
    for r in installed {
        // Installed ahead of its start: its counters are read from
        // the start, so what they count later is its own traffic.
        out.leaves.extend(
            r.flows
                .iter()
                .filter(|f| f.status.reserves() && now < f.end_unix_ns)
                .filter_map(|f| f.hops.first().map(|h| h.switch.clone())),
        );
        if r.start_unix_ns() > now {
            continue;
        }
        let reserved: Vec<&FlowRecord> = r
            .flows
            .iter()
            .filter(|f| {
                f.status.reserves()
                    && f.accepted_bps > 0
                    && f.start_unix_ns <= now
                    && now < f.end_unix_ns
            })
            .collect();
        if reserved.is_empty() {
            continue;
        }
        let seen: Vec<Option<u64>> = reserved.iter().map(|f| last_seen(f)).collect();
        let end = reserved.iter().map(|f| f.end_unix_ns).max().unwrap_or(now);
        let step = reserved
            .iter()
            .map(|f| (f.duration_ns as f64 * c.step_fraction) as u64)
            .max()
            .unwrap_or(0)
            .max(c.min_step_ns);
        // Sending, and not handed over: a later reservation of the same
        // job for the same host pair starting by the step's end carries
        // what is seen from then on (its next step or iteration).
        let sending: Vec<String> = reserved
            .iter()
            .zip(&seen)
            .filter(|(f, t)| {
                t.is_some_and(|t| t + c.idle_ns > now)
                    && !next_of_job.handed_over(r, f, f.end_unix_ns + step)
            })
            .map(|(f, _)| f.flow_id.clone())
            .collect();
        // Within a step of the end (at most `before_end_ns`): a short
        // reservation is not extended before it could have ended.
        if !sending.is_empty() && end.saturating_sub(now) <= c.before_end_ns.min(step) {
            out.extend.push((r.id.clone(), step, sending));
        }
        // Quiet after having sent: every flow seen since its start, and
        // none for the idle gap.
        let all_sent = reserved
            .iter()
            .zip(&seen)
            .all(|(f, t)| t.is_some_and(|t| t >= f.start_unix_ns));
        let quiet = seen.iter().all(|t| t.is_some_and(|t| t + c.idle_ns <= now));
        if all_sent && quiet {
            out.release.push((
                r.id.clone(),
                format!(
                    "its flows sent nothing for {:.0} ms",
                    c.idle_ns as f64 / 1e6
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::engine::testing::{engine_with_one_reservation, MS, T0};

    /// The policy at the default settings on one running 50 ms reservation
    /// (h1 to h3, from T0), its traffic last seen at `seen` (None: never).
    fn decide_at(now: u64, seen: Option<u64>) -> Decisions {
        let (e, _) = engine_with_one_reservation();
        let c = FollowConfig::default();
        decide(&e.state.reservations, 10 * MS, &c, |_| seen, now)
    }

    #[test]
    fn a_reservation_still_sending_near_its_end_is_extended_by_a_step() {
        let near_end = T0 + 40 * MS;
        let d = decide_at(near_end, Some(near_end - 5 * MS));
        // A step: 25 % of 50 ms is under the 20 ms minimum.
        assert_eq!(d.extend.len(), 1, "{d:?}");
        assert_eq!(d.extend[0].1, 20 * MS);
        assert_eq!(d.extend[0].2.len(), 1);
        assert!(d.release.is_empty());
        assert_eq!(d.leaves, ["leaf1".to_string()].into());
        // Quiet for less than the idle gap (a retransmission stall) is
        // still sending; early in its window nothing is extended yet; quiet
        // for longer than the gap near the end neither.
        assert_eq!(
            decide_at(near_end, Some(near_end - 150 * MS)).extend.len(),
            1
        );
        assert!(decide_at(T0 + 5 * MS, Some(T0 + 4 * MS)).extend.is_empty());
        assert!(decide_at(near_end, Some(near_end - 250 * MS))
            .extend
            .is_empty());
    }

    /// A job's step whose host pair has the job's next step reserved from
    /// its end: what is seen then is the next step's, so it is not
    /// extended; another job's reservation does not count.
    #[test]
    fn a_step_is_not_extended_into_the_jobs_next_step() {
        let (e, _) = engine_with_one_reservation();
        let mut steps: Vec<Reservation> = e.state.reservations.iter().cloned().collect();
        steps[0].job_id = Some("job".into());
        let mut next = steps[0].clone();
        next.id = "next".into();
        next.seq += 1;
        for f in &mut next.flows {
            f.start_unix_ns = f.end_unix_ns;
            f.end_unix_ns += 50 * MS;
        }
        steps.push(next);
        let c = FollowConfig::default();
        let near_end = T0 + 40 * MS;
        // Seen 5 ms before the step's end, decided then.
        let decide_near_end = |steps: &[Reservation]| {
            let live: LiveReservations = steps.iter().cloned().collect();
            decide(&live, 10 * MS, &c, |_| Some(near_end - 5 * MS), near_end)
        };
        let d = decide_near_end(&steps);
        assert!(d.extend.is_empty(), "{d:?}");
        steps[1].job_id = Some("another".into());
        let d = decide_near_end(&steps);
        assert_eq!(d.extend.len(), 1, "{d:?}");
    }

    #[test]
    fn a_reservation_quiet_after_sending_is_released_and_one_never_seen_is_not() {
        // Sent at T0 + 1 ms; 200 ms of silence is past the window's end
        // here, so move the end out of the way: check just the rule.
        let (mut e, _) = engine_with_one_reservation();
        let seq = e.state.reservations.iter().next().unwrap().seq;
        for f in &mut e.state.reservations.record_mut(seq).flows {
            f.end_unix_ns = T0 + 1_000 * MS;
        }
        let c = FollowConfig::default();
        let at = T0 + 250 * MS;
        let d = decide(&e.state.reservations, 10 * MS, &c, |_| Some(T0 + MS), at);
        assert_eq!(d.release.len(), 1, "{d:?}");
        assert!(d.release[0].1.contains("200 ms"));
        // Seen 100 ms ago: not quiet long enough.
        let d = decide(
            &e.state.reservations,
            10 * MS,
            &c,
            |_| Some(at - 100 * MS),
            at,
        );
        assert!(d.release.is_empty(), "{d:?}");
        // Never seen (or only before its start): it may not have begun.
        let d = decide(&e.state.reservations, 10 * MS, &c, |_| None, at);
        assert!(d.release.is_empty() && d.extend.is_empty(), "{d:?}");
        let d = decide(&e.state.reservations, 10 * MS, &c, |_| Some(T0 - MS), at);
        assert!(d.release.is_empty(), "{d:?}");
    }

    #[test]
    fn growth_is_recorded_per_pair_and_silence_is_not() {
        let mut a = PairActivity::default();
        let (x, y) = ("10.0.1.1".parse().unwrap(), "10.0.2.1".parse().unwrap());
        a.record(x, y, 100, 5);
        a.record(x, y, 0, 9);
        assert_eq!(a.last(x, y), Some(5));
        assert_eq!(a.last(y, x), None);
    }
}
