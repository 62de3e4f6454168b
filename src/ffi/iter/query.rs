//! Queries of a built iterator: shape, operands, strides, dtypes, data
//! pointers and layout facts.

use super::*;

/// Number of loop dims; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_ndim(it: *const TsrIter) -> i64 {
    getter("tsr_iter_ndim", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.ndim() as i64)
    })
}

/// The loop shape, innermost dim first (ndim values; borrowed, valid while
/// the iterator lives). NULL for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_shape(it: *const TsrIter) -> *const i64 {
    getter("tsr_iter_shape", std::ptr::null(), || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.shape().as_ptr())
    })
}

/// Number of elements visited; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_numel(it: *const TsrIter) -> i64 {
    getter("tsr_iter_numel", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.numel())
    })
}

/// Number of operands (outputs + inputs); -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_ntensors(it: *const TsrIter) -> i64 {
    getter("tsr_iter_ntensors", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.ntensors() as i64)
    })
}

/// Number of outputs; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_noutputs(it: *const TsrIter) -> i64 {
    getter("tsr_iter_noutputs", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.noutputs() as i64)
    })
}

/// Number of inputs; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_ninputs(it: *const TsrIter) -> i64 {
    getter("tsr_iter_ninputs", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.ninputs() as i64)
    })
}

/// Byte strides of operand `arg` per loop dim (ndim values, borrowed).
/// NULL for NULL or an operand out of range.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_strides(it: *const TsrIter, arg: i64) -> *const i64 {
    getter("tsr_iter_strides", std::ptr::null(), || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        Ok(it.strides(arg_index(it, arg)?).as_ptr())
    })
}

/// The dtype operand `arg` is iterated in; -1 for NULL or out of range.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_dtype(it: *const TsrIter, arg: i64) -> TsrDType {
    getter("tsr_iter_dtype", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        Ok(it.dtype(arg_index(it, arg)?).raw())
    })
}

/// The common dtype computed by the build; -1 when there is none (inputs
/// of different dtypes without promotion) or for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_common_dtype(it: *const TsrIter) -> TsrDType {
    getter("tsr_iter_common_dtype", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }
            .common_dtype()
            .map_or(-1, |d| d.raw()))
    })
}

/// The address of operand `arg`'s first visited element (NULL for an
/// empty iteration, NULL `it`, or out of range).
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_data_ptr(it: *const TsrIter, arg: i64) -> *mut c_void {
    getter("tsr_iter_data_ptr", std::ptr::null_mut(), || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        Ok(it.data_ptr(arg_index(it, arg)?) as *mut c_void)
    })
}

/// A new reference to output `i` as the caller sees it: the tensor given,
/// or the one the build allocated. NULL for NULL or out of range.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_output(it: *const TsrIter, i: i64) -> *mut TsrTensor {
    getter("tsr_iter_output", std::ptr::null_mut(), || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        crate::ensure!(
            i >= 0 && (i as usize) < it.noutputs(),
            InvalidArgument,
            "output {i} is out of range: the iterator has {} outputs",
            it.noutputs()
        );
        Ok(tensor_handle(it.output(i as usize)))
    })
}

/// Whether one loop dim is contiguous for every operand (or one element).
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_is_contiguous(it: *const TsrIter) -> bool {
    getter("tsr_iter_is_contiguous", false, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.is_contiguous())
    })
}

/// Whether the loop has a single dim.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_is_trivial_1d(it: *const TsrIter) -> bool {
    getter("tsr_iter_is_trivial_1d", false, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.is_trivial_1d())
    })
}

/// The number of output elements a reduction writes; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_num_output_elements(it: *const TsrIter) -> i64 {
    getter("tsr_iter_num_output_elements", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.num_output_elements())
    })
}

/// The number of leading loop dims along which output 0 does not move;
/// -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_num_reduce_dims(it: *const TsrIter) -> i64 {
    getter("tsr_iter_num_reduce_dims", -1, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.num_reduce_dims() as i64)
    })
}

/// Whether every operand's byte offsets and the element count fit in a
/// signed 32-bit integer.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_can_use_32bit_indexing(it: *const TsrIter) -> bool {
    getter("tsr_iter_can_use_32bit_indexing", false, || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        Ok(unsafe { iter_ref(it)? }.can_use_32bit_indexing())
    })
}
