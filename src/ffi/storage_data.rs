//! A storage's DataPtr (c10's storage.data_ptr() / set_data_ptr) and
//! read-only storages at the ABI.

use super::call::{check_not_null, getter, guard};
use super::storage::storage_impl;
use super::types::*;

/// Writes a borrowed view of the storage's data pointer to `*out` (c10's
/// `storage.data_ptr()`, a `const DataPtr&`): its data, ctx, deleter and
/// device. The view is not an owner: never pass it to tsr_data_ptr_free
/// or to a function that consumes a TsrDataPtr; it is valid while the
/// storage's data is (until its last strong reference goes, a resize, or
/// tsr_storage_set_data_ptr). With tsr_data_ptr_cast_context a plugin
/// gets the per-block context it gave its allocation back (tessera's
/// allocator statistics wrapper is seen through).
///
/// Errors: TSR_ERR_NULL_POINTER (s or out); TSR_ERR_DEAD_OBJECT. `*out`
/// is untouched on error.
///
/// # Safety
/// `s` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_data_ptr(
    s: *const TsrStorage,
    out: *mut TsrDataPtr,
) -> TsrStatus {
    guard("tsr_storage_data_ptr", || {
        check_not_null(out, "out")?;
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        let dp = unsafe { storage_impl(s, "s")? }.data_ptr();
        let view = TsrDataPtr {
            data: dp.get(),
            ctx: dp.context(),
            deleter: dp.deleter(),
            device: TsrDevice::from_core(dp.device()),
        };
        // SAFETY: out checked non-NULL.
        unsafe { out.write(view) };
        Ok(())
    })
}

/// Replaces the storage's data pointer (c10's StorageImpl::set_data_ptr
/// with set_nbytes): `*consumed` is moved in (zeroed on success) and the
/// storage's size becomes `nbytes`; every tensor on the storage sees the
/// new memory at once (their offsets are unchanged, so the new memory
/// must hold what they view). The old data pointer is written to
/// `*old_out`, which the caller then owns (free it once with
/// tsr_data_ptr_free), or freed now when `old_out` is NULL: either way
/// exactly once. The allocator and the resizable flag are kept (a later
/// resize frees the new memory through its deleter). Not thread-safe: no
/// other thread may use the storage or a tensor on it during the call.
///
/// Refused while a DLPack export of the storage (tsr_tensor_to_dlpack of
/// any tensor on it) is alive: its consumer points at the current memory,
/// which the swap would free (TSR_ERR_INVALID_ARGUMENT naming the number
/// of live exports; call their deleters first).
///
/// Errors: TSR_ERR_NULL_POINTER (s or consumed); TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_READ_ONLY (a read-only storage); TSR_ERR_INVALID_ARGUMENT (a
/// live DLPack export; an invalid device in *consumed or one other than
/// the storage's; NULL data with nbytes > 0). On error `*consumed` and
/// `*old_out` are untouched and the storage is unchanged.
///
/// # Safety
/// `s` NULL or a live handle, not used concurrently; `consumed` NULL or a
/// valid TsrDataPtr spanning `nbytes`; `old_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_set_data_ptr(
    s: *mut TsrStorage,
    consumed: *mut TsrDataPtr,
    nbytes: usize,
    old_out: *mut TsrDataPtr,
) -> TsrStatus {
    guard("tsr_storage_set_data_ptr", || {
        check_not_null(consumed, "consumed")?;
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        let st = unsafe { storage_impl(s, "s")? };
        // SAFETY: consumed checked non-NULL, valid per the caller.
        let dp = unsafe { &mut *consumed };
        dp.device.to_core()?;
        // SAFETY: the caller hands over a TsrDataPtr following its
        // contract; it is put back unchanged if the checks refuse it.
        let new = unsafe { dp.take() };
        if let Err(e) = st.check_set_data_ptr(&new, nbytes) {
            *dp = TsrDataPtr::from_core(new);
            return Err(e);
        }
        // SAFETY: the header documents no concurrent use during the call.
        let old = unsafe { st.set_data_ptr(new, nbytes) }?;
        if old_out.is_null() {
            drop(old);
        } else {
            // SAFETY: old_out checked non-NULL, writable per the caller.
            unsafe { old_out.write(TsrDataPtr::from_core(old)) };
        }
        Ok(())
    })
}

/// Makes the storage read-only, for good (there is no way back): every
/// write through tessera into it, or into any tensor on it, then fails
/// with TSR_ERR_READ_ONLY naming the function (fills, copies into it,
/// kernel and iterator outputs, resize, share_external, set_data_ptr).
/// Reading works as usual; the memory itself is not protected (a host
/// writing through tsr_storage_data bypasses the flag). DLPack exports
/// made from then on carry DLPACK_FLAG_BITMASK_READ_ONLY, and
/// tsr_storage_share_fd / tsr_storage_share_name, which would hand out
/// writable aliases, fail with TSR_ERR_READ_ONLY (descriptors and names
/// given out before stay writable in the processes holding them). Idempotent;
/// safe from any thread (a write already running finishes).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT.
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_make_read_only(s: *mut TsrStorage) -> TsrStatus {
    guard("tsr_storage_make_read_only", || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        unsafe { storage_impl(s, "s")? }.make_read_only();
        Ok(())
    })
}

/// Whether the storage is read-only (tsr_storage_make_read_only, a
/// TSR_FILE_READ_ONLY file, a DLPack import flagged read-only); false
/// for NULL (with a message).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_is_read_only(s: *const TsrStorage) -> bool {
    getter("tsr_storage_is_read_only", false, || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        Ok(unsafe { storage_impl(s, "s")? }.is_read_only())
    })
}
