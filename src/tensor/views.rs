//! Views: new tensors over the same storage (and version counter). The
//! operations that copy when a view cannot do (reshape, flatten,
//! contiguous, clone) run the copy kernel: they are in
//! kernels/tensor_copy.rs.

use super::shape::{self, wrap_dim, Dims};
use super::Tensor;
use crate::error::Result;

impl Tensor {
    /// A view with explicit sizes, strides and storage offset.
    pub fn as_strided(&self, sizes: &[i64], strides: &[i64], offset: i64) -> Result<Tensor> {
        self.alias(offset, Dims::from_slice(sizes), Dims::from_slice(strides))
    }

    /// The same elements with a new shape, without copying (one size may be
    /// -1); fails when the strides make it impossible (use reshape).
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        let sizes = shape::infer_size(shape, self.numel())?;
        let Some(strides) = shape::view_strides(self.sizes(), self.strides(), &sizes) else {
            crate::bail!(
                Shape,
                "view to shape {shape:?} is not compatible with the input's sizes {:?} and \
                 strides {:?} (a new dim would span non-contiguous memory): use reshape, \
                 which copies when it must",
                self.sizes(),
                self.strides()
            );
        };
        self.alias(self.storage_offset(), sizes, strides)
    }

    /// Reorders the dims: dim i of the result is dim dims[i] of the input.
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        let n = self.ndim();
        crate::ensure!(
            dims.len() == n,
            Shape,
            "permute dims {dims:?} has {} entries: expected one per dim of the {n}-dim input",
            dims.len()
        );
        let mut seen = [false; super::MAX_DIMS];
        let mut sizes = Dims::new();
        let mut strides = Dims::new();
        for &d in dims {
            let w = wrap_dim(d, n)?;
            crate::ensure!(!seen[w], Shape, "permute dims {dims:?} repeat dim {w}");
            seen[w] = true;
            sizes.push(self.sizes()[w]);
            strides.push(self.strides()[w]);
        }
        self.alias(self.storage_offset(), sizes, strides)
    }

    /// Swaps two dims.
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Result<Tensor> {
        let n = self.ndim();
        let (a, b) = (wrap_dim(dim0, n)?, wrap_dim(dim1, n)?);
        let mut sizes: Dims = Dims::from_slice(self.sizes());
        let mut strides: Dims = Dims::from_slice(self.strides());
        if n > 0 {
            sizes.swap(a, b);
            strides.swap(a, b);
        }
        self.alias(self.storage_offset(), sizes, strides)
    }

    /// Broadcasts to `sizes` without copying: size-1 dims and new leading
    /// dims get stride 0; -1 keeps a size.
    pub fn expand(&self, sizes: &[i64]) -> Result<Tensor> {
        let (s, st) = shape::expand_geometry(self.sizes(), self.strides(), sizes)?;
        self.alias(self.storage_offset(), s, st)
    }

    /// Elements start..start+length of `dim` (start may be negative).
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        crate::ensure!(
            self.ndim() > 0,
            Shape,
            "narrow of a 0-dim tensor: expected at least one dim"
        );
        let d = wrap_dim(dim, self.ndim())?;
        let size = self.sizes()[d];
        crate::ensure!(
            (-size..=size).contains(&start),
            Shape,
            "narrow start {start} is out of range for dim {d} of size {size}: expected a start \
             in [{}, {size}]",
            -size
        );
        let start = if start < 0 { start + size } else { start };
        crate::ensure!(
            length >= 0 && start + length <= size,
            Shape,
            "narrow start ({start}) + length ({length}) exceeds dim {d} of size {size}"
        );
        let mut sizes: Dims = Dims::from_slice(self.sizes());
        sizes[d] = length;
        let offset = self.offset_of(d, start)?;
        self.alias(offset, sizes, Dims::from_slice(self.strides()))
    }

    /// Index `index` of `dim`, removing that dim (index may be negative).
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        crate::ensure!(
            self.ndim() > 0,
            Shape,
            "select of a 0-dim tensor: expected at least one dim"
        );
        let d = wrap_dim(dim, self.ndim())?;
        let size = self.sizes()[d];
        crate::ensure!(
            (-size..size).contains(&index),
            Shape,
            "select index {index} is out of range for dim {d} of size {size}: expected an index \
             in [{}, {}]",
            -size,
            size - 1
        );
        let index = if index < 0 { index + size } else { index };
        let offset = self.offset_of(d, index)?;
        let mut sizes: Dims = Dims::from_slice(self.sizes());
        let mut strides: Dims = Dims::from_slice(self.strides());
        sizes.remove(d);
        strides.remove(d);
        self.alias(offset, sizes, strides)
    }

    /// The storage offset of index `index` of dim `d`. Refused past int64,
    /// which only a tensor with no element can reach (its strides are not
    /// bounded by a storage).
    fn offset_of(&self, d: usize, index: i64) -> Result<i64> {
        let (stride, offset) = (self.strides()[d], self.storage_offset());
        index
            .checked_mul(stride)
            .and_then(|o| o.checked_add(offset))
            .ok_or_else(|| {
                crate::err!(
                    OutOfMemory,
                    "index {index} of dim {d} (stride {stride}) from storage offset {offset} \
                     overflows int64 (expected an offset that fits)"
                )
            })
    }

    /// Removes `dim` if its size is 1 (otherwise an unchanged view).
    pub fn squeeze(&self, dim: i64) -> Result<Tensor> {
        let d = wrap_dim(dim, self.ndim())?;
        let mut sizes: Dims = Dims::from_slice(self.sizes());
        let mut strides: Dims = Dims::from_slice(self.strides());
        if self.ndim() > 0 && sizes[d] == 1 {
            sizes.remove(d);
            strides.remove(d);
        }
        self.alias(self.storage_offset(), sizes, strides)
    }

    /// Removes every size-1 dim.
    pub fn squeeze_all(&self) -> Result<Tensor> {
        let (sizes, strides): (Dims, Dims) = self
            .sizes()
            .iter()
            .zip(self.strides())
            .filter(|(s, _)| **s != 1)
            .map(|(s, st)| (*s, *st))
            .unzip();
        self.alias(self.storage_offset(), sizes, strides)
    }

    /// Inserts a size-1 dim at `dim` (in [-(ndim+1), ndim]).
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let n = self.ndim();
        let d = wrap_dim(dim, n + 1)?;
        let mut sizes: Dims = Dims::from_slice(self.sizes());
        let mut strides: Dims = Dims::from_slice(self.strides());
        let stride = if d >= n {
            1
        } else {
            sizes[d].checked_mul(strides[d]).ok_or_else(|| {
                crate::err!(
                    OutOfMemory,
                    "unsqueeze at dim {d}: size {} times stride {} overflows int64 (expected a \
                     stride that fits)",
                    sizes[d],
                    strides[d]
                )
            })?
        };
        sizes.insert(d, 1);
        strides.insert(d, stride);
        self.alias(self.storage_offset(), sizes, strides)
    }
}
