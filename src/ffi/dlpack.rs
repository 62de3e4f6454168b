//! DLPack at the ABI: the C structs of dlpack.h and the four exchange
//! functions. The mapping and validation rules live in `crate::dlpack`;
//! this file allocates, reads and frees the raw structs.
//!
//! The structs below mirror dlpack.h 1.1 field for field. They are not
//! emitted by cbindgen (cbindgen.toml excludes them): the header declares
//! them in a hand-written block under dlpack.h's own include guard, so that
//! tessera.h and dlpack.h can be included in either order (see the
//! comment of that block in cbindgen.toml). `tests/dlpack_header.rs`
//! checks that the Rust and C layouts agree.

use super::call::{check_not_null, guard, i64_slice};
use super::tensor::{put_tensor, tensor_impl, TsrTensor};
use super::types::*;
use crate::data_ptr::DataPtr;
use crate::dlpack::{self, ImportPlan};
use crate::error::Result;
use crate::refcount::Ref;
use crate::storage::Storage;
use crate::tensor::{Tensor, TensorImpl};
use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr;

pub use crate::dlpack::{DLDataType, DLDevice};

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version: a different one means a different layout.
    pub major: u32,
    /// Minor version: new enum values, same layout.
    pub minor: u32,
}

/// `DLTensor`: a view of memory, not owning it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    /// The data address (device memory for device tensors).
    pub data: *mut c_void,
    /// The device of `data`.
    pub device: DLDevice,
    /// The number of dims.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` sizes.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for compact row-major.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// The deleter of a legacy managed tensor.
pub type DLManagedTensorDeleter = Option<unsafe extern "C" fn(self_: *mut DLManagedTensor)>;

/// `DLManagedTensor` (legacy, unversioned).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the managed tensor (and itself), or NULL.
    pub deleter: DLManagedTensorDeleter,
}

/// The deleter of a versioned managed tensor.
pub type DLManagedTensorVersionedDeleter =
    Option<unsafe extern "C" fn(self_: *mut DLManagedTensorVersioned)>;

/// `DLManagedTensorVersioned`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The version the producer wrote.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Frees the managed tensor (and itself), or NULL.
    pub deleter: DLManagedTensorVersionedDeleter,
    /// DLPACK_FLAG_BITMASK_* bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// What export and import need of both managed-tensor structs.
trait Managed: Sized {
    /// Whether the struct has a flags field (DLPACK_FLAG_BITMASK_READ_ONLY).
    const HAS_FLAGS: bool;
    /// The struct; `read_only` sets the READ_ONLY flag where there is one.
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void, read_only: bool) -> Self;
    /// Calls the producer's deleter, if any.
    ///
    /// # Safety
    /// `this` points at a live managed tensor this code owns; it is
    /// freed by the call.
    unsafe fn delete(this: *mut Self);
    /// Frees an export made by tessera (the deleter tessera installs).
    ///
    /// # Safety
    /// `this` is NULL or an export of this type not freed yet.
    unsafe extern "C" fn tessera_deleter(this: *mut Self);
}

impl Managed for DLManagedTensorVersioned {
    const HAS_FLAGS: bool = true;
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void, read_only: bool) -> Self {
        DLManagedTensorVersioned {
            version: DLPackVersion {
                major: dlpack::DLPACK_MAJOR_VERSION,
                minor: dlpack::DLPACK_MINOR_VERSION,
            },
            manager_ctx,
            deleter: Some(Self::tessera_deleter),
            flags: if read_only { dlpack::FLAG_READ_ONLY } else { 0 },
            dl_tensor,
        }
    }

    unsafe fn delete(this: *mut Self) {
        // SAFETY: the caller owns a live managed tensor; `version`,
        // `manager_ctx` and `deleter` keep their place in every major
        // version (dlpack.h), so reading only the deleter field is sound
        // even for a version tessera refuses.
        if let Some(deleter) = unsafe { ptr::addr_of!((*this).deleter).read() } {
            // SAFETY: the producer's deleter frees its own struct, once.
            unsafe { deleter(this) };
        }
    }

    unsafe extern "C" fn tessera_deleter(this: *mut Self) {
        // SAFETY: DLPack calls the deleter with the struct it belongs to,
        // which tessera's export allocated.
        unsafe { free_export(this) }
    }
}

impl Managed for DLManagedTensor {
    const HAS_FLAGS: bool = false;
    fn new(dl_tensor: DLTensor, manager_ctx: *mut c_void, _read_only: bool) -> Self {
        DLManagedTensor {
            dl_tensor,
            manager_ctx,
            deleter: Some(Self::tessera_deleter),
        }
    }

    unsafe fn delete(this: *mut Self) {
        // SAFETY: the caller owns a live managed tensor.
        if let Some(deleter) = unsafe { (*this).deleter } {
            // SAFETY: the producer's deleter frees its own struct, once.
            unsafe { deleter(this) };
        }
    }

    unsafe extern "C" fn tessera_deleter(this: *mut Self) {
        // SAFETY: as for the versioned struct.
        unsafe { free_export(this) }
    }
}

/// One exported tensor: the managed struct first (so the pointer handed
/// out is the block's), then what its deleter needs; the shape and strides
/// arrays (2 * ndim values) follow in the same allocation.
#[repr(C)]
struct ExportBlock<M> {
    managed: M,
    ndim: usize,
    storage: Storage,
}

/// The layout of an export block with `ndim` dims, and the offset of its
/// shape array.
fn export_layout<M>(ndim: usize) -> (Layout, usize) {
    let arrays = Layout::array::<i64>(2 * ndim).expect("at most 128 int64 values");
    let (layout, offset) = Layout::new::<ExportBlock<M>>()
        .extend(arrays)
        .expect("an export block of at most 128 dims fits in memory");
    (layout.pad_to_align(), offset)
}

/// Exports a tensor as a newly allocated managed tensor.
fn export<M: Managed>(t: &TensorImpl) -> Result<*mut M> {
    let read_only = t.is_read_only();
    crate::ensure!(
        M::HAS_FLAGS || !read_only,
        ReadOnly,
        "the tensor is read-only and a legacy DLManagedTensor has no read-only flag, so its \
         consumer could write it: use tsr_tensor_to_dlpack (DLPack 1.x, which sets \
         DLPACK_FLAG_BITMASK_READ_ONLY)"
    );
    let dtype = DLDataType::from_dtype(t.dtype())?;
    let device = DLDevice::from_device(t.device())?;
    // The consumer reads and writes the tensor's span: it must lie in the
    // storage's memory (a storage shrunk under the tensor is refused).
    let data = t.data_in_storage()?;
    let ndim = t.ndim();
    let (layout, dims_offset) = export_layout::<M>(ndim);
    // SAFETY: the layout has a non-zero size (the block itself).
    let block = unsafe { std::alloc::alloc(layout) } as *mut ExportBlock<M>;
    crate::ensure!(
        !block.is_null(),
        OutOfMemory,
        "cannot allocate {} bytes for a DLPack tensor of {ndim} dims",
        layout.size()
    );
    // SAFETY: dims_offset + 2 * ndim * 8 bytes lie inside the allocation,
    // at an offset aligned for i64 (Layout::extend).
    let shape = unsafe { (block as *mut u8).add(dims_offset) } as *mut i64;
    // SAFETY: shape..shape + 2 * ndim is inside the allocation.
    let strides = unsafe { shape.add(ndim) };
    // SAFETY: both ranges of ndim values are inside the allocation and do
    // not overlap the tensor's own arrays.
    unsafe {
        ptr::copy_nonoverlapping(t.sizes().as_ptr(), shape, ndim);
        ptr::copy_nonoverlapping(t.strides().as_ptr(), strides, ndim);
    }
    let storage = t.storage().clone();
    // Counted until free_export: set_data_ptr refuses while it is alive.
    storage.export_started();
    // manager_ctx: the storage handle the block holds a reference of.
    let manager_ctx = Ref::as_ptr(storage.as_rc()) as *mut c_void;
    let dl_tensor = DLTensor {
        data,
        device,
        ndim: ndim as i32,
        dtype,
        shape,
        strides,
        byte_offset: 0,
    };
    // SAFETY: the allocation is aligned and large enough for the block.
    unsafe {
        block.write(ExportBlock {
            managed: M::new(dl_tensor, manager_ctx, read_only),
            ndim,
            storage,
        })
    };
    Ok(block as *mut M)
}

/// Frees an export: drops its storage reference and the allocation.
///
/// # Safety
/// `managed` is NULL or came from [`export`] with the same `M` and was not
/// freed yet.
unsafe fn free_export<M>(managed: *mut M) {
    if managed.is_null() {
        return;
    }
    let block = managed as *mut ExportBlock<M>;
    // SAFETY: the block was written by export and is freed only here.
    let ndim = unsafe { (*block).ndim };
    // SAFETY: `block` is the live export block export wrote (the caller's
    // contract: from export with this M, not freed yet); its storage field
    // was initialized there, and this read moves it out once, just before
    // the allocation is freed without dropping the fields.
    let storage = unsafe { ptr::read(ptr::addr_of!((*block).storage)) };
    // SAFETY: same pointer and layout as the allocation in export.
    unsafe { std::alloc::dealloc(block as *mut u8, export_layout::<M>(ndim).0) };
    storage.export_ended();
    drop(storage);
}

/// Owns a consumed managed tensor until its ownership passes to a
/// DataPtr: dropping it calls the producer's deleter.
struct Consumed<M: Managed> {
    ptr: *mut M,
}

impl<M: Managed> Drop for Consumed<M> {
    fn drop(&mut self) {
        // SAFETY: Consumed owns the live managed tensor (its contract at
        // construction) and gives it up only through into_data_ptr.
        unsafe { M::delete(self.ptr) }
    }
}

/// The DataPtr deleter of an imported managed tensor.
unsafe extern "C" fn call_producer_deleter<M: Managed>(ctx: *mut c_void) {
    // SAFETY: ctx is the managed tensor handed to the DataPtr by
    // into_data_ptr; DataPtr calls this once.
    unsafe { M::delete(ctx as *mut M) }
}

impl<M: Managed> Consumed<M> {
    /// Takes ownership of a consumed managed tensor.
    ///
    /// # Safety
    /// `ptr` is non-NULL, points at a live managed tensor, and the caller
    /// gives up its ownership.
    unsafe fn new(ptr: *mut M) -> Self {
        Consumed { ptr }
    }

    /// Hands ownership to a DataPtr over the planned view: its drop calls
    /// the producer's deleter.
    fn into_data_ptr(self, data: *mut c_void, plan: &ImportPlan) -> DataPtr {
        let ptr = self.ptr;
        std::mem::forget(self);
        let first = if data.is_null() {
            data
        } else {
            // plan_import checked data + first_byte does not overflow for
            // non-empty tensors; wrapping keeps empty ones well defined.
            data.wrapping_byte_add(plan.first_byte)
        };
        // SAFETY: the producer keeps the memory valid until its deleter
        // runs, and a DLPack deleter may be called from any thread.
        unsafe {
            DataPtr::from_raw_parts(
                first,
                ptr as *mut c_void,
                Some(call_producer_deleter::<M>),
                plan.device,
            )
        }
    }
}

/// Imports the DLTensor of a consumed managed tensor.
///
/// # Safety
/// `consumed` owns a live managed tensor whose `dl_tensor` is `t`, with
/// `shape` (and `strides` unless NULL) readable for `ndim` values.
unsafe fn import<M: Managed>(consumed: Consumed<M>, t: &DLTensor) -> Result<Tensor> {
    let ndim = dlpack::check_ndim(t.ndim)?;
    // SAFETY: this function's contract: shape readable for ndim values;
    // i64_slice checks the length and NULL.
    let shape = unsafe { i64_slice(t.shape, ndim as i64, "dl_tensor.shape")? };
    let strides = if t.strides.is_null() {
        None
    } else {
        // SAFETY: strides is non-NULL here and, by this function's contract,
        // readable for ndim values.
        Some(unsafe { i64_slice(t.strides, ndim as i64, "dl_tensor.strides")? })
    };
    let plan = dlpack::plan_import(
        t.dtype,
        t.device,
        shape,
        strides,
        t.data as usize,
        t.byte_offset,
    )?;
    let data_ptr = consumed.into_data_ptr(t.data, &plan);
    // From here the storage owns the managed tensor: an error below drops
    // the storage, which calls the producer's deleter once.
    let storage = Storage::from_data_ptr(data_ptr, plan.nbytes);
    Tensor::from_storage(&storage, 0, &plan.sizes, Some(&plan.strides), plan.dtype)
}

/// Exports `t` as a DLPack 1.1 managed tensor and writes it to `*out`.
///
/// The result shares t's memory (no copy): `dl_tensor.data` is the address
/// of the first element with `byte_offset` 0 (NULL when t has no
/// elements), `shape` and `strides` (in elements, never NULL) live in the
/// same allocation as the struct, `flags` is 0 (writable, not a copy) or
/// DLPACK_FLAG_BITMASK_READ_ONLY for a read-only tensor,
/// `version` is {1, 1}. CPU tensors are kDLCPU device 0; CUDA tensors are
/// kDLCUDA with their device index, an unresolved index -1 ("current
/// device") being exported as 0. `manager_ctx` is t's storage
/// (TsrStorage*), of which the export holds one reference: the memory
/// stays valid after t is released, until the deleter runs. The caller
/// owns the result and calls its `deleter` exactly once (or hands it to a
/// consumer that does); the deleter may run on any thread. Later metadata
/// changes to t (tsr_tensor_set) do not affect the export; every call
/// that would move the storage's memory (tsr_storage_resize,
/// tsr_storage_set_data_ptr, tsr_storage_share_memory, ...) is refused
/// until the export's deleter has run. A tensor whose storage was resized
/// smaller than the tensor's span is refused (TSR_ERR_SHAPE).
///
/// Errors: TSR_ERR_NULL_POINTER (t or out); TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_UNSUPPORTED (a device other than CPU or CUDA, named in the
/// message); TSR_ERR_DTYPE (quantized, bits and sub-byte integer
/// dtypes and BComplex32, which DLPack has no code for); TSR_ERR_OUT_OF_MEMORY.
/// `*out` is untouched on error.
///
/// # Safety
/// `t` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_to_dlpack(
    t: *const TsrTensor,
    out: *mut *mut DLManagedTensorVersioned,
) -> TsrStatus {
    guard("tsr_tensor_to_dlpack", || {
        check_not_null(out, "out")?;
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        let managed = export::<DLManagedTensorVersioned>(unsafe { tensor_impl(t, "t")? })?;
        // SAFETY: out checked non-NULL.
        unsafe { out.write(managed) };
        Ok(())
    })
}

/// As tsr_tensor_to_dlpack, for a consumer that will use the tensor on
/// `stream` (the producer's side of DLPack's `__dlpack__(stream=...)`,
/// numbered as there): -1 asks for no synchronization (any device); for a
/// CUDA tensor, 1 is the legacy default stream, 2 the per-thread default
/// stream, and any other positive value a CUstream handle. For those, the
/// consumer's stream is made to wait for the work queued so far on the
/// calling thread's current stream (an event, tsr_cuda_set_current_stream),
/// and it is recorded as a user of the memory (tsr_storage_record_stream),
/// so that after the export's deleter runs the caching allocator reuses the
/// memory only once the consumer's work queued by then is done.
///
/// Errors: as tsr_tensor_to_dlpack; TSR_ERR_INVALID_ARGUMENT (a stream
/// other than -1 for a non-CUDA tensor; 0 or below -1 for a CUDA one: DLPack
/// disallows 0 for CUDA); TSR_ERR_DEVICE (the driver refused the wait);
/// TSR_ERR_UNSUPPORTED (a CUDA tensor in a build without the cuda feature,
/// with a stream other than -1).
///
/// # Safety
/// `t` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_to_dlpack_on_stream(
    t: *const TsrTensor,
    stream: isize,
    out: *mut *mut DLManagedTensorVersioned,
) -> TsrStatus {
    guard("tsr_tensor_to_dlpack_on_stream", || {
        check_not_null(out, "out")?;
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        let t = unsafe { tensor_impl(t, "t")? };
        t.hand_to_stream(stream)?;
        let managed = export::<DLManagedTensorVersioned>(t)?;
        // SAFETY: out checked non-NULL.
        unsafe { out.write(managed) };
        Ok(())
    })
}

/// As tsr_tensor_to_dlpack, as a legacy (pre-1.0, unversioned)
/// DLManagedTensor for consumers that do not read the versioned struct.
/// The legacy struct has no flags, so a read-only tensor is refused
/// (TSR_ERR_READ_ONLY: its consumer could write it).
///
/// # Safety
/// `t` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_to_dlpack_legacy(
    t: *const TsrTensor,
    out: *mut *mut DLManagedTensor,
) -> TsrStatus {
    guard("tsr_tensor_to_dlpack_legacy", || {
        check_not_null(out, "out")?;
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_impl checks NULL and liveness.
        let managed = export::<DLManagedTensor>(unsafe { tensor_impl(t, "t")? })?;
        // SAFETY: out checked non-NULL.
        unsafe { out.write(managed) };
        Ok(())
    })
}

/// Imports a DLPack managed tensor as a tessera tensor viewing its memory
/// (no copy) and writes a new reference to `*out`.
///
/// Ownership: `consumed` is always consumed when it is not NULL. On
/// success tessera calls its deleter exactly once, when the last tensor or
/// storage using the memory is released (on any thread). On every error
/// tessera calls its deleter before returning, as the DLPack spec asks of
/// a consumer refusing another major version; the caller must not touch
/// it again either way. (From Python, rename the capsule to
/// "used_dltensor_versioned" before the call.)
///
/// Accepted: major version 1 (any minor); dtypes with a tessera
/// equivalent (lanes 1); kDLCPU and kDLCUDAHost (as CPU), kDLCUDA and
/// kDLCUDAManaged (as CUDA device_id); NULL strides (compact row-major);
/// any byte_offset that keeps the first element aligned for its dtype.
/// The tensor's storage starts at data + byte_offset and spans exactly the
/// bytes the view addresses; it is not resizable. The DLPack shape and
/// strides arrays are copied. A tensor flagged
/// DLPACK_FLAG_BITMASK_READ_ONLY is imported as a read-only tensor (its
/// storage is read-only: every write through tessera fails with
/// TSR_ERR_READ_ONLY).
///
/// Errors: TSR_ERR_NULL_POINTER (consumed, out, or shape with ndim > 0);
/// TSR_ERR_UNSUPPORTED (major version other than 1, naming both versions;
/// negative strides
/// on dims of size > 1; DLPack devices tessera does not import);
/// TSR_ERR_DTYPE (lanes != 1 except kDLFloat4_e2m1fn's 4 bits x 2 lanes,
/// unknown type codes, codes tessera has no dtype for such as
/// kDLFloat8_e3m4 and kDLFloat6_*, bit widths tessera does not have); TSR_ERR_SHAPE (ndim < 0 or > TSR_MAX_DIMS, negative sizes);
/// TSR_ERR_INVALID_ARGUMENT (NULL data with elements, a misaligned first
/// element, an unknown device type, a CUDA device_id beyond 127);
/// TSR_ERR_OUT_OF_MEMORY (sizes whose span overflows). `*out` is
/// untouched on error.
///
/// # Safety
/// `consumed` NULL or a valid managed tensor the caller owns, whose
/// shape (and strides, unless NULL) hold `ndim` values and whose memory
/// spans the view; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_from_dlpack(
    consumed: *mut DLManagedTensorVersioned,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_from_dlpack", || {
        check_not_null(consumed, "consumed")?;
        // SAFETY: the caller hands over a live managed tensor.
        let owner = unsafe { Consumed::new(consumed) };
        check_not_null(out, "out")?;
        // SAFETY: the version leads the struct in every major version.
        let version = unsafe { ptr::addr_of!((*consumed).version).read() };
        dlpack::check_version(version.major, version.minor)?;
        // SAFETY: a major version 1 struct has this layout; it stays live
        // until `owner` calls the deleter, after these copies.
        let (flags, dl_tensor) = unsafe { ((*consumed).flags, (*consumed).dl_tensor) };
        // SAFETY: owner owns the struct holding dl_tensor; its arrays are
        // valid per the caller.
        let t = unsafe { import(owner, &dl_tensor)? };
        if flags & dlpack::FLAG_READ_ONLY != 0 {
            t.storage().make_read_only();
        }
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

/// As tsr_tensor_from_dlpack, for a legacy (unversioned) DLManagedTensor:
/// no version or flags to check. Ownership is the same: `consumed` is
/// always consumed when not NULL (from Python, rename the capsule to
/// "used_dltensor" before the call).
///
/// # Safety
/// As tsr_tensor_from_dlpack.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_from_dlpack_legacy(
    consumed: *mut DLManagedTensor,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_tensor_from_dlpack_legacy", || {
        check_not_null(consumed, "consumed")?;
        // SAFETY: the caller hands over a live managed tensor.
        let owner = unsafe { Consumed::new(consumed) };
        check_not_null(out, "out")?;
        // SAFETY: live until the owner calls the deleter, after this copy.
        let dl_tensor = unsafe { (*consumed).dl_tensor };
        // SAFETY: owner owns the struct holding dl_tensor; its arrays are
        // valid per the caller.
        let t = unsafe { import(owner, &dl_tensor)? };
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, t) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// The LP64 layout of dlpack.h's structs (the C side is checked against
    /// these Rust structs by tests/dlpack_header.rs).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn layouts_match_dlpack_h_on_lp64() {
        assert_eq!((size_of::<DLDevice>(), align_of::<DLDevice>()), (8, 4));
        assert_eq!((size_of::<DLDataType>(), align_of::<DLDataType>()), (4, 2));
        assert_eq!(size_of::<DLPackVersion>(), 8);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLTensor, device), 8);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, strides), 32);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
        assert_eq!(offset_of!(DLManagedTensor, deleter), 56);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
        assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
    }

    #[test]
    fn export_block_keeps_arrays_after_the_struct() {
        let (layout, offset) = export_layout::<DLManagedTensorVersioned>(3);
        assert!(offset >= size_of::<ExportBlock<DLManagedTensorVersioned>>());
        assert_eq!(offset % align_of::<i64>(), 0);
        assert!(layout.size() >= offset + 6 * 8);
        let (layout0, offset0) = export_layout::<DLManagedTensor>(0);
        assert_eq!(layout0.size(), offset0.next_multiple_of(layout0.align()));
    }
}
