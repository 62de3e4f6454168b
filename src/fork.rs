//! Fork safety: the `pthread_atfork` handlers that keep tessera usable in
//! a child process made by `fork()`, as PyTorch's thread pools and
//! OpenMP runtimes do.
//!
//! A child has one thread, the one that called fork. Every other thread's
//! work stops where it was, so a lock another thread held at the fork
//! would stay held in the child forever, and the thread pool's workers
//! do not exist there. So:
//!
//! - `prepare` (in the parent, before the fork) takes every lock tessera
//!   keeps across calls, in the fixed order below, so no other thread is
//!   inside a critical section at the moment of the fork;
//! - `parent` (in the parent, after the fork) releases them;
//! - `child` (in the child) releases them too, after repairing the state
//!   that belonged to threads the child does not have: the thread pool is
//!   forgotten (a fresh one is made lazily, with the same thread count, by
//!   the child's first parallel loop), and the counter shards of the
//!   parent's other threads go to the free list.
//!
//! # Lock order
//! `prepare` takes, in this order (and the handlers release in reverse):
//!
//! 0. the fork lock of this module (concurrent forks take turns);
//!    then it completes the built-in CPU allocator's one-time
//!    initialization (a `OnceLock`: one caught half-way would block the
//!    child forever);
//! 1. the thread pool slot (`parallel.rs`);
//! 2. the allocator registry's slots, by device type number;
//! 3. the memory reporter slot;
//! 4. the list of live allocators, then each one's raw-allocation size
//!    table, in list order (`allocator/mod.rs`);
//! 5. the list of live caching allocators, then each one's pool lock, in
//!    list order (`allocator/caching`);
//! 6. the CPU allocator's counter shard lists: all shards, then the free
//!    list (`allocator/thread_counts.rs`).
//!
//! This cannot deadlock against tessera itself because no tessera code
//! holds a lock of a later step while it waits for one of an earlier step
//! (the only nesting: 2 then 4 or 5, when a registry lookup makes the
//! built-in or CUDA allocator; the caching layer frees segments after
//! unlocking), and no critical section calls host code (plugin
//! callbacks, the reporter, deleters run outside the locks).
//!
//! # Registration
//! The handlers are registered once per process, on tessera's first use
//! of any of those locks ([`ensure_handlers`]). Registering never waits
//! on a fork in progress in a way that could deadlock: until
//! `pthread_atfork` returns, no fork runs tessera's handlers, so none
//! waits for a lock the registering thread may hold.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// [`REGISTERED`] once the handlers are installed in this process.
const DONE: u64 = u64::MAX;

/// 0: not registered; DONE; otherwise the pid + 1 of the process in which
/// a thread is registering (a child forked at that moment sees its
/// parent's pid there, and registers for itself).
static REGISTERED: AtomicU64 = AtomicU64::new(0);

/// Held by a fork from its `prepare` to its `parent` or `child` handler.
static FORKING: AtomicBool = AtomicBool::new(false);

/// Installs the atfork handlers if this process has not yet. Cheap (one
/// load) once done; call it before taking any lock the handlers take.
#[inline]
pub(crate) fn ensure_handlers() {
    if REGISTERED.load(Ordering::Acquire) != DONE {
        register();
    }
}

#[cold]
fn register() {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() } as u64 + 1;
    loop {
        let seen = REGISTERED.load(Ordering::Acquire);
        if seen == DONE {
            return;
        }
        if seen == me {
            // Another thread of this process is registering: wait for it,
            // so that the caller's locks are covered from here on.
            std::thread::yield_now();
            continue;
        }
        // 0, or a parent's registration that this child was forked in
        // the middle of (its handlers are not installed here: the child
        // handler would have marked DONE).
        if REGISTERED
            .compare_exchange(seen, me, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        // SAFETY: the three handlers are extern "C" functions without
        // arguments, valid for the whole process lifetime.
        let rc = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        // On failure (out of memory) the next call tries again.
        REGISTERED.store(if rc == 0 { DONE } else { 0 }, Ordering::Release);
        return;
    }
}

/// A value one fork's handlers hand from `prepare` to `parent` or
/// `child` (the guards of the locks they hold).
pub(crate) struct Held<T>(UnsafeCell<Option<T>>);

// SAFETY: only the atfork handlers touch a Held (through the unsafe put
// and take), and they run one fork at a time: `prepare` takes FORKING
// before any put, `parent` / `child` release it after every take, all on
// the forking thread. The value never moves to another thread.
unsafe impl<T> Sync for Held<T> {}

impl<T> Held<T> {
    /// Empty.
    pub(crate) const fn new() -> Self {
        Held(UnsafeCell::new(None))
    }

    /// Keeps `value` until the end of this fork.
    ///
    /// # Safety
    /// Only from an atfork handler of this module's (FORKING held).
    pub(crate) unsafe fn put(&self, value: T) {
        // SAFETY: FORKING held: no other access (see the Sync impl).
        unsafe { *self.0.get() = Some(value) };
    }

    /// Takes back what `put` kept.
    ///
    /// # Safety
    /// As [`Held::put`].
    pub(crate) unsafe fn take(&self) -> Option<T> {
        // SAFETY: as in put.
        unsafe { (*self.0.get()).take() }
    }
}

extern "C" fn prepare() {
    while FORKING
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    let _ = crate::allocator::cpu::builtin_ref();
    // SAFETY (every call below): FORKING is held, as their contracts ask.
    unsafe {
        crate::parallel::fork_prepare();
        crate::allocator::registry::fork_prepare();
        crate::allocator::reporter::fork_prepare();
        crate::allocator::fork_prepare();
        crate::allocator::caching::fork_prepare();
        crate::allocator::thread_counts::fork_prepare();
    }
}

extern "C" fn parent() {
    // SAFETY (every call below): FORKING is held since prepare.
    unsafe {
        crate::allocator::thread_counts::fork_release(false);
        crate::allocator::caching::fork_release();
        crate::allocator::fork_release();
        crate::allocator::reporter::fork_release();
        crate::allocator::registry::fork_release();
        crate::parallel::fork_release(false);
    }
    FORKING.store(false, Ordering::Release);
}

extern "C" fn child() {
    REGISTERED.store(DONE, Ordering::Release);
    // SAFETY (every call below): FORKING is held since prepare (the
    // child's copy of it), and this is the child's only thread.
    unsafe {
        crate::allocator::thread_counts::fork_release(true);
        crate::allocator::caching::fork_release();
        crate::allocator::fork_release();
        crate::allocator::reporter::fork_release();
        crate::allocator::registry::fork_release();
        crate::parallel::fork_release(true);
    }
    FORKING.store(false, Ordering::Release);
}
