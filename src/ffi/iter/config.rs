//! The iterator config at the ABI: creation, operands, and one setter
//! per c10 option.

use super::*;

/// Creates an empty iterator config with c10's defaults (check_mem_overlap,
/// check_all_same_dtype, check_all_same_device, resize_outputs on).
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_new(out: *mut *mut TsrIterConfig) -> TsrStatus {
    guard("tsr_iter_config_new", || {
        check_not_null(out, "out")?;
        let c = box_into(IterConfig::new_boxed());
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
            IterConfig::recycle(unsafe { box_from(config) });
        }
    })
}

/// Adds an output (the config takes its own reference), or NULL to
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

/// Adds an input (the config takes its own reference; see
/// tsr_iter_config_add_borrowed_input for one without).
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
        // contract, ffi/handle.rs); tensor_ref checks NULL and liveness.
        let t = unsafe { tensor_ref(tensor, "tensor")? };
        c.add_input(t)?;
        Ok(())
    })
}

/// Adds an output borrowed as c10's `add_borrowed_output`: the config
/// takes no reference, so `tensor` must stay alive until `tsr_iter_build`
/// returns (the built iterator holds its own reference; freeing the config
/// never touches a borrowed operand). NULL: the build allocates it. Every
/// output must be added before the first input.
///
/// Errors: TSR_ERR_NULL_POINTER (config); TSR_ERR_DEAD_OBJECT (tensor
/// released); TSR_ERR_INVALID_ARGUMENT (an input was already added, or 64
/// operands reached).
///
/// # Safety
/// `config` NULL or live; `tensor` NULL or a live handle that outlives
/// every `tsr_iter_build` of this config.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_add_borrowed_output(
    config: *mut TsrIterConfig,
    tensor: *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_iter_config_add_borrowed_output", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        // SAFETY: `tensor` is NULL or a live TsrTensor handle that the
        // caller keeps alive until the build returns (this export's
        // contract), which is as long as the config reads it.
        let t = unsafe { optional_tensor(tensor, "tensor")? };
        c.add_borrowed_output(t)?;
        Ok(())
    })
}

/// Adds an input borrowed as c10's `add_borrowed_input`: the config takes
/// no reference, so `tensor` must stay alive until `tsr_iter_build`
/// returns (see tsr_iter_config_add_borrowed_output).
///
/// Errors: TSR_ERR_NULL_POINTER (config or tensor); TSR_ERR_DEAD_OBJECT
/// (tensor released); TSR_ERR_INVALID_ARGUMENT (64 operands reached).
///
/// # Safety
/// `config` NULL or live; `tensor` NULL or a live handle that outlives
/// every `tsr_iter_build` of this config.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_add_borrowed_input(
    config: *mut TsrIterConfig,
    tensor: *const TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's arguments under its contract, passed on.
    unsafe { add_borrowed_input("tsr_iter_config_add_borrowed_input", config, tensor) }
}

/// c10's `add_borrowed_const_input`: the same as
/// tsr_iter_config_add_borrowed_input (an iterator never writes an input
/// that is not also an output; c10 keeps both names for C++'s
/// const-correctness).
///
/// Errors: as tsr_iter_config_add_borrowed_input.
///
/// # Safety
/// As tsr_iter_config_add_borrowed_input.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_add_borrowed_const_input(
    config: *mut TsrIterConfig,
    tensor: *const TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's arguments under its contract, passed on.
    unsafe { add_borrowed_input("tsr_iter_config_add_borrowed_const_input", config, tensor) }
}

/// The body of both borrowed-input exports, named `function` in errors.
///
/// # Safety
/// `config` NULL or live; `tensor` NULL or a live handle that outlives
/// every build of the config.
unsafe fn add_borrowed_input(
    function: &'static str,
    config: *mut TsrIterConfig,
    tensor: *const TsrTensor,
) -> TsrStatus {
    guard(function, || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        // SAFETY: `tensor` is NULL or a live TsrTensor handle that the
        // caller keeps alive until the build returns (the exports'
        // contract), which is as long as the config reads it; tensor_view
        // checks NULL and liveness.
        let t = unsafe { tensor_view(tensor, "tensor")? };
        c.add_borrowed_input(t)?;
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

/// As tsr_iter_config_declare_static_shape, with the dims listed in
/// `squash_dims` set to 1 (c10's declare_static_shape(shape, squash_dims):
/// a reduction's loop shape). Dims may be negative (counted from the end).
///
/// Errors: TSR_ERR_NULL_POINTER (config; shape or squash_dims NULL with a
/// non-zero length); TSR_ERR_INVALID_ARGUMENT (a negative length);
/// TSR_ERR_SHAPE (a squash dim outside the shape, more than TSR_MAX_DIMS
/// entries).
/// The config is unchanged on error.
///
/// # Safety
/// `config` NULL or live; `shape` readable for `ndim` values and
/// `squash_dims` for `nsquash` values.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_declare_static_shape_squashed(
    config: *mut TsrIterConfig,
    ndim: i64,
    shape: *const i64,
    nsquash: i64,
    squash_dims: *const i64,
) -> TsrStatus {
    guard("tsr_iter_config_declare_static_shape_squashed", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        // SAFETY: the header requires `shape` readable for `ndim` values
        // and `squash_dims` for `nsquash`; i64_slice checks lengths and NULL.
        let (shape, squash) = unsafe {
            (
                i64_slice(shape, ndim, "shape")?,
                i64_slice(squash_dims, nsquash, "squash_dims")?,
            )
        };
        c.declare_static_shape_squashed(shape, squash)?;
        Ok(())
    })
}

/// Outputs the build allocates (those added as NULL) come from
/// `allocator` instead of the registry's allocator for their device: a
/// host's arena. The config keeps its own reference to the allocator (the
/// caller's stays the caller's); NULL restores the registry. The build
/// fails with TSR_ERR_DEVICE, naming the allocator, when it allocates on
/// another device type than the outputs'. Cast temporaries still come
/// from the registry.
///
/// Errors: TSR_ERR_NULL_POINTER (config); TSR_ERR_DEAD_OBJECT (a released
/// allocator).
///
/// # Safety
/// `config` NULL or live; `allocator` NULL or a live allocator handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_config_output_allocator(
    config: *mut TsrIterConfig,
    allocator: *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_iter_config_output_allocator", || {
        // SAFETY: `config` is NULL or a live TsrIterConfig handle (the
        // header's contract, ffi/handle.rs); config_mut checks NULL.
        let c = unsafe { config_mut(config)? };
        let a = if allocator.is_null() {
            None
        } else {
            // SAFETY: `allocator` is a live TsrAllocator handle (the
            // header's contract); allocator_ref checks liveness.
            Some(unsafe { super::super::allocator::allocator_ref(allocator, "allocator")? })
        };
        c.output_allocator(a);
        Ok(())
    })
}
