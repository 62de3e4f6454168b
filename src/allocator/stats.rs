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

    /// Records an allocation of `nbytes` for a backend that serializes every
    /// writer of these counters behind one lock of its own (the caching
    /// allocator): plain loads and stores instead of read-modify-writes,
    /// which would cost as much as the rest of a cached allocation. The peak
    /// still uses `fetch_max`, so a concurrent `reset_peak` stays coherent.
    /// Does not call the reporter; the caller reports after unlocking.
    /// Mixing this with [`Stats::record_alloc`] on one `Stats` loses counts.
    #[inline]
    pub(crate) fn record_alloc_serialized(&self, nbytes: usize) {
        let now = self.allocated.load(Relaxed) + nbytes as u64;
        self.allocated.store(now, Relaxed);
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
        self.num_allocs
            .store(self.num_allocs.load(Relaxed) + 1, Relaxed);
    }

    /// The free counterpart of [`Stats::record_alloc_serialized`], under
    /// the same lock.
    #[inline]
    pub(crate) fn record_free_serialized(&self, nbytes: usize) {
        let now = self.allocated.load(Relaxed).wrapping_sub(nbytes as u64);
        self.allocated.store(now, Relaxed);
        self.num_frees
            .store(self.num_frees.load(Relaxed) + 1, Relaxed);
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
