//! A run folded as a cascade: blocks in independent SIMD lanes, block
//! results combined as a balanced tree, long runs read as four streams.

pub(super) use super::reducer::Reducer;
use crate::kernels::elem::Elem;
use crate::kernels::loops::{ld, load_op, widens, BUF};
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
            // the input's op math type. lanes serves only Sum, SumSquares
            // and Prod (through pairwise and blocks_x4), whose accumulator R::Acc is
            // that type for every widening input (SumAcc: f16, bf16 -> f32,
            // their complex types -> Complex<f32>; sizes asserted above).
            unsafe {
                fold_lanes::<R::Acc, N>(
                    &mut acc,
                    m,
                    |k| R::lift_widened(ld::<R::Acc>(vals, k, acc_size)),
                    &fold,
                )
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
