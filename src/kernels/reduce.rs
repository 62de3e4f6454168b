//! Reductions over a set of dims: sum and amax.
//!
//! Result dtypes follow PyTorch: sum of bool and integer tensors is Long,
//! sum of floating and complex tensors keeps the dtype; amax keeps the
//! dtype. Half, bfloat16 and float sums accumulate in float, double in
//! double, ComplexHalf, BComplex32 and ComplexFloat in ComplexFloat (c10's opmath
//! type), and contiguous runs are summed pairwise over blocks with many
//! independent lanes (a cascade, so the error grows with log n rather
//! than n, and the loop vectorizes).
//!
//! The loop order follows the input's memory layout rather than the
//! iterator's reduction order (which puts reduced dims innermost and would
//! walk columns of a row-major matrix when reducing its rows away): dims
//! are sorted by input stride and coalesced, then the innermost run is
//! either reduced to one value (when that dim is reduced) or accumulated
//! element-wise into a row of the output (when it is kept). Work is split
//! across threads along a kept dim (disjoint outputs) or, for a full
//! reduction, into ordered chunks whose partial results are combined in
//! order, so a given thread count always gives the same result.

use super::dispatch::{dispatch_all, dispatch_real};
use super::elem::{Bool, Complex, Elem};
use super::loops::{ld, load_op, st, widens, with_simd, zip_run, BUF};
use super::ops::{Arith, Max};
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::DEFAULT_GRAIN_SIZE as GRAIN;
use crate::parallel;
use crate::tensor::{shape::wrap_dim, Dims, Tensor};
use half::{bf16, f16};
use smallvec::SmallVec;
use std::mem::size_of;

/// Elements summed by one set of lanes before the pairwise tree combines
/// blocks.
const BLOCK: usize = 4096;

/// The accumulation type of a sum of `Self` elements.
pub trait SumAcc: Elem {
    /// Long for bool and integers, float for half types and float, ...
    type Acc: Elem + Arith;
    /// Converts one element to the accumulator type.
    fn widen(self) -> Self::Acc;
}

macro_rules! sum_acc {
    ($($t:ty => $acc:ty, |$v:ident| $e:expr;)*) => {$(
        impl SumAcc for $t {
            type Acc = $acc;
            #[inline(always)]
            fn widen(self) -> $acc {
                let $v = self;
                $e
            }
        }
    )*};
}

sum_acc! {
    Bool => i64, |v| (v.0 != 0) as i64;
    u8 => i64, |v| v as i64;
    i8 => i64, |v| v as i64;
    i16 => i64, |v| v as i64;
    i32 => i64, |v| v as i64;
    i64 => i64, |v| v;
    u16 => i64, |v| v as i64;
    u32 => i64, |v| v as i64;
    u64 => i64, |v| v as i64;
    f16 => f32, |v| v.to_f32();
    bf16 => f32, |v| v.to_f32();
    f32 => f32, |v| v;
    f64 => f64, |v| v;
    Complex<f16> => Complex<f32>, |v| Complex::new(v.re.to_f32(), v.im.to_f32());
    Complex<bf16> => Complex<f32>, |v| Complex::new(v.re.to_f32(), v.im.to_f32());
    Complex<f32> => Complex<f32>, |v| v;
    Complex<f64> => Complex<f64>, |v| v;
}

/// A reduction: how elements fold into accumulators stored in the output.
trait Reducer {
    type In: Elem;
    type Acc: Elem;
    /// Whether this is a sum (whose f32 lanes have an AVX2 kernel).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    const IS_SUM: bool;
    /// The accumulator of an empty set.
    fn identity() -> Self::Acc;
    /// Folds two accumulators (the left one covers earlier elements).
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// One element as an accumulator.
    fn lift(x: Self::In) -> Self::Acc;
    /// Reduces `n` elements of a run to one accumulator.
    ///
    /// # Safety
    /// The run must address `n` readable elements.
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> Self::Acc;
}

/// Sum of `T` elements.
struct Sum<T>(std::marker::PhantomData<T>);

impl<T: SumAcc> Reducer for Sum<T> {
    type In = T;
    type Acc = T::Acc;
    const IS_SUM: bool = true;
    #[inline(always)]
    fn identity() -> T::Acc {
        <T::Acc as Arith>::ZERO
    }
    #[inline(always)]
    fn combine(a: T::Acc, b: T::Acc) -> T::Acc {
        a.add(b)
    }
    #[inline(always)]
    fn lift(x: T) -> T::Acc {
        x.widen()
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T::Acc {
        // SAFETY: reduce_run's contract (a run of n readable elements) is
        // pairwise's.
        unsafe { pairwise::<Self>(p, stride, n, |a, b| a.add(b)) }
    }
}

/// Maximum of `T` elements, NaN propagating.
struct AMax<T>(std::marker::PhantomData<T>);

impl<T: Elem> Reducer for AMax<T>
where
    T::Op: Max,
{
    type In = T;
    type Acc = T;
    const IS_SUM: bool = false;
    #[inline(always)]
    fn identity() -> T {
        T::from_op(<T::Op as Max>::LOWEST)
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        T::from_op(a.to_op().max_nan(b.to_op()))
    }
    #[inline(always)]
    fn lift(x: T) -> T {
        x
    }
    #[inline(always)]
    unsafe fn reduce_run(p: *const u8, stride: isize, n: usize) -> T {
        // Lanes hold op math values: compare in f32 for half types.
        // SAFETY: the caller's run of n readable elements, n >= 1 (amax
        // refuses a reduced dim of size 0 before any run), is what
        // lanes_op requires.
        T::from_op(unsafe { lanes_op::<T>(p, stride, n) })
    }
}

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
unsafe fn pairwise<R: Reducer>(
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
const STREAMS: usize = 4;

/// The cascade of one run, one block at a time.
///
/// # Safety
/// The run must address `n` readable elements.
#[inline(always)]
unsafe fn cascade<R: Reducer>(
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
unsafe fn block<R: Reducer>(
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
/// [`block`] folds it; f32 sums read the four in one AVX2 pass.
///
/// # Safety
/// Each block must address `m` readable contiguous elements.
#[inline(always)]
unsafe fn blocks_x4<R: Reducer>(
    q: [*const u8; 4],
    m: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc + Copy,
) -> [R::Acc; 4] {
    #[cfg(target_arch = "x86_64")]
    if R::IS_SUM
        && R::In::DTYPE == DType::Float
        && R::Acc::DTYPE == DType::Float
        && super::simd::avx2_enabled()
    {
        // SAFETY: avx2_enabled() just said the CPU has AVX2; In is f32
        // (its DTYPE is Float, and Elem's contract makes f32 the only Elem
        // of Float), so each of the caller's four blocks of m readable
        // contiguous elements holds m f32 values.
        let s = unsafe { super::simd::sum_f32_lanes32_x4(q.map(|p| p as *const f32), m) };
        // SAFETY: Acc is f32 as well (its DTYPE is Float, Elem's contract),
        // so each result is read back as Acc through a copy of the same
        // type and size.
        return s.map(|v| unsafe { std::mem::transmute_copy::<f32, R::Acc>(&v) });
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
struct Cascade<T> {
    stack: [(T, u32); CASCADE_LEVELS],
    depth: usize,
}

/// 2^40 blocks of 4096 elements: more than any tensor holds.
const CASCADE_LEVELS: usize = 40;

impl<T: Copy> Cascade<T> {
    #[inline(always)]
    fn new(zero: T) -> Self {
        Cascade {
            stack: [(zero, 0); CASCADE_LEVELS],
            depth: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, mut acc: T, fold: impl Fn(T, T) -> T) {
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
    fn finish(mut self, zero: T, fold: impl Fn(T, T) -> T) -> T {
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
unsafe fn lanes<R: Reducer, const N: usize>(
    p: *const u8,
    stride: isize,
    n: usize,
    fold: impl Fn(R::Acc, R::Acc) -> R::Acc,
) -> R::Acc {
    let mut acc = [R::identity(); N];
    let item = size_of::<R::In>() as isize;
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
            // the input's op math type. lanes serves only Sum (through
            // pairwise and blocks_x4), whose accumulator R::Acc is that type
            // for every widening input (SumAcc: f16, bf16 -> f32, their
            // complex types -> Complex<f32>; sizes asserted above).
            unsafe {
                fold_lanes::<R::Acc, N>(&mut acc, m, |k| ld::<R::Acc>(vals, k, acc_size), &fold)
            };
            i += m;
        }
    } else if stride == item {
        #[cfg(target_arch = "x86_64")]
        if R::IS_SUM
            && N == 32
            && R::In::DTYPE == DType::Float
            && R::Acc::DTYPE == DType::Float
            && super::simd::avx2_enabled()
        {
            // SAFETY: avx2_enabled() just said the CPU has AVX2; In is f32
            // (its DTYPE is Float, Elem's contract) and the stride is its
            // size, so the caller's run is n readable contiguous f32 values.
            let s = unsafe { super::simd::sum_f32_lanes32(p as *const f32, n) };
            // SAFETY: Acc is f32 as well (its DTYPE is Float, Elem's
            // contract): a copy of the same type and size.
            return unsafe { std::mem::transmute_copy::<f32, R::Acc>(&s) };
        }
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
unsafe fn fold_lanes<A: Copy, const N: usize>(
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

/// The NaN-propagating maximum of a run, in op math, over 16 lanes.
///
/// # Safety
/// The run must address `n` readable elements (n >= 1).
#[inline(always)]
unsafe fn lanes_op<T: Elem>(p: *const u8, stride: isize, n: usize) -> T::Op
where
    T::Op: Max,
{
    const N: usize = 16;
    let mut acc = [<T::Op as Max>::LOWEST; N];
    let mut buf = [T::Op::default(); BUF];
    let mut i = 0;
    while i < n {
        let m = BUF.min(n - i);
        // SAFETY: elements i..i+m of the run.
        unsafe { load_op::<T>(&mut buf[..m], p.offset(i as isize * stride), stride) };
        let mut chunks = buf[..m].chunks_exact(N);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a = a.max_nan(*v);
            }
        }
        for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
            *a = a.max_nan(*v);
        }
        i += m;
    }
    acc.into_iter()
        .fold(<T::Op as Max>::LOWEST, |a, b| a.max_nan(b))
}

/// Loop geometry of a reduction: dims innermost first, sorted by input
/// stride; output strides are 0 along reduced dims. Strides in bytes.
struct Geometry {
    shape: Dims,
    out: Dims,
    inp: Dims,
}

impl Geometry {
    fn new(a: &Tensor, acc: &Tensor, reduced: &[bool]) -> Geometry {
        let (ia, io) = (a.itemsize() as i64, acc.itemsize() as i64);
        let mut dims: SmallVec<[(i64, i64, i64); 6]> = (0..a.ndim())
            .filter(|&d| a.sizes()[d] != 1)
            .map(|d| {
                let out = if reduced[d] { 0 } else { acc.strides()[d] * io };
                (a.sizes()[d], out, a.strides()[d] * ia)
            })
            .collect();
        // Innermost first: by input stride, then reduced dims first (so a
        // broadcast input dim that is reduced stays a run).
        dims.sort_by_key(|&(_, out, inp)| (inp, out != 0));
        let mut g = Geometry {
            shape: Dims::new(),
            out: Dims::new(),
            inp: Dims::new(),
        };
        for (size, out, inp) in dims {
            if let Some(last) = g.shape.len().checked_sub(1) {
                if g.shape[last] * g.out[last] == out && g.shape[last] * g.inp[last] == inp {
                    g.shape[last] *= size;
                    continue;
                }
            }
            g.shape.push(size);
            g.out.push(out);
            g.inp.push(inp);
        }
        if g.shape.is_empty() {
            g.shape.push(1);
            g.out.push(0);
            g.inp.push(0);
        }
        g
    }

    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Calls `f(out_offset, in_offset, run_length)` for every run along
    /// dim 0 inside `ranges` (one [lo, hi) per dim), dim 1 fastest.
    fn walk(&self, ranges: &[(i64, i64)], mut f: impl FnMut(isize, isize, usize)) {
        let nd = self.ndim();
        if ranges.iter().any(|(lo, hi)| lo >= hi) {
            return;
        }
        let mut idx: Dims = ranges.iter().map(|r| r.0).collect();
        let (mut oo, mut io) = (0i64, 0i64);
        for d in 0..nd {
            oo += idx[d] * self.out[d];
            io += idx[d] * self.inp[d];
        }
        let run = (ranges[0].1 - ranges[0].0) as usize;
        loop {
            f(oo as isize, io as isize, run);
            let mut d = 1;
            loop {
                if d >= nd {
                    return;
                }
                idx[d] += 1;
                oo += self.out[d];
                io += self.inp[d];
                if idx[d] < ranges[d].1 {
                    break;
                }
                let back = idx[d] - ranges[d].0;
                oo -= back * self.out[d];
                io -= back * self.inp[d];
                idx[d] = ranges[d].0;
                d += 1;
            }
        }
    }
}

/// Reduces `a` into `acc` (keepdim shape, contiguous, dtype R::Acc),
/// which this fills with the result.
fn reduce_into<R: Reducer>(a: &Tensor, acc: &Tensor, reduced: &[bool]) -> Result<()> {
    let numel_out = acc.numel() as usize;
    let acc0 = acc.data_in_storage()? as usize;
    let in0 = a.data_in_storage()? as usize;
    if numel_out == 0 {
        return Ok(());
    }
    for i in 0..numel_out {
        // SAFETY: acc is a contiguous tensor of numel_out elements.
        unsafe {
            st(
                acc0 as *mut u8,
                i,
                size_of::<R::Acc>() as isize,
                R::identity(),
            )
        };
    }
    if a.numel() == 0 {
        return Ok(());
    }
    let g = Geometry::new(a, acc, reduced);
    let full: SmallVec<[(i64, i64); 6]> = g.shape.iter().map(|&s| (0, s)).collect();
    let per_index = |d: usize| (a.numel() / g.shape[d]).max(1);

    if g.out.iter().all(|&s| s == 0) {
        // Every dim is reduced: ordered chunks along the outermost dim.
        let k = g.ndim() - 1;
        let chunks = parallel::chunks(0, g.shape[k], (GRAIN / per_index(k)).max(1));
        let partials = parallel::map_chunks(&chunks, |b, e| {
            let mut ranges = full.clone();
            ranges[k] = (b, e);
            with_simd!({
                let mut total = R::identity();
                g.walk(&ranges, |_, io, n| {
                    // SAFETY: the walk stays inside a's elements.
                    let part = unsafe {
                        R::reduce_run((in0 as *const u8).offset(io), g.inp[0] as isize, n)
                    };
                    total = R::combine(total, part);
                });
                total
            })
        });
        let total = partials.into_iter().fold(R::identity(), R::combine);
        // SAFETY: acc has one element.
        unsafe { st(acc0 as *mut u8, 0, 0, total) };
        return Ok(());
    }

    let outer = g.ndim() - 1;
    if g.out[outer] == 0 && numel_out * 16 <= a.numel() as usize {
        // The outermost input dim is reduced (a sum over dim 0 of a
        // matrix): tasks take its halves, so each reads one contiguous
        // part of the input (split along a kept inner dim instead, each
        // task would read every row in part, about twice as slow as one
        // thread here), into outputs of its own, combined in task order.
        let chunks = parallel::chunks(0, g.shape[outer], (GRAIN / per_index(outer)).max(1));
        if chunks.len() > 1 {
            let partials = parallel::map_chunks(&chunks, |b, e| {
                let mut part = vec![R::identity(); numel_out];
                let mut ranges = full.clone();
                ranges[outer] = (b, e);
                reduce_part::<R>(&g, &ranges, part.as_mut_ptr() as usize, in0);
                part
            });
            for i in 0..numel_out {
                let total = partials
                    .iter()
                    .fold(R::identity(), |t, p| R::combine(t, p[i]));
                // SAFETY: acc is a contiguous tensor of numel_out elements.
                unsafe { st(acc0 as *mut u8, i, size_of::<R::Acc>() as isize, total) };
            }
            return Ok(());
        }
    }
    // Split along the kept dim with the most elements: disjoint outputs.
    let k = (0..g.ndim())
        .filter(|&d| g.out[d] != 0)
        .max_by_key(|&d| g.shape[d])
        .expect("some dim is kept");
    parallel::parallel_for(0, g.shape[k], (GRAIN / per_index(k)).max(1), |b, e| {
        let mut ranges = full.clone();
        ranges[k] = (b, e);
        reduce_part::<R>(&g, &ranges, acc0, in0);
    });
    Ok(())
}

/// Reduces the part of `a` inside `ranges` (one [lo, hi) per geometry
/// dim) into the outputs at `acc0` (laid out as the geometry's output
/// strides say), which this part alone writes.
fn reduce_part<R: Reducer>(g: &Geometry, ranges: &[(i64, i64)], acc0: usize, in0: usize) {
    let (os0, is0) = (g.out[0] as isize, g.inp[0] as isize);
    let run = g.shape[0] as usize;
    if R::IS_SUM && os0 == 0 && is0 == size_of::<R::In>() as isize && run < STREAMS * BLOCK {
        // Contiguous runs reduced into single outputs (a sum along
        // the innermost dim), too short for pairwise's streams: four
        // runs at a time, so the reads still come from four places.
        let (b, e) = ranges[g.ndim() - 1];
        if g.ndim() == 2 && e - b >= 4 {
            // One row per output: the four runs come from the four
            // quarters of the task's rows (adjacent rows read together
            // are slower here than rows far apart).
            let q = (e - b) / 4;
            let (os1, is1) = (g.out[1] as isize, g.inp[1] as isize);
            with_simd!({
                for r in b..b + q {
                    let rows = [r, r + q, r + 2 * q, r + 3 * q];
                    let group = rows.map(|r| (r as isize * os1, r as isize * is1));
                    // SAFETY: rows b..e lie inside both tensors, and
                    // this part owns their outputs.
                    unsafe { sum_runs_x4::<R>(acc0, in0, &group, run) };
                }
                for r in b + 4 * q..e {
                    // SAFETY: r < e, so row r is inside both tensors: its
                    // run of `run` (>= 1) elements at in0 + r * is1 lies in
                    // `a`, and its one output at acc0 + r * os1 is this
                    // part's (dim 1 is the kept dim the parts split).
                    unsafe {
                        let out = (acc0 as *mut u8).offset(r as isize * os1);
                        let inp = (in0 as *const u8).offset(r as isize * is1);
                        st(
                            out,
                            0,
                            0,
                            R::combine(ld(out, 0, 0), R::reduce_run(inp, is0, run)),
                        );
                    }
                }
            });
            return;
        }
        let mut group = [(0isize, 0isize); 4];
        let mut len = 0;
        with_simd!({
            g.walk(ranges, |oo, io, _| {
                group[len] = (oo, io);
                len += 1;
                if len == group.len() {
                    // SAFETY: the walk's runs stay inside both tensors;
                    // this part owns its output elements.
                    unsafe { sum_runs_x4::<R>(acc0, in0, &group, run) };
                    len = 0;
                }
            });
            for &(oo, io) in &group[..len] {
                // SAFETY: each (oo, io) left in group[..len] came from the
                // walk above over this part's ranges: a run of `run`
                // elements inside `a` and an output element this part owns.
                unsafe {
                    let out = (acc0 as *mut u8).offset(oo);
                    let part = R::reduce_run((in0 as *const u8).offset(io), is0, run);
                    st(out, 0, 0, R::combine(ld(out, 0, 0), part));
                }
            }
        });
        return;
    }
    let (acc_item, in_item) = (size_of::<R::Acc>() as isize, size_of::<R::In>() as isize);
    if g.ndim() == 2 && g.out[1] == 0 && os0 == acc_item && is0 == in_item {
        let ((c0, c1), (b, e)) = (ranges[0], ranges[1]);
        let q = (e - b) / 4;
        if q > 0 {
            // Contiguous rows reduced into one contiguous row of outputs (a
            // sum over dim 0 of a matrix): four rows, one from each
            // quarter of the part's rows, per pass, so the reads come from
            // four places (one row at a time reads about 1.4x slower than
            // a four-stream read of the same bytes here). Each pass adds
            // (r0 + r1) + (r2 + r3) into the outputs; the rows past the
            // four quarters follow one by one.
            let is1 = g.inp[1] as isize;
            let n = (c1 - c0) as usize;
            // SAFETY: rows b..e and columns c0..c1 lie inside both tensors,
            // and this part owns those outputs.
            let out = unsafe { (acc0 as *mut u8).offset(c0 as isize * acc_item) } as usize;
            let row = |r: i64| in0 as isize + c0 as isize * in_item + r as isize * is1;
            with_simd!({
                for r in b..b + q {
                    let rows = [r, r + q, r + 2 * q, r + 3 * q].map(|r| row(r) as *const R::In);
                    // SAFETY: r + 3 * q < b + 4 * q <= e, so all four rows
                    // are inside `a`, each n contiguous elements (is0 ==
                    // in_item); `out` is this part's n contiguous outputs
                    // (os0 == acc_item), in `acc` or the task's own `part`,
                    // both fresh buffers that overlap no row of `a`.
                    unsafe { add_rows_x4::<R>(out as *mut R::Acc, rows, n) };
                }
                for r in b + 4 * q..e {
                    // SAFETY: r < e: row(r) is n = c1 - c0 >= 1 contiguous
                    // elements inside `a`; `o` is this part's n contiguous
                    // outputs, passed as both output and first input, the
                    // exact aliasing zip_run allows.
                    unsafe {
                        let o = out as *mut u8;
                        zip_run::<R::Acc, R::In, R::Acc>(
                            o,
                            os0,
                            o,
                            os0,
                            row(r) as *const u8,
                            is0,
                            n,
                            false,
                            |a, x| R::combine(a, R::lift(x)),
                        );
                    }
                }
            });
            return;
        }
    }
    with_simd!(g.walk(ranges, |oo, io, n| {
        // SAFETY: the walk stays inside both tensors; this part owns
        // its output elements.
        unsafe {
            let out = (acc0 as *mut u8).offset(oo);
            let inp = (in0 as *const u8).offset(io);
            if os0 == 0 {
                let part = R::reduce_run(inp, is0, n);
                st(out, 0, 0, R::combine(ld(out, 0, 0), part));
            } else {
                zip_run::<R::Acc, R::In, R::Acc>(out, os0, out, os0, inp, is0, n, false, |a, x| {
                    R::combine(a, R::lift(x))
                });
            }
        }
    }))
}

/// `acc[i] = acc[i] + ((r0[i] + r1[i]) + (r2[i] + r3[i]))` (with the
/// reducer's combine) over `n` contiguous elements.
///
/// # Safety
/// `acc` and each row address `n` contiguous elements; `acc` overlaps no
/// row.
#[inline(always)]
unsafe fn add_rows_x4<R: Reducer>(acc: *mut R::Acc, rows: [*const R::In; 4], n: usize) {
    for i in 0..n {
        // SAFETY: i < n, inside every run (the caller's guarantee).
        unsafe {
            let x = |k: usize| R::lift(rows[k].add(i).read_unaligned());
            let v = R::combine(R::combine(x(0), x(1)), R::combine(x(2), x(3)));
            let a = acc.add(i);
            a.write_unaligned(R::combine(a.read_unaligned(), v));
        }
    }
}

/// Four contiguous runs of `n` (< STREAMS * BLOCK) elements, each summed
/// exactly as [`pairwise`] sums one such run (a cascade of blocks), read in
/// one pass; each result is added into its output element, in order (two
/// runs may share an output when several dims are reduced).
///
/// # Safety
/// Each `(out, in)` pair: byte offsets from `acc0` and `in0` of an output
/// element of R::Acc and of a run of n readable contiguous R::In elements.
#[inline(always)]
unsafe fn sum_runs_x4<R: Reducer>(acc0: usize, in0: usize, runs: &[(isize, isize); 4], n: usize) {
    let fold = |a: R::Acc, b: R::Acc| R::combine(a, b);
    let item = size_of::<R::In>() as isize;
    let mut parts = [Cascade::new(R::identity()); 4];
    let mut start = 0;
    while start < n {
        let m = BLOCK.min(n - start);
        // SAFETY: block `start` of each run lies inside the run.
        let q =
            runs.map(|(_, io)| unsafe { (in0 as *const u8).offset(io + start as isize * item) });
        // SAFETY: four contiguous blocks of m readable elements.
        let sums = unsafe { blocks_x4::<R>(q, m, fold) };
        for (c, v) in parts.iter_mut().zip(sums) {
            c.push(v, fold);
        }
        start += m;
    }
    for (c, &(oo, _)) in parts.into_iter().zip(runs) {
        let part = c.finish(R::identity(), fold);
        // SAFETY: the caller's output element.
        unsafe {
            let out = (acc0 as *mut u8).offset(oo);
            st(out, 0, 0, R::combine(ld(out, 0, 0), part));
        }
    }
}

/// The reduced-dims mask of `dims` (empty: every dim), with c10's checks.
fn reduced_mask(op: &str, a: &Tensor, dims: &[i64]) -> Result<SmallVec<[bool; 6]>> {
    let n = a.ndim();
    let mut mask: SmallVec<[bool; 6]> = SmallVec::from_elem(dims.is_empty(), n);
    for &d in dims {
        let w = wrap_dim(d, n)?;
        if n == 0 {
            continue;
        }
        crate::ensure!(
            !mask[w],
            InvalidArgument,
            "dim {w} appears multiple times in the list of dims {dims:?} to {op} over"
        );
        mask[w] = true;
    }
    Ok(mask)
}

/// The result tensor from the keepdim-shaped one.
fn finish_shape(keep: Tensor, mask: &[bool], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(keep);
    }
    let sizes: Dims = keep
        .sizes()
        .iter()
        .zip(mask)
        .filter(|(_, &r)| !r)
        .map(|(&s, _)| s)
        .collect();
    keep.view(&sizes)
}

fn keep_sizes(a: &Tensor, mask: &[bool]) -> Dims {
    a.sizes()
        .iter()
        .zip(mask)
        .map(|(&s, &r)| if r { 1 } else { s })
        .collect()
}

fn check_cpu(op: &str, a: &Tensor) -> Result<()> {
    crate::ensure!(
        a.device().is_cpu(),
        Device,
        "{op} of a tensor on {}: the built-in kernels run on CPU only",
        a.device()
    );
    Ok(())
}

/// The sum of `a` over `dims` (empty: all dims; negative dims wrap),
/// keeping reduced dims as size 1 when `keepdim`. Bool and integer inputs
/// give Long; floating and complex inputs keep their dtype. The sum over
/// an empty dim is 0.
///
/// Errors: Shape (dim out of range), InvalidArgument (a dim repeated),
/// Device, Unsupported (float8, quantized).
pub fn sum(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu("sum", a)?;
    let mask = reduced_mask("sum", a, dims)?;
    let keep = keep_sizes(a, &mask);
    let dtype = a.dtype();
    let result = dispatch_all!(dtype, "sum", T => {
        type A = <T as SumAcc>::Acc;
        let acc = Tensor::empty(&keep, A::DTYPE, a.device())?;
        reduce_into::<Sum<T>>(a, &acc, &mask)?;
        if dtype.is_integral(true) || A::DTYPE == dtype {
            acc
        } else {
            acc.to_dtype(dtype)?
        }
    });
    finish_shape(result, &mask, keepdim)
}

/// The maximum of `a` over `dims` (empty: all dims), NaN if any element
/// reduced is NaN; the dtype is kept.
///
/// Errors: Shape (a reduced dim has size 0, naming it; dim out of range),
/// InvalidArgument (a dim repeated), Unsupported (complex, float8,
/// quantized), Device.
pub fn amax(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu("amax", a)?;
    let mask = reduced_mask("amax", a, dims)?;
    if let Some(d) = (0..a.ndim()).find(|&d| mask[d] && a.sizes()[d] == 0) {
        crate::bail!(
            Shape,
            "reduction dim {d} has size 0: the maximum of an empty set is undefined (input \
             sizes {:?})",
            a.sizes()
        );
    }
    let keep = keep_sizes(a, &mask);
    let out = Tensor::empty(&keep, a.dtype(), a.device())?;
    if a.dtype() == DType::Bool {
        reduce_into::<AMax<Bool>>(a, &out, &mask)?;
    } else {
        dispatch_real!(a.dtype(), "amax", T => reduce_into::<AMax<T>>(a, &out, &mask))?;
    }
    finish_shape(out, &mask, keepdim)
}
