//! A flow's route: the links it crosses whole, and shared fractional
//! route pieces.
//!
//! A sprayed flow loads hundreds of fabric links with fractional shares,
//! and every flow between the same two leaves loads them identically.
//! Such a piece (a *part*) is stored once, interned by content, and flows
//! refer to it by id: memory stays per part instead of per flow, and the
//! max-min solver updates a part's links once per freezing level instead of
//! once per flow.

use std::collections::HashMap;

/// One link a flow loads: edge id and the fraction of the flow's rate on it.
pub type Use = (u32, f64);

/// A flow's route as the solver stores it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    /// Links the whole flow crosses.
    pub edges: Vec<u32>,
    /// Shared fractional pieces (sprayed traffic).
    pub parts: Vec<PartId>,
}

impl Route {
    /// Empties it.
    pub fn clear(&mut self) {
        self.edges.clear();
        self.parts.clear();
    }

    /// Every (edge, coefficient) it loads, parts expanded, into `out`.
    pub fn uses(&self, parts: &Parts, out: &mut Vec<Use>) {
        out.clear();
        out.extend(self.edges.iter().map(|&e| (e, 1.0)));
        for &p in &self.parts {
            out.extend_from_slice(parts.get(p));
        }
    }

    /// True when it loads no link.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty() && self.parts.is_empty()
    }
}

/// Index of a part in [`Parts`].
pub type PartId = u32;

/// Interned parts: lists of (edge, coefficient), immutable once created.
#[derive(Default)]
pub struct Parts {
    uses: Vec<Use>,
    /// Part `p` is `uses[off[p]..off[p + 1]]`.
    off: Vec<u32>,
    index: HashMap<Vec<(u32, u64)>, PartId>,
    /// Edge -> parts that load it.
    by_edge: Vec<Vec<PartId>>,
}

impl Parts {
    /// No parts yet.
    pub fn new() -> Parts {
        Parts {
            off: vec![0],
            ..Default::default()
        }
    }

    /// The id of the part with exactly these uses (created if new).
    pub fn intern(&mut self, uses: &[Use]) -> PartId {
        let key: Vec<(u32, u64)> = uses.iter().map(|&(e, c)| (e, c.to_bits())).collect();
        if let Some(&p) = self.index.get(&key) {
            return p;
        }
        let p = (self.off.len() - 1) as PartId;
        self.uses.extend_from_slice(uses);
        self.off.push(self.uses.len() as u32);
        for &(e, _) in uses {
            let e = e as usize;
            if self.by_edge.len() <= e {
                self.by_edge.resize_with(e + 1, Vec::new);
            }
            self.by_edge[e].push(p);
        }
        self.index.insert(key, p);
        p
    }

    /// The uses of part `p`.
    pub fn get(&self, p: PartId) -> &[Use] {
        &self.uses[self.off[p as usize] as usize..self.off[p as usize + 1] as usize]
    }

    /// Parts that load edge `e`.
    pub fn containing(&self, e: u32) -> &[PartId] {
        self.by_edge.get(e as usize).map_or(&[], Vec::as_slice)
    }

    /// Number of parts.
    pub fn len(&self) -> usize {
        self.off.len() - 1
    }

    /// True when no part exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_returns_the_same_id_for_the_same_content() {
        let mut p = Parts::new();
        let a = p.intern(&[(1, 0.5), (2, 0.5)]);
        let b = p.intern(&[(3, 1.0)]);
        assert_ne!(a, b);
        assert_eq!(p.intern(&[(1, 0.5), (2, 0.5)]), a);
        assert_eq!(p.intern(&[(1, 0.25), (2, 0.5)]), 2);
        assert_eq!(p.get(a), &[(1, 0.5), (2, 0.5)]);
        assert_eq!(p.containing(2), &[a, 2]);
        assert_eq!(p.containing(7), &[] as &[PartId]);
        assert_eq!(p.len(), 3);
    }
}
