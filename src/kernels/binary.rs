//! Element-wise binary kernels: add and sub (with alpha), mul, true div
//! and div with rounding, over c10's binary_op / binary_float_op
//! iterators (inputs promoted to their common dtype, 0-dim tensors and
//! wrapped numbers allowed, outputs allocated when None, results cast
//! to a given output if that cast is safe).

use super::dispatch::dispatch;
use super::elem::Elem;
use super::flat;
use super::loops::{binary_op_run, with_simd};
use super::ops::{Arith, Div, RoundingDiv};
use super::simd;
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::iterator::TensorIterator;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};

/// How `div` rounds its quotient (PyTorch's `rounding_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// True division (integers computed in Float).
    None,
    /// Rounded toward zero, in the inputs' common dtype.
    Trunc,
    /// Rounded toward negative infinity, in the common dtype.
    Floor,
}

/// Runs `f` over a built (out, a, b) iterator whose operands all have
/// dtype `T`, then writes cast temporaries back and returns the output.
fn run<T: Elem>(it: &TensorIterator, f: impl Fn(T::Op, T::Op) -> T::Op + Sync) -> Result<Tensor> {
    let stream = simd::should_stream(it.numel() as usize * std::mem::size_of::<T>());
    it.for_each(
        &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
            with_simd!(for j in 0..n1 {
                // SAFETY: the iterator keeps data + i*stride0 + j*stride1
                // inside every operand for i < n0, j < n1, and outputs never
                // partially overlap inputs.
                unsafe {
                    binary_op_run::<T>(
                        data[0].offset((j * strides[3]) as isize),
                        strides[0] as isize,
                        data[1].offset((j * strides[4]) as isize),
                        strides[1] as isize,
                        data[2].offset((j * strides[5]) as isize),
                        strides[2] as isize,
                        n0 as usize,
                        stream,
                        &f,
                    )
                }
            })
        },
        0,
    );
    finish(it)
}

/// Writes cast temporaries back, bumps the output's version and returns it.
pub(crate) fn finish(it: &TensorIterator) -> Result<Tensor> {
    it.cast_outputs()?;
    let out = it.output(0);
    out.bump_version();
    Ok(out)
}

/// The dtype the iterator computes in.
fn compute_dtype(it: &TensorIterator) -> DType {
    it.common_dtype().unwrap_or_else(|| it.dtype(0))
}

fn check_cpu(op: &str, tensors: &[Option<&Tensor>]) -> Result<()> {
    for t in tensors.iter().flatten() {
        crate::ensure!(
            t.device().is_cpu(),
            Device,
            "{op} of a tensor on {}: the built-in kernels run on CPU only",
            t.device()
        );
    }
    Ok(())
}

/// c10's alpha_check: alpha must be representable in the result's kind.
fn check_alpha(dtype: DType, alpha: Scalar) -> Result<()> {
    crate::ensure!(
        !matches!(alpha, Scalar::Bool(_)) || dtype == DType::Bool,
        DType,
        "a bool alpha is only supported for Bool results, not {dtype}"
    );
    crate::ensure!(
        dtype.is_floating() || dtype.is_complex() || alpha.is_integral(),
        DType,
        "alpha {alpha:?} is not an integer: for integral inputs ({dtype}) alpha must not be a \
         floating point number"
    );
    crate::ensure!(
        dtype.is_complex() || !matches!(alpha, Scalar::Complex(..)),
        DType,
        "alpha {alpha:?} is complex: for non-complex inputs ({dtype}) alpha must be real"
    );
    Ok(())
}

fn is_one(alpha: Scalar) -> bool {
    match alpha {
        Scalar::Bool(b) => b,
        Scalar::Int(i) => i == 1,
        Scalar::UInt(u) => u == 1,
        Scalar::Float(f) => f == 1.0,
        Scalar::Complex(re, im) => re == 1.0 && im == 0.0,
    }
}

/// `out = a + alpha * b`, broadcasting a and b; out None allocates it
/// (in the inputs' layout), and `out` may be `a` or `b` itself. Bool
/// inputs add as logical or.
///
/// Errors: Shape (not broadcastable, out of the wrong shape), DType (alpha
/// of the wrong kind; result not safely castable to out's dtype), Device,
/// Overlap (out partially overlaps an input), Unsupported (float8 or
/// quantized).
pub fn add(out: Option<&Tensor>, a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    add_scaled("add", out, a, b, alpha, false)
}

/// `out = a - alpha * b` (computed as a + (-alpha) * b, as c10). Bool
/// inputs are refused, as in PyTorch (use logical xor / logical not).
///
/// Errors: as [`add`]; DType for bool inputs.
pub fn sub(out: Option<&Tensor>, a: &Tensor, b: &Tensor, alpha: Scalar) -> Result<Tensor> {
    crate::ensure!(
        a.dtype() != DType::Bool || b.dtype() != DType::Bool,
        DType,
        "subtraction of two Bool tensors is not supported: use logical xor instead"
    );
    crate::ensure!(
        a.dtype() != DType::Bool && b.dtype() != DType::Bool,
        DType,
        "subtraction with a Bool tensor is not supported: to invert a mask use logical not"
    );
    add_scaled("sub", out, a, b, alpha, true)
}

/// `a + alpha * b`, or `a - alpha * b` when `negate`.
fn add_scaled(
    op: &str,
    out: Option<&Tensor>,
    a: &Tensor,
    b: &Tensor,
    alpha: Scalar,
    negate: bool,
) -> Result<Tensor> {
    let alpha = if negate {
        match alpha {
            Scalar::Bool(_) => alpha,
            Scalar::Int(i) => Scalar::Int(i.wrapping_neg()),
            Scalar::UInt(u) => Scalar::UInt(u.wrapping_neg()),
            Scalar::Float(f) => Scalar::Float(-f),
            Scalar::Complex(re, im) => Scalar::Complex(-re, -im),
        }
    } else {
        alpha
    };
    if let Some(flat) = flat::binary(out, a, b)? {
        let dtype = flat.dtype;
        check_alpha(dtype, alpha)?;
        if is_one(alpha) {
            return dispatch!(all, dtype, op, T => flat.run::<T>(|x, y| x.add(y)));
        }
        return dispatch!(all, dtype, op, T => {
            let w = <<T as Elem>::Op as Arith>::from_alpha(alpha);
            flat.run::<T>(move |x, y| x.add(w.mul(y)))
        });
    }
    check_cpu(op, &[out, Some(a), Some(b)])?;
    let it = TensorIterator::binary_op(out, a, b)?;
    let dtype = compute_dtype(&it);
    check_alpha(dtype, alpha)?;
    if is_one(alpha) {
        return dispatch!(all, dtype, op, T => run::<T>(&it, |x, y| x.add(y)));
    }
    dispatch!(all, dtype, op, T => {
        let w = <<T as Elem>::Op as Arith>::from_alpha(alpha);
        run::<T>(&it, move |x, y| x.add(w.mul(y)))
    })
}

/// `out = a * b`, broadcasting; Bool inputs multiply as logical and.
///
/// Errors: as [`add`].
pub fn mul(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let Some(flat) = flat::binary(out, a, b)? {
        return dispatch!(all, flat.dtype, "mul", T => flat.run::<T>(|x, y| x.mul(y)));
    }
    check_cpu("mul", &[out, Some(a), Some(b)])?;
    let it = TensorIterator::binary_op(out, a, b)?;
    dispatch!(all, compute_dtype(&it), "mul", T => run::<T>(&it, |x, y| x.mul(y)))
}

/// True division `out = a / b` (c10's binary_float_op: integer and bool
/// inputs compute in Float). Division by zero follows IEEE (inf, -inf or
/// NaN), for integer inputs too.
///
/// Errors: as [`add`]; DType when out is an integer tensor (Float cannot
/// be cast to it safely).
pub fn div(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    // Floating inputs compute in their own dtype (binary_float_op widens
    // only integers and bool), so they may take the flat shortcut.
    if a.dtype().is_floating() || a.dtype().is_complex() {
        if let Some(flat) = flat::binary(out, a, b)? {
            return dispatch!(floating, flat.dtype, "div", T => flat.run::<T>(|x, y| x.div(y)));
        }
    }
    check_cpu("div", &[out, Some(a), Some(b)])?;
    let it = TensorIterator::binary_float_op(out, a, b)?;
    dispatch!(floating, compute_dtype(&it), "div", T => run::<T>(&it, |x, y| x.div(y)))
}

/// Division rounded by `mode`. Trunc and Floor compute in the inputs'
/// common dtype (integers stay integers) and refuse Bool and complex
/// inputs; an integer division by zero is an error, as PyTorch's
/// ZeroDivisionError (the output's contents are then unspecified).
///
/// Errors: as [`div`]; ZeroDivision; Unsupported (bool or complex with
/// Trunc / Floor).
pub fn div_rounding(
    out: Option<&Tensor>,
    a: &Tensor,
    b: &Tensor,
    mode: RoundingMode,
) -> Result<Tensor> {
    if mode == RoundingMode::None {
        return div(out, a, b);
    }
    check_cpu("div", &[out, Some(a), Some(b)])?;
    let it = TensorIterator::binary_op(out, a, b)?;
    let dtype = compute_dtype(&it);
    let op = match mode {
        RoundingMode::Trunc => "div with rounding mode trunc",
        _ => "div with rounding mode floor",
    };
    let zero_divisor = AtomicBool::new(false);
    let result = dispatch!(real, dtype, op, T => {
        run::<T>(&it, |x, y| {
            type O = <T as Elem>::Op;
            if <O as RoundingDiv>::ZERO_DIVISOR_IS_ERROR && y.is_zero() {
                zero_divisor.store(true, Ordering::Relaxed);
                return <O as Arith>::ZERO;
            }
            if mode == RoundingMode::Trunc {
                x.trunc_div(y)
            } else {
                x.floor_div(y)
            }
        })
    })?;
    crate::ensure!(
        !zero_divisor.load(Ordering::Relaxed),
        ZeroDivision,
        "integer division by zero ({dtype} divisor has a zero element)"
    );
    Ok(result)
}
