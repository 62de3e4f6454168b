//! Per-thread shards of two counters (allocations, frees) for the
//! built-in CPU allocator's statistics. Each thread owns one shard and is
//! its only writer, so an increment is a plain load and store; readers sum
//! every shard. A shard outlives its thread: it goes back to a free list
//! with its counts and the next new thread takes it over, so totals stay
//! exact and memory stays bounded by the peak number of threads.
//!
//! The thread's shard lives in the CPU allocator's per-thread state
//! (cpu_thread_cache.rs), so one thread-local access serves the count and the
//! block cache.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// One thread's counters: [allocations, frees].
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Shard([AtomicU64; 2]);

impl Shard {
    /// Adds one to counter `which` (0: allocations, 1: frees); only the
    /// owning thread calls this.
    #[inline]
    pub(crate) fn bump(&self, which: usize) {
        let c = &self.0[which];
        c.store(c.load(Relaxed) + 1, Relaxed);
    }

    /// Takes one back from counter `which` (a counted allocation failed).
    pub(crate) fn unbump(&self, which: usize) {
        let c = &self.0[which];
        c.store(c.load(Relaxed).wrapping_sub(1), Relaxed);
    }
}

static ALL: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());
static FREE: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());

/// A shard owned by the current thread; returned to the free list on drop.
pub(crate) struct Owned(pub(crate) &'static Shard);

impl Drop for Owned {
    fn drop(&mut self) {
        FREE.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
    }
}

/// Takes a shard for the current thread.
pub(crate) fn acquire() -> Owned {
    if let Some(s) = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop() {
        return Owned(s);
    }
    let s: &'static Shard = Box::leak(Box::default());
    ALL.lock().unwrap_or_else(|e| e.into_inner()).push(s);
    Owned(s)
}

/// The sums of both counters over every shard.
pub(crate) fn sum() -> [u64; 2] {
    let all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    let mut total = [0u64; 2];
    for s in all.iter() {
        total[0] += s.0[0].load(Relaxed);
        total[1] += s.0[1].load(Relaxed);
    }
    total
}
