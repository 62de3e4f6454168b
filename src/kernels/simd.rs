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
    // SAFETY (whole body): indices stay below n; F16C per the caller.
    unsafe {
        let stream = stream && (dst as usize) % 2 == 0;
        if stream {
            while i < n && (dst.add(i) as usize) % 16 != 0 {
                *dst.add(i) = half::f16::from_f32(*src.add(i)).to_bits();
                i += 1;
            }
        }
        while i + 32 <= n {
            for k in 0..4 {
                let v = _mm256_loadu_ps(src.add(i + 8 * k));
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                let p = dst.add(i + 8 * k) as *mut __m128i;
                if stream {
                    _mm_stream_si128(p, h);
                } else {
                    _mm_storeu_si128(p, h);
                }
            }
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

/// f16 -> f32 with F16C (exact), 32 values per step.
///
/// # Safety
/// As [`f32_to_f16`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn f16_to_f32(src: *const u16, dst: *mut f32, n: usize, stream: bool) {
    use std::arch::x86_64::*;
    let mut i = 0;
    // SAFETY (whole body): indices stay below n; F16C per the caller.
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

/// The lane sum of `n` contiguous f32 values, bit-identical to the
/// portable 32-lane loop in reduce.rs: value i goes to lane i % 32 while
/// whole groups of 32 remain, the rest to lane 0, then lanes fold as a
/// tree (l += l + 16, then + 8, + 4, + 2, + 1). Four AVX registers hold
/// the 32 lanes, so the loop is four packed adds per 32 values.
///
/// # Safety
/// The CPU must have AVX2; `p` must hold `n` readable values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn sum_f32_lanes32(p: *const f32, n: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut lanes = [0f32; 32];
    // SAFETY (whole body): loads stay below n, per the caller.
    unsafe {
        let (mut a0, mut a1, mut a2, mut a3) = (
            _mm256_setzero_ps(),
            _mm256_setzero_ps(),
            _mm256_setzero_ps(),
            _mm256_setzero_ps(),
        );
        let mut i = 0;
        while i + 32 <= n {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p.add(i)));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p.add(i + 8)));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p.add(i + 16)));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p.add(i + 24)));
            i += 32;
        }
        let out = lanes.as_mut_ptr();
        _mm256_storeu_ps(out, a0);
        _mm256_storeu_ps(out.add(8), a1);
        _mm256_storeu_ps(out.add(16), a2);
        _mm256_storeu_ps(out.add(24), a3);
        while i < n {
            lanes[0] += *p.add(i);
            i += 1;
        }
    }
    let mut width = 32;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] += lanes[l + width];
        }
    }
    lanes[0]
}
