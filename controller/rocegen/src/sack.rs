//! Selective acknowledgement, both ends: the out-of-order receiver's
//! placement window (which PSNs beyond the first missing one it holds, sent
//! back as a [`SackBitmap`]) and the sender's scoreboard (which packets are
//! acknowledged, lost, resent), so that only missing packets are sent again.
//!
//! Sequence numbers here are the unwrapped 64-bit PSNs of one connection.

use std::collections::VecDeque;

use crate::packet::{SackBitmap, SACK_WINDOW};

/// What placing one arriving packet did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// It was the expected PSN: the first missing PSN moved up by this much
    /// (past the packet and any already placed beyond it).
    InOrder { advanced: u64 },
    /// Placed beyond a gap; `opened_gap` when nothing was held beyond the
    /// expected PSN before it.
    OutOfOrder { opened_gap: bool },
    /// Already placed (a resend or a late original): not placed twice.
    Duplicate,
    /// Beyond the window the receiver can track: dropped.
    BeyondWindow,
}

/// Receiver side: every PSN below `expected` is placed; `beyond[i]` says
/// whether `expected + 1 + i` is.
#[derive(Debug, Default)]
pub struct PlacementWindow {
    expected: u64,
    beyond: VecDeque<bool>,
}

impl PlacementWindow {
    /// The first PSN not yet received.
    pub fn expected(&self) -> u64 {
        self.expected
    }

    /// Whether anything is held beyond the first missing PSN.
    pub fn has_gap(&self) -> bool {
        !self.beyond.is_empty()
    }

    /// The in-order case alone (a go-back-N receiver places nothing else).
    pub fn place_expected(&mut self) {
        debug_assert!(self.beyond.is_empty());
        self.expected += 1;
    }

    pub fn place(&mut self, seq: u64) -> Placement {
        if seq < self.expected {
            return Placement::Duplicate;
        }
        if seq == self.expected {
            let mut advanced = 1;
            while self.beyond.pop_front() == Some(true) {
                advanced += 1;
            }
            // The pop that stopped the loop took the next missing PSN's
            // (false) slot: exactly the one `expected` now names.
            self.expected += advanced;
            return Placement::InOrder { advanced };
        }
        let i = seq - self.expected - 1;
        if i >= SACK_WINDOW - 1 {
            return Placement::BeyondWindow;
        }
        let i = i as usize;
        if self.beyond.get(i) == Some(&true) {
            return Placement::Duplicate;
        }
        let opened_gap = self.beyond.is_empty();
        if self.beyond.len() <= i {
            self.beyond.resize(i + 1, false);
        }
        self.beyond[i] = true;
        Placement::OutOfOrder { opened_gap }
    }

    /// What is held beyond the expected PSN, for the ACK.
    pub fn bitmap(&self) -> Option<SackBitmap> {
        let mut s = SackBitmap::default();
        for (i, _) in self.beyond.iter().enumerate().filter(|(_, &b)| b) {
            s.set(i as u64);
        }
        (!s.is_empty()).then_some(s)
    }
}

/// State of one sent packet at the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Sent once, not acknowledged.
    InFlight,
    /// Declared lost, waiting to be sent again.
    Lost,
    /// Sent again, not acknowledged (its own loss is left to the timers).
    Resent,
    /// Selectively acknowledged.
    Sacked,
}

/// Sender side: `slots[i]` is the state of PSN `una + i`, for every packet
/// sent and not cumulatively acknowledged.
#[derive(Debug, Default)]
pub struct Scoreboard {
    una: u64,
    slots: VecDeque<Slot>,
    lost: usize,
}

impl Scoreboard {
    /// One past the highest PSN sent.
    fn high(&self) -> u64 {
        self.una + self.slots.len() as u64
    }

    /// Records a send of `seq`: a new packet (the next one) or a resend.
    pub fn on_sent(&mut self, seq: u64) {
        if seq == self.high() {
            self.slots.push_back(Slot::InFlight);
        } else if let Some(s) = seq
            .checked_sub(self.una)
            .and_then(|i| self.slots.get_mut(i as usize))
        {
            if *s == Slot::Lost {
                self.lost -= 1;
            }
            *s = Slot::Resent;
        }
    }

    /// Applies an ACK: everything below `expected` is placed, and what the
    /// bitmap names beyond it. True when it told something new.
    pub fn on_ack(&mut self, expected: u64, sack: Option<&SackBitmap>) -> bool {
        let mut progress = false;
        while self.una < expected.min(self.high()) {
            if self.slots.pop_front() == Some(Slot::Lost) {
                self.lost -= 1;
            }
            self.una += 1;
            progress = true;
        }
        let (Some(sack), true) = (sack, expected == self.una) else {
            return progress;
        };
        for i in (0..sack.span()).filter(|&i| sack.contains(i)) {
            let Some(s) = self.slots.get_mut(i as usize + 1) else {
                break;
            };
            if *s != Slot::Sacked {
                if *s == Slot::Lost {
                    self.lost -= 1;
                }
                *s = Slot::Sacked;
                progress = true;
            }
        }
        progress
    }

    /// Declares lost every packet sent once with at least `threshold`
    /// packets acknowledged beyond it (reordering shallower than that costs
    /// nothing). Returns how many.
    pub fn detect_losses(&mut self, threshold: u64) -> u64 {
        let mut above = 0u64;
        let mut found = 0;
        for s in self.slots.iter_mut().rev() {
            match *s {
                Slot::Sacked => above += 1,
                Slot::InFlight if above >= threshold => {
                    *s = Slot::Lost;
                    found += 1;
                }
                _ => {}
            }
        }
        self.lost += found as usize;
        found
    }

    /// Retransmit timeout: everything not acknowledged is sent again.
    pub fn all_unacknowledged_lost(&mut self) {
        for s in self.slots.iter_mut().filter(|s| **s != Slot::Sacked) {
            *s = Slot::Lost;
        }
        self.lost = self.slots.iter().filter(|s| **s == Slot::Lost).count();
    }

    /// Tail-loss probe (nothing new to send, no progress for a while): the
    /// gaps below the highest acknowledged packet are lost; with none, the
    /// last packet goes out again so that the receiver answers.
    pub fn tail_lost(&mut self) {
        let top = self.slots.iter().rposition(|s| *s == Slot::Sacked);
        let mut gaps = false;
        for s in self.slots.iter_mut().take(top.unwrap_or(0)) {
            if matches!(*s, Slot::InFlight | Slot::Resent) {
                *s = Slot::Lost;
                gaps = true;
            }
        }
        if !gaps {
            if let Some(s) = self.slots.back_mut().filter(|s| **s != Slot::Sacked) {
                *s = Slot::Lost;
            }
        }
        self.lost = self.slots.iter().filter(|s| **s == Slot::Lost).count();
    }

    pub fn has_lost(&self) -> bool {
        self.lost > 0
    }

    /// The lowest PSN waiting to be sent again.
    pub fn next_lost(&self) -> Option<u64> {
        if self.lost == 0 {
            return None;
        }
        self.slots
            .iter()
            .position(|s| *s == Slot::Lost)
            .map(|i| self.una + i as u64)
    }

    /// Forgets everything below `una` (a time-bounded flow stopped).
    pub fn reset(&mut self, una: u64) {
        self.una = una;
        self.slots.clear();
        self.lost = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_places_by_psn_and_reports_the_gaps() {
        let mut w = PlacementWindow::default();
        assert_eq!(w.place(0), Placement::InOrder { advanced: 1 });
        assert_eq!(w.place(3), Placement::OutOfOrder { opened_gap: true });
        assert_eq!(w.place(5), Placement::OutOfOrder { opened_gap: false });
        assert_eq!(w.place(3), Placement::Duplicate);
        let s = w.bitmap().unwrap();
        // expected 1: bit i is PSN 2 + i.
        let held: Vec<u64> = (0..s.span()).filter(|&i| s.contains(i)).collect();
        assert_eq!(held, [1, 3]);
        assert_eq!(w.place(2), Placement::OutOfOrder { opened_gap: false });
        assert_eq!(w.place(1), Placement::InOrder { advanced: 3 });
        assert_eq!(w.expected(), 4);
        assert_eq!(w.place(0), Placement::Duplicate);
        assert_eq!(w.place(4), Placement::InOrder { advanced: 2 });
        assert_eq!((w.expected(), w.has_gap(), w.bitmap()), (6, false, None));
        assert_eq!(w.place(6 + SACK_WINDOW), Placement::BeyondWindow);
        assert_eq!(
            w.place(6 + SACK_WINDOW - 1),
            Placement::OutOfOrder { opened_gap: true }
        );
        assert!(w.bitmap().unwrap().contains(SACK_WINDOW - 2));
    }

    fn board(n: u64) -> Scoreboard {
        let mut b = Scoreboard::default();
        for s in 0..n {
            b.on_sent(s);
        }
        b
    }

    fn sack(offsets: &[u64]) -> SackBitmap {
        let mut s = SackBitmap::default();
        for &i in offsets {
            s.set(i);
        }
        s
    }

    #[test]
    fn scoreboard_resends_only_what_is_missing() {
        let mut b = board(10);
        // Receiver expects 2 and holds 4..=8 (offsets from 3).
        assert!(b.on_ack(2, Some(&sack(&[1, 2, 3, 4, 5]))));
        assert!(!b.on_ack(2, Some(&sack(&[1, 2, 3, 4, 5]))), "nothing new");
        // 5 acknowledged beyond PSNs 2 and 3: lost at threshold 5, not 6.
        assert_eq!(b.detect_losses(6), 0);
        assert_eq!(b.detect_losses(5), 2);
        assert_eq!(b.next_lost(), Some(2));
        b.on_sent(2);
        assert_eq!(b.next_lost(), Some(3));
        // 3 arrives late after all: acknowledged, no longer to be resent.
        assert!(b.on_ack(2, Some(&sack(&[0, 1, 2, 3, 4, 5]))));
        assert_eq!(b.next_lost(), None);
        // The resent PSN 2 is not declared lost again by the count (its
        // loss is left to the timers); PSN 9 has nothing acknowledged above.
        assert_eq!(b.detect_losses(1), 0);
        assert!(b.on_ack(10, None));
        assert!(!b.has_lost());
    }

    #[test]
    fn timeout_and_tail_probe_mark_what_they_should() {
        let mut b = board(6);
        b.on_ack(1, Some(&sack(&[1])));
        b.all_unacknowledged_lost();
        let lost: Vec<u64> = std::iter::from_fn(|| {
            let s = b.next_lost()?;
            b.on_sent(s);
            Some(s)
        })
        .collect();
        assert_eq!(lost, [1, 2, 4, 5], "PSN 3 was acknowledged");

        // Tail: 1 and 3 missing below the acknowledged 4 are lost; 5,
        // beyond the highest acknowledged, may still be on its way.
        let mut b = board(6);
        b.on_ack(1, Some(&sack(&[0, 2])));
        b.tail_lost();
        assert_eq!(b.next_lost(), Some(1));
        b.on_sent(1);
        assert_eq!(b.next_lost(), Some(3));
        b.on_sent(3);
        assert_eq!(b.next_lost(), None);
        // Only the last packet unacknowledged (a gap resent and filled
        // before): it is the probe.
        let mut b = board(4);
        b.on_ack(1, Some(&sack(&[0])));
        b.on_sent(1);
        b.on_ack(3, None);
        b.tail_lost();
        assert_eq!(b.next_lost(), Some(3));
        // Nothing acknowledged beyond: the last packet is the probe.
        let mut b = board(3);
        b.tail_lost();
        assert_eq!(b.next_lost(), Some(2));
        b.on_sent(2);
        assert_eq!(b.next_lost(), None);
    }
}
