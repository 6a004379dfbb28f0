//! ECN state around a reserved burst: DCQCN marking profiles per (port,
//! queue) (the static one of every port and of its reserved queue, and
//! while a port is about to carry, or carries, a reservation: the lowered
//! one for its competing queues, between the two) and per-flow pre-drain
//! entries that CE-mark known competing flows on those ports so their
//! senders back off before the burst arrives.

use std::net::Ipv4Addr;

use p4rt::EntrySpec;

use crate::names;
use crate::object::Object;

/// DCQCN congestion-point profile of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EcnProfile {
    /// Queue depth (packets) below which nothing is marked.
    pub kmin: u32,
    /// Queue depth (packets) above which everything ECN-capable is marked.
    pub kmax: u32,
    /// Marking probability at Kmax, in 1/65536.
    pub pmax: u32,
}

impl Default for EcnProfile {
    fn default() -> Self {
        // Kmin 10 / Kmax 50 packets of ~1 KB, Pmax 20 %: marks start well
        // before a 64-packet BMv2 queue fills (the seeds' typical values
        // scaled to BMv2's packet-counted queues).
        EcnProfile {
            kmin: 10,
            kmax: 50,
            pmax: 13107,
        }
    }
}

impl EcnProfile {
    /// The lowered profile of a port about to carry a reserved burst: marks
    /// start at a few packets and reach 50 % at Kmax, so competing senders
    /// slow down before the reserved traffic needs the buffer.
    pub fn lowered() -> EcnProfile {
        EcnProfile {
            kmin: 2,
            kmax: 12,
            pmax: 32768,
        }
    }
}

/// Priority of pre-drain entries (all are exact in effect, so equal).
pub const PREDRAIN_PRIORITY: i32 = 100;
/// Default pre-drain marking probability, in 1/65536: always.
pub const PREDRAIN_ALWAYS: u16 = 0xffff;

/// Priority of a port's profile for all its queues.
pub const DCQCN_PORT_PRIORITY: i32 = 1;
/// Priority of the lowered profile around a reserved burst (all queues).
pub const DCQCN_LOWERED_PRIORITY: i32 = 10;
/// Priority of the reserved queue's own profile (static: above a burst's).
pub const DCQCN_RESERVED_PRIORITY: i32 = 20;

/// A `dcqcn_port` entry: `profile` for `queue` of `port` (every queue
/// when `None`) at `priority`.
fn dcqcn(port: u16, queue: Option<u8>, profile: EcnProfile, priority: i32) -> Object {
    let qid = match queue {
        Some(q) => format!("{q}&&&0x7"),
        None => "0&&&0".to_string(),
    };
    Object::Entry(EntrySpec {
        table: names::DCQCN_PORT.into(),
        matches: [
            ("egress_port".to_string(), port.to_string()),
            ("qid".to_string(), qid),
        ]
        .into(),
        action: Some(names::SET_DCQCN.into()),
        params: [
            ("kmin".to_string(), profile.kmin.to_string()),
            ("kmax".to_string(), profile.kmax.to_string()),
            ("pmax".to_string(), profile.pmax.to_string()),
        ]
        .into(),
        priority: Some(priority),
        group: None,
        member: None,
        meter: None,
    })
}

/// The static profile of one egress port, for all its queues.
pub fn dcqcn_entry(port: u16, profile: EcnProfile) -> Object {
    dcqcn(port, None, profile, DCQCN_PORT_PRIORITY)
}

/// The reserved queue `reserved_tc` of `port` keeps `profile` (the port's
/// static one) above any lowered profile: a static entry, so that a burst
/// adds one entry per port, not two, and the thresholds that slow
/// competing senders down never mark the reserved flows.
pub fn dcqcn_reserved_queue_entry(port: u16, reserved_tc: u8, profile: EcnProfile) -> Object {
    dcqcn(port, Some(reserved_tc), profile, DCQCN_RESERVED_PRIORITY)
}

/// What a port carries while a reservation is near or running: the
/// lowered profile for every queue, between the port's static entry and
/// its reserved queue's ([`dcqcn_reserved_queue_entry`]). It goes when the
/// reservation ends and the static entry rules again.
pub fn dcqcn_lowered_entry(port: u16, lowered: EcnProfile) -> Object {
    dcqcn(port, None, lowered, DCQCN_LOWERED_PRIORITY)
}

/// A competing flow to CE-mark on `port`: `predrain_mark(probability)`.
/// `dst_qp` `None` marks every QP between the two hosts.
pub fn predrain_entry(
    port: u16,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dst_qp: Option<u32>,
    probability: u16,
) -> Object {
    let mut matches = vec![
        ("egress_port".to_string(), port.to_string()),
        ("src_addr".to_string(), format!("{src}&&&255.255.255.255")),
        ("dst_addr".to_string(), format!("{dst}&&&255.255.255.255")),
    ];
    if let Some(qp) = dst_qp {
        matches.push(("dst_qp".to_string(), format!("{qp}&&&0xffffff")));
    }
    Object::Entry(EntrySpec {
        table: names::PREDRAIN.into(),
        matches: matches.into_iter().collect(),
        action: Some(names::PREDRAIN_MARK.into()),
        params: [("probability".to_string(), probability.to_string())].into(),
        priority: Some(PREDRAIN_PRIORITY),
        group: None,
        member: None,
        meter: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowered_profile_marks_earlier() {
        let (base, low) = (EcnProfile::default(), EcnProfile::lowered());
        assert!(low.kmin < base.kmin && low.kmax < base.kmax && low.pmax > base.pmax);
    }

    #[test]
    fn a_burst_lowers_every_queue_but_the_reserved_one() {
        let (Object::Entry(all), Object::Entry(reserved)) = (
            dcqcn_lowered_entry(4, EcnProfile::lowered()),
            dcqcn_reserved_queue_entry(4, 5, EcnProfile::default()),
        ) else {
            panic!("not entries")
        };
        assert_eq!(all.matches["qid"], "0&&&0");
        assert_eq!(all.params["kmin"], "2");
        assert_eq!(reserved.matches["qid"], "5&&&0x7");
        assert_eq!(reserved.params["kmin"], "10");
        // The reserved queue's entry wins over the lowered one, which wins
        // over the port's static entry.
        let Object::Entry(base) = dcqcn_entry(4, EcnProfile::default()) else {
            panic!("not an entry")
        };
        assert!(reserved.priority > all.priority && all.priority > base.priority);
    }

    #[test]
    fn predrain_entry_names_port_and_flow() {
        let Object::Entry(e) = predrain_entry(
            3,
            "10.0.1.1".parse().unwrap(),
            "10.0.2.1".parse().unwrap(),
            Some(300),
            PREDRAIN_ALWAYS,
        ) else {
            panic!("not an entry")
        };
        assert_eq!(e.table, names::PREDRAIN);
        assert_eq!(e.matches["egress_port"], "3");
        assert_eq!(e.matches["dst_qp"], "300&&&0xffffff");
        assert_eq!(e.params["probability"], "65535");
    }
}
