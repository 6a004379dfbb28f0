//! How the controller sees traffic without INT: the direct counters of the
//! INT `watchlist` entries at the source hosts' leaves, polled. They count
//! UDP and TCP alike, where INT reports exist for UDP only, so a gloo/TCP
//! job is seen as well as a RoCEv2 one. What each entry counted since the
//! last poll becomes bytes of its (source, destination) host pair; a
//! reserved flow's own watch entry counts for its pair too. Learning
//! (`--learn-from counters`) and reservations that follow their traffic
//! (`--follow-from counters`) each run a poll.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use p4rt::proto::p4::v1 as p4;
use p4rt::P4Info;
use prost::Message;

use installer::names;

use crate::daemon::control::controller::Controller;
use crate::daemon::inputs::clock::now_unix_ns;

/// Bytes per (source, destination) host pair.
pub type PairBytes = BTreeMap<(Ipv4Addr, Ipv4Addr), u64>;

/// The last count of every watch entry, to turn reads into increments.
pub struct WatchCounters {
    table_id: u32,
    src_field: u32,
    dst_field: u32,
    /// (switch, the entry's match and priority, encoded) -> bytes counted.
    last: HashMap<(String, Vec<u8>), u64>,
}

impl WatchCounters {
    pub fn new(info: &P4Info) -> anyhow::Result<WatchCounters> {
        let table = info.table(names::INT_WATCHLIST)?;
        let field = |name: &str| info.match_field(table, name).map(|f| f.id);
        Ok(WatchCounters {
            table_id: table.preamble.as_ref().map_or(0, |p| p.id),
            src_field: field("src_addr")?,
            dst_field: field("dst_addr")?,
            last: HashMap::new(),
        })
    }

    /// The read of every watch entry's counter on a switch.
    pub fn request(&self) -> p4::Entity {
        p4::DirectCounterEntry {
            table_entry: Some(p4::TableEntry {
                table_id: self.table_id,
                ..Default::default()
            }),
            data: None,
        }
        .into()
    }

    /// What `switch`'s watch entries counted since its last read, by host
    /// pair. An entry seen for the first time counts from zero (it was
    /// inserted since); an entry gone is forgotten; a count that went down
    /// (the entry was re-inserted) counts from zero. Entries that do not
    /// name one source and one destination host are skipped.
    pub fn increments(&mut self, switch: &str, read: &[p4::Entity]) -> PairBytes {
        let mut seen = HashMap::new();
        let mut out = PairBytes::new();
        for entity in read {
            let Some(p4::entity::Entity::DirectCounterEntry(c)) = &entity.entity else {
                continue;
            };
            let Some(entry) = &c.table_entry else {
                continue;
            };
            let Some(pair) = self.host_pair(entry) else {
                continue;
            };
            let bytes = c.data.as_ref().map_or(0, |d| d.byte_count.max(0) as u64);
            let identity = p4::TableEntry {
                table_id: entry.table_id,
                r#match: entry.r#match.clone(),
                priority: entry.priority,
                ..Default::default()
            }
            .encode_to_vec();
            let key = (switch.to_string(), identity);
            let before = self.last.get(&key).copied().unwrap_or(0);
            let grew = if bytes >= before {
                bytes - before
            } else {
                bytes
            };
            if grew > 0 {
                *out.entry(pair).or_default() += grew;
            }
            seen.insert(key, bytes);
        }
        self.last.retain(|(s, _), _| s != switch);
        self.last.extend(seen);
        out
    }

    fn host_pair(&self, entry: &p4::TableEntry) -> Option<(Ipv4Addr, Ipv4Addr)> {
        if entry.table_id != self.table_id {
            return None;
        }
        let host = |field: u32| {
            let m = entry.r#match.iter().find(|m| m.field_id == field)?;
            match &m.field_match_type {
                Some(p4::field_match::FieldMatchType::Ternary(t))
                    if p4rt::bytestring::decode_u128(&t.mask) == Some(u32::MAX as u128) =>
                {
                    let v = p4rt::bytestring::decode_u128(&t.value)?;
                    Some(Ipv4Addr::from(u32::try_from(v).ok()?))
                }
                _ => None,
            }
        };
        Some((host(self.src_field)?, host(self.dst_field)?))
    }
}

impl Controller {
    /// Every `poll_ns`, read the watch counters of the switches `leaves`
    /// names (asked anew each poll) and hand what each host pair sent since
    /// the last read to `record` (source, destination, bytes, when).
    pub(in crate::daemon) async fn poll_watch_counters(
        self: Arc<Self>,
        mut counters: WatchCounters,
        poll_ns: u64,
        leaves: impl Fn(&Controller) -> Vec<String>,
        mut record: impl FnMut(Ipv4Addr, Ipv4Addr, u64, u64),
    ) {
        let mut ticker = tokio::time::interval(Duration::from_nanos(poll_ns));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let request = counters.request();
        loop {
            ticker.tick().await;
            let leaves = leaves(&self);
            let reads = leaves.iter().filter_map(|leaf| {
                let switch = self.switches.get(leaf)?;
                let request = request.clone();
                Some(async move { (leaf, switch.read_entities(vec![request]).await) })
            });
            for (leaf, read) in futures::future::join_all(reads).await {
                let now = now_unix_ns();
                match read {
                    Ok(entities) => {
                        for ((src, dst), bytes) in counters.increments(leaf, &entities) {
                            record(src, dst, bytes, now);
                        }
                    }
                    Err(e) => tracing::debug!(switch = %leaf, %e, "watch counters not read"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::Pipeline;

    fn counters() -> WatchCounters {
        let pipeline = Pipeline::embedded().expect("embedded pipeline");
        WatchCounters::new(&pipeline.info).expect("watchlist in the P4Info")
    }

    fn ternary(field: u32, value: Vec<u8>, mask: Vec<u8>) -> p4::FieldMatch {
        p4::FieldMatch {
            field_id: field,
            field_match_type: Some(p4::field_match::FieldMatchType::Ternary(
                p4::field_match::Ternary { value, mask },
            )),
        }
    }

    fn read(
        w: &WatchCounters,
        src: [u8; 4],
        dst: [u8; 4],
        priority: i32,
        bytes: i64,
    ) -> p4::Entity {
        p4::DirectCounterEntry {
            table_entry: Some(p4::TableEntry {
                table_id: w.table_id,
                r#match: vec![
                    ternary(w.src_field, src.to_vec(), vec![0xff; 4]),
                    ternary(w.dst_field, dst.to_vec(), vec![0xff; 4]),
                ],
                priority,
                ..Default::default()
            }),
            data: Some(p4::CounterData {
                byte_count: bytes,
                packet_count: 1,
            }),
        }
        .into()
    }

    const A: [u8; 4] = [10, 0, 1, 1];
    const B: [u8; 4] = [10, 0, 2, 1];

    fn pair(src: [u8; 4], dst: [u8; 4]) -> (Ipv4Addr, Ipv4Addr) {
        (src.into(), dst.into())
    }

    #[test]
    fn increments_sum_a_pairs_entries_and_start_new_ones_from_zero() {
        let mut w = counters();
        let first = w.increments("leaf1", &[read(&w, A, B, 50, 1000)]);
        assert_eq!(first, [(pair(A, B), 1000)].into());
        // The job entry grew by 500; a reserved flow's own entry appeared
        // with 300 already counted.
        let second = w.increments(
            "leaf1",
            &[read(&w, A, B, 50, 1500), read(&w, A, B, 100, 300)],
        );
        assert_eq!(second, [(pair(A, B), 800)].into());
        // Nothing new: no increment at all.
        let third = w.increments(
            "leaf1",
            &[read(&w, A, B, 50, 1500), read(&w, A, B, 100, 300)],
        );
        assert!(third.is_empty(), "{third:?}");
    }

    #[test]
    fn a_reinserted_or_vanished_entry_counts_from_zero() {
        let mut w = counters();
        w.increments("leaf1", &[read(&w, A, B, 50, 1000)]);
        // Re-inserted: the count went down.
        let again = w.increments("leaf1", &[read(&w, A, B, 50, 40)]);
        assert_eq!(again, [(pair(A, B), 40)].into());
        // Gone, then back.
        assert!(w.increments("leaf1", &[]).is_empty());
        let back = w.increments("leaf1", &[read(&w, A, B, 50, 70)]);
        assert_eq!(back, [(pair(A, B), 70)].into());
    }

    #[test]
    fn switches_are_counted_apart_and_wildcard_hosts_skipped() {
        let mut w = counters();
        w.increments("leaf1", &[read(&w, A, B, 50, 1000)]);
        let other = w.increments("leaf2", &[read(&w, B, A, 50, 10)]);
        assert_eq!(other, [(pair(B, A), 10)].into());
        // leaf1's memory is untouched by leaf2's read.
        let same = w.increments("leaf1", &[read(&w, A, B, 50, 1000)]);
        assert!(same.is_empty());
        let mut wildcard = read(&w, A, B, 50, 99);
        if let Some(p4::entity::Entity::DirectCounterEntry(c)) = &mut wildcard.entity {
            let e = c.table_entry.as_mut().unwrap();
            e.r#match[1] = ternary(w.dst_field, vec![0], vec![0]);
        }
        assert!(w.increments("leaf3", &[wildcard]).is_empty());
    }
}
