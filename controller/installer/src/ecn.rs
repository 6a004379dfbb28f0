//! ECN state around a reserved burst: per-port DCQCN marking profiles (the
//! static one, and the lowered one a port gets while it is about to carry,
//! or carries, a reservation) and per-flow pre-drain entries that CE-mark
//! known competing flows on those ports so their senders back off before
//! the burst arrives.

use std::net::Ipv4Addr;

use p4rt::EntrySpec;

use crate::intent::Object;
use crate::names;

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

/// The `dcqcn_port` entry of one egress port (written with MODIFY when the
/// profile changes: the key stays the same).
pub fn dcqcn_entry(port: u16, profile: EcnProfile) -> Object {
    Object::Entry(EntrySpec {
        table: names::DCQCN_PORT.into(),
        matches: [("egress_port".to_string(), port.to_string())].into(),
        action: Some(names::SET_DCQCN.into()),
        params: [
            ("kmin".to_string(), profile.kmin.to_string()),
            ("kmax".to_string(), profile.kmax.to_string()),
            ("pmax".to_string(), profile.pmax.to_string()),
        ]
        .into(),
        priority: None,
        group: None,
        member: None,
    })
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
