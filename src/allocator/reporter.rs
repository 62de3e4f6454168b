//! The process-wide memory reporter: one callback that sees every
//! allocation and free of every allocator (c10's reportMemoryUsage hook).

use super::active::{self, HISTORY, REPORTER};
use super::history::{self, Tag};
use crate::device::Device;
use crate::fork::{self, Held, Step};
use std::ffi::c_void;
use std::sync::{Arc, RwLock, RwLockWriteGuard};

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

static REPORTER_SLOT: RwLock<Option<MemoryReporter>> = RwLock::new(None);

/// Installs (Some) or removes (None) the reporter. Calls already running
/// finish with the old one.
pub fn set_memory_reporter(reporter: Option<MemoryReporter>) {
    fork::ensure_handlers(&FORK_STEP);
    let mut slot = REPORTER_SLOT.write().unwrap_or_else(|e| e.into_inner());
    active::set(REPORTER, reporter.is_some());
    let old = std::mem::replace(&mut *slot, reporter);
    drop(slot);
    // Released outside the lock: a C reporter's release callback may call
    // back into tessera (and no host code runs under a lock the atfork
    // handlers take, see crate::fork).
    drop(old);
}

/// The reporter slot's guard, from the atfork `prepare` handler to
/// `parent` or `child`.
static HELD: Held<RwLockWriteGuard<'static, Option<MemoryReporter>>> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(crate::fork::order::REPORTER, fork_prepare, fork_release);

/// Atfork `prepare`: holds the reporter slot.
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
pub(crate) unsafe fn fork_prepare() {
    let guard = REPORTER_SLOT.write().unwrap_or_else(|e| e.into_inner());
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put(guard) };
}

/// Atfork `parent` or `child`: releases the reporter slot (the child
/// keeps the reporter).
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
pub(crate) unsafe fn fork_release(_in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    drop(unsafe { HELD.take() });
}

/// Whether a reporter is installed or history records (a hint: it may
/// change right after).
#[inline]
pub(crate) fn is_active() -> bool {
    active::get() != 0
}

/// The recording bits (history, reporter) now; 0 when neither records.
#[inline(always)]
pub(crate) fn active_bits() -> u8 {
    active::get()
}

/// Records an event in the memory history only (`active` has the history
/// bit and not the reporter's): no total needed, no call through
/// [`report_slow`].
#[inline(always)]
pub(crate) fn record_history(tag: Option<&'static Tag>, ptr: *const c_void, delta_bytes: i64) {
    if let Some(tag) = tag {
        history::record_change(tag, ptr as usize, delta_bytes);
    }
}

/// Reports an event while `active` (from [`active_bits`]) is not 0: the
/// slow half of [`report`], for a caller that already read the bits.
#[inline(always)]
pub(crate) fn report_active(
    active: u8,
    tag: Option<&'static Tag>,
    ptr: *const c_void,
    delta_bytes: i64,
    total_allocated: u64,
    device: Device,
) {
    report_slow(
        active,
        tag,
        MemoryEvent {
            ptr,
            delta_bytes,
            total_allocated,
            device,
        },
    );
}

/// Tells the reporter, if one is installed, and records the event in the
/// memory history, if it records. `tag` names the allocator (None: an
/// allocator being destroyed, whose events are not recorded).
#[inline]
pub(crate) fn report(
    tag: Option<&'static Tag>,
    ptr: *const c_void,
    delta_bytes: i64,
    total_allocated: u64,
    device: Device,
) {
    let active = active::get();
    if active == 0 {
        return;
    }
    report_active(active, tag, ptr, delta_bytes, total_allocated, device);
}

#[cold]
#[inline(never)]
fn report_slow(active: u8, tag: Option<&'static Tag>, event: MemoryEvent) {
    if active & HISTORY != 0 {
        if let Some(tag) = tag {
            history::record_change(tag, event.ptr as usize, event.delta_bytes);
        }
    }
    if active & REPORTER != 0 {
        let reporter = REPORTER_SLOT
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(f) = reporter {
            f(&event);
        }
    }
}
