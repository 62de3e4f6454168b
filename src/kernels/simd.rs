//! Run-time choice of the instruction set for the hot loops.
//!
//! The crate is built for the x86-64 baseline (SSE2). The inner loops are
//! generic `#[inline(always)]` functions; each has a twin compiled with
//! `#[target_feature(enable = "avx2,f16c")]` that the kernels call when
//! the CPU has those features, so the same source is vectorized 8 floats
//! wide where AVX2 exists and 4 wide elsewhere.
//!
//! `TSR_DISABLE_AVX2=1` in the environment (read once) or
//! [`set_avx2_enabled`]`(false)` forces the baseline loops, for
//! measurements and tests.

use std::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

static AVX2: AtomicU8 = AtomicU8::new(UNKNOWN);

fn detect() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the AVX2 + F16C loops run.
#[inline]
pub fn avx2_enabled() -> bool {
    match AVX2.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => init(),
    }
}

#[cold]
fn init() -> bool {
    let disabled = std::env::var_os("TSR_DISABLE_AVX2").is_some_and(|v| v != "0" && !v.is_empty());
    let on = !disabled && detect();
    AVX2.store(if on { ON } else { OFF }, Ordering::Relaxed);
    on
}

/// Turns the AVX2 + F16C loops on (only if the CPU has both) or off;
/// returns whether they are now on.
pub fn set_avx2_enabled(on: bool) -> bool {
    let on = on && detect();
    AVX2.store(if on { ON } else { OFF }, Ordering::Relaxed);
    on
}

/// Outputs of at least this many bytes (32 MiB, the last-level cache of
/// one AMD CCD or a mid-size Intel part) are written with non-temporal
/// (streaming) stores: they cannot stay in the cache anyway, and streaming
/// skips the read-for-ownership of every destination line (a third less
/// memory traffic for `out = a + b`). sysconf's cache size is not used: in
/// virtual machines it reports the host's total (256 MiB here).
pub(crate) const STREAM_MIN_BYTES: usize = 32 << 20;

/// Streamed conversions of at least this many values read and write four
/// parts of the run at once.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const STREAMS_MIN: usize = 1 << 16;

/// Whether an operation writing `bytes` should stream its stores.
#[inline]
pub(crate) fn should_stream(bytes: usize) -> bool {
    cfg!(target_arch = "x86_64") && bytes >= STREAM_MIN_BYTES
}

/// Stores `v` at `dst` with non-temporal stores (16 bytes at a time).
///
/// # Safety
/// `dst` must be 16-byte aligned and writable for `size_of::<[D; C]>()`
/// bytes, which must be a multiple of 16; call [`sfence`] after the last
/// streaming store of a run.
#[inline(always)]
pub(crate) unsafe fn stream_store<D: Copy, const C: usize>(dst: *mut u8, v: &[D; C]) {
    let bytes = std::mem::size_of::<[D; C]>();
    debug_assert!(bytes % 16 == 0 && (dst as usize) % 16 == 0);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let src = v.as_ptr() as *const __m128i;
        for k in 0..bytes / 16 {
            // SAFETY: SSE2 is part of x86-64; src holds `bytes` readable
            // bytes and dst is aligned and writable, per the caller.
            unsafe { _mm_stream_si128((dst as *mut __m128i).add(k), _mm_loadu_si128(src.add(k))) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: per the caller.
        unsafe { (dst as *mut [D; C]).write_unaligned(*v) };
    }
}

/// Orders earlier streaming stores before later stores (to be called at
/// the end of a run that streamed, before other threads read it).
#[inline(always)]
pub(crate) fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86-64; sfence has no operands.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// f32 -> f16 with F16C, 32 values per step, rounding to nearest even
/// (the `half` crate's rounding); `stream` writes with non-temporal stores
/// once the destination is 16-byte aligned.
///
/// # Safety
/// The CPU must have AVX2 and F16C; `src` and `dst` hold `n` elements and
/// do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f32_to_f16(src: *const f32, dst: *mut u16, n: usize, stream: bool) {
    use std::arch::x86_64::*;
    let mut i = 0;
    // SAFETY: AVX2 and F16C (this function's target features) are the
    // caller's guarantee, as are the two non-overlapping runs of n
    // elements. Indices stay below n: the head and tail loops test i < n;
    // `step(at)` touches at..at + 32, called where i + 32 <= n or inside
    // the four parts, which end at i + 4 * part <= n; the 8-wide loop
    // tests i + 8 <= n. Streaming stores are 16-byte aligned: the head
    // stops where dst + i is, and steps move by multiples of 32 values
    // (part and j are multiples of 32). The plain u16 / f32 accesses of
    // the head and tail also need `dst` and `src` aligned, which the
    // # Safety above leaves out: the one caller, cast::staged, requires
    // aligned runs, and cast_run checks alignment before calling it.
    unsafe {
        let stream = stream && (dst as usize) % 2 == 0;
        if stream {
            while i < n && (dst.add(i) as usize) % 16 != 0 {
                *dst.add(i) = half::f16::from_f32(*src.add(i)).to_bits();
                i += 1;
            }
        }
        // 32 values from `at`.
        let step = |at: usize| {
            for k in 0..4 {
                let v = _mm256_loadu_ps(src.add(at + 8 * k));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                let p = dst.add(at + 8 * k) as *mut __m128i;
                if stream {
                    _mm_stream_si128(p, h);
                } else {
                    _mm_storeu_si128(p, h);
                }
            }
        };
        if stream && n - i >= STREAMS_MIN {
            // Four equal parts (multiples of 32 values, so each stays
            // 16-byte aligned) converted in one pass: four read and four
            // write streams in flight (one pair is limited by the line
            // fills a core keeps outstanding).
            let part = (n - i) / 4 / 32 * 32;
            for j in (0..part).step_by(32) {
                for k in 0..4 {
                    step(i + k * part + j);
                }
            }
            i += 4 * part;
        }
        while i + 32 <= n {
            step(i);
            i += 32;
        }
        while i + 8 <= n {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(src.add(i)));
            _mm_storeu_si128(dst.add(i) as *mut __m128i, h);
            i += 8;
        }
        while i < n {
            *dst.add(i) = half::f16::from_f32(*src.add(i)).to_bits();
            i += 1;
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// The constants of an IEEE-like float8 format with a saturating or
/// infinite top (e4m3fn, e5m2) for [`f32_to_f8`].
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct F8Consts {
    /// Mantissa bits.
    pub m: u32,
    /// Exponent bias.
    pub bias: i32,
    /// The largest code a finite or infinite value encodes to (0x7E for
    /// e4m3fn's saturation, 0x7C for e5m2's inf).
    pub top: i32,
    /// The scalar conversion (tails; must agree with the vector one).
    pub scalar: fn(f32) -> u8,
}

/// e4m3fn: saturates at 448 (0x7E), NaN 0x7F.
#[cfg(target_arch = "x86_64")]
pub(crate) const E4M3FN: F8Consts = F8Consts {
    m: 3,
    bias: 7,
    top: 0x7E,
    scalar: crate::dtype::float8::f32_to_e4m3fn,
};

/// e5m2: overflows to inf (0x7C), NaN 0x7F.
#[cfg(target_arch = "x86_64")]
pub(crate) const E5M2: F8Consts = F8Consts {
    m: 2,
    bias: 15,
    top: 0x7C,
    scalar: crate::dtype::float8::f32_to_e5m2,
};

/// f32 -> e4m3fn or e5m2 (c10's rounding: nearest even; NaN 0x7F with the
/// sign; past the top, `c.top`), 32 values per step, bit-identical to
/// `c.scalar`. Normal results round with integer arithmetic on the f32
/// bits (rebias, add half an ulp less one plus the kept lsb, shift);
/// results below the format's smallest normal round by a float add that
/// aligns the value to the subnormal unit (the FPU's nearest even).
///
/// # Safety
/// The CPU must have AVX2; `src` holds `n` readable f32, `dst` `n`
/// writable bytes, not overlapping. The MXCSR rounding mode must be the
/// default (nearest), as everywhere in Rust.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn f32_to_f8(src: *const f32, dst: *mut u8, n: usize, c: F8Consts) {
    use std::arch::x86_64::*;
    let shift = 23 - c.m;
    // The smallest normal, 2^(1 - bias), as f32 bits.
    let min_normal = ((128 - c.bias) as u32) << 23;
    // Adding 2^(min_exp - 1 + 23 - m + 1)... = a float whose ulp is the
    // subnormal unit 2^(1 - bias - m): exponent field 127 + 1 - bias - m + 23.
    let magic_field = (127 + 1 - c.bias - c.m as i32 + 23) as u32;
    // SAFETY: AVX2 (this function's target feature) is the caller's
    // guarantee, as are n readable f32 at `src` and n writable bytes at
    // `dst`, not overlapping. Indices stay below n: each pass of the main
    // loop reads src[i..i + 32] (four code8 calls of 8 values) and writes
    // dst[i..i + 32] only while i + 32 <= n; the tail tests i < n. The
    // tail's plain f32 read also needs `src` aligned, which the # Safety
    // leaves out: the one caller, cast_run, checks it (`contiguous`).
    unsafe {
        let sign_mask = _mm256_set1_epi32(i32::MIN);
        let inf = _mm256_set1_epi32(0x7F80_0000);
        let nan_code = _mm256_set1_epi32(0x7F);
        let top = _mm256_set1_epi32(c.top);
        let min_norm = _mm256_set1_epi32(min_normal as i32);
        let rebias = _mm256_set1_epi32(
            (((c.bias - 127) as u32) << 23).wrapping_add((1 << (shift - 1)) - 1) as i32,
        );
        let one = _mm256_set1_epi32(1);
        let magic_bits = _mm256_set1_epi32((magic_field << 23) as i32);
        let magic = _mm256_castsi256_ps(magic_bits);
        let shift_v = _mm_cvtsi32_si128(shift as i32);
        let code8 = |at: usize| -> __m256i {
            let x = _mm256_loadu_si256(src.add(at) as *const __m256i);
            let sign = _mm256_and_si256(x, sign_mask);
            let a = _mm256_xor_si256(x, sign);
            // Normal: (a + rebias + lsb) >> shift.
            let lsb = _mm256_and_si256(_mm256_srl_epi32(a, shift_v), one);
            let normal =
                _mm256_srl_epi32(_mm256_add_epi32(_mm256_add_epi32(a, rebias), lsb), shift_v);
            // Subnormal: (|x| + magic) - magic's bits.
            let sub = _mm256_sub_epi32(
                _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic)),
                magic_bits,
            );
            let is_sub = _mm256_cmpgt_epi32(min_norm, a);
            let code = _mm256_blendv_epi8(normal, sub, is_sub);
            // Past the top (inf included): the top; NaN: 0x7F.
            let code = _mm256_min_epi32(code, top);
            let is_nan = _mm256_cmpgt_epi32(a, inf);
            let code = _mm256_blendv_epi8(code, nan_code, is_nan);
            _mm256_or_si256(code, _mm256_srli_epi32::<24>(sign))
        };
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut i = 0;
        while i + 32 <= n {
            let ab = _mm256_packus_epi32(code8(i), code8(i + 8));
            let cd = _mm256_packus_epi32(code8(i + 16), code8(i + 24));
            let bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
            _mm256_storeu_si256(dst.add(i) as *mut __m256i, bytes);
            i += 32;
        }
        while i < n {
            *dst.add(i) = (c.scalar)(*src.add(i));
            i += 1;
        }
    }
}

/// f16 -> f32 with F16C (exact), 32 values per step.
///
/// # Safety
/// As [`f32_to_f16`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f16_to_f32(src: *const u16, dst: *mut f32, n: usize, stream: bool) {
    use std::arch::x86_64::*;
    let mut i = 0;
    // SAFETY: AVX2 and F16C (this function's target features) are the
    // caller's guarantee, as are the two non-overlapping runs of n
    // elements. Indices stay below n: the head and tail loops test i < n,
    // the main loop reads and writes i..i + 32 while i + 32 <= n.
    // Streaming stores are 32-byte aligned: the head stops where dst + i
    // is, and the main loop moves by 32 values (128 bytes), its stores by
    // 8 (32 bytes). The plain u16 / f32 accesses of the head and tail also
    // need `src` and `dst` aligned, which the # Safety leaves out: the one
    // caller, cast::staged, requires aligned runs, which cast_run checks.
    unsafe {
        let stream = stream && (dst as usize) % 4 == 0;
        if stream {
            while i < n && (dst.add(i) as usize) % 32 != 0 {
                *dst.add(i) = half::f16::from_bits(*src.add(i)).to_f32();
                i += 1;
            }
        }
        while i + 32 <= n {
            for k in 0..4 {
                let h = _mm_loadu_si128(src.add(i + 8 * k) as *const __m128i);
                let v = _mm256_cvtph_ps(h);
                if stream {
                    _mm256_stream_ps(dst.add(i + 8 * k), v);
                } else {
                    _mm256_storeu_ps(dst.add(i + 8 * k), v);
                }
            }
            i += 32;
        }
        while i < n {
            *dst.add(i) = half::f16::from_bits(*src.add(i)).to_f32();
            i += 1;
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// memcpy with streaming stores for copies larger than the cache: bytes up
/// to the first 32-byte aligned destination address and the tail are
/// copied normally, the rest with 32-byte (AVX2) or 16-byte (SSE2)
/// non-temporal stores, then an sfence. (glibc's memcpy streams only above
/// a threshold derived from the cache size the CPU reports, which virtual
/// machines can overstate.)
///
/// # Safety
/// `src` readable and `dst` writable for `bytes`, not overlapping.
pub(crate) unsafe fn stream_copy(dst: *mut u8, src: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let head = ((32 - (dst as usize) % 32) % 32).min(bytes);
        let body = (bytes - head) / 32 * 32;
        // SAFETY: all ranges lie inside the caller's `bytes`.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let (d, s) = (dst.add(head), src.add(head));
            if avx2_enabled() {
                stream_body_avx2(d, s, body);
            } else {
                use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
                for k in (0..body).step_by(16) {
                    _mm_stream_si128(
                        d.add(k) as *mut __m128i,
                        _mm_loadu_si128(s.add(k) as *const __m128i),
                    );
                }
            }
            std::ptr::copy_nonoverlapping(s.add(body), d.add(body), bytes - head - body);
        }
        sfence();
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: per the caller.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, bytes)
    };
}

/// The 32-byte streaming loop of [`stream_copy`].
///
/// # Safety
/// AVX2; `dst` 32-byte aligned; both valid for `bytes` (a multiple of 32).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn stream_body_avx2(dst: *mut u8, src: *const u8, bytes: usize) {
    use std::arch::x86_64::*;
    for k in (0..bytes).step_by(128) {
        if k + 128 <= bytes {
            // SAFETY: k + 128 <= bytes; dst aligned.
            unsafe {
                for q in (0..128).step_by(32) {
                    let v = _mm256_loadu_si256(src.add(k + q) as *const __m256i);
                    _mm256_stream_si256(dst.add(k + q) as *mut __m256i, v);
                }
            }
        } else {
            for q in (k..bytes).step_by(32) {
                // SAFETY: q + 32 <= bytes; dst aligned.
                unsafe {
                    let v = _mm256_loadu_si256(src.add(q) as *const __m256i);
                    _mm256_stream_si256(dst.add(q) as *mut __m256i, v);
                }
            }
        }
    }
}
