//! A caching layer over any allocator (the built-in CPU one, a C plugin,
//! the CUDA device allocator), designed after c10's CUDA caching allocator.
//!
//! Requests are rounded up to 512 bytes. Those up to 1 MiB are carved from
//! 2 MiB segments (the small pool); larger ones from 20 MiB segments when
//! below 10 MiB, else from a segment of their own size rounded up to 2 MiB
//! (the large pool). A free block is split when the rest is worth keeping
//! (small pool: at least 512 bytes; large pool: more than 1 MiB) and freed
//! blocks merge with free neighbours at once. With `max_split_size` set,
//! large requests of that size or more are "oversize": they get a segment
//! of their own that is never split and is handed out whole, and reuse a
//! cached oversize block only if it is less than max_non_split_rounding
//! (20 MiB) larger. c10's other settings (roundup_power2_divisions,
//! garbage_collection_threshold, a memory limit or fraction per device)
//! are resolved in config.rs; with expandable segments (expandable.rs)
//! each device, stream and pool grows one segment by mapping pages
//! instead. Segments
//! go back to the inner allocator only through `empty_cache`, or when the
//! inner allocator runs out of memory: then every unused segment of the
//! device is returned and the allocation retried once before it fails.
//!
//! The pools are per device (a CUDA allocator serves several) and per
//! stream, for inner allocators with streams (streams.rs); the layout is
//! in pool/, the allocation and free paths in alloc_free.rs, the block
//! records in block.rs, the statistics in stats.rs,
//! the lock in lock.rs.
//!
//! # Locking
//! One lock guards the whole allocator: pools, statistics, and the owner's
//! counters. Critical sections are a few dozen instructions because the
//! inner allocator is never called under the lock (a miss unlocks,
//! allocates a segment, and locks again to file it); holding one lock is
//! what makes every statistic exact, peaks included, and lets the owner's
//! `Stats` be updated with plain stores (see `Stats::record_alloc_serialized`).
//! The bench measures the contention of two threads on it.
//!
//! # Front cache
//! A freed block is first parked whole in the front cache of its device
//! and stream (front_cache.rs: up to 8 MiB of small blocks, 4 large ones),
//! and a later request of exactly its rounded size takes
//! it back without best fit, split or merge, and with the statistics of
//! the round trip reduced to a few counters (`Tally::block_parked`): a
//! parked block's free is applied to the current values only when it is
//! flushed, which happens before any statistic is read and before any
//! allocation that is not such a hit. It is under the same lock
//! as the pools, not per thread: a lock-free per-thread cache would have
//! to keep the peaks (active bytes, requested bytes, the owner's peak)
//! exact while other threads allocate, which needs each thread's pending
//! frees to be visible to the thread that may set a new peak, i.e. a
//! store-load fence on every front-cache operation; that fence costs what
//! the uncontended lock costs (one locked instruction), and `empty_cache`,
//! the statistics and the allocator's destruction would have to reach
//! every thread's cache as well.
//!
//! # Lifetime
//! The context of a handed-out DataPtr is its block record, whose first
//! field points at the allocator's shared state; the deleter needs nothing
//! else. Rather than each block holding a reference to the owning
//! allocator (an atomic increment and decrement per allocation, on a cache
//! line every thread shares), the shared state lives in its own heap block
//! that counts the blocks handed out (exactly, under the lock) and outlives
//! the owner while any is out: when the owner is dropped with blocks still
//! out, its backend marks the state orphaned and stops recording into the
//! owner's statistics, and the last free destroys the state, returning the
//! segments and releasing the inner allocator. Without blocks out, the
//! owner's drop destroys it at once.

mod alloc_free;
mod block;
mod config;
mod control;
#[cfg(test)]
mod expandable_tests;
mod free;
#[cfg(test)]
mod front_cache_tests;
mod live;
mod lock;
mod pool;
#[cfg(test)]
mod settings_tests;
mod sizes;
mod stats;
mod streams;
#[cfg(test)]
mod streams_tests;
#[cfg(test)]
mod tests;
mod thread_front;
#[cfg(test)]
mod thread_front_tests;

pub use super::roundup::RoundupDivisions;
pub use super::StreamOps;
pub(crate) use alloc_free::record_stream;
pub(crate) use live::all_segments;
pub use pool::{SegmentBlock, SegmentView};
pub use stats::{CachingStats, PoolStats, Stat};

use self::config::Policy;
use self::live::{live, FORK_STEP};
use self::lock::SpinLock;
use self::pool::State;
use super::{history, Allocator, AllocatorImpl, Description, OomReport, OwnStats, RawAllocator};
use crate::data_ptr::DataPtr;
use crate::device::Device;
use crate::error::Result;
use crate::fork;
use crate::refcount::Ref;
use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;

/// Options of a caching allocator. Zero (or None, or false) is "the
/// default": TESSERA_ALLOC_CONF's value for the keys it has, else c10's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CachingOptions {
    /// Large requests of this many bytes or more (after rounding) are
    /// oversize: never split, handed out whole. 0: no limit. Otherwise it
    /// must be more than 1 MiB (the small pool is not affected).
    pub max_split_size: usize,
    /// The allocator's name; None: "caching(<inner name>)".
    pub name: Option<String>,
    /// The device `Allocator::allocate` uses; None: the inner allocator's.
    pub default_device: Option<Device>,
    /// c10's expandable_segments: one segment per device, stream and pool
    /// that grows by mapping pages (the inner allocator must offer
    /// `DeviceHooks::virtual_memory`).
    pub expandable_segments: bool,
    /// c10's roundup_power2_divisions (None: TESSERA_ALLOC_CONF's, else
    /// rounding to 512 bytes).
    pub roundup_power2_divisions: Option<RoundupDivisions>,
    /// c10's garbage_collection_threshold: a fraction in (0, 1) of a
    /// device's limit past which cached whole segments not used recently
    /// are freed (only with a limit; 0: off).
    pub garbage_collection_threshold: f64,
    /// c10's max_non_split_rounding_mb, in bytes: an oversize request
    /// takes a cached oversize block less than this much larger than
    /// itself (0: 20 MiB; else more than 20 MiB).
    pub max_non_split_rounding: usize,
    /// Bytes each device may reserve (0: no byte limit).
    pub memory_limit: u64,
    /// c10's per_process_memory_fraction: the fraction of each device's
    /// memory (as the inner allocator reports it) it may reserve, in
    /// (0, 1] (0: none).
    pub memory_fraction: f64,
}

/// Resolves a device index of -1 ("current") to the real device, for
/// inner allocators that have such a notion (CUDA).
pub(crate) type DeviceResolver = fn(Device) -> Result<Device>;

/// The state shared by the backend and every block handed out. Aligned
/// to, and sized in, whole cache lines, so that no other heap object
/// shares a line with the lock or the counters every allocation writes.
#[repr(align(64))]
pub(crate) struct Shared {
    /// Declared first so it drops first: freeing the segments needs the
    /// inner allocator.
    lock: SpinLock<State>,
    inner: Allocator,
    resolve: Option<DeviceResolver>,
    /// The inner allocator's streams, if it has any (streams.rs).
    streams: Option<&'static dyn StreamOps>,
    /// The settings (also in the state, which reads them under the lock).
    policy: Policy,
}

impl Shared {
    /// A request rounded as the settings say (c10's round_size), or None
    /// when that passes the largest allocation.
    #[inline(always)]
    fn round(&self, nbytes: usize) -> Option<usize> {
        match &self.policy.roundup {
            None => sizes::round_size(nbytes),
            Some(d) => d.round(nbytes),
        }
    }

    /// Frees the shared state: returns every segment to the inner allocator
    /// and releases it.
    ///
    /// # Safety
    /// `shared` must come from `build`, no block may be out and no thread
    /// may use it any more (the owner is gone, and this is the last user).
    unsafe fn destroy(shared: *const Shared) {
        // Out of the list first (the atfork handlers lock every state in
        // it), and with the list's lock released before the state goes:
        // dropping it frees segments through the inner allocator.
        {
            let mut live = live();
            if let Some(i) = live.iter().position(|&p| p == shared as usize) {
                live.swap_remove(i);
            }
        }
        // SAFETY: made by Box::into_raw in build; the caller guarantees
        // this is the last use.
        drop(unsafe { Box::from_raw(shared as *mut Shared) });
    }
}

/// The caching backend. Reach it from an [`Allocator`] with [`of`].
pub struct CachingAllocator {
    shared: NonNull<Shared>,
}

// SAFETY: the shared state is only touched under its lock (or read-only
// fields set before it was shared), so the backend may be used and dropped
// from any thread.
unsafe impl Send for CachingAllocator {}
// SAFETY: every &self method reaches the mutable state only through
// `shared.lock` (SpinLock<State>, Sync because State: Send), and otherwise
// reads fields fixed in build before the state was shared (`inner`, an
// Allocator, `resolve`, a fn pointer, `policy`: plain values, fn pointers
// and a `&'static dyn VirtualMemory`, which is Sync), all Sync.
unsafe impl Sync for CachingAllocator {}

/// Wraps `inner` in a caching layer; the result is an ordinary allocator
/// (with the usual statistics too) whose backend [`of`] returns.
pub fn new(inner: Allocator, options: CachingOptions) -> Result<Allocator> {
    // Over the CUDA device allocator, index -1 ("current") must be
    // resolved before a pool is picked: the backend says how.
    let hooks = inner.backend().device_hooks();
    let policy = config::resolve(&options, &hooks, inner.name())?;
    build(inner, options, policy, hooks.resolve_current, hooks.streams)
}

fn build(
    inner: Allocator,
    options: CachingOptions,
    policy: Policy,
    resolve: Option<DeviceResolver>,
    streams: Option<&'static dyn StreamOps>,
) -> Result<Allocator> {
    let name = options
        .name
        .unwrap_or_else(|| format!("caching({})", inner.name()));
    let default_device = options.default_device.unwrap_or(inner.default_device());
    fork::ensure_handlers(&FORK_STEP);
    let shared = Box::into_raw(Box::new(Shared {
        lock: SpinLock::new(State::new(policy)),
        inner,
        resolve,
        streams,
        policy,
    }));
    // SAFETY: just made and not shared yet, so this access is exclusive.
    unsafe { (*shared).lock.get_mut().set_shared(shared) };
    live().push(shared as usize);
    let backend = CachingAllocator {
        // SAFETY: Box::into_raw never returns NULL.
        shared: unsafe { NonNull::new_unchecked(shared) },
    };
    let alloc = Allocator::new_own_stats(name, default_device, Box::new(backend));
    let owner: *const AllocatorImpl = &*alloc.0;
    let mut st = of(&alloc)
        .expect("just made a caching allocator")
        .shared()
        .lock
        .lock()?;
    st.owner = owner;
    st.tag = alloc.0.stats().tag();
    drop(st);
    Ok(alloc)
}

/// The caching backend of `a`, or None if `a` is not a caching allocator.
pub fn of(a: &Allocator) -> Option<&CachingAllocator> {
    a.backend().as_any().downcast_ref::<CachingAllocator>()
}

impl State {
    /// Records a free in the owner's statistics (while it lives) and in
    /// the reported total.
    #[inline]
    fn record_free(&mut self, nbytes: usize) {
        self.allocated -= nbytes as u64;
        if !self.owner.is_null() {
            // SAFETY: the owner pointer is cleared, under this lock, before
            // the owner's memory can go away (CachingAllocator::drop runs
            // inside the owner's destruction), and we hold the lock.
            unsafe { &*self.owner }
                .stats()
                .record_free_serialized(nbytes);
        }
    }

    /// Whether the last block of an orphaned state just came back.
    #[inline]
    fn should_destroy(&self) -> bool {
        self.orphaned && self.stats.all().active_blocks() == 0 && self.fronts == 0
    }
}

impl CachingAllocator {
    fn shared(&self) -> &Shared {
        // SAFETY: the state outlives the backend (it is destroyed by the
        // backend's Drop or after it).
        unsafe { self.shared.as_ref() }
    }

    /// The allocator this layer caches for.
    pub fn inner(&self) -> &Allocator {
        &self.shared().inner
    }

    /// The oversize threshold (0: none).
    pub fn max_split_size(&self) -> usize {
        self.shared().policy.max_split_size
    }

    /// Whether segments are expandable.
    pub fn expandable_segments(&self) -> bool {
        self.shared().policy.expandable.is_some()
    }

    /// Checks the pools' invariants against the statistics (tests).
    #[cfg(test)]
    fn audit(&self) -> pool::Audit {
        self.flush_own_front();
        let mut st = self.shared().lock.lock().unwrap();
        st.flush_front(None);
        let audit = st.audit();
        let stats = st.stats.all().snapshot().all;
        assert_eq!(audit.split_blocks, stats.inactive_split_blocks.current);
        assert_eq!(audit.split_bytes, stats.inactive_split_bytes.current);
        assert_eq!(
            audit.free_bytes,
            stats.reserved_bytes.current - stats.active_bytes.current,
            "free + active == reserved"
        );
        audit
    }

    /// The device whose pools serve `device`.
    #[inline]
    fn pool_device(&self, device: Device) -> Result<Device> {
        if device.is_cpu() {
            return Ok(Device::CPU);
        }
        match self.shared().resolve {
            Some(resolve) if device.index < 0 => resolve(device),
            _ => Ok(device),
        }
    }
}

impl Drop for CachingAllocator {
    fn drop(&mut self) {
        // This thread's parked blocks go back first (other threads' fronts
        // keep the state alive until they are flushed).
        self.flush_own_front();
        // Blocks waiting for other streams must be back in the pools before
        // the state can be destroyed (no allocation will poll them now).
        let _ = self.shared().settle_pending();
        let destroy = match self.shared().lock.lock() {
            Ok(mut st) => {
                st.owner = std::ptr::null();
                st.orphaned = true;
                // From now on the last free destroys the state; it must
                // find no block parked.
                st.flush_front(None);
                st.should_destroy()
            }
            // Poisoned: leak the state rather than free memory that may
            // still be in use.
            Err(_) => false,
        };
        if destroy {
            // SAFETY: no block is out and the owner is being destroyed, so
            // nothing else can reach the state.
            unsafe { Shared::destroy(self.shared.as_ptr()) };
        }
    }
}

impl RawAllocator for CachingAllocator {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        let owner = self.shared().lock.lock()?.owner;
        // SAFETY: the backend is alive, so its owner (which owns it and
        // drops it last) is too; build sets the pointer before use.
        self.allocate_for(unsafe { &*owner }, nbytes, device, OomReport::Quiet)
    }

    unsafe fn copy_data(&self, dst: *mut c_void, src: *const c_void, nbytes: usize) -> Result<()> {
        // SAFETY: blocks are sub-ranges of the inner allocator's segments,
        // so the inner copy applies; its contract (valid, disjoint ranges)
        // is this method's, which the caller upholds.
        unsafe { self.shared().inner.copy_data(dst, src, nbytes) }
    }

    fn empty_cache(&self) -> Result<()> {
        CachingAllocator::empty_cache(self)
    }

    fn device_hooks(&self) -> super::DeviceHooks {
        // The device's memory, for out-of-memory observers and a caching
        // layer over this one.
        super::DeviceHooks {
            memory_info: self.shared().policy.memory_info,
            ..super::DeviceHooks::NONE
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn sync_stats(&self) {
        self.flush_own_front();
    }

    fn describe(&self) -> Description {
        Description {
            kind: super::AllocatorKind::Caching,
            inner_name: Some(self.shared().inner.name().to_string()),
        }
    }
}

impl OwnStats for CachingAllocator {
    fn allocate_tracked(
        &self,
        owner: &Ref<AllocatorImpl>,
        nbytes: usize,
        device: Device,
        report: OomReport,
    ) -> Result<DataPtr> {
        self.allocate_for(owner, nbytes, device, report)
    }
}
