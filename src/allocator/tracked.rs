//! The statistics wrapper around a backend's allocation: the DataPtr handed
//! out owns a small block holding the backend's own DataPtr, the size and a
//! reference to the allocator, so the free is counted and the allocator
//! (a C plugin, say) outlives its memory.

use super::{AllocatorImpl, OomReport, RawAllocator};
use crate::data_ptr::{same_deleter, DataPtr, DeleterFn};
use crate::device::Device;
use crate::error::Result;
use crate::refcount::Ref;
use std::ffi::c_void;

struct Tracked {
    inner: DataPtr,
    nbytes: usize,
    owner: Ref<AllocatorImpl>,
}

/// Allocates through the backend of `owner` and wraps the result; a
/// failure is counted and, as `report` says, told to the out-of-memory
/// observers. (The backend is looked up here: passed in, its two words
/// pushed this call's arguments onto the stack, which changed how the
/// inlined caller sets up every call, the caching allocator's included:
/// its hits cost 376 instructions against 373, callgrind.)
pub(super) fn allocate(
    owner: &Ref<AllocatorImpl>,
    nbytes: usize,
    device: Device,
    report: OomReport,
) -> Result<DataPtr> {
    let inner = allocate_uncounted(owner, owner.backend(), nbytes, device, report)?;
    let data = inner.get();
    let device = inner.device();
    owner.stats.record_alloc(data, nbytes, device);
    let block = Box::new(Tracked {
        inner,
        nbytes,
        owner: owner.clone(),
    });
    let ctx = Box::into_raw(block) as *mut c_void;
    // SAFETY: tracked_free takes back the Box made just above, once.
    Ok(unsafe { DataPtr::from_raw_parts(data, ctx, Some(tracked_free), device) })
}

/// The backend's own allocation, not yet counted (the caller records it:
/// [`allocate`] in its wrapper, `Allocator::raw_allocate` with the raw
/// size); a failure is counted and, as `report` says, told to the
/// out-of-memory observers.
#[inline(always)]
pub(super) fn allocate_uncounted(
    owner: &AllocatorImpl,
    backend: &dyn RawAllocator,
    nbytes: usize,
    device: Device,
    report: OomReport,
) -> Result<DataPtr> {
    match backend.allocate(nbytes, device) {
        Ok(dp) => Ok(dp),
        Err(e) => {
            owner.stats.record_failure();
            super::oom::notify_if(report, &e, owner, nbytes, device);
            Err(e)
        }
    }
}

unsafe extern "C" fn tracked_free(ctx: *mut c_void) {
    // SAFETY: ctx is the Box made in `allocate`; the DataPtr owning it runs
    // its deleter exactly once.
    let block = unsafe { Box::from_raw(ctx as *mut Tracked) };
    block
        .owner
        .stats
        .record_free(block.inner.get(), block.nbytes, block.inner.device());
    // Dropping the block frees the backend's memory, then releases the
    // allocator reference (which may drop the backend).
    drop(block);
}

/// The statistics block `dp` owns, if its deleter is `tracked_free`.
fn as_tracked(dp: &DataPtr) -> Option<&Tracked> {
    let ctx = dp.context();
    if ctx.is_null() || !same_deleter(dp.deleter(), Some(tracked_free)) {
        return None;
    }
    // SAFETY: a DataPtr whose deleter is tracked_free owns a Tracked block
    // made by `allocate` (tracked_free is private; from_raw_parts' contract
    // makes any other pairing the caller's unsound claim that
    // tracked_free(ctx) is sound). The block is freed only when `dp` drops
    // or hands its context away, neither of which can happen while `dp` is
    // borrowed for the returned lifetime.
    Some(unsafe { &*(ctx as *const Tracked) })
}

/// As [`as_tracked`], mutably: the exclusive borrow of `dp` makes the
/// borrow of the block it owns exclusive too.
fn as_tracked_mut(dp: &mut DataPtr) -> Option<&mut Tracked> {
    let ctx = dp.context();
    if ctx.is_null() || !same_deleter(dp.deleter(), Some(tracked_free)) {
        return None;
    }
    // SAFETY: as in as_tracked; `dp` is borrowed mutably for the returned
    // lifetime and is the block's only owner, so no other reference to the
    // block exists.
    Some(unsafe { &mut *(ctx as *mut Tracked) })
}

impl DataPtr {
    /// Replaces the deleter with `new` only if it is `expected`; returns
    /// whether it did. A deleter installed by an allocator's statistics
    /// wrapper is seen through: `expected` is compared with the deleter of
    /// the memory it wraps.
    ///
    /// (Defined here, beside the wrapper it sees through, so that
    /// data_ptr.rs stays a leaf.)
    pub fn compare_exchange_deleter(
        &mut self,
        expected: Option<DeleterFn>,
        new: Option<DeleterFn>,
    ) -> bool {
        if self.compare_exchange_own_deleter(expected, new) {
            return true;
        }
        match as_tracked_mut(self) {
            Some(t) => t.inner.compare_exchange_deleter(expected, new),
            None => false,
        }
    }

    /// The context if the deleter is `expected` (c10's cast_context), also
    /// through an allocator's statistics wrapper; None otherwise.
    pub fn cast_context(&self, expected: DeleterFn) -> Option<*mut c_void> {
        if same_deleter(self.deleter(), Some(expected)) {
            return Some(self.context());
        }
        as_tracked(self)?.inner.cast_context(expected)
    }
}
