//! The process-wide memory reporter: one callback that sees every
//! allocation and free of every allocator (c10's reportMemoryUsage hook).

use crate::device::Device;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// One allocation (+bytes) or free (-bytes).
#[derive(Debug, Clone, Copy)]
pub struct MemoryEvent {
    /// The data address.
    pub ptr: *const c_void,
    /// +nbytes for an allocation, -nbytes for a free.
    pub delta_bytes: i64,
    /// The allocator's allocated bytes after the event.
    pub total_allocated: u64,
    /// The device of the memory.
    pub device: Device,
}

/// A reporter callback.
pub type MemoryReporter = Arc<dyn Fn(&MemoryEvent) + Send + Sync>;

static ACTIVE: AtomicBool = AtomicBool::new(false);
static REPORTER: RwLock<Option<MemoryReporter>> = RwLock::new(None);

/// Installs (Some) or removes (None) the reporter. Calls already running
/// finish with the old one.
pub fn set_memory_reporter(reporter: Option<MemoryReporter>) {
    let mut slot = REPORTER.write().unwrap_or_else(|e| e.into_inner());
    ACTIVE.store(reporter.is_some(), Ordering::Release);
    *slot = reporter;
}

/// Whether a reporter is installed (a hint: it may change right after).
#[inline]
pub(crate) fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Tells the reporter, if one is installed.
#[inline]
pub(crate) fn report(ptr: *const c_void, delta_bytes: i64, total_allocated: u64, device: Device) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    report_slow(MemoryEvent {
        ptr,
        delta_bytes,
        total_allocated,
        device,
    });
}

#[cold]
fn report_slow(event: MemoryEvent) {
    let reporter = REPORTER.read().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(f) = reporter {
        f(&event);
    }
}
