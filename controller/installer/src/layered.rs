//! An intended state as two layers: a switch's static state, shared by
//! every state derived from it, and the few entities laid over it (a
//! reservation's entries, a port's lowered DCQCN profile). Two states on
//! the same static layer differ only in their tops, so comparing them
//! costs what the reservations hold, not what the switch holds.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use p4rt::SharedEntity;

use crate::intent::{Key, Resolved};
use crate::reconcile::{diff_states, Diff};

/// `base` with `top` laid over it: an entity of `top` replaces the base's
/// entity of its key or adds one.
#[derive(Debug, Clone, Default)]
pub struct Layered {
    pub base: Arc<Resolved>,
    pub top: BTreeMap<Key, Arc<SharedEntity>>,
}

impl Layered {
    /// A state with nothing laid over it.
    pub fn flat(base: Arc<Resolved>) -> Layered {
        Layered {
            base,
            top: BTreeMap::new(),
        }
    }

    /// The entity of `key`.
    pub fn get(&self, key: &Key) -> Option<&Arc<SharedEntity>> {
        self.top.get(key).or_else(|| self.base.entities.get(key))
    }

    /// The state as one layer.
    pub fn whole(&self) -> Resolved {
        let mut out = (*self.base).clone();
        for (key, entity) in &self.top {
            out.entities.insert(key.clone(), entity.clone());
        }
        out
    }

    /// How many entities the state holds.
    pub fn len(&self) -> usize {
        self.base.entities.len()
            + self
                .top
                .keys()
                .filter(|k| !self.base.entities.contains_key(k))
                .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What to write to take a switch from `from` to `to`. On the same static
/// layer only the keys of either top are looked at; otherwise the whole
/// states are compared.
pub fn diff_layered(from: &Layered, to: &Layered) -> Diff {
    if !Arc::ptr_eq(&from.base, &to.base) {
        return diff_states(&from.whole(), &to.whole());
    }
    let mut out = Diff::default();
    let mut deleted = Vec::new();
    let (mut f, mut t) = (from.top.keys().peekable(), to.top.keys().peekable());
    loop {
        let key = match (f.peek(), t.peek()) {
            (None, None) => break,
            (Some(_), None) => f.next().expect("peeked"),
            (None, Some(_)) => t.next().expect("peeked"),
            (Some(a), Some(b)) => match a.cmp(b) {
                Ordering::Less => f.next().expect("peeked"),
                Ordering::Greater => t.next().expect("peeked"),
                Ordering::Equal => {
                    t.next();
                    f.next().expect("peeked")
                }
            },
        };
        match (from.get(key), to.get(key)) {
            (None, Some(e)) => out.insert.push((key.clone(), e.clone())),
            (Some(e), None) => deleted.push((key.clone(), e.clone())),
            (Some(a), Some(b)) if !Arc::ptr_eq(a, b) && a != b => {
                out.modify.push((key.clone(), b.clone()))
            }
            _ => {}
        }
    }
    // Deletes in reverse key order, as `diff_states` gives them.
    deleted.reverse();
    out.delete = deleted;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4rt::proto::p4::v1 as p4;

    fn entity(table: u32, value: u8) -> Arc<SharedEntity> {
        let entry = p4::TableEntry {
            table_id: table,
            priority: i32::from(value),
            ..Default::default()
        };
        Arc::new(p4::Entity::from(entry).into())
    }

    fn key(k: u8) -> Key {
        Key::Table(vec![k].into())
    }

    fn keys(d: &[(Key, Arc<SharedEntity>)]) -> Vec<Key> {
        d.iter().map(|(k, _)| k.clone()).collect()
    }

    /// The layered diff is the whole states' diff, in the same order:
    /// tops that add, replace, restore and drop the base's entities.
    #[test]
    fn a_diff_on_one_base_is_the_diff_of_the_whole_states() {
        let base = Arc::new(Resolved {
            entities: (0..6).map(|k| (key(k * 2), entity(1, k))).collect(),
            defaults: Vec::new(),
        });
        let tops: Vec<BTreeMap<Key, Arc<SharedEntity>>> = vec![
            BTreeMap::new(),
            [(key(1), entity(2, 1)), (key(2), entity(2, 9))].into(),
            [
                (key(2), entity(1, 1)),
                (key(3), entity(2, 3)),
                (key(11), entity(2, 4)),
            ]
            .into(),
            [(key(4), entity(2, 7))].into(),
        ];
        for from in &tops {
            for to in &tops {
                let (a, b) = (
                    Layered {
                        base: base.clone(),
                        top: from.clone(),
                    },
                    Layered {
                        base: base.clone(),
                        top: to.clone(),
                    },
                );
                let layered = diff_layered(&a, &b);
                let whole = diff_states(&a.whole(), &b.whole());
                assert_eq!(
                    keys(&layered.insert),
                    keys(&whole.insert),
                    "{from:?} -> {to:?}"
                );
                assert_eq!(
                    keys(&layered.modify),
                    keys(&whole.modify),
                    "{from:?} -> {to:?}"
                );
                assert_eq!(
                    keys(&layered.delete),
                    keys(&whole.delete),
                    "{from:?} -> {to:?}"
                );
                assert_eq!(b.len(), b.whole().entities.len());
            }
        }
        // A top that only restates the base writes nothing.
        let same = Layered {
            base: base.clone(),
            top: [(key(2), entity(1, 1))].into(),
        };
        assert!(diff_layered(&Layered::flat(base.clone()), &same).is_empty());
    }
}
