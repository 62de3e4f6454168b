//! AVX2 kernels of the floating sums, sums of squares (the 2-norm's,
//! [`SQUARES`]: each value squared after widening, a multiply then an add,
//! never fused, as the portable loop does) and products ([`PROD`]: the
//! same lanes and tree, multiplied): contiguous runs of f32, f16,
//! bfloat16 (widened into f32 lanes) and f64 folded exactly as
//! [`lanes`](super::pairwise::lanes) folds them, one run or four in one
//! pass, and four or eight rows folded into a row of outputs.
//!
//! The lanes are four AVX registers (32 f32 or 16 f64 lanes): value i of a
//! run goes to lane i % lanes while whole groups remain, the rest to lane
//! 0 in order, then the lanes fold as a tree (l = l op l + half, halving), so
//! the result has the bits of the portable loop's. Reading four runs in
//! one pass keeps four memory streams in flight (sixteen accumulators,
//! loads as memory operands). Half values widen in registers (F16C's
//! vcvtph2ps; a bfloat16 is the top half of its f32), where the portable
//! loop widens through a buffer.

use super::reducer::Reducer;
use super::tree::tree;
use crate::dtype::DType;
use crate::kernels::elem::Elem;
use half::{bf16, f16};
use std::arch::x86_64::*;
use std::mem::{size_of, transmute_copy};

/// The fold of a kernel (its `OP` parameter): a sum, a sum of squares, a
/// product.
const SUM: u8 = 0;
const SQUARES: u8 = 1;
const PROD: u8 = 2;

/// An element type whose contiguous sums have an AVX2 kernel.
pub(super) trait Avx2Sum: Copy {
    /// The accumulator (f32, or f64 for f64).
    type Acc: Copy + Default + std::ops::Add<Output = Self::Acc> + std::ops::Mul<Output = Self::Acc>;
    /// One AVX register of accumulators.
    type V: Copy;
    /// Accumulators per register.
    const W: usize;
    /// # Safety
    /// The CPU must have AVX2 and F16C (every method).
    unsafe fn zero() -> Self::V;
    /// # Safety
    /// AVX2 and F16C.
    unsafe fn one() -> Self::V;
    /// W elements at `p` (any alignment), widened.
    ///
    /// # Safety
    /// AVX2 and F16C; W readable elements at `p`.
    unsafe fn load(p: *const Self) -> Self::V;
    /// W accumulators at `p` (any alignment).
    ///
    /// # Safety
    /// AVX2 and F16C; W readable accumulators at `p`.
    unsafe fn load_acc(p: *const Self::Acc) -> Self::V;
    /// # Safety
    /// AVX2 and F16C.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// # Safety
    /// AVX2 and F16C.
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// Stores W accumulators at `p` (any alignment).
    ///
    /// # Safety
    /// AVX2 and F16C; W writable accumulators at `p`.
    unsafe fn store(p: *mut Self::Acc, v: Self::V);
    /// The W lanes of `v` folded as a tree (lane l = lane l + lane l + W
    /// / 2, halving; `*` for a product), in registers: the bits of that
    /// loop over stored lanes.
    ///
    /// # Safety
    /// AVX2 and F16C.
    unsafe fn fold<const OP: u8>(v: Self::V) -> Self::Acc;
    /// One element widened, as the portable loop widens it.
    fn widen(self) -> Self::Acc;
}

macro_rules! avx2_sum {
    ($t:ty, $acc:ty, $v:ty, $w:expr, zero: $zero:expr, one: $one:expr, add: $add:ident,
     mul: $mul:ident,
     load_acc: $lda:ident, store: $st:ident, fold: $fold:ident,
     |$p:ident| $load:expr, |$x:ident| $widen:expr) => {
        impl Avx2Sum for $t {
            type Acc = $acc;
            type V = $v;
            const W: usize = $w;
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn zero() -> $v {
                $zero
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn one() -> $v {
                $one
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn load($p: *const $t) -> $v {
                // SAFETY: W readable elements at p (the caller's).
                unsafe { $load }
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn load_acc(p: *const $acc) -> $v {
                // SAFETY: W readable accumulators at p (the caller's).
                unsafe { $lda(p) }
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn add(a: $v, b: $v) -> $v {
                $add(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn mul(a: $v, b: $v) -> $v {
                $mul(a, b)
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn store(p: *mut $acc, v: $v) {
                // SAFETY: W writable accumulators at p (the caller's).
                unsafe { $st(p, v) }
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn fold<const OP: u8>(v: $v) -> $acc {
                $fold::<OP>(v)
            }
            #[inline(always)]
            fn widen(self) -> $acc {
                let $x = self;
                $widen
            }
        }
    };
}

/// Eight f32 lanes folded: lanes l + l + 4, then l + l + 2, then 0 + 1
/// (`*` for a product).
#[inline]
#[target_feature(enable = "avx2")]
fn fold_ps<const OP: u8>(v: __m256) -> f32 {
    let mul = OP == PROD;
    let op = |a, b| {
        if mul {
            _mm_mul_ps(a, b)
        } else {
            _mm_add_ps(a, b)
        }
    };
    let s = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = op(s, _mm_movehl_ps(s, s));
    let (a, b) = (s, _mm_shuffle_ps::<1>(s, s));
    _mm_cvtss_f32(if mul {
        _mm_mul_ss(a, b)
    } else {
        _mm_add_ss(a, b)
    })
}

/// Four f64 lanes folded: lanes l + l + 2, then 0 + 1 (`*` for a
/// product).
#[inline]
#[target_feature(enable = "avx2")]
fn fold_pd<const OP: u8>(v: __m256d) -> f64 {
    let mul = OP == PROD;
    let lo = _mm256_castpd256_pd128(v);
    let hi = _mm256_extractf128_pd::<1>(v);
    let s = if mul {
        _mm_mul_pd(lo, hi)
    } else {
        _mm_add_pd(lo, hi)
    };
    let (a, b) = (s, _mm_unpackhi_pd(s, s));
    _mm_cvtsd_f64(if mul {
        _mm_mul_sd(a, b)
    } else {
        _mm_add_sd(a, b)
    })
}

avx2_sum!(f32, f32, __m256, 8, zero: _mm256_setzero_ps(), one: _mm256_set1_ps(1.0),
    add: _mm256_add_ps, mul: _mm256_mul_ps,
    load_acc: _mm256_loadu_ps, store: _mm256_storeu_ps, fold: fold_ps,
    |p| _mm256_loadu_ps(p), |x| x);
avx2_sum!(f64, f64, __m256d, 4, zero: _mm256_setzero_pd(), one: _mm256_set1_pd(1.0),
    add: _mm256_add_pd, mul: _mm256_mul_pd,
    load_acc: _mm256_loadu_pd, store: _mm256_storeu_pd, fold: fold_pd,
    |p| _mm256_loadu_pd(p), |x| x);
avx2_sum!(f16, f32, __m256, 8, zero: _mm256_setzero_ps(), one: _mm256_set1_ps(1.0),
    add: _mm256_add_ps, mul: _mm256_mul_ps,
    load_acc: _mm256_loadu_ps, store: _mm256_storeu_ps, fold: fold_ps,
    |p| _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)), |x| x.to_f32());
avx2_sum!(bf16, f32, __m256, 8, zero: _mm256_setzero_ps(), one: _mm256_set1_ps(1.0),
    add: _mm256_add_ps, mul: _mm256_mul_ps,
    load_acc: _mm256_loadu_ps, store: _mm256_storeu_ps, fold: fold_ps,
    |p| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
        _mm_loadu_si128(p as *const __m128i)))), |x| x.to_f32());

/// The lanes' starting value: 0, or 1 for a product.
///
/// # Safety
/// AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn start<T: Avx2Sum, const OP: u8>() -> T::V {
    // SAFETY: AVX2 and F16C (the caller's).
    unsafe {
        if OP == PROD {
            T::one()
        } else {
            T::zero()
        }
    }
}

/// `a op b` on registers: `*` for a product, else `+`.
///
/// # Safety
/// AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn op<T: Avx2Sum, const OP: u8>(a: T::V, b: T::V) -> T::V {
    // SAFETY: AVX2 and F16C (the caller's).
    unsafe {
        if OP == PROD {
            T::mul(a, b)
        } else {
            T::add(a, b)
        }
    }
}

/// `a op b` on one accumulator.
#[inline(always)]
fn op1<T: Avx2Sum, const OP: u8>(a: T::Acc, b: T::Acc) -> T::Acc {
    if OP == PROD {
        a * b
    } else {
        a + b
    }
}

/// W values at `p`, widened, squared for a sum of squares.
///
/// # Safety
/// AVX2 and F16C; W readable elements at `p`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn get<T: Avx2Sum, const OP: u8>(p: *const T) -> T::V {
    // SAFETY: the caller's W readable elements; AVX2 and F16C.
    unsafe {
        let v = T::load(p);
        if OP == SQUARES {
            T::mul(v, v)
        } else {
            v
        }
    }
}

/// One value widened, squared for a sum of squares: the portable loop's
/// `lift`.
#[inline(always)]
fn get1<T: Avx2Sum, const OP: u8>(x: T) -> T::Acc {
    let w = x.widen();
    if OP == SQUARES {
        w * w
    } else {
        w
    }
}

/// The lanes of one run: four registers stored, the tail folded into lane
/// 0 in order, the lanes folded as a tree.
///
/// # Safety
/// AVX2 and F16C; `n` readable elements at `q`, `i` <= n a multiple of
/// 4 * W.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn finish<T: Avx2Sum, const OP: u8>(
    acc: [T::V; 4],
    q: *const T,
    i: usize,
    n: usize,
) -> T::Acc {
    if i == n {
        // No tail: the tree in registers. Its first two levels fold
        // register 2 into 0 and 3 into 1 (lane l op l + 2W), then 1 into 0
        // (l op l + W); T::fold does the rest within one register.
        // SAFETY: AVX2 and F16C (this function's features).
        unsafe {
            let low = op::<T, OP>(acc[0], acc[2]);
            let high = op::<T, OP>(acc[1], acc[3]);
            return T::fold::<OP>(op::<T, OP>(low, high));
        }
    }
    let mut lanes = [T::Acc::default(); 32];
    let out = lanes.as_mut_ptr();
    // SAFETY: 4 * W <= 32 lanes written; elements i..n of the run are
    // readable (the caller's).
    unsafe {
        for (u, v) in acc.into_iter().enumerate() {
            T::store(out.add(u * T::W), v);
        }
        for k in i..n {
            lanes[0] = op1::<T, OP>(lanes[0], get1::<T, OP>(q.add(k).read_unaligned()));
        }
    }
    let mut width = 4 * T::W;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] = op1::<T, OP>(lanes[l], lanes[l + width]);
        }
    }
    lanes[0]
}

/// The lane fold of a run of `n` contiguous values (see the module).
///
/// # Safety
/// AVX2 and F16C; `n` readable values at `p` (any alignment).
#[target_feature(enable = "avx2,f16c")]
unsafe fn sum_one<T: Avx2Sum, const OP: u8>(p: *const T, n: usize) -> T::Acc {
    let mut i = 0;
    // SAFETY: AVX2 and F16C (this function's features); the loads read
    // p[i..i + 4 * W] while that is inside the run; finish reads the rest.
    unsafe {
        let mut a = [start::<T, OP>(); 4];
        while i + 4 * T::W <= n {
            for (u, v) in a.iter_mut().enumerate() {
                *v = op::<T, OP>(*v, get::<T, OP>(p.add(i + u * T::W)));
            }
            i += 4 * T::W;
        }
        finish::<T, OP>(a, p, i, n)
    }
}

/// [`sum_one`] of four runs of `n` values in one pass, each result
/// bit-identical to that function's.
///
/// # Safety
/// AVX2 and F16C; `n` readable values at each `p[k]` (any alignment).
#[target_feature(enable = "avx2,f16c")]
unsafe fn sum_x4<T: Avx2Sum, const OP: u8>(p: [*const T; 4], n: usize) -> [T::Acc; 4] {
    let mut i = 0;
    // SAFETY: as in sum_one, for each run.
    unsafe {
        let mut a = [[start::<T, OP>(); 4]; 4];
        while i + 4 * T::W <= n {
            for (acc, q) in a.iter_mut().zip(p) {
                for (u, v) in acc.iter_mut().enumerate() {
                    *v = op::<T, OP>(*v, get::<T, OP>(q.add(i + u * T::W)));
                }
            }
            i += 4 * T::W;
        }
        [0, 1, 2, 3].map(|k| finish::<T, OP>(a[k], p[k], i, n))
    }
}

/// `acc[i] = acc[i] op tree(r0[i], .., r(K-1)[i])` over `n` values, in
/// [`tree`]'s pairwise order (the portable `add_rows_xk`'s).
///
/// # Safety
/// AVX2 and F16C; `n` accumulators at `acc` and `n` values at each row,
/// readable (and `acc` writable), `acc` overlapping no row; K a power of
/// two.
#[target_feature(enable = "avx2,f16c")]
unsafe fn add_rows<T: Avx2Sum, const K: usize, const OP: u8>(
    acc: *mut T::Acc,
    rows: [*const T; K],
    n: usize,
) {
    let mut i = 0;
    // SAFETY: every access is below n (the caller's runs).
    unsafe {
        while i + T::W <= n {
            let v = tree(rows.map(|p| get::<T, OP>(p.add(i))), |a, b| {
                op::<T, OP>(a, b)
            });
            T::store(acc.add(i), op::<T, OP>(T::load_acc(acc.add(i)), v));
            i += T::W;
        }
        for i in i..n {
            let r: [T::Acc; K] = rows.map(|p| get1::<T, OP>(p.add(i).read_unaligned()));
            let v = tree(r, op1::<T, OP>);
            *acc.add(i) = op1::<T, OP>(*acc.add(i), v);
        }
    }
}

/// Evaluates `$body` with `$t` the AVX2 element type that is R's input
/// and `$op` the kernel's fold (a const: [`SUM`], [`SQUARES`], [`PROD`]),
/// when R is a sum, a sum of squares or a product whose accumulator is
/// that type's and the CPU has AVX2 and F16C; evaluates to None
/// otherwise.
macro_rules! for_avx2_sum {
    ($r:ty, |$t:ident, $op:ident| $body:expr) => {{
        use super::reducer::Kind;
        let kind = <$r>::KIND;
        let avx = matches!(kind, Kind::Sum | Kind::SumSquares | Kind::Prod)
            && crate::kernels::simd::avx2_enabled();
        match (<$r as Reducer>::In::DTYPE, <$r as Reducer>::Acc::DTYPE) {
            (DType::Float, DType::Float) if avx => {
                type $t = f32;
                Some(for_op!(kind, $op, $body))
            }
            (DType::Half, DType::Float) if avx => {
                type $t = f16;
                Some(for_op!(kind, $op, $body))
            }
            (DType::BFloat16, DType::Float) if avx => {
                type $t = bf16;
                Some(for_op!(kind, $op, $body))
            }
            (DType::Double, DType::Double) if avx => {
                type $t = f64;
                Some(for_op!(kind, $op, $body))
            }
            _ => None,
        }
    }};
}

/// Evaluates `$body` with the const `$op` the fold of reduction kind
/// `$kind` (one of the three for_avx2_sum admits).
macro_rules! for_op {
    ($kind:expr, $op:ident, $body:expr) => {
        match $kind {
            Kind::SumSquares => {
                const $op: u8 = SQUARES;
                $body
            }
            Kind::Prod => {
                const $op: u8 = PROD;
                $body
            }
            _ => {
                const $op: u8 = SUM;
                $body
            }
        }
    };
}

/// R's result read back from the kernel's accumulator.
///
/// # Safety
/// `A` must be R::Acc's type (same DType, so the same Elem type).
#[inline(always)]
unsafe fn as_acc<R: Reducer, A: Copy>(v: A) -> R::Acc {
    debug_assert_eq!(size_of::<A>(), size_of::<R::Acc>());
    // SAFETY: the caller's: the same type.
    unsafe { transmute_copy::<A, R::Acc>(&v) }
}

/// The fold of a contiguous run of `n` R::In values through its AVX2
/// kernel, with the bits of `lanes::<R, N>`; None where R has no kernel
/// (not a floating sum or product, no AVX2) or N is not its lane count.
///
/// # Safety
/// `n` readable contiguous R::In values at `p` (any alignment).
#[inline(always)]
pub(super) unsafe fn run<R: Reducer, const N: usize>(p: *const u8, n: usize) -> Option<R::Acc> {
    for_avx2_sum!(R, |T, OP| {
        if N != 4 * T::W {
            return None;
        }
        // SAFETY: for_avx2_sum checked AVX2 and F16C; In is T (its DType,
        // and Elem's contract: one Elem type per DType), so the caller's
        // run is n values of T; Acc is T::Acc (the accumulator's DType).
        unsafe { as_acc::<R, _>(sum_one::<T, { OP }>(p as *const T, n)) }
    })
}

/// Four contiguous runs of `n` R::In values folded in one pass, each with
/// the bits of [`run`]; None where R has no kernel.
///
/// # Safety
/// `n` readable contiguous R::In values at each `q[k]` (any alignment).
#[inline(always)]
pub(super) unsafe fn runs_x4<R: Reducer>(q: [*const u8; 4], n: usize) -> Option<[R::Acc; 4]> {
    for_avx2_sum!(R, |T, OP| {
        let q = q.map(|p| p as *const T);
        // SAFETY: as in run, for each of the four runs.
        unsafe { sum_x4::<T, { OP }>(q, n).map(|v| as_acc::<R, _>(v)) }
    })
}

/// `acc[i] = acc[i] op tree(r0[i], .., r(K-1)[i])` over `n` contiguous
/// values ([`add_rows`]); false (nothing done) where R has no kernel.
///
/// # Safety
/// `n` accumulators at `acc` (readable and writable) and `n` readable
/// contiguous R::In values at each row, `acc` overlapping no row; K a
/// power of two.
#[inline(always)]
pub(super) unsafe fn add_rows_xk<R: Reducer, const K: usize>(
    acc: *mut R::Acc,
    rows: [*const R::In; K],
    n: usize,
) -> bool {
    for_avx2_sum!(R, |T, OP| {
        let acc = acc as *mut <T as Avx2Sum>::Acc;
        let rows = rows.map(|p| p as *const T);
        // SAFETY: as in run: the rows are T values and acc holds T::Acc
        // (the same type as R::Acc).
        unsafe { add_rows::<T, K, { OP }>(acc, rows, n) }
    })
    .is_some()
}
