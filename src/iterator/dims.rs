//! Dimension bookkeeping of the build: byte strides, reordering by
//! strides, permutation, the strides of allocated outputs, coalescing.

use super::TensorIterator;
use crate::tensor::Dims;
use std::cmp::Ordering;

impl TensorIterator {
    /// Byte strides of every defined operand not being resized, broadcast
    /// dims (size 1 against a larger loop size) getting stride 0. Still in
    /// the tensors' dim order (outermost first).
    pub(crate) fn compute_strides(&mut self) {
        let static_shape = self.shape_is_static;
        let ndim = self.shape.len();
        for op in self.operands.iter_mut() {
            let Some(t) = op.tensor.as_ref() else {
                continue;
            };
            if op.will_resize {
                continue;
            }
            let original_shape: &[i64] = if static_shape { &self.shape } else { t.sizes() };
            let original_strides = t.strides();
            let item = t.itemsize() as i64;
            let offset = ndim - original_shape.len();
            op.stride_bytes = smallvec::SmallVec::from_elem(0, ndim);
            for (i, &size) in original_shape.iter().enumerate() {
                op.stride_bytes[offset + i] = if size == 1 && self.shape[offset + i] != 1 {
                    0
                } else {
                    original_strides[i] * item
                };
            }
        }
    }

    /// Orders loop dims by increasing stride (innermost first), looking at
    /// operands in order (outputs first, skipping outputs being resized):
    /// the first operand whose strides for two dims are both non-zero and
    /// differ decides; equal strides break the tie by size. Reductions move
    /// reduced dims (output stride 0) to the front.
    pub(crate) fn reorder_dimensions(&mut self) {
        let ndim = self.shape.len();
        // Start from the reversed tensor order: iterator dim 0 = last tensor dim.
        self.perm = Dims::from_elem(0, ndim);
        for (i, p) in self.perm.iter_mut().enumerate() {
            *p = (ndim - 1 - i) as i64;
        }
        if ndim <= 1 || self.enforce_linear_iteration {
            self.permute_dimensions();
            return;
        }
        for i in 1..ndim {
            let mut dim1 = i;
            for dim0 in (0..i).rev() {
                match self.compare_dims(self.perm[dim0] as usize, self.perm[dim1] as usize) {
                    Ordering::Greater => {
                        self.perm.swap(dim0, dim1);
                        dim1 = dim0;
                    }
                    Ordering::Less => break,
                    Ordering::Equal => {}
                }
            }
        }
        self.permute_dimensions();
    }

    /// Greater: dim0 should come after (outside) dim1; Less: before;
    /// Equal: no operand decides.
    fn compare_dims(&self, dim0: usize, dim1: usize) -> Ordering {
        for op in &self.operands {
            if op.stride_bytes.is_empty() || op.will_resize {
                continue;
            }
            let (s0, s1) = (op.stride_bytes[dim0], op.stride_bytes[dim1]);
            if self.is_reduction && op.is_output && (s0 == 0) != (s1 == 0) {
                return if s1 == 0 {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
            }
            if s0 == 0 || s1 == 0 {
                continue;
            }
            match s0.cmp(&s1) {
                Ordering::Equal => {
                    if self.shape[dim0] > self.shape[dim1] {
                        return Ordering::Greater;
                    }
                }
                unequal => return unequal,
            }
        }
        Ordering::Equal
    }

    /// Applies `perm` to the shape and every operand's strides.
    fn permute_dimensions(&mut self) {
        fn reorder(v: &mut Dims, perm: &[i64]) {
            let n = v.len();
            if n <= 8 {
                let mut old = [0i64; 8];
                old[..n].copy_from_slice(v);
                for (dst, &p) in v.iter_mut().zip(perm) {
                    *dst = old[p as usize];
                }
            } else {
                let old = Dims::from_slice(v);
                for (dst, &p) in v.iter_mut().zip(perm) {
                    *dst = old[p as usize];
                }
            }
        }
        let perm = &self.perm;
        reorder(&mut self.shape, perm);
        for op in self.operands.iter_mut() {
            if !op.stride_bytes.is_empty() {
                reorder(&mut op.stride_bytes, perm);
            }
        }
    }

    /// Contiguous byte strides in loop order for an element of `item`
    /// bytes: what an allocated output gets.
    pub(crate) fn compatible_stride(&self, item: i64) -> Dims {
        let mut out = Dims::from_elem(0, self.shape.len());
        let mut next = item;
        for (o, &s) in out.iter_mut().zip(&self.shape) {
            *o = next;
            next *= s;
        }
        out
    }

    /// Loop-order values back in tensor dim order (before coalescing).
    pub(crate) fn invert_perm(&self, input: &[i64]) -> Dims {
        debug_assert!(!self.has_coalesced_dimensions);
        let mut res = Dims::from_slice(input);
        for (dim, &p) in self.perm.iter().enumerate() {
            res[p as usize] = input[dim];
        }
        res
    }

    /// Merges adjacent loop dims when one has size 1, or when every operand
    /// steps through them as one (size0 * stride0 == stride1).
    pub(crate) fn coalesce_dimensions(&mut self) {
        let ndim = self.shape.len();
        if ndim <= 1 {
            return;
        }
        let mut prev = 0usize;
        for dim in 1..ndim {
            let (s0, s1) = (self.shape[prev], self.shape[dim]);
            let can = s0 == 1
                || s1 == 1
                || self
                    .operands
                    .iter()
                    .all(|op| s0 * op.stride_bytes[prev] == op.stride_bytes[dim]);
            if can {
                if s0 == 1 {
                    self.replace_stride(prev, dim);
                }
                self.shape[prev] *= s1;
            } else {
                prev += 1;
                if prev != dim {
                    self.replace_stride(prev, dim);
                    self.shape[prev] = s1;
                }
            }
        }
        self.shape.truncate(prev + 1);
        for op in self.operands.iter_mut() {
            op.stride_bytes.truncate(prev + 1);
        }
        self.has_coalesced_dimensions = true;
    }

    fn replace_stride(&mut self, dim0: usize, dim1: usize) {
        for op in self.operands.iter_mut() {
            op.stride_bytes[dim0] = op.stride_bytes[dim1];
        }
    }
}
