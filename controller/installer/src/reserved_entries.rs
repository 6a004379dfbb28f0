//! A reserved flow's entries (its SR push and its INT watch) and the
//! pre-drain entries that mark the flows competing with it, built from
//! P4Info ids resolved when the pipeline is loaded: the per-flow entries
//! of a commit, which [`ReservedFlow::entry_in_queue`],
//! [`ReservedFlow::watch_entry`] and [`crate::ecn::predrain_entry`]
//! describe by name and text for people and tests. Both give the same
//! entries; a test holds them to it.

use std::net::Ipv4Addr;

use p4rt::entity::BuildError;
use p4rt::prepared::{FieldValue, PreparedTable};
use p4rt::proto::p4::v1 as p4;
use p4rt::P4Info;
use planner::conventions::ROCEV2_UDP_PORT;

use crate::ecn::PREDRAIN_PRIORITY;
use crate::intent::normal_form;
use crate::names;
use crate::policing::{meter_of, UNLIMITED};
use crate::reservations::{
    ReservedFlow, INT_DS_INSTRUCTIONS, INT_INSTRUCTIONS, INT_MAX_HOP, RESERVATION_PRIORITY,
    WATCH_PRIORITY,
};

const HOST: u128 = 0xffff_ffff;
const QP: u128 = 0xff_ffff;

/// The tables every reserved flow writes to, resolved once.
pub struct ReservedEntries {
    sr: PreparedTable,
    /// Whether the program meters reservations (a pipeline without the
    /// meter gets entries without one: its reserved traffic is unpoliced).
    sr_metered: bool,
    watch: PreparedTable,
    predrain: PreparedTable,
}

impl ReservedEntries {
    pub fn new(info: &P4Info) -> Result<ReservedEntries, BuildError> {
        const PARAMS: [&[&str]; 4] = [
            &["tc", "label0"],
            &["tc", "label0", "label1"],
            &["tc", "label0", "label1", "label2"],
            &["tc", "label0", "label1", "label2", "label3"],
        ];
        let pushes: Vec<(&str, &[&str])> = names::SR_PUSH.iter().copied().zip(PARAMS).collect();
        let sr_id = info
            .table(names::SR_RESERVATION)?
            .preamble
            .as_ref()
            .map_or(0, |p| p.id);
        Ok(ReservedEntries {
            sr_metered: info.has_direct_meter(sr_id),
            sr: PreparedTable::new(
                info,
                names::SR_RESERVATION,
                &["src_addr", "dst_addr", "dst_qp"],
                &pushes,
            )?,
            watch: PreparedTable::new(
                info,
                names::INT_WATCHLIST,
                &["src_addr", "dst_addr", "l4_dst_port", "dst_qp"],
                &[(
                    names::INT_SOURCE,
                    &["max_hop", "instruction_bitmap", "ds_instruction"],
                )],
            )?,
            predrain: PreparedTable::new(
                info,
                names::PREDRAIN,
                &["egress_port", "src_addr", "dst_addr", "dst_qp"],
                &[(names::PREDRAIN_MARK, &["probability"])],
            )?,
        })
    }

    /// [`ReservedFlow::entry_in_queue`]: push the labels, queue `tc`.
    pub fn sr(&self, f: &ReservedFlow, tc: u8) -> Result<p4::Entity, BuildError> {
        let depth = f.labels.len();
        if !(1..=names::SR_PUSH.len()).contains(&depth) {
            return Err(BuildError::Invalid(format!(
                "{} labels: a reserved flow pushes 1 to {}",
                depth,
                names::SR_PUSH.len()
            )));
        }
        let mut params = Vec::with_capacity(depth + 1);
        params.push(u128::from(tc));
        params.extend(f.labels.iter().map(|l| u128::from(*l)));
        let mut entry = self.sr.entry(
            &[hosts(f.src_ip), hosts(f.dst_ip), qp(f.dst_qp)],
            depth - 1,
            &params,
            RESERVATION_PRIORITY,
        )?;
        if self.sr_metered {
            // Unpoliced: a meter nothing reaches, not none (see UNLIMITED).
            let meter = meter_of(f.grant_bps).unwrap_or(UNLIMITED);
            entry.meter_config = Some(meter.to_config());
        }
        Ok(normal_form(entry.into()))
    }

    /// [`ReservedFlow::watch_entry`]: INT for the flow's packets.
    pub fn watch(&self, f: &ReservedFlow) -> Result<p4::Entity, BuildError> {
        let port = match f.dst_qp {
            Some(_) => FieldValue::Ternary(u128::from(ROCEV2_UDP_PORT), 0xffff),
            None => FieldValue::Ternary(0, 0),
        };
        let entry = self.watch.entry(
            &[hosts(f.src_ip), hosts(f.dst_ip), port, qp(f.dst_qp)],
            0,
            &[
                u128::from(INT_MAX_HOP),
                u128::from(INT_INSTRUCTIONS),
                u128::from(INT_DS_INSTRUCTIONS),
            ],
            WATCH_PRIORITY,
        )?;
        Ok(normal_form(entry.into()))
    }

    /// [`crate::ecn::predrain_entry`] on device port `device_port` (the
    /// caller translates the topology's port): CE-mark `src → dst`, only
    /// QP `dst_qp` or every QP between the two.
    pub fn predrain(
        &self,
        device_port: u16,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        dst_qp: Option<u32>,
        probability: u16,
    ) -> Result<p4::Entity, BuildError> {
        let entry = self.predrain.entry(
            &[
                FieldValue::Exact(u128::from(device_port)),
                hosts(src),
                hosts(dst),
                qp(dst_qp),
            ],
            0,
            &[u128::from(probability)],
            PREDRAIN_PRIORITY,
        )?;
        Ok(normal_form(entry.into()))
    }
}

fn hosts(ip: Ipv4Addr) -> FieldValue {
    FieldValue::Ternary(u128::from(u32::from(ip)), HOST)
}

fn qp(dst_qp: Option<u32>) -> FieldValue {
    match dst_qp {
        Some(q) => FieldValue::Ternary(u128::from(q), QP),
        None => FieldValue::Ternary(0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Devices, Target};
    use crate::intent::Intent;

    fn by_text(f: &ReservedFlow, object: crate::object::Object, info: &P4Info) -> p4::Entity {
        on_devices(object, info, &Devices::bmv2(), &format!("{f:?}"))
    }

    /// A flow from `src` to `dst` at leaf 0 with these labels.
    fn flow(src: &str, dst: &str, dst_qp: Option<u32>, labels: Vec<u32>) -> ReservedFlow {
        ReservedFlow {
            demand: "d".into(),
            flow: 0,
            ingress_leaf: 0,
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            dst_qp,
            labels,
            hops: Vec::new(),
            start_ns: 0,
            end_ns: 1,
            grant_bps: 0,
        }
    }

    fn on_devices(
        object: crate::object::Object,
        info: &P4Info,
        devices: &Devices,
        what: &str,
    ) -> p4::Entity {
        let resolved = Intent {
            objects: vec![object],
        }
        .resolve("leaf1", info, devices)
        .unwrap();
        assert_eq!(resolved.entities.len(), 1, "{what}");
        (**resolved.entities.values().next().unwrap())
            .clone()
            .into_entity()
    }

    /// Pre-drain entries, with and without a QP, at the edges of each
    /// value's width, on topology and on device port numbering: the same
    /// entities as the text path.
    #[test]
    fn the_same_predrain_entries_as_by_name_and_text() {
        use crate::device::PortMap;
        use crate::ecn::{predrain_entry, PREDRAIN_ALWAYS};
        let info = P4Info::load(Target::Bmv2.committed_p4info()).unwrap();
        let prepared = ReservedEntries::new(&info).unwrap();
        let mapped = Devices::new(
            Target::Bmv2,
            [(
                "leaf1".to_string(),
                PortMap::new("leaf1", [(1, 128), (2, 511), (3, 0)].into(), &[1, 2, 3]).unwrap(),
            )]
            .into(),
        );
        for devices in [Devices::bmv2(), mapped] {
            for port in [1, 2, 3] {
                for dst_qp in [None, Some(0), Some(17), Some(0xff_ffff)] {
                    for (src, dst) in [("10.0.1.1", "10.0.2.1"), ("0.0.0.1", "255.255.255.254")] {
                        let (src, dst) = (src.parse().unwrap(), dst.parse().unwrap());
                        for probability in [0, 0x8000, PREDRAIN_ALWAYS] {
                            let what = format!("port {port} {src}->{dst} qp {dst_qp:?}");
                            assert_eq!(
                                prepared
                                    .predrain(
                                        devices.device_port("leaf1", port),
                                        src,
                                        dst,
                                        dst_qp,
                                        probability
                                    )
                                    .unwrap(),
                                on_devices(
                                    predrain_entry(port, src, dst, dst_qp, probability),
                                    &info,
                                    &devices,
                                    &what
                                ),
                                "{what}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Every label depth, with and without a QP, at the edges of each
    /// value's width: the same entities as the text path.
    #[test]
    fn the_same_entries_as_by_name_and_text() {
        let info = P4Info::load(Target::Bmv2.committed_p4info()).unwrap();
        let prepared = ReservedEntries::new(&info).unwrap();
        for depth in 1..=4 {
            for dst_qp in [None, Some(0), Some(17), Some(0xff_ffff)] {
                for (src, dst, label) in [
                    ("10.0.1.1", "10.0.2.1", 16),
                    ("0.0.0.1", "255.255.255.254", 0xf_ffff),
                ] {
                    let mut f = flow(src, dst, dst_qp, (0..depth).map(|i| label - i).collect());
                    for (tc, grant_bps) in [(5, 1), (5, 25_000_000_001), (7, u64::MAX)] {
                        f.grant_bps = grant_bps;
                        assert_eq!(
                            prepared.sr(&f, tc).unwrap(),
                            by_text(&f, f.entry_in_queue(tc), &info),
                            "{f:?} tc {tc}"
                        );
                    }
                    // Unpoliced: by name, no meter; as the controller
                    // writes it, the meter nothing reaches.
                    f.grant_bps = 0;
                    let mut by_name = by_text(&f, f.entry_in_queue(0), &info);
                    if let Some(p4::entity::Entity::TableEntry(t)) = &mut by_name.entity {
                        assert_eq!(t.meter_config, None);
                        t.meter_config = Some(UNLIMITED.to_config());
                    }
                    assert_eq!(prepared.sr(&f, 0).unwrap(), by_name, "{f:?}");
                    assert_eq!(
                        prepared.watch(&f).unwrap(),
                        by_text(&f, f.watch_entry(), &info),
                        "{f:?}"
                    );
                }
            }
        }
    }

    /// What one reserved flow writes, in bytes of a P4Runtime `Update`
    /// (docs/figures.md quotes these): at its ingress leaf an SR push
    /// (growing 9 bytes a label, its meter at a 100 Gb/s grant included)
    /// and an INT watch; on each port of its
    /// path, one pre-drain entry per competing flow it marks.
    #[test]
    fn what_a_reserved_flow_writes() {
        use prost::Message;
        let info = P4Info::load(Target::Bmv2.committed_p4info()).unwrap();
        let prepared = ReservedEntries::new(&info).unwrap();
        let update = |entity: p4::Entity| {
            p4::Update {
                r#type: p4::update::Type::Insert as i32,
                entity: Some(entity),
            }
            .encoded_len()
        };
        let mut f = flow("10.0.1.1", "10.2.4.1", Some(0x1234), Vec::new());
        f.grant_bps = 100_000_000_000;
        let sr: Vec<usize> = (1..=4u32)
            .map(|depth| {
                f.labels = (0..depth).map(|i| 0x1_0000 + i).collect();
                update(prepared.sr(&f, 5).unwrap())
            })
            .collect();
        let watch = update(prepared.watch(&f).unwrap());
        let predrain = update(
            prepared
                .predrain(4, f.src_ip, f.dst_ip, f.dst_qp, 0xffff)
                .unwrap(),
        );
        println!("sr by label depth {sr:?}, watch {watch}, pre-drain {predrain}");
        assert_eq!((sr, watch, predrain), (vec![113, 122, 131, 142], 110, 90));
    }

    #[test]
    fn a_value_too_wide_or_a_stack_too_deep_is_refused() {
        let info = P4Info::load(Target::Bmv2.committed_p4info()).unwrap();
        let prepared = ReservedEntries::new(&info).unwrap();
        let mut f = flow("10.0.1.1", "10.0.2.1", None, vec![1 << 20]);
        let e = prepared.sr(&f, 5).unwrap_err().to_string();
        assert!(e.contains("label0"), "{e}");
        f.labels = vec![16; 5];
        let e = prepared.sr(&f, 5).unwrap_err().to_string();
        assert!(e.contains("5 labels"), "{e}");
    }
}
