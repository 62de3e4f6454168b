//! The pools of a caching allocator: segments obtained from the inner
//! allocator, cut into blocks.
//!
//! Every segment is a chain of blocks in address order (`prev` / `next`);
//! a block is either handed out (`allocated`) or free, and two free blocks
//! are never neighbours (freeing merges them). Free blocks sit in a
//! per-device, per-pool structure that finds the best fit, the smallest
//! free block at least as large as the request:
//! - small pool (requests up to 1 MiB, 2 MiB segments): one list per size
//!   class (sizes are multiples of 512, so 4096 classes up to 2 MiB) and a
//!   two-level bitmap of the non-empty classes, so lookup, insertion and
//!   removal are O(1) with a few bit operations; within a class the most
//!   recently freed block is taken first (its memory is the most likely to
//!   be in cache). This is the allocation fast path.
//! - large pool: an ordered map keyed by (size, address), so the best fit
//!   is the first entry at or after (request, 0) and ties go to the lowest
//!   address; blocks of oversize segments live in a second map of their
//!   own so ordinary requests never walk over them.
//!
//! Blocks of expandable segments (caching/expandable.rs) are filed the
//! same way; their unmapped parts are blocks too, free but `mapped` false,
//! kept out of these structures and never merged with mapped ones.
//!
//! The block records themselves are in block.rs, the small pool's
//! size-class lists in small_bins.rs, the return of unused segments in
//! release.rs, the views of the pools (segment lists, statistics, the test
//! audit) in views.rs. Everything here runs under the allocator's lock
//! (the `&mut State` receiver is the proof).

use super::block::{BlockId, BlockState, FrontInfo, Pending, Records};
use super::config::Policy;
use super::sizes::{PoolKind, LARGE_SPLIT_REMAINDER, MIN_BLOCK};
use super::stats::Tallies;
use super::Shared;
use crate::allocator::AllocatorImpl;
use crate::data_ptr::DataPtr;
use crate::device::Device;
use std::collections::BTreeMap;

mod expandable;
pub(super) mod front_cache;
mod release;
pub(super) mod small_bins;
mod views;

use expandable::Expandable;
use front_cache::Front;
pub(super) use release::Unused;
use small_bins::SmallBins;
use std::ffi::c_void;

/// What a new block record holds (State::new_block): where its memory is,
/// its neighbours and its pool.
pub(super) struct NewBlock {
    pub(super) addr: usize,
    pub(super) size: usize,
    pub(super) prev: Option<BlockId>,
    pub(super) next: Option<BlockId>,
    pub(super) device: Device,
    pub(super) slot: usize,
    pub(super) kind: PoolKind,
    pub(super) oversize: bool,
    /// Memory mapped at its addresses (false: an unmapped part of an
    /// expandable segment).
    pub(super) mapped: bool,
    pub(super) expandable: Option<u32>,
}
#[cfg(test)]
pub(super) use views::Audit;
pub use views::{SegmentBlock, SegmentView};

/// Free large-pool blocks keyed by (size, address).
type FreeMap = BTreeMap<(usize, usize), BlockId>;

/// The free blocks of one device's large pool.
#[derive(Default)]
struct LargeFree {
    normal: FreeMap,
    oversize: FreeMap,
}

/// The pools of one device and stream (the stream is 0 for allocators
/// without streams): a block only ever serves requests made on the stream
/// its segment was allocated for.
pub(super) struct DevicePools {
    pub(super) device: Device,
    stream: usize,
    /// The number of the device's statistics and limit (`State::stats`,
    /// `State::limits`).
    pub(super) dev: usize,
    small: SmallBins,
    large: LargeFree,
    /// Recently freed small blocks kept whole (front_cache.rs).
    pub(super) front: Front,
    /// Free-block lookups so far per pool kind (counted while garbage
    /// collection is on: a free block's age is its pool's lookups since
    /// it was freed, c10's gc_count).
    pub(super) lookups: [u64; 2],
    /// The expandable segments of each pool kind (indices into
    /// `State::expandable`).
    pub(super) expandable: [Vec<u32>; 2],
}

/// Everything behind the caching allocator's lock.
pub(super) struct State {
    pub(super) devices: Vec<DevicePools>,
    records: Records,
    pub(super) stats: Tallies,
    /// Bytes handed out as the owner's statistics count them (requested
    /// sizes); the running total given to the memory reporter.
    pub(super) allocated: u64,
    /// The allocator object whose statistics frees are recorded in; NULL
    /// once it is being destroyed.
    pub(super) owner: *const AllocatorImpl,
    /// The owner is gone: the last free destroys the state.
    pub(super) orphaned: bool,
    /// The owner's identity in memory history (kept after the owner is
    /// gone, for the frees of the blocks still out).
    pub(super) tag: Option<&'static crate::allocator::history::Tag>,
    /// The settings (config.rs).
    pub(super) policy: Policy,
    /// Each device's limit on reserved bytes (by device number), if any.
    pub(super) limits: Vec<Option<u64>>,
    /// Each device's bytes being obtained from the inner allocator now,
    /// outside the lock (by device number): counted against its limit.
    pub(super) reserving: Vec<u64>,
    /// The expandable segments (None: released; its index is reused).
    pub(super) expandable: Vec<Option<Expandable>>,
    /// Thread fronts bound to this allocator (thread_front.rs): the state
    /// outlives them.
    pub(super) fronts: u32,
    /// Freed blocks waiting for the work of other streams (streams.rs).
    pub(super) pending: Vec<Pending>,
}

// SAFETY: the raw pointers are owned by the state (records, blocks) or are
// set-once back pointers (owner), and the state is only reached under the
// allocator's lock, which makes access exclusive whatever the thread.
unsafe impl Send for State {}

impl State {
    pub(super) fn new(policy: Policy) -> State {
        State {
            devices: Vec::new(),
            records: Records::new(),
            stats: Tallies::default(),
            allocated: 0,
            owner: std::ptr::null(),
            orphaned: false,
            tag: None,
            policy,
            limits: Vec::new(),
            reserving: Vec::new(),
            expandable: Vec::new(),
            fronts: 0,
            pending: Vec::new(),
        }
    }

    /// Records the address of the Shared this state lives in (before any
    /// block record is made).
    pub(super) fn set_shared(&mut self, shared: *const Shared) {
        self.records.set_shared(shared);
    }

    /// The state of a block record.
    #[inline]
    pub(super) fn bs(&mut self, b: BlockId) -> &mut BlockState {
        // SAFETY: b refers to a record of this state (the only ids a State
        // method receives are its own records, or come from its own
        // DataPtrs); `&mut self` means the lock is held; the result borrows
        // self mutably, so no second reference to any record's state can
        // coexist.
        unsafe { b.state() }
    }

    /// A free block record from the spare list holding `b`: no request,
    /// not allocated, no segment (new_segment gives its first block one).
    #[inline(always)]
    fn new_block(&mut self, b: NewBlock) -> BlockId {
        let id = self.records.take();
        let s = self.bs(id);
        s.addr = b.addr;
        s.size = b.size;
        s.requested = 0;
        s.prev = b.prev;
        s.next = b.next;
        s.device = b.device;
        // Always None on a spare record already.
        debug_assert!(s.segment.is_none());
        s.slot = b.slot;
        s.kind = b.kind;
        s.oversize = b.oversize;
        s.allocated = false;
        s.mapped = b.mapped;
        s.expandable = b.expandable;
        id
    }

    #[inline]
    pub(super) fn recycle(&mut self, b: BlockId) {
        self.records.give_back(b);
    }

    /// The statistics number of the device whose pools are at `slot`.
    #[inline(always)]
    pub(super) fn dev(&self, slot: usize) -> usize {
        self.devices[slot].dev
    }

    /// The index of the pools of `device` and `stream`, made on first use.
    #[inline]
    pub(super) fn device_slot(&mut self, device: Device, stream: usize) -> usize {
        match self.existing_slot(device, stream) {
            Some(i) => i,
            None => self.add_device(device, stream),
        }
    }

    /// The index of the pools of `device` and `stream` if they have any yet.
    #[inline]
    pub(super) fn existing_slot(&self, device: Device, stream: usize) -> Option<usize> {
        if self
            .devices
            .first()
            .is_some_and(|d| d.device == device && d.stream == stream)
        {
            return Some(0);
        }
        self.devices
            .iter()
            .position(|d| d.device == device && d.stream == stream)
    }

    /// The stream of the pools at `slot`.
    #[inline]
    pub(super) fn slot_stream(&self, slot: usize) -> usize {
        self.devices[slot].stream
    }

    #[cold]
    fn add_device(&mut self, device: Device, stream: usize) -> usize {
        let dev = self.stats.device_number(device);
        if dev == self.limits.len() {
            let limit = self.policy.limit_for(device, self.policy.memory_fraction);
            self.limits.push(limit);
            self.reserving.push(0);
        }
        self.devices.push(DevicePools {
            device,
            stream,
            dev,
            small: SmallBins::new(),
            large: LargeFree::default(),
            front: Front::new(),
            lookups: [0; 2],
            expandable: [Vec::new(), Vec::new()],
        });
        self.devices.len() - 1
    }

    /// Whether a rounded request of the large pool is oversize.
    #[inline]
    pub(super) fn is_oversize(&self, kind: PoolKind, size: usize) -> bool {
        kind == PoolKind::Large && size >= self.policy.oversize_from
    }

    /// Whether garbage collection is on (a threshold, and a limit to take
    /// it of: c10 collects only with a memory fraction set).
    #[inline]
    pub(super) fn gc_on(&self) -> bool {
        self.policy.gc_threshold > 0.0
    }

    /// Files a free block in its pool's free structure.
    #[inline(always)]
    pub(super) fn insert_free(&mut self, b: BlockId) {
        let gc_base = self.gc_base_now(b);
        let s = self.bs(b);
        debug_assert!(!s.allocated && s.mapped);
        s.gc_base = gc_base;
        let (kind, size, slot, whole) = (s.kind, s.size, s.slot, s.is_whole());
        match kind {
            PoolKind::Small => {
                let class = SmallBins::class(size);
                let head = self.devices[slot].small.heads[class];
                let s = self.bs(b);
                s.link_prev = None;
                s.link_next = head;
                match head {
                    Some(h) => {
                        self.bs(h).link_prev = Some(b);
                        self.devices[slot].small.heads[class] = Some(b);
                    }
                    None => self.devices[slot].small.fill(class, b),
                }
            }
            PoolKind::Large => self.large_insert(b),
        }
        if !whole {
            let dev = self.dev(slot);
            self.stats.on(dev, |t| t.split_free_added(kind, size));
        }
    }

    /// The lookup count of the pools of `b`'s slot (0 while garbage
    /// collection is off).
    #[inline(always)]
    fn gc_base_now(&mut self, b: BlockId) -> u64 {
        if self.gc_on() {
            let s = self.bs(b);
            let (slot, kind) = (s.slot, s.kind);
            self.devices[slot].lookups[kind as usize]
        } else {
            0
        }
    }

    /// Takes a free block out of its pool's free structure.
    #[inline(always)]
    pub(super) fn remove_free(&mut self, b: BlockId) {
        let s = self.bs(b);
        let (kind, size, slot, whole) = (s.kind, s.size, s.slot, s.is_whole());
        let (link_prev, link_next) = (s.link_prev, s.link_next);
        match kind {
            PoolKind::Small => {
                match (link_prev, link_next) {
                    (Some(p), _) => self.bs(p).link_next = link_next,
                    (None, Some(_)) => {
                        self.devices[slot].small.heads[SmallBins::class(size)] = link_next
                    }
                    (None, None) => self.devices[slot].small.clear(SmallBins::class(size)),
                }
                if let Some(n) = link_next {
                    self.bs(n).link_prev = link_prev;
                }
            }
            PoolKind::Large => self.large_remove(b),
        }
        if !whole {
            let dev = self.dev(slot);
            self.stats.on(dev, |t| t.split_free_removed(kind, size));
        }
    }

    /// The map of the large pool a block belongs in.
    fn large_map(&mut self, b: BlockId) -> (&mut FreeMap, (usize, usize)) {
        let s = self.bs(b);
        let (slot, key, oversize) = (s.slot, (s.size, s.addr), s.oversize);
        let large = &mut self.devices[slot].large;
        let map = if oversize {
            &mut large.oversize
        } else {
            &mut large.normal
        };
        (map, key)
    }

    #[inline(never)]
    fn large_insert(&mut self, b: BlockId) {
        let (map, key) = self.large_map(b);
        map.insert(key, b);
    }

    #[inline(never)]
    fn large_remove(&mut self, b: BlockId) {
        let (map, key) = self.large_map(b);
        let removed = map.remove(&key);
        debug_assert_eq!(removed, Some(b));
    }

    /// Takes the best-fitting free block for a rounded request out of the
    /// free structures, or None (a cache miss).
    #[inline]
    pub(super) fn take_free(
        &mut self,
        slot: usize,
        kind: PoolKind,
        size: usize,
    ) -> Option<BlockId> {
        if self.gc_on() {
            self.devices[slot].lookups[kind as usize] += 1;
        }
        let block = match kind {
            PoolKind::Small => {
                let small = &self.devices[slot].small;
                let class = small.first_at_least(SmallBins::class(size))?;
                small.heads[class]?
            }
            PoolKind::Large if self.is_oversize(kind, size) => {
                let map = &self.devices[slot].large.oversize;
                let (&(bsize, _), &b) = map.range((size, 0)..).next()?;
                if bsize - size >= self.policy.max_non_split_rounding {
                    return None;
                }
                b
            }
            PoolKind::Large => {
                let map = &self.devices[slot].large.normal;
                *map.range((size, 0)..).next()?.1
            }
        };
        self.remove_free(block);
        Some(block)
    }

    /// Adds a segment from the inner allocator; returns its one block,
    /// free but not in the free structures (about to be handed out).
    pub(super) fn add_segment(
        &mut self,
        slot: usize,
        kind: PoolKind,
        oversize: bool,
        mem: DataPtr,
        size: usize,
    ) -> BlockId {
        let dev = self.dev(slot);
        self.stats
            .on(dev, |t| t.segment_added(kind, size, oversize));
        let id = self.new_block(NewBlock {
            addr: mem.get() as usize,
            size,
            prev: None,
            next: None,
            device: mem.device(),
            slot,
            kind,
            oversize,
            mapped: true,
            expandable: None,
        });
        self.bs(id).segment = Some(mem);
        id
    }

    /// Hands out free block `b` (taken out of the free structures) for a
    /// rounded request of `size` bytes, splitting off the rest when the
    /// pool's rule allows. Returns the data address and device.
    #[inline]
    pub(super) fn hand_out(
        &mut self,
        b: BlockId,
        size: usize,
        requested: usize,
        hit: bool,
    ) -> (*mut c_void, Device) {
        let s = self.bs(b);
        debug_assert!(!s.allocated && s.size >= size);
        let remainder = s.size - size;
        // c10's should_split: blocks of expandable segments split as small
        // ones do.
        let split = match s.kind {
            PoolKind::Large if s.expandable.is_none() => {
                !s.oversize && remainder > LARGE_SPLIT_REMAINDER
            }
            _ => remainder >= MIN_BLOCK,
        };
        if split {
            s.size = size;
            let (addr, next, device, slot, kind, expandable) = (
                s.addr + size,
                s.next,
                s.device,
                s.slot,
                s.kind,
                s.expandable,
            );
            let r = self.new_block(NewBlock {
                addr,
                size: remainder,
                prev: Some(b),
                next,
                device,
                slot,
                kind,
                oversize: false,
                mapped: true,
                expandable,
            });
            if let Some(n) = next {
                self.bs(n).prev = Some(r);
            }
            self.bs(b).next = Some(r);
            self.insert_free(r);
        }
        let s = self.bs(b);
        s.allocated = true;
        s.requested = requested;
        let (kind, bsize, addr, device, slot, oversize) =
            (s.kind, s.size, s.addr, s.device, s.slot, s.oversize);
        self.file_front(b, kind, requested, slot, device, addr, bsize);
        let dev = self.dev(slot);
        self.stats.on(dev, |t| {
            t.block_allocated(kind, bsize, requested, hit, oversize)
        });
        (addr as *mut c_void, device)
    }

    /// Files a block being handed out for thread fronts: small-pool blocks
    /// only (a thread front holds at most a few, so they stay small).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn file_front(
        &self,
        b: BlockId,
        kind: PoolKind,
        requested: usize,
        slot: usize,
        device: Device,
        addr: usize,
        size: usize,
    ) {
        let pools = &self.devices[slot];
        b.set_front(FrontInfo {
            nbytes: if kind == PoolKind::Small {
                requested
            } else {
                0
            },
            addr,
            size,
            stream: pools.stream,
            pool_device: pools.device,
            data_device: device,
        });
    }

    /// The data address, requested size and device of a handed-out block.
    #[inline]
    pub(super) fn info(&mut self, b: BlockId) -> (*mut c_void, usize, Device) {
        let s = self.bs(b);
        debug_assert!(s.allocated);
        (s.addr as *mut c_void, s.requested, s.device)
    }

    /// Takes back a handed-out block: merges it with free neighbours and
    /// files the result as free.
    #[inline(always)]
    pub(super) fn release(&mut self, b: BlockId) {
        let s = self.bs(b);
        debug_assert!(s.allocated);
        let (kind, size, requested, slot, oversize) =
            (s.kind, s.size, s.requested, s.slot, s.oversize);
        s.requested = 0;
        let dev = self.dev(slot);
        self.stats
            .on(dev, |t| t.block_freed(kind, size, requested, oversize));
        self.merge_and_file(b);
    }

    /// Whether `b` is a free block with memory mapped (one a freed
    /// neighbour merges with).
    #[inline(always)]
    fn is_free_mapped(&mut self, b: BlockId) -> bool {
        let s = self.bs(b);
        !s.allocated && s.mapped
    }

    /// Marks a block free (its statistics already counted), merges it
    /// with free neighbours and files the result.
    #[inline(always)]
    pub(super) fn merge_and_file(&mut self, b: BlockId) {
        self.bs(b).allocated = false;
        let mut block = b;
        if let Some(p) = self.bs(block).prev {
            if self.is_free_mapped(p) {
                self.remove_free(p);
                let s = self.bs(block);
                let (size, next) = (s.size, s.next);
                let ps = self.bs(p);
                ps.size += size;
                ps.next = next;
                if let Some(n) = next {
                    self.bs(n).prev = Some(p);
                }
                self.recycle(block);
                block = p;
            }
        }
        if let Some(n) = self.bs(block).next {
            if self.is_free_mapped(n) {
                self.remove_free(n);
                let ns = self.bs(n);
                let (size, next) = (ns.size, ns.next);
                let s = self.bs(block);
                s.size += size;
                s.next = next;
                if let Some(nn) = next {
                    self.bs(nn).prev = Some(block);
                }
                self.recycle(n);
            }
        }
        self.insert_free(block);
    }
}
