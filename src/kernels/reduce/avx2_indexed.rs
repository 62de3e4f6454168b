//! AVX2 kernels of max / min with indices (indexed.rs), over the element
//! types of amax / amin's kernels (f32, f64, f16 and bfloat16 widened
//! into f32 lanes, [`Avx2Pick`]), with the portable loops' answers:
//!
//! - [`first_index`]: the first element of a contiguous run equal to a
//!   value (or the first NaN), eight or four at a time, where the
//!   portable search takes one;
//! - [`tile`]: the picks of up to `N` outputs lying side by side,
//!   four rows at a time, a register of outputs at a time: a lane takes the
//!   row's value where the portable `replaces` would (never after a NaN,
//!   else where the value is beyond the best or NaN), and its row index
//!   with it (i32 lanes: runs longer than `i32::MAX` take the portable
//!   loop). Only the indices leave the kernel: the caller reads each
//!   value back from the input, the element's own bits (a signaling NaN
//!   stays signaling, as in the portable loop).

use super::avx2_pick::{for_avx2_pick, Avx2Pick};
use super::pick::replaces;
use crate::dtype::DType;
use crate::kernels::elem::Elem;
use half::{bf16, f16};
use std::arch::x86_64::*;
use std::mem::transmute_copy;

/// The lane operations the two kernels need on one register of op math
/// values (eight f32 or four f64) and its row indices.
pub(super) trait Lanes: Copy {
    /// One register of i32 row indices, a lane per value lane.
    type Idx: Copy;
    /// The bit mask of the lanes equal to `m` (ordered: a NaN equals
    /// nothing), lane i in bit i.
    ///
    /// # Safety
    /// The CPU must have AVX2 (every method).
    unsafe fn eq_bits(x: Self, m: Self) -> u32;
    /// The bit mask of the NaN lanes.
    ///
    /// # Safety
    /// AVX2.
    unsafe fn nan_bits(x: Self) -> u32;
    /// The lanes where `x` replaces `best`: `best` is no NaN and `x` is
    /// beyond it (MAX: greater, else smaller) or NaN.
    ///
    /// # Safety
    /// AVX2.
    unsafe fn replaces<const MAX: bool>(best: Self, x: Self) -> Self;
    /// `x` where `mask`, else `a`.
    ///
    /// # Safety
    /// AVX2.
    unsafe fn blend(a: Self, x: Self, mask: Self) -> Self;
    /// W op math values at `p` (any alignment).
    ///
    /// # Safety
    /// AVX2; W readable values at `p`.
    unsafe fn load_lanes(p: *const u8) -> Self;
    /// W copies of the index `k`.
    ///
    /// # Safety
    /// AVX2.
    unsafe fn splat_idx(k: i32) -> Self::Idx;
    /// `k` where `mask`, else `at`.
    ///
    /// # Safety
    /// AVX2.
    unsafe fn blend_idx(at: Self::Idx, k: Self::Idx, mask: Self) -> Self::Idx;
    /// W indices at `p`.
    ///
    /// # Safety
    /// AVX2; W readable i32 at `p`.
    unsafe fn load_idx(p: *const i32) -> Self::Idx;
    /// Stores W indices at `p`.
    ///
    /// # Safety
    /// AVX2; W writable i32 at `p`.
    unsafe fn store_idx(p: *mut i32, v: Self::Idx);
}

impl Lanes for __m256 {
    type Idx = __m256i;
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn eq_bits(x: Self, m: Self) -> u32 {
        _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(x, m)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn nan_bits(x: Self) -> u32 {
        _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn replaces<const MAX: bool>(best: Self, x: Self) -> Self {
        // NGE_UQ(best, x): !(best >= x), true where x > best or either is
        // NaN (NLE_UQ for min); ORD(best, best) drops a NaN best.
        let beyond = if MAX {
            _mm256_cmp_ps::<_CMP_NGE_UQ>(best, x)
        } else {
            _mm256_cmp_ps::<_CMP_NLE_UQ>(best, x)
        };
        _mm256_and_ps(beyond, _mm256_cmp_ps::<_CMP_ORD_Q>(best, best))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn blend(a: Self, x: Self, mask: Self) -> Self {
        _mm256_blendv_ps(a, x, mask)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load_lanes(p: *const u8) -> Self {
        // SAFETY: eight readable f32 at p (the caller's).
        unsafe { _mm256_loadu_ps(p as *const f32) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn splat_idx(k: i32) -> __m256i {
        _mm256_set1_epi32(k)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn blend_idx(at: __m256i, k: __m256i, mask: Self) -> __m256i {
        _mm256_castps_si256(_mm256_blendv_ps(
            _mm256_castsi256_ps(at),
            _mm256_castsi256_ps(k),
            mask,
        ))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load_idx(p: *const i32) -> __m256i {
        // SAFETY: eight readable i32 at p (the caller's).
        unsafe { _mm256_loadu_si256(p as *const __m256i) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store_idx(p: *mut i32, v: __m256i) {
        // SAFETY: eight writable i32 at p (the caller's).
        unsafe { _mm256_storeu_si256(p as *mut __m256i, v) }
    }
}

impl Lanes for __m256d {
    type Idx = __m128i;
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn eq_bits(x: Self, m: Self) -> u32 {
        _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_EQ_OQ>(x, m)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn nan_bits(x: Self) -> u32 {
        _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_UNORD_Q>(x, x)) as u32
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn replaces<const MAX: bool>(best: Self, x: Self) -> Self {
        // As for f32.
        let beyond = if MAX {
            _mm256_cmp_pd::<_CMP_NGE_UQ>(best, x)
        } else {
            _mm256_cmp_pd::<_CMP_NLE_UQ>(best, x)
        };
        _mm256_and_pd(beyond, _mm256_cmp_pd::<_CMP_ORD_Q>(best, best))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn blend(a: Self, x: Self, mask: Self) -> Self {
        _mm256_blendv_pd(a, x, mask)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load_lanes(p: *const u8) -> Self {
        // SAFETY: four readable f64 at p (the caller's).
        unsafe { _mm256_loadu_pd(p as *const f64) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn splat_idx(k: i32) -> __m128i {
        _mm_set1_epi32(k)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn blend_idx(at: __m128i, k: __m128i, mask: Self) -> __m128i {
        // The four 64-bit lanes of the mask as four 32-bit lanes (their
        // low halves: every bit of a compare's lane is the same).
        let m = _mm256_permutevar8x32_epi32(
            _mm256_castpd_si256(mask),
            _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6),
        );
        _mm_blendv_epi8(at, k, _mm256_castsi256_si128(m))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load_idx(p: *const i32) -> __m128i {
        // SAFETY: four readable i32 at p (the caller's).
        unsafe { _mm_loadu_si128(p as *const __m128i) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store_idx(p: *mut i32, v: __m128i) {
        // SAFETY: four writable i32 at p (the caller's).
        unsafe { _mm_storeu_si128(p as *mut __m128i, v) }
    }
}

/// The first of `n` contiguous values at `p` equal to `m` (the first NaN
/// where `m` is NaN); `n` if none is.
///
/// # Safety
/// AVX2 and F16C; `n` readable values at `p` (any alignment).
#[target_feature(enable = "avx2,f16c")]
unsafe fn first_of<T: Avx2Pick, const NAN: bool>(p: *const T, n: usize, m: T::Lane) -> usize
where
    T::V: Lanes,
    T::Lane: PartialEq,
{
    // SAFETY: AVX2 and F16C (this function's features).
    let mv = unsafe { T::splat(m) };
    let mut i = 0;
    // SAFETY: the loads read p[i..i + W] while that is inside the run,
    // the tail p[i..n].
    unsafe {
        while i + T::W <= n {
            let x = T::load(p.add(i));
            let bits = if NAN {
                T::V::nan_bits(x)
            } else {
                T::V::eq_bits(x, mv)
            };
            if bits != 0 {
                return i + bits.trailing_zeros() as usize;
            }
            i += T::W;
        }
        #[allow(clippy::eq_op)] // x != x: NaN.
        let found = (i..n).find(|&k| {
            let x = p.add(k).read_unaligned().widen();
            if NAN {
                x != x
            } else {
                x == m
            }
        });
        found.unwrap_or(n)
    }
}

/// The index of the first of `n` (>= 1) contiguous T values at `p` equal
/// to `m` (the first NaN where `m` is NaN), 0 if none is: the portable
/// search's answer; None where T has no kernel.
///
/// # Safety
/// `n` readable contiguous T values at `p` (any alignment).
#[inline(always)]
pub(super) unsafe fn first_index<T: Elem>(p: *const u8, n: usize, m: T::Op) -> Option<usize> {
    for_avx2_pick!(T, |A| {
        // SAFETY: for_avx2_pick checked AVX2 and F16C; T is A (its DType,
        // one Elem type per DType), so the run is n values of A and T::Op
        // is A's op math type (A::Lane).
        unsafe {
            let m: <A as Avx2Pick>::Lane = transmute_copy(&m);
            #[allow(clippy::eq_op)] // m != m: NaN.
            let at = if m != m {
                first_of::<A, true>(p as *const A, n, m)
            } else {
                first_of::<A, false>(p as *const A, n, m)
            };
            if at == n {
                0
            } else {
                at
            }
        }
    })
}

/// The picks of `w` outputs whose runs start at `w` adjacent values at
/// `run`, `len` values each `step` bytes apart: their row indices into
/// `at[..w]`, as the portable tile finds them.
///
/// # Safety
/// AVX2 and F16C; `w <= N`, `2 <= len <= i32::MAX`; row k < len:
/// `w` readable contiguous values at `run + k * step`.
#[target_feature(enable = "avx2,f16c")]
unsafe fn tile_of<T: Avx2Pick, const MAX: bool, const N: usize>(
    run: *const T,
    step: isize,
    len: usize,
    w: usize,
    at: &mut [i32; N],
) where
    T::V: Lanes,
    T::Lane: PartialEq,
{
    let mut best = [T::Lane::default(); N];
    let full = w / T::W * T::W;
    // Every access to best goes through this pointer.
    let lanes = best.as_mut_ptr();
    // SAFETY: row 0's w values (the caller's); best and at hold N >= w.
    unsafe {
        for j in (0..full).step_by(T::W) {
            T::store_lanes(lanes.add(j), T::load(run.add(j)));
        }
        for j in full..w {
            lanes.add(j).write(run.add(j).read_unaligned().widen());
        }
    }
    at[..w].fill(0);
    // Rows in fours: a register of outputs takes four rows in order (each
    // row's replaces against the best after the row before), loaded and
    // stored once for the four; four memory streams.
    let mut k = 1;
    while k < len {
        let rows = if len - k >= 4 { 4 } else { 1 };
        let row: [*const T; 4] = std::array::from_fn(|u| {
            (run as *const u8).wrapping_offset((k + u.min(rows - 1)) as isize * step) as *const T
        });
        // SAFETY: AVX2 (this function's features); k + rows <= len <=
        // i32::MAX.
        let kk = unsafe { row_indices::<T>(k, rows) };
        // The next four rows, prefetched at the same columns: each row's
        // w values are a run of their own (4 KiB of f32 at TILE 1024),
        // too short for the hardware prefetcher to run ahead of (f32
        // [4096, 4096] along dim 0: 4.68 -> 4.50 ms). The last row stands
        // in for rows past the end.
        let next: [*const i8; 4] = std::array::from_fn(|u| {
            (run as *const u8).wrapping_offset((k + rows + u).min(len - 1) as isize * step)
                as *const i8
        });
        // SAFETY: rows k..k + rows (< len): values j < w (the caller's);
        // best and at's lanes j < w <= N.
        unsafe {
            for j in (0..full).step_by(T::W) {
                let mut b = T::V::load_lanes(lanes.add(j) as *const u8);
                let ix = at.as_mut_ptr().add(j);
                let mut a = T::V::load_idx(ix);
                let off = j * std::mem::size_of::<T>();
                for q in next {
                    _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(off));
                }
                for (r, &kr) in row.iter().zip(&kk).take(rows) {
                    let x = T::load(r.add(j));
                    let mask = T::V::replaces::<MAX>(b, x);
                    b = T::V::blend(b, x, mask);
                    a = T::V::blend_idx(a, kr, mask);
                }
                T::store_lanes(lanes.add(j), b);
                T::V::store_idx(ix, a);
            }
            for (j, a) in at[..w].iter_mut().enumerate().skip(full) {
                for (u, r) in row.iter().enumerate().take(rows) {
                    let x = r.add(j).read_unaligned().widen();
                    if replaces::<T::Lane, MAX>(lanes.add(j).read(), x) {
                        lanes.add(j).write(x);
                        *a = (k + u) as i32;
                    }
                }
            }
        }
        k += rows;
    }
}

/// The index registers of rows `k..k + rows` (1 <= rows <= 4; the
/// registers after them repeat the last row).
///
/// # Safety
/// AVX2; `k + rows - 1 <= i32::MAX`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn row_indices<T: Avx2Pick>(k: usize, rows: usize) -> [<T::V as Lanes>::Idx; 4]
where
    T::V: Lanes,
{
    // SAFETY: AVX2 (this function's features).
    std::array::from_fn(|u| unsafe { T::V::splat_idx((k + u.min(rows - 1)) as i32) })
}

/// [`tile_of`] where T has a kernel and the runs are at most `i32::MAX`
/// long: true with the row indices in `at[..w]`; false (nothing done)
/// otherwise.
///
/// # Safety
/// `w <= N`; row k < len: `w` readable contiguous T values at
/// `run + k * step`.
#[inline(always)]
pub(super) unsafe fn tile<T: Elem, const MAX: bool, const N: usize>(
    run: *const u8,
    step: isize,
    len: i64,
    w: usize,
    at: &mut [i32; N],
) -> bool {
    if !(2..=i32::MAX as i64).contains(&len) {
        return false;
    }
    for_avx2_pick!(T, |A| {
        // SAFETY: as in first_index: the rows hold A values; the caller's
        // tile, len checked above.
        unsafe { tile_of::<A, MAX, N>(run as *const A, step, len as usize, w, at) }
    })
    .is_some()
}
