//! Element copies between tensors of the same dtype with a plain strided
//! loop. The built-in kernels replace this path for casts and speed; it
//! stays as the reference the kernels are tested against.

use super::Tensor;
use crate::error::Result;

/// Copies `src` into `dst` element by element; `src` is broadcast to
/// `dst`'s sizes. Same dtype, CPU only.
pub fn copy_(dst: &Tensor, src: &Tensor) -> Result<()> {
    crate::ensure!(
        dst.dtype() == src.dtype(),
        DType,
        "copy from {} to {}: this path needs equal dtypes",
        src.dtype(),
        dst.dtype()
    );
    crate::ensure!(
        dst.device().is_cpu() && src.device().is_cpu(),
        Device,
        "copy from {} to {}: this path copies host memory only",
        src.device(),
        dst.device()
    );
    let src = src.expand(dst.sizes())?;
    if dst.numel() == 0 {
        return Ok(());
    }
    let item = dst.itemsize() as isize;
    let sizes = dst.sizes();
    let (ds, ss) = (dst.strides(), src.strides());
    let (d0, s0) = (dst.data_ptr() as *mut u8, src.data_ptr() as *const u8);
    let mut index = vec![0i64; sizes.len()];
    let (mut doff, mut soff) = (0isize, 0isize);
    loop {
        // SAFETY: the bounds checks of both tensors guarantee that every
        // index within sizes addresses an element inside its storage.
        unsafe {
            std::ptr::copy(
                s0.offset(soff * item),
                d0.offset(doff * item),
                item as usize,
            )
        };
        // Advance the odometer, innermost dim first.
        let mut d = sizes.len();
        loop {
            if d == 0 {
                dst.bump_version();
                return Ok(());
            }
            d -= 1;
            index[d] += 1;
            doff += ds[d] as isize;
            soff += ss[d] as isize;
            if index[d] < sizes[d] {
                break;
            }
            doff -= ds[d] as isize * sizes[d] as isize;
            soff -= ss[d] as isize * sizes[d] as isize;
            index[d] = 0;
        }
    }
}
