//! The reservation ledger: for every directed link, the reserved bandwidth
//! over time as a piecewise-constant function.
//!
//! Each link keeps its breakpoints `(time, level)` sorted by time: the
//! level holds from `time` until the next breakpoint; before the first
//! breakpoint the level is 0. Insert and remove split at the window's ends
//! and add to the levels in between (`O(log k + m)` for `k` breakpoints,
//! `m` of them in the window); the peak over a window is a search plus a
//! scan of the breakpoints inside it. Collectives share windows, so most
//! links carry few breakpoints: up to 1,024 live in a sorted list (the first
//! two inline, without allocating), more in a B-tree, so reservations held
//! far ahead do not make a change near now shift them all.
//!
//! Amounts are integer bit/s, so removing what was inserted restores the
//! exact previous state. The ledger also counts active reservations over
//! time on a global timeline, which answers "is anything reserved in this
//! window at all" in one lookup.

use std::collections::BTreeMap;

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
    points: Points,
}

/// Breakpoints above this many move from the sorted list to a B-tree
/// (below it, shifting the list on an insert costs less than a B-tree's
/// searches; above, the shift grows with what is held)...
#[cfg(not(test))]
const FEW_MAX: usize = 1024;
/// ...and back below this many (apart, so one link does not flip on
/// every change).
#[cfg(not(test))]
const FEW_MIN: usize = 256;
/// Small enough for the model test's timelines to cross both ways.
#[cfg(test)]
const FEW_MAX: usize = 32;
#[cfg(test)]
const FEW_MIN: usize = 8;

/// A timeline's breakpoints `(time, level from then on)`, sorted by time:
/// in a list while few (collectives share windows, so most links hold two,
/// kept inline),
/// in a B-tree once many, where a change near now does not shift every
/// breakpoint after it (reservations held far ahead would otherwise make
/// every change cost what is held).
#[derive(Clone, Debug)]
enum Points {
    Few(SmallVec<[(u64, u64); 2]>),
    Many(BTreeMap<u64, u64>),
}

impl Default for Points {
    fn default() -> Points {
        Points::Few(SmallVec::new())
    }
}

impl Points {
    fn len(&self) -> usize {
        match self {
            Points::Few(v) => v.len(),
            Points::Many(m) => m.len(),
        }
    }

    /// The level holding at `t` (0 before the first breakpoint).
    fn at(&self, t: u64) -> u64 {
        match self {
            Points::Few(v) => {
                let i = v.partition_point(|p| p.0 <= t);
                if i == 0 {
                    0
                } else {
                    v[i - 1].1
                }
            }
            Points::Many(m) => m.range(..=t).next_back().map_or(0, |(_, l)| *l),
        }
    }

    /// `f` folded over the levels `w` sees: the one holding at its start
    /// and those of the breakpoints inside it.
    fn fold_window(&self, w: Window, f: impl Fn(u64, u64) -> u64) -> u64 {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        match self {
            Points::Few(v) => {
                let lo = v.partition_point(|p| p.0 <= w.start_ns);
                let hi = v.partition_point(|p| p.0 < w.end_ns).max(lo);
                let first = if lo == 0 { 0 } else { v[lo - 1].1 };
                v[lo..hi].iter().fold(first, |a, p| f(a, p.1))
            }
            Points::Many(m) => {
                let first = m
                    .range((Unbounded, Included(w.start_ns)))
                    .next_back()
                    .map_or(0, |(_, l)| *l);
                m.range((Excluded(w.start_ns), Excluded(w.end_ns)))
                    .fold(first, |a, (_, l)| f(a, *l))
            }
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match self {
            Points::Few(v) => Box::new(v.iter().copied()),
            Points::Many(m) => Box::new(m.iter().map(|(t, l)| (*t, *l))),
        }
    }
}

/// Index of breakpoint `t` in a sorted list, inserting it (with the level
/// that held there) if needed.
fn split_few(v: &mut SmallVec<[(u64, u64); 2]>, t: u64) -> usize {
    match v.binary_search_by_key(&t, |p| p.0) {
        Ok(i) => i,
        Err(i) => {
            let level = if i == 0 { 0 } else { v[i - 1].1 };
            v.insert(i, (t, level));
            i
        }
    }
}

/// Makes `t` a breakpoint of a B-tree (with the level that held there).
fn split_many(m: &mut BTreeMap<u64, u64>, t: u64) {
    if !m.contains_key(&t) {
        let level = m.range(..t).next_back().map_or(0, |(_, l)| *l);
        m.insert(t, level);
    }
}

impl Timeline {
    /// Applies `f` over `w` and keeps the breakpoints canonical (none that
    /// leaves the level unchanged). Only `w`'s ends can become redundant:
    /// the breakpoints strictly inside moved together with the one before
    /// each of them.
    fn change(&mut self, w: Window, f: impl Fn(&mut u64)) {
        match &mut self.points {
            Points::Few(v) => {
                let i0 = split_few(v, w.start_ns);
                let i1 = split_few(v, w.end_ns);
                v[i0..i1].iter_mut().for_each(|p| f(&mut p.1));
                if v[i1].1 == v[i1 - 1].1 {
                    v.remove(i1);
                }
                if v[i0].1 == if i0 == 0 { 0 } else { v[i0 - 1].1 } {
                    v.remove(i0);
                }
                if v.len() > FEW_MAX {
                    self.points = Points::Many(v.iter().copied().collect());
                }
            }
            Points::Many(m) => {
                split_many(m, w.start_ns);
                split_many(m, w.end_ns);
                m.range_mut(w.start_ns..w.end_ns).for_each(|(_, l)| f(l));
                for t in [w.end_ns, w.start_ns] {
                    let prev = m.range(..t).next_back().map_or(0, |(_, l)| *l);
                    if m[&t] == prev {
                        m.remove(&t);
                    }
                }
                if m.len() < FEW_MIN {
                    self.points = Points::Few(m.iter().map(|(t, l)| (*t, *l)).collect());
                }
            }
        }
    }

    /// Adds `amount` over `w`.
    pub fn add(&mut self, w: Window, amount: u64) {
        if amount == 0 {
            return;
        }
        self.change(w, |l| *l += amount);
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
        self.change(w, |l| *l -= amount);
        Ok(())
    }

    /// The highest level inside `w`.
    pub fn peak(&self, w: Window) -> u64 {
        self.points.fold_window(w, u64::max)
    }

    /// The lowest level inside `w`.
    pub fn min(&self, w: Window) -> u64 {
        self.points.fold_window(w, u64::min)
    }

    /// The level at time `t`.
    pub fn at(&self, t: u64) -> u64 {
        self.points.at(t)
    }

    /// The highest level at any time.
    pub fn max(&self) -> u64 {
        self.points.iter().map(|p| p.1).max().unwrap_or(0)
    }

    /// Breakpoints `(time, level from then on)`, in time order.
    pub fn breakpoints(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.points.iter()
    }

    /// True when the level is 0 everywhere.
    pub fn is_zero(&self) -> bool {
        self.points.len() == 0
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
        self.active
            .breakpoints()
            .scan(0, |prev, (t, level)| {
                let drops = level < *prev;
                *prev = level;
                Some(drops.then_some(t))
            })
            .flatten()
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
        // Both representations, and the moves between them, are exercised.
        let (mut few, mut many) = (0, 0);
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
                let pts: Vec<(u64, u64)> = tl.breakpoints().collect();
                for i in 0..pts.len() {
                    let prev = if i == 0 { 0 } else { pts[i - 1].1 };
                    assert_ne!(pts[i].1, prev, "redundant breakpoint {:?}", pts[i]);
                }
                match tl.points {
                    Points::Few(_) => few += 1,
                    Points::Many(_) => many += 1,
                }
            }
            for (w, amt) in live.drain(..) {
                tl.sub(w, amt).unwrap();
            }
            assert!(tl.is_zero(), "everything released leaves no breakpoints");
        }
        assert!(few > 1000 && many > 1000, "few {few}, many {many}");
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
