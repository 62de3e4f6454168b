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
//!    then it waits for the one-time initializations under way
//!    ([`without_fork`]: the built-in CPU allocator's `OnceLock`, which a
//!    child would otherwise find half-made and wait on forever), and none
//!    starts until the fork ends;
//! 1. to 8. the locks of each module that keeps locks across calls, in
//!    the order of the table [`order`] (thread pool, registry, reporter,
//!    memory history, allocator list, caching allocators, CPU counter
//!    shards, CPU thread caches), each as its `fork_prepare` says.
//!
//! This cannot deadlock against tessera itself because no tessera code
//! holds a lock of a later step while it waits for one of an earlier step
//! (the nestings: 2 then 4, 5 or 6, when a registry lookup makes the
//! built-in or CUDA allocator, which may start memory history; 4 then 5
//! and 6, when a memory snapshot reads the allocators under the ring's
//! lock; the caching layer frees segments after unlocking), and no critical section calls host code (plugin
//! callbacks, the reporter, deleters run outside the locks).
//!
//! # Registration
//! This module is a leaf: it knows the lock order by step number only.
//! Each module that keeps such locks declares its [`Step`] (its number
//! from [`order`], its `prepare` and `release` functions) in a static and calls
//! [`ensure_handlers`] with it before taking any of them. The first call
//! for a step puts the step in the table the handlers walk and, on
//! tessera's first use of any of those locks, registers the handlers
//! (once per process). Later calls cost one load.
//!
//! Registering never waits on a fork in progress in a way that could
//! deadlock: until `pthread_atfork` returns, no fork runs tessera's
//! handlers, so none waits for a lock the registering thread may hold.
//! A step added while a fork's `prepare` runs is either seen by it (the
//! handlers read each step's slot just before taking its locks) or, if
//! `prepare` had already passed its slot, the adding thread waits for
//! that fork to end before it takes the step's locks. The fork does not
//! wait for that thread: it holds no lock of an earlier step (`prepare`
//! holds them all) nor of a later one (no tessera code first uses a step
//! while it holds a lock of a later step, see the nesting above).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// [`REGISTERED`] once the handlers are installed in this process.
const DONE: u64 = u64::MAX;

/// 0: not registered; DONE; otherwise the pid + 1 of the process in which
/// a thread is registering (a child forked at that moment sees its
/// parent's pid there, and registers for itself).
static REGISTERED: AtomicU64 = AtomicU64::new(0);

/// Held by a fork from its `prepare` to its `parent` or `child` handler.
static FORKING: AtomicBool = AtomicBool::new(false);

/// How many one-time initializations ([`without_fork`]) are under way.
static INITS: AtomicUsize = AtomicUsize::new(0);

/// Runs `f`, a one-time initialization of a module above this one (the
/// built-in CPU allocator's `OnceLock`), where no fork can catch it
/// half-way: a `OnceLock` copied into a child mid-initialization would
/// block the child forever, since the thread running it is not there.
/// `f` does not start while a fork is under way (it waits for the fork to
/// end), and a fork that starts while `f` runs waits in `prepare`, before
/// it takes any lock, until `f` has returned. Both sides announce
/// themselves and then look at the other (SeqCst), so at least one sees
/// the other. `f` must not fork, and is never called from the handlers.
pub(crate) fn without_fork<R>(f: impl FnOnce() -> R) -> R {
    loop {
        INITS.fetch_add(1, Ordering::SeqCst);
        if !FORKING.load(Ordering::SeqCst) {
            break;
        }
        INITS.fetch_sub(1, Ordering::SeqCst);
        while FORKING.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            INITS.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _done = Done;
    f()
}

/// In `prepare`, with the fork lock held: waits for the initializations
/// under way ([`without_fork`]); none starts until the fork ends.
fn wait_for_inits() {
    while INITS.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// The lock order, one number per module that keeps locks across calls
/// (its `FORK_STEP` static uses it): `prepare` takes them in this order,
/// `parent` and `child` release them in reverse. docs/RELIABILITY.md's
/// table lists the same steps (a test below checks it against [`ORDER`]).
pub(crate) mod order {
    /// `parallel.rs`: the thread pool slot.
    pub(crate) const THREAD_POOL: usize = 1;
    /// `allocator/registry.rs`: the registry's slots.
    pub(crate) const REGISTRY: usize = 2;
    /// `allocator/reporter.rs`: the memory reporter slot.
    pub(crate) const REPORTER: usize = 3;
    /// `allocator/history/mod.rs`: the memory history ring.
    pub(crate) const HISTORY: usize = 4;
    /// `allocator/mod.rs`: the list of live allocators.
    pub(crate) const ALLOCATORS: usize = 5;
    /// `allocator/caching/live.rs`: the caching allocators and their pools.
    pub(crate) const CACHING: usize = 6;
    /// `allocator/thread_counts.rs`: the CPU allocator's counter shards.
    pub(crate) const THREAD_COUNTS: usize = 7;
    /// `allocator/cpu_thread_cache.rs`: the registry of thread caches.
    pub(crate) const CPU_THREAD_CACHE: usize = 8;
}

/// Each step's number and the file that declares it, in order.
#[cfg(test)]
const ORDER: [(usize, &str); STEPS] = [
    (order::THREAD_POOL, "src/parallel.rs"),
    (order::REGISTRY, "src/allocator/registry.rs"),
    (order::REPORTER, "src/allocator/reporter.rs"),
    (order::HISTORY, "src/allocator/history/mod.rs"),
    (order::ALLOCATORS, "src/allocator/mod.rs"),
    (order::CACHING, "src/allocator/caching/live.rs"),
    (order::THREAD_COUNTS, "src/allocator/thread_counts.rs"),
    (order::CPU_THREAD_CACHE, "src/allocator/cpu_thread_cache.rs"),
];

/// The number of lock-order steps ([`order`]).
pub(crate) const STEPS: usize = order::CPU_THREAD_CACHE;

/// One step of the lock order: the locks of one module, taken by
/// `prepare` and released by `release` (`in_child`: in the child
/// process). Declare it in a static and pass it to [`ensure_handlers`].
pub(crate) struct Step {
    /// Its place in the lock order, 1 to [`STEPS`] (a constant of
    /// [`order`]).
    pub(crate) order: usize,
    /// Takes the step's locks and keeps their guards in a [`Held`].
    ///
    /// # Safety
    /// Only from the atfork handlers.
    pub(crate) prepare: unsafe fn(),
    /// Releases what `prepare` took.
    ///
    /// # Safety
    /// Only from the atfork handlers, after `prepare`.
    pub(crate) release: unsafe fn(bool),
    /// Set once the step is in [`TABLE`] and the handlers are registered.
    pub(crate) added: AtomicBool,
}

impl Step {
    /// A step not yet added.
    pub(crate) const fn new(order: usize, prepare: unsafe fn(), release: unsafe fn(bool)) -> Step {
        assert!(
            order >= 1 && order <= STEPS + TEST_SLOTS,
            "a fork step's number is outside the lock order"
        );
        Step {
            order,
            prepare,
            release,
            added: AtomicBool::new(false),
        }
    }
}

/// One slot past the last step for the unit tests' own step (the
/// handlers never read it).
const TEST_SLOTS: usize = cfg!(test) as usize;

/// The steps added so far, by order (slot 0 unused).
static TABLE: [AtomicPtr<Step>; STEPS + 1 + TEST_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; STEPS + 1 + TEST_SLOTS];

/// While FORKING is held: the step whose slot `prepare` reads next or has
/// read last (0: not yet at step 1).
static PROGRESS: AtomicUsize = AtomicUsize::new(0);

/// Makes sure the atfork handlers cover `step`'s locks (and are installed
/// in this process). Cheap (one load) once done; call it before taking
/// any of the step's locks.
#[inline]
pub(crate) fn ensure_handlers(step: &'static Step) {
    if !step.added.load(Ordering::Acquire) {
        add(step);
    }
}

#[cold]
fn add(step: &'static Step) {
    TABLE[step.order].store(step as *const Step as *mut Step, Ordering::SeqCst);
    if REGISTERED.load(Ordering::Acquire) != DONE {
        register();
    }
    // A fork whose prepare read this slot before the store above does not
    // hold the step's locks: let it end before the caller takes them. This
    // thread holds no lock of an earlier step (that prepare holds them).
    while FORKING.load(Ordering::SeqCst) && PROGRESS.load(Ordering::SeqCst) >= step.order {
        std::thread::yield_now();
    }
    // If registering failed (out of memory), the step's next call tries
    // again.
    if REGISTERED.load(Ordering::Acquire) == DONE {
        step.added.store(true, Ordering::Release);
    }
}

/// The step in slot `order`, if added.
fn step_at(order: usize) -> Option<&'static Step> {
    let p = TABLE[order].load(Ordering::SeqCst);
    // SAFETY: the table holds only null or addresses of `&'static Step`s
    // (add).
    unsafe { p.as_ref() }
}

#[cold]
fn register() {
    let me = crate::platform::process::id() + 1;
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
        let ok = crate::platform::process::register_fork_handlers(prepare, parent, child);
        // On failure (out of memory) the next call tries again.
        REGISTERED.store(if ok { DONE } else { 0 }, Ordering::Release);
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
        .compare_exchange_weak(false, true, Ordering::SeqCst, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    // Before waiting: an initialization under way may add a step, which
    // waits only while PROGRESS has reached that step's slot.
    PROGRESS.store(0, Ordering::SeqCst);
    wait_for_inits();
    for order in 1..=STEPS {
        PROGRESS.store(order, Ordering::SeqCst);
        if let Some(step) = step_at(order) {
            // SAFETY: FORKING is held, as the step's contract asks.
            unsafe { (step.prepare)() };
        }
    }
}

/// Releases, in reverse order, every step `prepare` took (those in the
/// table: a step added after prepare passed its slot waits for this fork
/// to end before it is marked added, but its slot is already filled, so
/// its release finds nothing held and does nothing).
fn release_all(in_child: bool) {
    for order in (1..=STEPS).rev() {
        if let Some(step) = step_at(order) {
            // SAFETY: FORKING is held since prepare (in the child: the
            // child's copy of it, on its only thread).
            unsafe { (step.release)(in_child) };
        }
    }
}

extern "C" fn parent() {
    release_all(false);
    FORKING.store(false, Ordering::SeqCst);
}

extern "C" fn child() {
    REGISTERED.store(DONE, Ordering::Release);
    // The child's only thread forked, so it is inside no initialization;
    // a count copied from the parent is some other thread's announcement
    // (made and about to be withdrawn when the fork happened).
    INITS.store(0, Ordering::SeqCst);
    release_all(true);
    FORKING.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe fn nothing() {}
    unsafe fn nothing_released(_in_child: bool) {}

    #[test]
    fn first_use_adds_the_step_and_registers_the_handlers() {
        // The test-only slot past the last step: the handlers never run it.
        static TEST_STEP: Step = Step::new(STEPS + 1, nothing, nothing_released);
        assert!(!TEST_STEP.added.load(Ordering::SeqCst));
        assert!(step_at(STEPS + 1).is_none());
        ensure_handlers(&TEST_STEP);
        assert!(TEST_STEP.added.load(Ordering::SeqCst));
        assert_eq!(REGISTERED.load(Ordering::SeqCst), DONE);
        assert!(std::ptr::eq(step_at(STEPS + 1).unwrap(), &TEST_STEP));
    }

    /// The lock-order table of docs/RELIABILITY.md names, for each step
    /// number, the file that declares it, as [`ORDER`] does, and each of
    /// those files uses its step's constant.
    #[test]
    fn the_documented_lock_order_is_the_code_s() {
        let root = env!("CARGO_MANIFEST_DIR");
        let doc = std::fs::read_to_string(format!("{root}/docs/RELIABILITY.md")).unwrap();
        let rows: Vec<(usize, String)> = doc
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let n: usize = cells.get(1)?.parse().ok()?;
                let file = cells.get(3)?.trim_matches('`').to_string();
                (n >= 1 && file.starts_with("src/")).then_some((n, file))
            })
            .collect();
        let want: Vec<(usize, String)> = ORDER.iter().map(|&(n, f)| (n, f.to_string())).collect();
        assert_eq!(rows, want, "docs/RELIABILITY.md's lock-order table");
        let names = [
            "THREAD_POOL",
            "REGISTRY",
            "REPORTER",
            "HISTORY",
            "ALLOCATORS",
            "CACHING",
            "THREAD_COUNTS",
            "CPU_THREAD_CACHE",
        ];
        for ((_, file), name) in ORDER.iter().zip(names) {
            let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            assert!(
                text.contains(&format!("fork::order::{name},")),
                "{file} declares step {name}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "outside the lock order")]
    fn a_step_outside_the_order_is_refused() {
        let _ = Step::new(0, nothing, nothing_released);
    }
}
