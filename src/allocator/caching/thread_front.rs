//! The thread front: a few blocks a thread freed, kept by that thread and
//! taken back by its next request of exactly the same size, device and
//! stream, without the allocator's lock (no locked instruction at all: the
//! front is the thread's own, reached through its thread slot).
//!
//! It holds at most [`ENTRIES`] blocks of the small pool (up to 1 MiB),
//! of one caching allocator at a time (the one the thread freed into
//! last: a block of another flushes it first). A parked block stays
//! counted as allocated everywhere (the allocator's statistics, the
//! owner's, memory snapshots) and its request is taken back unchanged, so
//! a round trip changes no current value; its counts (an allocation, a
//! free, a cache hit and the cumulative amounts) wait in the front and are
//! added under the lock every [`COUNT_FLUSH`] round trips, when the thread
//! reads the allocator's statistics or empties its cache, and when the
//! front is flushed. The front is flushed (its blocks freed as any
//! free is, under the lock) when the thread frees a block of another
//! allocator, reads the statistics, empties the cache, takes a snapshot,
//! drops the allocator, and when it exits.
//!
//! Every locked operation of the thread on the allocator (an allocation
//! the front does not serve, a statistics read) first gives the front's
//! blocks back to the pools inside the same critical section
//! ([`drain`]), so for the thread itself the allocator behaves exactly as
//! without a front: best fit sees the blocks free, and current values and
//! peaks are c10's (a round trip restores the very values the block had;
//! every peak is raised under the lock after the frees are applied).
//!
//! What another thread sees (docs/SEMANTICS.md, "Caching allocators: the
//! thread front"): the blocks parked in this thread's front as allocated,
//! and its pending counts not yet added; peaks it sets count them;
//! `empty_cache` on another thread cannot return their segments. While a
//! memory reporter is installed or memory history records, the front
//! takes and parks nothing (both must see every allocation and free).

use super::block::{BlockId, FrontInfo};
use super::free::caching_free_locked;
use super::pool::State;
use super::sizes::PoolKind;
use super::Shared;
use crate::allocator::{active, thread_slot};
use crate::data_ptr::DataPtr;
use crate::device::Device;
use std::cell::Cell;
use std::ffi::c_void;

/// Blocks a front holds.
pub(super) const ENTRIES: usize = 4;
/// Round trips counted in the front before they are added to the
/// statistics.
const COUNT_FLUSH: u64 = 1024;

/// Round trips not yet in the statistics: count, bytes of their blocks,
/// bytes requested, on one device.
#[derive(Clone, Copy)]
pub(super) struct Pending {
    pub(super) device: Device,
    pub(super) trips: u64,
    pub(super) bytes: u64,
    pub(super) requested: u64,
}

/// A thread's front. Only its thread touches it (Cells: a flush may free
/// blocks whose deleters come back here). Every field is a word of its
/// own, read and written whole: a parked block's key is its request
/// alone, the rest is read from the block's own key (written when it was
/// handed out, long before), so no load waits on a store of other width
/// (a copied struct's wide loads after narrow stores cost a stall each).
struct Front {
    /// The allocator the parked blocks and pending counts belong to.
    shared: Cell<*const Shared>,
    len: Cell<usize>,
    /// The parked blocks' requests.
    nbytes: [Cell<usize>; ENTRIES],
    blocks: [Cell<Option<BlockId>>; ENTRIES],
    /// The pending counts (see [`Pending`]).
    device: Cell<Device>,
    trips: Cell<u64>,
    bytes: Cell<u64>,
    requested: Cell<u64>,
}

impl Front {
    fn new() -> Front {
        Front {
            shared: Cell::new(std::ptr::null()),
            len: Cell::new(0),
            nbytes: [const { Cell::new(0) }; ENTRIES],
            blocks: [const { Cell::new(None) }; ENTRIES],
            device: Cell::new(Device::CPU),
            trips: Cell::new(0),
            bytes: Cell::new(0),
            requested: Cell::new(0),
        }
    }

    /// The pending counts, taken out.
    fn take_pending(&self) -> Pending {
        Pending {
            device: self.device.get(),
            trips: self.trips.replace(0),
            bytes: self.bytes.replace(0),
            requested: self.requested.replace(0),
        }
    }
}

/// Owns the thread's front; its drop (thread exit) unpublishes and
/// flushes it.
struct Owner(Box<Front>);

impl Drop for Owner {
    fn drop(&mut self) {
        thread_slot::with(|w| w[thread_slot::CACHING_FRONT].set(0));
        flush_front(&self.0);
    }
}

thread_local! {
    static OWNER: Owner = {
        let owner = Owner(Box::new(Front::new()));
        let p: *const Front = &*owner.0;
        thread_slot::with(|w| w[thread_slot::CACHING_FRONT].set(p as usize));
        owner
    };
}

/// The calling thread's front, if it has one.
#[inline(always)]
fn published() -> Option<&'static Front> {
    let p = thread_slot::with(|w| w[thread_slot::CACHING_FRONT].get()) as *const Front;
    // SAFETY: a published front lives in the thread's OWNER until it drops,
    // which unpublishes it first; only this thread reads its own slot, so
    // the reference is not used after that.
    unsafe { p.as_ref() }
}

/// Takes a parked block for a request of `nbytes` on `pool_device` and
/// `stream` of `shared`, or None having done nothing.
#[inline(always)]
pub(super) fn take(
    shared: *const Shared,
    nbytes: usize,
    pool_device: Device,
    stream: usize,
) -> Option<DataPtr> {
    if active::get() != 0 {
        return None;
    }
    let front = published()?;
    if front.shared.get() != shared {
        return None;
    }
    let len = front.len.get();
    let mut i = len;
    while i > 0 {
        i -= 1;
        if front.nbytes[i].get() != nbytes {
            continue;
        }
        let Some(block) = front.blocks[i].get() else {
            continue;
        };
        let info = block.front();
        if info.pool_device != pool_device || info.stream != stream {
            continue;
        }
        // The last entry fills the hole.
        front.nbytes[i].set(front.nbytes[len - 1].get());
        front.blocks[i].set(front.blocks[len - 1].get());
        front.len.set(len - 1);
        count(front, &info);
        // SAFETY: the block was handed out and parked here, so it is ours
        // to hand out again; caching_free takes it back once.
        return Some(unsafe {
            DataPtr::from_raw_parts(
                info.addr as *mut c_void,
                block.as_ctx(),
                Some(caching_free),
                info.data_device,
            )
        });
    }
    None
}

/// Counts a round trip of a block in the front.
#[inline(always)]
fn count(front: &Front, info: &FrontInfo) {
    if front.device.get() != info.pool_device {
        if front.trips.get() != 0 {
            flush_counts(front);
        }
        front.device.set(info.pool_device);
    }
    let trips = front.trips.get() + 1;
    front.trips.set(trips);
    front.bytes.set(front.bytes.get() + info.size as u64);
    front
        .requested
        .set(front.requested.get() + info.nbytes as u64);
    if trips >= COUNT_FLUSH {
        flush_counts(front);
    }
}

/// The deleter of every block: parks it in the calling thread's front, or
/// gives it back to its pool.
pub(super) unsafe extern "C" fn caching_free(ctx: *mut c_void) {
    // SAFETY: this deleter is only attached to DataPtrs whose context is a
    // handed-out block record, and runs once per such DataPtr.
    let block = unsafe { BlockId::from_ctx(ctx) };
    if put(block) {
        return;
    }
    // SAFETY: as above: the block's one free.
    unsafe { caching_free_locked(block) }
}

/// Parks a block being freed in the calling thread's front; false (having
/// done nothing) when it does not go there.
#[inline(always)]
pub(super) fn put(block: BlockId) -> bool {
    if active::get() != 0 {
        return false;
    }
    #[cfg(test)]
    if DISABLED.with(Cell::get) {
        return false;
    }
    let Some(front) = published() else {
        return put_first(block);
    };
    let nbytes = block.front_nbytes();
    if nbytes == 0 {
        return false;
    }
    let shared = block.shared();
    if front.shared.get() != shared {
        return rebind(front, block);
    }
    let len = front.len.get();
    if len == ENTRIES {
        return false;
    }
    front.nbytes[len].set(nbytes);
    front.blocks[len].set(Some(block));
    front.len.set(len + 1);
    true
}

/// The thread's first free of a caching block: makes its front (then
/// parks), unless the thread is being torn down.
#[cold]
#[inline(never)]
fn put_first(block: BlockId) -> bool {
    if OWNER.try_with(|_| ()).is_err() {
        return false;
    }
    published().is_some() && put(block)
}

/// A block of another allocator than the front holds (or a front bound
/// to none): the front is flushed and bound to the block's allocator,
/// unless that one's owner is gone (its blocks are freed under the lock:
/// its last free destroys it).
#[cold]
#[inline(never)]
fn rebind(front: &Front, block: BlockId) -> bool {
    flush_front(front);
    if !front.shared.get().is_null() {
        // The flush's frees bound the front to yet another allocator.
        return false;
    }
    let shared = block.shared();
    // SAFETY: the block is out, so its allocator's state lives.
    if !unsafe { &*shared }.bind_front() {
        return false;
    }
    front.shared.set(shared);
    put(block)
}

/// Adds the front's pending counts to its allocator's statistics.
#[cold]
#[inline(never)]
fn flush_counts(front: &Front) {
    let shared = front.shared.get();
    if front.trips.get() == 0 || shared.is_null() {
        return;
    }
    let p = front.take_pending();
    // SAFETY: a bound front counts in its allocator's state (State::fronts),
    // which lives until every front bound to it is unbound.
    unsafe { &*shared }.add_round_trips(p);
}

/// Frees every parked block (under the lock, as any free), adds the
/// pending counts and unbinds the front (which may destroy a state whose
/// owner is gone).
fn flush_front(front: &Front) {
    let shared = front.shared.get();
    if shared.is_null() {
        return;
    }
    flush_counts(front);
    let len = front.len.replace(0);
    let mut blocks = [None; ENTRIES];
    for (i, b) in blocks.iter_mut().enumerate().take(len) {
        *b = front.blocks[i].get();
    }
    front.shared.set(std::ptr::null());
    for b in blocks.into_iter().flatten() {
        // SAFETY: a parked block is handed out and not freed; this is its
        // one free. It never destroys the state: the front is still
        // counted in it.
        unsafe { caching_free_locked(b) };
    }
    // SAFETY: still counted in State::fronts, so alive; this is the
    // front's one unbinding.
    unsafe { Shared::unbind_front(shared) };
}

/// What [`drain`] took out of a front.
pub(super) struct Drained {
    pub(super) blocks: [Option<BlockId>; ENTRIES],
    pub(super) pending: Pending,
}

/// Whether the calling thread's front holds blocks or counts of `shared`.
#[inline(always)]
pub(super) fn holds(shared: *const Shared) -> bool {
    published()
        .is_some_and(|f| f.shared.get() == shared && (f.len.get() != 0 || f.trips.get() != 0))
}

/// Takes the blocks and pending counts of `shared` out of the calling
/// thread's front (which stays bound), for the caller to apply under the
/// allocator's lock, which it holds. None when there are none.
#[inline]
pub(super) fn drain(shared: *const Shared) -> Option<Drained> {
    let front = published()?;
    if front.shared.get() != shared {
        return None;
    }
    let len = front.len.replace(0);
    if len == 0 && front.trips.get() == 0 {
        return None;
    }
    let pending = front.take_pending();
    let mut blocks = [None; ENTRIES];
    for (i, b) in blocks.iter_mut().enumerate().take(len) {
        *b = front.blocks[i].get();
    }
    Some(Drained { blocks, pending })
}

/// Turns the calling thread's front off (tests of what lies behind it).
#[cfg(test)]
pub(super) fn disable_for_this_thread() {
    DISABLED.with(|d| d.set(true));
}

#[cfg(test)]
thread_local! {
    static DISABLED: Cell<bool> = const { Cell::new(false) };
}

/// Flushes the calling thread's front if it is bound to `shared` (before
/// the thread reads statistics, empties the cache or drops the
/// allocator).
pub(super) fn flush_own(shared: *const Shared) {
    if let Some(front) = published() {
        if front.shared.get() == shared {
            flush_front(front);
        }
    }
}

/// Flushes the calling thread's front, whatever it is bound to (before a
/// memory snapshot).
pub(super) fn flush_current() {
    if let Some(front) = published() {
        flush_front(front);
    }
}

impl Shared {
    /// Binds a thread front to this state (thread_front.rs): counted, so
    /// the state outlives it. False when the owner is gone (nothing more
    /// goes to fronts then) or the lock is poisoned.
    fn bind_front(&self) -> bool {
        let Ok(mut st) = self.lock.lock() else {
            return false;
        };
        if st.orphaned {
            return false;
        }
        st.fronts += 1;
        true
    }

    /// Unbinds a thread front; destroys the state when it was the last
    /// thing an orphaned state waited for.
    ///
    /// # Safety
    /// `shared` has a front bound (from `bind_front`), unbound once here.
    unsafe fn unbind_front(shared: *const Shared) {
        // SAFETY: the bound front keeps the state alive until here.
        let destroy = match unsafe { &*shared }.lock.lock() {
            Ok(mut st) => {
                st.fronts -= 1;
                st.should_destroy()
            }
            Err(_) => false,
        };
        if destroy {
            // SAFETY: orphaned, no block out, no front bound: nothing else
            // can reach the state; the guard was dropped.
            unsafe { Shared::destroy(shared) };
        }
    }

    /// Adds a thread front's round trips to the statistics.
    fn add_round_trips(&self, p: Pending) {
        if let Ok(mut st) = self.lock.lock() {
            st.apply_drained(Drained {
                blocks: [None; ENTRIES],
                pending: p,
            });
        }
    }
}

impl State {
    /// Applies what a thread front gave back (under the lock): each block
    /// freed as `free_quiet` frees it (the owner's statistics, the locked
    /// front cache or the pool), and the round trips counted.
    pub(super) fn apply_drained(&mut self, d: Drained) {
        for b in d.blocks.into_iter().flatten() {
            let (_, nbytes, _) = self.info(b);
            self.record_free(nbytes);
            if !self.park(b) {
                self.release(b);
            }
        }
        let p = d.pending;
        if p.trips != 0 {
            let dev = self.stats.device_number(p.device);
            self.stats.on(dev, |t| {
                t.round_trips(PoolKind::Small, p.trips, p.bytes, p.requested)
            });
            if !self.owner.is_null() {
                // SAFETY: non-NULL under the lock means the owner is alive.
                unsafe { &*self.owner }
                    .stats()
                    .record_round_trips_serialized(p.trips);
            }
        }
    }
}
