//! Finished (expired or cancelled) reservations, kept in memory for
//! `GetReservation`, the lists and the operator's page: the latest ones,
//! bounded in records and in flows. A count of records alone let the
//! history grow with the collectives' size: a thousand records of a
//! 1,024-rank ring are 430 MB, of a 32k-GPU all-to-all round gigabytes.

use std::collections::VecDeque;
use std::sync::Arc;

use super::state_records::Reservation;

/// At most this many finished reservations are kept...
pub const HISTORY_RECORDS: usize = 1000;
/// ...holding at most this many flows together (the latest record is kept
/// whatever its size).
pub const HISTORY_FLOWS: usize = 100_000;

/// The finished reservations, oldest first.
#[derive(Debug, Clone, Default)]
pub struct History {
    records: VecDeque<Arc<Reservation>>,
    flows: usize,
}

impl History {
    /// Keep `r`, forgetting the oldest records beyond the bounds.
    pub fn push(&mut self, r: impl Into<Arc<Reservation>>) -> &Arc<Reservation> {
        let r = r.into();
        self.flows += r.flows.len();
        self.records.push_back(r);
        while self.records.len() > 1
            && (self.records.len() > HISTORY_RECORDS || self.flows > HISTORY_FLOWS)
        {
            let oldest = self.records.pop_front().expect("more than one record");
            self.flows -= oldest.flows.len();
        }
        self.records.back().expect("just pushed")
    }

    /// Oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Reservation> + ExactSizeIterator {
        self.records.iter().map(|r| &**r)
    }

    /// The record `id`, to hold on to without copying it.
    pub fn shared(&self, id: &str) -> Option<&Arc<Reservation>> {
        self.records.iter().rev().find(|r| r.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::persistence::live_reservations::tests::record;

    /// The flows the kept records hold, counted and as the history counts.
    fn flows(h: &History) -> usize {
        let counted = h.iter().map(|r| r.flows.len()).sum();
        assert_eq!(h.flows, counted);
        counted
    }

    fn finished(seq: u64, flows: usize) -> Reservation {
        let mut r = record(seq, "t", "d", 0, 1);
        r.flows = vec![r.flows[0].clone(); flows];
        r
    }

    #[test]
    fn keeps_the_latest_records_up_to_a_count() {
        let mut h = History::default();
        for seq in 0..HISTORY_RECORDS as u64 + 5 {
            h.push(finished(seq, 1));
        }
        assert_eq!(h.iter().len(), HISTORY_RECORDS);
        assert_eq!(h.iter().next().unwrap().seq, 5);
        assert_eq!(flows(&h), HISTORY_RECORDS);
    }

    #[test]
    fn keeps_the_latest_records_up_to_a_number_of_flows() {
        let mut h = History::default();
        let per = 1024;
        for seq in 0..300 {
            h.push(finished(seq, per));
        }
        let kept = HISTORY_FLOWS / per;
        assert_eq!(h.iter().len(), kept);
        assert_eq!(flows(&h), kept * per);
        assert_eq!(h.iter().next_back().unwrap().seq, 299, "the latest");
        assert_eq!(h.iter().next().unwrap().seq, 300 - kept as u64);
    }

    #[test]
    fn the_latest_record_stays_whatever_its_size() {
        let mut h = History::default();
        h.push(finished(1, 10));
        h.push(finished(2, HISTORY_FLOWS + 1));
        assert_eq!(h.iter().len(), 1);
        assert_eq!(h.iter().next().unwrap().seq, 2);
        h.push(finished(3, 1));
        assert_eq!((h.iter().len(), flows(&h)), (1, 1), "the big one goes next");
    }
}
