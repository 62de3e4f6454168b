//! A run folded as a cascade: blocks in independent SIMD lanes, block
//! results combined as a balanced tree, long runs read as four streams.

pub(super) use super::reducer::Reducer;
use super::reducers::{pick, pick_identity};
use crate::kernels::elem::Elem;
use crate::kernels::loops::{ld, load_op, widens, BUF};
use crate::kernels::ops::Max;
use std::mem::size_of;

/// Elements summed by one set of lanes before the pairwise tree combines
/// blocks.
pub(super) const BLOCK: usize = 4096;

/// A pairwise (cascade) reduction of a run: blocks of BLOCK elements are
/// folded in independent lanes, and block results are combined as a
/// balanced binary tree ([`Cascade`]).
///
/// A long contiguous run is read as [`STREAMS`] streams at once: it is
/// cut into that many equal parts of whole blocks, each with its own
/// cascade, and block k of every part is folded in the same pass, so the
/// memory system fetches from four places at once (one stream is limited
/// by how many cache-line fills a core keeps in flight, so four streams
/// read faster; figures in benches/PERF_RESULTS.md, "src/kernels/reduce.rs").
/// The part totals combine as a tree, then the
/// rest of the run (less than STREAMS blocks) is added as one more
/// cascade. The result depends only on n, never on timing.
///
/// # Safety
/// The run must address `n` readable elements.
#[inline(always)]
pub(super) unsafe fn pairwise<R: Reducer>(
    p: *const u8,
    stride: isize,
    n: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc + Copy,
) -> R::Acc {
    let item = size_of::<R::In>() as isize;
    if stride != item || n < STREAMS * BLOCK {
        // SAFETY: pairwise's contract (a run of n readable elements) is
        // cascade's.
        return unsafe { cascade::<R>(p, stride, n, fold) };
    }
    let part = n / STREAMS / BLOCK * BLOCK;
    let mut parts = [Cascade::new(R::identity()); STREAMS];
    let mut start = 0;
    while start < part {
        // SAFETY: block `start` of each part lies inside the run.
        let sums = unsafe {
            let q = |k: usize| p.offset(((k * part + start) as isize) * item);
            blocks_x4::<R>([q(0), q(1), q(2), q(3)], BLOCK, fold)
        };
        for (c, v) in parts.iter_mut().zip(sums) {
            c.push(v, fold);
        }
        start += BLOCK;
    }
    let [a, b, c, d] = parts.map(|c| c.finish(R::identity(), fold));
    let total = fold(fold(a, b), fold(c, d));
    let done = STREAMS * part;
    if done == n {
        return total;
    }
    // SAFETY: the rest of the run.
    fold(total, unsafe {
        cascade::<R>(p.offset(done as isize * item), stride, n - done, fold)
    })
}

/// Contiguous runs of at least this many blocks are read as this many
/// streams (see [`pairwise`]).
pub(super) const STREAMS: usize = 4;

/// The cascade of one run, one block at a time.
///
/// # Safety
/// The run must address `n` readable elements.
#[inline(always)]
pub(super) unsafe fn cascade<R: Reducer>(
    p: *const u8,
    stride: isize,
    n: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc + Copy,
) -> R::Acc {
    let mut c = Cascade::new(R::identity());
    let mut start = 0;
    while start < n {
        let m = BLOCK.min(n - start);
        // SAFETY: elements start..start+m of the run.
        c.push(
            unsafe { block::<R>(p.offset(start as isize * stride), stride, m, fold) },
            fold,
        );
        start += m;
    }
    c.finish(R::identity(), fold)
}

/// One block folded in lanes (as many as fit four AVX registers).
///
/// # Safety
/// The block must address `m` readable elements.
#[inline(always)]
pub(super) unsafe fn block<R: Reducer>(
    q: *const u8,
    stride: isize,
    m: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc,
) -> R::Acc {
    // SAFETY: every arm reads the caller's block of m readable elements
    // with its stride, the lanes functions' one requirement.
    unsafe {
        match size_of::<R::Acc>() {
            4 => lanes::<R, 32>(q, stride, m, fold),
            8 => lanes::<R, 16>(q, stride, m, fold),
            _ => lanes::<R, 8>(q, stride, m, fold),
        }
    }
}

/// Four contiguous blocks of `m` elements, each folded exactly as
/// [`block`] folds it; floating sums read the four in one AVX2 pass.
///
/// # Safety
/// Each block must address `m` readable contiguous elements.
#[inline(always)]
pub(super) unsafe fn blocks_x4<R: Reducer>(
    q: [*const u8; 4],
    m: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc + Copy,
) -> [R::Acc; 4] {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: each of the four is a contiguous block of m readable
    // elements (the caller's guarantee), runs_x4's requirement.
    if let Some(s) = unsafe { super::avx2_sum::runs_x4::<R>(q, m) } {
        return s;
    }
    let item = size_of::<R::In>() as isize;
    // SAFETY: each of the four is a contiguous block of m readable
    // elements (the caller's guarantee), block's requirement.
    q.map(|p| unsafe { block::<R>(p, item, m, fold) })
}

/// Partial results of a pairwise reduction: block results are pushed in
/// order and combined as a balanced binary tree, iteratively, with a
/// stack of partial results tagged by tree level (so the loop inlines
/// into its SIMD twin).
#[derive(Clone, Copy)]
pub(super) struct Cascade<T> {
    stack: [(T, u32); CASCADE_LEVELS],
    depth: usize,
}

/// 2^40 blocks of 4096 elements: more than any tensor holds.
pub(super) const CASCADE_LEVELS: usize = 40;

impl<T: Copy> Cascade<T> {
    #[inline(always)]
    pub(super) fn new(zero: T) -> Self {
        Cascade {
            stack: [(zero, 0); CASCADE_LEVELS],
            depth: 0,
        }
    }

    #[inline(always)]
    pub(super) fn push(&mut self, mut acc: T, fold: impl Fn(T, T) -> T) {
        let mut level = 0;
        while self.depth > 0 && self.stack[self.depth - 1].1 == level {
            self.depth -= 1;
            acc = fold(self.stack[self.depth].0, acc);
            level += 1;
        }
        self.stack[self.depth] = (acc, level);
        self.depth += 1;
    }

    #[inline(always)]
    pub(super) fn finish(mut self, zero: T, fold: impl Fn(T, T) -> T) -> T {
        let mut total = zero;
        while self.depth > 0 {
            self.depth -= 1;
            total = fold(self.stack[self.depth].0, total);
        }
        total
    }
}

/// Folds a run into N lanes (element i into lane i % N, the last n % N
/// into lane 0), then the lanes into one value as a tree.
///
/// # Safety
/// The run must address `n` readable elements.
#[inline(always)]
pub(super) unsafe fn lanes<R: Reducer, const N: usize>(
    p: *const u8,
    stride: isize,
    n: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc,
) -> R::Acc {
    let item = size_of::<R::In>() as isize;
    #[cfg(target_arch = "x86_64")]
    if stride == item {
        // SAFETY: a contiguous run of n readable elements (the caller's
        // guarantee), run's requirement.
        if let Some(s) = unsafe { super::avx2_sum::run::<R, N>(p, n) } {
            return s;
        }
    }
    let mut acc = [R::identity(); N];
    if widens::<R::In>() && stride == item {
        // Half types: widen BUF elements at a time with the slice
        // conversion, then fold the f32 values. For every widening input
        // type the sum accumulator is its op math type (asserted).
        debug_assert_eq!(size_of::<<R::In as Elem>::Op>(), size_of::<R::Acc>());
        let mut buf = [<R::In as Elem>::Op::default(); BUF];
        let mut i = 0;
        while i < n {
            let m = BUF.min(n - i);
            // SAFETY: elements i..i+m of the run.
            unsafe { load_op::<R::In>(&mut buf[..m], p.offset(i as isize * stride), stride) };
            let vals = buf.as_ptr() as *const u8;
            let acc_size = size_of::<R::Acc>() as isize;
            // SAFETY: fold_lanes calls the closure for k < m only, and
            // buf's first m values were just written by load_op: values of
            // the input's op math type. lanes serves only Sum and Prod
            // (through pairwise and blocks_x4), whose accumulator R::Acc is
            // that type for every widening input (SumAcc: f16, bf16 -> f32,
            // their complex types -> Complex<f32>; sizes asserted above).
            unsafe {
                fold_lanes::<R::Acc, N>(&mut acc, m, |k| ld::<R::Acc>(vals, k, acc_size), &fold)
            };
            i += m;
        }
    } else if stride == item {
        // Contiguous: whole arrays of N elements per step, so the lane
        // updates become packed SIMD adds.
        let mut k = 0;
        while k + N <= n {
            // SAFETY: elements k..k+N of the run.
            let chunk: [R::In; N] =
                unsafe { (p.offset(k as isize * item) as *const [R::In; N]).read_unaligned() };
            for (a, x) in acc.iter_mut().zip(chunk) {
                *a = fold(*a, R::lift(x));
            }
            k += N;
        }
        // The tail folds into lane 0 only, so the lanes are indexed by
        // constants everywhere and stay in registers.
        for k in k..n {
            // SAFETY: k < n.
            acc[0] = fold(acc[0], R::lift(unsafe { ld::<R::In>(p, k, item) }));
        }
    } else {
        // SAFETY: indices below n.
        unsafe {
            fold_lanes::<R::Acc, N>(&mut acc, n, |k| R::lift(ld::<R::In>(p, k, stride)), &fold)
        };
    }
    let mut width = N;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] = fold(acc[l], acc[l + width]);
        }
    }
    acc[0]
}

/// `acc[k % N] = fold(acc[k % N], value(k))` for the whole groups of N,
/// then the remaining values into lane 0.
///
/// # Safety
/// `value(k)` must be safe to call for every k < n.
#[inline(always)]
pub(super) unsafe fn fold_lanes<A: Copy, const N: usize>(
    acc: &mut [A; N],
    n: usize,
    value: impl Fn(usize) -> A,
    fold: &impl Fn(A, A) -> A,
) {
    let mut k = 0;
    while k + N <= n {
        for (l, a) in acc.iter_mut().enumerate() {
            *a = fold(*a, value(k + l));
        }
        k += N;
    }
    for k in k..n {
        acc[0] = fold(acc[0], value(k));
    }
}

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

/// The lanes of a pick folded in order from the identity: the one final
/// fold of the portable and the AVX2 lanes.
#[inline(always)]
pub(super) fn fold_picked<O: Max, const MAX: bool>(lanes: &[O]) -> O {
    lanes
        .iter()
        .fold(pick_identity::<O, MAX>(), |a, &b| pick::<O, MAX>(a, b))
}
