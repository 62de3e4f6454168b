//! Element-wise unary kernels over c10's unary_op iterator (output in the
//! input's dtype).

use super::binary::finish;
use super::dispatch::dispatch;
use super::elem::Elem;
use super::loops::{unary_op_run, with_simd};
use super::ops::Signed;
use super::simd;
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::TensorIterator;
use crate::tensor::Tensor;

/// `out = -a`; out None allocates it, `out` may be `a` itself. Unsigned
/// integers wrap. Bool is refused, as in PyTorch (use logical not).
///
/// Errors: DType (Bool input; out of another dtype), Shape, Device,
/// Overlap, Unsupported (float8 or quantized).
pub fn neg(out: Option<&Tensor>, a: &Tensor) -> Result<Tensor> {
    crate::ensure!(
        a.dtype() != DType::Bool,
        DType,
        "negation of a Bool tensor is not supported: to invert a mask use logical not"
    );
    for t in [out, Some(a)].into_iter().flatten() {
        crate::ensure!(
            t.device().is_cpu(),
            Device,
            "neg of a tensor on {}: the built-in kernels run on CPU only",
            t.device()
        );
    }
    let it = TensorIterator::unary_op(out, a)?;
    dispatch!(signed, it.dtype(0), "neg", T => {
        let stream = simd::should_stream(it.numel() as usize * std::mem::size_of::<T>());
        it.for_each(
            &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
                with_simd!(for j in 0..n1 {
                    // SAFETY: the iterator keeps every (i, j) < (n0, n1)
                    // inside both operands; out is a or disjoint from it.
                    unsafe {
                        unary_op_run::<T>(
                            data[0].offset((j * strides[2]) as isize),
                            strides[0] as isize,
                            data[1].offset((j * strides[3]) as isize),
                            strides[1] as isize,
                            n0 as usize,
                            stream,
                            |x: <T as Elem>::Op| x.neg(),
                        )
                    }
                })
            },
            0,
        );
    });
    finish(&it)
}
