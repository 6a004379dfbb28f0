//! The reservation ledger: for every directed link, the reserved bandwidth
//! over time as a piecewise-constant function.
//!
//! Each link keeps a sorted list of breakpoints `(time, level)`: the level
//! holds from `time` until the next breakpoint; before the first breakpoint
//! the level is 0. Insert and remove split at the window's ends and add to
//! the levels in between (`O(log k + m)` for `k` breakpoints, `m` of them in
//! the window, plus the shift of a `Vec` insert); the peak over a window is
//! a binary search plus a scan of the breakpoints inside it. Collectives
//! share windows, so links rarely carry many breakpoints; the first two live
//! inline, without allocating.
//!
//! Amounts are integer bit/s, so removing what was inserted restores the
//! exact previous state. The ledger also counts active reservations over
//! time on a global timeline, which answers "is anything reserved in this
//! window at all" in one lookup.

use smallvec::SmallVec;

use crate::topology::EdgeId;

/// A half-open time window `[start_ns, end_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Window {
    /// First nanosecond.
    pub start_ns: u64,
    /// First nanosecond after the window.
    pub end_ns: u64,
}

impl Window {
    /// A window; panics if empty.
    pub fn new(start_ns: u64, end_ns: u64) -> Window {
        assert!(start_ns < end_ns, "empty window [{start_ns}, {end_ns})");
        Window { start_ns, end_ns }
    }
    /// The window moved later by `ns`.
    pub fn shifted(self, ns: u64) -> Window {
        Window::new(self.start_ns + ns, self.end_ns + ns)
    }
    /// Length in nanoseconds.
    pub fn len_ns(self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// A piecewise-constant non-negative function of time.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    points: SmallVec<[(u64, u64); 2]>,
}

impl Timeline {
    /// Index of the breakpoint at `t`, inserting one (with the level that
    /// held at `t`) if needed.
    fn split_at(&mut self, t: u64) -> usize {
        match self.points.binary_search_by_key(&t, |p| p.0) {
            Ok(i) => i,
            Err(i) => {
                let level = if i == 0 { 0 } else { self.points[i - 1].1 };
                self.points.insert(i, (t, level));
                i
            }
        }
    }

    /// Adds `amount` over `w`.
    pub fn add(&mut self, w: Window, amount: u64) {
        if amount == 0 {
            return;
        }
        if self.points.is_empty() {
            self.points.push((w.start_ns, amount));
            self.points.push((w.end_ns, 0));
            return;
        }
        let i0 = self.split_at(w.start_ns);
        let i1 = self.split_at(w.end_ns);
        for p in &mut self.points[i0..i1] {
            p.1 += amount;
        }
        self.coalesce(i0, i1);
    }

    /// Subtracts `amount` over `w`; fails (changing nothing) if the level
    /// anywhere in `w` is below `amount`.
    pub fn sub(&mut self, w: Window, amount: u64) -> Result<(), u64> {
        if amount == 0 {
            return Ok(());
        }
        let min = self.min(w);
        if min < amount {
            return Err(min);
        }
        let i0 = self.split_at(w.start_ns);
        let i1 = self.split_at(w.end_ns);
        for p in &mut self.points[i0..i1] {
            p.1 -= amount;
        }
        self.coalesce(i0, i1);
        Ok(())
    }

    /// Drops breakpoints that do not change the level, around `[i0, i1]`.
    fn coalesce(&mut self, i0: usize, i1: usize) {
        let hi = (i1 + 1).min(self.points.len());
        let lo = i0.saturating_sub(1);
        let mut i = hi;
        while i > lo {
            i -= 1;
            let prev = if i == 0 { 0 } else { self.points[i - 1].1 };
            if self.points[i].1 == prev {
                self.points.remove(i);
            }
        }
    }

    /// The level at the window's start and the breakpoints strictly inside it.
    fn inside(&self, w: Window) -> (u64, &[(u64, u64)]) {
        let first = self.points.partition_point(|p| p.0 <= w.start_ns);
        let hi = self.points.partition_point(|p| p.0 < w.end_ns);
        let at_start = if first == 0 {
            0
        } else {
            self.points[first - 1].1
        };
        (at_start, &self.points[first..hi.max(first)])
    }

    /// The highest level inside `w`.
    pub fn peak(&self, w: Window) -> u64 {
        if self.points.is_empty() {
            return 0;
        }
        let (m, rest) = self.inside(w);
        rest.iter().fold(m, |m, p| m.max(p.1))
    }

    /// The lowest level inside `w`.
    pub fn min(&self, w: Window) -> u64 {
        let (m, rest) = self.inside(w);
        rest.iter().fold(m, |m, p| m.min(p.1))
    }

    /// The level at time `t`.
    pub fn at(&self, t: u64) -> u64 {
        let i = self.points.partition_point(|p| p.0 <= t);
        if i == 0 {
            0
        } else {
            self.points[i - 1].1
        }
    }

    /// The highest level at any time.
    pub fn max(&self) -> u64 {
        self.points.iter().map(|p| p.1).max().unwrap_or(0)
    }

    /// Breakpoints `(time, level from then on)`, in time order.
    pub fn breakpoints(&self) -> &[(u64, u64)] {
        &self.points
    }

    /// True when the level is 0 everywhere.
    pub fn is_zero(&self) -> bool {
        self.points.is_empty()
    }
}

/// Removing more than was reserved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("link {edge}: cannot release {amount} bit/s in [{}, {}) ns, only {available} bit/s reserved there", window.start_ns, window.end_ns)]
pub struct ReleaseError {
    /// The link.
    pub edge: EdgeId,
    /// The window.
    pub window: Window,
    /// What was to be released.
    pub amount: u64,
    /// The lowest reserved level in the window.
    pub available: u64,
}

/// Reserved bandwidth over time on every directed link.
#[derive(Clone, Debug)]
pub struct Ledger {
    links: Vec<Timeline>,
    active: Timeline,
}

impl Ledger {
    /// An empty ledger for `edges` directed links.
    pub fn new(edges: usize) -> Ledger {
        Ledger {
            links: vec![Timeline::default(); edges],
            active: Timeline::default(),
        }
    }

    /// Number of links.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// True when the ledger tracks no links.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Reserves `bps` on `edge` over `w`.
    pub fn reserve(&mut self, edge: EdgeId, w: Window, bps: u64) {
        self.links[edge as usize].add(w, bps);
    }

    /// Releases `bps` on `edge` over `w`; fails without changing anything
    /// if less than that is reserved somewhere in `w`.
    pub fn release(&mut self, edge: EdgeId, w: Window, bps: u64) -> Result<(), ReleaseError> {
        self.links[edge as usize]
            .sub(w, bps)
            .map_err(|available| ReleaseError {
                edge,
                window: w,
                amount: bps,
                available,
            })
    }

    /// Marks one more reservation group active over `w` (see [`Ledger::is_idle`]).
    pub fn open(&mut self, w: Window) {
        self.active.add(w, 1);
    }

    /// Undoes [`Ledger::open`].
    pub fn close(&mut self, w: Window) {
        self.active
            .sub(w, 1)
            .expect("close() without a matching open()");
    }

    /// True when no reservation group is open anywhere in `w`.
    pub fn is_idle(&self, w: Window) -> bool {
        self.active.peak(w) == 0
    }

    /// Times at which a reservation group ends (candidate start times for
    /// deferred demands), in order.
    pub fn release_times(&self) -> impl Iterator<Item = u64> + '_ {
        let pts = self.active.breakpoints();
        pts.iter()
            .enumerate()
            .filter(move |(i, p)| *i > 0 && p.1 < pts[i - 1].1)
            .map(|(_, p)| p.0)
    }

    /// Peak reserved bit/s on `edge` within `w`.
    pub fn peak(&self, edge: EdgeId, w: Window) -> u64 {
        self.links[edge as usize].peak(w)
    }

    /// Reserved bit/s on `edge` at `t`.
    pub fn at(&self, edge: EdgeId, t: u64) -> u64 {
        self.links[edge as usize].at(t)
    }

    /// Peak reserved bit/s on `edge` over all time.
    pub fn max(&self, edge: EdgeId) -> u64 {
        self.links[edge as usize].max()
    }

    /// The timeline of one link.
    pub fn timeline(&self, edge: EdgeId) -> &Timeline {
        &self.links[edge as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Naive model: one level per time unit.
    struct Naive(Vec<u64>);
    impl Naive {
        fn add(&mut self, w: Window, a: u64) {
            for t in w.start_ns..w.end_ns {
                self.0[t as usize] += a;
            }
        }
        fn sub(&mut self, w: Window, a: u64) -> bool {
            if (w.start_ns..w.end_ns).any(|t| self.0[t as usize] < a) {
                return false;
            }
            for t in w.start_ns..w.end_ns {
                self.0[t as usize] -= a;
            }
            true
        }
        fn peak(&self, w: Window) -> u64 {
            (w.start_ns..w.end_ns)
                .map(|t| self.0[t as usize])
                .max()
                .unwrap()
        }
    }

    #[test]
    fn matches_naive_model_under_random_operations() {
        const T: u64 = 200;
        let mut rng = Rng::new(7);
        for round in 0..40 {
            let mut tl = Timeline::default();
            let mut naive = Naive(vec![0; T as usize + 1]);
            let mut live: Vec<(Window, u64)> = Vec::new();
            for _ in 0..300 {
                let a = rng.below(T);
                let b = a + 1 + rng.below(T - a);
                let w = Window::new(a, b);
                match rng.below(4) {
                    0 | 1 => {
                        let amt = 1 + rng.below(50);
                        tl.add(w, amt);
                        naive.add(w, amt);
                        live.push((w, amt));
                    }
                    2 if !live.is_empty() => {
                        let (w, amt) = live.swap_remove(rng.below(live.len() as u64) as usize);
                        assert!(tl.sub(w, amt).is_ok());
                        assert!(naive.sub(w, amt));
                    }
                    _ => {
                        // A removal that must fail leaves everything unchanged.
                        let amt = naive.peak(w) + 1;
                        assert!(tl.sub(w, amt).is_err());
                    }
                }
                for _ in 0..5 {
                    let a = rng.below(T);
                    let b = a + 1 + rng.below(T - a);
                    let q = Window::new(a, b);
                    assert_eq!(tl.peak(q), naive.peak(q), "round {round} window {q:?}");
                    assert_eq!(tl.at(a), naive.0[a as usize]);
                }
                // Canonical form: no redundant breakpoints.
                let pts = tl.breakpoints();
                for i in 0..pts.len() {
                    let prev = if i == 0 { 0 } else { pts[i - 1].1 };
                    assert_ne!(pts[i].1, prev, "redundant breakpoint {:?}", pts[i]);
                }
            }
            for (w, amt) in live.drain(..) {
                tl.sub(w, amt).unwrap();
            }
            assert!(tl.is_zero(), "everything released leaves no breakpoints");
        }
    }

    #[test]
    fn ledger_release_and_idle() {
        let mut l = Ledger::new(3);
        let w = Window::new(10, 20);
        l.reserve(1, w, 100);
        l.open(w);
        assert_eq!(l.peak(1, Window::new(0, 11)), 100);
        assert_eq!(l.peak(1, Window::new(0, 10)), 0);
        assert_eq!(l.peak(1, Window::new(20, 30)), 0);
        assert!(!l.is_idle(Window::new(15, 16)));
        assert!(l.is_idle(Window::new(20, 25)));
        assert_eq!(l.release_times().collect::<Vec<_>>(), vec![20]);
        let e = l.release(1, Window::new(5, 15), 100).unwrap_err();
        assert_eq!(e.available, 0);
        l.release(1, w, 100).unwrap();
        l.close(w);
        assert_eq!(l.max(1), 0);
        assert!(l.is_idle(Window::new(0, 100)));
    }
}
