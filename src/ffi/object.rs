//! Host objects: a refcounted block of bytes a C host fills in, with the
//! same strong/weak counts as every tessera handle (c10's
//! intrusive_ptr_target for C).

use super::call::{check_not_null, getter, guard, guard_value, read_sized, write_out};
use super::handle::{self, borrow_weak};
use super::types::*;
pub use super::types::{HostObject, TsrObject, TsrObjectVTable, TsrWeakObject};
use crate::refcount::Ref;
use std::ffi::c_void;

/// Creates a host object with `size` zeroed bytes (tsr_object_data) and
/// the callbacks in `vtable` (copied; NULL for none). Writes a new strong
/// reference (strong 1, weak 1) to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER (out NULL), TSR_ERR_INVALID_ARGUMENT
/// (vtable->struct_size too small), TSR_ERR_OUT_OF_MEMORY.
///
/// # Safety
/// `vtable` NULL or valid for reads of its struct_size; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_object_new(
    size: usize,
    vtable: *const TsrObjectVTable,
    out: *mut *mut TsrObject,
) -> TsrStatus {
    guard("tsr_object_new", || {
        check_not_null(out, "out")?;
        let vtable = if vtable.is_null() {
            TsrObjectVTable {
                struct_size: std::mem::size_of::<TsrObjectVTable>() as u32,
                release_resources: None,
                destroy: None,
            }
        } else {
            // SAFETY: the caller passes a readable vtable.
            unsafe { read_sized(vtable, 4, "TsrObjectVTable")? }
        };
        crate::ensure!(
            size <= isize::MAX as usize,
            OutOfMemory,
            "size {size} is too large for an object"
        );
        // SAFETY: plain allocation, checked below, freed in Drop.
        let data = unsafe { libc::calloc(1, size.max(1)) };
        crate::ensure!(
            !data.is_null(),
            OutOfMemory,
            "cannot allocate {size} bytes for the object"
        );
        let r = Ref::new(HostObject { data, vtable });
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, handle::into_handle(r)) };
        Ok(())
    })
}

/// The object's data block (`size` bytes given at creation); NULL if `obj`
/// is NULL. Valid until the object is destroyed.
///
/// # Safety
/// `obj` NULL or a live object handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_object_data(obj: *const TsrObject) -> *mut c_void {
    getter("tsr_object_data", std::ptr::null_mut(), || {
        // SAFETY: `obj` is NULL or a live TsrObject (the header's contract,
        // ffi/handle.rs); borrow checks NULL and liveness.
        Ok(unsafe { handle::borrow(obj, "obj")? }.data)
    })
}

/// The data block reached through a weak handle (valid until the object
/// is destroyed, even after it expired); NULL if `weak` is NULL.
///
/// # Safety
/// `weak` NULL or a live weak handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_weak_object_data(weak: *const TsrWeakObject) -> *mut c_void {
    guard_value("tsr_weak_object_data", std::ptr::null_mut(), || {
        if weak.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: weak is non-NULL and the caller's weak count keeps the
        // block and its HostObject (dropped only with the block) alive;
        // `data` is never mutated, not even by release_resources.
        unsafe { borrow_weak(weak) }.data
    })
}
