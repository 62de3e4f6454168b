//! Tensors: sizes, strides and an offset over a shared storage (c10's
//! TensorImpl), with cached layout flags and a version counter shared by
//! views.
//!
//! Reads are safe. Changing the metadata of a tensor shared between
//! threads (`set_`) is `unsafe`: no other thread may use the tensor during
//! the call (c10's rule).

mod create;
pub mod layout;
mod resize;
pub mod shape;
mod streams;
mod version;
mod views;

pub use layout::{LayoutFlags, MemoryFormat};
pub use shape::Dims;

use crate::device::Device;
use crate::dtype::DType;
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

impl Tensor {
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
