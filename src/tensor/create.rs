//! Making tensors: the factories (empty, strided, from a storage, like
//! another, a wrapped scalar) and views' aliases, each checked against
//! its storage.

use super::layout::{self, LayoutFlags, MemoryFormat};
use super::shape::Dims;
use super::version::VersionSlot;
use super::{Tensor, TensorImpl, TensorMeta, MAX_DIMS};
use crate::device::Device;
use crate::dtype::{convert::scalar_to_bytes, DType};
use crate::error::Result;
use crate::refcount::Ref;
use crate::storage::Storage;
use std::cell::UnsafeCell;

pub(super) fn check_dims(sizes: &[i64], strides: &[i64]) -> Result<()> {
    crate::ensure!(
        sizes.len() <= MAX_DIMS,
        Shape,
        "{} dims requested: at most {MAX_DIMS} are supported",
        sizes.len()
    );
    crate::ensure!(
        sizes.len() == strides.len(),
        Shape,
        "sizes {sizes:?} and strides {strides:?} have different lengths"
    );
    Ok(())
}

/// Checks that a view of `sizes`/`strides`/`offset` fits in `storage`;
/// returns the bytes it spans (its extent).
pub(super) fn check_bounds(
    storage: &Storage,
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    dtype: DType,
) -> Result<usize> {
    let needed = layout::storage_nbytes_needed(sizes, strides, offset, dtype.itemsize())?;
    let have = storage.nbytes();
    crate::ensure!(
        needed <= have,
        Shape,
        "sizes {sizes:?}, strides {strides:?}, storage offset {offset} and itemsize {} requiring \
         a storage size of {needed} are out of bounds for storage of size {have}",
        dtype.itemsize()
    );
    Ok(needed)
}

impl Tensor {
    fn build(
        storage: Storage,
        offset: i64,
        sizes: Dims,
        strides: Dims,
        dtype: DType,
        version: VersionSlot,
    ) -> Result<Tensor> {
        check_dims(&sizes, &strides)?;
        let numel = layout::checked_numel(&sizes)?;
        let extent = check_bounds(&storage, &sizes, &strides, offset, dtype)?;
        let flags = LayoutFlags::compute(&sizes, &strides, numel);
        Ok(Tensor::assemble(
            storage, offset, sizes, strides, dtype, numel, flags, extent, version,
        ))
    }

    /// Puts checked parts together.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn assemble(
        storage: Storage,
        offset: i64,
        sizes: Dims,
        strides: Dims,
        dtype: DType,
        numel: i64,
        flags: LayoutFlags,
        extent: usize,
        version: VersionSlot,
    ) -> Tensor {
        Tensor(Ref::new(TensorImpl {
            dtype,
            wrapped_number: false,
            meta: UnsafeCell::new(TensorMeta {
                storage: Some(storage),
                offset,
                sizes,
                strides,
                numel,
                flags,
                extent,
            }),
            version,
        }))
    }

    /// An uninitialized contiguous tensor on `device`, from the allocator
    /// registered for the device type.
    pub fn empty(sizes: &[i64], dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::empty_with_format(sizes, dtype, device, MemoryFormat::Contiguous)
    }

    /// An uninitialized tensor laid out in `format`.
    pub fn empty_with_format(
        sizes: &[i64],
        dtype: DType,
        device: Device,
        format: MemoryFormat,
    ) -> Result<Tensor> {
        let strides = layout::strides_for_format(sizes, format)?;
        Tensor::empty_strided(sizes, &strides, dtype, device)
    }

    /// An uninitialized tensor with the given strides (storage just large
    /// enough for them).
    pub fn empty_strided(
        sizes: &[i64],
        strides: &[i64],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        check_dims(sizes, strides)?;
        let numel = layout::checked_numel(sizes)?;
        let nbytes = layout::storage_nbytes_needed(sizes, strides, 0, dtype.itemsize())?;
        Tensor::on_new_storage(sizes, strides, numel, nbytes, dtype, device)
    }

    /// A tensor of `sizes`/`strides` (numel elements) on a fresh storage of
    /// `nbytes` from the device's allocator, which the caller sized for
    /// exactly these strides: no bounds check. Inlined: as a call it made
    /// the iterator build longer (benches/PERF_RESULTS.md,
    /// "src/tensor/mod.rs").
    #[inline(always)]
    fn on_new_storage(
        sizes: &[i64],
        strides: &[i64],
        numel: i64,
        nbytes: usize,
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        let storage = Storage::new(nbytes, device, true)?;
        let flags = LayoutFlags::compute(sizes, strides, numel);
        Ok(Tensor::assemble(
            storage,
            0,
            Dims::from_slice(sizes),
            Dims::from_slice(strides),
            dtype,
            numel,
            flags,
            nbytes,
            VersionSlot::new(),
        ))
    }

    /// An uninitialized tensor whose strides lay its elements out densely
    /// (a permutation of contiguous strides, as the iterator gives its
    /// outputs), so the storage holds exactly numel elements. The caller
    /// has checked the dims (at most MAX_DIMS, sizes >= 0, one stride per
    /// size); only the byte count can still overflow.
    pub(crate) fn empty_dense(
        sizes: &[i64],
        strides: &[i64],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        debug_assert!(sizes.len() == strides.len() && sizes.len() <= MAX_DIMS);
        let numel = layout::checked_numel(sizes)?;
        let nbytes = (numel as u64)
            .checked_mul(dtype.itemsize() as u64)
            .filter(|&n| n <= isize::MAX as u64)
            .map(|n| n as usize)
            .ok_or_else(|| {
                crate::err!(
                    OutOfMemory,
                    "the storage size needed by sizes {sizes:?} of {} overflows",
                    dtype.name()
                )
            })?;
        debug_assert_eq!(
            layout::storage_nbytes_needed(sizes, strides, 0, dtype.itemsize()).ok(),
            Some(nbytes)
        );
        Tensor::on_new_storage(sizes, strides, numel, nbytes, dtype, device)
    }

    /// As [`Tensor::empty_dense`], the storage from `allocator` (which
    /// must allocate on `device`'s type) instead of the registry's.
    pub(crate) fn empty_dense_from(
        sizes: &[i64],
        strides: &[i64],
        dtype: DType,
        device: Device,
        allocator: &crate::Allocator,
    ) -> Result<Tensor> {
        let own = allocator.default_device().device_type;
        crate::ensure!(
            own == device.device_type,
            Device,
            "allocator '{}' allocates on {}, the tensor is on {device}",
            allocator.name(),
            own.name()
        );
        let numel = layout::checked_numel(sizes)?;
        let nbytes = layout::storage_nbytes_needed(sizes, strides, 0, dtype.itemsize())?;
        let storage = Storage::new_on(nbytes, allocator, device, true)?;
        Tensor::from_storage(&storage, 0, sizes, Some(strides), dtype)
            .inspect(|t| debug_assert_eq!(t.numel(), numel))
    }

    /// A tensor viewing `storage` (strides None: contiguous).
    pub fn from_storage(
        storage: &Storage,
        offset: i64,
        sizes: &[i64],
        strides: Option<&[i64]>,
        dtype: DType,
    ) -> Result<Tensor> {
        let strides: Dims = match strides {
            Some(s) => Dims::from_slice(s),
            None => layout::contiguous_strides(sizes),
        };
        Tensor::build(
            storage.clone(),
            offset,
            Dims::from_slice(sizes),
            strides,
            dtype,
            VersionSlot::new(),
        )
    }

    /// An uninitialized tensor with this one's sizes, dtype and device, laid
    /// out in `format` (Preserve: same strides when this tensor is
    /// non-overlapping and dense, else dense strides in the same dim order).
    pub fn empty_like(&self, format: MemoryFormat) -> Result<Tensor> {
        self.empty_like_dtype(format, self.dtype())
    }

    /// As empty_like, with another dtype.
    pub fn empty_like_dtype(&self, format: MemoryFormat, dtype: DType) -> Result<Tensor> {
        match format {
            MemoryFormat::Preserve if self.is_non_overlapping_and_dense() => {
                Tensor::empty_strided(self.sizes(), self.strides(), dtype, self.device())
            }
            MemoryFormat::Preserve => {
                let strides = layout::infer_dense_strides(self.sizes(), self.strides());
                Tensor::empty_strided(self.sizes(), &strides, dtype, self.device())
            }
            f => Tensor::empty_with_format(self.sizes(), dtype, self.device(), f),
        }
    }

    /// A 0-dim CPU tensor holding `value` that acts as a wrapped number in
    /// type promotion (its dtype: Bool, Long, UInt64, Double or
    /// ComplexDouble).
    pub fn wrapped_scalar(value: crate::dtype::Scalar) -> Result<Tensor> {
        let dtype = value.dtype();
        let storage = Storage::new(dtype.itemsize(), Device::CPU, false)?;
        let mut t = Tensor::build(
            storage,
            0,
            Dims::new(),
            Dims::new(),
            dtype,
            VersionSlot::new(),
        )?;
        Ref::get_mut(&mut t.0)
            .expect("a new tensor is unique")
            .wrapped_number = true;
        let bytes = scalar_to_bytes(value, dtype)?;
        // SAFETY: the storage was made above for one element of `dtype`
        // (itemsize bytes, at most the 16 `bytes` holds) and nothing else
        // refers to it yet.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), t.data_ptr() as *mut u8, dtype.itemsize())
        };
        // As fill_ did: a written tensor's version moves on.
        t.bump_version();
        Ok(t)
    }

    /// Channels-last (3d) when the strides are laid out that way and the
    /// tensor is not plainly contiguous, else contiguous.
    pub fn suggest_memory_format(&self) -> MemoryFormat {
        let f = self.layout_flags();
        if !f.contiguous && f.channels_last {
            MemoryFormat::ChannelsLast
        } else if !f.contiguous && f.channels_last_3d {
            MemoryFormat::ChannelsLast3d
        } else {
            MemoryFormat::Contiguous
        }
    }

    /// A tensor sharing this one's storage and version counter.
    pub(crate) fn alias(&self, offset: i64, sizes: Dims, strides: Dims) -> Result<Tensor> {
        Tensor::build(
            self.storage().clone(),
            offset,
            sizes,
            strides,
            self.dtype(),
            VersionSlot::shared_with(&self.version),
        )
    }
}
