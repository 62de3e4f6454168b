//! The one byte the allocation hot path reads to learn whether it must do
//! more than count: bit [`REPORTER`] (call the memory reporter) and bit
//! [`HISTORY`] (record a memory history event). One relaxed load serves
//! both, so memory history costs nothing while off beyond the load the
//! reporter already needed.

use std::sync::atomic::{AtomicU8, Ordering};

static ACTIVE: AtomicU8 = AtomicU8::new(0);
/// Set while a memory reporter is installed.
pub(crate) const REPORTER: u8 = 1;
/// Set while memory history records.
pub(crate) const HISTORY: u8 = 2;

/// The bits now (a hint: they may change right after).
#[inline(always)]
pub(crate) fn get() -> u8 {
    ACTIVE.load(Ordering::Relaxed)
}

/// Sets or clears `bit`.
pub(crate) fn set(bit: u8, on: bool) {
    if on {
        ACTIVE.fetch_or(bit, Ordering::Release);
    } else {
        ACTIVE.fetch_and(!bit, Ordering::Release);
    }
}

/// Held by the tests that set a bit and by those that need both off (a
/// caching allocator's thread front takes and parks nothing otherwise).
#[cfg(test)]
pub(crate) fn test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
