//! The shortcut for small element-wise binary ops whose operands are one
//! flat run: inputs of one dtype and one shape, every operand contiguous
//! on the CPU, and few enough elements for one thread. The iterator would
//! build a 1-d loop over the same three runs (its own fast set-up), so the
//! kernel runs on them directly, without building it: the fixed cost
//! between the C call and the loop is most of a 1000-element add.
//!
//! Anything else (broadcasting, promotion, wrapped numbers, strided or
//! overlapping operands, outputs to resize, large tensors that split over
//! threads) takes the iterator, whose checks and errors then apply.

use super::elem::Elem;
use super::loops::{binary_op_run, with_simd};
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::{get_overlap_status, MemOverlapStatus, DEFAULT_GRAIN_SIZE};
use crate::tensor::layout::contiguous_strides;
use crate::tensor::Tensor;

/// Three flat runs of `n` elements of `dtype`: the output (allocated when
/// the caller gave none) and the two inputs.
pub(crate) struct Flat {
    pub(crate) out: Tensor,
    pub(crate) dtype: DType,
    out_ptr: usize,
    a_ptr: usize,
    b_ptr: usize,
    n: usize,
}

/// Whether `t` is a contiguous CPU tensor of `dtype` and `sizes` that is
/// not a wrapped number (which promotes differently).
#[inline]
fn plain(t: &Tensor, dtype: DType, sizes: &[i64]) -> bool {
    t.dtype() == dtype
        && t.layout_flags().contiguous
        && !t.is_wrapped_number()
        && t.device().is_cpu()
        && t.sizes() == sizes
}

/// Whether a given output may be written in place by the flat loop: the
/// same dtype, shape and contiguous layout as the inputs (so nothing is
/// resized or cast), writable, and no partial overlap with an input (an
/// output that is an input, or the same memory, is an in-place op).
#[inline]
fn plain_output(out: &Tensor, a: &Tensor, b: &Tensor) -> bool {
    plain(out, a.dtype(), a.sizes())
        && !out.is_read_only()
        && [a, b].iter().all(|&x| {
            Tensor::ptr_eq(out, x) || get_overlap_status(out, x) != MemOverlapStatus::Partial
        })
}

/// The flat runs of `out = op(a, b)`, or None when the shortcut does not
/// apply (the caller then builds the iterator).
pub(crate) fn binary(out: Option<&Tensor>, a: &Tensor, b: &Tensor) -> Result<Option<Flat>> {
    let (dtype, sizes) = (a.dtype(), a.sizes());
    if a.numel() > DEFAULT_GRAIN_SIZE || !plain(a, dtype, sizes) || !plain(b, dtype, sizes) {
        return Ok(None);
    }
    let out = match out {
        Some(o) if plain_output(o, a, b) => o.clone(),
        Some(_) => return Ok(None),
        // The sizes are a's (checked when a was made): only the byte
        // count is checked again.
        None => Tensor::empty_dense(sizes, &contiguous_strides(sizes), dtype, a.device())?,
    };
    Ok(Some(Flat {
        out_ptr: out.data_in_storage()? as usize,
        a_ptr: a.data_in_storage()? as usize,
        b_ptr: b.data_in_storage()? as usize,
        n: a.numel() as usize,
        dtype,
        out,
    }))
}

impl Flat {
    /// Runs `f` over the runs (their dtype is `T`), bumps the output's
    /// version and returns the output.
    pub(crate) fn run<T: Elem>(self, f: impl Fn(T::Op, T::Op) -> T::Op) -> Result<Tensor> {
        debug_assert_eq!(T::DTYPE, self.dtype);
        let item = std::mem::size_of::<T>() as isize;
        let (o, a, b, n) = (
            self.out_ptr as *mut u8,
            self.a_ptr as *const u8,
            self.b_ptr as *const u8,
            self.n,
        );
        // An empty tensor's data pointer can be NULL, and the loops read
        // element 0 of each input before they start: run none.
        if n > 0 {
            // SAFETY: `binary` checked that the three tensors are
            // contiguous with `n` elements of T each, n >= 1 here (so each
            // run of n elements at their data pointers is inside its
            // storage), and that the output equals an input or does not
            // partially overlap one (an element is read before it is
            // written).
            with_simd!(unsafe { binary_op_run::<T>(o, item, a, item, b, item, n, false, &f) });
        }
        self.out.bump_version();
        Ok(self.out)
    }
}
