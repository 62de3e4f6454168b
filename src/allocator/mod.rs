//! Allocators: the refcounted [`Allocator`] handle with statistics over
//! a backend ([`RawAllocator`], `backend.rs`), the per-device-type
//! registry, the built-in CPU allocator and the memory reporter.

mod active;
pub mod alloc_conf;
mod backend;
pub mod caching;
pub mod cpu;
mod cpu_thread_cache;
pub(crate) mod cpu_vmm;
#[cfg(feature = "cuda")]
pub mod cuda;
mod device_hooks;
pub mod history;
pub mod oom;
pub mod registry;
pub mod reporter;
pub mod roundup;
mod size_class;
pub mod snapshot;
pub mod stats;
pub(crate) mod thread_counts;
mod thread_slot;
pub(crate) mod tracked;

pub use backend::{AllocatorKind, Description, RawAllocator};
pub(crate) use backend::{Backend, OomReport, OwnStats};
pub use device_hooks::{DeviceHooks, MemoryInfo, Reservation, StreamOps, VirtualMemory};
pub use registry::{get_allocator, set_allocator};
pub use reporter::{set_memory_reporter, MemoryEvent, MemoryReporter};
pub use stats::{Stats, StatsSnapshot};

use crate::data_ptr::DataPtr;
use crate::device::Device;
use crate::error::Result;
use crate::fork::{self, Held, Step};
use crate::refcount::{RcTarget, Ref};
use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::{Mutex, MutexGuard};

/// The object behind an [`Allocator`] handle.
pub struct AllocatorImpl {
    /// NUL-terminated so the C API can hand it out.
    name: CString,
    /// The built-in CPU allocator takes a direct path (no dynamic dispatch).
    builtin_cpu: bool,
    default_device: Device,
    stats: Stats,
    /// Sizes of raw allocations (raw_allocate / raw_deallocate), which carry
    /// no size on free.
    raw_sizes: Mutex<HashMap<usize, usize>>,
    /// None once the last strong reference went (release_resources), so a
    /// plugin's `release` does not wait for weak references.
    backend: Option<Backend>,
}

type RawSizes = Mutex<HashMap<usize, usize>>;

/// Every live allocator (addresses of its `AllocatorImpl`, in creation
/// order), so the atfork handlers can hold their raw-size tables and
/// memory snapshots can list them.
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<usize>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for AllocatorImpl {
    fn drop(&mut self) {
        let me = self as *const AllocatorImpl as usize;
        let mut live = live();
        if let Some(i) = live.iter().position(|&p| p == me) {
            live.remove(i);
        }
    }
}

/// The guards the atfork handlers hold: the list, then every table.
type HeldTables = (
    MutexGuard<'static, Vec<usize>>,
    Vec<MutexGuard<'static, HashMap<usize, usize>>>,
);
static HELD: Held<HeldTables> = Held::new();

/// This module's step of the atfork handlers' lock order (`crate::fork::order`).
static FORK_STEP: Step = Step::new(crate::fork::order::ALLOCATORS, fork_prepare, fork_release);

/// Atfork `prepare`: holds the list of live allocators, then each one's
/// raw-size table (in list order).
///
/// # Safety
/// Only from the atfork handlers (crate::fork).
pub(crate) unsafe fn fork_prepare() {
    let list = live();
    let tables = list
        .iter()
        .map(|&p| {
            // SAFETY: an address in the list is a live allocator: it
            // leaves the list (AllocatorImpl::drop, under the list's
            // lock, which we hold until fork_release) before its memory
            // goes. 'static: the guard is dropped in fork_release, before
            // the list's lock is released.
            let table: &'static RawSizes = unsafe { &(*(p as *const AllocatorImpl)).raw_sizes };
            table.lock().unwrap_or_else(|e| e.into_inner())
        })
        .collect();
    // SAFETY: called from the prepare handler, as the contract asks.
    unsafe { HELD.put((list, tables)) };
}

/// Atfork `parent` or `child`: releases the tables, then the list.
///
/// # Safety
/// Only from the atfork handlers, after [`fork_prepare`].
pub(crate) unsafe fn fork_release(_in_child: bool) {
    // SAFETY: called from the parent or child handler, as the contract
    // asks.
    if let Some((list, tables)) = unsafe { HELD.take() } {
        drop(tables);
        drop(list);
    }
}

/// Calls `f` with every live allocator, in creation order, under the
/// list's lock (`f` must not create or drop an allocator).
pub(crate) fn for_each_live(mut f: impl FnMut(&AllocatorImpl)) {
    let list = live();
    for &p in list.iter() {
        // SAFETY: an address in the list is a live allocator (it leaves
        // the list under this lock before its memory goes); only fields
        // that never change after creation (name, device, statistics)
        // are read through it.
        f(unsafe { &*(p as *const AllocatorImpl) });
    }
}

impl RcTarget for AllocatorImpl {
    fn release_resources(&mut self) {
        // No strong reference and no allocation remain: drop the backend
        // now (a C plugin's release runs) instead of when the last weak
        // reference goes.
        self.backend = None;
    }
}

impl AllocatorImpl {
    /// The statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The statistics as the calling thread sees them now: what the
    /// backend holds back for the thread (a caching allocator's parked
    /// frees) given back first.
    pub fn stats_now(&self) -> StatsSnapshot {
        self.backend().sync_stats();
        self.stats.snapshot()
    }

    /// Sets the peak to the bytes allocated now (as [`Self::stats_now`]
    /// sees them).
    pub fn reset_peak(&self) {
        self.backend().sync_stats();
        self.stats.reset_peak()
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.name.to_str().unwrap_or("?")
    }

    /// The name as a C string.
    pub fn c_name(&self) -> &CStr {
        &self.name
    }

    /// The device `allocate` uses.
    pub fn default_device(&self) -> Device {
        self.default_device
    }

    /// The backend; only reachable through a strong reference, which keeps
    /// it alive.
    #[inline]
    pub(crate) fn backend(&self) -> &dyn RawAllocator {
        self.owned_backend().raw()
    }

    /// The backend as owned: wrapped by the statistics wrapper or keeping
    /// its own statistics.
    #[inline(always)]
    fn owned_backend(&self) -> &Backend {
        self.backend
            .as_ref()
            .expect("an allocator reached through a strong reference has its backend")
    }

    /// Whether the backend keeps its own statistics ([`OwnStats`]).
    fn keeps_own_stats(&self) -> bool {
        matches!(self.owned_backend(), Backend::Own(_))
    }
}

/// A refcounted allocator handle. Cloning shares the allocator; the backend
/// is dropped (a C plugin's `release` runs) when the last handle and the
/// last allocation made by it are gone.
#[derive(Clone)]
pub struct Allocator(pub(crate) Ref<AllocatorImpl>);

impl Allocator {
    /// Wraps a backend. `default_device` is what [`Allocator::allocate`]
    /// allocates on.
    pub fn new(
        name: impl Into<String>,
        default_device: Device,
        backend: Box<dyn RawAllocator>,
    ) -> Allocator {
        Allocator::over(name.into(), default_device, Backend::Wrapped(backend))
    }

    /// As [`Allocator::new`] over one of tessera's own backends that keep
    /// their own statistics (the CPU and caching allocators).
    pub(crate) fn new_own_stats(
        name: impl Into<String>,
        default_device: Device,
        backend: Box<dyn OwnStats>,
    ) -> Allocator {
        Allocator::over(name.into(), default_device, Backend::Own(backend))
    }

    fn over(name: String, default_device: Device, backend: Backend) -> Allocator {
        fork::ensure_handlers(&FORK_STEP);
        let name = CString::new(name.replace('\0', "")).unwrap_or_default();
        let Description { kind, inner_name } = backend.raw().describe();
        let tag = history::Tag::new(
            name.to_string_lossy().into_owned(),
            default_device,
            kind,
            inner_name,
        );
        let made = Ref::new(AllocatorImpl {
            name,
            builtin_cpu: false,
            default_device,
            stats: Stats::tagged(tag, false),
            raw_sizes: Mutex::new(HashMap::new()),
            backend: Some(backend),
        });
        // Its final address: the object does not move inside the Ref.
        live().push(&*made as *const AllocatorImpl as usize);
        Allocator(made)
    }

    /// The built-in CPU allocator (always the same object).
    pub fn cpu() -> Allocator {
        cpu::builtin()
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The device [`Allocator::allocate`] uses.
    pub fn default_device(&self) -> Device {
        self.0.default_device
    }

    /// The statistics.
    pub fn stats(&self) -> StatsSnapshot {
        self.0.stats_now()
    }

    /// Sets the peak to the current allocated bytes.
    pub fn reset_peak(&self) {
        self.0.reset_peak()
    }

    /// The backend, for backend-specific queries.
    pub fn backend(&self) -> &dyn RawAllocator {
        self.0.backend()
    }

    /// Marks the built-in CPU allocator (only cpu.rs creates it).
    pub(crate) fn mark_builtin_cpu(mut self) -> Allocator {
        let inner = Ref::get_mut(&mut self.0).expect("a new allocator is unique");
        inner.builtin_cpu = true;
        let tag = inner
            .stats
            .tag()
            .expect("Allocator::new tags its statistics");
        inner.stats = Stats::tagged(tag, true);
        self
    }

    /// Whether this is the built-in CPU allocator.
    #[inline]
    pub fn is_builtin_cpu(&self) -> bool {
        self.0.builtin_cpu
    }

    /// Allocates `nbytes` on the default device.
    #[inline]
    pub fn allocate(&self, nbytes: usize) -> Result<DataPtr> {
        self.allocate_on(nbytes, self.0.default_device)
    }

    /// Allocates `nbytes` on `device`, recording statistics; the returned
    /// pointer keeps this allocator alive until it is freed.
    #[inline]
    pub fn allocate_on(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        self.allocate_for(nbytes, device, OomReport::Notify)
    }

    /// Allocates, telling the out-of-memory observers of a failure as
    /// `report` says: the one out-of-line copy of
    /// [`Allocator::allocate_inline`] for the crate's callers (a caching
    /// allocator's segment requests are [`OomReport::Quiet`]: it recovers,
    /// and reports its own failure).
    #[inline(never)]
    pub(crate) fn allocate_for(
        &self,
        nbytes: usize,
        device: Device,
        report: OomReport,
    ) -> Result<DataPtr> {
        self.allocate_inline(nbytes, device, report)
    }

    /// The allocation paths, inlined into the caller: only
    /// [`Allocator::allocate_for`] and the C entry point that hands out
    /// bare allocations call it (there, the frame and result copy of an
    /// out-of-line call were a seventh of an allocate+free: 35 of 248
    /// instructions, callgrind, 64 B). The paths: the built-in CPU
    /// allocator's thread cache, then its block allocator; a backend that
    /// keeps its own statistics (the caching allocator); any other backend
    /// through the statistics wrapper. Each path tells the out-of-memory
    /// observers in its own failure branch, and the result is never looked
    /// at here: a check after the call made every C allocation 13
    /// instructions longer, and copying a backend's result out to look at
    /// it cost the caching allocator's hits 9 ns (stores that the
    /// following wider loads could not forward).
    #[inline(always)]
    pub(crate) fn allocate_inline(
        &self,
        nbytes: usize,
        device: Device,
        report: OomReport,
    ) -> Result<DataPtr> {
        if self.0.builtin_cpu {
            if let Some(dp) = cpu::allocate_cached(&self.0, nbytes, device) {
                return Ok(dp);
            }
            return cpu::allocate_cpu(&self.0, nbytes, device, report);
        }
        // One comparison for the caching allocator (the backend's presence
        // is checked on the wrapped path only): matching all three states
        // of the field first cost its hits 2 instructions (callgrind,
        // alloc_free_4KiB_cached).
        if let Some(Backend::Own(b)) = &self.0.backend {
            return b.allocate_tracked(&self.0, nbytes, device, report);
        }
        tracked::allocate(&self.0, nbytes, device, report)
    }

    /// Allocates and returns only the address (c10's raw_allocate); needs
    /// a backend with a raw deleter. Free with [`Allocator::raw_deallocate`].
    pub fn raw_allocate(&self, nbytes: usize) -> Result<*mut c_void> {
        if self.0.builtin_cpu {
            return cpu::raw_allocate(&self.0, nbytes);
        }
        let Some(raw_deleter) = self.0.backend().raw_deleter() else {
            crate::bail!(
                Unsupported,
                "allocator '{}' has no raw deleter: raw allocation needs one",
                self.name()
            );
        };
        let device = self.0.default_device;
        let (dp, own_stats) = match self.0.owned_backend() {
            Backend::Own(b) => (
                b.allocate_tracked(&self.0, nbytes, device, OomReport::Notify)?,
                true,
            ),
            Backend::Wrapped(b) => (
                tracked::allocate_uncounted(&self.0, &**b, nbytes, device, OomReport::Notify)?,
                false,
            ),
        };
        let (data, ctx, deleter, device) = dp.into_raw_parts();
        if ctx != data || !crate::data_ptr::same_deleter(deleter, Some(raw_deleter)) {
            // Give the memory back before failing.
            // SAFETY: the parts came from the backend's DataPtr just now.
            drop(unsafe { DataPtr::from_raw_parts(data, ctx, deleter, device) });
            crate::bail!(
                Internal,
                "allocator '{}' returned a pointer whose context is not its data: raw \
                 allocation needs context == data and the raw deleter",
                self.name()
            );
        }
        if !own_stats && !data.is_null() {
            self.raw_sizes().insert(data as usize, nbytes);
            self.0.stats.record_alloc(data, nbytes, device);
        }
        Ok(data)
    }

    fn raw_sizes(&self) -> std::sync::MutexGuard<'_, HashMap<usize, usize>> {
        self.0.raw_sizes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Frees an address from [`Allocator::raw_allocate`] with the raw
    /// deleter.
    ///
    /// # Safety
    /// `ptr` must come from `raw_allocate` of this allocator and not have
    /// been freed.
    pub unsafe fn raw_deallocate(&self, ptr: *mut c_void) -> Result<()> {
        if ptr.is_null() {
            return Ok(());
        }
        let Some(raw_deleter) = self.0.backend().raw_deleter() else {
            crate::bail!(
                Unsupported,
                "allocator '{}' has no raw deleter",
                self.name()
            );
        };
        if !self.0.keeps_own_stats() {
            let Some(size) = self.raw_sizes().remove(&(ptr as usize)) else {
                crate::bail!(
                    InvalidArgument,
                    "pointer {ptr:?} was not returned by raw_allocate of allocator '{}'",
                    self.name()
                );
            };
            self.0.stats.record_free(ptr, size, self.0.default_device);
        }
        // SAFETY: the caller guarantees ptr came from raw_allocate, whose
        // context equals the data address and whose deleter is raw_deleter.
        unsafe { raw_deleter(ptr) };
        Ok(())
    }

    /// Copies with the backend's copy function.
    ///
    /// # Safety
    /// As [`RawAllocator::copy_data`].
    pub unsafe fn copy_data(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        nbytes: usize,
    ) -> Result<()> {
        // SAFETY: this method's contract is the backend's copy_data
        // contract (valid, disjoint ranges), which the caller upholds.
        unsafe { self.0.backend().copy_data(dst, src, nbytes) }
    }

    /// Returns cached memory (caching allocators; a no-op otherwise).
    pub fn empty_cache(&self) -> Result<()> {
        self.0.backend().empty_cache()
    }

    /// Whether two handles are the same allocator.
    pub fn ptr_eq(a: &Allocator, b: &Allocator) -> bool {
        Ref::ptr_eq(&a.0, &b.0)
    }

    /// The refcounted object (for the C handle).
    pub fn as_rc(&self) -> &Ref<AllocatorImpl> {
        &self.0
    }

    /// Wraps a refcounted object.
    pub fn from_ref(r: Ref<AllocatorImpl>) -> Allocator {
        Allocator(r)
    }

    /// Unwraps into the refcounted object.
    pub fn into_ref(self) -> Ref<AllocatorImpl> {
        self.0
    }
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("name", &self.name())
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests;
