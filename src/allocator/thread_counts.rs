//! Per-thread shards of the built-in CPU allocator's statistics: the
//! allocation and free counts, and the bytes the thread has allocated
//! (net of its frees) that are not yet in the shared total, with the
//! highest total the thread has seen. Each thread owns one shard and is its
//! only writer, so an update is a plain load and store; readers sum every
//! shard (stats.rs says how the bytes and the peak are read). A shard
//! outlives its thread: it goes back to a free list with its figures and
//! the next new thread takes it over, so totals stay exact and memory stays
//! bounded by the peak number of threads.
//!
//! The thread's shard is owned by the CPU allocator's per-thread state
//! (cpu_thread_cache.rs) and published in the allocators' thread slot
//! (thread_slot.rs) beside the block cache, so one thread-local address
//! serves the figures and the cache.
//!
//! After `fork()`, the child's atfork handler puts every shard but the
//! forking thread's on the free list: their threads do not exist in the
//! child (their block caches are gone with them: unreachable, and already
//! out of the statistics, since a cached block counts as freed). Their
//! figures stay in the sums, so the child's totals go on from the
//! parent's.

use crate::fork::{self, Held, Step};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// One thread's figures.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Shard {
    /// [allocations, frees].
    counts: [AtomicU64; 2],
    /// Bytes allocated net of frees on this thread and not yet added to
    /// [`FLUSHED`] (at most stats.rs's flush threshold either way).
    pending: AtomicI64,
    /// The highest total this thread has seen, in the low [`HIGH_BITS`]
    /// bits, under the peak epoch (the reset count) in the high bits.
    high: AtomicU64,
}

/// Bits of [`Shard`]'s `high` that hold bytes (256 TiB).
pub(crate) const HIGH_BITS: u32 = 48;
const HIGH_MASK: u64 = (1 << HIGH_BITS) - 1;

impl Shard {
    /// Adds one to counter `which` (0: allocations, 1: frees); only the
    /// owning thread calls this.
    #[inline]
    pub(crate) fn bump(&self, which: usize) {
        let c = &self.counts[which];
        c.store(c.load(Relaxed) + 1, Relaxed);
    }

    /// Takes one back from counter `which` (a counted allocation failed).
    pub(crate) fn unbump(&self, which: usize) {
        let c = &self.counts[which];
        c.store(c.load(Relaxed).wrapping_sub(1), Relaxed);
    }

    /// The bytes not yet in the shared total.
    #[inline(always)]
    pub(crate) fn pending(&self) -> i64 {
        self.pending.load(Relaxed)
    }

    /// Sets the bytes not yet in the shared total; only the owning thread.
    #[inline(always)]
    pub(crate) fn set_pending(&self, bytes: i64) {
        self.pending.store(bytes, Relaxed);
    }

    /// Adds `bytes` (the thread's remainder and its latest change) to the
    /// shared total and clears the remainder; returns the shared total
    /// after. Only the owning thread.
    #[inline(always)]
    pub(crate) fn flush(&self, bytes: i64) -> u64 {
        self.set_pending(0);
        let add = bytes as u64;
        FLUSHED.fetch_add(add, Relaxed).wrapping_add(add)
    }

    /// Raises the thread's highest seen total to `total` under peak epoch
    /// `epoch` (a newer epoch replaces an older one's value); only the
    /// owning thread.
    #[inline(always)]
    pub(crate) fn raise_high(&self, epoch: u64, total: u64) {
        let h = self.high.load(Relaxed);
        let tag = epoch << HIGH_BITS;
        if h & !HIGH_MASK != tag || h & HIGH_MASK < total {
            self.high.store(tag | total.min(HIGH_MASK), Relaxed);
        }
    }
}

/// The bytes shards have added to the shared total (wrapping: it may dip
/// below zero for a moment when a block is freed on another thread than
/// the one that made it).
static FLUSHED: AtomicU64 = AtomicU64::new(0);

/// The shared total of the shards' bytes, without their remainders.
#[inline(always)]
pub(crate) fn flushed() -> u64 {
    FLUSHED.load(Relaxed)
}

static ALL: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());
static FREE: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());

thread_local! {
    /// The shard the current thread owns (null: none), for the atfork
    /// child handler. Const-initialized with no destructor, so reading it
    /// never runs an initializer (which would take FREE).
    static MINE: Cell<*const Shard> = const { Cell::new(std::ptr::null()) };
}

/// A shard owned by the current thread; returned to the free list on drop.
pub(crate) struct Owned(pub(crate) &'static Shard);

impl Drop for Owned {
    /// Adds the thread's remainder to the shared total before the shard
    /// goes to another thread, so that the totals other threads see stay
    /// whole.
    fn drop(&mut self) {
        let pending = self.0.pending();
        if pending != 0 {
            self.0.flush(pending);
        }
        MINE.with(|m| m.set(std::ptr::null()));
        FREE.lock().unwrap_or_else(|e| e.into_inner()).push(self.0);
    }
}

/// Takes a shard for the current thread.
pub(crate) fn acquire() -> Owned {
    fork::ensure_handlers(&FORK_STEP);
    // FREE's guard must be dropped before ALL is taken: a guard in the
    // match scrutinee would live through the match and take the locks in
    // the reverse of fork_prepare's order (ALL, then FREE): a deadlock
    // with a thread forking meanwhile.
    let popped = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let s = match popped {
        Some(s) => s,
        None => {
            let s: &'static Shard = Box::leak(Box::default());
            ALL.lock().unwrap_or_else(|e| e.into_inner()).push(s);
            s
        }
    };
    MINE.with(|m| m.set(s));
    Owned(s)
}

type Lists = (
    MutexGuard<'static, Vec<&'static Shard>>,
    MutexGuard<'static, Vec<&'static Shard>>,
);

/// ALL's and FREE's guards, from the atfork `prepare` handler to `parent`
/// or `child`.
static HELD: Held<Lists> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(
    crate::fork::order::THREAD_COUNTS,
    fork_prepare,
    fork_release,
);

/// Atfork `prepare`: holds ALL, then FREE, and makes room in FREE for
/// every shard (so the child handler does not allocate).
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
pub(crate) unsafe fn fork_prepare() {
    let all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
    let more = all.len().saturating_sub(free.len());
    free.reserve(more);
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put((all, free)) };
}

/// Atfork `parent` (in_child false) or `child`: releases both lists; in
/// the child, first makes every shard but the calling thread's free.
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
pub(crate) unsafe fn fork_release(in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    let Some((all, mut free)) = (unsafe { HELD.take() }) else {
        return;
    };
    if in_child {
        // The only thread of the child: its shard (if it has one) is the
        // only one in use.
        let mine = MINE.with(|m| m.get());
        free.clear();
        free.extend(all.iter().copied().filter(|&s| !std::ptr::eq(s, mine)));
    }
    drop(free);
    drop(all);
}

/// The sums of both counters over every shard.
pub(crate) fn sum() -> [u64; 2] {
    fork::ensure_handlers(&FORK_STEP);
    let all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    let mut total = [0u64; 2];
    for s in all.iter() {
        total[0] += s.counts[0].load(Relaxed);
        total[1] += s.counts[1].load(Relaxed);
    }
    total
}

/// The bytes every shard holds back from the shared total, and the
/// highest total any shard saw under peak epoch `epoch`.
pub(crate) fn sum_bytes(epoch: u64) -> (i64, u64) {
    fork::ensure_handlers(&FORK_STEP);
    let all = ALL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = epoch << HIGH_BITS;
    let (mut pending, mut high) = (0i64, 0u64);
    for s in all.iter() {
        pending = pending.wrapping_add(s.pending.load(Relaxed));
        let h = s.high.load(Relaxed);
        if h & !HIGH_MASK == tag {
            high = high.max(h & HIGH_MASK);
        }
    }
    (pending, high)
}
