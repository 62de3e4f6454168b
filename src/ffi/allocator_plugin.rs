//! Allocator plugins written in C at the ABI: the table
//! (TsrAllocatorVTable), the adapter that makes one a tessera allocator,
//! and the exports that create, register and look into them.

use super::allocator::{allocator_handle, allocator_impl};
use super::call::{check_not_null, device_type_arg, guard, guard_value, read_sized, write_out};
use super::error::{call_host, fail, kind_of};
use super::types::*;
use crate::allocator::{self, Allocator, RawAllocator};
use crate::data_ptr::{DataPtr, DeleterFn};
use crate::device::Device;
use crate::error::{Error, Result};
use std::any::Any;
use std::ffi::{c_char, c_void, CStr};

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

    fn describe(&self) -> crate::allocator::Description {
        crate::allocator::Description::of(crate::allocator::AllocatorKind::Plugin)
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
        // header's contract, ffi/handle.rs); allocator_impl checks NULL and
        // liveness.
        match unsafe { allocator_impl(allocator, "allocator") } {
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
