//! Allocators at the ABI: C plugins (TsrAllocatorVTable), the registry,
//! the built-in CPU allocator's options, statistics and the memory
//! reporter.

use super::call::{
    check_not_null, device_type_arg, guard, guard_value, produce, read_sized, write_out,
};
use super::error::{call_host, fail, kind_of};
use super::handle;
use super::refcount as rc;
use super::types::*;
pub use super::types::{TsrAllocator, TsrWeakAllocator};
use crate::allocator::{self, cpu, Allocator, AllocatorImpl, MemoryEvent, RawAllocator};
use crate::data_ptr::{DataPtr, DeleterFn};
use crate::device::Device;
use crate::error::{Error, Result};
use std::any::Any;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

/// An allocator plugin written in C. tessera copies the table at
/// tsr_allocator_new, so it need not outlive the call. Every function may
/// be called from any thread.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsrAllocatorVTable {
    /// sizeof(TsrAllocatorVTable) as compiled by the plugin; fields past it
    /// are treated as NULL, so plugins built against an older header keep
    /// working. Must cover at least `name` and `allocate`.
    pub struct_size: u32,
    /// The allocator's name (copied), or NULL for "plugin".
    pub name: *const c_char,
    /// Required. Allocates `nbytes` on `device` and fills `*out`; returns
    /// TSR_OK, or an error status (after tsr_set_last_error to explain).
    pub allocate: Option<
        unsafe extern "C" fn(
            self_: *mut c_void,
            nbytes: usize,
            device: TsrDevice,
            out: *mut TsrDataPtr,
        ) -> TsrStatus,
    >,
    /// Optional. Frees an allocation given its data address; set it only if
    /// every allocation has ctx == data and this deleter. Enables
    /// tsr_allocator_raw_allocate / raw_deallocate.
    pub raw_deleter: TsrDeleterFn,
    /// Optional. Copies `nbytes` between memory of this allocator (or to /
    /// from host memory for device allocators). NULL: memcpy.
    pub copy_data: Option<
        unsafe extern "C" fn(
            self_: *mut c_void,
            dst: *mut c_void,
            src: *const c_void,
            nbytes: usize,
        ) -> TsrStatus,
    >,
    /// Optional. Called once with `self` when the allocator is destroyed:
    /// after the last handle and the last allocation made by it are gone.
    pub release: Option<unsafe extern "C" fn(self_: *mut c_void)>,
}

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

struct CPlugin {
    name: String,
    vtable: TsrAllocatorVTable,
    self_: *mut c_void,
}

// SAFETY: the plugin contract (TsrAllocatorVTable docs) requires every
// callback to be callable from any thread with the same `self`.
unsafe impl Send for CPlugin {}
// SAFETY: as Send.
unsafe impl Sync for CPlugin {}

impl CPlugin {
    fn failure(&self, status: TsrStatus, what: String, msg: String) -> Error {
        let detail = if msg.is_empty() {
            "no message".to_string()
        } else {
            msg
        };
        // SAFETY: tsr_status_name returns a static string.
        let sname =
            unsafe { CStr::from_ptr(super::last_error::tsr_status_name(status)) }.to_string_lossy();
        Error::new(
            kind_of(status),
            format!(
                "allocator '{}' failed to {what} ({sname}): {detail}",
                self.name
            ),
        )
    }
}

impl RawAllocator for CPlugin {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        let Some(allocate) = self.vtable.allocate else {
            crate::bail!(
                Internal,
                "allocator '{}' has no allocate function",
                self.name
            );
        };
        let mut out = TsrDataPtr::empty(TsrDevice::from_core(device));
        // SAFETY: the plugin contract: allocate fills `out` and may be
        // called from any thread.
        let (status, msg) = call_host(|| unsafe {
            allocate(self.self_, nbytes, TsrDevice::from_core(device), &mut out)
        });
        if status != TSR_OK {
            let what = format!("allocate {nbytes} bytes on {device}");
            return Err(self.failure(status, what, msg));
        }
        // SAFETY: on success the plugin hands over a TsrDataPtr that follows
        // its contract.
        let mut dp = unsafe { out.take() };
        if out_device_invalid(&out) {
            dp.set_device(device);
        }
        Ok(dp)
    }

    fn raw_deleter(&self) -> Option<DeleterFn> {
        self.vtable.raw_deleter
    }

    unsafe fn copy_data(&self, dst: *mut c_void, src: *const c_void, nbytes: usize) -> Result<()> {
        match self.vtable.copy_data {
            None => {
                if nbytes > 0 {
                    // SAFETY: copy_data's contract: src and dst valid for
                    // nbytes and not overlapping (the caller checked both
                    // non-NULL).
                    unsafe {
                        std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, nbytes)
                    };
                }
                Ok(())
            }
            Some(f) => {
                // SAFETY: plugin contract.
                let (status, msg) = call_host(|| unsafe { f(self.self_, dst, src, nbytes) });
                if status != TSR_OK {
                    return Err(self.failure(status, format!("copy {nbytes} bytes"), msg));
                }
                Ok(())
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn kind(&self) -> &'static str {
        "plugin"
    }
}

fn out_device_invalid(out: &TsrDataPtr) -> bool {
    out.device.to_core().is_err()
}

impl Drop for CPlugin {
    fn drop(&mut self) {
        if let Some(release) = self.vtable.release {
            // SAFETY: plugin contract: release runs once, last.
            unsafe { release(self.self_) };
        }
    }
}

const VTABLE_MIN_SIZE: usize =
    std::mem::offset_of!(TsrAllocatorVTable, allocate) + std::mem::size_of::<usize>();

/// Builds an allocator from a plugin table.
///
/// # Safety
/// `vtable` valid for reads of its struct_size; `name` within it NULL or
/// a NUL-terminated string.
unsafe fn plugin_allocator(
    vtable: *const TsrAllocatorVTable,
    self_: *mut c_void,
) -> Result<Allocator> {
    check_not_null(vtable, "vtable")?;
    // SAFETY: vtable is non-NULL (checked above) and, by this function's
    // contract, readable for its struct_size.
    let table = unsafe { read_sized(vtable, VTABLE_MIN_SIZE, "TsrAllocatorVTable")? };
    crate::ensure!(
        table.allocate.is_some(),
        InvalidArgument,
        "vtable->allocate is NULL: expected an allocate function"
    );
    let name = if table.name.is_null() {
        "plugin".to_string()
    } else {
        // SAFETY: the caller passes a NUL-terminated name.
        unsafe { CStr::from_ptr(table.name) }
            .to_string_lossy()
            .into_owned()
    };
    let plugin = CPlugin {
        name: name.clone(),
        vtable: table,
        self_,
    };
    Ok(Allocator::new(name, Device::CPU, Box::new(plugin)))
}

/// Borrows the allocator behind a handle.
///
/// # Safety
/// `a` NULL or a live allocator handle.
pub(crate) unsafe fn allocator_arg<'a>(
    a: *const TsrAllocator,
    name: &str,
) -> Result<&'a AllocatorImpl> {
    // SAFETY: `a` is NULL or a live TsrAllocator (the header's contract,
    // ffi/handle.rs); borrow checks NULL and liveness.
    unsafe { handle::borrow(a, name) }
}

/// A new reference to the allocator behind a handle.
///
/// # Safety
/// `a` NULL or a live allocator handle.
pub(crate) unsafe fn allocator_clone(a: *const TsrAllocator, name: &str) -> Result<Allocator> {
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

/// Creates an allocator from a C plugin table (copied) and its `self`
/// pointer, and writes a new reference to `*out`. `release(self)` runs
/// when the last handle and the last allocation are gone. Allocations go
/// through tessera's statistics.
///
/// Errors: TSR_ERR_NULL_POINTER (vtable or out NULL); TSR_ERR_INVALID_ARGUMENT
/// (struct_size too small to hold `allocate`, or allocate NULL). On error
/// `release` is not called: `self` stays the caller's to clean up.
///
/// # Safety
/// `vtable` NULL or readable for its struct_size; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_new(
    vtable: *const TsrAllocatorVTable,
    self_: *mut c_void,
    out: *mut *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_allocator_new", || {
        check_not_null(out, "out")?;
        // SAFETY: the header requires vtable readable for its struct_size and
        // its name NULL or NUL-terminated; plugin_allocator checks NULL.
        let a = unsafe { plugin_allocator(vtable, self_)? };
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, allocator_handle(a)) };
        Ok(())
    })
}

/// Creates an allocator from a plugin table and installs it for
/// `device_type` with `priority` (tsr_set_allocator's rule), keeping no
/// reference for the caller. What TSR_REGISTER_ALLOCATOR calls at load
/// time; since nobody can check the status there, a failure is also
/// printed to stderr. On error `release` is not called.
///
/// # Safety
/// As tsr_allocator_new.
#[no_mangle]
pub unsafe extern "C" fn tsr_register_allocator(
    device_type: TsrDeviceType,
    vtable: *const TsrAllocatorVTable,
    self_: *mut c_void,
    priority: u8,
) -> TsrStatus {
    let status = guard("tsr_register_allocator", || {
        let t = device_type_arg(device_type)?;
        // SAFETY: the header requires vtable readable for its struct_size and
        // its name NULL or NUL-terminated; plugin_allocator checks NULL.
        let a = unsafe { plugin_allocator(vtable, self_)? };
        allocator::set_allocator(t, &a, priority);
        Ok(())
    });
    if status != TSR_OK {
        // SAFETY: tsr_last_error_message returns a valid C string.
        let msg = unsafe { CStr::from_ptr(super::last_error::tsr_last_error_message()) };
        eprintln!(
            "tessera: TSR_REGISTER_ALLOCATOR failed: {}",
            msg.to_string_lossy()
        );
    }
    status
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
        // header's contract, ffi/handle.rs); allocator_clone checks NULL and
        // liveness.
        let a = unsafe { allocator_clone(allocator, "allocator")? };
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
        // header's contract, ffi/handle.rs); allocator_arg checks NULL and
        // liveness.
        match unsafe { allocator_arg(allocator, "allocator") } {
            Ok(a) => a.c_name().as_ptr(),
            Err(e) => {
                fail("tsr_allocator_name", &e);
                std::ptr::null()
            }
        }
    })
}

/// The `self` pointer a C plugin allocator was created with
/// (tsr_allocator_new, tsr_register_allocator), or NULL when `allocator`
/// is not a C plugin (the built-in CPU, caching or CUDA allocators) or is
/// NULL. Lets a host get back to its own object from a registered
/// allocator.
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_plugin_self(allocator: *const TsrAllocator) -> *mut c_void {
    guard_value("tsr_allocator_plugin_self", std::ptr::null_mut(), || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_arg checks NULL and
        // liveness.
        match unsafe { allocator_arg(allocator, "allocator") } {
            Ok(a) => a
                .backend()
                .as_any()
                .downcast_ref::<CPlugin>()
                .map_or(std::ptr::null_mut(), |p| p.self_),
            Err(e) => {
                fail("tsr_allocator_plugin_self", &e);
                std::ptr::null_mut()
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
    // The thread-cache hit first, in a function of its own: it needs few
    // registers and no room for an error, so its frame stays small.
    let hit = guard_value("tsr_allocator_allocate", false, || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract); try_borrow checks NULL and liveness.
        let Some(a) = (unsafe { handle::try_borrow(allocator) }) else {
            return false;
        };
        if out.is_null() {
            return false;
        }
        let Some(dp) = a.allocate_hit(nbytes) else {
            return false;
        };
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, TsrDataPtr::from_core(dp)) };
        true
    });
    if hit {
        return TSR_OK;
    }
    // SAFETY: allocate_general has this function's contract, and these
    // are this function's arguments unchanged (NULL or a live handle; NULL
    // or writable); it checks both for NULL.
    unsafe { allocate_general(allocator, nbytes, out) }
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
        let dp = a.allocate_inline(nbytes)?;
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
        // header's contract, ffi/handle.rs); allocator_arg checks NULL and
        // liveness.
        let a = unsafe { allocator_arg(allocator, "allocator")? };
        let s = a.stats().snapshot();
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
        // header's contract, ffi/handle.rs); allocator_arg checks NULL and
        // liveness.
        match unsafe { allocator_arg(allocator, "allocator") } {
            Ok(a) => a.stats().reset_peak(),
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

fn update_cpu_options(fname: &str, f: impl FnOnce(&mut cpu::CpuOptions)) -> TsrStatus {
    guard(fname, || {
        let mut o = cpu::options();
        f(&mut o);
        cpu::set_options(o)
    })
}

/// Zero-fills new memory of the built-in CPU allocator (process-wide).
/// Errors: TSR_ERR_INVALID_ARGUMENT when turning it on while junk-fill is on.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_zero_fill(on: bool) -> TsrStatus {
    update_cpu_options("tsr_cpu_allocator_set_zero_fill", |o| o.zero_fill = on)
}

/// Fills new memory of the built-in CPU allocator with the pattern
/// 0x7fedbeef (reads as NaN / a huge integer), to expose reads of
/// uninitialized memory. Errors: TSR_ERR_INVALID_ARGUMENT when turning it
/// on while zero-fill is on.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_junk_fill(on: bool) -> TsrStatus {
    update_cpu_options("tsr_cpu_allocator_set_junk_fill", |o| o.junk_fill = on)
}

/// Aligns built-in CPU allocations of 2 MiB or more to 2 MiB and advises
/// transparent huge pages for them (madvise).
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_huge_pages(on: bool) -> TsrStatus {
    update_cpu_options("tsr_cpu_allocator_set_huge_pages", |o| o.huge_pages = on)
}

/// Sets the per-thread cache budget of the built-in CPU allocator, in
/// bytes (default 128 MiB; 0 turns the cache off). Freed blocks up to 256
/// MiB are kept by the freeing thread, a few per size class, until this
/// budget is reached, so repeated sizes skip malloc/free; a thread's cache
/// is freed when it exits or calls tsr_cpu_allocator_release_cache.
/// Applies to later frees.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_cache_limit(bytes: usize) {
    guard_value("tsr_cpu_allocator_set_cache_limit", (), || {
        cpu::set_cache_limit(bytes)
    })
}

/// The per-thread cache budget of the built-in CPU allocator, in bytes.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_cache_limit() -> usize {
    guard_value("tsr_cpu_allocator_cache_limit", 0, cpu::cache_limit)
}

/// Frees every block the calling thread keeps in the built-in CPU
/// allocator's cache; returns the bytes released.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_release_cache() -> usize {
    guard_value(
        "tsr_cpu_allocator_release_cache",
        0,
        cpu::release_thread_cache,
    )
}

/// Bytes the calling thread keeps in the built-in CPU allocator's cache.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_cached_bytes() -> usize {
    guard_value(
        "tsr_cpu_allocator_cached_bytes",
        0,
        cpu::thread_cached_bytes,
    )
}

/// Adds a strong reference. Errors: TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `a` NULL or a handle whose memory is alive.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_incref(a: *mut TsrAllocator) -> TsrStatus {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::incref("tsr_allocator_incref", a) }
}

/// Drops a strong reference. Errors: TSR_ERR_NULL_POINTER,
/// TSR_ERR_DEAD_OBJECT (detectable while weak references keep the memory).
///
/// # Safety
/// `a` NULL or a live handle the caller owns a reference of.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_decref(a: *mut TsrAllocator) -> TsrStatus {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::decref("tsr_allocator_decref", a) }
}

/// The strong count; 0 for NULL.
///
/// # Safety
/// `a` NULL or a handle whose memory is alive.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_use_count(a: *const TsrAllocator) -> usize {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::counts("tsr_allocator_use_count", a).0 }
}

/// The raw weak count; 0 for NULL.
///
/// # Safety
/// `a` NULL or a handle whose memory is alive.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_weak_use_count(a: *const TsrAllocator) -> usize {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::counts("tsr_allocator_weak_use_count", a).1 }
}

/// Writes a new weak reference to `*out`. Errors: TSR_ERR_NULL_POINTER,
/// TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `a` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_downgrade(
    a: *mut TsrAllocator,
    out: *mut *mut TsrWeakAllocator,
) -> TsrStatus {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::downgrade("tsr_allocator_downgrade", a, out) }
}

/// Writes a new strong reference to `*out`, or NULL once expired.
/// Errors: TSR_ERR_NULL_POINTER.
///
/// # Safety
/// `w` NULL or a live weak handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_allocator_lock(
    w: *mut TsrWeakAllocator,
    out: *mut *mut TsrAllocator,
) -> TsrStatus {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::lock("tsr_weak_allocator_lock", w, out) }
}

/// Adds a weak reference. Errors: TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `w` NULL or a live weak handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_allocator_incref(w: *mut TsrWeakAllocator) -> TsrStatus {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::weak_incref("tsr_weak_allocator_incref", w) }
}

/// Drops a weak reference. Errors: TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `w` NULL or a live weak handle the caller owns.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_allocator_decref(w: *mut TsrWeakAllocator) -> TsrStatus {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::weak_decref("tsr_weak_allocator_decref", w) }
}

/// Whether the allocator expired; true for NULL.
///
/// # Safety
/// `w` NULL or a live weak handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_allocator_expired(w: *const TsrWeakAllocator) -> bool {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::expired("tsr_weak_allocator_expired", w) }
}

/// The strong count through a weak handle; 0 for NULL.
///
/// # Safety
/// `w` NULL or a live weak handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_allocator_use_count(w: *const TsrWeakAllocator) -> usize {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::counts("tsr_weak_allocator_use_count", w).0 }
}

/// The raw weak count through a weak handle; 0 for NULL.
///
/// # Safety
/// `w` NULL or a live weak handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_allocator_weak_use_count(w: *const TsrWeakAllocator) -> usize {
    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL
    // is checked inside.
    unsafe { rc::counts("tsr_weak_allocator_weak_use_count", w).1 }
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
