//! Dimension bookkeeping of the build: byte strides, reordering by
//! strides, permutation, the strides of allocated outputs, coalescing.

use super::TensorIterator;
use crate::tensor::Dims;
use std::cmp::Ordering;

impl TensorIterator {
    /// Byte strides of every defined operand not being resized, broadcast
    /// dims (size 1 against a larger loop size) getting stride 0. Stored
    /// innermost first: the reverse of the tensors' dim order, the order
    /// reorder_dimensions starts from (and most often keeps).
    pub(crate) fn compute_strides(&mut self) {
        let shape = &self.shape[..];
        let ndim = shape.len();
        for op in self.operands.iter_mut() {
            let Some(t) = op.tensor.as_ref() else {
                continue;
            };
            if op.will_resize {
                continue;
            }
            let original_shape: &[i64] = if self.shape_is_static {
                shape
            } else {
                t.sizes()
            };
            let item = t.itemsize() as i64;
            let offset = ndim - original_shape.len();
            // Written in place: building a SmallVec and moving it in costs
            // a store-forwarding stall per operand.
            let strides = &mut op.stride_bytes;
            strides.clear();
            let dims = original_shape.iter().zip(t.strides()).zip(&shape[offset..]);
            strides.extend(dims.rev().map(|((&size, &stride), &loop_size)| {
                if size == 1 && loop_size != 1 {
                    0
                } else {
                    stride * item
                }
            }));
            strides.extend((0..offset).map(|_| 0));
        }
    }

    /// Orders loop dims by increasing stride (innermost first), looking at
    /// operands in order (outputs first, skipping outputs being resized):
    /// the first operand whose strides for two dims are both non-zero and
    /// differ decides; equal strides break the tie by size. Reductions move
    /// reduced dims (output stride 0) to the front.
    pub(crate) fn reorder_dimensions(&mut self) {
        let ndim = self.shape.len();
        // Start from the reversed tensor order: iterator dim 0 = last tensor
        // dim. Written in place (moving a fresh SmallVec in stalls).
        let perm = &mut self.perm;
        perm.clear();
        perm.extend((0..ndim).rev().map(|d| d as i64));
        if ndim > 1 && !self.enforce_linear_iteration {
            let shape = &self.shape[..];
            for i in 1..ndim {
                let mut dim1 = i;
                for dim0 in (0..i).rev() {
                    let (d0, d1) = (perm[dim0] as usize, perm[dim1] as usize);
                    match compare_dims(&self.operands, self.is_reduction, shape, d0, d1) {
                        Ordering::Greater => {
                            perm.swap(dim0, dim1);
                            dim1 = dim0;
                        }
                        Ordering::Less => break,
                        Ordering::Equal => {}
                    }
                }
            }
        }
        self.permute_dimensions();
    }

    /// Applies `perm` to the shape (in tensor order) and every operand's
    /// strides (stored in reversed tensor order, see compute_strides).
    fn permute_dimensions(&mut self) {
        let perm = &self.perm[..];
        let ndim = perm.len();
        if perm
            .iter()
            .enumerate()
            .all(|(i, &p)| p as usize == ndim - 1 - i)
        {
            // The strides are already in this order.
            self.shape.reverse();
            return;
        }
        /// v[i] = old v[source(perm[i])].
        fn reorder(v: &mut [i64], perm: &[i64], source: impl Fn(usize) -> usize) {
            let n = v.len();
            if n <= 8 {
                // A fixed-length copy: copying n values would be a memcpy
                // call, slower than the work for so few.
                let old: [i64; 8] = std::array::from_fn(|i| v.get(i).copied().unwrap_or(0));
                for (dst, &p) in v.iter_mut().zip(perm) {
                    *dst = old[source(p as usize)];
                }
            } else {
                let old = Dims::from_slice(v);
                for (dst, &p) in v.iter_mut().zip(perm) {
                    *dst = old[source(p as usize)];
                }
            }
        }
        reorder(&mut self.shape, perm, |d| d);
        for op in self.operands.iter_mut() {
            if !op.stride_bytes.is_empty() {
                reorder(&mut op.stride_bytes, perm, |d| ndim - 1 - d);
            }
        }
    }

    /// Merges adjacent loop dims when one has size 1, or when every operand
    /// steps through them as one (size0 * stride0 == stride1).
    pub(crate) fn coalesce_dimensions(&mut self) {
        let ndim = self.shape.len();
        if ndim <= 1 {
            return;
        }
        let shape = &mut self.shape[..];
        let operands = &mut self.operands[..];
        let mut prev = 0usize;
        for dim in 1..ndim {
            let (s0, s1) = (shape[prev], shape[dim]);
            let can = s0 == 1
                || s1 == 1
                || operands.iter().all(|op| {
                    let s = &op.stride_bytes[..];
                    s0 * s[prev] == s[dim]
                });
            if can {
                if s0 == 1 {
                    replace_stride(operands, prev, dim);
                }
                shape[prev] *= s1;
            } else {
                prev += 1;
                if prev != dim {
                    replace_stride(operands, prev, dim);
                    shape[prev] = s1;
                }
            }
        }
        self.shape.truncate(prev + 1);
        for op in self.operands.iter_mut() {
            op.stride_bytes.truncate(prev + 1);
        }
        self.has_coalesced_dimensions = true;
    }
}

/// Greater: dim0 should come after (outside) dim1; Less: before; Equal:
/// no operand decides. Operands without strides or being resized do not
/// take part; in a reduction, outputs put reduced dims first. Dims are
/// tensor dims; strides are still stored in reversed tensor order.
fn compare_dims(
    operands: &[super::Operand],
    is_reduction: bool,
    shape: &[i64],
    dim0: usize,
    dim1: usize,
) -> Ordering {
    for op in operands {
        let strides = &op.stride_bytes[..];
        if strides.is_empty() || op.will_resize {
            continue;
        }
        let last = strides.len() - 1;
        let (s0, s1) = (strides[last - dim0], strides[last - dim1]);
        if is_reduction && op.is_output && (s0 == 0) != (s1 == 0) {
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
                if shape[dim0] > shape[dim1] {
                    return Ordering::Greater;
                }
            }
            unequal => return unequal,
        }
    }
    Ordering::Equal
}

/// Every operand's stride at `dim0` becomes its stride at `dim1`.
fn replace_stride(operands: &mut [super::Operand], dim0: usize, dim1: usize) {
    for op in operands {
        let s = &mut op.stride_bytes[..];
        s[dim0] = s[dim1];
    }
}
