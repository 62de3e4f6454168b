//! Reductions over a set of dims: sum, prod, mean, amax, amin and the
//! vector norm; max and min along one dim with indices.
//!
//! Result dtypes follow PyTorch: sum and prod of bool and integer tensors
//! are Long, of floating and complex tensors keep the dtype; mean takes
//! floating and complex tensors only and keeps the dtype; amax and amin
//! keep the dtype. Half, bfloat16 and float sums (and products)
//! accumulate in float, double in double, ComplexHalf, BComplex32 and
//! ComplexFloat in ComplexFloat (c10's opmath type), and contiguous runs
//! are folded pairwise over blocks with many independent lanes (a
//! cascade, so the error grows with log n rather than n, and the loop
//! vectorizes).
//!
//! The loop order follows the input's memory layout rather than the
//! iterator's reduction order (which puts reduced dims innermost and would
//! walk columns of a row-major matrix when reducing its rows away): dims
//! are sorted by input stride and coalesced, then the innermost run is
//! either reduced to one value (when that dim is reduced) or accumulated
//! element-wise into a row of the output (when it is kept). Work is split
//! across threads along a kept dim (disjoint outputs) or, for a full
//! reduction, into ordered chunks whose partial results are combined in
//! order, so a given thread count always gives the same result.
//!
//! Files: `reducer.rs` (the `Reducer` trait every reduction implements),
//! `reducers.rs` (the reductions' element types and folds: sum, the sum of squares,
//! amax and amin), `pairwise.rs` (a run folded as a cascade in SIMD
//! lanes), `pick.rs` (amax and amin's per-lane step), `pick_lanes.rs`
//! (their runs in lanes, four streams at a time),
//! `avx2_sum.rs` (those lanes in AVX2 registers for f32, f16, bfloat16
//! and f64 sums, with the same bits), `avx2_pick.rs` (the same for
//! amax and amin),
//! `tree.rs` (the pairwise tree over K rows, shared by both),
//! `geometry.rs` (the loop nest over the input's memory order, split
//! across threads), `indexed.rs` (max and min along a dim with indices),
//! `norm.rs` (the vector norm); here, the entry points and their checks.

#[cfg(target_arch = "x86_64")]
mod avx2_indexed;
#[cfg(target_arch = "x86_64")]
mod avx2_pick;
#[cfg(target_arch = "x86_64")]
mod avx2_sum;
mod geometry;
mod indexed;
mod norm;
mod pairwise;
mod pick;
mod pick_lanes;
mod reducer;
mod reducers;
mod tree;

pub use norm::vector_norm;
pub use reducers::SumAcc;

use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::dispatch::dispatch;
use crate::kernels::elem::{Bool, Elem};
use crate::kernels::ops::{Arith, Div};
use crate::tensor::{shape::wrap_dim, Dims, Tensor};
use geometry::reduce_into;
use reducers::{Pick, Prod, Sum};
use smallvec::SmallVec;
/// The reduced-dims mask of `dims` (empty: every dim), with c10's checks.
fn reduced_mask(op: &str, a: &Tensor, dims: &[i64]) -> Result<SmallVec<[bool; 6]>> {
    let n = a.ndim();
    let mut mask: SmallVec<[bool; 6]> = SmallVec::from_elem(dims.is_empty(), n);
    for &d in dims {
        let w = wrap_dim(d, n)?;
        if n == 0 {
            continue;
        }
        crate::ensure!(
            !mask[w],
            InvalidArgument,
            "dim {w} appears multiple times in the list of dims {dims:?} to {op} over"
        );
        mask[w] = true;
    }
    Ok(mask)
}

/// The result tensor from the keepdim-shaped one.
fn finish_shape(keep: Tensor, mask: &[bool], keepdim: bool) -> Result<Tensor> {
    if keepdim {
        return Ok(keep);
    }
    let sizes: Dims = keep
        .sizes()
        .iter()
        .zip(mask)
        .filter(|(_, &r)| !r)
        .map(|(&s, _)| s)
        .collect();
    keep.view(&sizes)
}

fn keep_sizes(a: &Tensor, mask: &[bool]) -> Dims {
    a.sizes()
        .iter()
        .zip(mask)
        .map(|(&s, &r)| if r { 1 } else { s })
        .collect()
}

fn check_cpu(op: &str, a: &Tensor) -> Result<()> {
    crate::ensure!(
        a.device().is_cpu(),
        Device,
        "{op} of a tensor on {}: the built-in kernels run on CPU only",
        a.device()
    );
    Ok(())
}

/// The sum of `a` over `dims` (empty: all dims; negative dims wrap),
/// keeping reduced dims as size 1 when `keepdim`. Bool and integer inputs
/// give Long; floating and complex inputs keep their dtype. The sum over
/// an empty dim is 0.
///
/// Errors: Shape (dim out of range), InvalidArgument (a dim repeated),
/// Device, Unsupported (float8, quantized).
pub fn sum(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu("sum", a)?;
    let mask = reduced_mask("sum", a, dims)?;
    let keep = keep_sizes(a, &mask);
    let dtype = a.dtype();
    let result = dispatch!(all, dtype, "sum", T => {
        type A = <T as SumAcc>::Acc;
        let acc = Tensor::empty(&keep, A::DTYPE, a.device())?;
        reduce_into::<Sum<T>>(a, &acc, &mask)?;
        if dtype.is_integral(true) || A::DTYPE == dtype {
            acc
        } else {
            acc.to_dtype(dtype)?
        }
    });
    finish_shape(result, &mask, keepdim)
}

/// The product of `a` over `dims` (empty: all dims; negative dims wrap),
/// with sum's dtype rules: bool and integer inputs give Long (wrapping on
/// overflow), floating and complex inputs keep their dtype and multiply
/// in c10's opmath type (float for half and bfloat16), pairwise. The
/// product over an empty dim is 1.
///
/// Errors: as [`sum`].
pub fn prod(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu("prod", a)?;
    let mask = reduced_mask("prod", a, dims)?;
    let keep = keep_sizes(a, &mask);
    let dtype = a.dtype();
    let result = dispatch!(all, dtype, "prod", T => {
        type A = <T as SumAcc>::Acc;
        let acc = Tensor::empty(&keep, A::DTYPE, a.device())?;
        reduce_into::<Prod<T>>(a, &acc, &mask)?;
        if dtype.is_integral(true) || A::DTYPE == dtype {
            acc
        } else {
            acc.to_dtype(dtype)?
        }
    });
    finish_shape(result, &mask, keepdim)
}

/// The mean of `a` over `dims` (empty: all dims), as c10 computes it: the
/// sum in opmath (float for half and bfloat16) divided by the number of
/// elements reduced, then narrowed to a's dtype. Floating and complex
/// inputs only; the mean over an empty dim is NaN.
///
/// Errors: as [`sum`]; DType for bool and integer inputs (naming the
/// dtype: cast to a floating dtype first).
pub fn mean(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu("mean", a)?;
    let dtype = a.dtype();
    crate::ensure!(
        !dtype.is_integral(true),
        DType,
        "mean of a {} tensor: mean is defined for floating and complex dtypes only; cast \
         the input to a floating dtype (e.g. Float) first",
        dtype.name()
    );
    let mask = reduced_mask("mean", a, dims)?;
    let keep = keep_sizes(a, &mask);
    let count: i64 = (0..a.ndim())
        .filter(|&d| mask[d])
        .map(|d| a.sizes()[d])
        .product();
    let result = dispatch!(floating, dtype, "mean", T => {
        type A = <T as SumAcc>::Acc;
        let acc = Tensor::empty(&keep, A::DTYPE, a.device())?;
        reduce_into::<Sum<T>>(a, &acc, &mask)?;
        let n = A::from_alpha(crate::dtype::Scalar::Int(count));
        divide_all::<A>(&acc, n)?;
        if A::DTYPE == dtype {
            acc
        } else {
            acc.to_dtype(dtype)?
        }
    });
    finish_shape(result, &mask, keepdim)
}

/// Divides every element of the fresh contiguous tensor `t` by `n`.
fn divide_all<A: Elem + Div>(t: &Tensor, n: A) -> Result<()> {
    let len = t.numel() as usize;
    if len == 0 {
        return Ok(());
    }
    let p = t.data_in_storage()? as *mut A;
    // SAFETY: `t` is a fresh contiguous tensor of `len` elements of A (its
    // dtype), which nothing else references yet.
    let vals = unsafe { std::slice::from_raw_parts_mut(p, len) };
    for v in vals {
        *v = v.div(n);
    }
    Ok(())
}

/// The maximum of `a` over `dims` (empty: all dims), NaN if any element
/// reduced is NaN; the dtype is kept.
///
/// Errors: Shape (a reduced dim has size 0, naming it; dim out of range),
/// InvalidArgument (a dim repeated), Unsupported (complex, float8,
/// quantized), Device.
pub fn amax(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    extreme::<true>("amax", a, dims, keepdim)
}

/// The minimum of `a` over `dims` (empty: all dims), NaN if any element
/// reduced is NaN; the dtype is kept. Errors as [`amax`].
pub fn amin(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    extreme::<false>("amin", a, dims, keepdim)
}

/// amax (MAX) or amin.
fn extreme<const MAX: bool>(op: &str, a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu(op, a)?;
    let mask = reduced_mask(op, a, dims)?;
    if let Some(d) = (0..a.ndim()).find(|&d| mask[d] && a.sizes()[d] == 0) {
        crate::bail!(
            Shape,
            "reduction dim {d} has size 0: the {} of an empty set is undefined (input \
             sizes {:?})",
            if MAX { "maximum" } else { "minimum" },
            a.sizes()
        );
    }
    let keep = keep_sizes(a, &mask);
    let out = Tensor::empty(&keep, a.dtype(), a.device())?;
    if a.dtype() == DType::Bool {
        reduce_into::<Pick<Bool, MAX>>(a, &out, &mask)?;
    } else {
        dispatch!(real, a.dtype(), op, T => reduce_into::<Pick<T, MAX>>(a, &out, &mask))?;
    }
    finish_shape(out, &mask, keepdim)
}

/// The maximum of `a` along `dim` with its index, as c10's `max(dim)`:
/// (values in a's dtype, Long indices), the first occurrence of the
/// maximum; where the dim holds a NaN, NaN and the first NaN's index.
/// A 0-dim tensor takes dim 0 or -1 and gives itself and index 0.
///
/// Errors: Shape (dim out of range; the dim has size 0, naming it),
/// Unsupported (complex, float8, quantized), Device.
pub fn max_dim(a: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    indexed::along::<true>("max", a, dim, keepdim)
}

/// The minimum of `a` along `dim` with its index, as [`max_dim`]
/// mirrored (c10's `min(dim)`).
pub fn min_dim(a: &Tensor, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
    indexed::along::<false>("min", a, dim, keepdim)
}
