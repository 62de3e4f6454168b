//! The thread pool behind parallel loops: a rayon pool sized by
//! `set_num_threads` (default: the machine's available parallelism), and
//! c10's `parallel_for` splitting rule.
//!
//! After `fork()` the child has none of the pool's threads: its atfork
//! handler ([`fork_release`]) forgets the pool, and the child's first
//! parallel loop makes a fresh one with the same thread count.

use crate::fork::{self, Held, Step};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

static NUM_THREADS: AtomicUsize = AtomicUsize::new(0);
static POOL: RwLock<Option<Arc<rayon::ThreadPool>>> = RwLock::new(None);

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The number of threads parallel loops use.
pub fn get_num_threads() -> usize {
    match NUM_THREADS.load(Ordering::Relaxed) {
        0 => default_threads(),
        n => n,
    }
}

/// Sets the number of threads parallel loops use (at least 1). The pool is
/// rebuilt on the next parallel loop.
pub fn set_num_threads(n: usize) {
    fork::ensure_handlers(&FORK_STEP);
    let n = n.max(1);
    if NUM_THREADS.swap(n, Ordering::Relaxed) != n {
        *POOL.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    fork::ensure_handlers(&FORK_STEP);
    if let Some(p) = POOL.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        if p.current_num_threads() == threads {
            return Some(p.clone());
        }
    }
    let mut slot = POOL.write().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = slot.as_ref() {
        if p.current_num_threads() == threads {
            return Some(p.clone());
        }
    }
    let p = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tessera-{i}"))
            .build()
            .ok()?,
    );
    *slot = Some(p.clone());
    Some(p)
}

type PoolSlot = Option<Arc<rayon::ThreadPool>>;

/// The pool slot's guard, from the atfork `prepare` handler to `parent`
/// or `child`.
static HELD: Held<RwLockWriteGuard<'static, PoolSlot>> = Held::new();

/// The pool the last fork left behind in this (child) process; never
/// freed (see [`fork_release`]).
static ABANDONED: AtomicPtr<rayon::ThreadPool> = AtomicPtr::new(std::ptr::null_mut());

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(crate::fork::order::THREAD_POOL, fork_prepare, fork_release);

/// Atfork `prepare`: holds the pool slot, so no thread is making or
/// replacing the pool at the fork.
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
pub(crate) unsafe fn fork_prepare() {
    let guard = POOL.write().unwrap_or_else(|e| e.into_inner());
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put(guard) };
}

/// Atfork `parent` (in_child false) or `child`: releases the pool slot;
/// in the child, first forgets the pool.
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
pub(crate) unsafe fn fork_release(in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    let Some(mut guard) = (unsafe { HELD.take() }) else {
        return;
    };
    if in_child {
        if let Some(old) = guard.take() {
            // Deliberately leaked, never dropped (as mem::forget would;
            // the pointer is kept so leak checkers such as valgrind
            // count it as reachable): its worker threads do not exist in
            // the child, and dropping the pool would signal them through
            // the pool's sleep state (locks and condition variables a
            // worker may have held at the fork) and free memory those
            // threads' stacks still point into. The child's next parallel
            // loop makes a new pool (`pool`). One pool per fork
            // generation; a grandchild overwrites the pointer.
            ABANDONED.store(Arc::into_raw(old).cast_mut(), Ordering::Relaxed);
        }
    }
    drop(guard);
}

/// Whether the calling thread is running a parallel loop's task.
pub fn in_parallel_region() -> bool {
    rayon::current_thread_index().is_some()
}

/// Runs `f(begin, end)` over [begin, end) split into at most
/// `get_num_threads()` chunks of at least `grain` elements, in parallel.
/// Small ranges, one thread, or a call from inside a parallel loop run
/// `f(begin, end)` on the calling thread.
pub fn parallel_for(begin: i64, end: i64, grain: i64, f: impl Fn(i64, i64) + Sync) {
    if begin >= end {
        return;
    }
    let threads = get_num_threads();
    let n = end - begin;
    let grain = grain.max(1);
    if n < grain || threads == 1 || in_parallel_region() {
        f(begin, end);
        return;
    }
    let tasks = (threads as i64).min((n + grain - 1) / grain);
    let chunk = (n + tasks - 1) / tasks;
    let Some(pool) = pool(threads) else {
        f(begin, end);
        return;
    };
    // The calling thread runs the first chunk itself, as an OpenMP master
    // thread does, while the pool's workers take the others: one wake-up
    // fewer, and the caller is not left sleeping on a latch.
    pool.in_place_scope(|s| {
        for t in 1..tasks {
            let (b, e) = (begin + t * chunk, (begin + (t + 1) * chunk).min(end));
            if b < e {
                let f = &f;
                s.spawn(move |_| f(b, e));
            }
        }
        f(begin, (begin + chunk).min(end));
    });
}

/// The chunks `parallel_for` would make for [begin, end): used by
/// reductions that keep one accumulator per chunk.
pub fn chunks(begin: i64, end: i64, grain: i64) -> Vec<(i64, i64)> {
    if begin >= end {
        return Vec::new();
    }
    let threads = get_num_threads() as i64;
    let n = end - begin;
    let grain = grain.max(1);
    let tasks = if n < grain || threads == 1 || in_parallel_region() {
        1
    } else {
        threads.min((n + grain - 1) / grain)
    };
    let chunk = (n + tasks - 1) / tasks;
    (0..tasks)
        .map(|t| (begin + t * chunk, (begin + (t + 1) * chunk).min(end)))
        .filter(|(b, e)| b < e)
        .collect()
}

/// Runs `f(begin, end)` for every chunk, in parallel when there is more
/// than one, and returns the results in chunk order.
pub fn map_chunks<T: Send>(chunks: &[(i64, i64)], f: impl Fn(i64, i64) -> T + Sync) -> Vec<T> {
    if chunks.len() <= 1 {
        return chunks.iter().map(|&(b, e)| f(b, e)).collect();
    }
    let mut results: Vec<Option<T>> = chunks.iter().map(|_| None).collect();
    let Some(pool) = pool(get_num_threads()) else {
        return chunks.iter().map(|&(b, e)| f(b, e)).collect();
    };
    // As in parallel_for: the first chunk on the calling thread.
    let (first, rest) = results.split_at_mut(1);
    pool.in_place_scope(|s| {
        for (slot, &(b, e)) in rest.iter_mut().zip(&chunks[1..]) {
            let f = &f;
            s.spawn(move |_| *slot = Some(f(b, e)));
        }
        first[0] = Some(f(chunks[0].0, chunks[0].1));
    });
    results
        .into_iter()
        .map(|r| r.expect("every chunk ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    #[test]
    fn covers_the_range_once() {
        let sum = AtomicI64::new(0);
        let calls = AtomicI64::new(0);
        parallel_for(3, 100_003, 1000, |b, e| {
            calls.fetch_add(1, Ordering::Relaxed);
            sum.fetch_add((b..e).sum::<i64>(), Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), (3..100_003).sum::<i64>());
        assert!(calls.load(Ordering::Relaxed) <= get_num_threads() as i64);
        let c = chunks(0, 10, 3);
        assert_eq!(c.iter().map(|(b, e)| e - b).sum::<i64>(), 10);
        assert_eq!(chunks(0, 10, 100), vec![(0, 10)]);
    }
}
