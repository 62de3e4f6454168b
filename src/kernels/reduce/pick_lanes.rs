//! A run picked (amax / amin) in lanes: long contiguous runs as four
//! streams, contiguous floating runs through the AVX2 kernel
//! (avx2_pick.rs), the rest in portable lanes with the same layout.

use super::pairwise::{BLOCK, STREAMS};
use super::pick::{fold_picked, pick, pick_identity};
use crate::kernels::elem::Elem;
use crate::kernels::loops::{load_op, BUF};
use crate::kernels::ops::Max;
use std::mem::size_of;

/// The NaN-propagating maximum (MAX) or minimum of a run, in op math.
/// A contiguous run of at least [`STREAMS`] blocks is read as four
/// streams: its four equal parts picked in one pass ([`pick_runs_x4`]),
/// their results folded in order, then the rest; shorter runs are one
/// [`pick_one_run`]. Both the AVX2 and the portable lanes go through
/// this split, so they agree bit for bit.
///
/// # Safety
/// The run must address `n` readable elements (n >= 1).
#[inline(always)]
pub(super) unsafe fn pick_run<T: Elem, const MAX: bool>(
    p: *const u8,
    stride: isize,
    n: usize,
) -> T::Op
where
    T::Op: Max,
{
    let item = size_of::<T>() as isize;
    if stride != item || n < STREAMS * BLOCK {
        // SAFETY: the caller's run.
        return unsafe { pick_one_run::<T, MAX>(p, stride, n) };
    }
    let part = n / STREAMS;
    // SAFETY: the four parts and the rest lie inside the caller's run.
    unsafe {
        let q = [0, 1, 2, 3].map(|k| p.offset((k * part) as isize * item));
        let total = fold_picked::<T::Op, MAX>(&pick_runs_x4::<T, MAX>(q, part));
        if STREAMS * part == n {
            return total;
        }
        let rest = p.offset((STREAMS * part) as isize * item);
        pick::<T::Op, MAX>(
            total,
            pick_one_run::<T, MAX>(rest, item, n - STREAMS * part),
        )
    }
}

/// Four contiguous runs of `n` elements, each picked as [`pick_one_run`]
/// picks it, read in one pass where AVX2 has a kernel.
///
/// # Safety
/// Each run must address `n` readable contiguous elements (n >= 1).
#[inline(always)]
pub(super) unsafe fn pick_runs_x4<T: Elem, const MAX: bool>(
    q: [*const u8; 4],
    n: usize,
) -> [T::Op; 4]
where
    T::Op: Max,
{
    #[cfg(target_arch = "x86_64")]
    // SAFETY: four contiguous runs of n readable elements (the caller's).
    if let Some(v) = unsafe { super::avx2_pick::runs_x4::<T, MAX>(q, n) } {
        return v;
    }
    let item = size_of::<T>() as isize;
    // SAFETY: each run's n readable elements.
    q.map(|p| unsafe { pick_one_run::<T, MAX>(p, item, n) })
}

/// One run picked in lanes: [`lanes_pick`] with as many lanes as two AVX
/// registers hold (16 of f32, 8 of f64), the AVX2 kernel's layout
/// (avx2_pick.rs), which serves contiguous floating runs.
///
/// # Safety
/// The run must address `n` readable elements (n >= 1).
#[inline(always)]
unsafe fn pick_one_run<T: Elem, const MAX: bool>(p: *const u8, stride: isize, n: usize) -> T::Op
where
    T::Op: Max,
{
    #[cfg(target_arch = "x86_64")]
    if stride == size_of::<T>() as isize {
        // SAFETY: a contiguous run of n readable elements (the caller's
        // guarantee), run's requirement.
        if let Some(v) = unsafe { super::avx2_pick::run::<T, MAX>(p, n) } {
            return v;
        }
    }
    // SAFETY: the caller's run, both arms' requirement.
    unsafe {
        if size_of::<T::Op>() == 8 {
            lanes_pick::<T, MAX, 8>(p, stride, n)
        } else {
            lanes_pick::<T, MAX, 16>(p, stride, n)
        }
    }
}

/// Folds a run into N lanes of op math values with [`pick`] (element i
/// into lane i % N), then the lanes in order into one value, starting
/// from the identity ([`fold_picked`]).
///
/// # Safety
/// The run must address `n` readable elements.
#[inline(always)]
unsafe fn lanes_pick<T: Elem, const MAX: bool, const N: usize>(
    p: *const u8,
    stride: isize,
    n: usize,
) -> T::Op
where
    T::Op: Max,
{
    let mut acc = [pick_identity::<T::Op, MAX>(); N];
    let mut buf = [T::Op::default(); BUF];
    let mut i = 0;
    while i < n {
        let m = BUF.min(n - i);
        // SAFETY: elements i..i+m of the run.
        unsafe { load_op::<T>(&mut buf[..m], p.offset(i as isize * stride), stride) };
        // BUF is a multiple of N, so element i + k goes to lane k % N.
        let mut chunks = buf[..m].chunks_exact(N);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a = pick::<T::Op, MAX>(*a, *v);
            }
        }
        for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
            *a = pick::<T::Op, MAX>(*a, *v);
        }
        i += m;
    }
    fold_picked::<T::Op, MAX>(&acc)
}
