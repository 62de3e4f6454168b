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
mod expandable;
#[cfg(test)]
mod expandable_tests;
mod front_cache;
#[cfg(test)]
mod front_cache_tests;
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
pub use stats::{CachingStats, PoolStats, Stat};

use self::config::Policy;
use self::lock::SpinLock;
use self::pool::State;
use super::{history, Allocator, AllocatorImpl, Description, OomReport, OwnStats, RawAllocator};
use crate::data_ptr::DataPtr;
use crate::device::Device;
use crate::error::Result;
use crate::fork::{self, Held, Step};
use crate::refcount::Ref;
use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};

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
    fn add_round_trips(&self, p: thread_front::Pending) {
        if let Ok(mut st) = self.lock.lock() {
            st.apply_drained(thread_front::Drained {
                blocks: [None; thread_front::ENTRIES],
                pending: p,
            });
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

/// Every live shared state (addresses), so the atfork handlers can hold
/// every pool lock across a fork.
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<usize>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The list's guard, held from the atfork `prepare` handler to `parent`
/// or `child` (the pool locks are held without guards).
static HELD: Held<MutexGuard<'static, Vec<usize>>> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(crate::fork::order::CACHING, fork_prepare, fork_release);

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

/// A block of a segment, for memory snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentBlock {
    /// Address.
    pub addr: usize,
    /// Size (rounded).
    pub size: usize,
    /// Handed out (else cached free).
    pub allocated: bool,
    /// What the caller asked for, while allocated.
    pub requested: Option<usize>,
}

/// A segment of a caching allocator, for memory snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentView {
    /// Address of its first block.
    pub addr: usize,
    /// Total size.
    pub size: usize,
    /// "small", "large" or "oversize".
    pub pool: &'static str,
    /// Where the memory is.
    pub device: Device,
    /// The stream its blocks serve (0: the default stream, or an
    /// allocator without streams).
    pub stream: usize,
    /// A run of mapped pages of an expandable segment (each such run is
    /// shown as a segment of its own, as in c10's snapshots).
    pub expandable: bool,
    /// Its blocks in address order.
    pub blocks: Vec<SegmentBlock>,
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

    /// Applies what a thread front gave back (under the lock): each block
    /// freed as `free_quiet` frees it (the owner's statistics, the locked
    /// front cache or the pool), and the round trips counted.
    fn apply_drained(&mut self, d: thread_front::Drained) {
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
                t.round_trips(sizes::PoolKind::Small, p.trips, p.bytes, p.requested)
            });
            if !self.owner.is_null() {
                // SAFETY: non-NULL under the lock means the owner is alive.
                unsafe { &*self.owner }
                    .stats()
                    .record_round_trips_serialized(p.trips);
            }
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

    /// The calling thread's front flushed, if it holds blocks of this
    /// allocator (statistics read, cache emptied, allocator dropped).
    fn flush_own_front(&self) {
        thread_front::flush_own(self.shared.as_ptr());
    }

    /// The statistics now, all devices summed.
    pub fn stats(&self) -> Result<CachingStats> {
        self.flush_own_front();
        Ok(self.shared().lock.lock()?.stats_now())
    }

    /// The statistics of one device now (c10's memory_stats(device); all
    /// zero for a device this allocator never served). Index -1 is
    /// resolved as allocations resolve it.
    pub fn device_stats(&self, device: Device) -> Result<CachingStats> {
        self.flush_own_front();
        let device = self.pool_device(device)?;
        Ok(self.shared().lock.lock()?.device_stats_now(device))
    }

    /// The devices this allocator has served, in order of first use.
    pub fn devices(&self) -> Result<Vec<Device>> {
        Ok(self.shared().lock.lock()?.stats.devices())
    }

    /// Zeroes every cumulative amount (each statistic's `allocated` and
    /// `freed`) and every count (allocations, frees, hits, segment
    /// allocations and frees, retries, out-of-memory failures), on every
    /// device (c10's reset_accumulated_memory_stats).
    pub fn reset_accumulated(&self) -> Result<()> {
        self.flush_own_front();
        let mut st = self.shared().lock.lock()?;
        st.flush_front(None);
        st.stats.reset_accumulated();
        Ok(())
    }

    /// Limits the bytes `device` may reserve to `fraction` of its memory
    /// (c10's set_per_process_memory_fraction; a byte limit of the options
    /// still applies if lower). 0 removes the fraction. Memory already
    /// reserved stays; later requests that would pass the limit first
    /// return the device's unused segments, then fail.
    pub fn set_memory_fraction(&self, device: Device, fraction: f64) -> Result<()> {
        crate::ensure!(
            (0.0..=1.0).contains(&fraction),
            InvalidArgument,
            "fraction {fraction} is invalid: expected a fraction of the device's memory in [0, 1]"
        );
        let policy = &self.shared().policy;
        crate::ensure!(
            fraction == 0.0 || policy.memory_info.is_some(),
            Unsupported,
            "allocator '{}' cannot tell its device's total memory, so a memory fraction \
             cannot apply; use a memory limit in bytes (TsrCachingOptions.memory_limit)",
            self.inner().name()
        );
        let device = self.pool_device(device)?;
        let limit = policy.limit_for(device, fraction);
        crate::ensure!(
            fraction == 0.0 || limit.is_some(),
            Device,
            "the total memory of {device} could not be read, so a fraction of it cannot apply"
        );
        let mut st = self.shared().lock.lock()?;
        let slot = st.device_slot(device, 0);
        let dev = st.dev(slot);
        st.limits[dev] = limit;
        Ok(())
    }

    /// The limit on the bytes `device` may reserve, if any.
    pub fn memory_limit(&self, device: Device) -> Result<Option<u64>> {
        let device = self.pool_device(device)?;
        let mut st = self.shared().lock.lock()?;
        let slot = st.device_slot(device, 0);
        let dev = st.dev(slot);
        Ok(st.limits[dev])
    }

    /// Sets every peak, those of [`CachingAllocator::stats`] and the
    /// owner's `peak_bytes`, to its current value.
    pub fn reset_peak(&self) -> Result<()> {
        self.flush_own_front();
        let mut st = self.shared().lock.lock()?;
        st.flush_front(None);
        st.stats.reset_peak();
        if !st.owner.is_null() {
            // SAFETY: non-NULL under the lock means the owner is alive (see
            // State::record_free).
            unsafe { &*st.owner }.stats().reset_peak();
        }
        Ok(())
    }

    /// Returns every fully free segment to the inner allocator (after
    /// waiting for the blocks freed while other streams used them).
    pub fn empty_cache(&self) -> Result<()> {
        self.flush_own_front();
        self.shared().settle_pending()?;
        let unused = self.shared().lock.lock()?.take_unused_segments(None);
        // Freed here, outside the lock.
        drop(unused);
        Ok(())
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
