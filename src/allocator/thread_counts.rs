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
//!
//! After `fork()`, the child's atfork handler puts every shard but the
//! forking thread's on the free list: their threads do not exist in the
//! child (their block caches are gone with them: unreachable, and already
//! out of the statistics, since a cached block counts as freed). Their
//! counts stay in the sums, so the child's totals go on from the
//! parent's.

use crate::fork::{self, Held, Step};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

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

thread_local! {
    /// The shard the current thread owns (null: none), for the atfork
    /// child handler. Const-initialized with no destructor, so reading it
    /// never runs an initializer (which would take FREE).
    static MINE: Cell<*const Shard> = const { Cell::new(std::ptr::null()) };
}

/// A shard owned by the current thread; returned to the free list on drop.
pub(crate) struct Owned(pub(crate) &'static Shard);

impl Drop for Owned {
    fn drop(&mut self) {
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

/// Step 7 of the atfork handlers' lock order (crate::fork).
static FORK_STEP: Step = Step::new(
    7,
    crate::allocator::complete_builtin,
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
        total[0] += s.0[0].load(Relaxed);
        total[1] += s.0[1].load(Relaxed);
    }
    total
}
