//! Storages at the ABI.

use super::allocator::{allocator_handle, allocator_view, TsrAllocator};
use super::call::{check_not_null, getter, guard, write_out};
use super::handle;

use super::types::*;
pub use super::types::{TsrStorage, TsrWeakStorage};
use crate::error::Result;
use crate::storage::{Storage, StorageImpl};
use std::ffi::c_void;

/// A new reference to the storage behind a handle (the handle stays the
/// caller's; `storage_impl` borrows without one).
///
/// # Safety
/// `s` NULL or a live storage handle.
pub(crate) unsafe fn storage_ref(s: *const TsrStorage, name: &str) -> Result<Storage> {
    // SAFETY: `s` is NULL or a live TsrStorage (the header's contract,
    // ffi/handle.rs); clone_ref checks NULL and liveness.
    Ok(Storage::from_ref(unsafe { handle::clone_ref(s, name)? }))
}

/// Borrows the storage implementation behind a handle (no reference count
/// taken; `storage_ref` takes one).
///
/// # Safety
/// `s` NULL or a live storage handle.
pub(crate) unsafe fn storage_impl<'a>(s: *const TsrStorage, name: &str) -> Result<&'a StorageImpl> {
    // SAFETY: `s` is NULL or a live TsrStorage (the header's contract,
    // ffi/handle.rs); borrow checks NULL and liveness.
    unsafe { handle::borrow(s, name) }
}

pub(crate) fn storage_handle(s: Storage) -> *mut TsrStorage {
    handle::into_handle(s.into_ref())
}

/// Allocates a storage of `nbytes` on `device` with the allocator
/// registered for its type, and writes a new reference to `*out`. Meta
/// storages hold no data.
///
/// Errors: TSR_ERR_NULL_POINTER (out); TSR_ERR_INVALID_ARGUMENT (device);
/// TSR_ERR_DEVICE (no allocator registered for the device type);
/// TSR_ERR_OUT_OF_MEMORY.
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_new(
    nbytes: usize,
    device: TsrDevice,
    resizable: bool,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_new", || {
        check_not_null(out, "out")?;
        let s = Storage::new(nbytes, device.to_core()?, resizable)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}

/// Allocates a storage of `nbytes` with `allocator` (borrowed; the storage
/// keeps its own reference) on the allocator's default device.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; the allocator's
/// error (TSR_ERR_OUT_OF_MEMORY, ...).
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_new_with_allocator(
    nbytes: usize,
    allocator: *mut TsrAllocator,
    resizable: bool,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_new_with_allocator", || {
        check_not_null(out, "out")?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); allocator_view checks NULL and
        // liveness.
        let a = unsafe { allocator_view(allocator, "allocator")? };
        let s = Storage::with_allocator(nbytes, &a, resizable)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}

/// Wraps external memory (c10's from_blob): `*data_ptr` is consumed (zeroed
/// on success; its deleter runs exactly once, when the storage's data is
/// released). The storage is not resizable and has no allocator.
///
/// Errors: TSR_ERR_NULL_POINTER (data_ptr or out); TSR_ERR_INVALID_ARGUMENT
/// (invalid device in *data_ptr, or NULL data with nbytes > 0). On error
/// `*data_ptr` is untouched and still owned by the caller.
///
/// # Safety
/// `data_ptr` NULL or a valid TsrDataPtr whose data spans `nbytes`; `out`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_from_data_ptr(
    data_ptr: *mut TsrDataPtr,
    nbytes: usize,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_from_data_ptr", || {
        check_not_null(data_ptr, "data_ptr")?;
        check_not_null(out, "out")?;
        // SAFETY: data_ptr checked non-NULL and valid per the caller.
        let dp = unsafe { &mut *data_ptr };
        dp.device.to_core()?;
        crate::ensure!(
            !(dp.data.is_null() && nbytes > 0),
            InvalidArgument,
            "data_ptr->data is NULL but nbytes is {nbytes}: expected memory of that size"
        );
        // SAFETY: the caller hands over a TsrDataPtr following its contract.
        let core = unsafe { dp.take() };
        let s = Storage::from_data_ptr(core, nbytes);
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}

/// The size in bytes; 0 for NULL.
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_nbytes(s: *const TsrStorage) -> usize {
    getter("tsr_storage_nbytes", 0, || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        Ok(unsafe { storage_impl(s, "s")? }.nbytes())
    })
}

/// The data address (NULL for empty storages, meta storages and NULL).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_data(s: *const TsrStorage) -> *mut c_void {
    getter("tsr_storage_data", std::ptr::null_mut(), || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        Ok(unsafe { storage_impl(s, "s")? }.data())
    })
}

/// The device; {-1, -1} for NULL.
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_device(s: *const TsrStorage) -> TsrDevice {
    let bad = TsrDevice {
        device_type: -1,
        index: -1,
    };
    getter("tsr_storage_device", bad, || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        let s = unsafe { storage_impl(s, "s")? };
        Ok(TsrDevice::from_core(s.device()))
    })
}

/// Whether the storage may be resized; false for NULL.
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_resizable(s: *const TsrStorage) -> bool {
    getter("tsr_storage_resizable", false, || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        Ok(unsafe { storage_impl(s, "s")? }.resizable())
    })
}

/// A new reference to the allocator that made the data, or NULL (external
/// memory, or NULL `s`).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_allocator(s: *const TsrStorage) -> *mut TsrAllocator {
    getter("tsr_storage_allocator", std::ptr::null_mut(), || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        let st = unsafe { storage_impl(s, "s")? };
        Ok(st
            .allocator()
            .cloned()
            .map_or(std::ptr::null_mut(), allocator_handle))
    })
}

/// Resizes to `nbytes` (c10's rules): new memory from the storage's
/// allocator, the first min(old, new) bytes kept, the rest uninitialized.
/// Pointers to the old data become invalid. Not thread-safe: no other
/// thread may use the storage (or tensors on it) during the call. A
/// tensor left larger than its storage by a shrink is refused by every
/// call that reads or writes through it (TSR_ERR_SHAPE), and an iterator
/// built before the resize refuses to run (TSR_ERR_INVALID_ARGUMENT):
/// build it again.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY; TSR_ERR_NOT_RESIZABLE;
/// TSR_ERR_INVALID_ARGUMENT (a DLPack export of the storage is alive: its
/// consumer points at the current memory); TSR_ERR_OUT_OF_MEMORY
/// (the storage is unchanged).
///
/// # Safety
/// `s` NULL or a live handle, not used concurrently.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_resize(s: *mut TsrStorage, nbytes: usize) -> TsrStatus {
    guard("tsr_storage_resize", || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let st = unsafe { storage_ref(s, "s")? };
        // SAFETY: the header documents that the storage must not be used
        // concurrently during a resize (c10's rule).
        unsafe { st.resize(nbytes) }
    })
}

/// Sets every byte to `byte` (CPU storages).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY; TSR_ERR_UNSUPPORTED (not
/// on the CPU).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_fill(s: *mut TsrStorage, byte: u8) -> TsrStatus {
    guard("tsr_storage_fill", || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        unsafe { storage_impl(s, "s")? }.fill(byte)
    })
}

/// Copies every byte of `src` into `dst`; both must have the same nbytes.
/// Copies to or from a device go through the device allocator's copy
/// function.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY (dst); TSR_ERR_SHAPE (sizes
/// differ); the
/// allocator's copy error.
///
/// # Safety
/// `dst`, `src` NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_copy(
    dst: *mut TsrStorage,
    src: *const TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_copy", || {
        // SAFETY: `dst` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let (d, s) = unsafe { (storage_ref(dst, "dst")?, storage_ref(src, "src")?) };
        d.copy_from(&s)
    })
}

/// A new storage on the same device, from the same allocator, holding a
/// copy of the bytes; a new reference is written to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_OUT_OF_MEMORY.
///
/// # Safety
/// `s` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_clone(
    s: *const TsrStorage,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_clone", || {
        check_not_null(out, "out")?;
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let c = unsafe { storage_ref(s, "s")? }.clone_storage()?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(c)) };
        Ok(())
    })
}

/// Replaces the storage's data with external memory (c10's
/// UniqueStorageShareExternalPointer): only when `s` is the only strong
/// reference. `*data_ptr` is consumed (zeroed) on success; the old data is
/// freed; the storage becomes non-resizable without allocator.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY; TSR_ERR_INVALID_ARGUMENT (the storage has
/// other strong references, an invalid device, or NULL data with nbytes >
/// 0). On error `*data_ptr` is untouched.
///
/// # Safety
/// `s` NULL or a live handle not used concurrently; `data_ptr` NULL or a
/// valid TsrDataPtr spanning `nbytes`.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_share_external(
    s: *mut TsrStorage,
    data_ptr: *mut TsrDataPtr,
    nbytes: usize,
) -> TsrStatus {
    guard("tsr_storage_share_external", || {
        check_not_null(data_ptr, "data_ptr")?;
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        let st = unsafe { storage_impl(s, "s")? };
        st.check_writable("sharing an external pointer")?;
        // SAFETY: storage_impl above checked s non-NULL with a live block.
        let n = unsafe { handle::counts(s).0 };
        crate::ensure!(
            n == 1,
            InvalidArgument,
            "the storage has {n} strong references: sharing an external pointer needs it uniquely owned"
        );
        // SAFETY: data_ptr checked non-NULL.
        let dp = unsafe { &mut *data_ptr };
        dp.device.to_core()?;
        crate::ensure!(
            !(dp.data.is_null() && nbytes > 0),
            InvalidArgument,
            "data_ptr->data is NULL but nbytes is {nbytes}: expected memory of that size"
        );
        // SAFETY: the caller hands over a valid TsrDataPtr.
        let core = unsafe { dp.take() };
        // SAFETY: the header documents no concurrent use during the call;
        // uniqueness and writability were checked above.
        unsafe { st.replace_data(core, nbytes) }
    })
}
