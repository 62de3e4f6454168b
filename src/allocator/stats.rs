//! Per-allocator statistics: lock-free counters, cheap enough to stay on.
//!
//! Most allocators keep one shared atomic per figure. The built-in CPU
//! allocator, the hot path, keeps its figures in per-thread shards
//! (thread_counts.rs: a plain load and store on the thread's own shard, no
//! locked instruction, no cache line shared with other threads):
//! - counts are summed when read;
//! - bytes: a thread adds its net allocated bytes to the shared total only
//!   once they pass [`FLUSH_BYTES`] either way (or at once while a reporter
//!   is installed, which then sees the total after the event); a
//!   reader adds every shard's remainder, so `allocated_bytes` is exact
//!   whenever no allocation is in flight;
//! - the peak: each allocation compares the total as its thread sees it
//!   (the shared total plus its own remainder) with the highest its thread
//!   saw; the peak read is the highest of those, of the value reset_peak
//!   set, and of the current bytes. While one thread allocates at a time
//!   this is the exact peak; with several allocating at once it can be off
//!   by the other threads' remainders, at most [`FLUSH_BYTES`] each.

use super::active::REPORTER;
use super::history::Tag;
use super::reporter;
use super::thread_counts::{self, Shard};
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
    /// How many times reset_peak ran (per-thread statistics: a shard's
    /// highest seen total counts only under the current epoch).
    epoch: AtomicU64,
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

/// Bytes a thread's shard may hold back from the shared total, either way.
pub(crate) const FLUSH_BYTES: i64 = 1 << 20;

/// A total kept in a u64 that may dip below zero for a moment (a block
/// freed on another thread than the one that allocated it, before either
/// added its remainder), read as 0 then.
#[inline(always)]
fn clamp(total: u64) -> u64 {
    if (total as i64) < 0 {
        0
    } else {
        total
    }
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

    /// The bytes, peak and report of an allocation, in the shared
    /// counters.
    #[inline(always)]
    fn record_alloc_bytes(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = clamp(self.allocated.fetch_add(n, Relaxed).wrapping_add(n));
        if now > self.peak.load(Relaxed) {
            self.peak.fetch_max(now, Relaxed);
        }
        reporter::report(self.tag, ptr, nbytes as i64, now, device);
    }

    /// The bytes and report of a free, in the shared counters.
    #[inline(always)]
    fn record_free_bytes(&self, ptr: *const c_void, nbytes: usize, device: Device) {
        let n = nbytes as u64;
        let now = clamp(self.allocated.fetch_sub(n, Relaxed).wrapping_sub(n));
        reporter::report(self.tag, ptr, -(nbytes as i64), now, device);
    }

    /// The bytes, peak and report of an allocation counted in `shard`,
    /// the calling thread's (per-thread statistics only).
    #[inline(always)]
    pub(crate) fn record_alloc_sharded(
        &self,
        shard: &Shard,
        ptr: *const c_void,
        nbytes: usize,
        device: Device,
    ) {
        let active = reporter::active_bits();
        let pending = shard.pending() + nbytes as i64;
        let shared = if pending > FLUSH_BYTES || active & REPORTER != 0 {
            shard.flush(pending)
        } else {
            shard.set_pending(pending);
            thread_counts::flushed().wrapping_add(pending as u64)
        };
        // The shared counter holds only what a thread counted without its
        // shard (at its exit).
        let total = clamp(shared.wrapping_add(self.allocated.load(Relaxed)));
        shard.raise_high(self.epoch.load(Relaxed), total);
        if active & REPORTER != 0 {
            reporter::report_active(active, self.tag, ptr, nbytes as i64, total, device);
        } else if active != 0 {
            reporter::record_history(self.tag, ptr, nbytes as i64);
        }
    }

    /// The bytes and report of a free counted in `shard`, the calling
    /// thread's (per-thread statistics only).
    #[inline(always)]
    pub(crate) fn record_free_sharded(
        &self,
        shard: &Shard,
        ptr: *const c_void,
        nbytes: usize,
        device: Device,
    ) {
        let active = reporter::active_bits();
        let pending = shard.pending() - nbytes as i64;
        if pending < -FLUSH_BYTES || active & REPORTER != 0 {
            let shared = shard.flush(pending);
            if active & REPORTER != 0 {
                let total = clamp(shared.wrapping_add(self.allocated.load(Relaxed)));
                reporter::report_active(active, self.tag, ptr, -(nbytes as i64), total, device);
                return;
            }
        } else {
            shard.set_pending(pending);
        }
        if active != 0 {
            reporter::record_history(self.tag, ptr, -(nbytes as i64));
        }
    }

    /// The bytes of a free counted in `shard`, the calling thread's, while
    /// no reporter and no history is active (`reporter::active_bits()`
    /// read 0): [`Stats::record_free_sharded`] without its reporting
    /// branches, so that a caller's fast path makes no call.
    #[inline(always)]
    pub(crate) fn count_free_sharded(&self, shard: &Shard, nbytes: usize) {
        let pending = shard.pending() - nbytes as i64;
        if pending < -FLUSH_BYTES {
            shard.flush(pending);
        } else {
            shard.set_pending(pending);
        }
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

    /// Counts `n` allocations and `n` frees of blocks whose bytes never
    /// left the current value (a caching allocator's thread-front round
    /// trips: a block freed and handed out again for the same request),
    /// under the lock of [`Stats::record_alloc_serialized`].
    pub(crate) fn record_round_trips_serialized(&self, n: u64) {
        self.num_allocs
            .store(self.num_allocs.load(Relaxed) + n, Relaxed);
        self.num_frees
            .store(self.num_frees.load(Relaxed) + n, Relaxed);
    }

    /// Records a failed allocation.
    pub fn record_failure(&self) {
        self.num_failed.fetch_add(1, Relaxed);
    }

    /// Sets the peak to the current allocated bytes.
    pub fn reset_peak(&self) {
        if self.per_thread_counts {
            // A newer epoch first: the highs threads saw before no longer
            // count.
            self.epoch.fetch_add(1, Relaxed);
            self.peak.store(self.sharded_bytes().0, Relaxed);
        } else {
            self.peak.store(self.allocated.load(Relaxed), Relaxed);
        }
    }

    /// Per-thread statistics: the current bytes (the shared total and
    /// every shard's remainder) and the highest total a thread saw since
    /// the last reset.
    fn sharded_bytes(&self) -> (u64, u64) {
        let (pending, high) = thread_counts::sum_bytes(self.epoch.load(Relaxed));
        let shared = thread_counts::flushed().wrapping_add(pending as u64);
        let total = clamp(shared.wrapping_add(self.allocated.load(Relaxed)));
        (total, high)
    }

    /// The counters now (exact when no allocation is in flight; the peak
    /// of per-thread statistics as the module says).
    pub fn snapshot(&self) -> StatsSnapshot {
        let (mut allocs, mut frees) = (self.num_allocs.load(Relaxed), self.num_frees.load(Relaxed));
        let (mut allocated, mut peak) = (self.allocated.load(Relaxed), self.peak.load(Relaxed));
        if self.per_thread_counts {
            let [a, f] = thread_counts::sum();
            allocs += a;
            frees += f;
            let (total, high) = self.sharded_bytes();
            allocated = total;
            peak = peak.max(high).max(total);
        }
        StatsSnapshot {
            allocated_bytes: allocated,
            peak_bytes: peak,
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
                        let shard = super::super::cpu_thread_cache::count(0).unwrap();
                        s.record_alloc_sharded(shard, std::ptr::null(), 8, Device::CPU);
                        let shard = super::super::cpu_thread_cache::count(1).unwrap();
                        s.record_free_sharded(shard, std::ptr::null(), 8, Device::CPU);
                    }
                });
            }
        });
        let after = s.snapshot();
        // other tests may use the shared shards concurrently: at least
        // ours (and their bytes are the built-in allocator's: the exact
        // byte figures are checked in tests/cpu_stats.rs, a process of its
        // own)
        assert!(after.num_allocs - before.num_allocs >= 40_000);
        assert!(after.num_frees - before.num_frees >= 40_000);
        assert!(after.peak_bytes >= after.allocated_bytes);
    }

    #[test]
    fn a_total_below_zero_reads_as_zero() {
        assert_eq!(clamp(0u64.wrapping_sub(64)), 0);
        assert_eq!(clamp(64), 64);
    }
}
