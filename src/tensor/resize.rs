//! Changing a tensor's geometry in place (c10's `set_` and `resize_`,
//! over the one path they share: new metadata at a storage offset, the
//! storage grown first when it is resizable and too small, as c10's
//! `maybe_resize_storage`; never shrunk).

use super::create::{check_bounds, check_dims};
use super::layout::{self, LayoutFlags, MemoryFormat};
use super::shape::Dims;
use super::{Tensor, TensorMeta};
use crate::error::Result;
use crate::storage::Storage;

impl Tensor {
    /// Points this tensor at `storage` with new offset, sizes and strides
    /// (strides None: contiguous), as c10's `set_`: a resizable storage
    /// that holds fewer bytes than the view spans is grown to them (its
    /// first bytes kept, as [`crate::storage::StorageImpl::resize`]); a
    /// fixed one is refused (Shape, naming the bytes needed). Bumps the
    /// version. On error nothing changed.
    ///
    /// # Safety
    /// No other thread may use this tensor during the call, nor `storage`
    /// when it must grow; slices from `sizes()`/`strides()` taken before
    /// it must not be used after, nor pointers into `storage`'s old memory
    /// after a growth.
    pub unsafe fn set_(
        &self,
        storage: &Storage,
        offset: i64,
        sizes: &[i64],
        strides: Option<&[i64]>,
    ) -> Result<()> {
        let strides: Dims = match strides {
            Some(s) => Dims::from_slice(s),
            // Checked as c10's set_sizes_contiguous: an empty tensor's
            // strides may still overflow.
            None => layout::strides_for_format(sizes, MemoryFormat::Contiguous)?,
        };
        if !storage.resizable() {
            check_dims(sizes, &strides)?;
            check_bounds(storage, sizes, &strides, offset, self.dtype())
                .map_err(|e| e.context("set_ onto a storage that is not resizable"))?;
        }
        // SAFETY: set_'s contract is place's.
        unsafe { self.place(storage, offset, sizes, strides) }
    }

    /// Gives this tensor `sizes` with contiguous strides in `format` at its
    /// storage offset, as c10's `resize_(sizes, memory_format)`: its
    /// storage, when resizable and smaller than `(offset + numel) *
    /// itemsize` bytes, grows to that (the first bytes kept, the rest
    /// uninitialized; never shrunk). Bumps the version. On error nothing
    /// changed.
    ///
    /// Errors: a format that does not fit the dims (channels-last needs 4,
    /// channels-last-3d 5) or negative sizes (Shape); Preserve
    /// (InvalidArgument: c10 refuses it too); a fixed storage too small
    /// (NotResizable); the storage's own refusals to move its memory
    /// (read-only, a live DLPack export) and the allocator's.
    ///
    /// # Safety
    /// No other thread may use this tensor during the call, nor its
    /// storage when it must grow; slices from `sizes()`/`strides()` taken
    /// before it must not be used after, nor pointers into the storage's
    /// old memory after a growth.
    pub unsafe fn resize_(&self, sizes: &[i64], format: MemoryFormat) -> Result<()> {
        crate::ensure!(
            format != MemoryFormat::Preserve,
            InvalidArgument,
            "resize_ to sizes {sizes:?} in the preserve memory format: expected contiguous, \
             channels last or channels last 3d (a resize has no layout to preserve)"
        );
        // Negative sizes first: they must not reach the strides' product.
        layout::checked_numel(sizes)?;
        let strides = layout::strides_for_format(sizes, format)?;
        // SAFETY: resize_'s contract is resize_strided's.
        unsafe { self.resize_strided(sizes, strides) }
    }

    /// As [`Tensor::resize_`] with the strides given (in elements; the
    /// iterator's outputs take the loop's dim order): the path both
    /// resize_ and the iterator's resize of an output take.
    ///
    /// # Safety
    /// As [`Tensor::resize_`].
    pub(crate) unsafe fn resize_strided(&self, sizes: &[i64], strides: Dims) -> Result<()> {
        let storage = self.storage().clone();
        // SAFETY: the caller's contract is place's.
        unsafe { self.place(&storage, self.storage_offset(), sizes, strides) }
    }

    /// The shared path: checks the geometry, grows `storage` to the bytes
    /// it spans when needed (c10's maybe_resize_storage: only a resizable
    /// storage grows, NotResizable otherwise), then replaces the metadata
    /// and bumps the version. The storage grows before anything of the
    /// tensor changes, so an error leaves the tensor as it was.
    ///
    /// # Safety
    /// No other thread may use this tensor during the call, nor `storage`
    /// when it must grow; slices of the old sizes / strides must not be
    /// used after.
    unsafe fn place(
        &self,
        storage: &Storage,
        offset: i64,
        sizes: &[i64],
        strides: Dims,
    ) -> Result<()> {
        check_dims(sizes, &strides)?;
        let numel = layout::checked_numel(sizes)?;
        let extent = layout::storage_nbytes_needed(sizes, &strides, offset, self.itemsize())?;
        let have = storage.nbytes();
        if extent > have {
            // SAFETY: the caller guarantees that no other thread uses the
            // storage while it grows, resize's contract.
            unsafe { storage.resize(extent) }.map_err(|e| {
                e.context(format!(
                    "sizes {sizes:?} with strides {:?} at storage offset {offset} need {extent} \
                     bytes, the storage holds {have}",
                    &strides[..]
                ))
            })?;
        }
        let flags = LayoutFlags::compute(sizes, &strides, numel);
        let new_meta = TensorMeta {
            storage: Some(storage.clone()),
            offset,
            sizes: Dims::from_slice(sizes),
            strides,
            numel,
            flags,
            extent,
        };
        // SAFETY: the metadata is in an UnsafeCell; the caller guarantees
        // that no other thread uses the tensor during the call and that no
        // slice of the old sizes / strides is used after it, so this &mut,
        // which lives for the replace only, is the only reference to it.
        let old = std::mem::replace(unsafe { &mut *self.meta.get() }, new_meta);
        drop(old);
        self.bump_version();
        Ok(())
    }
}
