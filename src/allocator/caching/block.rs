//! Block records: one per block of a segment, handed-out or free. A
//! handed-out block's record address is the context of its DataPtr, so
//! records are allocated in chunks that never move and are recycled
//! through a spare list rather than freed; the chunks go with the whole
//! allocator state.

use super::sizes::PoolKind;
use super::Shared;
use crate::data_ptr::DataPtr;
use crate::device::Device;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr::NonNull;

const RECORDS_PER_CHUNK: usize = 64;

/// A block record. The context of a handed-out block's DataPtr is its
/// address.
pub(super) struct Block {
    /// The allocator the record belongs to. Written when the record is
    /// made and never after, so the deleter may read it before locking.
    shared: *const Shared,
    /// What a thread front needs to take the block back (thread_front.rs),
    /// read without the lock by the thread that frees it.
    front: FrontKey,
    /// Everything else; only touched under the allocator's lock.
    state: UnsafeCell<BlockState>,
}

/// A handed-out block as a thread front files it (thread_front.rs):
/// written under the lock when the block is handed out (and cleared by
/// `record_stream`, also under the lock), read without it by the deleter.
/// No two of these accesses race: the handing out happens before the
/// deleter runs (the DataPtr goes from the allocating code to the freeing
/// code), so does every `record_stream` of the block (it takes the
/// DataPtr), and the block is handed out again only after the deleter
/// is done with it.
pub(super) struct FrontKey(UnsafeCell<FrontInfo>);

/// A block's [`FrontKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrontInfo {
    /// The request (0: the block never goes to a thread front).
    pub(super) nbytes: usize,
    /// Its data address and size.
    pub(super) addr: usize,
    pub(super) size: usize,
    /// The stream and device of its pools.
    pub(super) stream: usize,
    pub(super) pool_device: Device,
    /// The device its memory is on.
    pub(super) data_device: Device,
}

/// The mutable part of a block record.
pub(super) struct BlockState {
    /// Data address.
    pub(super) addr: usize,
    /// Size in bytes, a multiple of MIN_BLOCK.
    pub(super) size: usize,
    /// The caller's request while allocated.
    pub(super) requested: usize,
    /// Neighbours in the segment (lower / higher address).
    pub(super) prev: Option<BlockId>,
    pub(super) next: Option<BlockId>,
    /// Links of the small pool's size-class lists, and of the spare list.
    pub(super) link_prev: Option<BlockId>,
    pub(super) link_next: Option<BlockId>,
    /// The inner allocation, on the first block of a segment.
    pub(super) segment: Option<DataPtr>,
    /// Where the memory is, as the inner allocator reported it.
    pub(super) device: Device,
    /// Index of the device's pools in `State::devices`.
    pub(super) slot: usize,
    pub(super) kind: PoolKind,
    /// Part of a segment made for an oversize request (never split).
    pub(super) oversize: bool,
    pub(super) allocated: bool,
    /// Memory is mapped at the block's addresses (always, but for the
    /// unmapped parts of expandable segments).
    pub(super) mapped: bool,
    /// The expandable segment the block belongs to (an index into the
    /// state's expandable segments), if any.
    pub(super) expandable: Option<u32>,
    /// The pool's free-block lookup count when the block was freed
    /// (garbage collection ages blocks by it).
    pub(super) gc_base: u64,
    /// Streams other than its pools' that used the block while it was
    /// handed out (`record_stream`); empty while it is free.
    pub(super) stream_uses: Vec<usize>,
}

impl BlockState {
    fn vacant() -> BlockState {
        BlockState {
            addr: 0,
            size: 0,
            requested: 0,
            prev: None,
            next: None,
            link_prev: None,
            link_next: None,
            segment: None,
            device: Device::CPU,
            slot: 0,
            kind: PoolKind::Small,
            oversize: false,
            allocated: false,
            mapped: true,
            expandable: None,
            gc_base: 0,
            stream_uses: Vec::new(),
        }
    }

    /// Whether the block is a whole segment.
    pub(super) fn is_whole(&self) -> bool {
        self.prev.is_none() && self.next.is_none()
    }
}

/// A reference to a block record of some caching allocator.
///
/// Invariant: the record is alive (its chunk is freed only with the whole
/// allocator state, when no block is handed out and no thread is inside
/// the allocator). Values are made only by [`Records`] and by
/// [`BlockId::from_ctx`], so every one refers to such a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BlockId(NonNull<Block>);

impl BlockId {
    /// The block whose DataPtr context is `ctx`.
    ///
    /// # Safety
    /// `ctx` must be the context of a live DataPtr handed out by a caching
    /// allocator (whose deleter has not run).
    pub(super) unsafe fn from_ctx(ctx: *mut c_void) -> BlockId {
        // SAFETY: the caller passes a block record's address, never NULL.
        BlockId(unsafe { NonNull::new_unchecked(ctx as *mut Block) })
    }

    /// The record's address, the DataPtr context.
    pub(super) fn as_ctx(self) -> *mut c_void {
        self.0.as_ptr() as *mut c_void
    }

    /// The allocator state the block belongs to.
    pub(super) fn shared(self) -> *const Shared {
        // SAFETY: the record is alive (type invariant); `shared` is never
        // written after the record is made, so this read races with nothing
        // (other threads only write inside `state`, an UnsafeCell).
        unsafe { (*self.0.as_ptr()).shared }
    }

    /// Files the block for thread fronts as handed out for `info.nbytes`
    /// (0: never parked in a thread front). Under the allocator's lock.
    #[inline(always)]
    pub(super) fn set_front(self, info: FrontInfo) {
        // SAFETY: the record is alive (type invariant); the block is being
        // handed out under the lock, so no deleter reads the key now (see
        // FrontKey).
        unsafe { *(*self.0.as_ptr()).front.0.get() = info };
    }

    /// Takes the block out of thread fronts' reach (record_stream, under
    /// the lock, by a holder of the block's DataPtr).
    #[inline]
    pub(super) fn clear_front(self) {
        // SAFETY: as in set_front: the deleter has not run (the caller
        // holds the DataPtr) and runs after this.
        unsafe { (*(*self.0.as_ptr()).front.0.get()).nbytes = 0 };
    }

    /// The request the block was filed for (0: not for a thread front).
    #[inline(always)]
    pub(super) fn front_nbytes(self) -> usize {
        // SAFETY: as in `front`.
        unsafe { (*(*self.0.as_ptr()).front.0.get()).nbytes }
    }

    /// The block's key as filed at its handing out (by its deleter).
    #[inline(always)]
    pub(super) fn front(self) -> FrontInfo {
        // SAFETY: the record is alive; the writes happened before this
        // read and none runs concurrently (see FrontKey).
        unsafe { *(*self.0.as_ptr()).front.0.get() }
    }

    /// The record's mutable state.
    ///
    /// # Safety
    /// The caller holds the lock of the allocator the record belongs to,
    /// and no other reference to this record's state is alive while the
    /// result is used.
    #[inline]
    pub(super) unsafe fn state<'a>(self) -> &'a mut BlockState {
        // SAFETY: the record is alive (type invariant); exclusivity is the
        // caller's promise.
        unsafe { &mut *(*self.0.as_ptr()).state.get() }
    }
}

/// The spare block records and the chunks they live in. Owned by the
/// allocator state, so `&mut Records` means the lock is held.
pub(super) struct Records {
    chunks: Vec<*mut [Block]>,
    spare: Option<BlockId>,
    shared: *const Shared,
}

impl Records {
    pub(super) fn new() -> Records {
        Records {
            chunks: Vec::new(),
            spare: None,
            shared: std::ptr::null(),
        }
    }

    /// Records the address of the Shared the records belong to, before
    /// any is made.
    pub(super) fn set_shared(&mut self, shared: *const Shared) {
        debug_assert!(self.chunks.is_empty());
        self.shared = shared;
    }

    /// A spare record. Its fields hold stale values (except `segment`,
    /// always None on spare records): the caller sets them.
    #[inline]
    pub(super) fn take(&mut self) -> BlockId {
        let id = match self.spare {
            Some(id) => id,
            None => {
                self.grow();
                self.spare.expect("grow made spare records")
            }
        };
        // SAFETY: a spare record is referenced by nobody else; `&mut self`
        // means the lock is held.
        self.spare = unsafe { id.state() }.link_next;
        id
    }

    /// Puts a record no block uses any more back on the spare list.
    #[inline]
    pub(super) fn give_back(&mut self, b: BlockId) {
        // SAFETY: the caller no longer uses the record; the lock is held.
        let s = unsafe { b.state() };
        debug_assert!(s.segment.is_none());
        s.link_next = self.spare;
        self.spare = Some(b);
    }

    /// Every record made so far (spare ones included), for walks that
    /// look at all of them (memory snapshots).
    pub(super) fn all(&self) -> Vec<BlockId> {
        let mut ids = Vec::with_capacity(self.chunks.len() * RECORDS_PER_CHUNK);
        for &chunk in &self.chunks {
            for i in 0..RECORDS_PER_CHUNK {
                // SAFETY: i is in bounds of a live chunk (freed only when
                // the records drop).
                let rec = unsafe { (chunk as *mut Block).add(i) };
                // SAFETY: rec points into a live allocation, so not NULL.
                ids.push(BlockId(unsafe { NonNull::new_unchecked(rec) }));
            }
        }
        ids
    }

    fn grow(&mut self) {
        let chunk: Box<[Block]> = (0..RECORDS_PER_CHUNK)
            .map(|_| Block {
                shared: self.shared,
                front: FrontKey(UnsafeCell::new(FrontInfo {
                    nbytes: 0,
                    addr: 0,
                    size: 0,
                    stream: 0,
                    pool_device: Device::CPU,
                    data_device: Device::CPU,
                })),
                state: UnsafeCell::new(BlockState::vacant()),
            })
            .collect();
        // A raw pointer from the start, so moving the Vec of chunks never
        // invalidates the record addresses handed out.
        let chunk = Box::into_raw(chunk);
        self.chunks.push(chunk);
        for i in 0..RECORDS_PER_CHUNK {
            // SAFETY: i is in bounds of the chunk just made.
            let rec = unsafe { (chunk as *mut Block).add(i) };
            // SAFETY: rec points into a live allocation, so not NULL.
            let id = BlockId(unsafe { NonNull::new_unchecked(rec) });
            // SAFETY: the record is new: no other reference to it exists.
            unsafe { &mut *(*rec).state.get() }.link_next = self.spare;
            self.spare = Some(id);
        }
    }
}

impl Drop for Records {
    fn drop(&mut self) {
        for &chunk in &self.chunks {
            // SAFETY: made by Box::into_raw in grow, freed once here; no
            // record is referenced any more (the state is being destroyed).
            drop(unsafe { Box::from_raw(chunk) });
        }
    }
}

/// A freed block waiting for events on the other streams that used it
/// (streams.rs).
pub(super) struct Pending {
    pub(super) block: BlockId,
    pub(super) device: Device,
    pub(super) events: Vec<usize>,
}
