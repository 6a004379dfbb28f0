//! Field paths, built without allocating and rendered only on error,
//! and how a value is shown in one.

use super::{Result, ValidationError};

#[derive(Clone, Copy)]
pub(super) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    name: &'static str,
    index: Option<usize>,
}

pub(super) const ROOT: Path<'static> = Path {
    parent: None,
    name: "",
    index: None,
};

impl<'a> Path<'a> {
    pub(super) fn field(&'a self, name: &'static str) -> Path<'a> {
        Path {
            parent: Some(self),
            name,
            index: None,
        }
    }

    pub(super) fn index(&'a self, name: &'static str, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            name,
            index: Some(index),
        }
    }

    pub(super) fn render(&self) -> String {
        let mut segments = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            if !p.name.is_empty() {
                segments.push(match p.index {
                    Some(i) => format!("{}[{i}]", p.name),
                    None => p.name.to_owned(),
                });
            }
            at = p.parent;
        }
        segments.reverse();
        segments.join(".")
    }

    pub(super) fn error(&self, reason: impl Into<String>) -> ValidationError {
        ValidationError::new(self.render(), reason)
    }

    pub(super) fn err<T>(&self, reason: impl Into<String>) -> Result<T> {
        Err(self.error(reason))
    }
}

/// A value as shown in an error: quoted, and cut short if long.
pub(super) fn show(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head:?}...")
    }
}
