//! Per-allocator statistics: lock-free counters, cheap enough to stay on.
//!
//! Allocated bytes and the peak are one shared atomic each (the peak must
//! compare against the exact running total). The allocation and free
//! counts of the built-in CPU allocator, the hot path, are kept per thread
//! (a plain load and store on the thread's own shard, no locked
//! instruction) and summed when read; other allocators count with atomics.

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
    /// Statistics whose counts live in per-thread shards (for the one
    /// process-wide built-in CPU allocator).
    pub(crate) fn with_per_thread_counts() -> Stats {
        Stats {
            per_thread_counts: true,
            ..Stats::default()
        }
    }

    /// Records an allocation of `nbytes` at `ptr` and tells the reporter.
    #[inline]
    pub fn record_alloc(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = self.allocated.fetch_add(n, Relaxed) + n;
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
        if self.per_thread_counts {
            thread_counts::add(0, &self.num_allocs);
        } else {
            self.num_allocs.fetch_add(1, Relaxed);
        }
        reporter::report(ptr, nbytes as i64, now, device);
    }

    /// Records the free of `nbytes` at `ptr` and tells the reporter.
    #[inline]
    pub fn record_free(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = self.allocated.fetch_sub(n, Relaxed).wrapping_sub(n);
        if self.per_thread_counts {
            thread_counts::add(1, &self.num_frees);
        } else {
            self.num_frees.fetch_add(1, Relaxed);
        }
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

    /// The counters now (exact when no allocation is in flight).
    pub fn snapshot(&self) -> StatsSnapshot {
        let (mut allocs, mut frees) = (self.num_allocs.load(Relaxed), self.num_frees.load(Relaxed));
        if self.per_thread_counts {
            let [a, f] = thread_counts::sum();
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

/// Per-thread shards of two counters (allocations, frees). Each thread
/// owns one shard and is its only writer, so an increment is a plain load
/// and store; readers sum every shard. A shard outlives its thread: it
/// goes back to a free list with its counts and the next new thread takes
/// it over, so totals stay exact and memory stays bounded by the peak
/// number of threads.
mod thread_counts {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Mutex;

    #[repr(align(64))]
    #[derive(Default)]
    struct Shard([AtomicU64; 2]);

    static ALL: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());
    static FREE: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());

    struct Owned(&'static Shard);

    impl Drop for Owned {
        fn drop(&mut self) {
            FREE.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
        }
    }

    fn acquire() -> Owned {
        if let Some(s) = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Owned(s);
        }
        let s: &'static Shard = Box::leak(Box::default());
        ALL.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        Owned(s)
    }

    thread_local! {
        static LOCAL: Owned = acquire();
    }

    /// Adds one to counter `which` of this thread's shard; during thread
    /// teardown (shard already returned) adds to `fallback` instead.
    #[inline]
    pub(super) fn add(which: usize, fallback: &AtomicU64) {
        let done = LOCAL.try_with(|o| {
            let c = &o.0 .0[which];
            c.store(c.load(Relaxed) + 1, Relaxed);
        });
        if done.is_err() {
            fallback.fetch_add(1, Relaxed);
        }
    }

    /// The sums of both counters over every shard.
    pub(super) fn sum() -> [u64; 2] {
        let all = ALL.lock().unwrap_or_else(|e| e.into_inner());
        let mut total = [0u64; 2];
        for s in all.iter() {
            total[0] += s.0[0].load(Relaxed);
            total[1] += s.0[1].load(Relaxed);
        }
        total
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
                        s.record_alloc(std::ptr::null(), 8, Device::CPU);
                        s.record_free(std::ptr::null(), 8, Device::CPU);
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
