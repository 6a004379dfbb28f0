//! Link state, the network side of deviations: the operator takes a
//! fabric link down or brings it up, the reservations on it are
//! re-planned, and what paths are left between two hosts is reported.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;

use ndsp::types as nt;

use super::super::outcome::truncate;
use super::super::records::Engine;
use crate::daemon::persistence::state_records::{Hop, LinkRef, Reason, Reservation};

/// What a link state change did.
#[derive(Debug, Clone)]
pub struct LinkChange {
    pub link: LinkRef,
    /// The link's two directions, the named end's first.
    pub edges: [planner::topology::EdgeId; 2],
    /// False when the link already was in the requested state.
    pub changed: bool,
    /// The reservations re-planned, as they are now.
    pub affected: Vec<Arc<Reservation>>,
}

impl Engine {
    /// The fabric link at `node:port` (a port of a switch that leads to
    /// another switch) and its two directed edges, or why not.
    pub fn resolve_link(
        &self,
        node: &str,
        port: u32,
    ) -> Result<(LinkRef, [planner::topology::EdgeId; 2]), String> {
        use planner::topology::NodeRef;
        let topo = self.topo;
        let Some(s) = topo.switch_by_name(node) else {
            if topo.host_by_name(node).is_some() {
                return Err(format!(
                    "{node} is a host, not a switch: name the link by a switch end (a fabric link joins two switches)"
                ));
            }
            let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "no switch {node:?} in fabric {}; switches: {}",
                topo.name(),
                names.join(", ")
            ));
        };
        let fabric_ports = || {
            let mut p: Vec<String> = topo
                .switch_out_edges(s)
                .iter()
                .map(|&e| topo.edge(e).from_port.to_string())
                .collect();
            p.sort_by_key(|x| x.parse::<u32>().unwrap_or(0));
            p.join(", ")
        };
        let hop = Hop {
            switch: node.to_string(),
            port: u16::try_from(port).map_err(|_| {
                format!(
                    "{node}:{port}: no such port; fabric ports of {node}: {}",
                    fabric_ports()
                )
            })?,
        };
        let Some(e) = self.edge_of(&hop) else {
            return Err(format!(
                "{node}:{port}: nothing is attached to that port; fabric ports of {node}: {}",
                fabric_ports()
            ));
        };
        let l = topo.edge(e);
        let NodeRef::Switch(peer) = l.to else {
            return Err(format!(
                "{node}:{port} connects host {}, not another switch: not a fabric link (fabric ports of {node}: {})",
                topo.node_name(l.to),
                fabric_ports()
            ));
        };
        let reverse = topo
            .switch_out_edges(peer)
            .iter()
            .copied()
            .find(|&r| topo.edge(r).to == l.from && topo.edge(r).from_port == l.to_port)
            .ok_or_else(|| {
                format!("{node}:{port}: the fabric has no reverse direction of this link")
            })?;
        let me = (node.to_string(), hop.port);
        let other = (topo.switches()[peer as usize].name.clone(), l.to_port);
        let (a, b) = if me <= other {
            (me, other)
        } else {
            (other, me)
        };
        Ok((
            LinkRef {
                a: a.0,
                a_port: a.1,
                b: b.0,
                b_port: b.1,
            },
            [e, reverse],
        ))
    }

    /// Every directed edge that is down.
    pub fn down_edges(&self) -> BTreeSet<planner::topology::EdgeId> {
        (0..self.topo.edge_count() as u32)
            .filter(|&e| self.planner.is_edge_down(e))
            .collect()
    }

    /// Sequence numbers of live reservations with a flow, not over at
    /// `now`, whose recorded hops cross an edge in `edges`.
    pub(in crate::daemon::engine) fn crossing(
        &self,
        edges: &BTreeSet<planner::topology::EdgeId>,
        now: u64,
    ) -> Vec<u64> {
        self.state
            .reservations
            .iter()
            .filter(|r| {
                r.flows.iter().any(|f| {
                    now < f.end_unix_ns
                        && f.hops
                            .iter()
                            .any(|h| self.edge_of(h).is_some_and(|e| edges.contains(&e)))
                })
            })
            .map(|r| r.seq)
            .collect()
    }

    /// Re-plan reservation `seq` on the current link state; flows left
    /// without a reservation while a link is down get reason LINK_DOWN.
    pub(in crate::daemon::engine) fn replan_for_links(
        &mut self,
        seq: u64,
        down: &BTreeSet<planner::topology::EdgeId>,
        now: Option<u64>,
        moved: &mut Vec<String>,
    ) -> anyhow::Result<Arc<Reservation>> {
        let pending = self.replanning(self.state.reservations.record(seq).clone())?;
        self.planner.release(&pending.record.id);
        let (mut p, _) = self.plan_one(pending, now, moved);
        if !down.is_empty() {
            let mut lost = 0;
            for f in &mut p.record.flows {
                if !f.status.reserves() {
                    f.reason = Reason::LinkDown;
                    lost += 1;
                }
            }
            if lost > 0 {
                p.record.reason = Reason::LinkDown;
                let links: Vec<String> = self
                    .state
                    .links_down
                    .iter()
                    .map(|l| l.to_string())
                    .collect();
                p.record.advisory = Some(truncate(
                    format!(
                        "link down ({}): {lost} of {} flows have no reserved path and fall back to ECMP",
                        links.join(", "),
                        p.record.flows.len()
                    ),
                    1000,
                ));
            }
        }
        let record = Arc::new(p.record);
        self.state.reservations.insert(record.clone());
        Ok(record)
    }

    /// After a restart: the links recorded down are down again, so the
    /// patterns on them go and every reservation still recorded across one
    /// (a state written by an older controller) is re-planned. Returns the
    /// re-planned reservations' ids.
    pub(in crate::daemon::engine) fn replan_on_links_down(
        &mut self,
    ) -> anyhow::Result<Vec<String>> {
        let down = self.down_edges();
        if self.drop_patterns_crossing(&down) > 0 {
            self.unpin_orphans();
        }
        let mut replanned = Vec::new();
        for seq in self.crossing(&down, 0) {
            replanned.push(self.state.reservations.record(seq).id.clone());
            self.replan_for_links(seq, &down, None, &mut Vec::new())?;
        }
        Ok(replanned)
    }

    /// Take the fabric link at `node:port` down (`down`) or bring it up.
    /// Down: both directions leave the planner's view and every live
    /// reservation recorded on the link is re-planned (other paths, or
    /// ECMP fallback with reason LINK_DOWN). Up: the link is usable again
    /// and reservations that lost their path to a down link are re-planned.
    /// A request for the state the link is already in changes nothing.
    /// Bad input (unknown switch or port, a host port) changes nothing.
    pub fn set_link(
        &mut self,
        node: &str,
        port: u32,
        down: bool,
        now: u64,
    ) -> Result<LinkChange, String> {
        let (link, edges) = self.resolve_link(node, port)?;
        let was_down = self.state.links_down.contains(&link);
        let mut change = LinkChange {
            link: link.clone(),
            edges,
            changed: was_down != down,
            affected: Vec::new(),
        };
        if !change.changed {
            return Ok(change);
        }
        for e in edges {
            self.planner.set_edge_down(e, down);
        }
        let targets: Vec<u64> = if down {
            self.state.links_down.push(link);
            self.state.links_down.sort();
            let edges: BTreeSet<_> = edges.into_iter().collect();
            if self.drop_patterns_crossing(&edges) > 0 {
                self.unpin_orphans();
            }
            self.crossing(&edges, now)
        } else {
            self.state.links_down.retain(|l| l != &link);
            self.state
                .reservations
                .iter()
                .filter(|r| {
                    r.reason == Reason::LinkDown
                        || r.flows.iter().any(|f| f.reason == Reason::LinkDown)
                })
                .map(|r| r.seq)
                .collect()
        };
        let all_down = self.down_edges();
        let mut moved = Vec::new();
        for seq in targets {
            let r = self
                .replan_for_links(seq, &all_down, Some(now), &mut moved)
                .map_err(|e| format!("re-planning: {e}"))?;
            change.affected.push(r);
        }
        // Reservations moved to make room are affected too, as they are now.
        for r in self.current(&moved) {
            match change.affected.iter_mut().find(|a| a.id == r.id) {
                Some(a) => *a = r,
                None => change.affected.push(r),
            }
        }
        // The link left or joined the ECMP groups of the switches around
        // it, so a source port may now hash elsewhere: check every other
        // steered flow (the re-planned ones were just steered afresh).
        let affected: BTreeSet<u64> = change.affected.iter().map(|a| a.seq).collect();
        let steered: Vec<u64> = self
            .state
            .reservations
            .iter()
            .filter(|r| !affected.contains(&r.seq))
            .filter(|r| r.flows.iter().any(|f| f.udp_src_port.is_some()))
            .map(|r| r.seq)
            .collect();
        for seq in steered {
            if self.resteer(seq, &change.link, down, now) {
                change
                    .affected
                    .push(self.state.reservations.shared(seq).expect("live").clone());
            }
        }
        Ok(change)
    }

    /// Paths between two fabric hosts at `now`: equal-cost paths, those
    /// with every link up, and the largest rate one of those could still
    /// reserve (headroom minus the ledger, source NIC included; within
    /// `tenant`'s share when shares are set). `None` when a host is not
    /// attached to the fabric.
    pub fn path_availability(
        &self,
        tenant: &str,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        now: u64,
    ) -> Option<nt::PathAvailability> {
        let (&s, &d) = (self.by_ip.get(&src)?, self.by_ip.get(&dst)?);
        if s == d {
            return None;
        }
        let paths = planner::paths::all_paths(self.topo, s, d, 1024);
        let t = self.to_planner_ns(now);
        let w = planner::Window::new(t, t + 1);
        let up: Vec<&planner::Path> = paths
            .iter()
            .filter(|p| {
                p.reserved_edges(self.topo, s)
                    .all(|e| !self.planner.is_edge_down(e))
            })
            .collect();
        let max_reservable_bps = up
            .iter()
            .map(|p| {
                p.reserved_edges(self.topo, s)
                    .map(|e| self.planner.free_bps(tenant, e, w))
                    .min()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        Some(nt::PathAvailability {
            source_address: src,
            destination_address: dst,
            equal_cost_paths: paths.len() as u32,
            available_paths: up.len() as u32,
            max_reservable_bps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::*;

    #[test]
    fn a_link_down_replans_the_reservations_on_it_and_bad_names_change_nothing() {
        let (mut e, r) = engine_with_one_reservation();
        let first = r[0].flows[0].hops[0].clone();
        assert_eq!(first.switch, "leaf1");
        let before = serde_json::to_string(&e.state).unwrap();
        for (node, port, why) in [
            ("leaf9", 3, "no switch \"leaf9\""),
            ("h1", 1, "is a host"),
            ("leaf1", 1, "connects host h1"),
            ("leaf1", 9, "nothing is attached"),
            ("leaf1", 70000, "no such port"),
        ] {
            let err = e.set_link(node, port, true, T0).unwrap_err();
            assert!(err.contains(why), "{node}:{port}: {err}");
        }
        assert_eq!(
            serde_json::to_string(&e.state).unwrap(),
            before,
            "changed nothing"
        );

        // Down by its far end: the same link.
        let (link, _) = e.resolve_link("leaf1", u32::from(first.port)).unwrap();
        let change = e
            .set_link(&link.b, u32::from(link.b_port), true, T0 + MS)
            .unwrap();
        assert!(change.changed);
        assert_eq!(change.link, link);
        assert_eq!(e.state.links_down, vec![link.clone()]);
        assert_eq!(change.affected.len(), 1);
        let moved = e.state.reservations.nth(0).clone();
        assert_eq!(moved.revision, 2);
        assert_eq!(moved.status, Status::Admitted, "the other spine has room");
        assert_ne!(moved.flows[0].hops[0], first, "off the failed link");
        assert!(moved.flows[0]
            .hops
            .iter()
            .all(|h| e.edge_of(h).is_some_and(|x| !change.edges.contains(&x))));
        wire(&moved);
        // Again: already down, nothing changes.
        assert!(
            !e.set_link("leaf1", u32::from(first.port), true, T0)
                .unwrap()
                .changed
        );

        // A second demand between the same leaves no longer fits beside the
        // first on the one remaining uplink: fallback with reason LINK_DOWN
        // once the other uplink is down too.
        let other = e
            .resolve_link("leaf1", u32::from(moved.flows[0].hops[0].port))
            .unwrap()
            .0;
        let change = e
            .set_link(&other.a, u32::from(other.a_port), true, T0 + MS)
            .unwrap();
        let lost = &change.affected[0];
        assert_eq!(lost.status, Status::FallbackEcmp);
        assert_eq!(lost.reason, Reason::LinkDown);
        assert!(
            lost.advisory.as_deref().unwrap().contains("link down"),
            "{lost:?}"
        );
        wire(lost);
        // Up again: the reservation that lost its path gets one back.
        let change = e
            .set_link(&other.a, u32::from(other.a_port), false, T0 + MS)
            .unwrap();
        assert_eq!(change.affected.len(), 1);
        assert_eq!(e.state.reservations.nth(0).status, Status::Admitted);
        assert_eq!(e.state.links_down, vec![link]);
        let pa = e
            .path_availability(
                "t",
                "10.0.1.1".parse().unwrap(),
                "10.0.2.1".parse().unwrap(),
                T0 + MS,
            )
            .unwrap();
        assert_eq!((pa.equal_cost_paths, pa.available_paths), (2, 1), "{pa:?}");
        // 90 % of 100 G on the remaining path, 40 G of it reserved.
        assert_eq!(pa.max_reservable_bps, 50_000_000_000);
        // The link state survives a reload: still down, nothing on it.
        let saved: State = serde_json::from_str(&serde_json::to_string(&e.state).unwrap()).unwrap();
        let mut stale = saved.clone();
        let (again, restored) = restart(e.topo, saved);
        assert!(restored.diverged.is_empty());
        assert_eq!(again.down_edges().len(), 2);
        // A state recording a reservation across a down link (written by
        // an older controller): re-planned at load, and listed.
        stale.links_down.push(other);
        stale.links_down.sort();
        let (again, restored) = restart(e.topo, stale);
        assert_eq!(
            restored.diverged,
            vec![again.state.reservations.nth(0).id.clone()]
        );
        assert_eq!(again.state.reservations.nth(0).status, Status::FallbackEcmp);
        assert_eq!(again.state.reservations.nth(0).reason, Reason::LinkDown);
        assert!(
            again.reserved_now(T0 + MS).is_empty(),
            "nothing reserved across a down link"
        );
    }
}
