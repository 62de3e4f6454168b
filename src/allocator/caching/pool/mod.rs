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
//! The block records themselves are in block.rs, the small pool's
//! size-class lists in small_bins.rs, the views of the pools (segment
//! lists, statistics, the test audit) in views.rs. Everything here runs
//! under the allocator's lock (the `&mut State` receiver is the proof).

use super::block::{BlockId, BlockState, Pending, Records};
use super::front_cache::Front;
use super::sizes::{PoolKind, LARGE_SPLIT_REMAINDER, MIN_BLOCK, OVERSIZE_SLACK, SMALL_SEGMENT};
use super::stats::Tally;
use super::Shared;
use crate::allocator::AllocatorImpl;
use crate::data_ptr::DataPtr;
use crate::device::Device;
use std::collections::BTreeMap;

mod small_bins;
mod views;

use small_bins::SmallBins;
use std::ffi::c_void;
#[cfg(test)]
pub(super) use views::Audit;

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
struct DevicePools {
    device: Device,
    stream: usize,
    small: SmallBins,
    large: LargeFree,
    /// Recently freed small blocks kept whole (front_cache.rs).
    front: Front,
}

/// Everything behind the caching allocator's lock.
pub(super) struct State {
    devices: Vec<DevicePools>,
    records: Records,
    pub(super) stats: Tally,
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
    /// Requests of this size or more are oversize (usize::MAX: none).
    oversize_from: usize,
    /// Freed blocks waiting for the work of other streams (streams.rs).
    pub(super) pending: Vec<Pending>,
}

// SAFETY: the raw pointers are owned by the state (records, blocks) or are
// set-once back pointers (owner), and the state is only reached under the
// allocator's lock, which makes access exclusive whatever the thread.
unsafe impl Send for State {}

impl State {
    pub(super) fn new(oversize_from: usize) -> State {
        State {
            devices: Vec::new(),
            records: Records::new(),
            stats: Tally::default(),
            allocated: 0,
            owner: std::ptr::null(),
            orphaned: false,
            tag: None,
            oversize_from,
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

    /// A record from the spare list. Its fields hold stale values (except
    /// `segment`, always None on spare records): the caller sets them.
    #[inline]
    fn new_record(&mut self) -> BlockId {
        self.records.take()
    }

    #[inline]
    fn recycle(&mut self, b: BlockId) {
        self.records.give_back(b);
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
        self.devices.push(DevicePools {
            device,
            stream,
            small: SmallBins::new(),
            large: LargeFree::default(),
            front: Front::new(),
        });
        self.devices.len() - 1
    }

    /// Whether a rounded request of the large pool is oversize.
    #[inline]
    pub(super) fn is_oversize(&self, kind: PoolKind, size: usize) -> bool {
        kind == PoolKind::Large && size >= self.oversize_from
    }

    /// Files a free block in its pool's free structure.
    #[inline(always)]
    fn insert_free(&mut self, b: BlockId) {
        let s = self.bs(b);
        debug_assert!(!s.allocated);
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
            self.stats.split_free_added(kind, size);
        }
    }

    /// Takes a free block out of its pool's free structure.
    #[inline(always)]
    fn remove_free(&mut self, b: BlockId) {
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
            self.stats.split_free_removed(kind, size);
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
        let block = match kind {
            PoolKind::Small => {
                let small = &self.devices[slot].small;
                let class = small.first_at_least(SmallBins::class(size))?;
                small.heads[class]?
            }
            PoolKind::Large if self.is_oversize(kind, size) => {
                let map = &self.devices[slot].large.oversize;
                let (&(bsize, _), &b) = map.range((size, 0)..).next()?;
                if bsize - size >= OVERSIZE_SLACK {
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
        self.stats.segment_added(kind, size);
        let id = self.new_record();
        let s = self.bs(id);
        s.addr = mem.get() as usize;
        s.size = size;
        s.requested = 0;
        s.prev = None;
        s.next = None;
        s.device = mem.device();
        s.segment = Some(mem);
        s.slot = slot;
        s.kind = kind;
        s.oversize = oversize;
        s.allocated = false;
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
        let split = match s.kind {
            PoolKind::Small => remainder >= MIN_BLOCK,
            PoolKind::Large => !s.oversize && remainder > LARGE_SPLIT_REMAINDER,
        };
        if split {
            s.size = size;
            let (addr, next, device, slot, kind) =
                (s.addr + size, s.next, s.device, s.slot, s.kind);
            let r = self.new_record();
            let rs = self.bs(r);
            rs.addr = addr;
            rs.size = remainder;
            rs.requested = 0;
            rs.prev = Some(b);
            rs.next = next;
            rs.device = device;
            rs.slot = slot;
            rs.kind = kind;
            rs.oversize = false;
            rs.allocated = false;
            if let Some(n) = next {
                self.bs(n).prev = Some(r);
            }
            self.bs(b).next = Some(r);
            self.insert_free(r);
        }
        let s = self.bs(b);
        s.allocated = true;
        s.requested = requested;
        let (kind, bsize, addr, device) = (s.kind, s.size, s.addr, s.device);
        self.stats.block_allocated(kind, bsize, requested, hit);
        (addr as *mut c_void, device)
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
        let (kind, size, requested) = (s.kind, s.size, s.requested);
        s.requested = 0;
        self.stats.block_freed(kind, size, requested);
        self.merge_and_file(b);
    }

    /// Takes back a handed-out block into its device's front cache, kept
    /// whole with its free only partly counted (see `Tally::block_parked`);
    /// false when the front cache does not take it (the caller releases
    /// it). An orphaned state parks nothing: its last free must see every
    /// block back in the pools.
    #[inline]
    pub(super) fn park(&mut self, b: BlockId) -> bool {
        let s = self.bs(b);
        debug_assert!(s.allocated);
        let (kind, size, requested, slot) = (s.kind, s.size, s.requested, s.slot);
        if self.orphaned || !self.devices[slot].front.put(size, b) {
            return false;
        }
        // The record keeps `requested` (the request it was freed with)
        // until it is taken back or flushed.
        self.stats.block_parked(kind, requested);
        true
    }

    /// Takes a parked block of exactly `size` bytes from the front cache
    /// of `slot`.
    #[inline]
    pub(super) fn front_take(&mut self, slot: usize, size: usize) -> Option<BlockId> {
        self.devices[slot].front.take(size)
    }

    /// Hands out a block taken from the front cache for a request of
    /// `requested` bytes. Returns the data address and device.
    #[inline]
    pub(super) fn hand_out_parked(
        &mut self,
        b: BlockId,
        requested: usize,
    ) -> (*mut c_void, Device) {
        let s = self.bs(b);
        let old = std::mem::replace(&mut s.requested, requested);
        let (addr, device, kind) = (s.addr, s.device, s.kind);
        self.stats.parked_taken(kind, old, requested);
        (addr as *mut c_void, device)
    }

    /// Empties the front cache of one device (or of all) into the pools:
    /// each block is merged and filed as if freed now.
    pub(super) fn flush_front(&mut self, slot: Option<usize>) {
        let slots = match slot {
            Some(s) => s..s + 1,
            None => 0..self.devices.len(),
        };
        for slot in slots {
            if self.devices[slot].front.is_empty() {
                continue;
            }
            for b in self.devices[slot].front.drain() {
                let s = self.bs(b);
                let (kind, size, requested) = (s.kind, s.size, std::mem::take(&mut s.requested));
                self.stats.parked_flushed(kind, size, requested);
                self.merge_and_file(b);
            }
        }
    }

    /// Bytes parked in the front caches (tests).
    #[cfg(test)]
    pub(super) fn front_bytes(&self) -> usize {
        self.devices.iter().map(|d| d.front.bytes()).sum()
    }

    /// Marks a block free (its statistics already counted), merges it
    /// with free neighbours and files the result.
    #[inline(always)]
    fn merge_and_file(&mut self, b: BlockId) {
        self.bs(b).allocated = false;
        let mut block = b;
        if let Some(p) = self.bs(block).prev {
            if !self.bs(p).allocated {
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
            if !self.bs(n).allocated {
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

    /// Takes every fully free segment (of one device's pools, every
    /// stream's, or of all) out of the pools and returns the inner
    /// allocations, to be freed by the caller after unlocking.
    pub(super) fn take_unused_segments(&mut self, device: Option<Device>) -> Vec<DataPtr> {
        self.flush_front(None);
        let mut whole = Vec::new();
        for slot in 0..self.devices.len() {
            if device.is_some_and(|d| d != self.devices[slot].device) {
                continue;
            }
            // A free small-pool block of a whole segment's size is a whole
            // segment; large-pool ones are checked one by one.
            let top = SmallBins::class(SMALL_SEGMENT);
            let mut cur = self.devices[slot].small.heads[top];
            while let Some(b) = cur {
                cur = self.bs(b).link_next;
                whole.push(b);
            }
            let large = &self.devices[slot].large;
            whole.extend(
                large
                    .normal
                    .values()
                    .chain(large.oversize.values())
                    .copied()
                    .collect::<Vec<_>>()
                    .into_iter()
                    .filter(|&b| self.bs(b).is_whole()),
            );
        }
        let mut segments = Vec::with_capacity(whole.len());
        for b in whole {
            self.remove_free(b);
            let s = self.bs(b);
            debug_assert!(s.is_whole() && !s.allocated);
            let (kind, size) = (s.kind, s.size);
            let mem = s.segment.take().expect("a whole segment's block owns it");
            self.stats.segment_removed(kind, size);
            self.recycle(b);
            segments.push(mem);
        }
        segments
    }
}

impl Drop for State {
    fn drop(&mut self) {
        self.flush_front(None);
        debug_assert_eq!(self.stats.active_blocks(), 0);
        // Every block is free now, so the segments are whole; their inner
        // allocations are freed as the vector drops (the lock is gone with
        // the state, so this is outside it).
        drop(self.take_unused_segments(None));
    }
}
