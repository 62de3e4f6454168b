//! Tensor views and copies at the ABI. Every function writes a NEW
//! reference to `*out`; views share the input's storage and version
//! counter. Dims may be negative and wrap as in c10; errors name the dim
//! and the valid range.

use super::call::{format_arg, i64_slice, view_op};
use super::tensor::TsrTensor;
use super::types::*;
use crate::tensor::MemoryFormat;

/// A view with explicit sizes, strides (elements) and storage offset;
/// bounds-checked against the storage.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_SHAPE (out of bounds, lengths);
/// TSR_ERR_INVALID_ARGUMENT (negative strides or offset).
///
/// # Safety
/// `t` NULL or live; arrays readable for `ndim` values; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_as_strided(
    t: *const TsrTensor,
    ndim: i64,
    sizes: *const i64,
    strides: *const i64,
    storage_offset: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_as_strided", t, out, |x| {
            let sizes = i64_slice(sizes, ndim, "sizes")?;
            let strides = i64_slice(strides, ndim, "strides")?;
            x.as_strided(sizes, strides, storage_offset)
        })
    }
}

/// The same elements with a new shape, without copying; one size may be
/// -1. Errors: TSR_ERR_SHAPE when the shape does not match the number of
/// elements ("shape [3, 5] is invalid for input of size 16") or the strides
/// do not allow a view (use tsr_tensor_reshape).
///
/// # Safety
/// `t` NULL or live; `sizes` readable for `ndim` values; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_view(
    t: *const TsrTensor,
    ndim: i64,
    sizes: *const i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_view", t, out, |x| {
            x.view(i64_slice(sizes, ndim, "sizes")?)
        })
    }
}

/// A view with the new shape when the strides allow it, else a contiguous
/// copy (new storage) with that shape; one size may be -1.
///
/// # Safety
/// As tsr_tensor_view.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_reshape(
    t: *const TsrTensor,
    ndim: i64,
    sizes: *const i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_reshape", t, out, |x| {
            x.reshape(i64_slice(sizes, ndim, "sizes")?)
        })
    }
}

/// Reorders dims: dim i of the result is dim dims[i] of the input. `ndim`
/// must equal the tensor's number of dims and dims must not repeat.
///
/// # Safety
/// `t` NULL or live; `dims` readable for `ndim` values; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_permute(
    t: *const TsrTensor,
    ndim: i64,
    dims: *const i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_permute", t, out, |x| {
            x.permute(i64_slice(dims, ndim, "dims")?)
        })
    }
}

/// Swaps two dims.
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_transpose(
    t: *const TsrTensor,
    dim0: i64,
    dim1: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe { view_op("tsr_tensor_transpose", t, out, |x| x.transpose(dim0, dim1)) }
}

/// Broadcasts to `sizes` without copying: size-1 dims and new leading dims
/// get stride 0; -1 keeps a size. Errors: TSR_ERR_SHAPE naming the target
/// size, the existing size and the dim.
///
/// # Safety
/// `t` NULL or live; `sizes` readable for `ndim` values; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_expand(
    t: *const TsrTensor,
    ndim: i64,
    sizes: *const i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_expand", t, out, |x| {
            x.expand(i64_slice(sizes, ndim, "sizes")?)
        })
    }
}

/// Elements start..start+length of `dim` (start may be negative).
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_narrow(
    t: *const TsrTensor,
    dim: i64,
    start: i64,
    length: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_narrow", t, out, |x| {
            x.narrow(dim, start, length)
        })
    }
}

/// Index `index` of `dim`, removing the dim (index may be negative).
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_select(
    t: *const TsrTensor,
    dim: i64,
    index: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe { view_op("tsr_tensor_select", t, out, |x| x.select(dim, index)) }
}

/// Removes `dim` if its size is 1, else returns an unchanged view.
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_squeeze(
    t: *const TsrTensor,
    dim: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe { view_op("tsr_tensor_squeeze", t, out, |x| x.squeeze(dim)) }
}

/// Removes every size-1 dim.
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_squeeze_all(
    t: *const TsrTensor,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe { view_op("tsr_tensor_squeeze_all", t, out, |x| x.squeeze_all()) }
}

/// Inserts a size-1 dim at `dim`, in [-(ndim+1), ndim].
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_unsqueeze(
    t: *const TsrTensor,
    dim: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe { view_op("tsr_tensor_unsqueeze", t, out, |x| x.unsqueeze(dim)) }
}

/// Merges dims start_dim..=end_dim into one (a view when possible, else a
/// copy, as reshape).
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_flatten(
    t: *const TsrTensor,
    start_dim: i64,
    end_dim: i64,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_flatten", t, out, |x| {
            x.flatten(start_dim, end_dim)
        })
    }
}

/// `t` itself (a new reference) if it is contiguous in `format`, else a
/// copy laid out in `format`.
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_contiguous(
    t: *const TsrTensor,
    format: TsrMemoryFormat,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_contiguous", t, out, |x| {
            x.contiguous(format_arg(format)?)
        })
    }
}

/// A copy with its own storage that keeps `t`'s strides when t is dense
/// (c10's clone with preserve_format), else laid out contiguously or
/// channels-last as t suggests.
///
/// # Safety
/// `t` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_clone(
    t: *const TsrTensor,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); view_op checks each for NULL and liveness.
    unsafe {
        view_op("tsr_tensor_clone", t, out, |x| {
            x.clone_tensor(MemoryFormat::Preserve)
        })
    }
}
