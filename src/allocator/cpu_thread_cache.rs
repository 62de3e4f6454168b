//! The per-thread block cache of the built-in CPU allocator (in the spirit
//! of mimalloc's thread-local free lists, kept small): a freed block goes
//! to a bin of the freeing thread, keyed by its size class, and the next
//! request of that class on that thread takes it back without calling
//! malloc/free (or mmap/munmap for large blocks).
//!
//! Size classes (size_class.rs): 64 bytes, then four classes per power of
//! two (at most 25% waste), up to `MAX_CACHED`. A bin keeps a few blocks (eight for small
//! classes, one for the largest). Each thread keeps at most
//! [`cache_limit`] bytes (default [`DEFAULT_LIMIT`]; 0 disables caching);
//! a block that does not fit is freed at once. Bins are emptied when their
//! thread exits, on demand with [`release_thread_cache`] (the caller's)
//! and [`release_all_caches`] (every thread's), and before the allocator
//! retries an allocation that ran out of memory.

use super::thread_counts::{self, Shard};
use super::thread_slot;
use crate::fork::{self, Held, Step};
use std::cell::{RefCell, UnsafeCell};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU8, AtomicUsize};
use std::sync::{Mutex, MutexGuard};

use super::size_class::Bins;
pub use super::size_class::{class_of, class_size};

/// The default per-thread byte budget of the cache.
pub const DEFAULT_LIMIT: usize = 128 << 20;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_LIMIT);

/// The per-thread byte budget.
pub fn cache_limit() -> usize {
    LIMIT.load(Relaxed)
}

/// Sets the per-thread byte budget (0 disables caching); takes effect for
/// later frees.
pub fn set_cache_limit(bytes: usize) {
    LIMIT.store(bytes, Relaxed);
}

/// No release requested.
const IDLE: u8 = 0;
/// Another thread asked for the bins to be emptied.
const REQUESTED: u8 = 1;
/// Another thread is emptying them.
const STEALING: u8 = 2;

/// A thread's cache: its bins, which only the owning thread touches
/// except while [`release_all_caches`] empties them, and the two flags of
/// the handshake that makes that safe (an asymmetric Dekker: the owner
/// pays plain stores and a load, the releaser a membarrier).
///
/// Owner, around every use of its bins ([`Cache::enter`] / [`Cache::exit`]):
/// store `active` = true, load `state`; if not IDLE, settle it first
/// (empty its own bins when REQUESTED, wait while STEALING); use the
/// bins; store `active` = false (release). Releaser ([`release_all_caches`]):
/// store `state` = REQUESTED in every cache, membarrier (a full barrier on
/// every thread of the process), then for each cache whose `active` it
/// reads false, CAS REQUESTED -> STEALING, empty the bins, store IDLE.
/// After the membarrier, either the releaser sees an owner's `active`
/// (and does not steal) or that owner sees REQUESTED (and settles before
/// touching its bins); the CAS decides who empties them.
struct Cache {
    active: AtomicBool,
    state: AtomicU8,
    bins: UnsafeCell<Bins>,
}

// SAFETY: `bins` is reached only by the owning thread inside its active
// window, or by a releaser that won the handshake (see Cache), never by
// both; the flags are atomics.
unsafe impl Sync for Cache {}
// SAFETY: as Sync; the raw block pointers are owned memory.
unsafe impl Send for Cache {}

impl Cache {
    /// Starts the owner's use of its bins; returns them, or None when the
    /// owner is already using them (a signal handler that allocates while
    /// the thread is inside the allocator: it goes without the cache).
    /// Pair with [`Cache::exit`] before entering again; only the owning
    /// thread (the one that published the cache).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)] // the handshake makes the access exclusive
    fn enter(&self) -> Option<&mut Bins> {
        if self.active.load(Relaxed) {
            return None;
        }
        self.active.store(true, Relaxed);
        compiler_fence(SeqCst);
        if self.state.load(Relaxed) != IDLE {
            self.settle();
        }
        // SAFETY: only the owning thread enters (its cache is published
        // in its own thread slot only); it was not active, is active now
        // and the state is IDLE: no releaser touches the bins until it
        // exits (see Cache), and no other borrow of them is live.
        Some(unsafe { &mut *self.bins.get() })
    }

    /// As [`Cache::enter`] for the fast paths (`take`, `put`): a release
    /// requested or under way is not settled here (a call) but refused,
    /// and the general paths (`on_alloc`, `on_free`) settle it.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)] // the handshake makes the access exclusive
    fn enter_fast(&self) -> Option<&mut Bins> {
        if self.active.load(Relaxed) {
            return None;
        }
        self.active.store(true, Relaxed);
        compiler_fence(SeqCst);
        if self.state.load(Relaxed) != IDLE {
            self.exit();
            return None;
        }
        // SAFETY: as in `enter`: the owning thread, now active, with the
        // state IDLE.
        Some(unsafe { &mut *self.bins.get() })
    }

    /// Ends the owner's use of its bins.
    #[inline(always)]
    fn exit(&self) {
        compiler_fence(SeqCst);
        self.active.store(false, Release);
    }

    /// The owner, active, found a release requested or under way.
    #[cold]
    #[inline(never)]
    fn settle(&self) {
        loop {
            match self.state.load(Acquire) {
                IDLE => return,
                REQUESTED => {
                    if self
                        .state
                        .compare_exchange(REQUESTED, IDLE, Acquire, Relaxed)
                        .is_ok()
                    {
                        // SAFETY: we are active and won the handshake:
                        // no releaser touches the bins.
                        unsafe { &mut *self.bins.get() }.release_all();
                        return;
                    }
                }
                _ => std::hint::spin_loop(),
            }
        }
    }
}

/// Every thread's cache (addresses of their `Cache`), for
/// [`release_all_caches`]; a cache leaves it before it is freed.
static REGISTRY: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<usize>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The registry's guard, from the atfork `prepare` handler to `parent`
/// or `child`.
static HELD: Held<MutexGuard<'static, Vec<usize>>> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(
    crate::fork::order::CPU_THREAD_CACHE,
    fork_prepare,
    fork_release,
);

/// Atfork `prepare`: holds the registry of thread caches.
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
unsafe fn fork_prepare() {
    let guard = registry();
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put(guard) };
}

/// Atfork `parent` or `child`: releases the registry. In the child, the
/// caches of the parent's other threads stay registered (their blocks are
/// the child's too; a release_all_caches frees those not caught mid-use).
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
unsafe fn fork_release(_in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    drop(unsafe { HELD.take() });
}

/// The owning thread's handle on its cache.
struct Owned(NonNull<Cache>);

impl Drop for Owned {
    fn drop(&mut self) {
        {
            let mut reg = registry();
            let me = self.0.as_ptr() as usize;
            if let Some(i) = reg.iter().position(|&p| p == me) {
                reg.swap_remove(i);
            }
        }
        // SAFETY: made by Box::into_raw in new_cache; out of the registry
        // (under its lock, which a releaser holds while it steals), so no
        // other thread can reach it.
        let mut cache = unsafe { Box::from_raw(self.0.as_ptr()) };
        cache.bins.get_mut().release_all();
    }
}

/// Everything the CPU allocator keeps per thread: the allocation counters
/// and the block cache. The thread-local owns them (and frees them when
/// the thread exits); the fast paths reach them through the thread slot
/// (thread_slot.rs), where the state publishes the shard as it is made and
/// the cache as it is made, and which it clears before it is dropped.
struct ThreadState {
    counts: thread_counts::Owned,
    cache: Option<Owned>,
}

impl ThreadState {
    fn new() -> ThreadState {
        let counts = thread_counts::acquire();
        publish(counts.0, std::ptr::null());
        ThreadState {
            counts,
            cache: None,
        }
    }
}

impl Drop for ThreadState {
    /// Unpublishes first: from here on, this thread's allocations and
    /// frees (other thread-locals' destructors may make some) are counted
    /// in the shared counters and bypass the cache.
    fn drop(&mut self) {
        publish(std::ptr::null(), std::ptr::null());
    }
}

thread_local! {
    static STATE: RefCell<ThreadState> = RefCell::new(ThreadState::new());
}

/// The calling thread's published shard and cache (null: none yet, or
/// the thread is being torn down).
#[inline(always)]
fn published() -> (*const Shard, *const Cache) {
    thread_slot::with(|w| {
        (
            w[thread_slot::CPU_SHARD].get() as *const Shard,
            w[thread_slot::CPU_CACHE].get() as *const Cache,
        )
    })
}

fn publish(shard: *const Shard, cache: *const Cache) {
    thread_slot::with(|w| {
        w[thread_slot::CPU_SHARD].set(shard as usize);
        w[thread_slot::CPU_CACHE].set(cache as usize);
    });
}

/// The calling thread's shard, making its state on first use; None during
/// thread teardown.
#[inline(always)]
fn shard() -> Option<&'static Shard> {
    let (shard, _) = published();
    if shard.is_null() {
        return shard_unpublished();
    }
    // SAFETY: a published shard is a leaked (never freed) Shard that this
    // thread owns while it is published.
    Some(unsafe { &*shard })
}

/// Makes the thread's state (which publishes its shard); None when the
/// thread is being torn down.
#[cold]
#[inline(never)]
fn shard_unpublished() -> Option<&'static Shard> {
    STATE.try_with(|state| state.borrow().counts.0).ok()
}

/// The calling thread's published cache.
#[inline(always)]
fn cache() -> Option<&'static Cache> {
    let (_, cache) = published();
    // SAFETY: a published cache is alive until its thread's state drops,
    // which unpublishes it first; only this thread reads its own slot, so
    // the reference is not used after that (nothing of the calling
    // function outlives the thread's teardown).
    unsafe { cache.as_ref() }
}

/// Counts an allocation on this thread and takes a cached block of class
/// `class` if one is there. Returns (the thread's statistics shard,
/// block); no shard during thread teardown (the caller counts in the
/// shared counters).
#[inline]
pub fn on_alloc(class: Option<usize>) -> (Option<&'static Shard>, Option<*mut u8>) {
    let Some(shard) = shard() else {
        return (None, None);
    };
    shard.bump(0);
    let (Some(c), Some(cache)) = (class, cache()) else {
        return (Some(shard), None);
    };
    let Some(bins) = cache.enter() else {
        return (Some(shard), None);
    };
    let got = bins.pop(c);
    cache.exit();
    (Some(shard), got)
}

/// The allocation fast path: takes a cached block of class `class` and
/// counts the allocation; returns it with the thread's statistics shard,
/// or None having done nothing (no block cached, no cache yet, or the
/// thread is being torn down).
#[inline(always)]
pub fn take(class: usize) -> Option<(*mut u8, &'static Shard)> {
    // One slot read for both pointers (cache() would read it again).
    let (shard, cache) = published();
    // SAFETY: the cache stays alive while published: only this thread
    // reads its own slot, and its state unpublishes the cache before
    // freeing it at thread exit, after which nothing of this call runs.
    let cache = unsafe { cache.as_ref() }?;
    let bins = cache.enter_fast()?;
    let got = bins.pop(class);
    cache.exit();
    let block = got?;
    // SAFETY: a thread publishes its cache only after its shard (a leaked
    // Shard it owns while published).
    let shard: &'static Shard = unsafe { &*shard };
    shard.bump(0);
    Some((block, shard))
}

/// Takes back the count of an allocation that failed after on_alloc.
#[cold]
pub fn uncount_alloc() {
    if let Some(shard) = shard() {
        shard.unbump(0);
    }
}

/// Counts a free on this thread and offers the freed block of class
/// `class` to the cache. Returns (the thread's statistics shard, cached);
/// no shard during thread teardown (the caller counts in the shared
/// counters); when not cached the caller frees the block. `release` frees
/// blocks that leave the cache later.
#[inline]
pub fn on_free(
    class: Option<usize>,
    block: *mut u8,
    release: unsafe fn(*mut u8),
) -> (Option<&'static Shard>, bool) {
    let Some(shard) = shard() else {
        return (None, false);
    };
    shard.bump(1);
    let Some(c) = class else {
        return (Some(shard), false);
    };
    let limit = cache_limit();
    if class_size(c) > limit {
        return (Some(shard), false);
    }
    let Some(cache) = cache().or_else(|| new_cache(release)) else {
        return (Some(shard), false);
    };
    let Some(bins) = cache.enter() else {
        return (Some(shard), false);
    };
    let cached = bins.push(c, block, limit);
    cache.exit();
    (Some(shard), cached)
}

/// Offers the freed block of class `class` to the thread's cache and, if
/// it was cached, counts the free and returns the thread's statistics
/// shard; None having done nothing (no cache yet, the cache busy, its bin
/// or budget full, a release pending, the thread's slot not found
/// without a call): the caller then takes [`on_free`].
#[inline(always)]
pub fn put(class: usize, block: *mut u8) -> Option<&'static Shard> {
    // Only a slot found without a call (cpu_free's fast path makes none).
    let (shard, cache) = thread_slot::with_known(|w| {
        (
            w[thread_slot::CPU_SHARD].get() as *const Shard,
            w[thread_slot::CPU_CACHE].get() as *const Cache,
        )
    })?;
    // SAFETY: as in `take`: a published cache stays alive while this
    // thread runs, and only this thread reads its own slot.
    let cache = unsafe { cache.as_ref() }?;
    let limit = cache_limit();
    let bins = cache.enter_fast()?;
    let cached = bins.push(class, block, limit);
    cache.exit();
    if !cached {
        return None;
    }
    // SAFETY: a thread publishes its cache only after its shard (a leaked
    // Shard it owns while published).
    let shard: &'static Shard = unsafe { &*shard };
    shard.bump(1);
    Some(shard)
}

/// Makes the thread's cache on its first free and publishes it; None
/// during thread teardown. Out of line: the cache is built on the stack
/// before it is boxed, and a frame that large would make every free probe
/// three stack pages.
#[cold]
#[inline(never)]
fn new_cache(release: unsafe fn(*mut u8)) -> Option<&'static Cache> {
    STATE
        .try_with(|state| {
            let mut state = state.try_borrow_mut().ok()?;
            if state.cache.is_none() {
                let cache = Box::new(Cache {
                    active: AtomicBool::new(false),
                    state: AtomicU8::new(IDLE),
                    bins: UnsafeCell::new(Bins::new(release)),
                });
                // SAFETY: Box::into_raw never returns NULL.
                let ptr = unsafe { NonNull::new_unchecked(Box::into_raw(cache)) };
                fork::ensure_handlers(&FORK_STEP);
                registry().push(ptr.as_ptr() as usize);
                state.cache = Some(Owned(ptr));
                publish(state.counts.0, ptr.as_ptr());
            }
            Some(())
        })
        .ok()
        .flatten()?;
    cache()
}

/// Adds one to counter `which` (0: allocations, 1: frees) of this thread;
/// returns the thread's statistics shard, None during thread teardown.
#[inline]
pub fn count(which: usize) -> Option<&'static Shard> {
    let shard = shard()?;
    shard.bump(which);
    Some(shard)
}

/// Runs `f` on the calling thread's bins, if it has a cache.
fn with_own_bins<T>(f: impl FnOnce(&mut Bins) -> T) -> Option<T> {
    let cache = cache()?;
    let bins = cache.enter()?;
    let r = f(bins);
    cache.exit();
    Some(r)
}

/// Frees every block cached by the calling thread; returns the bytes
/// released.
pub fn release_thread_cache() -> usize {
    with_own_bins(Bins::release_all).unwrap_or(0)
}

/// Bytes cached by the calling thread.
pub fn thread_cached_bytes() -> usize {
    with_own_bins(|b| b.bytes).unwrap_or(0)
}

/// Calls of [`release_all_caches`] so far (tests: another test's failed
/// allocation empties every thread's cache).
#[cfg(test)]
static RELEASES: AtomicUsize = AtomicUsize::new(0);

/// Calls of [`release_all_caches`] so far.
#[cfg(test)]
pub(crate) fn releases() -> usize {
    RELEASES.load(SeqCst)
}

/// A full memory barrier on every running thread of the process
/// (platform::process: membarrier(2) on Linux, FlushProcessWriteBuffers
/// on Windows); false where the OS has none.
fn barrier_on_every_thread() -> bool {
    crate::platform::process::barrier_on_every_thread()
}

/// Frees the blocks every thread caches: the caller's at once, every
/// other thread's by the caller when that thread is not inside the
/// allocator, else by that thread itself as it leaves (see [`Cache`]).
/// Returns the bytes the caller freed. Where the kernel has no membarrier,
/// other threads empty their caches at their next allocation or free.
pub fn release_all_caches() -> usize {
    #[cfg(test)]
    RELEASES.fetch_add(1, SeqCst);
    let mut freed = release_thread_cache();
    let reg = registry();
    for &p in reg.iter() {
        // SAFETY: a registered cache is alive while the registry is held.
        unsafe { &*(p as *const Cache) }
            .state
            .store(REQUESTED, Relaxed);
    }
    if !barrier_on_every_thread() {
        return freed;
    }
    for &p in reg.iter() {
        // SAFETY: `reg` is still the registry guard taken above, held across
        // both loops; an owner frees its Cache (Owned::drop) only after
        // removing it under that lock, so every `p` listed is a live Cache.
        let cache = unsafe { &*(p as *const Cache) };
        // An owner inside the allocator leaves within a few instructions;
        // if it is preempted there, it settles the request itself.
        let mut spins = 0;
        while cache.active.load(Acquire) && spins < 1000 {
            std::hint::spin_loop();
            spins += 1;
        }
        if cache.active.load(Acquire) {
            continue;
        }
        if cache
            .state
            .compare_exchange(REQUESTED, STEALING, Acquire, Relaxed)
            .is_ok()
        {
            // SAFETY: we won the handshake: the owner is not active, and
            // on entering it waits while the state is STEALING.
            freed += unsafe { &mut *cache.bins.get() }.release_all();
            cache.state.store(IDLE, Release);
        }
    }
    freed
}
