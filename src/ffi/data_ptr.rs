//! TsrDataPtr operations.

use super::call::{check_not_null, guard, guard_value};
use super::types::*;
use crate::data_ptr::DataPtr;
use crate::device::Device;
use std::ffi::c_void;

impl TsrDataPtr {
    /// An empty pointer on `device`.
    pub(crate) fn empty(device: TsrDevice) -> TsrDataPtr {
        TsrDataPtr {
            data: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
            deleter: None,
            device,
        }
    }

    /// Takes ownership of a core DataPtr.
    pub(crate) fn from_core(p: DataPtr) -> TsrDataPtr {
        let (data, ctx, deleter, device) = p.into_raw_parts();
        TsrDataPtr {
            data,
            ctx,
            deleter,
            device: TsrDevice::from_core(device),
        }
    }

    /// Moves the contents out into a core DataPtr and zeroes `*self`, so a
    /// consumed pointer cannot run its deleter twice. An invalid device
    /// falls back to CPU.
    ///
    /// # Safety
    /// The contents must follow the TsrDataPtr contract (deleter(ctx) once
    /// is sound).
    pub(crate) unsafe fn take(&mut self) -> DataPtr {
        let device = self.device.to_core().unwrap_or(Device::CPU);
        let taken = std::mem::replace(self, TsrDataPtr::empty(self.device));
        // SAFETY: this function's contract: the fields follow the TsrDataPtr
        // contract, so calling deleter(ctx) once is sound; self is emptied so
        // it cannot run twice.
        unsafe { DataPtr::from_raw_parts(taken.data, taken.ctx, taken.deleter, device) }
    }
}

/// Runs the deleter with ctx (if both are non-NULL) exactly once, then
/// zeroes `*p`. NULL `p` does nothing.
///
/// # Safety
/// `p` NULL or a valid TsrDataPtr following its contract.
#[no_mangle]
pub unsafe extern "C" fn tsr_data_ptr_free(p: *mut TsrDataPtr) {
    guard_value("tsr_data_ptr_free", (), || {
        if p.is_null() {
            return;
        }
        // SAFETY: p is valid; its contents are moved out (and zeroed) so the
        // deleter runs exactly once, here.
        let taken = unsafe { std::ptr::replace(p, TsrDataPtr::empty((*p).device)) };
        if let (false, Some(deleter)) = (taken.ctx.is_null(), taken.deleter) {
            // SAFETY: the TsrDataPtr contract: calling deleter(ctx) once is
            // sound.
            unsafe { deleter(taken.ctx) };
        }
    })
}

/// Takes ownership of the context out of `*p`: returns ctx and sets ctx and
/// deleter to NULL, so nothing runs when `*p` is freed (c10's
/// release_context). The caller now frees ctx itself. NULL for NULL `p`.
///
/// # Safety
/// `p` NULL or a valid TsrDataPtr.
#[no_mangle]
pub unsafe extern "C" fn tsr_data_ptr_release_context(p: *mut TsrDataPtr) -> *mut c_void {
    guard_value("tsr_data_ptr_release_context", std::ptr::null_mut(), || {
        if p.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: p is valid.
        let p = unsafe { &mut *p };
        let ctx = p.ctx;
        p.ctx = std::ptr::null_mut();
        p.deleter = None;
        ctx
    })
}

/// Replaces the deleter of `*p` with `new_deleter` only if it currently is
/// `expected` (NULL matches NULL); writes whether it did to `*swapped`. A
/// deleter installed by tessera's allocator statistics wrapper is seen
/// through: `expected` is compared with the deleter of the memory it wraps.
///
/// Errors: TSR_ERR_NULL_POINTER (p or swapped NULL).
///
/// # Safety
/// `p` NULL or a valid TsrDataPtr; `swapped` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_data_ptr_compare_exchange_deleter(
    p: *mut TsrDataPtr,
    expected: TsrDeleterFn,
    new_deleter: TsrDeleterFn,
    swapped: *mut bool,
) -> TsrStatus {
    guard("tsr_data_ptr_compare_exchange_deleter", || {
        check_not_null(p, "p")?;
        check_not_null(swapped, "swapped")?;
        // SAFETY: p is valid; its contents are moved into a DataPtr for the
        // operation and moved back, never dropped here.
        let p = unsafe { &mut *p };
        // SAFETY: the header requires *p to follow the TsrDataPtr contract;
        // its contents are moved back into *p just below.
        let mut core = unsafe { p.take() };
        let did = core.compare_exchange_deleter(expected, new_deleter);
        *p = TsrDataPtr::from_core(core);
        // SAFETY: checked non-NULL.
        unsafe { swapped.write(did) };
        Ok(())
    })
}

/// The context of `*p` if its deleter is `expected` (also through
/// tessera's statistics wrapper), else NULL (c10's cast_context).
///
/// # Safety
/// `p` NULL or a valid TsrDataPtr.
#[no_mangle]
pub unsafe extern "C" fn tsr_data_ptr_cast_context(
    p: *const TsrDataPtr,
    expected: TsrDeleterFn,
) -> *mut c_void {
    guard_value("tsr_data_ptr_cast_context", std::ptr::null_mut(), || {
        let Some(expected) = expected else {
            return std::ptr::null_mut();
        };
        if p.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: p is valid; the DataPtr built here borrows its contents
        // and is forgotten, never dropped.
        let core =
            unsafe { DataPtr::from_raw_parts((*p).data, (*p).ctx, (*p).deleter, Device::CPU) };
        let r = core.cast_context(expected);
        let _ = core.into_raw_parts();
        r.unwrap_or(std::ptr::null_mut())
    })
}
