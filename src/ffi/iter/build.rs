//! Building iterators at the ABI: tsr_iter_build, the c10 presets
//! (binary, comparison, unary, nullary, reduce) and tsr_iter_free.

use super::*;

/// Builds an iterator from `config` (which stays usable and must still be
/// freed) and writes it to `*out`: broadcast shape, common dtype and
/// device, overlap checks, allocated outputs, reordered and coalesced dims.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY (an output on a read-only
/// storage); TSR_ERR_SHAPE (not broadcastable, output
/// of the wrong shape); TSR_ERR_DTYPE (dtype mismatch naming both dtypes,
/// unsafe cast); TSR_ERR_DEVICE; TSR_ERR_OVERLAP; TSR_ERR_NOT_RESIZABLE;
/// TSR_ERR_INVALID_ARGUMENT (invalid flag combination).
///
/// # Safety
/// `config` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_build(
    config: *mut TsrIterConfig,
    out: *mut *mut TsrIter,
) -> TsrStatus {
    guard("tsr_iter_build", || {
        check_not_null(out, "out")?;
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let it = unsafe { config_mut(config)? }.build_boxed_from()?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, box_into(it)) };
        Ok(())
    })
}

/// Builds c10's binary-op iterator: inputs promoted to their common
/// dtype, the output (NULL: allocated) receiving it with a safe cast,
/// 0-dim CPU inputs allowed.
///
/// # Safety
/// Handles NULL (out_or_null only) or live; `it` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_binary_op(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out_or_null` is NULL or a live TsrTensor handle (the header's
    // contract, ffi/handle.rs); NULL means none; otherwise checked live.
    unsafe {
        preset("tsr_iter_binary_op", it, || {
            let out = optional_tensor(out_or_null, "out")?;
            let mut config = IterConfig::new();
            config.set_up_binary_op(
                out.as_deref(),
                &*tensor_view(a, "a")?,
                &*tensor_view(b, "b")?,
            )?;
            config.build_boxed()
        })
    }
}

/// As tsr_iter_binary_op, with integer inputs computed in Float.
///
/// # Safety
/// As tsr_iter_binary_op.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_binary_float_op(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out_or_null` is NULL or a live TsrTensor handle (the header's
    // contract, ffi/handle.rs); NULL means none; otherwise checked live.
    unsafe {
        preset("tsr_iter_binary_float_op", it, || {
            let out = optional_tensor(out_or_null, "out")?;
            let mut config = IterConfig::new();
            config
                .set_up_binary_op(
                    out.as_deref(),
                    &*tensor_view(a, "a")?,
                    &*tensor_view(b, "b")?,
                )?
                .promote_integer_inputs_to_float(true);
            config.build_boxed()
        })
    }
}

/// Builds c10's comparison iterator: inputs promoted; a NULL output is
/// allocated as Bool.
///
/// # Safety
/// As tsr_iter_binary_op.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_comparison_op(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out_or_null` is NULL or a live TsrTensor handle (the header's
    // contract, ffi/handle.rs); NULL means none; otherwise checked live.
    unsafe {
        preset("tsr_iter_comparison_op", it, || {
            let out = optional_tensor(out_or_null, "out")?;
            IterConfig::comparison_op(
                out.as_deref(),
                &*tensor_view(a, "a")?,
                &*tensor_view(b, "b")?,
            )?
            .build_boxed()
        })
    }
}

/// Builds c10's unary-op iterator (same dtype in and out).
///
/// # Safety
/// Handles NULL (out_or_null only) or live; `it` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_unary_op(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out_or_null` is NULL or a live TsrTensor handle (the header's
    // contract, ffi/handle.rs); NULL means none; otherwise checked live.
    unsafe {
        preset("tsr_iter_unary_op", it, || {
            let out = optional_tensor(out_or_null, "out")?;
            IterConfig::unary_op(out.as_deref(), &*tensor_view(a, "a")?)?.build_boxed()
        })
    }
}

/// Builds c10's unary-float-op iterator (integers computed in Float).
///
/// # Safety
/// As tsr_iter_unary_op.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_unary_float_op(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out_or_null` is NULL or a live TsrTensor handle (the header's
    // contract, ffi/handle.rs); NULL means none; otherwise checked live.
    unsafe {
        preset("tsr_iter_unary_float_op", it, || {
            let out = optional_tensor(out_or_null, "out")?;
            IterConfig::unary_float_op(out.as_deref(), &*tensor_view(a, "a")?)?.build_boxed()
        })
    }
}

/// Builds an iterator over one output and no input (fills): the output is
/// not resized.
///
/// # Safety
/// `out` NULL or live; `it` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_nullary_op(
    out: *mut TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out` is NULL or a live TsrTensor handle (the header's contract,
    // ffi/handle.rs); tensor_view checks NULL and liveness.
    unsafe {
        preset("tsr_iter_nullary_op", it, || {
            IterConfig::nullary_op(&*tensor_view(out, "out")?)?.build_boxed()
        })
    }
}

/// Builds a reduction of `a` into `out`, which must have size 1 along
/// every reduced dim (keepdim shape).
///
/// # Safety
/// Handles NULL or live; `it` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_reduce_op(
    out: *mut TsrTensor,
    a: *const TsrTensor,
    it: *mut *mut TsrIter,
) -> TsrStatus {
    // SAFETY: `out` is NULL or a live TsrTensor handle (the header's contract,
    // ffi/handle.rs); tensor_view checks NULL and liveness.
    unsafe {
        preset("tsr_iter_reduce_op", it, || {
            IterConfig::reduce_op(&*tensor_view(out, "out")?, &*tensor_view(a, "a")?)?.build_boxed()
        })
    }
}

/// Frees an iterator (and its references to operands). NULL does nothing.
///
/// # Safety
/// `it` NULL or a live iterator from a build, not used afterwards (never a
/// sub-iterator passed to a callback).
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_free(it: *mut TsrIter) {
    guard_value("tsr_iter_free", (), || {
        if !it.is_null() {
            // SAFETY: it is non-NULL, made by a build (box_into), and the
            // caller gives it up.
            crate::iterator::recycle(unsafe { box_from(it) });
        }
    })
}
