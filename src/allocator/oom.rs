//! Out-of-memory observers (c10's ProfiledCPUMemoryReporter::OutOfMemory,
//! for every allocator): called when an allocation fails for lack of
//! memory, before the failing call returns its error, after the
//! allocator's own recovery (caching allocators return their unused
//! segments and retry; the CPU allocator frees its thread caches and
//! retries) failed too.

use super::{history, AllocatorImpl, MemoryInfo, OomReport};
use crate::device::Device;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

/// What an observer is told.
#[derive(Debug, Clone, Copy)]
pub struct OomEvent<'a> {
    /// The allocator that failed.
    pub allocator: &'a CStr,
    /// The device it was asked for.
    pub device: Device,
    /// The bytes requested.
    pub requested: usize,
    /// The allocator's allocated bytes at the failure.
    pub allocated_bytes: u64,
    /// The device's free and total memory at the failure, where the
    /// allocator can tell (cuMemGetInfo on CUDA; the host's free and
    /// physical memory for the CPU allocator and caching layers over it).
    pub device_memory: Option<MemoryInfo>,
}

/// An observer.
pub type OomObserver = Arc<dyn Fn(&OomEvent<'_>) + Send + Sync>;

static ANY: AtomicBool = AtomicBool::new(false);
static OBSERVERS: RwLock<Vec<OomObserver>> = RwLock::new(Vec::new());

/// Adds an observer (they are never removed: as c10's, they live as long
/// as the process).
pub fn add_oom_observer(f: OomObserver) {
    OBSERVERS.write().unwrap_or_else(|e| e.into_inner()).push(f);
    ANY.store(true, Relaxed);
}

/// [`notify`] if `report` asks for it and `e` is a failure for want of
/// memory.
#[cold]
#[inline(never)]
pub(crate) fn notify_if(
    report: OomReport,
    e: &crate::error::Error,
    owner: &AllocatorImpl,
    requested: usize,
    device: Device,
) {
    if report == OomReport::Notify && e.kind() == crate::error::ErrorKind::OutOfMemory {
        self::notify(owner, requested, device);
    }
}

/// Tells the history and every observer that `owner` failed to allocate
/// `requested` bytes on `device`. The observers run outside any lock of
/// tessera's, so they may call back into it (allocate, take a snapshot).
#[cold]
pub(crate) fn notify(owner: &AllocatorImpl, requested: usize, device: Device) {
    if let Some(tag) = owner.stats().tag() {
        history::record_oom(tag, requested);
    }
    if !ANY.load(Relaxed) {
        return;
    }
    let observers = OBSERVERS.read().unwrap_or_else(|e| e.into_inner()).clone();
    let device_memory = owner
        .backend()
        .device_hooks()
        .memory_info
        .and_then(|f| f(device).ok());
    let event = OomEvent {
        allocator: owner.c_name(),
        device,
        requested,
        allocated_bytes: owner.stats().snapshot().allocated_bytes,
        device_memory,
    };
    for f in &observers {
        f(&event);
    }
}
