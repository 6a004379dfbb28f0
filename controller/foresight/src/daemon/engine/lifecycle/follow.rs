//! Reservations that follow their traffic, the ledger's side: a
//! reservation whose flows still send near its end is extended by a step,
//! only as far as every link of their paths has the room then (capacity
//! promised to another admitted reservation is never taken); one whose
//! flows stopped is released early, its capacity back in the ledger. What
//! counts as sending or stopped is the daemon's (`daemon/follow.rs`).
//!
//! A flow's extension so far is its end past `start + duration` (what it
//! was granted), so the bound on the total needs no extra record.

use std::collections::BTreeMap;

use planner::topology::EdgeId;

use super::super::records::Engine;
use crate::daemon::persistence::state_records::{FlowRecord, Reservation};

/// Why a reservation was not extended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoExtension {
    /// No live reservation by that id, or none of its flows is reserved
    /// and still running.
    NotLive,
    /// It was extended as far as the policy lets it.
    Capped { extended_ns: u64 },
    /// A link of its paths is promised to others over the step.
    NoRoom {
        link: String,
        free_bps: u64,
        need_bps: u64,
    },
}

impl std::fmt::Display for NoExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoExtension::NotLive => f.write_str("nothing of it is reserved and running"),
            NoExtension::Capped { extended_ns } => write!(
                f,
                "already extended by {:.1} ms, the most it may be",
                *extended_ns as f64 / 1e6
            ),
            NoExtension::NoRoom {
                link,
                free_bps,
                need_bps,
            } => write!(
                f,
                "{link} has {:.1} of the {:.1} Gbit/s it needs free over the extension",
                *free_bps as f64 / 1e9,
                *need_bps as f64 / 1e9
            ),
        }
    }
}

/// What an extension took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extended {
    /// The reservation's new end.
    pub end_unix_ns: u64,
    /// Link-seconds now reserved beyond the old ends: each reserved link
    /// of each extended flow, times the step.
    pub link_seconds: f64,
}

/// What an early release gave back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Released {
    /// Link-seconds no longer reserved: each reserved link of each flow,
    /// times the part of its window released.
    pub link_seconds: f64,
}

/// How much of its grant a flow has been extended by.
pub fn extended_ns(f: &FlowRecord) -> u64 {
    f.end_unix_ns
        .saturating_sub(f.start_unix_ns.saturating_add(f.duration_ns))
}

impl Engine {
    /// Extends reservation `id` by `step_ns`: every reserved flow still
    /// running at `now` that `sending` says still sends gets its end moved
    /// by `step_ns`, if no flow would then pass `max_ns` of extension and
    /// every link of those flows' paths has their rate free over the step.
    /// Returns the new end and what it took, in a new revision that says
    /// why.
    pub fn extend(
        &mut self,
        id: &str,
        step_ns: u64,
        max_ns: u64,
        now: u64,
        sending: impl Fn(&FlowRecord) -> bool,
    ) -> Result<Extended, NoExtension> {
        let seq = self
            .state
            .reservations
            .find(id)
            .filter(|r| !r.cancelled)
            .map(|r| r.seq)
            .ok_or(NoExtension::NotLive)?;
        let r = self.state.reservations.record(seq);
        let chosen: Vec<usize> = r
            .flows
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.status.reserves()
                    && f.accepted_bps > 0
                    && f.start_unix_ns <= now
                    && now < f.end_unix_ns
                    && sending(f)
            })
            .map(|(i, _)| i)
            .collect();
        if chosen.is_empty() {
            return Err(NoExtension::NotLive);
        }
        let most = chosen
            .iter()
            .map(|&i| extended_ns(&r.flows[i]))
            .max()
            .unwrap_or(0);
        if most + step_ns > max_ns {
            return Err(NoExtension::Capped { extended_ns: most });
        }
        self.room_for(r, &chosen, step_ns)?;
        let links: usize = chosen
            .iter()
            .map(|&i| self.reserved_links(&r.flows[i]))
            .sum();
        let why = format!(
            "extended by {:.1} ms to {:.1} ms past its grant: {} of its flows still send",
            step_ns as f64 / 1e6,
            (most + step_ns) as f64 / 1e6,
            chosen.len()
        );
        let mut end = 0;
        self.revise(seq, why, |flows| {
            for &i in &chosen {
                flows[i].end_unix_ns += step_ns;
                end = end.max(flows[i].end_unix_ns);
            }
        });
        Ok(Extended {
            end_unix_ns: end,
            link_seconds: links as f64 * step_ns as f64 / 1e9,
        })
    }

    /// How many links flow `f`'s reservation holds.
    fn reserved_links(&self, f: &FlowRecord) -> usize {
        match (self.host(&f.src), self.path_of(&f.hops)) {
            (Ok(src), Some(path)) => path.reserved_edges(self.topo, src).count(),
            _ => 0,
        }
    }

    /// Whether every link of flows `chosen` of `r` has their summed rate
    /// free over the `step_ns` after each one's end.
    fn room_for(&self, r: &Reservation, chosen: &[usize], step_ns: u64) -> Result<(), NoExtension> {
        // Needs per link and window: flows of one reservation may share links.
        let mut need: BTreeMap<(EdgeId, u64), u64> = BTreeMap::new();
        for &i in chosen {
            let f = &r.flows[i];
            let (Ok(src), Some(path)) = (self.host(&f.src), self.path_of(&f.hops)) else {
                return Err(NoExtension::NotLive);
            };
            for e in path.reserved_edges(self.topo, src) {
                *need.entry((e, f.end_unix_ns)).or_default() += f.accepted_bps;
            }
        }
        for ((e, end), bps) in need {
            let w =
                planner::Window::new(self.to_planner_ns(end), self.to_planner_ns(end + step_ns));
            let free = self.planner.free_bps(&r.tenant, e, w);
            if free < bps {
                return Err(NoExtension::NoRoom {
                    link: self.topo.describe_edge(e),
                    free_bps: free,
                    need_bps: bps,
                });
            }
        }
        Ok(())
    }

    /// Releases reservation `id`'s reserved flows from `now` on (those not
    /// started yet entirely), because its traffic stopped (`why`), in a new
    /// revision; the scheduler retires it once nothing is left. `None` when
    /// nothing of it was still reserved.
    pub fn release_early(&mut self, id: &str, now: u64, why: &str) -> Option<Released> {
        let seq = self
            .state
            .reservations
            .find(id)
            .filter(|r| !r.cancelled)?
            .seq;
        let mut link_seconds = 0.0;
        let mut cut = Vec::new();
        {
            let r = self.state.reservations.record(seq);
            for (i, f) in r.flows.iter().enumerate() {
                if !f.status.reserves() || f.accepted_bps == 0 || f.end_unix_ns <= now {
                    continue;
                }
                let from = now.max(f.start_unix_ns);
                let links = self.reserved_links(f);
                link_seconds += links as f64 * (f.end_unix_ns - from) as f64 / 1e9;
                cut.push((i, from));
            }
        }
        if cut.is_empty() {
            return None;
        }
        self.revise(seq, format!("released early: {why}"), |flows| {
            for (i, from) in cut {
                flows[i].end_unix_ns = from;
            }
        });
        Some(Released { link_seconds })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::*;
    use super::*;

    /// h1 to h3, `gbps` for 50 ms from T0.
    fn one(e: &mut Engine, id: &str, gbps: u64) -> Reservation {
        let d = demand(
            id,
            "10.0.1.1",
            "10.0.2.1",
            0,
            50 * MS,
            gbps * 1_000_000_000,
            None,
        );
        submit(e, vec![d], T0).unwrap().remove(0)
    }

    /// A running reservation still sending is extended step by step, the
    /// ledger holding it over the extension, up to the cap, and not past.
    #[test]
    fn a_sending_reservation_is_extended_up_to_the_cap() {
        let mut e = engine();
        let r = one(&mut e, "d", 40);
        let end = r.end_unix_ns();
        let now = end - 5 * MS;
        let took = e.extend(&r.id, 10 * MS, 25 * MS, now, |_| true).unwrap();
        assert_eq!(took.end_unix_ns, end + 10 * MS);
        let links = e.reserved_links(&r.flows[0]);
        assert!(links > 0);
        assert!(
            (took.link_seconds - links as f64 * 0.010).abs() < 1e-9,
            "{took:?}"
        );
        let after = e.state.find(&r.id).unwrap();
        assert_eq!(after.revision, r.revision + 1);
        assert!(after
            .advisory
            .as_deref()
            .unwrap()
            .contains("extended by 10.0 ms"));
        // The ledger holds the flow over the extension.
        let link = e.edge_of(&after.flows[0].hops[0]).unwrap();
        let mid = e.to_planner_ns(end + 5 * MS);
        assert_eq!(e.planner.reserved_at(link, mid), 40_000_000_000);
        e.extend(&r.id, 10 * MS, 25 * MS, now, |_| true).unwrap();
        assert_eq!(
            e.extend(&r.id, 10 * MS, 25 * MS, now, |_| true),
            Err(NoExtension::Capped {
                extended_ns: 20 * MS
            })
        );
        // Flows that stopped sending are not extended.
        assert_eq!(
            e.extend(&r.id, MS, 25 * MS, now, |_| false),
            Err(NoExtension::NotLive)
        );
    }

    /// An extension never takes what another admitted reservation holds:
    /// the refusal names the binding link, and nothing changed.
    #[test]
    fn an_extension_does_not_take_what_is_promised_to_another() {
        let mut e = engine();
        let at = |id: &str, src: &str, dst: &str, start: u64| {
            demand(id, src, dst, start, 50 * MS, 60_000_000_000, None)
        };
        // Two 60 Gbit/s transfers across the spines now, two more right
        // after them on the same NICs and spines.
        let now = submit(
            &mut e,
            vec![
                at("a", "10.0.1.1", "10.0.2.1", 0),
                at("b", "10.0.1.2", "10.0.2.2", 0),
            ],
            T0,
        )
        .unwrap();
        submit(
            &mut e,
            vec![
                at("c", "10.0.1.1", "10.0.2.1", 50 * MS),
                at("d", "10.0.1.2", "10.0.2.2", 50 * MS),
            ],
            T0,
        )
        .unwrap();
        let a = &now[0];
        let before = e.state.find(&a.id).unwrap().clone();
        match e.extend(&a.id, 10 * MS, 100 * MS, a.end_unix_ns() - MS, |_| true) {
            Err(NoExtension::NoRoom {
                link,
                free_bps,
                need_bps,
            }) => {
                assert!(free_bps < need_bps, "{link}: {free_bps} < {need_bps}");
                assert_eq!(need_bps, 60_000_000_000);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.state.find(&a.id).unwrap(), &before, "nothing changed");
    }

    /// A reservation whose traffic stopped gives its links back from now:
    /// the ledger no longer holds them, and the link-seconds are counted.
    #[test]
    fn a_stopped_reservation_is_released_early() {
        let mut e = engine();
        let r = one(&mut e, "d", 40);
        let start = r.start_unix_ns();
        let now = start + 20 * MS;
        let freed = e.release_early(&r.id, now, "idle for 10 ms").unwrap();
        // 30 ms left on each of its reserved links.
        let links = {
            let f = &r.flows[0];
            let path = e.path_of(&f.hops).unwrap();
            path.reserved_edges(e.topo, e.host(&f.src).unwrap()).count()
        };
        assert!(
            (freed.link_seconds - links as f64 * 0.030).abs() < 1e-9,
            "{freed:?}"
        );
        let after = e.state.find(&r.id).unwrap();
        assert_eq!(after.end_unix_ns(), now);
        assert!(after
            .advisory
            .as_deref()
            .unwrap()
            .contains("idle for 10 ms"));
        let link = e.edge_of(&after.flows[0].hops[0]).unwrap();
        assert_eq!(
            e.planner.reserved_at(link, e.to_planner_ns(now + 5 * MS)),
            0
        );
        assert_eq!(e.release_early(&r.id, now, "again"), None);
        assert_eq!(e.expire(now), vec![r.id.clone()]);
    }
}
