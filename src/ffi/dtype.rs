//! dtypes and scalars.

use super::call::{check_not_null, guard, guard_value, write_out};
use super::types::*;
use crate::dtype::{self, DType, Scalar};
use std::ffi::c_char;

/// Bytes per element of `dtype`; 0 for a number that is not a supported
/// dtype.
#[no_mangle]
pub extern "C" fn tsr_dtype_itemsize(dtype: TsrDType) -> usize {
    guard_value("tsr_dtype_itemsize", 0, || {
        DType::try_from_raw(dtype).map_or(0, |d| d.itemsize())
    })
}

/// c10's name of `dtype` ("Float", "BFloat16", "ComplexFloat", ...), or
/// "Undefined" for an unsupported number. Static; never NULL.
#[no_mangle]
pub extern "C" fn tsr_dtype_name(dtype: TsrDType) -> *const c_char {
    guard_value("tsr_dtype_name", c"Undefined".as_ptr(), || {
        let name: &'static std::ffi::CStr =
            DType::try_from_raw(dtype).map_or(c"Undefined", DType::c_name);
        name.as_ptr()
    })
}

/// NumPy's type string of `dtype` without its byte-order character
/// ("f4", "i8", "b1", "c8": NumPy's `dtype.str` less its first
/// character), or NULL where NumPy has no such type (bfloat16, the float8
/// and float4 types, the quantized and sub-byte types) or for an
/// unsupported number. Static.
#[no_mangle]
pub extern "C" fn tsr_dtype_numpy(dtype: TsrDType) -> *const c_char {
    guard_value("tsr_dtype_numpy", std::ptr::null(), || {
        DType::try_from_raw(dtype)
            .and_then(|d| d.info().numpy_c)
            .map_or(std::ptr::null(), std::ffi::CStr::as_ptr)
    })
}

/// Python's name of `dtype` in torch (`torch.NAME`: "float32",
/// "bfloat16", "float8_e4m3fn"; also ml_dtypes' name for the types NumPy
/// lacks), or NULL where torch has none (the sub-byte types without a
/// name) or for an unsupported number. Static.
#[no_mangle]
pub extern "C" fn tsr_dtype_torch_name(dtype: TsrDType) -> *const c_char {
    guard_value("tsr_dtype_torch_name", std::ptr::null(), || {
        DType::try_from_raw(dtype)
            .and_then(|d| d.info().torch_c)
            .map_or(std::ptr::null(), std::ffi::CStr::as_ptr)
    })
}

/// Whether `dtype` is a supported dtype number.
#[no_mangle]
pub extern "C" fn tsr_dtype_is_valid(dtype: TsrDType) -> bool {
    guard_value("tsr_dtype_is_valid", false, || {
        DType::try_from_raw(dtype).is_some()
    })
}

/// Whether `dtype` is a real floating type (c10's isFloatingType: Half,
/// Float, Double, BFloat16, the five float8 types, Float4_e2m1fn_x2);
/// false for numbers that are not dtypes.
#[no_mangle]
pub extern "C" fn tsr_dtype_is_floating(dtype: TsrDType) -> bool {
    guard_value("tsr_dtype_is_floating", false, || {
        DType::try_from_raw(dtype).is_some_and(|d| d.is_floating())
    })
}

/// Whether `dtype` is complex (ComplexHalf, ComplexFloat, ComplexDouble,
/// BComplex32); false for numbers that are not dtypes.
#[no_mangle]
pub extern "C" fn tsr_dtype_is_complex(dtype: TsrDType) -> bool {
    guard_value("tsr_dtype_is_complex", false, || {
        DType::try_from_raw(dtype).is_some_and(|d| d.is_complex())
    })
}

/// Writes to `*out` the dtype both `a` and `b` promote to, as c10 2.15's
/// promoteTypes (equal types give themselves; its table, with BComplex32
/// as the complex of BFloat16).
///
/// Errors: TSR_ERR_NULL_POINTER if `out` is NULL; TSR_ERR_INVALID_ARGUMENT
/// for a number that is not a dtype (outside 0..46); TSR_ERR_DTYPE, naming
/// both dtypes, for pairs c10 does not promote: a quantized, bits or float8
/// type with another type, UInt1..7 / UInt16/32/64 with a non-floating
/// type, Int1..7 or Float4_e2m1fn_x2 with a type outside c10's table.
/// `*out` is untouched on error.
///
/// # Safety
/// `out` must be NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn tsr_promote_types(
    a: TsrDType,
    b: TsrDType,
    out: *mut TsrDType,
) -> TsrStatus {
    guard("tsr_promote_types", || {
        check_not_null(out, "out")?;
        let a = DType::from_raw(a).map_err(|e| e.context("argument 'a'"))?;
        let b = DType::from_raw(b).map_err(|e| e.context("argument 'b'"))?;
        let r = dtype::promote_types(a, b)?;
        // SAFETY: out checked non-NULL; the caller guarantees it is writable.
        unsafe { write_out(out, r.raw()) };
        Ok(())
    })
}

/// Whether an operation that enforces safe casting may write a `from` value
/// into a `to` output (c10's canCast, defined for every pair of the 47):
/// false for complex -> non-complex, floating -> integral or bool, and
/// non-bool -> bool; false if either number is not a dtype.
#[no_mangle]
pub extern "C" fn tsr_can_cast(from: TsrDType, to: TsrDType) -> bool {
    guard_value("tsr_can_cast", false, || {
        match (DType::try_from_raw(from), DType::try_from_raw(to)) {
            (Some(f), Some(t)) => dtype::can_cast(f, t),
            _ => false,
        }
    })
}

/// A scalar holding an integer, tagged TSR_LONG.
#[no_mangle]
pub extern "C" fn tsr_scalar_int(value: i64) -> TsrScalar {
    TsrScalar::from_core(Scalar::Int(value))
}

/// A scalar holding an unsigned integer, tagged TSR_UINT64.
#[no_mangle]
pub extern "C" fn tsr_scalar_uint(value: u64) -> TsrScalar {
    TsrScalar::from_core(Scalar::UInt(value))
}

/// A scalar holding a floating value, tagged TSR_DOUBLE.
#[no_mangle]
pub extern "C" fn tsr_scalar_float(value: f64) -> TsrScalar {
    TsrScalar::from_core(Scalar::Float(value))
}

/// A scalar holding a bool, tagged TSR_BOOL.
#[no_mangle]
pub extern "C" fn tsr_scalar_bool(value: bool) -> TsrScalar {
    TsrScalar::from_core(Scalar::Bool(value))
}

/// A scalar holding a complex value, tagged TSR_COMPLEX_DOUBLE.
#[no_mangle]
pub extern "C" fn tsr_scalar_complex(re: f64, im: f64) -> TsrScalar {
    TsrScalar::from_core(Scalar::Complex(re, im))
}
