//! The committed ECMP vectors (`ptf-tests/ecmp_vectors.json`, which the PTF
//! test checks against BMv2) are what the planner's emulation predicts
//! today: every seed and hash offset, every member. A change to the hash,
//! the key layout, the seed derivation or the tier offsets fails here until
//! the vectors are regenerated
//! (`cargo run -p planner --example ecmp_vectors > ptf-tests/ecmp_vectors.json`)
//! and BMv2 agrees with them again.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use planner::ecmp::{HashKey, HashMode, SeedPolicy, SwitchHash};
use planner::topology::Role;
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../ptf-tests/ecmp_vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("ptf-tests/ecmp_vectors.json");
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn u64_of(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} of {v}: not a number"))
}

fn ip_of(v: &Value, field: &str) -> Ipv4Addr {
    v[field]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{field} of {v}: not an IPv4 address"))
}

#[test]
fn committed_vectors_equal_the_emulation() {
    let doc = vectors();
    assert_eq!(doc["seed_policy"], "per-switch");
    let switches = doc["switches"].as_object().expect("switches by name");
    assert_eq!(switches.len(), 2);
    let mut hashes = Vec::new();
    for (name, sw) in switches {
        let role: Role = serde_json::from_value(sw["role"].clone()).expect("a role");
        let want = SeedPolicy::PerSwitch.switch_hash(name, role);
        let have = SwitchHash {
            seed: u64_of(sw, "seed") as u32,
            offset: u64_of(sw, "offset") as u32,
        };
        assert_eq!(have, want, "{name}");
        hashes.push((name, have));
    }
    // Both rotate, by different amounts (the PTF test checks BMv2 rotates).
    assert!(hashes.iter().all(|h| h.1.offset != 0));
    assert_ne!(hashes[0].1.offset, hashes[1].1.offset);
    let flows = doc["flows"].as_array().expect("flows");
    let mut covered = BTreeSet::new();
    let mut differ = 0;
    for f in flows {
        let mode = match f["hash_mode"].as_str() {
            Some("qp-aware") => HashMode::QpAware,
            Some("five-tuple") => HashMode::FiveTuple,
            other => panic!("hash_mode {other:?} in {f}"),
        };
        let key = HashKey::of_packet(
            ip_of(f, "src"),
            ip_of(f, "dst"),
            u64_of(f, "protocol") as u8,
            u64_of(f, "sport") as u16,
            u64_of(f, "dport") as u16,
            f["qp"].as_u64().unwrap_or(0) as u32,
            mode,
        );
        let size = u64_of(f, "group_size") as usize;
        let mut members = Vec::new();
        for (name, h) in &hashes {
            let want = h.member(&key, size);
            assert_eq!(f["member"][name].as_u64(), Some(want as u64), "{name}: {f}");
            members.push(want);
        }
        differ += usize::from(members[0] != members[1]);
        covered.insert((u64_of(f, "protocol"), mode == HashMode::QpAware, size));
    }
    // TCP and UDP, both modes, both group sizes; the seeds matter.
    assert!(covered.len() >= 5, "{covered:?}");
    assert!(differ * 2 > flows.len(), "{differ} of {}", flows.len());
}
