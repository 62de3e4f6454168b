//! max and min along one dim with the index of what they pick (c10's
//! `max(dim)` / `min(dim)`): the first occurrence of the extreme value,
//! and where a NaN is reduced the value NaN with the first NaN's index.

use super::pick::pick;
use super::{check_cpu, finish_shape};
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::DEFAULT_GRAIN_SIZE as GRAIN;
use crate::kernels::dispatch::dispatch;
use crate::kernels::elem::{Bool, Elem};
use crate::kernels::loops::{ld, st};
use crate::kernels::ops::Max;
use crate::parallel;
use crate::tensor::{shape::wrap_dim, Dims, Tensor};
use std::mem::size_of;

/// The values and Long indices of the maximum (MAX) or minimum of `a`
/// along `dim`.
pub(super) fn along<const MAX: bool>(
    op: &str,
    a: &Tensor,
    dim: i64,
    keepdim: bool,
) -> Result<(Tensor, Tensor)> {
    check_cpu(op, a)?;
    let nd = a.ndim();
    let d = wrap_dim(dim, nd)?;
    let len = if nd == 0 { 1 } else { a.sizes()[d] };
    crate::ensure!(
        len != 0,
        Shape,
        "{op} along dim {d}, which has size 0: the {} of an empty set is undefined (input \
         sizes {:?})",
        if MAX { "maximum" } else { "minimum" },
        a.sizes()
    );
    let mut keep: Dims = a.sizes().into();
    let mut mask = vec![false; nd];
    if nd > 0 {
        keep[d] = 1;
        mask[d] = true;
    }
    let values = Tensor::empty(&keep, a.dtype(), a.device())?;
    let indices = Tensor::empty(&keep, DType::Long, a.device())?;
    if a.dtype() == DType::Bool {
        fill::<Bool, MAX>(a, d, len, &values, &indices)?;
    } else {
        dispatch!(real, a.dtype(), op, T => fill::<T, MAX>(a, d, len, &values, &indices))?;
    }
    Ok((
        finish_shape(values, &mask, keepdim)?,
        finish_shape(indices, &mask, keepdim)?,
    ))
}

/// Whether `o` replaces `best` (which came earlier): never after a NaN,
/// else where [`pick`] takes it (beyond `best`, or NaN). Ties keep the
/// earlier index.
#[inline(always)]
fn replaces<O: Max + PartialEq, const MAX: bool>(best: O, o: O) -> bool {
    #[allow(clippy::eq_op)] // x != x: NaN, for every op math type.
    let (best_nan, o_nan) = (best != best, o != o);
    !best_nan && (o_nan || pick::<O, MAX>(best, o) != best)
}

/// Writes the picks of `a` along dim `d` (`len` elements) into the
/// contiguous keepdim-shaped `values` and `indices`.
fn fill<T: Elem, const MAX: bool>(
    a: &Tensor,
    d: usize,
    len: i64,
    values: &Tensor,
    indices: &Tensor,
) -> Result<()>
where
    T::Op: Max + PartialEq,
{
    let n_out = values.numel();
    if n_out == 0 {
        return Ok(());
    }
    let item = size_of::<T>() as isize;
    let in0 = a.data_in_storage()? as usize;
    let (v0, i0) = (
        values.data_in_storage()? as usize,
        indices.data_in_storage()? as usize,
    );
    let sizes: Dims = values.sizes().into();
    let strides: Dims = a.strides().into();
    let step = if a.ndim() == 0 {
        0
    } else {
        strides[d] as isize * item
    };
    let grain = (GRAIN / len).max(1);
    parallel::parallel_for(0, n_out, grain, |b, e| {
        for o in b..e {
            // The input offset of output o (row-major over the kept sizes).
            let (mut rest, mut off) = (o, 0i64);
            for k in (0..sizes.len()).rev() {
                off += rest % sizes[k] * strides[k];
                rest /= sizes[k];
            }
            // SAFETY: output o's run: `len` elements `step` bytes apart
            // from element `off` of `a`, inside its storage (the offsets
            // follow a's sizes and strides).
            let run = unsafe { (in0 as *const u8).offset(off as isize * item) };
            // SAFETY: element 0 of the run (len >= 1).
            let mut best = unsafe { ld::<T>(run, 0, step) };
            let mut at = 0i64;
            for k in 1..len {
                // SAFETY: k < len, inside the run.
                let x = unsafe { ld::<T>(run, k as usize, step) };
                if replaces::<T::Op, MAX>(best.to_op(), x.to_op()) {
                    best = x;
                    at = k;
                }
            }
            // SAFETY: o < n_out: inside both fresh contiguous outputs,
            // which only this task writes at index o.
            unsafe {
                st(v0 as *mut u8, o as usize, item, best);
                st(i0 as *mut u8, o as usize, 8, at);
            }
        }
    });
    Ok(())
}
