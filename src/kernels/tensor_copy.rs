//! The `Tensor` methods that run the copy kernel: conversions, clones, and
//! the view operations that copy when the strides do not allow a view
//! (reshape, flatten); and `from_data`, a tensor copied from host bytes
//! (c10's `from_blob` + `clone`). They are defined here, above the kernels they call,
//! so that tensor/ does not depend on kernels/ (as c10's TensorImpl does
//! not call ATen).

use super::copy::CopyKernel;
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::OperandCopy;
use crate::tensor::shape::{self, wrap_dim, Dims};
use crate::tensor::{layout, MemoryFormat, Tensor};

impl Tensor {
    /// A copy converted to `dtype` (same layout when dense); this tensor
    /// itself when it already has that dtype.
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        CopyKernel::to_dtype(self, dtype)
    }

    /// A view with the new shape when the strides allow it, else a
    /// contiguous copy with that shape.
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let sizes = shape::infer_size(shape, self.numel())?;
        match shape::view_strides(self.sizes(), self.strides(), &sizes) {
            Some(strides) => self.alias(self.storage_offset(), sizes, strides),
            None => {
                let copy = self.clone_tensor(MemoryFormat::Contiguous)?;
                let strides = layout::contiguous_strides(&sizes);
                copy.alias(0, sizes, strides)
            }
        }
    }

    /// Merges dims start_dim..=end_dim into one (reshape: a view when
    /// possible).
    pub fn flatten(&self, start_dim: i64, end_dim: i64) -> Result<Tensor> {
        let n = self.ndim();
        if n == 0 {
            return self.reshape(&[1]);
        }
        let (s, e) = (wrap_dim(start_dim, n)?, wrap_dim(end_dim, n)?);
        crate::ensure!(
            s <= e,
            Shape,
            "flatten start dim {s} comes after end dim {e}: expected start <= end"
        );
        if s == e {
            return self.alias(
                self.storage_offset(),
                Dims::from_slice(self.sizes()),
                Dims::from_slice(self.strides()),
            );
        }
        let sizes = self.sizes();
        let merged: i64 = sizes[s..=e].iter().product();
        let mut shape: Dims = Dims::from_slice(&sizes[..s]);
        shape.push(merged);
        shape.extend_from_slice(&sizes[e + 1..]);
        self.reshape(&shape)
    }

    /// This tensor if it is contiguous in `format`, else a copy that is.
    pub fn contiguous(&self, format: MemoryFormat) -> Result<Tensor> {
        if self.is_contiguous(format) {
            return Ok(self.clone());
        }
        self.clone_tensor(format)
    }

    /// A copy with its own storage, laid out in `format` (Preserve: same
    /// strides when dense, else the suggested format).
    pub fn clone_tensor(&self, format: MemoryFormat) -> Result<Tensor> {
        CopyKernel::clone_tensor(self, format)
    }

    /// A new contiguous tensor of `sizes` and `dtype` on `device` (memory
    /// from the allocator registered for it) holding a copy of `data`: its
    /// elements in row-major order, exactly `numel * itemsize` bytes (c10's
    /// `from_blob(..).clone()`; the caller's bytes are not kept). The copy
    /// goes through the allocator's `copy_data` (host to device memory for
    /// a device allocator).
    pub fn from_data(
        data: &[u8],
        sizes: &[i64],
        dtype: DType,
        device: crate::Device,
    ) -> Result<Tensor> {
        let t = Tensor::empty(sizes, dtype, device)?;
        let nbytes = t.numel() as u64 * dtype.itemsize() as u64;
        crate::ensure!(
            data.len() as u64 == nbytes,
            InvalidArgument,
            "{} bytes of data for a {} tensor of sizes {sizes:?}: expected exactly its {nbytes} \
             bytes",
            data.len(),
            dtype.name()
        );
        if nbytes == 0 {
            return Ok(t);
        }
        let storage = t.storage();
        let alloc = storage
            .allocator()
            .ok_or_else(|| crate::err!(Internal, "a new tensor on {} has no allocator", device))?;
        // SAFETY: t is a fresh contiguous tensor whose storage holds exactly
        // nbytes bytes from its first element, only this function holds it;
        // data is nbytes bytes of host memory of the caller's, a distinct
        // allocation.
        unsafe { alloc.copy_data(t.data_ptr(), data.as_ptr().cast(), data.len()) }?;
        Ok(t)
    }

    /// The bytes a contiguous tensor of `sizes` and `dtype` holds (what
    /// [`Tensor::from_data`] takes): sizes checked non-negative, the
    /// product checked for overflow.
    pub fn contiguous_nbytes(sizes: &[i64], dtype: DType) -> Result<usize> {
        let numel = layout::checked_numel(sizes)?;
        (numel as u64)
            .checked_mul(dtype.itemsize() as u64)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| {
                crate::err!(
                    OutOfMemory,
                    "a {} tensor of sizes {sizes:?}: its bytes overflow the address space",
                    dtype.name()
                )
            })
    }
}
