//! How a reserved flow is held on its path: by SR labels the ingress leaf
//! pushes (switches that run Foresight's program), or by the UDP source
//! port whose hash the switches' own ECMP turns into that path (entropy
//! steering, [`planner::entropy`]: any switch, nothing installed).

use std::collections::HashMap;

use planner::entropy::{PortRange, Steering};
use planner::hash_profile::FabricHash;
use planner::topology::Topology;

use super::records::Engine;
use crate::daemon::persistence::state_records::{
    FlowRecord, Hop, LinkRef, QpChoices, Reason, Status,
};

/// Entropy steering as the controller was started with it.
#[derive(Clone, Debug)]
pub struct EntropySteering {
    solver: Steering,
    ports: PortRange,
    /// Whether a flow no port steers is pinned by SR labels instead (the
    /// switches run Foresight's program) or left to ECMP (they do not).
    fallback_sr: bool,
}

impl EntropySteering {
    /// For switches hashing as the planner predicts (`config`: as a file
    /// describes them, or as Foresight's program), ports from `ports`.
    pub fn new(
        topo: &Topology,
        config: &planner::PlannerConfig,
        ports: PortRange,
        fallback_sr: bool,
    ) -> EntropySteering {
        let solver = match &config.switch_hash {
            Some(fabric) => Steering::for_fabric(FabricHash::clone(fabric)),
            None => Steering::new(&config.ecmp_seeds.seeds(topo), config.ecmp_hash),
        };
        EntropySteering {
            solver,
            ports,
            fallback_sr,
        }
    }
}

/// What holds a flow on its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// The ingress leaf pushes these labels.
    Labels(Vec<u32>),
    /// The sender uses this UDP source port, to this destination QP (the
    /// flow's own, or the one chosen among the client's choices).
    Port { port: u16, qp: u32 },
    /// Nothing can: the flow falls back to ECMP for this reason.
    Cannot(Reason),
}

impl Hold {
    /// The record's `labels` and `udp_src_port` (both empty for `Cannot`).
    pub(super) fn parts(self) -> (Vec<u32>, Option<u16>) {
        match self {
            Hold::Labels(l) => (l, None),
            Hold::Port { port, .. } => (Vec::new(), Some(port)),
            Hold::Cannot(_) => (Vec::new(), None),
        }
    }

    /// The destination QP a port hold sends to.
    pub(super) fn qp(&self) -> Option<u32> {
        match self {
            Hold::Port { qp, .. } => Some(*qp),
            _ => None,
        }
    }

    /// Writes the hold into a recorded flow: labels, port and chosen QP.
    pub(super) fn write_to(self, f: &mut FlowRecord) {
        if let Some(qp) = self.qp() {
            f.qp = qp;
        }
        let (labels, port) = self.parts();
        (f.labels, f.udp_src_port) = (labels.into(), port);
    }

    /// The hold a recorded flow has now.
    fn of(f: &FlowRecord) -> Hold {
        match f.udp_src_port {
            Some(port) => Hold::Port { port, qp: f.qp },
            None if !f.labels.is_empty() => Hold::Labels(f.labels.to_vec()),
            None => Hold::Cannot(f.reason),
        }
    }
}

impl Engine {
    /// How `flow`, reserved on `path`, is held there. `qp_known`: the
    /// client gave the flow's destination QP (a QP-aware hash needs it), or
    /// `qp_choices` to choose it from.
    pub(super) fn hold(
        &self,
        flow: &planner::Flow,
        qp_known: bool,
        qp_choices: Option<QpChoices>,
        path: &planner::Path,
    ) -> Hold {
        let labels = || match path.label_stack(self.topo) {
            Ok(l) if !l.is_empty() && l.len() <= installer::names::SR_PUSH.len() => Hold::Labels(l),
            _ => Hold::Cannot(Reason::LabelStackTooDeep),
        };
        let Some(entropy) = &self.steering else {
            return labels();
        };
        let fallback = || {
            if entropy.fallback_sr {
                labels()
            } else {
                Hold::Cannot(Reason::NoPath)
            }
        };
        if entropy.solver.needs_qp() && !qp_known {
            // The switches hash a QP the controller does not know.
            return fallback();
        }
        let mut groups =
            planner::entropy::Groups::new(self.topo, |e: planner::topology::EdgeId| {
                self.planner.is_edge_down(e)
            });
        let found = match qp_choices {
            Some(choices) => entropy.solver.port_and_qp_in(
                &mut groups,
                flow,
                path,
                entropy.ports,
                choices.range(),
            ),
            None => entropy
                .solver
                .port_in(&mut groups, flow, path, entropy.ports),
        };
        match found {
            Ok(s) => Hold::Port {
                port: s.port,
                qp: s.dest_qp,
            },
            Err(_) => fallback(),
        }
    }

    /// After link `link` went down (or up): the flows of reservation `seq`
    /// held by a source port that no longer hashes onto their path get
    /// another port (or labels, or ECMP, as [`Engine::hold`] decides), in a
    /// new revision that says why. Whether anything changed.
    pub(super) fn resteer(&mut self, seq: u64, link: &LinkRef, down: bool, now: u64) -> bool {
        let r = self.state.reservations.record(seq);
        let holds: Vec<(usize, Hold)> = r
            .flows
            .iter()
            .enumerate()
            .filter(|(_, f)| f.udp_src_port.is_some() && now < f.end_unix_ns)
            .filter_map(|(i, f)| Some((i, self.hold_record(f, &self.path_of(&f.hops)?))))
            .filter(|(i, hold)| *hold != Hold::of(&r.flows[*i]))
            .collect();
        if holds.is_empty() {
            return false;
        }
        // Flows nothing holds any more go where ECMP sends them.
        let mut ecmp: HashMap<usize, Vec<Hop>> = holds
            .iter()
            .filter(|(_, h)| matches!(h, Hold::Cannot(_)))
            .filter_map(|(i, _)| {
                let mut f = r.flows[*i].clone();
                f.udp_src_port = None;
                Some((*i, self.ecmp_hops(&f)?))
            })
            .collect();
        let mut r = self.state.reservations.record_mut(seq);
        let (mut ported, mut pinned, mut lost) = (0, 0, 0);
        for (i, hold) in holds {
            let f = &mut r.flows[i];
            match hold {
                Hold::Port { .. } => ported += 1,
                Hold::Labels(_) => pinned += 1,
                Hold::Cannot(reason) => {
                    lost += 1;
                    f.status = Status::FallbackEcmp;
                    f.reason = reason;
                    f.accepted_bps = 0;
                }
            }
            hold.write_to(f);
            if let Some(hops) = ecmp.remove(&i) {
                f.hops = hops.into();
            }
        }
        let settled = (lost > 0).then(|| {
            settle_after_loss(&mut r, Reason::NoPath);
            r.clone()
        });
        drop(r);
        if let Some(settled) = settled {
            self.reledger(&settled);
        }
        let mut r = self.state.reservations.record_mut(seq);
        r.revision += 1;
        r.advisory = Some(format!(
            "link {link} {}: the ECMP groups on the path changed; {ported} flows told another \
             source port, {pinned} pinned by SR labels, {lost} left to ECMP",
            if down { "down" } else { "up" }
        ));
        true
    }

    /// [`Engine::hold`] for a recorded flow moved to `path`.
    pub(super) fn hold_record(&self, f: &FlowRecord, path: &planner::Path) -> Hold {
        match self.planner_flow(f) {
            Some(flow) => self.hold(&flow, f.steer_qp, f.qp_choices, path),
            None => Hold::Cannot(Reason::UnknownEndpoint),
        }
    }

    /// The hops ECMP gives a recorded flow that nothing holds on a path.
    pub(super) fn ecmp_hops(&self, f: &FlowRecord) -> Option<Vec<Hop>> {
        let flow = self.planner_flow(f)?;
        Some(self.hops_of(&self.planner.ecmp_path_of(&flow)))
    }

    /// A recorded flow as the planner sees it, on the port it was told (or
    /// its QP's default port).
    fn planner_flow(&self, f: &FlowRecord) -> Option<planner::Flow> {
        let (Some(&src), Some(&dst)) = (self.by_ip.get(&f.src_ip), self.by_ip.get(&f.dst_ip))
        else {
            return None;
        };
        Some(planner::Flow {
            src,
            dst,
            src_ip: f.src_ip,
            dst_ip: f.dst_ip,
            udp_src_port: f
                .udp_src_port
                .unwrap_or_else(|| planner::conventions::udp_src_port_for_qp(f.qp)),
            dest_qp: f.qp,
            start_ns: 0,
            bytes: f.bytes,
            rate_bps: f.rate_bps,
            duration_ns: f.duration_ns.max(1),
        })
    }
}

/// After some of `r`'s flows fell back to ECMP for `reason`: the
/// least-served flow decides the reservation's status (PARTIAL while any
/// flow is still reserved, FALLBACK_ECMP when none is).
pub(super) fn settle_after_loss(
    r: &mut crate::daemon::persistence::state_records::Reservation,
    reason: Reason,
) {
    let reserved = r.flows.iter().any(|f| f.status.reserves());
    r.status = if reserved {
        Status::Partial
    } else {
        Status::FallbackEcmp
    };
    r.reason = reason;
}

#[cfg(test)]
mod tests {
    use planner::ecmp::{ecmp_path_avoiding, HashKey};

    use super::super::testing::*;
    use super::*;

    /// 40 Gbit/s for 50 ms from h1 to h3 (leaf1 to leaf2), to QP `qp`.
    fn h1_to_h3(id: &str, qp: Option<u32>) -> proto::DemandSignal {
        demand(id, "10.0.1.1", "10.0.2.1", 0, 50 * MS, 40_000_000_000, qp)
    }

    fn steered(fallback_sr: bool) -> Engine {
        let mut e = engine();
        e.steering = Some(EntropySteering::new(
            e.topo,
            &PlannerConfig::default(),
            PortRange::default(),
            fallback_sr,
        ));
        e
    }

    /// A flow whose QP the client gave is told a source port: the switches'
    /// QP-aware hash walks exactly the reserved path with it, the answer
    /// carries it and no labels, and nothing is installed for the flow.
    #[test]
    fn a_flow_is_held_by_its_source_port_and_installs_nothing() {
        let mut e = steered(true);
        let r = submit(&mut e, vec![h1_to_h3("d", Some(0x321))], T0).unwrap();
        let f = &r[0].flows[0];
        assert_eq!(f.status, Status::Admitted);
        assert!(f.labels.is_empty());
        let port = f.udp_src_port.expect("a source port");
        let path = e.path_of(&f.hops).unwrap();
        let (src, dst) = (e.by_ip[&f.src_ip], e.by_ip[&f.dst_ip]);
        let key = HashKey::roce_qp(f.src_ip, f.dst_ip, port, 0x321);
        let seeds = PlannerConfig::default().ecmp_seeds.seeds(e.topo);
        assert_eq!(
            ecmp_path_avoiding(e.topo, src, dst, &key, &seeds, |_| false),
            Some(path)
        );
        let told = wire(&r[0]);
        assert_eq!(told.flows[0].udp_src_port, Some(port));
        assert!(told.flows[0].sr_label_stack.is_empty());
        let mut comp = compiler(e.topo, 0);
        let d = comp.desired(&e.state, T0 + MS).unwrap();
        assert!(leaf1_sr_entries(&d).is_empty());
        assert!(entries_of(&d, Some("leaf1"), installer::names::INT_WATCHLIST).is_empty());
        // With INT reports going to a collector, the flow's watch entry
        // (telemetry only) goes in during its window, and only then.
        let mut comp = collecting_compiler(e.topo);
        let watched = |c: &mut Compiler, t| {
            entries_of(
                &c.desired(&e.state, t).unwrap(),
                Some("leaf1"),
                installer::names::INT_WATCHLIST,
            )
            .len()
        };
        assert_eq!(watched(&mut comp, T0 + MS), 1);
        assert_eq!(watched(&mut comp, T0 + 60 * MS), 0);
        assert!(leaf1_sr_entries(&comp.desired(&e.state, T0 + MS).unwrap()).is_empty());
    }

    /// Flows steered while leaf2's link to spine2 is down all cross spine1
    /// with whatever port they had (leaf1's group has one member). When the
    /// link comes back, leaf1 hashes over both spines again: the flows whose
    /// port would now take spine2 are told another, in a new revision that
    /// says why, and every port walks its flow's path.
    #[test]
    fn a_link_that_changes_a_group_on_the_path_re_steers_the_ports() {
        let mut e = steered(true);
        assert!(e.set_link("leaf2", 4, true, T0).unwrap().changed);
        let ask: Vec<_> = (0..8)
            .map(|i| {
                demand(
                    &format!("d{i}"),
                    "10.0.1.1",
                    "10.0.2.1",
                    0,
                    50 * MS,
                    5_000_000_000,
                    Some(0x400 + i),
                )
            })
            .collect();
        let before = submit(&mut e, ask, T0).unwrap();
        assert!(before
            .iter()
            .all(|r| r.flows[0].hops[1].switch == "spine1" && r.flows[0].udp_src_port.is_some()));
        let change = e.set_link("leaf2", 4, false, T0 + MS).unwrap();
        assert!(
            !change.affected.is_empty() && change.affected.len() < 8,
            "{} re-steered",
            change.affected.len()
        );
        let seeds = PlannerConfig::default().ecmp_seeds.seeds(e.topo);
        for r in &e.state.reservations {
            let f = &r.flows[0];
            let port = f.udp_src_port.unwrap();
            let key = HashKey::roce_qp(f.src_ip, f.dst_ip, port, f.qp);
            let walked = ecmp_path_avoiding(
                e.topo,
                e.by_ip[&f.src_ip],
                e.by_ip[&f.dst_ip],
                &key,
                &seeds,
                |_| false,
            )
            .unwrap();
            assert_eq!(Some(walked), e.path_of(&f.hops), "{}", r.id);
            let was = before.iter().find(|b| b.id == r.id).unwrap();
            let moved = change.affected.iter().any(|a| a.id == r.id);
            assert_eq!(
                moved,
                port != was.flows[0].udp_src_port.unwrap(),
                "{}",
                r.id
            );
            assert_eq!(r.revision, if moved { 2 } else { 1 });
            if moved {
                assert!(
                    r.advisory.as_deref().unwrap().contains("link leaf2:4"),
                    "{:?}",
                    r.advisory
                );
                wire(r);
            }
        }
    }

    fn collecting_compiler(topo: &'static Topology) -> Compiler {
        let pipeline = crate::fabric::Pipeline::embedded().unwrap();
        let policy = Policy {
            lead_ns: 0,
            ecn: installer::ecn::EcnProfile::default(),
            lowered: installer::ecn::EcnProfile::lowered(),
            predrain_probability: 0xffff,
            collector: Some(installer::static_state::Collector {
                host: topo.host_by_name("h2").unwrap(),
                udp_port: 32766,
                report_every: 1,
            }),
            ecmp_hash: planner::ecmp::HashMode::QpAware.into(),
            ecmp_seeds: planner::ecmp::SeedPolicy::PerSwitch,
            reserved_tc: installer::reservations::RESERVED_TC,
            background_tc: installer::reservations::RESERVED_TC,
            int_mtu: None,
            watch_reserved: true,
            police_reserved: true,
        };
        Compiler::new(
            topo,
            pipeline.info,
            std::sync::Arc::new(installer::Devices::bmv2()),
            policy,
        )
        .unwrap()
    }

    /// Without the QP a QP-aware hash needs, no port can be promised: the
    /// flow is pinned by labels where the switches run Foresight's program,
    /// and falls back to ECMP (saying why) where they do not.
    #[test]
    fn an_unknown_qp_falls_back_to_labels_or_to_ecmp() {
        let ask = || vec![h1_to_h3("d", None)];
        let mut e = steered(true);
        let f = submit(&mut e, ask(), T0).unwrap()[0].flows[0].clone();
        assert_eq!((f.status, f.udp_src_port), (Status::Admitted, None));
        assert!(!f.labels.is_empty());
        let mut e = steered(false);
        let r = submit(&mut e, ask(), T0).unwrap();
        let f = &r[0].flows[0];
        assert_eq!(
            (f.status, f.reason, f.udp_src_port),
            (Status::FallbackEcmp, Reason::NoPath, None)
        );
        assert!(f.labels.is_empty());
        wire(&r[0]);
    }

    /// Switches described as fixed-function ones (CRC-16 seeded in the
    /// register, the ingress port hashed, no QP): a flow whose QP the
    /// client did not give is still told a port, and that port walks its
    /// reserved path under the description, not under Foresight's hash.
    #[test]
    fn described_switches_steer_flows_without_their_qp() {
        let mut e = engine();
        let described = FabricHash::from_yaml(
            e.topo,
            "version: 1\ndefault: {function: crc16-ccitt-false, seed: 77, \
             fields: [src_ip, dst_ip, ip_proto, l4_src_port, l4_dst_port, ingress_port]}\n",
            "asic.yaml",
        )
        .unwrap();
        let config = PlannerConfig {
            switch_hash: Some(std::sync::Arc::new(described.clone())),
            ..PlannerConfig::default()
        };
        e.steering = Some(EntropySteering::new(
            e.topo,
            &config,
            PortRange::default(),
            false,
        ));
        let r = submit(&mut e, vec![h1_to_h3("d", None)], T0).unwrap();
        let f = &r[0].flows[0];
        assert_eq!(f.status, Status::Admitted);
        let port = f.udp_src_port.expect("a source port");
        let (src, dst) = (e.by_ip[&f.src_ip], e.by_ip[&f.dst_ip]);
        let mut flow = planner::Flow::new(e.topo, src, dst, f.qp, 0, 1, 1);
        flow.udp_src_port = port;
        assert_eq!(
            described.path_avoiding(e.topo, &flow, |_| false),
            e.path_of(&f.hops)
        );
    }

    /// Switches that hash the IPs and the destination QP but not the source
    /// port, one spine nearly full, and a 60 Gbit/s transfer h1 -> h3 whose
    /// QP hashes onto that spine: reserved over the other one, it cannot
    /// be steered by any port and falls back to ECMP. When the client
    /// offers a range of QPs instead (that one first), it is told another
    /// of them, the answer carries it, and with it the switches' hash walks
    /// its path.
    #[test]
    fn a_chosen_qp_steers_where_no_port_can() {
        let described = FabricHash::from_yaml(
            topo(),
            "version: 1\ndefault: {function: crc32c, seed: name, fields: [src_ip, dst_ip, dst_qp]}\n",
            "qp-only.yaml",
        )
        .unwrap();
        let config = PlannerConfig {
            switch_hash: Some(std::sync::Arc::new(described.clone())),
            ..PlannerConfig::default()
        };
        // One spine 90 % reserved (by SR labels, before steering is on).
        let setup = || {
            let mut e = engine();
            let busy = demand(
                "busy",
                "10.0.1.2",
                "10.0.2.2",
                0,
                50 * MS,
                90_000_000_000,
                Some(0x100),
            );
            let busy = submit(&mut e, vec![busy], T0).unwrap();
            let spine = busy[0].flows[0].hops[1].switch.clone();
            e.steering = Some(EntropySteering::new(
                e.topo,
                &config,
                PortRange::default(),
                false,
            ));
            (e, spine)
        };
        let walk = |e: &Engine, qp: u32| {
            let ip = |a: &str| e.by_ip[&a.parse::<std::net::Ipv4Addr>().unwrap()];
            let flow = planner::Flow::new(e.topo, ip("10.0.1.1"), ip("10.0.2.1"), qp, 0, 1, 1);
            e.hops_of(&described.path_avoiding(e.topo, &flow, |_| false).unwrap())
        };
        let ask = |id: &str| demand(id, "10.0.1.1", "10.0.2.1", 0, 50 * MS, 60_000_000_000, None);
        // Its one QP: no port takes it off the busy spine.
        let (mut e, spine) = setup();
        let q = (0x400..0x10000)
            .find(|&q| walk(&e, q)[1].switch == spine)
            .unwrap();
        let given = proto::DemandSignal {
            dest_qp: Some(q),
            ..ask("given")
        };
        let f = submit(&mut e, vec![given], T0).unwrap()[0].flows[0].clone();
        assert_eq!((f.status, f.udp_src_port), (Status::FallbackEcmp, None));
        // A range of QPs, that one first.
        let (mut e, _) = setup();
        let offered = proto::DemandSignal {
            dest_qp_choices: Some(proto::QpRange {
                first_qp: q,
                count: 256,
            }),
            ..ask("offered")
        };
        let r = submit(&mut e, vec![offered], T0).unwrap();
        let f = &r[0].flows[0];
        assert_eq!(f.status, Status::Admitted, "{:?}", r[0].advisory);
        assert_ne!(f.hops[1].switch, spine, "reserved over the other spine");
        assert!(f.qp != q && (q..q + 256).contains(&f.qp), "{:#x}", f.qp);
        assert_eq!(wire(&r[0]).flows[0].dest_qp, Some(f.qp));
        assert!(f.udp_src_port.is_some());
        assert_eq!(
            walk(&e, f.qp),
            f.hops.to_vec(),
            "the chosen QP walks the reserved path"
        );
    }

    /// Entropy-only with no port that hashes onto the reserved path (a
    /// range of one port that goes the other way): the flow falls back to
    /// ECMP, and its record shows the path ECMP gives it on its own port,
    /// not the path it was reserved on.
    #[test]
    fn a_flow_no_port_steers_records_where_ecmp_sends_it() {
        let qp = 0x321;
        let planned = {
            let mut e = steered(false);
            let f = submit(&mut e, vec![h1_to_h3("d", Some(qp))], T0).unwrap()[0].flows[0].clone();
            e.path_of(&f.hops).unwrap()
        };
        let mut e = steered(false);
        let (src, dst) = (0, 2);
        let seeds = PlannerConfig::default().ecmp_seeds.seeds(e.topo);
        let walk = |port| {
            let key = HashKey::roce_qp(
                "10.0.1.1".parse().unwrap(),
                "10.0.2.1".parse().unwrap(),
                port,
                qp,
            );
            ecmp_path_avoiding(e.topo, src, dst, &key, &seeds, |_| false).unwrap()
        };
        let astray = (49152..=u16::MAX).find(|&p| walk(p) != planned).unwrap();
        e.steering.as_mut().unwrap().ports = PortRange {
            first: astray,
            last: astray,
        };
        let f = submit(&mut e, vec![h1_to_h3("d", Some(qp))], T0).unwrap()[0].flows[0].clone();
        assert_eq!(
            (f.status, f.reason, f.udp_src_port),
            (Status::FallbackEcmp, Reason::NoPath, None)
        );
        let own = walk(planner::conventions::udp_src_port_for_qp(qp));
        assert_ne!(
            own, planned,
            "the QP's own port must go astray for the test to tell"
        );
        assert_eq!(e.path_of(&f.hops), Some(own));
        // And the ledger no longer holds the path it is not on.
        let mid = e.to_planner_ns(f.start_unix_ns + 10 * MS);
        for edge in planned.reserved_edges(e.topo, src) {
            assert_eq!(e.planner.reserved_at(edge, mid), 0, "edge {edge}");
        }
    }
}
