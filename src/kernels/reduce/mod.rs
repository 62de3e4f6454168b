//! Reductions over a set of dims: sum and amax.
//!
//! Result dtypes follow PyTorch: sum of bool and integer tensors is Long,
//! sum of floating and complex tensors keeps the dtype; amax keeps the
//! dtype. Half, bfloat16 and float sums accumulate in float, double in
//! double, ComplexHalf, BComplex32 and ComplexFloat in ComplexFloat (c10's opmath
//! type), and contiguous runs are summed pairwise over blocks with many
//! independent lanes (a cascade, so the error grows with log n rather
//! than n, and the loop vectorizes).
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
//! `reducers.rs` (the reductions' element types and folds: sum,
//! amax), `pairwise.rs` (a run folded as a cascade in SIMD lanes),
//! `avx2_sum.rs` (those lanes in AVX2 registers for f32, f16, bfloat16
//! and f64 sums, with the same bits),
//! `tree.rs` (the pairwise tree over K rows, shared by both),
//! `geometry.rs` (the loop nest over the input's memory order, split
//! across threads); here, the entry points and their checks.

#[cfg(target_arch = "x86_64")]
mod avx2_sum;
mod geometry;
mod pairwise;
mod reducer;
mod reducers;
mod tree;

pub use reducers::SumAcc;

use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::dispatch::dispatch;
use crate::kernels::elem::{Bool, Elem};
use crate::tensor::{shape::wrap_dim, Dims, Tensor};
use geometry::reduce_into;
use reducers::{AMax, Sum};
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

/// The maximum of `a` over `dims` (empty: all dims), NaN if any element
/// reduced is NaN; the dtype is kept.
///
/// Errors: Shape (a reduced dim has size 0, naming it; dim out of range),
/// InvalidArgument (a dim repeated), Unsupported (complex, float8,
/// quantized), Device.
pub fn amax(a: &Tensor, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    check_cpu("amax", a)?;
    let mask = reduced_mask("amax", a, dims)?;
    if let Some(d) = (0..a.ndim()).find(|&d| mask[d] && a.sizes()[d] == 0) {
        crate::bail!(
            Shape,
            "reduction dim {d} has size 0: the maximum of an empty set is undefined (input \
             sizes {:?})",
            a.sizes()
        );
    }
    let keep = keep_sizes(a, &mask);
    let out = Tensor::empty(&keep, a.dtype(), a.device())?;
    if a.dtype() == DType::Bool {
        reduce_into::<AMax<Bool>>(a, &out, &mask)?;
    } else {
        dispatch!(real, a.dtype(), "amax", T => reduce_into::<AMax<T>>(a, &out, &mask))?;
    }
    finish_shape(out, &mask, keepdim)
}
