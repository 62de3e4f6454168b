//! Tensors at the ABI: creation, getters, fill and copy. View functions
//! live in ffi/views.rs, set and resize in ffi/tensor_resize.rs.

pub(crate) use super::call::put_tensor;
use super::call::{check_not_null, dtype_arg, format_arg, getter, guard, i64_slice, read_sized};
use super::handle;
pub(crate) use super::handle::{tensor_handle, tensor_view};
use super::storage::{storage_handle, storage_ref, TsrStorage};
use super::types::*;
pub use super::types::{TsrTensor, TsrWeakTensor};
use crate::error::Result;
use crate::tensor::{Tensor, TensorImpl};
use std::ffi::c_void;

/// A new reference to the tensor behind a handle (the handle stays the
/// caller's; `tensor_impl` borrows without one).
///
/// # Safety
/// `t` NULL or a live tensor handle.
pub(crate) unsafe fn tensor_ref(t: *const TsrTensor, name: &str) -> Result<Tensor> {
    // SAFETY: `t` is NULL or a live TsrTensor (the header's contract,
    // ffi/handle.rs); clone_ref checks NULL and liveness.
    Ok(Tensor::from_ref(unsafe { handle::clone_ref(t, name)? }))
}

/// Borrows the tensor implementation behind a handle (no reference count
/// taken; `tensor_ref` takes one).
///
/// # Safety
/// `t` NULL or a live tensor handle that stays alive for 'a.
pub(crate) unsafe fn tensor_impl<'a>(t: *const TsrTensor, name: &str) -> Result<&'a TensorImpl> {
    // SAFETY: `t` is NULL or a live TsrTensor (the header's contract,
    // ffi/handle.rs); borrow checks NULL and liveness.
    unsafe { handle::borrow(t, name) }
}

/// Allocates an uninitialized contiguous tensor with the allocator
/// registered for `device`'s type and writes a new reference to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER (out, or sizes with ndim > 0);
/// TSR_ERR_SHAPE (negative sizes, ndim > TSR_MAX_DIMS);
/// TSR_ERR_INVALID_ARGUMENT (dtype or device number); TSR_ERR_DEVICE (no
/// allocator for the device); TSR_ERR_OUT_OF_MEMORY (including
/// numel * itemsize overflow).
///
/// # Safety
/// `sizes` NULL or readable for `ndim` values; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_empty(
    ndim: i64,
    sizes: *const i64,
    dtype: TsrDType,
    device: TsrDevice,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_empty", || {
        check_not_null(out, "out")?;
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        let t = Tensor::empty(sizes, dtype_arg(dtype)?, device.to_core()?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// A new contiguous tensor of `sizes` and `dtype` on `device` holding a
/// copy of the `numel * itemsize` bytes at `data` (its elements in
/// row-major order), in memory from the allocator registered for
/// `device`'s type (c10's `from_blob(..).clone()`: `data` is not kept and
/// may be freed on return). Writes a new reference to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER (data, out, or sizes with ndim > 0);
/// the rest as tsr_tensor_empty.
///
/// # Safety
/// `data` NULL or readable for `numel * itemsize` bytes; `sizes` NULL or
/// readable for `ndim` values; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_from_data(
    data: *const c_void,
    ndim: i64,
    sizes: *const i64,
    dtype: TsrDType,
    device: TsrDevice,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_from_data", || {
        check_not_null(data, "data")?;
        check_not_null(out, "out")?;
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        let dtype = dtype_arg(dtype)?;
        let device = device.to_core()?;
        let nbytes = Tensor::contiguous_nbytes(sizes, dtype)?;
        // SAFETY: data checked non-NULL; the header requires it readable for
        // numel * itemsize bytes, nbytes (checked not to overflow).
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), nbytes) };
        let t = Tensor::from_data(bytes, sizes, dtype, device)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// As tsr_tensor_empty, laid out in `format` (TSR_CHANNELS_LAST needs 4
/// dims, TSR_CHANNELS_LAST_3D 5).
///
/// # Safety
/// As tsr_tensor_empty.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_empty_format(
    ndim: i64,
    sizes: *const i64,
    dtype: TsrDType,
    device: TsrDevice,
    format: TsrMemoryFormat,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_empty_format", || {
        check_not_null(out, "out")?;
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        let t = Tensor::empty_with_format(
            sizes,
            dtype_arg(dtype)?,
            device.to_core()?,
            format_arg(format)?,
        )?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// Allocates an uninitialized tensor with the given strides (in
/// elements; a storage just large enough for them).
///
/// Errors: as tsr_tensor_empty, plus TSR_ERR_INVALID_ARGUMENT for negative
/// strides.
///
/// # Safety
/// `sizes`/`strides` NULL or readable for `ndim` values; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_empty_strided(
    ndim: i64,
    sizes: *const i64,
    strides: *const i64,
    dtype: TsrDType,
    device: TsrDevice,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_empty_strided", || {
        check_not_null(out, "out")?;
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        // SAFETY: the header requires `strides` readable for `ndim` values
        // when non-NULL; i64_slice checks the length and NULL.
        let strides = unsafe { i64_slice(strides, ndim, "strides")? };
        let t = Tensor::empty_strided(sizes, strides, dtype_arg(dtype)?, device.to_core()?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// An uninitialized tensor with `t`'s sizes, dtype and device, laid out in
/// `format` (TSR_PRESERVE keeps t's strides when t is dense).
///
/// # Safety
/// `t` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_empty_like(
    t: *const TsrTensor,
    format: TsrMemoryFormat,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_empty_like", || {
        check_not_null(out, "out")?;
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let r = unsafe { tensor_view(t, "t")? }.empty_like(format_arg(format)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, r) };
        Ok(())
    })
}

/// A tensor viewing `storage` (borrowed; the tensor keeps a reference):
/// `ndim` sizes, strides in elements (NULL: contiguous), offset in
/// elements. The highest addressed element must lie inside the storage.
///
/// Mind the order: the storage offset comes second and the dtype sixth,
/// unlike tsr_tensor_empty(ndim, sizes, dtype, ...); both are integers,
/// so C compiles a swap without a word (an offset of TSR_FLOAT = 6
/// elements, dtype 0 = TSR_BYTE when the offset was 0).
/// tsr_tensor_from_storage_desc names every argument instead.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_SHAPE (out of bounds, with the
/// storage size required); TSR_ERR_INVALID_ARGUMENT (dtype, negative
/// offset or strides).
///
/// # Safety
/// `storage` NULL or a live handle; arrays readable for `ndim` values;
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_from_storage(
    storage: *mut TsrStorage,
    storage_offset: i64,
    ndim: i64,
    sizes: *const i64,
    strides: *const i64,
    dtype: TsrDType,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_from_storage", || {
        check_not_null(out, "out")?;
        // SAFETY: `storage` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let s = unsafe { storage_ref(storage, "storage")? };
        // SAFETY: the header requires `sizes` readable for `ndim` values when
        // non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(sizes, ndim, "sizes")? };
        let strides = if strides.is_null() {
            None
        } else {
            // SAFETY: the header requires `strides` readable for `ndim` values
            // when non-NULL; i64_slice checks the length and NULL.
            Some(unsafe { i64_slice(strides, ndim, "strides")? })
        };
        let t = Tensor::from_storage(&s, storage_offset, sizes, strides, dtype_arg(dtype)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// A tensor's view of a storage, by field name, for
/// tsr_tensor_from_storage_desc: with designated initializers no two
/// integers can trade places unseen, as the storage offset and the dtype
/// can among tsr_tensor_from_storage's positional arguments.
///
/// ```c
/// int64_t sizes[2] = {2, 3};
/// TsrTensorDesc d = {.struct_size = sizeof d, .dtype = TSR_FLOAT,
///                    .ndim = 2, .sizes = sizes, .storage_offset = 4};
/// TsrTensor *t;
/// tsr_tensor_from_storage_desc(storage, &d, &t);
/// ```
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TsrTensorDesc {
    /// sizeof(TsrTensorDesc) as compiled by the caller.
    pub struct_size: u32,
    /// The element type.
    pub dtype: TsrDType,
    /// The number of dims (0..64).
    pub ndim: i64,
    /// `ndim` sizes (NULL only when ndim is 0).
    pub sizes: *const i64,
    /// `ndim` strides in elements; NULL: contiguous.
    pub strides: *const i64,
    /// The first element's index in the storage, in elements.
    pub storage_offset: i64,
}

/// tsr_tensor_from_storage with its arguments named in a TsrTensorDesc:
/// the same tensor, the same checks and errors, plus
/// TSR_ERR_NULL_POINTER (desc) and TSR_ERR_INVALID_ARGUMENT (a
/// struct_size that does not cover `storage_offset`).
///
/// # Safety
/// `storage` NULL or a live handle; `desc` NULL or valid for its
/// struct_size bytes, its arrays readable for `ndim` values; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_from_storage_desc(
    storage: *mut TsrStorage,
    desc: *const TsrTensorDesc,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_from_storage_desc", || {
        check_not_null(out, "out")?;
        check_not_null(desc, "desc")?;
        let min = std::mem::size_of::<TsrTensorDesc>();
        // SAFETY: desc is non-NULL and, by the header's contract, readable
        // for its struct_size bytes; TsrTensorDesc is integers and raw
        // pointers, valid for any bytes.
        let d = unsafe { read_sized(desc, min, "TsrTensorDesc")? };
        // SAFETY: `storage` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let s = unsafe { storage_ref(storage, "storage")? };
        // SAFETY: the header requires `sizes` readable for `ndim` values
        // when non-NULL; i64_slice checks the length and NULL.
        let sizes = unsafe { i64_slice(d.sizes, d.ndim, "desc.sizes")? };
        let strides = if d.strides.is_null() {
            None
        } else {
            // SAFETY: as sizes.
            Some(unsafe { i64_slice(d.strides, d.ndim, "desc.strides")? })
        };
        let t = Tensor::from_storage(&s, d.storage_offset, sizes, strides, dtype_arg(d.dtype)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// The number of dims; -1 for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_ndim(t: *const TsrTensor) -> i64 {
    getter("tsr_tensor_ndim", -1, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.ndim() as i64)
    })
}

/// The sizes (ndim values), borrowed: valid while `t` lives and is not
/// changed by tsr_tensor_set. NULL for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_sizes(t: *const TsrTensor) -> *const i64 {
    getter("tsr_tensor_sizes", std::ptr::null(), || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.sizes().as_ptr())
    })
}

/// The strides in elements (ndim values), borrowed like tsr_tensor_sizes.
/// NULL for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_strides(t: *const TsrTensor) -> *const i64 {
    getter("tsr_tensor_strides", std::ptr::null(), || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.strides().as_ptr())
    })
}

/// The size of `dim` (negative dims wrap); -1 for NULL or a dim out of
/// range (with a last-error message).
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_size(t: *const TsrTensor, dim: i64) -> i64 {
    getter("tsr_tensor_size", -1, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        let t = unsafe { tensor_impl(t, "t")? };
        crate::ensure!(t.ndim() > 0, Shape, "size of dim {dim} of a 0-dim tensor");
        Ok(t.sizes()[crate::tensor::shape::wrap_dim(dim, t.ndim())?])
    })
}

/// The stride of `dim` in elements (negative dims wrap); -1 for NULL or a
/// dim out of range.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_stride(t: *const TsrTensor, dim: i64) -> i64 {
    getter("tsr_tensor_stride", -1, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        let t = unsafe { tensor_impl(t, "t")? };
        crate::ensure!(t.ndim() > 0, Shape, "stride of dim {dim} of a 0-dim tensor");
        Ok(t.strides()[crate::tensor::shape::wrap_dim(dim, t.ndim())?])
    })
}

/// The storage offset in elements; -1 for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_storage_offset(t: *const TsrTensor) -> i64 {
    getter("tsr_tensor_storage_offset", -1, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.storage_offset())
    })
}

/// The number of elements (1 for 0-dim tensors); -1 for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_numel(t: *const TsrTensor) -> i64 {
    getter("tsr_tensor_numel", -1, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.numel())
    })
}

/// The dtype; -1 (not a dtype) for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_dtype(t: *const TsrTensor) -> TsrDType {
    getter("tsr_tensor_dtype", -1, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.dtype().raw())
    })
}

/// Bytes per element; 0 for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_itemsize(t: *const TsrTensor) -> usize {
    getter("tsr_tensor_itemsize", 0, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.itemsize())
    })
}

/// The device; {-1, -1} for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_device(t: *const TsrTensor) -> TsrDevice {
    let bad = TsrDevice {
        device_type: -1,
        index: -1,
    };
    getter("tsr_tensor_device", bad, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        let t = unsafe { tensor_impl(t, "t")? };
        Ok(TsrDevice::from_core(t.device()))
    })
}

/// The address of the first element (storage data + itemsize * offset);
/// NULL when the tensor has no elements, and for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_data(t: *const TsrTensor) -> *mut c_void {
    getter("tsr_tensor_data", std::ptr::null_mut(), || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.data_ptr())
    })
}

/// A new reference to the tensor's storage; NULL for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_storage(t: *const TsrTensor) -> *mut TsrStorage {
    getter("tsr_tensor_storage", std::ptr::null_mut(), || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(storage_handle(
            unsafe { tensor_impl(t, "t")? }.storage().clone(),
        ))
    })
}

/// Whether the tensor's storage is read-only (tsr_storage_is_read_only):
/// every write into the tensor fails with TSR_ERR_READ_ONLY. false for
/// NULL (with a message).
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_is_read_only(t: *const TsrTensor) -> bool {
    getter("tsr_tensor_is_read_only", false, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.is_read_only())
    })
}

/// Whether the tensor is contiguous in `format` (TSR_CONTIGUOUS,
/// TSR_CHANNELS_LAST, TSR_CHANNELS_LAST_3D; TSR_PRESERVE asks for
/// TSR_CONTIGUOUS). Cached, refreshed on every metadata change. false for
/// NULL or an unknown format.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_is_contiguous(
    t: *const TsrTensor,
    format: TsrMemoryFormat,
) -> bool {
    getter("tsr_tensor_is_contiguous", false, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.is_contiguous(format_arg(format)?))
    })
}

/// Whether some permutation of the dims is contiguous (no gaps, no
/// overlap). false for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_is_non_overlapping_and_dense(t: *const TsrTensor) -> bool {
    getter("tsr_tensor_is_non_overlapping_and_dense", false, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.is_non_overlapping_and_dense())
    })
}

/// The version counter shared with views: bumped by every in-place write
/// (fill, copy into, out= kernels, set). 0 for NULL.
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_version(t: *const TsrTensor) -> u64 {
    getter("tsr_tensor_version", 0, || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        Ok(unsafe { tensor_impl(t, "t")? }.version())
    })
}

/// Sets every element to `value` converted to the tensor's dtype (C-like
/// conversion; half/bfloat16 round to nearest even), in parallel for large
/// tensors. Expanded tensors (elements sharing memory) may be filled.
/// Bumps the version.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY; TSR_ERR_INVALID_ARGUMENT
/// (value's dtype);
/// TSR_ERR_UNSUPPORTED (quantized/float8 dtypes, non-CPU tensors).
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_fill(t: *mut TsrTensor, value: TsrScalar) -> TsrStatus {
    guard("tsr_tensor_fill", || {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_ref checks NULL and liveness.
        let t = unsafe { tensor_ref(t, "t")? };
        crate::kernels::fill_(&t, value.to_core()?)
    })
}

/// Copies `src` into `dst`, converting to dst's dtype (C-like casts:
/// integers wrap, floating to integer truncates, complex to real keeps the
/// real part, half/bfloat16 round to nearest even) and broadcasting `src`
/// to `dst`'s sizes. `src` may overlap `dst` (it is then copied to a
/// temporary first). Transposed layouts copy in cache-blocked tiles; large
/// copies run in parallel. Bumps dst's version.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_READ_ONLY (dst); TSR_ERR_SHAPE (not
/// broadcastable);
/// TSR_ERR_OVERLAP (dst has elements sharing memory); TSR_ERR_DEVICE
/// (non-CPU tensors); TSR_ERR_UNSUPPORTED (conversion to or from a float8
/// or quantized dtype; equal dtypes copy bytes).
///
/// # Safety
/// `dst`, `src` NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_copy(dst: *mut TsrTensor, src: *const TsrTensor) -> TsrStatus {
    guard("tsr_tensor_copy", || {
        // SAFETY: `dst` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let (d, s) = unsafe { (tensor_view(dst, "dst")?, tensor_view(src, "src")?) };
        crate::kernels::copy_(&d, &s)
    })
}
