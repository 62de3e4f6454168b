//! Allocators at the ABI: handles, the registry, allocation, the
//! built-in CPU allocator's options, statistics, the memory reporter and
//! the refcount exports (C plugins are in allocator_plugin.rs).

use super::call::{check_not_null, device_type_arg, guard, guard_value, produce, write_out};
use super::error::fail;
use super::handle;
use super::types::*;
pub use super::types::{TsrAllocator, TsrWeakAllocator};
use crate::allocator::{self, Allocator, AllocatorImpl, MemoryEvent};
use crate::error::Result;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

/// Statistics of an allocator (every allocator has them).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct TsrAllocatorStats {
    /// Bytes currently allocated (exact when no allocation is in flight).
    pub allocated_bytes: u64,
    /// Highest allocated_bytes since creation or the last reset_peak. The
    /// built-in CPU allocator's is exact while one thread allocates at a
    /// time; with several at once it may be off by up to 1 MiB per other
    /// thread (each thread adds its bytes to the shared total in steps of
    /// up to 1 MiB), and it is never below allocated_bytes.
    pub peak_bytes: u64,
    /// Successful allocations.
    pub num_allocs: u64,
    /// Frees.
    pub num_frees: u64,
    /// Failed allocation requests.
    pub num_failed: u64,
}

/// The memory reporter: called after every allocation (+bytes) and before
/// every free (-bytes) of every allocator, with the allocator's allocated
/// bytes after the change (for the built-in CPU allocator, as the calling
/// thread sees them: without the up to 1 MiB each other thread that has
/// not allocated since the reporter was set still holds back). Called from
/// the allocating / freeing thread.
pub type TsrMemoryReportFn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        ptr: *const c_void,
        delta_bytes: i64,
        total_allocated: u64,
        device: TsrDevice,
    ),
>;

/// Borrows the allocator behind a handle (no reference count taken;
/// `allocator_ref` takes one).
///
/// # Safety
/// `a` NULL or a live allocator handle.
pub(crate) unsafe fn allocator_impl<'a>(
    a: *const TsrAllocator,
    name: &str,
) -> Result<&'a AllocatorImpl> {
    // SAFETY: `a` is NULL or a live TsrAllocator (the header's contract,
    // ffi/handle.rs); borrow checks NULL and liveness.
    unsafe { handle::borrow(a, name) }
}

/// A new reference to the allocator behind a handle (the handle stays
/// the caller's; `allocator_impl` and `allocator_view` borrow without
/// one).
///
/// # Safety
/// `a` NULL or a live allocator handle.
pub(crate) unsafe fn allocator_ref(a: *const TsrAllocator, name: &str) -> Result<Allocator> {
    // SAFETY: `a` is NULL or a live TsrAllocator (the header's contract,
    // ffi/handle.rs); clone_ref checks NULL and liveness.
    Ok(Allocator::from_ref(unsafe { handle::clone_ref(a, name)? }))
}

/// The allocator behind a handle, borrowed for the call (no reference
/// count taken).
///
/// # Safety
/// `a` NULL or a live allocator handle; the result must not outlive the
/// call.
pub(crate) unsafe fn allocator_view(
    a: *const TsrAllocator,
    name: &str,
) -> Result<std::mem::ManuallyDrop<Allocator>> {
    // SAFETY: `a` is NULL or a live TsrAllocator (the header's contract,
    // ffi/handle.rs); view checks NULL and liveness.
    let r = unsafe { handle::view(a, name)? };
    Ok(std::mem::ManuallyDrop::new(Allocator::from_ref(
        std::mem::ManuallyDrop::into_inner(r),
    )))
}

/// Turns an allocator into a handle the caller owns.
pub(crate) fn allocator_handle(a: Allocator) -> *mut TsrAllocator {
    handle::into_handle(a.into_ref())
}

/// Installs `allocator` for `device_type` if `priority` >= the slot's
/// current priority (equal: replaces), as c10's SetAllocator. Returns
/// TSR_OK whether or not the slot changed (a higher-priority allocator is
/// kept silently); tsr_get_allocator tells which one is current. The
/// registry keeps its own reference; the previous allocator lives on while
/// storages or allocations made by it remain.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (unknown device
/// type); TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_set_allocator(
    device_type: TsrDeviceType,
    allocator: *mut TsrAllocator,
    priority: u8,
) -> TsrStatus {
    guard("tsr_set_allocator", || {
        let t = device_type_arg(device_type)?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_ref checks NULL and
        // liveness.
        let a = unsafe { allocator_ref(allocator, "allocator")? };
        allocator::set_allocator(t, &a, priority);
        Ok(())
    })
}

/// A new reference to the allocator installed for `device_type` (the
/// built-in one for TSR_CPU unless replaced), or NULL if none (or the
/// device type is unknown, with a last-error message).
#[no_mangle]
pub extern "C" fn tsr_get_allocator(device_type: TsrDeviceType) -> *mut TsrAllocator {
    guard_value(
        "tsr_get_allocator",
        std::ptr::null_mut(),
        || match device_type_arg(device_type) {
            Ok(t) => allocator::get_allocator(t).map_or(std::ptr::null_mut(), allocator_handle),
            Err(e) => {
                fail("tsr_get_allocator", &e);
                std::ptr::null_mut()
            }
        },
    )
}

/// The priority of the slot for `device_type` (0 when empty or unknown).
#[no_mangle]
pub extern "C" fn tsr_get_allocator_priority(device_type: TsrDeviceType) -> u8 {
    guard_value("tsr_get_allocator_priority", 0, || {
        device_type_arg(device_type).map_or(0, allocator::registry::priority)
    })
}

/// A new reference to the built-in CPU allocator (64-byte aligned, always
/// the same object, whatever is registered for TSR_CPU).
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator() -> *mut TsrAllocator {
    guard_value("tsr_cpu_allocator", std::ptr::null_mut(), || {
        allocator_handle(Allocator::cpu())
    })
}

/// The allocator's name (valid while it lives); NULL for NULL.
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_name(allocator: *const TsrAllocator) -> *const c_char {
    guard_value("tsr_allocator_name", std::ptr::null(), || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_impl checks NULL and
        // liveness.
        match unsafe { allocator_impl(allocator, "allocator") } {
            Ok(a) => a.c_name().as_ptr(),
            Err(e) => {
                fail("tsr_allocator_name", &e);
                std::ptr::null()
            }
        }
    })
}

/// Allocates `nbytes` on the allocator's default device (CPU for plugins)
/// and writes the pointer to `*out`; free it with tsr_data_ptr_free (or
/// hand it to tsr_storage_from_data_ptr). 0 bytes may give a NULL data
/// pointer.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_OUT_OF_MEMORY (with the size),
/// or the plugin's status and message.
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_allocate(
    allocator: *mut TsrAllocator,
    nbytes: usize,
    out: *mut TsrDataPtr,
) -> TsrStatus {
    // SAFETY: this function's arguments, under its contract.
    let hit = unsafe {
        allocate_hit_into(
            "tsr_allocator_allocate",
            allocator,
            nbytes,
            out,
            TsrDataPtr::from_core,
        )
    };
    if hit {
        return TSR_OK;
    }
    // SAFETY: allocate_general has this function's contract, and these
    // are this function's arguments unchanged (NULL or a live handle; NULL
    // or writable); it checks both for NULL.
    unsafe { allocate_general(allocator, nbytes, out) }
}

/// The thread-cache hit of the allocate exports, tried first: the block
/// written to `*out` as `convert` makes it, or false (a NULL handle or
/// `out`, or no hit) for the export's general path to answer. It needs
/// few registers and no room for an error, so the export's frame stays
/// small.
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable.
#[inline(always)]
unsafe fn allocate_hit_into<T>(
    fname: &str,
    allocator: *mut TsrAllocator,
    nbytes: usize,
    out: *mut T,
    convert: impl FnOnce(crate::data_ptr::DataPtr) -> T,
) -> bool {
    guard_value(fname, false, || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract); try_borrow checks NULL and liveness.
        let Some(a) = (unsafe { handle::try_borrow(allocator) }) else {
            return false;
        };
        if out.is_null() {
            return false;
        }
        let Some(dp) = allocator::cpu::allocate_hit(a, nbytes) else {
            return false;
        };
        // SAFETY: out checked non-NULL; writable by the caller's contract.
        unsafe { write_out(out, convert(dp)) };
        true
    })
}

/// tsr_allocator_allocate past the thread-cache hit.
///
/// # Safety
/// As tsr_allocator_allocate.
#[inline(never)]
unsafe fn allocate_general(
    allocator: *mut TsrAllocator,
    nbytes: usize,
    out: *mut TsrDataPtr,
) -> TsrStatus {
    guard("tsr_allocator_allocate", || {
        check_not_null(out, "out")?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_view checks NULL and
        // liveness.
        let a = unsafe { allocator_view(allocator, "allocator")? };
        let dp = a.allocate_inline(nbytes, a.default_device(), allocator::OomReport::Notify)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, TsrDataPtr::from_core(dp)) };
        Ok(())
    })
}

/// Allocates `nbytes` and writes only the address to `*out` (c10's
/// raw_allocate); needs an allocator with a raw deleter. Free with
/// tsr_allocator_raw_deallocate.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_UNSUPPORTED (no raw deleter);
/// TSR_ERR_OUT_OF_MEMORY.
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_raw_allocate(
    allocator: *mut TsrAllocator,
    nbytes: usize,
    out: *mut *mut c_void,
) -> TsrStatus {
    // The built-in CPU allocator's hit is a raw allocation too (its
    // context is its data, its deleter the raw deleter).
    // SAFETY: this function's arguments, under its contract.
    let hit = unsafe {
        allocate_hit_into("tsr_allocator_raw_allocate", allocator, nbytes, out, |dp| {
            dp.into_raw_parts().0
        })
    };
    if hit {
        return TSR_OK;
    }
    // SAFETY: raw_allocate_general has this function's contract, and
    // these are its arguments unchanged.
    unsafe { raw_allocate_general(allocator, nbytes, out) }
}

/// tsr_allocator_raw_allocate past the thread-cache hit.
///
/// # Safety
/// As tsr_allocator_raw_allocate.
#[inline(never)]
unsafe fn raw_allocate_general(
    allocator: *mut TsrAllocator,
    nbytes: usize,
    out: *mut *mut c_void,
) -> TsrStatus {
    guard("tsr_allocator_raw_allocate", || {
        check_not_null(out, "out")?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_view checks NULL and
        // liveness.
        let a = unsafe { allocator_view(allocator, "allocator")? };
        let p = a.raw_allocate(nbytes)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, p) };
        Ok(())
    })
}

/// Frees an address from tsr_allocator_raw_allocate of the same
/// allocator. NULL `ptr` does nothing.
///
/// Errors: TSR_ERR_NULL_POINTER (allocator); TSR_ERR_UNSUPPORTED;
/// TSR_ERR_INVALID_ARGUMENT (an address this allocator did not hand out,
/// detected for plugins).
///
/// # Safety
/// `ptr` must come from raw_allocate of this allocator, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_raw_deallocate(
    allocator: *mut TsrAllocator,
    ptr: *mut c_void,
) -> TsrStatus {
    guard("tsr_allocator_raw_deallocate", || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_view checks NULL and
        // liveness.
        let a = unsafe { allocator_view(allocator, "allocator")? };
        // SAFETY: the header requires ptr to come from this allocator's
        // raw_allocate and not be freed yet; raw_deallocate checks it has a
        // raw deleter.
        unsafe { a.raw_deallocate(ptr) }
    })
}

/// Copies `nbytes` from `src` to `dst` with the allocator's copy function
/// (memcpy for host allocators).
///
/// Errors: TSR_ERR_NULL_POINTER (allocator, or dst/src with nbytes > 0);
/// the plugin's status.
///
/// # Safety
/// `dst`/`src` valid for `nbytes` and not overlapping.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_copy_data(
    allocator: *mut TsrAllocator,
    dst: *mut c_void,
    src: *const c_void,
    nbytes: usize,
) -> TsrStatus {
    guard("tsr_allocator_copy_data", || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_view checks NULL and
        // liveness.
        let a = unsafe { allocator_view(allocator, "allocator")? };
        if nbytes > 0 {
            check_not_null(dst, "dst")?;
            check_not_null(src, "src")?;
        }
        // SAFETY: dst and src checked non-NULL when nbytes > 0; the header
        // requires them valid for nbytes bytes of this allocator's memory.
        unsafe { a.copy_data(dst, src, nbytes) }
    })
}

/// Writes the allocator's statistics to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_stats(
    allocator: *const TsrAllocator,
    out: *mut TsrAllocatorStats,
) -> TsrStatus {
    guard("tsr_allocator_stats", || {
        check_not_null(out, "out")?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_impl checks NULL and
        // liveness.
        let a = unsafe { allocator_impl(allocator, "allocator")? };
        let s = a.stats_now();
        // SAFETY: out checked non-NULL.
        unsafe {
            write_out(
                out,
                TsrAllocatorStats {
                    allocated_bytes: s.allocated_bytes,
                    peak_bytes: s.peak_bytes,
                    num_allocs: s.num_allocs,
                    num_frees: s.num_frees,
                    num_failed: s.num_failed,
                },
            )
        };
        Ok(())
    })
}

/// Sets the allocator's peak to its current allocated bytes. NULL does
/// nothing (and records a last-error message).
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_reset_peak(allocator: *mut TsrAllocator) {
    guard_value("tsr_allocator_reset_peak", (), || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_impl checks NULL and
        // liveness.
        match unsafe { allocator_impl(allocator, "allocator") } {
            Ok(a) => a.reset_peak(),
            Err(e) => {
                fail("tsr_allocator_reset_peak", &e);
            }
        }
    })
}

/// Installs the process-wide memory reporter (`fn` NULL: removes it). It
/// sees every allocation and free of every allocator, built-in and
/// plugins, and must be callable from any thread.
///
/// # Safety
/// `fn_` must stay callable with `user` until replaced.
#[no_mangle]
pub unsafe extern "C" fn tsr_set_memory_reporter(
    fn_: TsrMemoryReportFn,
    user: *mut c_void,
) -> TsrStatus {
    guard("tsr_set_memory_reporter", || {
        match fn_ {
            None => allocator::set_memory_reporter(None),
            Some(f) => {
                let user = user as usize;
                allocator::set_memory_reporter(Some(Arc::new(move |e: &MemoryEvent| {
                    // SAFETY: the host registered f with this user pointer.
                    unsafe {
                        f(
                            user as *mut c_void,
                            e.ptr,
                            e.delta_bytes,
                            e.total_allocated,
                            TsrDevice::from_core(e.device),
                        )
                    }
                })))
            }
        }
        Ok(())
    })
}

/// Writes an allocator obtained from `get` to `out` as a new reference:
/// [`produce`] of a new TsrAllocator.
///
/// # Safety
/// `out` NULL or writable.
pub(crate) unsafe fn hand_out(
    fname: &str,
    out: *mut *mut TsrAllocator,
    get: impl FnOnce() -> Result<Allocator>,
) -> TsrStatus {
    // SAFETY: `out` is this function's own argument, NULL or writable.
    unsafe { produce(fname, out, "out", || get().map(allocator_handle)) }
}
