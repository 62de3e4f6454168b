//! The `Tensor` methods that run the copy kernel: conversions, clones, and
//! the view operations that copy when the strides do not allow a view
//! (reshape, flatten). They are defined here, above the kernels they call,
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
}
