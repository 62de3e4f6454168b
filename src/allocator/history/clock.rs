//! The clock of memory history events: the time-stamp counter where it
//! can order events of different cores, converted to nanoseconds only
//! when a snapshot is written.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

/// The clock's origin: an Instant and the tick count read with it.
pub(super) fn origin() -> &'static (Instant, u64) {
    static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();
    ORIGIN.get_or_init(|| {
        TSC.store(tsc_is_synchronized(), Relaxed);
        (Instant::now(), ticks())
    })
}

/// Whether [`ticks`] reads the time-stamp counter (decided once, before
/// the first event is recorded).
static TSC: AtomicBool = AtomicBool::new(false);

/// Whether every core's time-stamp counter runs in step, so that the
/// stamps of events recorded on different cores order them. On Linux,
/// when the kernel uses it as its clocksource (it checks exactly that
/// first); elsewhere, on x86-64, assumed (an invariant TSC).
fn tsc_is_synchronized() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    if cfg!(target_os = "linux") {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    } else {
        true
    }
}

/// A cheap monotonic tick count: the time-stamp counter on x86-64 where
/// it is synchronized across cores (a few nanoseconds to read, where
/// clock_gettime can take tens on virtual machines), converted to
/// nanoseconds only when a snapshot is written ([`TickScale`]);
/// nanoseconds of Instant otherwise.
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if TSC.load(Relaxed) {
        // SAFETY: rdtsc has no preconditions; every x86-64 CPU has it.
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Converts tick counts to nanoseconds since the clock's origin, with the
/// rate measured between the origin and now (the invariant TSC of every
/// x86-64 CPU of the last fifteen years ticks at a constant rate).
pub(crate) struct TickScale {
    t0: u64,
    ns_per_tick: f64,
    /// Now, in nanoseconds since the origin.
    pub(crate) now_ns: u64,
}

impl TickScale {
    /// The scale now.
    pub(crate) fn now() -> TickScale {
        let (i0, t0) = *origin();
        let (t, ns) = (ticks(), i0.elapsed().as_nanos() as u64);
        let ns_per_tick = if t > t0 && ns > 0 {
            ns as f64 / (t - t0) as f64
        } else {
            1.0
        };
        TickScale {
            t0,
            ns_per_tick,
            now_ns: ns,
        }
    }

    /// `t` (from [`ticks`]) in nanoseconds since the origin.
    pub(crate) fn ns(&self, t: u64) -> u64 {
        (((t.saturating_sub(self.t0)) as f64 * self.ns_per_tick) as u64).min(self.now_ns)
    }
}

/// Nanoseconds since the first use of this clock in the process.
pub fn now_ns() -> u64 {
    origin().0.elapsed().as_nanos() as u64
}
