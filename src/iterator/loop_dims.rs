//! The iterator's own small vectors of dims (its loop shape, permutation
//! and every operand's byte strides): inline up to [`INLINE`] values,
//! where every operation is a plain array access, and on the heap beyond.
//!
//! A build touches these some hundred times; SmallVec's general code
//! (where is my buffer, will it grow, drop each element) was a fifth of
//! a broadcast build's instructions (benches/PERF_RESULTS.md).

use std::ops::{Deref, DerefMut};

/// How many dims are kept inline.
pub(crate) const INLINE: usize = 8;

/// A vector of i64 dims: `inline[..len]` while `len <= INLINE`, else all
/// of `heap` (whose length is then `len`).
#[derive(Clone, Default)]
pub(crate) struct LoopDims {
    len: usize,
    inline: [i64; INLINE],
    heap: Vec<i64>,
}

impl LoopDims {
    pub(crate) fn new() -> LoopDims {
        LoopDims::default()
    }

    /// `n` copies of `value`.
    pub(crate) fn from_elem(value: i64, n: usize) -> LoopDims {
        let mut d = LoopDims::new();
        d.resize(n, value);
        d
    }

    /// A copy of `values`.
    pub(crate) fn from_slice(values: &[i64]) -> LoopDims {
        let mut d = LoopDims::new();
        d.extend_from_slice(values);
        d
    }

    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.heap.clear();
    }

    #[inline]
    pub(crate) fn push(&mut self, value: i64) {
        if self.len < INLINE {
            self.inline[self.len] = value;
            self.len += 1;
        } else {
            self.push_spilled(value);
        }
    }

    /// Beyond the inline values: moves them to the heap on the first one.
    #[cold]
    #[inline(never)]
    fn push_spilled(&mut self, value: i64) {
        if self.len == INLINE {
            self.heap.clear();
            self.heap.extend_from_slice(&self.inline);
        }
        self.heap.push(value);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn extend_from_slice(&mut self, values: &[i64]) {
        let end = self.len + values.len();
        if end <= INLINE {
            self.inline[self.len..end].copy_from_slice(values);
            self.len = end;
        } else {
            for &v in values {
                self.push(v);
            }
        }
    }

    /// Makes the length `n`, new values being `value`.
    #[inline]
    pub(crate) fn resize(&mut self, n: usize, value: i64) {
        if n <= self.len {
            self.truncate(n);
        } else if n <= INLINE {
            self.inline[self.len..n].fill(value);
            self.len = n;
        } else {
            while self.len < n {
                self.push(value);
            }
        }
    }

    #[inline]
    pub(crate) fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        if self.len > INLINE {
            if n <= INLINE {
                self.inline[..n].copy_from_slice(&self.heap[..n]);
                self.heap.clear();
            } else {
                self.heap.truncate(n);
            }
        }
        self.len = n;
    }

    /// Puts `k` ones before the values (a shape gaining leading dims).
    pub(crate) fn prepend_ones(&mut self, k: usize) {
        let mut out = LoopDims::from_elem(1, k);
        out.extend_from_slice(self);
        *self = out;
    }
}

impl Deref for LoopDims {
    type Target = [i64];

    #[inline]
    fn deref(&self) -> &[i64] {
        if self.len <= INLINE {
            &self.inline[..self.len]
        } else {
            &self.heap
        }
    }
}

impl DerefMut for LoopDims {
    #[inline]
    fn deref_mut(&mut self) -> &mut [i64] {
        if self.len <= INLINE {
            &mut self.inline[..self.len]
        } else {
            &mut self.heap
        }
    }
}

impl Extend<i64> for LoopDims {
    #[inline]
    fn extend<I: IntoIterator<Item = i64>>(&mut self, values: I) {
        for v in values {
            self.push(v);
        }
    }
}

impl<'a> IntoIterator for &'a LoopDims {
    type Item = &'a i64;
    type IntoIter = std::slice::Iter<'a, i64>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Equal values (what lies past `len` inline does not count).
impl PartialEq for LoopDims {
    fn eq(&self, other: &LoopDims) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for LoopDims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation against Vec's, across the inline / heap boundary.
    #[test]
    fn matches_vec_across_the_inline_limit() {
        let mut d = LoopDims::new();
        let mut v: Vec<i64> = Vec::new();
        let mut x = 7i64;
        for step in 0..4000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) as usize;
            match r % 7 {
                0 | 1 => {
                    d.push(r as i64);
                    v.push(r as i64);
                }
                2 => {
                    let n = r % 20;
                    d.truncate(n);
                    v.truncate(n);
                }
                3 => {
                    let n = r % 20;
                    d.resize(n, -1);
                    v.resize(n, -1);
                }
                4 => {
                    let s: Vec<i64> = (0..(r % 6) as i64).collect();
                    d.extend_from_slice(&s);
                    v.extend_from_slice(&s);
                }
                5 => {
                    let k = r % 4;
                    d.prepend_ones(k);
                    v.splice(0..0, std::iter::repeat_n(1, k));
                }
                _ => {
                    if step % 50 == 0 {
                        d.clear();
                        v.clear();
                    } else if let Some(first) = d.first_mut() {
                        *first += 1;
                        v[0] += 1;
                    }
                }
            }
            assert_eq!(&d[..], &v[..], "step {step}");
            let c = d.clone();
            assert_eq!(&c[..], &v[..], "clone at step {step}");
            assert_eq!(c, d);
        }
        assert_eq!(&LoopDims::from_elem(3, 11)[..], &[3; 11][..]);
        assert_eq!(&LoopDims::from_slice(&[1, 2, 3])[..], &[1, 2, 3][..]);
    }
}
