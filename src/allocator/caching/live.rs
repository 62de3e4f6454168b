//! Every live caching allocator: the list (so the atfork handlers can
//! hold every pool lock across a fork, and memory snapshots can list the
//! segments), the atfork handlers, and the segments of each for
//! snapshots.

use super::{history, thread_front, SegmentView, Shared};
use crate::fork::{Held, Step};
use std::sync::{Mutex, MutexGuard};

/// Every live shared state (addresses), so the atfork handlers can hold
/// every pool lock across a fork.
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

pub(super) fn live() -> MutexGuard<'static, Vec<usize>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The list's guard, held from the atfork `prepare` handler to `parent`
/// or `child` (the pool locks are held without guards).
static HELD: Held<MutexGuard<'static, Vec<usize>>> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
pub(super) static FORK_STEP: Step =
    Step::new(crate::fork::order::CACHING, fork_prepare, fork_release);

/// Atfork `prepare`: holds the list of live caching allocators, then each
/// one's pool lock, in list order, so no thread is inside a critical
/// section at the fork. A poisoned lock is taken too (and stays
/// poisoned).
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
pub(crate) unsafe fn fork_prepare() {
    let list = live();
    for &p in list.iter() {
        // SAFETY: a state in the list is alive: it leaves the list
        // (Shared::destroy, under the list's lock, which we hold until
        // fork_release) before it is freed.
        unsafe { &*(p as *const Shared) }.lock.force_lock();
    }
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put(list) };
}

/// Atfork `parent` or `child`: releases every pool lock, then the list.
/// In the child, the blocks other threads of the parent held stay
/// counted as in use (the child's statistics go on from the parent's).
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
pub(crate) unsafe fn fork_release(_in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    let Some(list) = (unsafe { HELD.take() }) else {
        return;
    };
    for &p in list.iter() {
        // SAFETY: alive, as in fork_prepare (the list is still held);
        // fork_prepare took this lock and nothing released it since.
        unsafe { (*(p as *const Shared)).lock.force_unlock() };
    }
    drop(list);
}

/// The segments of every live caching allocator, keyed by the owner's
/// history identity ([`history::Tag::key`]).
pub(crate) fn all_segments() -> Vec<(usize, Vec<SegmentView>)> {
    // The calling thread's parked blocks show as free.
    thread_front::flush_current();
    let list = live();
    let mut out = Vec::new();
    for &p in list.iter() {
        // SAFETY: an address in the list is a live Shared (it leaves the
        // list under this lock before it is destroyed).
        let shared = unsafe { &*(p as *const Shared) };
        let Ok(mut st) = shared.lock.lock() else {
            continue;
        };
        if let Some(tag) = st.tag {
            out.push((history::Tag::key(tag), st.segments()));
        }
    }
    out
}
