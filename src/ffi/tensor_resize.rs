//! A tensor's storage, sizes and strides changed in place at the ABI:
//! tsr_tensor_set and tsr_tensor_resize (c10's `set_` and `resize_`, over
//! the one path of src/tensor/resize.rs).

use super::call::{format_arg, guard, i64_slice};
use super::storage::{storage_ref, TsrStorage};
use super::tensor::tensor_ref;
use super::types::*;

/// Points `t` at `storage` (borrowed) with a new offset, sizes and strides
/// (NULL: contiguous), in place (c10's set_); the dtype stays. A
/// resizable storage smaller than the bytes the view spans grows to them
/// first, as in c10 (its first bytes kept, the rest uninitialized; never
/// shrunk): pointers into its old memory become invalid. Every other
/// handle to `t` sees the change; views made earlier keep the old storage.
/// Bumps the version. Not thread-safe: no other thread may use `t`
/// during the call, nor `storage` when it grows; pointers from
/// tsr_tensor_sizes/strides become invalid.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_SHAPE (out of bounds of a storage
/// that is not resizable: external memory, a file-backed or shared-memory
/// storage, one made with resizable false); TSR_ERR_INVALID_ARGUMENT
/// (negative offset or strides; a growth while a DLPack export of the
/// storage is alive); TSR_ERR_READ_ONLY (a growth of a read-only
/// storage); TSR_ERR_OUT_OF_MEMORY. On error `t` and `storage` are
/// unchanged.
///
/// # Safety
/// Handles NULL or live; arrays readable for `ndim` values.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_set(
    t: *mut TsrTensor,
    storage: *mut TsrStorage,
    storage_offset: i64,
    ndim: i64,
    sizes: *const i64,
    strides: *const i64,
) -> TsrStatus {
    guard("tsr_tensor_set", || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_ref checks NULL and liveness.
        let tensor = unsafe { tensor_ref(t, "t")? };
        // SAFETY: `storage` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let s = unsafe { storage_ref(storage, "storage")? };
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        let strides = if strides.is_null() {
            None
        } else {
            // SAFETY: the header requires `strides` readable for `ndim` values
            // when non-NULL; i64_slice checks the length and NULL.
            Some(unsafe { i64_slice(strides, ndim, "strides")? })
        };
        // SAFETY: the header documents that t, and the storage when it
        // grows, must not be used by other threads during the call.
        unsafe { tensor.set_(&s, storage_offset, sizes, strides) }
    })
}

/// Gives `t` the `ndim` sizes with contiguous strides in `format`
/// (TSR_CONTIGUOUS; TSR_CHANNELS_LAST for 4 dims, TSR_CHANNELS_LAST_3D for
/// 5), in place, keeping its storage offset (c10's resize_). When its
/// storage holds fewer than (offset + numel) * itemsize bytes, a
/// resizable storage grows to that (its first bytes kept, the rest
/// uninitialized; pointers into the old memory become invalid, for every
/// tensor on the storage); the storage never shrinks. Bumps the version.
/// Other tensors on the storage (views) keep their sizes. The same
/// resize gives an out= kernel's or iterator's output its shape. Not
/// thread-safe: no other thread may use `t` or its storage during the
/// call; pointers from tsr_tensor_sizes/strides become invalid.
///
/// Errors: TSR_ERR_NULL_POINTER (t, or sizes with ndim > 0);
/// TSR_ERR_SHAPE (negative sizes, ndim > TSR_MAX_DIMS, a channels-last
/// format for another number of dims); TSR_ERR_INVALID_ARGUMENT (a
/// negative ndim; an unknown format, or TSR_PRESERVE, which c10 refuses
/// too; a growth while a DLPack export of the storage is alive);
/// TSR_ERR_NOT_RESIZABLE (the storage must grow but is not resizable:
/// external memory, a file-backed or shared-memory storage, one made with
/// resizable false); TSR_ERR_READ_ONLY (a growth of a read-only storage);
/// TSR_ERR_OUT_OF_MEMORY. On error `t` and its storage are unchanged.
///
/// # Safety
/// `t` NULL or a live handle; `sizes` NULL or readable for `ndim` values.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_resize(
    t: *mut TsrTensor,
    ndim: i64,
    sizes: *const i64,
    format: TsrMemoryFormat,
) -> TsrStatus {
    guard("tsr_tensor_resize", || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_ref checks NULL and liveness.
        let tensor = unsafe { tensor_ref(t, "t")? };
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        let format = format_arg(format)?;
        // SAFETY: the header documents that neither t nor its storage may
        // be used by other threads during the call.
        unsafe { tensor.resize_(sizes, format) }
    })
}
