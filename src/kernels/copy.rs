//! Copy with dtype conversion and broadcasting (`tsr_tensor_copy`); also
//! what contiguous(), clone(), the iterator's cast temporaries and
//! resolve_overlap_by_copy use.

use crate::dtype::convert::{read_scalar, scalar_to_bytes};
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::{IterConfig, TensorIterator};
use crate::tensor::Tensor;

/// Copies `src` into `dst`, converting dtypes and broadcasting `src` to
/// `dst`'s shape. Bumps dst's version.
pub fn copy_(dst: &Tensor, src: &Tensor) -> Result<()> {
    crate::ensure!(
        dst.device().is_cpu() && src.device().is_cpu(),
        Device,
        "copy from {} to {}: only host copies run here (device copies go through the allocators)",
        src.device(),
        dst.device()
    );
    if dst.numel() == 0 {
        return Ok(());
    }
    if Tensor::ptr_eq(dst, src) {
        return Ok(());
    }
    let mut config = IterConfig::new();
    config
        .add_output(Some(dst.clone()))?
        .add_input(src.clone())?
        .resize_outputs(false)
        .check_all_same_dtype(false)
        .check_mem_overlap(true)
        .resolve_overlap_by_copy(true);
    let it = config.build()?;
    copy_iter(&it)?;
    dst.bump_version();
    Ok(())
}

/// Runs a copy over a built two-operand iterator (output 0, input 1).
pub(crate) fn copy_iter(it: &TensorIterator) -> Result<()> {
    let (out_t, in_t) = (it.dtype(0), it.dtype(1));
    if out_t == in_t {
        let item = out_t.itemsize();
        it.for_each(
            &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
                for j in 0..n1 {
                    // SAFETY: the iterator guarantees data + i*stride stays in
                    // each operand's storage for i < n0, j < n1.
                    unsafe {
                        let d = data[0].offset((j * strides[2]) as isize);
                        let s = data[1].offset((j * strides[3]) as isize);
                        copy_run(d, s, n0, strides[0], strides[1], item);
                    }
                }
            },
            0,
        );
        return Ok(());
    }
    check_convertible(in_t)?;
    check_convertible(out_t)?;
    it.for_each(
        &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
            for j in 0..n1 {
                for i in 0..n0 {
                    // SAFETY: as above; both dtypes were checked convertible.
                    unsafe {
                        let d = data[0].offset((j * strides[2] + i * strides[0]) as isize);
                        let s = data[1].offset((j * strides[3] + i * strides[1]) as isize);
                        let v = read_scalar(s, in_t).expect("checked convertible");
                        let b = scalar_to_bytes(v, out_t).expect("checked convertible");
                        std::ptr::copy_nonoverlapping(b.as_ptr(), d, out_t.itemsize());
                    }
                }
            }
        },
        0,
    );
    Ok(())
}

fn check_convertible(d: DType) -> Result<()> {
    crate::ensure!(
        !(d.is_quantized() || d.is_float8()),
        Unsupported,
        "conversion to or from {d} is not supported"
    );
    Ok(())
}

/// Copies `n` elements of `item` bytes with byte strides.
///
/// # Safety
/// Every element addressed must lie in memory the caller owns.
unsafe fn copy_run(d: *mut u8, s: *const u8, n: i64, ds: i64, ss: i64, item: usize) {
    if ds == item as i64 && ss == item as i64 {
        // SAFETY: contiguous runs of n * item bytes, per the caller; memmove
        // semantics in case input and output alias exactly.
        unsafe { std::ptr::copy(s, d, n as usize * item) };
        return;
    }
    for i in 0..n as isize {
        // SAFETY: per the caller.
        unsafe { std::ptr::copy(s.offset(i * ss as isize), d.offset(i * ds as isize), item) };
    }
}
