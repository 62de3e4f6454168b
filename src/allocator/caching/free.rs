//! A block's way back to its pool under the allocator's lock: the free
//! a thread front did not take (or gave back when flushed), with the
//! memory reporter told first when one is installed, and the state
//! destroyed after the last block of an orphaned one.

use super::block::BlockId;
use super::pool::State;
use super::{lock, streams, Shared};
use crate::allocator::reporter;

/// Gives a handed-out block back to its pool, under the lock (and
/// destroys the state when it was the last block of an orphaned one).
///
/// # Safety
/// `block` is handed out and this is its one free.
pub(super) unsafe fn caching_free_locked(block: BlockId) {
    let shared_ptr = block.shared();
    // SAFETY: the state lives while a block is out (see the module docs).
    let shared = unsafe { &*shared_ptr };
    let destroy = if reporter::is_active() {
        free_reported(shared, block)
    } else {
        free_quiet(shared, block)
    };
    if destroy {
        // SAFETY: the owner is gone and this was the last block out, so no
        // other thread can reach the state; our guard was dropped.
        unsafe { Shared::destroy(shared_ptr) };
    }
}

/// Frees a block in one critical section. Returns whether to destroy the
/// state. A poisoned lock leaks the block rather than touch broken pools.
#[inline]
fn free_quiet(shared: &Shared, block: BlockId) -> bool {
    let Ok(mut st) = shared.lock.lock() else {
        return false;
    };
    let (_, nbytes, _) = st.info(block);
    st.record_free(nbytes);
    if st.has_stream_uses(block) {
        return streams::free_after_uses(shared, &mut st, block);
    }
    // Parked: the common case, and never the last block of an orphaned
    // state (an orphaned state parks nothing).
    if st.park(block) {
        return false;
    }
    release_locked(st, block)
}

/// The rest of a free the front cache did not take: merges the block into
/// its pool (out of line, so the parking path stays small). Returns
/// whether to destroy the state.
#[inline(never)]
fn release_locked(mut st: lock::SpinGuard<'_, State>, block: BlockId) -> bool {
    st.release(block);
    st.should_destroy()
}

/// Frees a block when a memory reporter is installed: the reporter must
/// hear of the free before the memory can be handed out again (so a host
/// tracking addresses never sees the next allocation of it first), and must
/// not run under the lock (it may allocate), so the free takes two
/// critical sections with the report between them.
#[cold]
fn free_reported(shared: &Shared, block: BlockId) -> bool {
    let (data, nbytes, device, total, tag) = {
        let Ok(mut st) = shared.lock.lock() else {
            return false;
        };
        let (data, nbytes, device) = st.info(block);
        st.record_free(nbytes);
        (data, nbytes, device, st.allocated, st.tag)
    };
    reporter::report(tag, data, -(nbytes as i64), total, device);
    let Ok(mut st) = shared.lock.lock() else {
        return false;
    };
    if st.has_stream_uses(block) {
        return streams::free_after_uses(shared, &mut st, block);
    }
    if !st.park(block) {
        st.release(block);
    }
    st.should_destroy()
}
