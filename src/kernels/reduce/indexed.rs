//! max and min along one dim with the index of what they pick (c10's
//! `max(dim)` / `min(dim)`): the first occurrence of the extreme value,
//! and where a NaN is reduced the value NaN with the first NaN's index.
//!
//! Three loops, one answer. A contiguous run per output (the dim is the
//! innermost) is read twice: its extreme by amax / amin's lanes (AVX2
//! where there is a kernel; four runs in one pass where they are
//! shorter than pick_run's own four streams), then the first element
//! equal to it (or the first NaN). A dim whose outputs lie side by side
//! in memory (a dim other than the innermost, the innermost contiguous)
//! is walked row by row, a tile of outputs updated per row, so memory is
//! read in order rather than down columns. Anything else walks each
//! output's run. Each output sees its elements in the same order in all
//! three, so the value and the index are the same. The search and the
//! tile have AVX2 kernels for the floating types (avx2_indexed.rs).

use super::pairwise::{BLOCK, STREAMS};
use super::pick::replaces;
use super::pick_lanes::{pick_run, pick_runs_x4};
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
    let last = sizes.len().saturating_sub(1);
    let (row, rows_side_by_side) = (
        sizes.get(last).copied().unwrap_or(1),
        a.ndim() >= 2 && d != last && strides[last] == 1 && sizes[last] > 1,
    );
    let contiguous_runs = a.ndim() >= 1 && d == last && step == item;
    // The first element of output o's run: `len` elements `step` bytes
    // apart from element `off` of `a`, inside its storage (the offsets
    // follow a's sizes and strides, row-major over the kept sizes).
    let run_of = |o: i64| {
        let (mut rest, mut off) = (o, 0i64);
        for k in (0..sizes.len()).rev() {
            off += rest % sizes[k] * strides[k];
            rest /= sizes[k];
        }
        (in0 as *const u8).wrapping_offset(off as isize * item)
    };
    // Contiguous runs shorter than pick_run's four streams: four runs
    // read in one pass (pick_runs_x4: each the bits pick_run gives).
    let runs_x4 = contiguous_runs && (len as usize) < STREAMS * BLOCK;
    parallel::parallel_for(0, n_out, grain, |b, e| {
        let mut o = b;
        while o < e {
            let run = run_of(o);
            if runs_x4 && e - o >= 4 {
                let q = [run, run_of(o + 1), run_of(o + 2), run_of(o + 3)];
                // SAFETY: four contiguous runs of len >= 1 elements.
                let m = unsafe { pick_runs_x4::<T, MAX>(q, len as usize) };
                for k in 0..4 {
                    // SAFETY: run k's len elements; output o + k < e,
                    // inside both fresh contiguous outputs, which only
                    // this task writes there.
                    unsafe {
                        let (best, at) = first_at::<T>(q[k], len as usize, m[k]);
                        st(v0 as *mut u8, o as usize + k, item, best);
                        st(i0 as *mut u8, o as usize + k, 8, at);
                    }
                }
                o += 4;
                continue;
            }
            if rows_side_by_side {
                // Outputs o.. up to the end of their row of the last dim
                // are contiguous input elements, for every k.
                let w = (e - o).min(row - o % row).min(TILE as i64) as usize;
                // SAFETY: outputs o..o + w lie in one row of the last dim
                // (w <= row - o % row), so their runs start at w adjacent
                // elements, each run `len` elements `step` bytes apart;
                // only this task writes outputs o..o + w.
                unsafe { tile::<T, MAX>(run, step, len, w, v0, i0, o as usize) };
                o += w as i64;
                continue;
            }
            let (best, at) = if contiguous_runs {
                // SAFETY: a contiguous run of len >= 1 elements.
                unsafe { first_extreme::<T, MAX>(run, len as usize) }
            } else {
                // SAFETY: the run of len >= 1 elements, step bytes apart.
                unsafe { walk::<T, MAX>(run, step, len) }
            };
            // SAFETY: o < n_out: inside both fresh contiguous outputs,
            // which only this task writes at index o.
            unsafe {
                st(v0 as *mut u8, o as usize, item, best);
                st(i0 as *mut u8, o as usize, 8, at);
            }
            o += 1;
        }
    });
    Ok(())
}

/// Outputs a tile updates per row (a page of f32 values).
const TILE: usize = 1024;

/// The pick of a run of `len` elements `step` bytes apart, one element
/// after another: (value, index).
///
/// # Safety
/// `len >= 1` readable elements at `run`, `step` bytes apart.
#[inline(always)]
unsafe fn walk<T: Elem, const MAX: bool>(run: *const u8, step: isize, len: i64) -> (T, i64)
where
    T::Op: Max + PartialEq,
{
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
    (best, at)
}

/// The pick of a contiguous run of `n` elements in two reads: the
/// extreme by amax / amin's lanes, then the first element equal to it
/// (the first NaN where it is NaN): [`walk`]'s answer, since that keeps
/// the first of equal elements and stops moving at the first NaN.
///
/// # Safety
/// `n >= 1` readable contiguous elements at `run`.
#[inline(always)]
unsafe fn first_extreme<T: Elem, const MAX: bool>(run: *const u8, n: usize) -> (T, i64)
where
    T::Op: Max + PartialEq,
{
    let item = size_of::<T>() as isize;
    // SAFETY: the caller's run.
    let m = unsafe { pick_run::<T, MAX>(run, item, n) };
    // SAFETY: the caller's run.
    unsafe { first_at::<T>(run, n, m) }
}

/// The first of `n` contiguous elements at `run` equal to `m` (the first
/// NaN where `m` is NaN; element 0 if none is): (value, index).
///
/// # Safety
/// `n >= 1` readable contiguous elements at `run`.
#[inline(always)]
unsafe fn first_at<T: Elem>(run: *const u8, n: usize, m: T::Op) -> (T, i64)
where
    T::Op: PartialEq,
{
    let item = size_of::<T>() as isize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's run.
    if let Some(at) = unsafe { super::avx2_indexed::first_index::<T>(run, n, m) } {
        // SAFETY: at < n.
        return (unsafe { ld::<T>(run, at, item) }, at as i64);
    }
    #[allow(clippy::eq_op)] // x != x: NaN, for every op math type.
    let nan = m != m;
    let at = (0..n)
        .position(|k| {
            // SAFETY: k < n, inside the run.
            let x = unsafe { ld::<T>(run, k, item) }.to_op();
            #[allow(clippy::eq_op)]
            let x_nan = x != x;
            if nan {
                x_nan
            } else {
                x == m
            }
        })
        .unwrap_or(0);
    // SAFETY: at < n (position found it; 0 otherwise, n >= 1).
    (unsafe { ld::<T>(run, at, item) }, at as i64)
}

/// The picks of the `w` outputs starting at output `o` (of the outputs at
/// `v0` and `i0`), whose runs start at `w` adjacent elements from `run`,
/// `len` elements each `step` bytes apart: row by row, each output
/// updated as [`walk`] updates it.
///
/// # Safety
/// Row k (k < len) of the tile: `w <= TILE` readable contiguous elements
/// at `run + k * step`; outputs o..o + w inside the fresh contiguous
/// values (T) and indices (i64), written by this caller alone.
#[inline(always)]
unsafe fn tile<T: Elem, const MAX: bool>(
    run: *const u8,
    step: isize,
    len: i64,
    w: usize,
    v0: usize,
    i0: usize,
    o: usize,
) where
    T::Op: Max + PartialEq,
{
    let item = size_of::<T>() as isize;
    #[cfg(target_arch = "x86_64")]
    {
        let mut at = [0i32; TILE];
        // SAFETY: the caller's tile (w <= TILE rows of w values).
        if unsafe { super::avx2_indexed::tile::<T, MAX, TILE>(run, step, len, w, &mut at) } {
            for (j, &k) in at.iter().enumerate().take(w) {
                // SAFETY: element j < w of row k < len; outputs o + j
                // < o + w, the caller's.
                unsafe {
                    let row = run.wrapping_offset(k as isize * step);
                    st(v0 as *mut u8, o + j, item, ld::<T>(row, j, item));
                    st(i0 as *mut u8, o + j, 8, i64::from(k));
                }
            }
            return;
        }
    }
    let mut best = [T::default(); TILE];
    for (j, b) in best.iter_mut().enumerate().take(w) {
        // SAFETY: element j < w of row 0 of the tile.
        *b = unsafe { ld::<T>(run, j, item) };
    }
    let mut at = [0i64; TILE];
    for k in 1..len {
        let row = run.wrapping_offset(k as isize * step);
        for j in 0..w {
            // SAFETY: element j < w of row k < len.
            let x = unsafe { ld::<T>(row, j, item) };
            if replaces::<T::Op, MAX>(best[j].to_op(), x.to_op()) {
                best[j] = x;
                at[j] = k;
            }
        }
    }
    for j in 0..w {
        // SAFETY: outputs o + j < o + w, the caller's.
        unsafe {
            st(v0 as *mut u8, o + j, item, best[j]);
            st(i0 as *mut u8, o + j, 8, at[j]);
        }
    }
}
