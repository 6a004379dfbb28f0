//! A monotone priority queue (radix heap) for event times.
//!
//! The simulation only ever asks for the earliest pending time, and never
//! schedules anything before the last time it took. A radix heap uses that:
//! entries sit in buckets by the highest bit in which their key differs
//! from the last key taken, so taking the minimum scans one bucket and
//! moves its entries to lower buckets, sequentially. With millions of
//! pending finishes this is several times faster than a binary heap's
//! random-access sift-downs. Looking at the minimum is free (each bucket
//! keeps its own), so the simulation can compare it with the next start
//! without committing to it.

/// Earliest-first queue of `(time, value)`; times are non-negative. Taking
/// an entry promises that nothing earlier will be pushed afterwards (a
/// time pushed below it counts as it); looking does not.
pub struct RadixHeap<T> {
    /// Bits of the last key taken (non-negative `f64` bits order like the values).
    last: u64,
    /// `buckets[i]`: keys whose highest bit differing from `last` is `i - 1`
    /// (`buckets[0]`: equal to `last`); every key in a bucket is below
    /// every key in a higher one.
    buckets: Vec<Vec<(u64, T)>>,
    /// Smallest key per bucket (`u64::MAX` when empty).
    mins: Vec<u64>,
    len: usize,
}

impl<T: Copy> Default for RadixHeap<T> {
    fn default() -> Self {
        RadixHeap {
            last: 0,
            buckets: (0..65).map(|_| Vec::new()).collect(),
            mins: vec![u64::MAX; 65],
            len: 0,
        }
    }
}

/// An emptied bucket keeps its allocation up to this many entries (reused
/// by the next entries it gets); a larger one gives it back.
const KEEP_EMPTIED: usize = 4096;

impl<T: Copy> RadixHeap<T> {
    fn bucket_of(&self, k: u64) -> usize {
        (64 - (k ^ self.last).leading_zeros()) as usize
    }

    fn put(&mut self, k: u64, v: T) {
        let b = self.bucket_of(k);
        self.buckets[b].push((k, v));
        self.mins[b] = self.mins[b].min(k);
    }

    fn first(&self) -> Option<usize> {
        (0..65).find(|&i| !self.buckets[i].is_empty())
    }

    /// Schedules `v` at time `t` (≥ 0; clamped up to the last time taken).
    pub fn push(&mut self, t: f64, v: T) {
        debug_assert!(t >= 0.0, "negative time {t}");
        self.put(t.to_bits().max(self.last), v);
        self.len += 1;
    }

    /// The earliest time queued, without taking it.
    pub fn min_time(&self) -> Option<f64> {
        self.first().map(|b| f64::from_bits(self.mins[b]))
    }

    /// Removes and returns the earliest entry.
    pub fn pop(&mut self) -> Option<(f64, T)> {
        let i = self.first()?;
        if i > 0 {
            // Re-bucket around the new minimum: all move to lower buckets.
            let mut moved = std::mem::take(&mut self.buckets[i]);
            self.last = self.mins[i];
            self.mins[i] = u64::MAX;
            // A large move sizes each lower bucket once for what it gets.
            // Grown by doubling, and kept by every bucket the entries
            // passed through, the buckets held 5x the queue when millions
            // of flows finished together (an 8k-GPU all-to-all).
            if moved.len() > KEEP_EMPTIED {
                let mut counts = [0usize; 65];
                for &(k, _) in &moved {
                    counts[self.bucket_of(k)] += 1;
                }
                for (bucket, &n) in self.buckets.iter_mut().zip(&counts) {
                    bucket.reserve_exact(n);
                }
            }
            for &(k, v) in &moved {
                self.put(k, v);
            }
            if moved.capacity() <= KEEP_EMPTIED {
                moved.clear();
                self.buckets[i] = moved;
            }
        }
        let (k, v) = self.buckets[0].pop().expect("bucket 0 holds the minimum");
        if self.buckets[0].is_empty() {
            self.mins[0] = u64::MAX;
            if self.buckets[0].capacity() > KEEP_EMPTIED {
                self.buckets[0] = Vec::new();
            }
        }
        self.len -= 1;
        Some((f64::from_bits(k), v))
    }

    /// Drops the entries `keep` refuses (the floor stays where it is).
    pub fn retain(&mut self, mut keep: impl FnMut(f64, &T) -> bool) {
        for (b, m) in self.buckets.iter_mut().zip(&mut self.mins) {
            b.retain(|(k, v)| keep(f64::from_bits(*k), v));
            *m = b.iter().map(|x| x.0).min().unwrap_or(u64::MAX);
        }
        self.len = self.buckets.iter().map(Vec::len).sum();
    }

    /// Entries queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries the buckets have room for.
    #[cfg(test)]
    fn room(&self) -> usize {
        self.buckets.iter().map(Vec::capacity).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_with_interleaved_pushes() {
        let mut rng = planner::rng::Rng::new(9);
        let mut h = RadixHeap::default();
        let mut all = Vec::new();
        for i in 0..2000u32 {
            let t = rng.unit() * 1e6;
            h.push(t, i);
            all.push(t);
        }
        let mut last = 0.0;
        let mut n = 0;
        while let Some((t, _)) = h.pop() {
            assert!(t >= last, "{t} after {last}");
            last = t;
            n += 1;
            // Later events are scheduled after now.
            if n % 3 == 0 && n < 3000 {
                let later = t + rng.unit() * 1e5;
                h.push(later, 0);
                all.push(later);
            }
        }
        assert_eq!(n, all.len());
        all.sort_by(f64::total_cmp);
        assert_eq!(last, *all.last().unwrap());
        assert!(h.is_empty());
    }

    #[test]
    fn looking_does_not_move_time_taking_does() {
        let mut h = RadixHeap::default();
        h.push(5.0, 'a');
        h.push(9.0, 'b');
        assert_eq!(h.min_time(), Some(5.0));
        h.push(2.0, 'c');
        assert_eq!(h.pop(), Some((2.0, 'c')));
        assert_eq!(h.pop(), Some((5.0, 'a')));
        h.push(4.0, 'd');
        assert_eq!(h.min_time(), Some(5.0));
        assert_eq!(h.pop(), Some((5.0, 'd')));
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn a_queue_finishing_together_holds_room_for_itself_once() {
        // A synchronised collective: every flow finishes within a few ns
        // of one moment, so the whole queue passes down through many
        // buckets before the first is taken.
        let n = 200_000u32;
        let mut rng = planner::rng::Rng::new(3);
        let mut h = RadixHeap::default();
        for i in 0..n {
            h.push(21_454_000.0 + rng.unit() * 4.0, i);
        }
        let mut most = h.room();
        while h.pop().is_some() {
            most = most.max(h.room());
        }
        let n = n as usize;
        assert!(
            most <= 2 * n + 65 * KEEP_EMPTIED,
            "room for {most} entries, queue {n}"
        );
        assert!(h.room() <= 65 * KEEP_EMPTIED, "{} left", h.room());
    }

    #[test]
    fn retain_drops_entries_and_keeps_order() {
        let mut h = RadixHeap::default();
        for i in 0..100u32 {
            h.push(i as f64, i);
        }
        h.pop();
        h.retain(|_, &v| v % 3 == 0);
        assert_eq!(h.len(), 33);
        assert_eq!(h.min_time(), Some(3.0));
        let mut last = 0;
        while let Some((_, v)) = h.pop() {
            assert!(v % 3 == 0 && v > last);
            last = v;
        }
    }
}
