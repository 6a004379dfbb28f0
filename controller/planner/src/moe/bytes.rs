//! One step's bytes per (source rank, destination rank) pair of every EP
//! group: what the gating sent where. Row-major `size × size` per group,
//! ranks in the group's order. The diagonal (tokens for a rank's own
//! experts) never leaves the GPU and is ignored, as are pairs on one
//! server (NVLink).

use super::{MoeError, MoePattern};

/// Bytes per rank pair for one step, one matrix per EP group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepBytes {
    matrices: Vec<Vec<u64>>,
    /// Ranks per group.
    sizes: Vec<usize>,
}

impl StepBytes {
    /// Checks that there is one `size × size` matrix per group of `pattern`.
    pub fn new(pattern: &MoePattern, matrices: Vec<Vec<u64>>) -> Result<StepBytes, MoeError> {
        let step = StepBytes {
            matrices,
            sizes: pattern.groups().iter().map(Vec::len).collect(),
        };
        step.check(pattern)?;
        Ok(step)
    }

    /// Every pair of ranks (off the diagonal) sends `bytes`.
    pub fn even(pattern: &MoePattern, bytes: u64) -> StepBytes {
        StepBytes::from_fn(pattern, |_, _, _| bytes)
    }

    /// `f(group, src, dst)` bytes for each off-diagonal pair.
    pub fn from_fn(
        pattern: &MoePattern,
        mut f: impl FnMut(usize, usize, usize) -> u64,
    ) -> StepBytes {
        let matrices = pattern
            .groups()
            .iter()
            .enumerate()
            .map(|(g, ranks)| {
                let n = ranks.len();
                (0..n * n)
                    .map(|ij| {
                        let (i, j) = (ij / n, ij % n);
                        if i == j {
                            0
                        } else {
                            f(g, i, j)
                        }
                    })
                    .collect()
            })
            .collect();
        StepBytes {
            matrices,
            sizes: pattern.groups().iter().map(Vec::len).collect(),
        }
    }

    /// Whether the matrices have the shape of `pattern`'s groups.
    pub fn check(&self, pattern: &MoePattern) -> Result<(), MoeError> {
        let groups = pattern.groups();
        if self.matrices.len() != groups.len() {
            return Err(MoeError::MatrixCount {
                expected: groups.len(),
                got: self.matrices.len(),
            });
        }
        for (g, (m, ranks)) in self.matrices.iter().zip(groups).enumerate() {
            let n = ranks.len();
            if m.len() != n * n {
                return Err(MoeError::MatrixSize {
                    group: g,
                    ranks: n,
                    expected: n * n,
                    got: m.len(),
                });
            }
        }
        Ok(())
    }

    /// Group `g`'s matrix, row-major.
    pub fn matrix(&self, g: usize) -> &[u64] {
        &self.matrices[g]
    }

    /// All matrices, by group.
    pub fn matrices(&self) -> &[Vec<u64>] {
        &self.matrices
    }

    /// Bytes from rank `src` to rank `dst` of group `g`.
    pub fn get(&self, g: usize, src: usize, dst: usize) -> u64 {
        self.matrices[g][src * self.sizes[g] + dst]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moe::NicLayout;
    use crate::topology::generate::{leaf_spine, LeafSpine};
    use crate::topology::Topology;

    #[test]
    fn matrices_must_match_the_groups() {
        let t = Topology::from_spec(
            leaf_spine(&LeafSpine {
                hosts_per_leaf: 4,
                gpus_per_host: 1,
                nics_per_server: 2,
                ..Default::default()
            })
            .unwrap(),
        )
        .unwrap();
        let p = MoePattern::consecutive(&t, 4, NicLayout::Direct).unwrap();
        let e = StepBytes::new(&p, vec![vec![0; 16]]).unwrap_err();
        assert_eq!(
            e,
            MoeError::MatrixCount {
                expected: 2,
                got: 1
            }
        );
        let e = StepBytes::new(&p, vec![vec![0; 16], vec![0; 15]]).unwrap_err();
        assert_eq!(
            e,
            MoeError::MatrixSize {
                group: 1,
                ranks: 4,
                expected: 16,
                got: 15
            }
        );
        assert!(e.to_string().contains("4x4 = 16 entries, not 15"), "{e}");
        let s = StepBytes::from_fn(&p, |g, i, j| (100 * g + 10 * i + j) as u64);
        assert_eq!(s.get(1, 2, 3), 123);
        assert_eq!(s.get(1, 2, 2), 0, "the diagonal stays on the GPU");
        assert_eq!(StepBytes::new(&p, s.matrices().to_vec()).unwrap(), s);
    }
}
