//! The built-in CPU kernels at the ABI: add, sub, mul, div, neg, sum,
//! prod, mean, amax, amin, the vector norm, max / min along a dim, and
//! wrapped-number operands.

use super::call::{check_not_null, elementwise, guard, i64_slice, reduction};
use super::handle::tensor_view;
use super::tensor::{put_tensor, TsrTensor};
use super::types::*;
use crate::kernels::{self, RoundingMode};
use crate::tensor::Tensor;

/// How tsr_div_rounding rounds the quotient (PyTorch's rounding_mode).
pub type TsrRoundingMode = i32;
/// True division (integers compute in Float), as tsr_div.
pub const TSR_ROUNDING_NONE: TsrRoundingMode = 0;
/// Rounded toward zero, in the inputs' common dtype ("trunc").
pub const TSR_ROUNDING_TRUNC: TsrRoundingMode = 1;
/// Rounded toward negative infinity, in the common dtype ("floor").
pub const TSR_ROUNDING_FLOOR: TsrRoundingMode = 2;

/// `out = a + alpha * b` with broadcasting and type promotion (c10's
/// binary_op rules: a 0-dim tensor or a wrapped number from
/// tsr_scalar_tensor does not widen the dtype within its category). Bool
/// tensors add as logical or.
///
/// `out_or_null`: the output (borrowed; it may be `a` or `b` for an
/// in-place add; it is resized when its shape differs and it is not an
/// input), or NULL to allocate one in the inputs' layout. `*result`
/// receives a new reference to the output (out itself when given);
/// `result` may be NULL when `out_or_null` is given. `a`, `b` borrowed.
///
/// Errors: TSR_ERR_READ_ONLY (out on a read-only storage);
/// TSR_ERR_NULL_POINTER (a, b; result when out is NULL);
/// TSR_ERR_SHAPE (not broadcastable); TSR_ERR_DTYPE (alpha not an
/// integer for integral inputs, a bool alpha for non-bool results, a
/// complex alpha for real ones; result dtype not safely castable to out's);
/// TSR_ERR_OVERLAP (out partially overlaps an input); TSR_ERR_DEVICE
/// (non-CPU tensors); TSR_ERR_UNSUPPORTED (float8, quantized).
///
/// # Safety
/// Handles NULL or live; `result` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_add(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    alpha: TsrScalar,
    result: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); elementwise checks each for NULL and liveness.
    unsafe {
        elementwise(
            "tsr_add",
            out_or_null,
            &[(a, "a"), (b, "b")],
            result,
            |out, t| kernels::add(out, &t[0], &t[1], alpha.to_core()?),
        )
    }
}

/// `out = a - alpha * b`, as tsr_add. Bool inputs are refused
/// (TSR_ERR_DTYPE), as in PyTorch.
///
/// # Safety
/// As tsr_add.
#[no_mangle]
pub unsafe extern "C" fn tsr_sub(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    alpha: TsrScalar,
    result: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); elementwise checks each for NULL and liveness.
    unsafe {
        elementwise(
            "tsr_sub",
            out_or_null,
            &[(a, "a"), (b, "b")],
            result,
            |out, t| kernels::sub(out, &t[0], &t[1], alpha.to_core()?),
        )
    }
}

/// `out = a * b`, as tsr_add without alpha. Bool tensors multiply as
/// logical and.
///
/// # Safety
/// As tsr_add.
#[no_mangle]
pub unsafe extern "C" fn tsr_mul(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    result: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); elementwise checks each for NULL and liveness.
    unsafe {
        elementwise(
            "tsr_mul",
            out_or_null,
            &[(a, "a"), (b, "b")],
            result,
            |out, t| kernels::mul(out, &t[0], &t[1]),
        )
    }
}

/// True division `out = a / b` (c10's binary_float_op: bool and integer
/// inputs compute in Float). Division by zero gives inf, -inf or NaN, as
/// IEEE; use tsr_div_rounding for integer quotients. Otherwise as tsr_add
/// (TSR_ERR_DTYPE for an integer out: Float does not cast to it safely).
///
/// # Safety
/// As tsr_add.
#[no_mangle]
pub unsafe extern "C" fn tsr_div(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    result: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); elementwise checks each for NULL and liveness.
    unsafe {
        elementwise(
            "tsr_div",
            out_or_null,
            &[(a, "a"), (b, "b")],
            result,
            |out, t| kernels::div(out, &t[0], &t[1]),
        )
    }
}

/// Division with a rounding mode (PyTorch's `div(a, b, rounding_mode=)`):
/// TSR_ROUNDING_NONE is tsr_div; TSR_ROUNDING_TRUNC and TSR_ROUNDING_FLOOR
/// compute in the inputs' common dtype, so integers stay integers, and an
/// integer division by zero fails with TSR_ERR_ZERO_DIVISION (PyTorch's
/// ZeroDivisionError; the output's contents are then unspecified).
/// Floating division by zero gives inf or NaN.
///
/// Errors: as tsr_add; TSR_ERR_ZERO_DIVISION; TSR_ERR_INVALID_ARGUMENT
/// (unknown mode); TSR_ERR_UNSUPPORTED (bool or complex inputs with trunc
/// or floor).
///
/// # Safety
/// As tsr_add.
#[no_mangle]
pub unsafe extern "C" fn tsr_div_rounding(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    b: *const TsrTensor,
    mode: TsrRoundingMode,
    result: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); elementwise checks each for NULL and liveness.
    unsafe {
        elementwise(
            "tsr_div_rounding",
            out_or_null,
            &[(a, "a"), (b, "b")],
            result,
            |out, t| {
                let mode = match mode {
                    TSR_ROUNDING_NONE => RoundingMode::None,
                    TSR_ROUNDING_TRUNC => RoundingMode::Trunc,
                    TSR_ROUNDING_FLOOR => RoundingMode::Floor,
                    other => crate::bail!(
                        InvalidArgument,
                        "unknown rounding mode {other}: expected TSR_ROUNDING_NONE, \
                         TSR_ROUNDING_TRUNC or TSR_ROUNDING_FLOOR"
                    ),
                };
                kernels::div_rounding(out, &t[0], &t[1], mode)
            },
        )
    }
}

/// `out = -a` in a's dtype (unsigned integers wrap). Bool is refused
/// (TSR_ERR_DTYPE), as in PyTorch. `out_or_null`, `result`: as tsr_add;
/// out may be `a` itself.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY (out); TSR_ERR_DTYPE
/// (bool input, out of another dtype); TSR_ERR_SHAPE; TSR_ERR_OVERLAP;
/// TSR_ERR_DEVICE; TSR_ERR_UNSUPPORTED.
///
/// # Safety
/// Handles NULL or live; `result` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_neg(
    out_or_null: *mut TsrTensor,
    a: *const TsrTensor,
    result: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); elementwise checks each for NULL and liveness.
    unsafe {
        elementwise("tsr_neg", out_or_null, &[(a, "a")], result, |out, t| {
            kernels::neg(out, &t[0])
        })
    }
}

/// The sum of `a` over the `ndims` dims in `dims` (ndims 0: every dim;
/// negative dims count from the end), a new tensor written to `*out` (new
/// reference). `keepdim` keeps reduced dims with size 1. Bool and integer
/// inputs give TSR_LONG; floating and complex inputs keep their dtype
/// (half, bfloat16 and float accumulate in float, pairwise). The sum over
/// an empty dim is 0. `a` borrowed; `dims` may be NULL when ndims is 0.
///
/// Errors: TSR_ERR_NULL_POINTER (a, out, dims with ndims > 0);
/// TSR_ERR_SHAPE (dim out of range); TSR_ERR_INVALID_ARGUMENT (a dim
/// repeated, ndims < 0); TSR_ERR_DEVICE; TSR_ERR_UNSUPPORTED.
///
/// # Safety
/// `a` NULL or live; `dims` NULL or readable for `ndims` values; `out`
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_sum(
    a: *const TsrTensor,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); reduction checks each for NULL and liveness.
    unsafe { reduction("tsr_sum", a, ndims, dims, keepdim, out, kernels::sum) }
}

/// The product of `a` over `dims`, as tsr_sum: bool and integer inputs
/// give TSR_LONG (wrapping on overflow); floating and complex inputs keep
/// their dtype (half, bfloat16 and float multiply in float, pairwise).
/// The product over an empty dim is 1.
///
/// Errors: as tsr_sum.
///
/// # Safety
/// As tsr_sum.
#[no_mangle]
pub unsafe extern "C" fn tsr_prod(
    a: *const TsrTensor,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); reduction checks each for NULL and liveness.
    unsafe { reduction("tsr_prod", a, ndims, dims, keepdim, out, kernels::prod) }
}

/// The mean of `a` over `dims`, as tsr_sum, for floating and complex
/// inputs: the sum (in float for half and bfloat16) divided by the number
/// of elements reduced, in a's dtype. The mean over an empty dim is NaN.
///
/// Errors: as tsr_sum; TSR_ERR_DTYPE for bool and integer inputs (the
/// message names the dtype: cast to a floating dtype first).
///
/// # Safety
/// As tsr_sum.
#[no_mangle]
pub unsafe extern "C" fn tsr_mean(
    a: *const TsrTensor,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); reduction checks each for NULL and liveness.
    unsafe { reduction("tsr_mean", a, ndims, dims, keepdim, out, kernels::mean) }
}

/// The maximum of `a` over `dims`, as tsr_sum, in a's dtype; NaN when any
/// reduced element is NaN.
///
/// Errors: as tsr_sum; TSR_ERR_SHAPE when a reduced dim has size 0 (the
/// message names the dim); TSR_ERR_UNSUPPORTED for complex inputs.
///
/// # Safety
/// As tsr_sum.
#[no_mangle]
pub unsafe extern "C" fn tsr_amax(
    a: *const TsrTensor,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); reduction checks each for NULL and liveness.
    unsafe { reduction("tsr_amax", a, ndims, dims, keepdim, out, kernels::amax) }
}

/// The minimum of `a` over `dims`, as tsr_amax (NaN when any reduced
/// element is NaN).
///
/// Errors: as tsr_amax.
///
/// # Safety
/// As tsr_sum.
#[no_mangle]
pub unsafe extern "C" fn tsr_amin(
    a: *const TsrTensor,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); reduction checks each for NULL and liveness.
    unsafe { reduction("tsr_amin", a, ndims, dims, keepdim, out, kernels::amin) }
}

/// The `ord` vector norm of `a` over `dims`, as tsr_sum and c10's
/// `linalg.vector_norm`: ord 2 (Euclidean), 1, INFINITY (largest
/// magnitude), -INFINITY (smallest), 0 (count of nonzeros) or any other
/// p (`sum(|x|^p)^(1/p)`), computed in float for half, bfloat16 and their
/// complex types. Floating and complex inputs; the result has a's real
/// dtype (TSR_FLOAT for TSR_COMPLEX_FLOAT).
///
/// Errors: as tsr_sum; TSR_ERR_DTYPE for bool and integer inputs;
/// TSR_ERR_SHAPE for ord inf, -inf or negative over an empty set;
/// TSR_ERR_INVALID_ARGUMENT for ord NaN.
///
/// # Safety
/// As tsr_sum.
#[no_mangle]
pub unsafe extern "C" fn tsr_vector_norm(
    a: *const TsrTensor,
    ord: f64,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_vector_norm", || {
        check_not_null(out, "out")?;
        // SAFETY: `a` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let a = unsafe { tensor_view(a, "a")? };
        // SAFETY: the header requires `dims` readable for `ndims` values
        // when non-NULL; i64_slice checks the length and NULL.
        let dims = unsafe { i64_slice(dims, ndims, "dims")? };
        let r = kernels::vector_norm(&a, ord, dims, keepdim)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, r) };
        Ok(())
    })
}

/// The maximum of `a` along `dim` (negative counts from the end) with its
/// index, as c10's `max(dim)`: `*values` (a's dtype) and `*indices`
/// (TSR_LONG), new references, the dim kept with size 1 when `keepdim`.
/// The index is the first occurrence of the maximum; where the dim holds
/// a NaN, the value is NaN and the index the first NaN's. `a` borrowed.
///
/// Errors: TSR_ERR_NULL_POINTER (a, values, indices); TSR_ERR_SHAPE (dim
/// out of range; the dim has size 0); TSR_ERR_DEVICE; TSR_ERR_UNSUPPORTED
/// (complex, float8, quantized). Both out-pointers are untouched on
/// error.
///
/// # Safety
/// `a` NULL or live; `values` and `indices` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_max_dim(
    a: *const TsrTensor,
    dim: i64,
    keepdim: bool,
    values: *mut *mut TsrTensor,
    indices: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's arguments, under the header's contract.
    unsafe {
        along(
            "tsr_max_dim",
            a,
            dim,
            keepdim,
            values,
            indices,
            kernels::max_dim,
        )
    }
}

/// The minimum of `a` along `dim` with its index, as tsr_max_dim
/// mirrored (c10's `min(dim)`).
///
/// Errors: as tsr_max_dim.
///
/// # Safety
/// As tsr_max_dim.
#[no_mangle]
pub unsafe extern "C" fn tsr_min_dim(
    a: *const TsrTensor,
    dim: i64,
    keepdim: bool,
    values: *mut *mut TsrTensor,
    indices: *mut *mut TsrTensor,
) -> TsrStatus {
    // SAFETY: this export's arguments, under the header's contract.
    unsafe {
        along(
            "tsr_min_dim",
            a,
            dim,
            keepdim,
            values,
            indices,
            kernels::min_dim,
        )
    }
}

type Along = fn(&Tensor, i64, bool) -> crate::error::Result<(Tensor, Tensor)>;

/// tsr_max_dim and tsr_min_dim: checks, the op, both results written.
///
/// # Safety
/// `a` NULL or a live handle; `values` and `indices` NULL or writable.
unsafe fn along(
    fname: &str,
    a: *const TsrTensor,
    dim: i64,
    keepdim: bool,
    values: *mut *mut TsrTensor,
    indices: *mut *mut TsrTensor,
    op: Along,
) -> TsrStatus {
    guard(fname, || {
        check_not_null(values, "values")?;
        check_not_null(indices, "indices")?;
        // SAFETY: `a` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let a = unsafe { tensor_view(a, "a")? };
        let (v, i) = op(&a, dim, keepdim)?;
        // SAFETY: both checked non-NULL; written only after the op
        // succeeded.
        unsafe {
            put_tensor(values, v);
            put_tensor(indices, i);
        }
        Ok(())
    })
}

/// The one element of `t` (any number of dims of size 1, or 0-dim), as
/// c10's item(): `*out` is tagged with `t`'s dtype, its value in the member
/// that dtype selects (`b` for bool, `c` for complex, `f` for floating
/// dtypes, half, bfloat16 and float8 included, `u` for uint16/32/64, `i`
/// for the other integers).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; TSR_ERR_SHAPE (not
/// exactly one element); TSR_ERR_DEVICE (not on the CPU); TSR_ERR_DTYPE
/// (a storage-only dtype: quantized, bits, sub-byte integers);
/// TSR_ERR_OUT_OF_STORAGE (the storage shrank below the tensor). `*out`
/// is untouched on error.
///
/// # Safety
/// `t` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_item(t: *const TsrTensor, out: *mut TsrScalar) -> TsrStatus {
    guard("tsr_tensor_item", || {
        check_not_null(out, "out")?;
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let t = unsafe { tensor_view(t, "t")? };
        let mut s = TsrScalar::from_core(t.item()?);
        s.dtype = t.dtype().raw();
        // SAFETY: out checked non-NULL; the caller made it writable.
        unsafe { out.write(s) };
        Ok(())
    })
}

/// A 0-dim CPU tensor holding `value` that promotes as a wrapped number
/// (a Python number in PyTorch): an Int tensor plus a Double wrapped
/// number computes in Float, a Byte tensor plus an Int one stays Byte.
/// Its dtype is Bool, Long, UInt64, Double or ComplexDouble, by the
/// scalar's kind. Writes a new reference to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (the scalar's
/// dtype number); TSR_ERR_OUT_OF_MEMORY.
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_scalar_tensor(
    value: TsrScalar,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_scalar_tensor", || {
        check_not_null(out, "out")?;
        let t = Tensor::wrapped_scalar(value.to_core()?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}
