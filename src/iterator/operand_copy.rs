//! The copy the build pipeline needs but does not own: an input that
//! partially overlaps an output is copied first (resolve_overlap_by_copy),
//! and a CPU scalar input is converted to the common dtype. The copy
//! kernel is built on the iterator, so the iterator names it only through
//! this trait: the pipeline is generic over it, and the build entry points
//! (kernels/iter_build.rs) pass the copy kernel. Static dispatch: the
//! build compiles to the same code as a direct call.

use crate::error::Result;
use crate::tensor::{MemoryFormat, Tensor};
use crate::DType;

/// A copy with dtype conversion and broadcasting, and the two tensor-level
/// operations made of it.
pub(crate) trait OperandCopy {
    /// Copies `src` into `dst`, converting dtypes and broadcasting `src`
    /// to `dst`'s shape.
    fn copy_(dst: &Tensor, src: &Tensor) -> Result<()>;

    /// A copy of `t` with its own storage, laid out in `format`.
    #[inline]
    fn clone_tensor(t: &Tensor, format: MemoryFormat) -> Result<Tensor> {
        let out = t.empty_like(format)?;
        Self::copy_(&out, t)?;
        Ok(out)
    }

    /// A copy of `t` converted to `dtype` (same layout when dense); `t`
    /// itself when it already has that dtype.
    #[inline]
    fn to_dtype(t: &Tensor, dtype: DType) -> Result<Tensor> {
        if dtype == t.dtype() {
            return Ok(t.clone());
        }
        let out = t.empty_like_dtype(MemoryFormat::Preserve, dtype)?;
        Self::copy_(&out, t)?;
        Ok(out)
    }
}
