//! The iterator at the ABI: the config builder (one setter per c10
//! option), build and the c10 presets, queries, and the loops that call a
//! C 2-D loop callback.

use super::call::{
    check_not_null, dtype_arg, getter, guard, guard_value, i64_slice, null_arg, optional_tensor,
    preset, set_flag, write_out,
};
use super::handle::{box_from, box_into, box_mut, box_ref, lend};
use super::tensor::{tensor_arg, tensor_handle, tensor_view, TsrTensor};
use super::types::*;
use crate::error::Result;
use crate::iterator::{IterConfig, TensorIterator};
use crate::tensor::Tensor;
use std::ffi::{c_char, c_void};

/// An iterator configuration (opaque, single owner: free it with
/// tsr_iter_config_free). Not thread-safe.
pub struct TsrIterConfig {
    _private: [u8; 0],
}

/// A built iterator (opaque, single owner: free it with tsr_iter_free).
/// Queries and loops may run from several threads at once.
pub struct TsrIter {
    _private: [u8; 0],
}

/// A 2-D loop body. `data[arg]` is the first element of operand arg
/// (outputs first); `strides` holds the dim-0 byte strides of every
/// operand, then the dim-1 byte strides; the body handles
/// `data[arg] + i*strides[arg] + j*strides[ntensors+arg]` for i < size0,
/// j < size1. It may change its copy of `data`. tsr_iter_for_each calls it
/// from several threads at once; it must not unwind (C++ exceptions).
pub type TsrLoop2d = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        data: *mut *mut c_char,
        strides: *const i64,
        size0: i64,
        size1: i64,
    ),
>;

/// A reduction loop body: as TsrLoop2d with the calling chunk's accumulator.
pub type TsrReduceLoop = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        acc: *mut c_void,
        data: *mut *mut c_char,
        strides: *const i64,
        size0: i64,
        size1: i64,
    ),
>;

/// Combines accumulator `other` into `acc`.
pub type TsrReduceCombine =
    Option<unsafe extern "C" fn(user: *mut c_void, acc: *mut c_void, other: *const c_void)>;

/// Called with a sub-iterator (borrowed for the call only; do not free it).
pub type TsrSubIterFn = Option<unsafe extern "C" fn(user: *mut c_void, sub: *mut TsrIter)>;

/// The config behind the `config` argument.
///
/// # Safety
/// `c` under the contract of ffi/handle.rs, not used elsewhere during the
/// call (configs are single-owner and not thread-safe).
unsafe fn config_mut<'a>(c: *mut TsrIterConfig) -> Result<&'a mut IterConfig> {
    // SAFETY: the contract above, passed on.
    unsafe { box_mut(c, "config") }
}

/// The iterator behind the `it` argument (owned or lent).
///
/// # Safety
/// `it` under the contract of ffi/handle.rs.
unsafe fn iter_ref<'a>(it: *const TsrIter) -> Result<&'a TensorIterator> {
    // SAFETY: the contract above, passed on.
    unsafe { box_ref(it, "it") }
}

fn arg_index(it: &TensorIterator, arg: i64) -> Result<usize> {
    crate::ensure!(
        arg >= 0 && (arg as usize) < it.ntensors(),
        InvalidArgument,
        "operand {arg} is out of range: the iterator has {} operands",
        it.ntensors()
    );
    Ok(arg as usize)
}

/// Creates an empty iterator config with c10's defaults (check_mem_overlap,
/// check_all_same_dtype, check_all_same_device, resize_outputs on).
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_new(out: *mut *mut TsrIterConfig) -> TsrStatus {
    guard("tsr_iter_config_new", || {
        check_not_null(out, "out")?;
        let c = box_into(Box::new(IterConfig::new()));
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, c) };
        Ok(())
    })
}

/// Frees a config (and its references to the tensors added). NULL does
/// nothing.
///
/// # Safety
/// `config` NULL or a live config, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_free(config: *mut TsrIterConfig) {
    guard_value("tsr_iter_config_free", (), || {
        if !config.is_null() {
            // SAFETY: config is non-NULL, made by tsr_iter_config_new
            // (box_into), and the caller gives it up.
            drop(unsafe { box_from(config) });
        }
    })
}

/// Adds an output (borrowed; the config keeps a reference), or NULL to
/// have the build allocate it. Every output must be added before the
/// first input.
///
/// Errors: TSR_ERR_NULL_POINTER (config); TSR_ERR_INVALID_ARGUMENT (an
/// input was already added, or 64 operands reached).
///
/// # Safety
/// `config` NULL or live; `tensor` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_add_output(
    config: *mut TsrIterConfig,
    tensor: *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_iter_config_add_output", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        // SAFETY: `tensor` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); NULL means none; otherwise checked live.
        let t = unsafe { optional_tensor(tensor, "tensor")? };
        c.add_output(t.map(|t| Tensor::clone(&t)))?;
        Ok(())
    })
}

/// Adds an input (borrowed; the config keeps a reference).
///
/// Errors: TSR_ERR_NULL_POINTER (config or tensor); TSR_ERR_INVALID_ARGUMENT
/// (64 operands reached).
///
/// # Safety
/// `config` NULL or live; `tensor` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_add_input(
    config: *mut TsrIterConfig,
    tensor: *const TsrTensor,
) -> TsrStatus {
    guard("tsr_iter_config_add_input", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        // SAFETY: `tensor` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_arg checks NULL and liveness.
        let t = unsafe { tensor_arg(tensor, "tensor")? };
        c.add_input(t)?;
        Ok(())
    })
}

/// Adds a number as an input: a 0-dim CPU tensor that promotes as a
/// wrapped scalar (an Int tensor plus 2.5 computes in Float).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_add_input_scalar(
    config: *mut TsrIterConfig,
    value: TsrScalar,
) -> TsrStatus {
    guard("tsr_iter_config_add_input_scalar", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        c.add_input_scalar(value.to_core()?)?;
        Ok(())
    })
}

/// Refuse outputs that write one location through several elements, and
/// inputs that partially overlap an output (default on). Errors:
/// TSR_ERR_NULL_POINTER.
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_check_mem_overlap(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_check_mem_overlap", config, |c| {
            c.check_mem_overlap(on);
        })
    }
}

/// Accept 0-dim CPU inputs when the other operands are on a device
/// (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_allow_cpu_scalars(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_allow_cpu_scalars", config, |c| {
            c.allow_cpu_scalars(on);
        })
    }
}

/// Build a reduction: outputs have size 1 (or stride 0) along reduced
/// dims, which the loop visits first (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_is_reduction(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_is_reduction", config, |c| {
            c.is_reduction(on);
        })
    }
}

/// Resize defined outputs whose shape differs from the broadcast shape
/// (default on). A resized output must not be used by other threads
/// during the build.
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_resize_outputs(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_resize_outputs", config, |c| {
            c.resize_outputs(on);
        })
    }
}

/// Require all operands to have one dtype (default on).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_check_all_same_dtype(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_check_all_same_dtype", config, |c| {
            c.check_all_same_dtype(on);
        })
    }
}

/// Require all operands on one device (default on).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_check_all_same_device(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_check_all_same_device", config, |c| {
            c.check_all_same_device(on);
        })
    }
}

/// Refuse outputs the common dtype cannot be safely cast to (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_enforce_safe_casting_to_output(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag(
            "tsr_iter_config_enforce_safe_casting_to_output",
            config,
            |c| {
                c.enforce_safe_casting_to_output(on);
            },
        )
    }
}

/// Keep the tensors' dim order instead of reordering by strides (default
/// off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_enforce_linear_iteration(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_enforce_linear_iteration", config, |c| {
            c.enforce_linear_iteration(on);
        })
    }
}

/// Compute in the inputs' common dtype (c10's result_type), converting
/// inputs on the CPU; turns check_all_same_dtype off (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_promote_inputs_to_common_dtype(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag(
            "tsr_iter_config_promote_inputs_to_common_dtype",
            config,
            |c| {
                c.promote_inputs_to_common_dtype(on);
            },
        )
    }
}

/// Compute integer (and bool) common dtypes in Float; needs
/// promote_inputs_to_common_dtype, checked at build (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_promote_integer_inputs_to_float(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag(
            "tsr_iter_config_promote_integer_inputs_to_float",
            config,
            |c| {
                c.promote_integer_inputs_to_float(on);
            },
        )
    }
}

/// Write the common dtype into outputs of other dtypes through CPU
/// temporaries copied back by tsr_iter_for_each / tsr_iter_cast_outputs;
/// turns check_all_same_dtype off (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_cast_common_dtype_to_outputs(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag(
            "tsr_iter_config_cast_common_dtype_to_outputs",
            config,
            |c| {
                c.cast_common_dtype_to_outputs(on);
            },
        )
    }
}

/// tessera's own (NumPy's COPY_IF_OVERLAP): copy an input that partially
/// overlaps an output to a temporary instead of refusing (default off).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_resolve_overlap_by_copy(
    config: *mut TsrIterConfig,
    on: bool,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); set_flag checks each for NULL and liveness.
    unsafe {
        set_flag("tsr_iter_config_resolve_overlap_by_copy", config, |c| {
            c.resolve_overlap_by_copy(on);
        })
    }
}

/// Fixes the dtype of allocated outputs; the build refuses it unless
/// check_all_same_dtype is off.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (dtype number).
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_declare_static_dtype(
    config: *mut TsrIterConfig,
    dtype: TsrDType,
) -> TsrStatus {
    guard("tsr_iter_config_declare_static_dtype", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        c.declare_static_dtype(dtype_arg(dtype)?);
        Ok(())
    })
}

/// Fixes the device of allocated outputs.
///
/// # Safety
/// `config` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_declare_static_device(
    config: *mut TsrIterConfig,
    device: TsrDevice,
) -> TsrStatus {
    guard("tsr_iter_config_declare_static_device", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        c.declare_static_device(device.to_core()?);
        Ok(())
    })
}

/// Fixes the loop shape instead of broadcasting; the build refuses it
/// unless resize_outputs is off.
///
/// # Safety
/// `config` NULL or live; `shape` readable for `ndim` values.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_declare_static_shape(
    config: *mut TsrIterConfig,
    ndim: i64,
    shape: *const i64,
) -> TsrStatus {
    guard("tsr_iter_config_declare_static_shape", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        // SAFETY: the header requires `shape` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        c.declare_static_shape(unsafe { i64_slice(shape, ndim, "shape")? });
        Ok(())
    })
}

/// Builds an iterator from `config` (which stays usable and must still be
/// freed) and writes it to `*out`: broadcast shape, common dtype and
/// device, overlap checks, allocated outputs, reordered and coalesced dims.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_SHAPE (not broadcastable, output
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
        let mut copy = unsafe { config_mut(config)? }.clone();
        let it = copy.build_boxed_taking_operands()?;
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
            config.build_boxed_taking_operands()
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
            config.build_boxed_taking_operands()
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

/// Number of loop dims; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_ndim(it: *const TsrIter) -> i64 {
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_ndim", -1, || {
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
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_shape", std::ptr::null(), || {
        Ok(unsafe { iter_ref(it)? }.shape().as_ptr())
    })
}

/// Number of elements visited; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_numel(it: *const TsrIter) -> i64 {
    // SAFETY: `it` is NULL or a live TsrIter (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter(
        "tsr_iter_numel",
        -1,
        || Ok(unsafe { iter_ref(it)? }.numel()),
    )
}

/// Number of operands (outputs + inputs); -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_ntensors(it: *const TsrIter) -> i64 {
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_ntensors", -1, || {
        Ok(unsafe { iter_ref(it)? }.ntensors() as i64)
    })
}

/// Number of outputs; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_noutputs(it: *const TsrIter) -> i64 {
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_noutputs", -1, || {
        Ok(unsafe { iter_ref(it)? }.noutputs() as i64)
    })
}

/// Number of inputs; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_ninputs(it: *const TsrIter) -> i64 {
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_ninputs", -1, || {
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
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_is_contiguous", false, || {
        Ok(unsafe { iter_ref(it)? }.is_contiguous())
    })
}

/// Whether the loop has a single dim.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_is_trivial_1d(it: *const TsrIter) -> bool {
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_is_trivial_1d", false, || {
        Ok(unsafe { iter_ref(it)? }.is_trivial_1d())
    })
}

/// The number of output elements a reduction writes; -1 for NULL.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_num_output_elements(it: *const TsrIter) -> i64 {
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_num_output_elements", -1, || {
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
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_num_reduce_dims", -1, || {
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
    // SAFETY: `it` is NULL or a live TsrIter handle (the header's contract,
    // ffi/handle.rs); iter_ref checks NULL.
    getter("tsr_iter_can_use_32bit_indexing", false, || {
        Ok(unsafe { iter_ref(it)? }.can_use_32bit_indexing())
    })
}

/// Adapts a C loop and its user pointer into a core loop body.
#[derive(Clone, Copy)]
struct CLoop {
    f: unsafe extern "C" fn(*mut c_void, *mut *mut c_char, *const i64, i64, i64),
    user: *mut c_void,
}
// SAFETY: the TsrLoop2d contract says the body may be called from several
// threads at once with the same user pointer.
unsafe impl Sync for CLoop {}
// SAFETY: as Sync.
unsafe impl Send for CLoop {}

impl CLoop {
    fn call(&self, data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64) {
        // SAFETY: the iterator hands the body pointers and strides that stay
        // inside every operand for i < n0, j < n1; the body follows the
        // TsrLoop2d contract.
        unsafe {
            (self.f)(
                self.user,
                data.as_mut_ptr() as *mut *mut c_char,
                strides.as_ptr(),
                n0,
                n1,
            )
        }
    }
}

/// Runs `loop` over every element, split across the thread pool
/// (tsr_set_num_threads) in chunks of at least `grain_size` elements (<= 0:
/// 32768; iterations below it run on the calling thread), then writes
/// outputs computed in cast temporaries back to the caller's tensors.
///
/// Errors: TSR_ERR_NULL_POINTER (it or loop).
///
/// # Safety
/// `it` NULL or live; `loop` follows the TsrLoop2d contract.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_for_each(
    it: *mut TsrIter,
    loop_: TsrLoop2d,
    user: *mut c_void,
    grain_size: i64,
) -> TsrStatus {
    guard("tsr_iter_for_each", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        let l = CLoop { f, user };
        it.for_each(
            &|d: &mut [*mut u8], s: &[i64], n0, n1| l.call(d, s, n0, n1),
            grain_size,
        );
        it.cast_outputs()
    })
}

/// Runs `loop` over the flattened elements [begin, end) on the calling
/// thread (end is clamped to numel). Does not write cast temporaries back:
/// call tsr_iter_cast_outputs when every range is done.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (begin < 0).
///
/// # Safety
/// As tsr_iter_for_each.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_serial_for_each(
    it: *mut TsrIter,
    loop_: TsrLoop2d,
    user: *mut c_void,
    begin: i64,
    end: i64,
) -> TsrStatus {
    guard("tsr_iter_serial_for_each", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        crate::ensure!(
            begin >= 0,
            InvalidArgument,
            "begin {begin} is negative: expected 0 <= begin <= end"
        );
        let l = CLoop { f, user };
        it.serial_for_each(
            &|d: &mut [*mut u8], s: &[i64], n0, n1| l.call(d, s, n0, n1),
            begin,
            end,
        );
        Ok(())
    })
}

/// Copies outputs that were computed in a temporary of the common dtype
/// into the caller's tensors (with conversion). tsr_iter_for_each does this
/// itself.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_cast_outputs(it: *mut TsrIter) -> TsrStatus {
    guard("tsr_iter_cast_outputs", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        unsafe { iter_ref(it)? }.cast_outputs()
    })
}

/// A parallel reduction with one accumulator per chunk: `*acc` (acc_size
/// bytes) holds the identity on entry; every chunk starts from a copy of
/// it (16-byte aligned, as max_align_t), runs `loop` with its own accumulator over its elements, and the
/// chunk accumulators are combined into `*acc` in chunk order (a fixed
/// thread count gives a reproducible result). Chunks hold at least
/// `grain_size` elements (<= 0: 32768).
///
/// Errors: TSR_ERR_NULL_POINTER (it, loop, combine, or acc with acc_size >
/// 0); TSR_ERR_INVALID_ARGUMENT (acc_size > 4096).
///
/// # Safety
/// `acc` readable and writable for acc_size bytes; callbacks follow the
/// TsrLoop2d contract.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_parallel_reduce(
    it: *mut TsrIter,
    loop_: TsrReduceLoop,
    combine: TsrReduceCombine,
    user: *mut c_void,
    acc: *mut c_void,
    acc_size: usize,
    grain_size: i64,
) -> TsrStatus {
    guard("tsr_iter_parallel_reduce", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        let Some(comb) = combine else {
            return Err(null_arg("combine"));
        };
        crate::ensure!(
            acc_size <= 4096,
            InvalidArgument,
            "acc_size {acc_size} is too large: expected at most 4096 bytes"
        );
        if acc_size > 0 {
            check_not_null(acc, "acc")?;
        }
        let identity = AccBuf::from_raw(acc as *const u8, acc_size);
        let cb = CReduce { f, comb, user };
        let result = it.parallel_reduce(
            grain_size,
            || identity.clone(),
            |a: &mut AccBuf, d: &mut [*mut u8], s: &[i64], n0, n1| {
                cb.run(a.bytes_mut(), d, s, n0, n1)
            },
            |mut a, b| {
                cb.combine(a.bytes_mut(), b.bytes());
                a
            },
        );
        // parallel_reduce folded the chunks, in order, into a copy of the
        // identity.
        // SAFETY: acc writable for acc_size bytes.
        unsafe { std::ptr::copy_nonoverlapping(result.bytes().as_ptr(), acc as *mut u8, acc_size) };
        Ok(())
    })
}

/// An accumulator buffer aligned to 16 bytes (the alignment of
/// max_align_t on the platforms tessera supports).
#[derive(Clone)]
struct AccBuf {
    words: Vec<u128>,
    len: usize,
}

impl AccBuf {
    /// Copies `len` bytes from `p` (NULL allowed when len is 0).
    fn from_raw(p: *const u8, len: usize) -> AccBuf {
        let mut buf = AccBuf {
            words: vec![0u128; len.div_ceil(16)],
            len,
        };
        if len > 0 {
            // SAFETY: the caller of tsr_iter_parallel_reduce guarantees p is
            // readable for len bytes; the buffer holds at least len bytes.
            unsafe { std::ptr::copy_nonoverlapping(p, buf.words.as_mut_ptr() as *mut u8, len) };
        }
        buf
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the words hold at least len initialized bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as bytes(), exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, self.len) }
    }
}

#[derive(Clone, Copy)]
struct CReduce {
    f: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_char, *const i64, i64, i64),
    comb: unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void),
    user: *mut c_void,
}
// SAFETY: the callbacks are documented as callable from several threads.
unsafe impl Sync for CReduce {}
// SAFETY: as Sync.
unsafe impl Send for CReduce {}

impl CReduce {
    fn run(&self, acc: &mut [u8], data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64) {
        // SAFETY: as CLoop::call; acc is this chunk's own buffer.
        unsafe {
            (self.f)(
                self.user,
                acc.as_mut_ptr() as *mut c_void,
                data.as_mut_ptr() as *mut *mut c_char,
                strides.as_ptr(),
                n0,
                n1,
            )
        }
    }

    fn combine(&self, acc: &mut [u8], other: &[u8]) {
        // SAFETY: both buffers hold acc_size bytes.
        unsafe {
            (self.comb)(
                self.user,
                acc.as_mut_ptr() as *mut c_void,
                other.as_ptr() as *const c_void,
            )
        }
    }
}

/// Calls `fn` once per group of elements that reduce into the same output
/// elements, with a sub-iterator whose non-reduced dims are fixed
/// (borrowed: valid during the call only, never freed by the callee); run
/// tsr_iter_serial_for_each on it. With `parallelize`, large reductions
/// split over threads, calling `fn` concurrently.
///
/// # Safety
/// `it` NULL or live; `fn` callable from several threads when parallelize.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_foreach_reduced_elt(
    it: *mut TsrIter,
    fn_: TsrSubIterFn,
    user: *mut c_void,
    parallelize: bool,
) -> TsrStatus {
    guard("tsr_iter_foreach_reduced_elt", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        let Some(f) = fn_ else {
            return Err(null_arg("fn"));
        };
        crate::ensure!(
            it.noutputs() >= 1,
            InvalidArgument,
            "the iterator has no output to reduce into"
        );
        let cb = CSub { f, user };
        it.foreach_reduced_elt(&|sub: &TensorIterator| cb.call(sub), parallelize);
        Ok(())
    })
}

/// Calls `fn` with each piece of the iteration that is addressable with
/// 32-bit offsets (halving the dim with the largest extent until every
/// piece fits), in order; a piece is borrowed for the call only.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_for_each_32bit_piece(
    it: *mut TsrIter,
    fn_: TsrSubIterFn,
    user: *mut c_void,
) -> TsrStatus {
    guard("tsr_iter_for_each_32bit_piece", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_ref checks NULL.
        let it = unsafe { iter_ref(it)? };
        let Some(f) = fn_ else {
            return Err(null_arg("fn"));
        };
        let cb = CSub { f, user };
        it.for_each_32bit_piece(&mut |piece: &TensorIterator| cb.call(piece));
        Ok(())
    })
}

#[derive(Clone, Copy)]
struct CSub {
    f: unsafe extern "C" fn(*mut c_void, *mut TsrIter),
    user: *mut c_void,
}
// SAFETY: documented as callable from several threads when parallel.
unsafe impl Sync for CSub {}
// SAFETY: as Sync.
unsafe impl Send for CSub {}

impl CSub {
    fn call(&self, sub: &TensorIterator) {
        // SAFETY: the sub-iterator lives for the call; the callee only
        // reads it (queries, serial loops) and never frees it.
        unsafe { (self.f)(self.user, lend(sub)) }
    }
}
