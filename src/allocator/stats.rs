//! Per-allocator statistics: lock-free counters, cheap enough to stay on.
//!
//! Allocated bytes and the peak are one shared atomic each (the peak must
//! compare against the exact running total). The allocation and free
//! counts of the built-in CPU allocator, the hot path, are kept per thread
//! (thread_counts.rs: a plain load and store on the thread's own shard, no
//! locked instruction) and summed when read; other allocators count with
//! atomics.

use super::history::Tag;
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
    /// Count allocations and frees in per-thread shards (one Stats only:
    /// the built-in CPU allocator's).
    per_thread_counts: bool,
    /// The allocator's identity in memory history events (None for
    /// statistics that belong to no allocator).
    tag: Option<&'static Tag>,
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
    /// Statistics whose counts live in per-thread shards (tests).
    #[cfg(test)]
    pub(crate) fn with_per_thread_counts() -> Stats {
        Stats {
            per_thread_counts: true,
            ..Stats::default()
        }
    }

    /// Statistics of the allocator `tag` names.
    pub(crate) fn tagged(tag: &'static Tag, per_thread_counts: bool) -> Stats {
        Stats {
            per_thread_counts,
            tag: Some(tag),
            ..Stats::default()
        }
    }

    /// The allocator's identity in memory history events.
    pub(crate) fn tag(&self) -> Option<&'static Tag> {
        self.tag
    }

    /// Records an allocation of `nbytes` at `ptr` and tells the reporter.
    #[inline]
    pub fn record_alloc(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        self.num_allocs.fetch_add(1, Relaxed);
        self.record_alloc_bytes(ptr, nbytes, device);
    }

    /// Records the free of `nbytes` at `ptr` and tells the reporter.
    #[inline]
    pub fn record_free(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        self.num_frees.fetch_add(1, Relaxed);
        self.record_free_bytes(ptr, nbytes, device);
    }

    /// The bytes, peak and report of an allocation whose count the caller
    /// keeps in its thread's shard ([`super::thread_counts`]), or adds with
    /// [`Stats::count_alloc`] when the shard is gone.
    #[inline(always)]
    pub(crate) fn record_alloc_bytes(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = self.allocated.fetch_add(n, Relaxed) + n;
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
        reporter::report(self.tag, ptr, nbytes as i64, now, device);
    }

    /// The bytes and report of a free whose count the caller keeps.
    #[inline(always)]
    pub(crate) fn record_free_bytes(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = self.allocated.fetch_sub(n, Relaxed).wrapping_sub(n);
        reporter::report(self.tag, ptr, -(nbytes as i64), now, device);
    }

    /// Counts an allocation in the shared counter.
    pub(crate) fn count_alloc(&self) {
        self.num_allocs.fetch_add(1, Relaxed);
    }

    /// Counts a free in the shared counter.
    pub(crate) fn count_free(&self) {
        self.num_frees.fetch_add(1, Relaxed);
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

    /// The counters now (exact when no allocation is in flight).
    pub fn snapshot(&self) -> StatsSnapshot {
        let (mut allocs, mut frees) = (self.num_allocs.load(Relaxed), self.num_frees.load(Relaxed));
        if self.per_thread_counts {
            let [a, f] = super::thread_counts::sum();
            allocs += a;
            frees += f;
        }
        StatsSnapshot {
            allocated_bytes: self.allocated.load(Relaxed),
            peak_bytes: self.peak.load(Relaxed),
            num_allocs: allocs,
            num_frees: frees,
            num_failed: self.num_failed.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_thread_counts_are_exact() {
        let s = Stats::with_per_thread_counts();
        let before = s.snapshot();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..10_000 {
                        super::super::cpu_thread_cache::count(0);
                        s.record_alloc_bytes(std::ptr::null(), 8, Device::CPU);
                        super::super::cpu_thread_cache::count(1);
                        s.record_free_bytes(std::ptr::null(), 8, Device::CPU);
                    }
                });
            }
        });
        let after = s.snapshot();
        // other tests may use the shared shards concurrently: at least ours
        assert!(after.num_allocs - before.num_allocs >= 40_000);
        assert!(after.num_frees - before.num_frees >= 40_000);
        assert_eq!(after.allocated_bytes, 0);
        assert_eq!(after.peak_bytes % 8, 0);
    }
}
