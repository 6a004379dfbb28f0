//! One object the controller wants on a switch (a table entry, an ECMP
//! member or group, a clone session), named as in the P4Info. The intent,
//! the target adaptation and the entry builders all speak it, so it sits
//! below them.

use p4rt::{EntrySpec, Value};

/// One object the controller wants on a switch, by P4Info names.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// A table entry.
    Entry(EntrySpec),
    /// The default action of a keyless table (written with MODIFY).
    Default(EntrySpec),
    /// An action profile member (one ECMP next hop).
    Member {
        profile: String,
        id: u32,
        action: String,
        params: Vec<(String, Value)>,
    },
    /// An action selector group (an ECMP set), members with weight 1.
    Group {
        profile: String,
        id: u32,
        members: Vec<u32>,
    },
    /// A clone session copying packets to `ports` (instance 0, untruncated).
    CloneSession { id: u32, ports: Vec<u32> },
}
