//! The statistics wrapper around a backend's allocation: the DataPtr handed
//! out owns a small block holding the backend's own DataPtr, the size and a
//! reference to the allocator, so the free is counted and the allocator
//! (a C plugin, say) outlives its memory.

use super::{Allocator, AllocatorImpl};
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

/// Allocates through the backend of `alloc` and wraps the result.
pub(super) fn allocate(alloc: &Allocator, nbytes: usize, device: Device) -> Result<DataPtr> {
    let owner = &alloc.0;
    let inner = match owner.backend().allocate(nbytes, device) {
        Ok(dp) => dp,
        Err(e) => {
            owner.stats.record_failure();
            return Err(e);
        }
    };
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

fn as_tracked<'a>(ctx: *mut c_void, deleter: Option<DeleterFn>) -> Option<&'a mut Tracked> {
    if ctx.is_null() || !same_deleter(deleter, Some(tracked_free)) {
        return None;
    }
    // SAFETY: a context whose deleter is tracked_free is always a live
    // Tracked block owned by the DataPtr the caller holds.
    Some(unsafe { &mut *(ctx as *mut Tracked) })
}

/// The wrapped memory's context if its deleter is `expected`.
///
/// # Safety
/// `ctx` and `deleter` must be those of a live DataPtr the caller holds.
pub(crate) unsafe fn inner_context(
    ctx: *mut c_void,
    deleter: Option<DeleterFn>,
    expected: DeleterFn,
) -> Option<*mut c_void> {
    let t = as_tracked(ctx, deleter)?;
    t.inner.cast_context(expected)
}

/// Swaps the wrapped memory's deleter if it is `expected`.
///
/// # Safety
/// `ctx` and `deleter` must be those of a live DataPtr the caller holds
/// mutably.
pub(crate) unsafe fn compare_exchange_inner_deleter(
    ctx: *mut c_void,
    deleter: Option<DeleterFn>,
    expected: Option<DeleterFn>,
    new: Option<DeleterFn>,
) -> bool {
    match as_tracked(ctx, deleter) {
        Some(t) => t.inner.compare_exchange_deleter(expected, new),
        None => false,
    }
}
