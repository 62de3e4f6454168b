//! Per-allocator statistics: lock-free counters, cheap enough to stay on.

use super::reporter;
use crate::device::Device;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters kept by every allocator.
#[derive(Debug, Default)]
pub struct Stats {
    allocated: AtomicU64,
    peak: AtomicU64,
    num_allocs: AtomicU64,
    num_frees: AtomicU64,
    num_failed: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Bytes currently allocated.
    pub allocated_bytes: u64,
    /// The highest `allocated_bytes` since creation or the last reset_peak.
    pub peak_bytes: u64,
    /// Successful allocations.
    pub num_allocs: u64,
    /// Frees.
    pub num_frees: u64,
    /// Failed allocation requests.
    pub num_failed: u64,
}

impl Stats {
    /// Records an allocation of `nbytes` at `ptr` and tells the reporter.
    #[inline]
    pub fn record_alloc(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = self.allocated.fetch_add(n, Relaxed) + n;
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
        self.num_allocs.fetch_add(1, Relaxed);
        reporter::report(ptr, nbytes as i64, now, device);
    }

    /// Records the free of `nbytes` at `ptr` and tells the reporter.
    #[inline]
    pub fn record_free(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = self.allocated.fetch_sub(n, Relaxed).wrapping_sub(n);
        self.num_frees.fetch_add(1, Relaxed);
        reporter::report(ptr, -(nbytes as i64), now, device);
    }

    /// Records a failed allocation.
    pub fn record_failure(&self) {
        self.num_failed.fetch_add(1, Relaxed);
    }

    /// Sets the peak to the current allocated bytes.
    pub fn reset_peak(&self) {
        self.peak.store(self.allocated.load(Relaxed), Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            allocated_bytes: self.allocated.load(Relaxed),
            peak_bytes: self.peak.load(Relaxed),
            num_allocs: self.num_allocs.load(Relaxed),
            num_frees: self.num_frees.load(Relaxed),
            num_failed: self.num_failed.load(Relaxed),
        }
    }
}
