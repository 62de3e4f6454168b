//! What a memory backend implements: the [`RawAllocator`] trait (c10's
//! Allocator: allocate, a raw deleter, copy_data, and a few grouped
//! optional capabilities; their device hooks are in `device_hooks.rs`),
//! its snapshot [`Description`], and the crate-private [`OwnStats`] that
//! only tessera's own CPU and caching allocators implement, to keep their
//! fast paths, with the [`OomReport`] its allocations take.

use super::{AllocatorImpl, DeviceHooks};
use crate::data_ptr::{DataPtr, DeleterFn};
use crate::device::Device;
use crate::error::Result;
use crate::refcount::Ref;
use std::any::Any;
use std::ffi::c_void;

/// What kind of allocator a backend is, as memory snapshots name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocatorKind {
    /// The built-in CPU allocator.
    Cpu,
    /// A caching layer over another allocator.
    Caching,
    /// A C plugin (`TsrAllocatorVTable`).
    Plugin,
    /// Anything else (the CUDA allocators, Rust backends).
    Other,
}

impl AllocatorKind {
    /// The name snapshots write: "cpu", "caching", "plugin" or "other".
    pub fn as_str(self) -> &'static str {
        match self {
            AllocatorKind::Cpu => "cpu",
            AllocatorKind::Caching => "caching",
            AllocatorKind::Plugin => "plugin",
            AllocatorKind::Other => "other",
        }
    }
}

/// How a backend describes itself in memory snapshots
/// ([`RawAllocator::describe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// What kind of allocator it is.
    pub kind: AllocatorKind,
    /// The name of the allocator it takes its memory from (caching
    /// allocators).
    pub inner_name: Option<String>,
}

impl Description {
    /// [`AllocatorKind::Other`] with no inner allocator: the default.
    pub const OTHER: Description = Description::of(AllocatorKind::Other);

    /// A backend of `kind` with no inner allocator.
    pub const fn of(kind: AllocatorKind) -> Description {
        Description {
            kind,
            inner_name: None,
        }
    }
}

/// What a memory backend implements. tessera wraps it in an
/// [`Allocator`](super::Allocator), which adds statistics and reference
/// counting. Only [`RawAllocator::allocate`] and [`RawAllocator::as_any`]
/// are required.
pub trait RawAllocator: Send + Sync + 'static {
    /// Allocates `nbytes` on `device`. The result's deleter must free the
    /// memory from any thread. Statistics are kept by the wrapper.
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr>;

    /// A deleter that frees a pointer returned by [`RawAllocator::allocate`]
    /// when given its data address (the allocation's context equals its
    /// data). Enables raw allocate/deallocate.
    fn raw_deleter(&self) -> Option<DeleterFn> {
        None
    }

    /// Copies `nbytes` between two allocations of this allocator (or from
    /// / to host memory for device allocators). The default is memcpy.
    ///
    /// # Safety
    /// `dst` and `src` must be valid for `nbytes` bytes and not overlap.
    unsafe fn copy_data(&self, dst: *mut c_void, src: *const c_void, nbytes: usize) -> Result<()> {
        if nbytes > 0 {
            // SAFETY: the caller guarantees both ranges valid for nbytes
            // bytes and disjoint, which is copy_nonoverlapping's contract.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, nbytes) };
        }
        Ok(())
    }

    /// Returns cached memory to the system, for caching allocators.
    fn empty_cache(&self) -> Result<()> {
        Ok(())
    }

    /// Brings the statistics the calling thread reads up to date before
    /// a read (default: nothing to do; a caching allocator gives back
    /// the blocks its thread front parked, which count as allocated).
    fn sync_stats(&self) {}

    /// The device hooks a caching layer built over this backend uses
    /// (default: none).
    fn device_hooks(&self) -> DeviceHooks {
        DeviceHooks::NONE
    }

    /// How memory snapshots describe this backend (default:
    /// [`Description::OTHER`]).
    fn describe(&self) -> Description {
        Description::OTHER
    }

    /// The backend as `Any`, to reach backend-specific queries.
    fn as_any(&self) -> &dyn Any;
}

/// Whether a failed allocation tells the out-of-memory observers
/// (`oom.rs`) before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OomReport {
    /// Tell them of a failure for want of memory (every caller's request).
    Notify,
    /// Tell nobody: a caching allocator's segment requests, from which it
    /// recovers and whose final failure it reports itself.
    Quiet,
}

/// The view of any backend as a [`RawAllocator`] object ([`OwnStats`]
/// needs it: trait upcasting is newer than the crate's minimum Rust).
pub(crate) trait AsRaw {
    /// `self` as a [`RawAllocator`] object.
    fn as_raw(&self) -> &dyn RawAllocator;
}

impl<T: RawAllocator> AsRaw for T {
    fn as_raw(&self) -> &dyn RawAllocator {
        self
    }
}

/// Backends of tessera's own (the built-in CPU and caching allocators)
/// that keep the owning allocator's statistics themselves: their
/// allocations record into `owner.stats()` and the deleters they attach
/// record the frees, so the generic statistics wrapper (`tracked.rs`)
/// adds nothing and their hits stay on the fast path. Crate-private: a
/// backend outside tessera always gets the wrapper.
pub(crate) trait OwnStats: RawAllocator + AsRaw {
    /// Allocates for `owner`, recording into `owner.stats()`; with
    /// [`OomReport::Notify`] tells the out-of-memory observers of a failure
    /// for want of memory before returning it (in the backend's failure
    /// path, so that the caller's fast path never inspects the result).
    fn allocate_tracked(
        &self,
        owner: &Ref<AllocatorImpl>,
        nbytes: usize,
        device: Device,
        report: OomReport,
    ) -> Result<DataPtr>;
}

/// The backend an allocator owns: any [`RawAllocator`], whose
/// allocations the statistics wrapper counts, or one of tessera's own
/// that counts them itself.
pub(crate) enum Backend {
    /// Counted by the statistics wrapper (`tracked.rs`).
    Wrapped(Box<dyn RawAllocator>),
    /// Counts its own statistics.
    Own(Box<dyn OwnStats>),
}

impl Backend {
    /// The backend as a [`RawAllocator`].
    #[inline]
    pub(crate) fn raw(&self) -> &dyn RawAllocator {
        match self {
            Backend::Wrapped(b) => &**b,
            Backend::Own(b) => (**b).as_raw(),
        }
    }
}
