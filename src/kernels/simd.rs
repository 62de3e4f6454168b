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
