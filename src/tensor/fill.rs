//! Filling a tensor with one value.

use super::Tensor;
use crate::dtype::{convert::scalar_to_bytes, Scalar};
use crate::error::Result;

/// Writes `count` copies of the element `pattern` at `p`, `stride` bytes
/// apart.
///
/// # Safety
/// Every written element must lie inside memory the caller owns.
unsafe fn fill_run(p: *mut u8, count: usize, stride: isize, pattern: &[u8]) {
    let item = pattern.len();
    if stride == item as isize && pattern.iter().all(|b| *b == pattern[0]) {
        // SAFETY: a contiguous run of count * item bytes, per the caller.
        unsafe { std::ptr::write_bytes(p, pattern[0], count * item) };
        return;
    }
    macro_rules! typed {
        ($t:ty) => {{
            let v = <$t>::from_ne_bytes(pattern.try_into().expect("pattern length"));
            for i in 0..count as isize {
                // SAFETY: element i lies inside the caller's memory; the
                // write is unaligned-safe.
                unsafe { (p.offset(i * stride) as *mut $t).write_unaligned(v) };
            }
        }};
    }
    match item {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        8 => typed!(u64),
        16 => typed!(u128),
        _ => unreachable!("itemsizes are 1, 2, 4, 8 or 16"),
    }
}

impl Tensor {
    /// Sets every element to `value` converted to the tensor's dtype, and
    /// bumps the version.
    pub fn fill_(&self, value: Scalar) -> Result<()> {
        crate::ensure!(
            self.device().is_cpu(),
            Unsupported,
            "fill of a {} tensor: only CPU tensors can be filled",
            self.device()
        );
        let bytes = scalar_to_bytes(value, self.dtype())?;
        let pattern = &bytes[..self.itemsize()];
        let n = self.numel();
        if n > 0 {
            let item = self.itemsize() as isize;
            let base = self.data_ptr() as *mut u8;
            if self.is_non_overlapping_and_dense() {
                // Dense: the elements occupy numel consecutive slots starting
                // at the lowest-addressed one, which is data_ptr since all
                // strides are non-negative.
                // SAFETY: a dense tensor owns numel consecutive elements.
                unsafe { fill_run(base, n as usize, item, pattern) };
            } else {
                let sizes = self.sizes();
                let strides = self.strides();
                let last = sizes.len() - 1;
                let (inner, inner_stride) = (sizes[last] as usize, strides[last] as isize * item);
                let mut index = vec![0i64; last];
                loop {
                    let off: isize = index
                        .iter()
                        .zip(strides)
                        .map(|(i, s)| (*i * *s) as isize)
                        .sum();
                    // SAFETY: the bounds check of the tensor covers every
                    // index within its sizes.
                    unsafe { fill_run(base.offset(off * item), inner, inner_stride, pattern) };
                    let mut d = last;
                    loop {
                        if d == 0 {
                            self.bump_version();
                            return Ok(());
                        }
                        d -= 1;
                        index[d] += 1;
                        if index[d] < sizes[d] {
                            break;
                        }
                        index[d] = 0;
                    }
                }
            }
        }
        self.bump_version();
        Ok(())
    }
}
