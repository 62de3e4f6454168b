//! Tensors: sizes, strides and an offset over a shared storage (c10's
//! TensorImpl), with cached layout flags and a version counter shared by
//! views.
//!
//! Reads are safe. Changing the metadata of a tensor shared between
//! threads (`set_`) is `unsafe`: no other thread may use the tensor during
//! the call (c10's rule).

pub mod layout;
pub mod shape;
mod streams;
mod version;
mod views;

pub use layout::{LayoutFlags, MemoryFormat};
pub use shape::Dims;

use crate::device::Device;
use crate::dtype::{convert::scalar_to_bytes, DType};
use crate::error::Result;
use crate::refcount::{RcTarget, Ref, WeakRef};
use crate::storage::Storage;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use version::VersionSlot;

/// The most dims a tensor may have.
pub const MAX_DIMS: usize = 64;

struct TensorMeta {
    /// None only after the last strong reference went (release_resources).
    storage: Option<Storage>,
    offset: i64,
    sizes: Dims,
    strides: Dims,
    numel: i64,
    flags: LayoutFlags,
    /// The bytes of storage this view spans from the storage's start
    /// (`layout::storage_nbytes_needed`), checked against the storage's
    /// size when the tensor was made; [`TensorImpl::data_in_storage`]
    /// checks it again, since the storage may shrink later.
    extent: usize,
}

/// The object behind a [`Tensor`] handle.
pub struct TensorImpl {
    dtype: DType,
    /// A 0-dim tensor standing for a number in type promotion (c10's
    /// wrapped number).
    wrapped_number: bool,
    meta: UnsafeCell<TensorMeta>,
    version: VersionSlot,
}

// SAFETY: shared access only reads `meta`; writes go through `set_`,
// whose contract forbids concurrent use, or through `&mut` access.
unsafe impl Sync for TensorImpl {}
// SAFETY: every field is Send.
unsafe impl Send for TensorImpl {}

impl RcTarget for TensorImpl {
    fn release_resources(&mut self) {
        self.meta.get_mut().storage = None;
    }
}

impl TensorImpl {
    fn meta(&self) -> &TensorMeta {
        // SAFETY: writes happen only under set_'s no-concurrent-use
        // contract, so none overlaps this read.
        unsafe { &*self.meta.get() }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether this 0-dim tensor stands for a plain number in type
    /// promotion.
    pub fn is_wrapped_number(&self) -> bool {
        self.wrapped_number
    }

    /// The number of dims.
    pub fn ndim(&self) -> usize {
        self.meta().sizes.len()
    }

    /// The sizes.
    pub fn sizes(&self) -> &[i64] {
        &self.meta().sizes
    }

    /// The strides, in elements.
    pub fn strides(&self) -> &[i64] {
        &self.meta().strides
    }

    /// The offset of the first element in the storage, in elements.
    pub fn storage_offset(&self) -> i64 {
        self.meta().offset
    }

    /// The number of elements (1 for 0-dim tensors).
    pub fn numel(&self) -> i64 {
        self.meta().numel
    }

    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }

    /// The storage.
    pub fn storage(&self) -> &Storage {
        self.meta()
            .storage
            .as_ref()
            .expect("a tensor reached through a strong reference has its storage")
    }

    /// Whether the tensor's storage is read-only (every write refuses it).
    pub fn is_read_only(&self) -> bool {
        self.storage().is_read_only()
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.storage().device()
    }

    /// The address of the first element; NULL when the tensor is empty
    /// (c10's `data_ptr()`: no check that the storage still holds the
    /// tensor; code that reads or writes through the address asks
    /// [`TensorImpl::data_in_storage`] instead).
    pub fn data_ptr(&self) -> *mut c_void {
        let m = self.meta();
        if m.numel == 0 {
            return std::ptr::null_mut();
        }
        let base = self.storage().data() as *mut u8;
        if base.is_null() {
            return std::ptr::null_mut();
        }
        // Wrapping: the storage may have shrunk below the offset since the
        // tensor was made (data_in_storage refuses that case); the address
        // is only computed here, never read.
        base.wrapping_add(m.offset as usize * self.dtype.itemsize()) as *mut c_void
    }

    /// The address of the first element (NULL when the tensor is empty),
    /// after checking that the storage still holds every byte the tensor
    /// spans: a storage resized smaller (or replaced) under a live tensor
    /// makes it refer past the end of its memory. Every kernel, copy and
    /// export that reads or writes through a tensor takes its address
    /// here, once at its entry (a load and a compare, not a check per
    /// element). Err(Shape) names the sizes, the span and the storage's
    /// size.
    #[inline]
    pub fn data_in_storage(&self) -> Result<*mut c_void> {
        let m = self.meta();
        let have = self.storage().nbytes();
        if m.extent > have {
            return Err(self.outside_storage(m.extent, have));
        }
        Ok(self.data_ptr())
    }

    #[cold]
    #[inline(never)]
    fn outside_storage(&self, extent: usize, have: usize) -> crate::error::Error {
        let m = self.meta();
        crate::err!(
            Shape,
            "the tensor of sizes {:?}, strides {:?} and storage offset {} spans {extent} bytes of \
             its storage, which now holds {have} bytes (resized since the tensor was made): \
             expected a storage of at least {extent} bytes",
            &m.sizes[..],
            &m.strides[..],
            m.offset
        )
    }

    /// The cached layout flags.
    pub fn layout_flags(&self) -> LayoutFlags {
        self.meta().flags
    }

    /// Whether the tensor is contiguous in `format` (Preserve asks for
    /// row-major contiguity).
    pub fn is_contiguous(&self, format: MemoryFormat) -> bool {
        let f = self.meta().flags;
        match format {
            MemoryFormat::Contiguous | MemoryFormat::Preserve => f.contiguous,
            MemoryFormat::ChannelsLast => f.channels_last,
            MemoryFormat::ChannelsLast3d => f.channels_last_3d,
        }
    }

    /// Whether some permutation of the dims is contiguous.
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        self.meta().flags.non_overlapping_and_dense
    }

    /// The version shared with views (bumped by in-place writes).
    pub fn version(&self) -> u64 {
        self.version.get()
    }

    /// Records an in-place write.
    pub fn bump_version(&self) {
        self.version.bump()
    }
}

/// A refcounted tensor handle; clones share the same tensor (views are
/// separate tensors sharing the storage).
#[derive(Clone)]
pub struct Tensor(pub(crate) Ref<TensorImpl>);

/// A weak tensor handle.
#[derive(Clone)]
pub struct WeakTensor(pub(crate) WeakRef<TensorImpl>);

impl std::ops::Deref for Tensor {
    type Target = TensorImpl;
    fn deref(&self) -> &TensorImpl {
        &self.0
    }
}

fn check_dims(sizes: &[i64], strides: &[i64]) -> Result<()> {
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
fn check_bounds(
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

    /// Points this tensor at `storage` with new offset, sizes and strides
    /// (c10's set_); bumps the version.
    ///
    /// # Safety
    /// No other thread may use this tensor during the call, and slices
    /// from `sizes()`/`strides()` taken before it must not be used after.
    pub unsafe fn set_(
        &self,
        storage: &Storage,
        offset: i64,
        sizes: &[i64],
        strides: Option<&[i64]>,
    ) -> Result<()> {
        let strides: Dims = match strides {
            Some(s) => Dims::from_slice(s),
            None => layout::contiguous_strides(sizes),
        };
        check_dims(sizes, &strides)?;
        let numel = layout::checked_numel(sizes)?;
        let extent = check_bounds(storage, sizes, &strides, offset, self.dtype())?;
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

    /// The strong count.
    pub fn use_count(&self) -> usize {
        Ref::use_count(&self.0)
    }

    /// A weak handle.
    pub fn downgrade(&self) -> WeakTensor {
        WeakTensor(Ref::downgrade(&self.0))
    }

    /// Whether two handles are the same tensor.
    pub fn ptr_eq(a: &Tensor, b: &Tensor) -> bool {
        Ref::ptr_eq(&a.0, &b.0)
    }

    /// The refcounted object (for the C handle).
    pub fn as_rc(&self) -> &Ref<TensorImpl> {
        &self.0
    }

    /// Wraps a refcounted object.
    pub fn from_ref(r: Ref<TensorImpl>) -> Tensor {
        Tensor(r)
    }

    /// Unwraps into the refcounted object.
    pub fn into_ref(self) -> Ref<TensorImpl> {
        self.0
    }
}

impl WeakTensor {
    /// A strong handle, or None once expired.
    pub fn lock(&self) -> Option<Tensor> {
        self.0.lock().map(Tensor)
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("sizes", &self.sizes())
            .field("strides", &self.strides())
            .field("offset", &self.storage_offset())
            .field("dtype", &self.dtype())
            .field("device", &self.device())
            .finish()
    }
}

#[cfg(test)]
mod tests;
