//! Filling a tensor with one value (`tsr_tensor_fill`).

use super::dispatch::dispatch_width;
use super::loops::map_run;
use super::simd;
use crate::dtype::{convert::scalar_to_bytes, Scalar};
use crate::error::Result;
use crate::iterator::IterConfig;
use crate::iterator::DEFAULT_GRAIN_SIZE as GRAIN;
use crate::parallel;
use crate::tensor::Tensor;

/// Sets every element of `t` to `value` converted to its dtype (C-like
/// conversion; half and bfloat16 round to nearest even; float8 through f32
/// with the format's rounding, as c10) and bumps the
/// version. Tensors whose elements share memory (expanded) are allowed:
/// filling is idempotent, as in c10.
///
/// Errors: ReadOnly (a read-only storage); Unsupported (non-CPU tensors;
/// quantized dtypes).
pub fn fill_(t: &Tensor, value: Scalar) -> Result<()> {
    t.storage().check_writable("a fill of the tensor")?;
    crate::ensure!(
        t.device().is_cpu(),
        Unsupported,
        "fill of a {} tensor: only CPU tensors can be filled here",
        t.device()
    );
    let bytes = scalar_to_bytes(value, t.dtype())?;
    let item = t.itemsize();
    let n = t.numel();
    if n > 0 {
        if t.is_non_overlapping_and_dense() {
            // The elements occupy numel consecutive slots from data_ptr
            // (strides are non-negative).
            let base = t.data_in_storage()? as usize;
            let stream = simd::should_stream(n as usize * item);
            parallel::parallel_for(0, n, GRAIN, |b, e| {
                // SAFETY: slots [b, e) of the dense tensor; `bytes` holds
                // one element of the tensor's dtype.
                unsafe {
                    fill_run(
                        (base + b as usize * item) as *mut u8,
                        item as isize,
                        (e - b) as usize,
                        &bytes,
                        item,
                        stream,
                    )
                };
            });
        } else {
            let mut config = IterConfig::new();
            config
                .check_mem_overlap(false)
                .check_all_same_dtype(false)
                .add_output(Some(t.clone()))?
                .resize_outputs(false);
            let it = config.build()?;
            it.for_each(
                &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
                    for j in 0..n1 {
                        // SAFETY: the iterator keeps every (i, j) < (n0, n1)
                        // inside the tensor.
                        unsafe {
                            fill_run(
                                data[0].offset((j * strides[1]) as isize),
                                strides[0] as isize,
                                n0 as usize,
                                &bytes,
                                item,
                                false,
                            )
                        };
                    }
                },
                0,
            );
        }
    }
    t.bump_version();
    Ok(())
}

impl Tensor {
    /// Sets every element to `value` converted to the tensor's dtype, and
    /// bumps the version: [`fill_`].
    pub fn fill_(&self, value: Scalar) -> Result<()> {
        fill_(self, value)
    }
}

/// Writes `n` copies of the element in `pattern[..item]`, `stride` bytes
/// apart (streaming stores when `stream` and the run is contiguous).
///
/// # Safety
/// Every written element must be valid memory.
unsafe fn fill_run(
    p: *mut u8,
    stride: isize,
    n: usize,
    pattern: &[u8; 16],
    item: usize,
    stream: bool,
) {
    // SAFETY: the pattern's first `item` bytes are read as one element
    // (stride 0); the caller guarantees the destination run.
    dispatch_width!(item, T => unsafe { map_run::<T, T>(p, stride, pattern.as_ptr(), 0, n, stream, |v| v) })
}
