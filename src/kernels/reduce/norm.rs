//! The vector norm c10 exposes (`torch.linalg.vector_norm(x, ord, dim,
//! keepdim)`): each element's magnitude raised to `ord` in the real
//! opmath type (float for half, bfloat16 and their complex types),
//! reduced with sum (amax for inf, amin for -inf), then the `1 / ord`
//! root; the result in the input's real dtype.
//!
//! The 2-norm of a real input (the common one) is one pass: the sum of
//! squares (`SumSquares`: each element widened, squared, added, in the
//! sum's pairwise order and lanes, with its AVX2 kernels) over the
//! input's own layout, then the root of each result. Other orders and
//! complex inputs write the magnitudes to a temporary tensor reduced by
//! the sum and pick reductions of this module, so the norm has their
//! pairwise order and NaN rules.

use super::geometry::reduce_into;
use super::reducers::{SumAcc, SumSquares};
use super::{amax, amin, check_cpu, finish_shape, keep_sizes, reduced_mask, sum};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::dispatch::dispatch;
use crate::kernels::elem::{Complex, Elem};
use crate::tensor::Tensor;
use half::{bf16, f16};

/// A floating or complex element's magnitude in the real opmath type.
trait Magnitude: Elem {
    /// f32, or f64 for f64 and ComplexDouble.
    type Real: Elem + Copy;
    /// `|x|` (for complex, the hypotenuse of the parts).
    fn magnitude(self) -> Self::Real;
}

macro_rules! magnitude {
    ($($t:ty => $r:ty, |$x:ident| $e:expr;)*) => {$(
        impl Magnitude for $t {
            type Real = $r;
            #[inline(always)]
            fn magnitude(self) -> $r {
                let $x = self;
                $e
            }
        }
    )*};
}

magnitude! {
    f16 => f32, |x| x.to_f32().abs();
    bf16 => f32, |x| x.to_f32().abs();
    f32 => f32, |x| x.abs();
    f64 => f64, |x| x.abs();
    Complex<f16> => f32, |x| x.re.to_f32().hypot(x.im.to_f32());
    Complex<bf16> => f32, |x| x.re.to_f32().hypot(x.im.to_f32());
    Complex<f32> => f32, |x| x.re.hypot(x.im);
    Complex<f64> => f64, |x| x.re.hypot(x.im);
}

/// The `ord` norm of `a` over `dims` (empty: all dims), as
/// `torch.linalg.vector_norm`: ord 2 (the Euclidean norm), 1, inf (the
/// largest magnitude), -inf (the smallest), 0 (the count of nonzero
/// elements), or any other p: `sum(|x|^p)^(1/p)`. Floating and complex
/// inputs; the result has the input's real dtype (Float for
/// ComplexFloat, Half for ComplexHalf).
///
/// Errors: DType (bool and integer inputs, naming the dtype); Shape (dim
/// out of range; inf, -inf or a negative ord over an empty set, which has
/// no identity); InvalidArgument (a dim repeated; ord NaN); Device.
pub fn vector_norm(a: &Tensor, ord: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
    const OP: &str = "vector_norm";
    check_cpu(OP, a)?;
    let dtype = a.dtype();
    crate::ensure!(
        !dtype.is_integral(true),
        DType,
        "{OP} of a {} tensor: expected a floating or complex dtype; cast the input to a \
         floating dtype (e.g. Float) first",
        dtype.name()
    );
    crate::ensure!(
        !ord.is_nan(),
        InvalidArgument,
        "{OP}: ord is NaN: expected a number or +-inf"
    );
    let mask = reduced_mask(OP, a, dims)?;
    let empty = (0..a.ndim()).any(|d| mask[d] && a.sizes()[d] == 0);
    crate::ensure!(
        !(empty && (ord < 0.0 || ord.is_infinite())),
        Shape,
        "{OP} of ord {ord} over an empty set (input sizes {:?}): that norm has no identity",
        a.sizes()
    );
    let real = dtype.to_real();
    let norm = match dtype {
        DType::Float if ord == 2.0 => two_norm::<f32>(a, &mask, keepdim)?,
        DType::Double if ord == 2.0 => two_norm::<f64>(a, &mask, keepdim)?,
        DType::Half if ord == 2.0 => two_norm::<f16>(a, &mask, keepdim)?,
        DType::BFloat16 if ord == 2.0 => two_norm::<bf16>(a, &mask, keepdim)?,
        _ => dispatch!(floating, dtype, OP, T => magnitudes_norm::<T>(a, ord, dims, keepdim)?),
    };
    if norm.dtype() == real {
        Ok(norm)
    } else {
        norm.to_dtype(real)
    }
}

/// The 2-norm of a real floating `a` over the dims of `mask`, in T's
/// opmath type: the square root of the sum of squares, one pass.
fn two_norm<T: SumAcc>(a: &Tensor, mask: &[bool], keepdim: bool) -> Result<Tensor>
where
    T::Acc: RealOps,
{
    let acc = Tensor::empty(&keep_sizes(a, mask), <T::Acc>::DTYPE, a.device())?;
    reduce_into::<SumSquares<T>>(a, &acc, mask)?;
    let len = acc.numel() as usize;
    if len > 0 {
        // SAFETY: `acc` is a fresh contiguous tensor of len T::Acc values
        // (its dtype) that nothing else references.
        let r =
            unsafe { std::slice::from_raw_parts_mut(acc.data_in_storage()? as *mut T::Acc, len) };
        for v in r {
            *v = v.sqrt();
        }
    }
    finish_shape(acc, mask, keepdim)
}

/// The norm in T's real opmath type.
fn magnitudes_norm<T: Magnitude>(
    a: &Tensor,
    ord: f64,
    dims: &[i64],
    keepdim: bool,
) -> Result<Tensor>
where
    T::Real: RealOps,
{
    let power: fn(T::Real, f64) -> T::Real = if ord == 0.0 {
        |m, _| T::Real::from_f64(if m.to_f64() != 0.0 { 1.0 } else { 0.0 })
    } else if ord == 1.0 || ord.is_infinite() {
        |m, _| m
    } else if ord == 2.0 {
        |m, _| m.mul(m)
    } else {
        |m, p| m.powf(p)
    };
    let src = a.contiguous(crate::tensor::MemoryFormat::Contiguous)?;
    let mags = Tensor::empty(a.sizes(), T::Real::DTYPE, a.device())?;
    let n = a.numel() as usize;
    if n > 0 {
        // SAFETY: `src` is a contiguous tensor of n T elements; `mags` a
        // fresh contiguous tensor of n T::Real elements that nothing else
        // references; the two are different allocations.
        let (x, m) = unsafe {
            (
                std::slice::from_raw_parts(src.data_in_storage()? as *const T, n),
                std::slice::from_raw_parts_mut(mags.data_in_storage()? as *mut T::Real, n),
            )
        };
        for (m, &x) in m.iter_mut().zip(x) {
            *m = power(x.magnitude(), ord);
        }
    }
    let reduced = if ord == f64::INFINITY {
        amax(&mags, dims, keepdim)?
    } else if ord == f64::NEG_INFINITY {
        amin(&mags, dims, keepdim)?
    } else {
        sum(&mags, dims, keepdim)?
    };
    if ord == 2.0 || !(ord == 0.0 || ord == 1.0 || ord.is_infinite()) {
        let len = reduced.numel() as usize;
        let root: fn(T::Real, f64) -> T::Real = if ord == 2.0 {
            |s, _| s.sqrt()
        } else {
            |s, p| s.powf(1.0 / p)
        };
        if len > 0 {
            // SAFETY: `reduced` is a fresh contiguous result of len
            // T::Real values (sum and the picks keep the dtype), which
            // nothing else references.
            let r = unsafe {
                std::slice::from_raw_parts_mut(reduced.data_in_storage()? as *mut T::Real, len)
            };
            for v in r {
                *v = root(*v, ord);
            }
        }
    }
    Ok(reduced)
}

/// What the norm computes in f32 and f64.
trait RealOps: Copy + Elem {
    fn mul(self, o: Self) -> Self;
    fn powf(self, p: f64) -> Self;
    fn sqrt(self) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

macro_rules! real_ops {
    ($($t:ty),*) => {$(
        impl RealOps for $t {
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn powf(self, p: f64) -> Self {
                <$t>::powf(self, p as $t)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}

real_ops!(f32, f64);
