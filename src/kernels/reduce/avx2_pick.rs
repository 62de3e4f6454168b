//! AVX2 kernels of amax and amin: contiguous runs of f32, f64, f16 and
//! bfloat16 (widened into f32 lanes) folded exactly as the portable
//! [`pick_run`](super::pick_lanes::pick_run) folds them, and K rows folded
//! into a row of outputs exactly as the portable `add_rows_xk` does.
//!
//! The per-lane step mirrors [`pick`]: `acc` stays unless `o` is strictly
//! beyond it or NaN. `vmaxps(o, acc)` is `o > acc ? o : acc` (`vminps`
//! the same with `<`), which keeps a NaN `acc` and ties; a blend then
//! takes `o` where `o` is NaN. The lanes are two registers (16 f32 or 8
//! f64 values, value i of a run in lane i % lanes), stored and folded in
//! order with [`fold_picked`], as the portable loop folds its lanes; four
//! runs can be read in one pass (four memory streams, eight registers).
//! Half values widen in registers (F16C's vcvtph2ps; a bfloat16 is the
//! top half of its f32) and narrow back exactly (the values are the
//! inputs'; a NaN keeps its quiet bit set, as the portable narrowing does).

use super::pick::{fold_picked, pick, pick_identity};
use super::reducer::{Kind, Reducer};
use super::tree::tree;
use crate::dtype::DType;
use crate::kernels::elem::Elem;
use crate::kernels::ops::Max;
use half::{bf16, f16};
use std::arch::x86_64::*;
use std::mem::transmute_copy;

/// An element type whose picks have an AVX2 kernel.
pub(super) trait Avx2Pick: Elem {
    /// The op math type (f32, or f64 for f64).
    type Lane: Copy + Default + Max + PartialEq;
    /// One AVX register of op math values.
    type V: Copy;
    /// Values per register.
    const W: usize;
    /// W copies of `x`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C (every method).
    unsafe fn splat(x: Self::Lane) -> Self::V;
    /// W elements at `p` (any alignment), widened.
    ///
    /// # Safety
    /// AVX2 and F16C; W readable elements at `p`.
    unsafe fn load(p: *const Self) -> Self::V;
    /// Stores W values narrowed at `p` (any alignment); exact for values
    /// widened from Self.
    ///
    /// # Safety
    /// AVX2 and F16C; W writable elements at `p`.
    unsafe fn store(p: *mut Self, v: Self::V);
    /// Stores W op math values at `p` (any alignment).
    ///
    /// # Safety
    /// AVX2 and F16C; W writable values at `p`.
    unsafe fn store_lanes(p: *mut Self::Lane, v: Self::V);
    /// [`pick`] lane by lane: `o` where it is beyond `acc` or NaN.
    ///
    /// # Safety
    /// AVX2 and F16C.
    unsafe fn pick<const MAX: bool>(acc: Self::V, o: Self::V) -> Self::V;
    /// `to_op`: the element in op math.
    fn widen(self) -> Self::Lane;
    /// `from_op`: an op math value as an element.
    fn narrow(v: Self::Lane) -> Self;
}

macro_rules! avx2_pick {
    ($t:ty, $lane:ty, $v:ty, $w:expr, splat: $splat:ident, max: $max:ident,
     min: $min:ident, blend: $blend:ident, cmp: $cmp:ident, store_lanes: $stl:ident,
     |$p:ident| $load:expr, |$q:ident, $x:ident| $store:expr) => {
        impl Avx2Pick for $t {
            type Lane = $lane;
            type V = $v;
            const W: usize = $w;
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn splat(x: $lane) -> $v {
                $splat(x)
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn load($p: *const $t) -> $v {
                // SAFETY: W readable elements at p (the caller's).
                unsafe { $load }
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn store($q: *mut $t, $x: $v) {
                // SAFETY: W writable elements at p (the caller's).
                unsafe { $store }
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn store_lanes(p: *mut $lane, v: $v) {
                // SAFETY: W writable values at p (the caller's).
                unsafe { $stl(p, v) }
            }
            #[inline]
            #[target_feature(enable = "avx2,f16c")]
            unsafe fn pick<const MAX: bool>(acc: $v, o: $v) -> $v {
                let r = if MAX { $max(o, acc) } else { $min(o, acc) };
                $blend(r, o, $cmp::<_CMP_UNORD_Q>(o, o))
            }
            #[inline(always)]
            fn widen(self) -> $lane {
                self.to_op()
            }
            #[inline(always)]
            fn narrow(v: $lane) -> Self {
                <$t>::from_op(v)
            }
        }
    };
}

/// Eight f32 values narrowed to bfloat16 and stored: the top halves, a
/// NaN's quiet bit set (as `bf16::from_f32` does; other values are exact).
///
/// # Safety
/// AVX2; eight writable bfloat16 at `p`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_bf16(p: *mut bf16, v: __m256) {
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
    let quiet = _mm256_and_si256(nan, _mm256_set1_epi32(0x0040_0000));
    let bits = _mm256_srli_epi32::<16>(_mm256_or_si256(_mm256_castps_si256(v), quiet));
    let packed = _mm256_permute4x64_epi64::<0b1000>(_mm256_packus_epi32(bits, bits));
    // SAFETY: eight writable bfloat16 at p (the caller's).
    unsafe { _mm_storeu_si128(p as *mut __m128i, _mm256_castsi256_si128(packed)) }
}

avx2_pick!(f32, f32, __m256, 8, splat: _mm256_set1_ps, max: _mm256_max_ps,
    min: _mm256_min_ps, blend: _mm256_blendv_ps, cmp: _mm256_cmp_ps,
    store_lanes: _mm256_storeu_ps,
    |p| _mm256_loadu_ps(p), |q, x| _mm256_storeu_ps(q, x));
avx2_pick!(f64, f64, __m256d, 4, splat: _mm256_set1_pd, max: _mm256_max_pd,
    min: _mm256_min_pd, blend: _mm256_blendv_pd, cmp: _mm256_cmp_pd,
    store_lanes: _mm256_storeu_pd,
    |p| _mm256_loadu_pd(p), |q, x| _mm256_storeu_pd(q, x));
avx2_pick!(f16, f32, __m256, 8, splat: _mm256_set1_ps, max: _mm256_max_ps,
    min: _mm256_min_ps, blend: _mm256_blendv_ps, cmp: _mm256_cmp_ps,
    store_lanes: _mm256_storeu_ps,
    |p| _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
    |q, x| _mm_storeu_si128(q as *mut __m128i, _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x)));
avx2_pick!(bf16, f32, __m256, 8, splat: _mm256_set1_ps, max: _mm256_max_ps,
    min: _mm256_min_ps, blend: _mm256_blendv_ps, cmp: _mm256_cmp_ps,
    store_lanes: _mm256_storeu_ps,
    |p| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
        _mm_loadu_si128(p as *const __m128i)))),
    |q, x| store_bf16(q, x));

/// The lanes of one run after its whole groups: the registers stored,
/// the tail picked into lanes 0.. in order, the lanes folded in order.
///
/// # Safety
/// AVX2 and F16C; `n` readable values at `p`, `i` <= n a multiple of
/// 2 * W.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn finish<T: Avx2Pick, const MAX: bool>(
    a: [T::V; 2],
    p: *const T,
    i: usize,
    n: usize,
) -> T::Lane {
    let mut lanes = [T::Lane::default(); 16];
    // SAFETY: 2 * W <= 16 lanes written; the tail reads i..n (the
    // caller's run), fewer than 2 * W values.
    unsafe {
        for (u, v) in a.into_iter().enumerate() {
            T::store_lanes(lanes.as_mut_ptr().add(u * T::W), v);
        }
        for k in i..n {
            let l = k - i;
            lanes[l] = pick::<T::Lane, MAX>(lanes[l], p.add(k).read_unaligned().widen());
        }
    }
    fold_picked::<T::Lane, MAX>(&lanes[..2 * T::W])
}

/// The pick of a run of `n` contiguous values (see the module).
///
/// # Safety
/// AVX2 and F16C; `n` readable values at `p` (any alignment).
#[target_feature(enable = "avx2,f16c")]
unsafe fn pick_one<T: Avx2Pick, const MAX: bool>(p: *const T, n: usize) -> T::Lane {
    let width = 2 * T::W;
    let mut i = 0;
    // SAFETY: AVX2 and F16C (this function's features); the loads read
    // p[i..i + 2 * W] while that is inside the run; finish reads the rest.
    unsafe {
        let mut a = [T::splat(pick_identity::<T::Lane, MAX>()); 2];
        while i + width <= n {
            for (u, v) in a.iter_mut().enumerate() {
                *v = T::pick::<MAX>(*v, T::load(p.add(i + u * T::W)));
            }
            i += width;
        }
        finish::<T, MAX>(a, p, i, n)
    }
}

/// [`pick_one`] of four runs of `n` values in one pass (four memory
/// streams), each result bit-identical to that function's.
///
/// # Safety
/// AVX2 and F16C; `n` readable values at each `p[k]` (any alignment).
#[target_feature(enable = "avx2,f16c")]
unsafe fn pick_x4<T: Avx2Pick, const MAX: bool>(p: [*const T; 4], n: usize) -> [T::Lane; 4] {
    let width = 2 * T::W;
    let mut i = 0;
    // SAFETY: as in pick_one, for each run.
    unsafe {
        let mut a = [[T::splat(pick_identity::<T::Lane, MAX>()); 2]; 4];
        while i + width <= n {
            for (acc, q) in a.iter_mut().zip(p) {
                for (u, v) in acc.iter_mut().enumerate() {
                    *v = T::pick::<MAX>(*v, T::load(q.add(i + u * T::W)));
                }
            }
            i += width;
        }
        [0, 1, 2, 3].map(|k| finish::<T, MAX>(a[k], p[k], i, n))
    }
}

/// `acc[i] = pick(acc[i], tree(r0[i], .., r(K-1)[i]))` over `n` values,
/// in [`tree`]'s order (the portable `add_rows_xk`'s).
///
/// # Safety
/// AVX2 and F16C; `n` values at `acc` and at each row, readable (and
/// `acc` writable), `acc` overlapping no row; K a power of two.
#[target_feature(enable = "avx2,f16c")]
unsafe fn pick_rows<T: Avx2Pick, const MAX: bool, const K: usize>(
    acc: *mut T,
    rows: [*const T; K],
    n: usize,
) {
    let mut i = 0;
    // SAFETY: every access is below n (the caller's runs).
    unsafe {
        while i + T::W <= n {
            let v = tree(rows.map(|p| T::load(p.add(i))), |a, b| T::pick::<MAX>(a, b));
            T::store(acc.add(i), T::pick::<MAX>(T::load(acc.add(i)), v));
            i += T::W;
        }
        let combine = |a: T, b: T| T::narrow(pick::<T::Lane, MAX>(a.widen(), b.widen()));
        for i in i..n {
            let v = tree(rows.map(|p| p.add(i).read_unaligned()), combine);
            let a = acc.add(i);
            a.write_unaligned(combine(a.read_unaligned(), v));
        }
    }
}

/// Calls `$f!(T)` with the AVX2 element type that is `$t` when the CPU
/// has AVX2 and F16C; evaluates to None otherwise.
macro_rules! for_avx2_pick {
    ($in:ty, |$t:ident| $body:expr) => {{
        let avx = crate::kernels::simd::avx2_enabled();
        match <$in as Elem>::DTYPE {
            DType::Float if avx => {
                type $t = f32;
                Some($body)
            }
            DType::Double if avx => {
                type $t = f64;
                Some($body)
            }
            DType::Half if avx => {
                type $t = f16;
                Some($body)
            }
            DType::BFloat16 if avx => {
                type $t = bf16;
                Some($body)
            }
            _ => None,
        }
    }};
}

// For avx2_indexed.rs, over the same element types.
pub(super) use for_avx2_pick;

/// The pick of a contiguous run of `n` (>= 1) T values through its AVX2
/// kernel, with the bits of the portable lanes; None where T has none.
///
/// # Safety
/// `n` readable contiguous T values at `p` (any alignment).
#[inline(always)]
pub(super) unsafe fn run<T: Elem, const MAX: bool>(p: *const u8, n: usize) -> Option<T::Op> {
    for_avx2_pick!(T, |A| {
        // SAFETY: for_avx2_pick checked AVX2 and F16C; T is A (its DType,
        // and Elem's contract: one Elem type per DType), so the run is n
        // values of A, and T::Op is A's op math type.
        unsafe { transmute_copy::<_, T::Op>(&pick_one::<A, MAX>(p as *const A, n)) }
    })
}

/// [`run`] of four contiguous runs of `n` T values in one pass, each with
/// that function's bits; None where T has no kernel.
///
/// # Safety
/// `n` readable contiguous T values at each `q[k]` (any alignment).
#[inline(always)]
pub(super) unsafe fn runs_x4<T: Elem, const MAX: bool>(
    q: [*const u8; 4],
    n: usize,
) -> Option<[T::Op; 4]> {
    for_avx2_pick!(T, |A| {
        // SAFETY: as in run, for each of the four runs.
        unsafe {
            pick_x4::<A, MAX>(q.map(|p| p as *const A), n).map(|v| transmute_copy::<_, T::Op>(&v))
        }
    })
}

/// `acc[i] = pick(acc[i], tree(rows[i]))` over `n` contiguous values
/// ([`pick_rows`]); false (nothing done) where R is not a pick with a
/// kernel.
///
/// # Safety
/// `n` values at `acc` (readable and writable) and `n` readable
/// contiguous R::In values at each row, `acc` overlapping no row; K a
/// power of two.
#[inline(always)]
pub(super) unsafe fn pick_rows_xk<R: Reducer, const K: usize>(
    acc: *mut R::Acc,
    rows: [*const R::In; K],
    n: usize,
) -> bool {
    if !matches!(R::KIND, Kind::Max | Kind::Min) {
        return false;
    }
    // A pick's accumulator is its input type (reducers.rs).
    debug_assert_eq!(R::In::DTYPE, R::Acc::DTYPE);
    for_avx2_pick!(R::In, |A| {
        let (acc, rows) = (acc as *mut A, rows.map(|p| p as *const A));
        // SAFETY: as in run: the rows and the outputs are A values.
        unsafe {
            if R::KIND == Kind::Max {
                pick_rows::<A, true, K>(acc, rows, n)
            } else {
                pick_rows::<A, false, K>(acc, rows, n)
            }
        }
    })
    .is_some()
}
