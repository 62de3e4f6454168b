//! The allocation and free paths of the caching layer: the front-cache
//! hit and the full path (best fit, or a new segment from the inner
//! allocator with the out-of-memory release and retry); the frees are in
//! free.rs, the deleter every handed-out block carries in thread_front.rs.

use super::block::BlockId;
use super::lock::SpinGuard;
use super::pool::State;
use super::sizes::{segment_size, PoolKind};
use super::thread_front::caching_free;
use super::{lock, thread_front, CachingAllocator};
use crate::allocator::{oom, reporter, AllocatorImpl, OomReport};
use crate::data_ptr::{same_deleter, DataPtr};
use crate::device::Device;
use crate::error::{Error, Result};
use std::ffi::c_void;

impl CachingAllocator {
    /// Allocates for `owner`; a failure for want of memory tells the
    /// out-of-memory observers as `report` says (only the slow path
    /// fails).
    /// Inlined into both callers: out of line, its call added a frame
    /// (13 instructions) to every hit.
    #[inline(always)]
    pub(super) fn allocate_for(
        &self,
        owner: &AllocatorImpl,
        nbytes: usize,
        device: Device,
        report: OomReport,
    ) -> Result<DataPtr> {
        match self.front_hit(owner, nbytes, device) {
            Some(p) => Ok(p),
            None => self
                .allocate_slow(owner, nbytes, device)
                .inspect_err(|e| oom::notify_if(report, e, owner, nbytes, device)),
        }
    }

    /// The allocation fast path: a request served from the front cache of
    /// a device that already has pools, in one short critical section.
    /// None (having changed nothing) for anything else, which
    /// [`CachingAllocator::allocate_slow`] then handles in full (a miss
    /// pays one extra lock round trip; a poisoned lock is reported there).
    #[inline(always)]
    fn front_hit(&self, owner: &AllocatorImpl, nbytes: usize, device: Device) -> Option<DataPtr> {
        if nbytes == 0 {
            return None;
        }
        let device = if device.is_cpu() {
            Device::CPU
        } else {
            self.pool_device(device).ok()?
        };
        let stream = self.shared().current_stream(device);
        // The calling thread's own front first: no lock.
        if let Some(p) = thread_front::take(self.shared.as_ptr(), nbytes, device, stream) {
            return Some(p);
        }
        let size = self.shared().round(nbytes)?;
        let mut st = self.lock_draining().ok()?;
        let slot = st.existing_slot(device, stream)?;
        let block = st.front_take(slot, size)?;
        let (data, data_device) = st.hand_out_parked(block, nbytes);
        Some(finish_allocation(
            st,
            owner,
            block,
            data,
            data_device,
            nbytes,
        ))
    }

    /// Takes the lock for an allocation, with the calling thread's front
    /// given back to the pools first, in the same critical section (see
    /// thread_front.rs). With a reporter or history active, the front's
    /// frees must be reported outside the lock: the front is flushed
    /// before locking.
    #[inline(always)]
    fn lock_draining(&self) -> Result<SpinGuard<'_, State>> {
        let shared = self.shared();
        if !thread_front::holds(self.shared.as_ptr()) {
            return shared.lock.lock();
        }
        self.lock_draining_cold()
    }

    #[cold]
    #[inline(never)]
    fn lock_draining_cold(&self) -> Result<SpinGuard<'_, State>> {
        let shared = self.shared();
        if reporter::is_active() {
            thread_front::flush_own(self.shared.as_ptr());
            return shared.lock.lock();
        }
        let mut st = shared.lock.lock()?;
        if let Some(d) = thread_front::drain(self.shared.as_ptr()) {
            st.apply_drained(d);
        }
        Ok(st)
    }

    /// Every allocation the fast path does not serve.
    #[inline(never)]
    fn allocate_slow(
        &self,
        owner: &AllocatorImpl,
        nbytes: usize,
        device: Device,
    ) -> Result<DataPtr> {
        if nbytes == 0 {
            return Ok(DataPtr::empty(device));
        }
        let Some(size) = self.shared().round(nbytes) else {
            owner.stats().record_failure();
            crate::bail!(
                OutOfMemory,
                "caching allocator '{}': can't allocate {nbytes} bytes: more than the largest \
                 allocation",
                owner.name()
            );
        };
        let device = self
            .pool_device(device)
            .inspect_err(|_| owner.stats().record_failure())?;
        let kind = PoolKind::for_size(size);
        let shared = self.shared();
        let stream = shared.current_stream(device);
        let mut st = self.lock_draining()?;
        if !st.pending.is_empty() {
            if let Some(ops) = shared.streams {
                st.process_events(ops);
            }
        }
        let slot = st.device_slot(device, stream);
        let (block, data, data_device) = match st.front_take(slot, size) {
            Some(b) => {
                let (data, data_device) = st.hand_out_parked(b, nbytes);
                (b, data, data_device)
            }
            None => {
                // Best fit sees the pools as if nothing had been parked,
                // and the statistics are exact before anything is added
                // to them (see `Tally::block_parked`): every device's
                // front cache is flushed.
                st.flush_front(None);
                let (st2, block, hit) = match st.take_free(slot, kind, size) {
                    Some(b) => (st, b, true),
                    None => self.miss(owner, st, nbytes, device, slot, kind, size)?,
                };
                st = st2;
                let (data, data_device) = st.hand_out(block, size, nbytes, hit);
                (block, data, data_device)
            }
        };
        Ok(finish_allocation(
            st,
            owner,
            block,
            data,
            data_device,
            nbytes,
        ))
    }

    /// A request no free block fits (`st` locked, front caches flushed):
    /// garbage collection first when it is on, then a new segment, or
    /// more pages of an expandable segment. Returns the lock again with
    /// a free block of at least `size` bytes taken out of the pools, and
    /// whether it was a cache hit.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn miss<'a>(
        &'a self,
        owner: &AllocatorImpl,
        mut st: SpinGuard<'a, State>,
        nbytes: usize,
        device: Device,
        slot: usize,
        kind: PoolKind,
        size: usize,
    ) -> Result<(SpinGuard<'a, State>, BlockId, bool)> {
        let shared = self.shared();
        let dev = st.dev(slot);
        if st.gc_on() {
            let collected = st.collect_garbage(dev);
            if !collected.is_empty() {
                drop(st);
                drop(collected);
                st = shared.lock.lock()?;
                st.flush_front(None);
                if let Some(b) = st.take_free(slot, kind, size) {
                    return Ok((st, b, true));
                }
            }
        }
        if let Some(vm) = shared.policy.expandable {
            let first = match st.expand(vm, slot, kind, size) {
                Ok(b) => return Ok((st, b, false)),
                Err(e) => e,
            };
            drop(st);
            let (st, _) =
                self.retry_after(owner, first, nbytes, device, kind, "an expandable segment")?;
            return self.expand_again(owner, st, vm, nbytes, device, slot, kind, size);
        }
        let oversize = st.is_oversize(kind, size);
        drop(st);
        let (mem, seg) = self.new_segment(owner, nbytes, size, device, dev, kind, oversize)?;
        let mut st = shared.lock.lock()?;
        st.reserving[dev] -= seg as u64;
        // Other threads may have parked blocks meanwhile.
        st.flush_front(None);
        let b = st.add_segment(slot, kind, oversize, mem, seg);
        Ok((st, b, false))
    }

    /// The expandable path's retry, after the device's unused memory went
    /// back: a free block now, or more pages; else the out-of-memory
    /// error.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn expand_again<'a>(
        &'a self,
        owner: &AllocatorImpl,
        mut st: SpinGuard<'a, State>,
        vm: &dyn crate::allocator::VirtualMemory,
        nbytes: usize,
        device: Device,
        slot: usize,
        kind: PoolKind,
        size: usize,
    ) -> Result<(SpinGuard<'a, State>, BlockId, bool)> {
        st.flush_front(None);
        if let Some(b) = st.take_free(slot, kind, size) {
            return Ok((st, b, true));
        }
        match st.expand(vm, slot, kind, size) {
            Ok(b) => Ok((st, b, false)),
            Err(second) => {
                let dev = st.dev(slot);
                st.stats.on(dev, |t| t.out_of_memory(kind));
                let state = st.describe();
                drop(st);
                owner.stats().record_failure();
                crate::bail!(
                    OutOfMemory,
                    "caching allocator '{}' is out of memory: tried to allocate {nbytes} bytes \
                     (pages of an expandable segment of the {} pool) on {device}; returned the \
                     unused memory and retried, which failed: {}; now {state}",
                    owner.name(),
                    pool_name(kind),
                    second.message()
                )
            }
        }
    }

    /// After a first failure to get memory: passes anything but a
    /// shortage on, else waits for the blocks other streams hold, returns
    /// the device's unused segments and pages, and locks again for the
    /// retry; also returns how many segments and page ranges went back.
    #[cold]
    fn retry_after(
        &self,
        owner: &AllocatorImpl,
        first: Error,
        nbytes: usize,
        device: Device,
        kind: PoolKind,
        what: &str,
    ) -> Result<(SpinGuard<'_, State>, usize)> {
        let shared = self.shared();
        if first.kind() != crate::error::ErrorKind::OutOfMemory {
            // Not a shortage: passed on with its message first (it says
            // what is wrong, e.g. "CUDA driver not available: ..."), and
            // where it happened after it.
            owner.stats().record_failure();
            return Err(Error::new(
                first.kind(),
                format!(
                    "{} (caching allocator '{}' was allocating {what} of the {} pool for {nbytes} \
                     bytes on {device})",
                    first.message(),
                    owner.name(),
                    pool_name(kind)
                ),
            ));
        }
        shared.settle_pending()?;
        let released = {
            let mut st = shared.lock.lock()?;
            let slot = st.device_slot(device, 0);
            let dev = st.dev(slot);
            st.stats.on(dev, |t| t.retried(kind));
            st.take_unused_segments(Some(device))
        };
        let count = released.count();
        drop(released);
        Ok((shared.lock.lock()?, count))
    }

    /// Obtains a segment for a request from the inner allocator, outside
    /// the lock; on running out of memory (or reaching the device's
    /// limit), returns the device's unused segments and retries once.
    /// Returns the memory and its size; its bytes stay counted in
    /// `State::reserving` of device number `dev` until the caller adds
    /// the segment.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn new_segment(
        &self,
        owner: &AllocatorImpl,
        nbytes: usize,
        size: usize,
        device: Device,
        dev: usize,
        kind: PoolKind,
        oversize: bool,
    ) -> Result<(DataPtr, usize)> {
        let shared = self.shared();
        let Some(seg) = segment_size(kind, size, oversize) else {
            owner.stats().record_failure();
            crate::bail!(
                OutOfMemory,
                "caching allocator '{}': can't allocate {nbytes} bytes: its segment size \
                 overflows",
                owner.name()
            );
        };
        let first = match self.try_segment(seg, device, dev) {
            Ok(mem) => return Ok((mem, seg)),
            Err(e) => e,
        };
        let what = format!("a {seg}-byte segment");
        let (st, released_count) = self.retry_after(owner, first, nbytes, device, kind, &what)?;
        drop(st);
        match self.try_segment(seg, device, dev) {
            Ok(mem) => Ok((mem, seg)),
            Err(second) => {
                let state = {
                    let mut st = shared.lock.lock()?;
                    st.stats.on(dev, |t| t.out_of_memory(kind));
                    st.describe()
                };
                owner.stats().record_failure();
                crate::bail!(
                    OutOfMemory,
                    "caching allocator '{}' is out of memory: tried to allocate {nbytes} bytes \
                     (a {seg}-byte segment of the {} pool) on {device}; returned \
                     {released_count} unused segments to '{}' and retried, which failed: {}; \
                     now {state}",
                    owner.name(),
                    pool_name(kind),
                    shared.inner.name(),
                    second.message()
                )
            }
        }
    }

    /// One segment from the inner allocator, if the device's limit allows
    /// it: its bytes are counted in `State::reserving` while it is
    /// obtained (and, on success, until the caller adds it).
    fn try_segment(&self, seg: usize, device: Device, dev: usize) -> Result<DataPtr> {
        let shared = self.shared();
        {
            let mut st = shared.lock.lock()?;
            if let Some(limit) = st.limits[dev] {
                let reserved = st.reserved_on(dev);
                crate::ensure!(
                    reserved + seg as u64 <= limit,
                    OutOfMemory,
                    "a {seg}-byte segment would pass the limit of {limit} bytes on {device} \
                     ({reserved} reserved)"
                );
            }
            st.reserving[dev] += seg as u64;
        }
        let r = shared.inner.allocate_for(seg, device, OomReport::Quiet);
        if r.is_err() {
            shared.lock.lock()?.reserving[dev] -= seg as u64;
        }
        r
    }
}

/// A pool's name, for messages.
fn pool_name(kind: PoolKind) -> &'static str {
    match kind {
        PoolKind::Small => "small",
        PoolKind::Large => "large",
    }
}

/// The end of every allocation, with `block` handed out under `st`:
/// records it in the owner's statistics and the reported total, unlocks,
/// reports it, and wraps it in a DataPtr whose deleter gives it back.
#[inline(always)]
fn finish_allocation(
    mut st: lock::SpinGuard<'_, State>,
    owner: &AllocatorImpl,
    block: BlockId,
    data: *mut c_void,
    data_device: Device,
    nbytes: usize,
) -> DataPtr {
    owner.stats().record_alloc_serialized(nbytes);
    st.allocated += nbytes as u64;
    let total = st.allocated;
    drop(st);
    reporter::report(owner.stats().tag(), data, nbytes as i64, total, data_device);
    // SAFETY: caching_free takes the block back exactly once, from any
    // thread; the block's memory stays valid until then.
    unsafe { DataPtr::from_raw_parts(data, block.as_ctx(), Some(caching_free), data_device) }
}

/// Records that `stream` uses the memory of `ptr` (c10's recordStream):
/// if it is a block of a caching allocator with streams, its reuse after
/// the free waits for the work queued on `stream` by then. Returns false
/// (doing nothing) for memory of any other allocator, as c10 does.
pub(crate) fn record_stream(ptr: &DataPtr, stream: usize) -> Result<bool> {
    if ptr.is_null() || !same_deleter(ptr.deleter(), Some(caching_free)) {
        return Ok(false);
    }
    // SAFETY: a DataPtr with this deleter has a handed-out block record as
    // its context, alive while the DataPtr is (it is borrowed here).
    let block = unsafe { BlockId::from_ctx(ptr.context()) };
    // SAFETY: the state lives while a block is out (see the module docs
    // of caching).
    let shared = unsafe { &*block.shared() };
    if shared.streams.is_none() {
        return Ok(false);
    }
    shared.lock.lock()?.add_stream_use(block, stream);
    Ok(true)
}
