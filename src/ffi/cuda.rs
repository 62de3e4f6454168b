//! CUDA at the ABI. These functions exist in every build. In a build
//! with the "cuda" feature they load the NVIDIA driver (libcuda) on first
//! use; without a usable driver the fallible ones return TSR_ERR_DEVICE
//! with "CUDA driver not available: <reason>". In a build without the
//! feature they return TSR_ERR_UNSUPPORTED with "tessera was built without
//! the cuda feature" (a different code, since no driver can help), and
//! tsr_cuda_is_available / tsr_cuda_device_count report false / 0.
//!
//! Device memory comes from tsr_get_allocator(TSR_CUDA) (the built-in
//! caching CUDA allocator unless the host installed another; it loads the
//! driver when it first allocates) or tsr_cuda_allocator. Copies between
//! host and device memory, or between devices, go through any of these
//! allocators' copy function (tsr_allocator_copy_data, and the storage and
//! tensor copies built on it).

use super::allocator::hand_out;
use super::allocator::TsrAllocator;
use super::call::{guard, guard_value};
use super::storage::storage_impl;
use super::tensor::tensor_impl;
use super::types::*;

#[cfg(feature = "cuda")]
use crate::allocator::cuda;
use std::ffi::c_void;

#[cfg(not(feature = "cuda"))]
fn no_cuda<T>() -> crate::error::Result<T> {
    crate::bail!(Unsupported, "tessera was built without the cuda feature")
}

/// Whether CUDA can be used: the driver loads and reports at least one
/// device. Loads the driver on the first call. False in a build without
/// the cuda feature. Never fails.
#[no_mangle]
pub extern "C" fn tsr_cuda_is_available() -> bool {
    guard_value("tsr_cuda_is_available", false, || {
        #[cfg(feature = "cuda")]
        return cuda::is_available();
        #[cfg(not(feature = "cuda"))]
        return false;
    })
}

/// The number of CUDA devices; 0 without a driver or without the cuda
/// feature. Loads the driver on the first call.
#[no_mangle]
pub extern "C" fn tsr_cuda_device_count() -> i32 {
    guard_value("tsr_cuda_device_count", 0, || {
        #[cfg(feature = "cuda")]
        return cuda::device_count();
        #[cfg(not(feature = "cuda"))]
        return 0;
    })
}

/// Loads and initializes the CUDA driver now (it is otherwise loaded on
/// first use) and reports why CUDA cannot be used, if it cannot. Idempotent:
/// the driver is loaded at most once per process, and a failure is final.
///
/// Errors: TSR_ERR_DEVICE ("CUDA driver not available: <reason>": no
/// libcuda, a driver too old, cuInit failed, no device);
/// TSR_ERR_UNSUPPORTED (built without the cuda feature).
#[no_mangle]
pub extern "C" fn tsr_cuda_init() -> TsrStatus {
    guard("tsr_cuda_init", || {
        #[cfg(feature = "cuda")]
        return cuda::init();
        #[cfg(not(feature = "cuda"))]
        return no_cuda();
    })
}

/// Writes a new reference to the built-in CUDA device allocator to `*out`:
/// cuMemAlloc behind the caching layer, with pools per device (query them
/// with tsr_caching_allocator_stats). It allocates on the current device
/// (that of the calling thread's current CUDA context, else device 0);
/// storages and tensors on cuda:N use device N. Its copy function copies
/// between host memory and device memory in either direction, and between
/// devices. It is what tsr_get_allocator(TSR_CUDA) returns unless the host
/// installed another allocator. Memory is reused as soon as it is freed:
/// with streams other than the legacy default stream, synchronize before
/// freeing.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEVICE (no usable driver);
/// TSR_ERR_UNSUPPORTED (built without the cuda feature).
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_cuda_allocator(out: *mut *mut TsrAllocator) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); hand_out checks each for NULL and liveness.
    unsafe {
        hand_out("tsr_cuda_allocator", out, || {
            #[cfg(feature = "cuda")]
            return cuda::init().map(|_| cuda::device_allocator());
            #[cfg(not(feature = "cuda"))]
            return no_cuda();
        })
    }
}

/// Writes a new reference to the CUDA device allocator without caching to
/// `*out`: every allocation is one cuMemAlloc, every free one cuMemFree.
/// For hosts that wrap it themselves, e.g. in tsr_caching_allocator_new
/// with their own options.
///
/// Errors: as tsr_cuda_allocator.
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_cuda_raw_allocator(out: *mut *mut TsrAllocator) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); hand_out checks each for NULL and liveness.
    unsafe {
        hand_out("tsr_cuda_raw_allocator", out, || {
            #[cfg(feature = "cuda")]
            return cuda::init().map(|_| cuda::raw_device_allocator());
            #[cfg(not(feature = "cuda"))]
            return no_cuda();
        })
    }
}

/// Writes a new reference to the pinned host-memory allocator to `*out`:
/// page-locked memory from cuMemHostAlloc (portable to every device)
/// behind the caching layer, for CPU storages and tensors whose copies to
/// and from the GPU should be fast. Use it with
/// tsr_storage_new_with_allocator, or install it for TSR_CPU. Blocks are
/// at least 512-byte aligned. Its copy function copies in any direction.
///
/// Errors: as tsr_cuda_allocator.
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_cuda_pinned_allocator(out: *mut *mut TsrAllocator) -> TsrStatus {
    // SAFETY: this export's handle and pointer arguments, under the header's
    // contract (ffi/handle.rs); hand_out checks each for NULL and liveness.
    unsafe {
        hand_out("tsr_cuda_pinned_allocator", out, || {
            #[cfg(feature = "cuda")]
            return cuda::init().map(|_| cuda::pinned_allocator());
            #[cfg(not(feature = "cuda"))]
            return no_cuda();
        })
    }
}

/// Makes `stream` (a CUstream; NULL: the legacy default stream) the
/// calling thread's current stream on `device` (-1: the device of the
/// thread's current context, else 0), as c10's setCurrentCUDAStream: the
/// caching device allocator serves this thread's requests on that device
/// from the pools of this stream, and reuses a block freed there for
/// this stream only. Every thread starts on the legacy default stream.
/// tessera's own copies run on the legacy default stream.
///
/// Errors: TSR_ERR_DEVICE (no usable driver; `device` not a device);
/// TSR_ERR_UNSUPPORTED (built without the cuda feature).
#[no_mangle]
pub extern "C" fn tsr_cuda_set_current_stream(device: i32, stream: *mut c_void) -> TsrStatus {
    guard("tsr_cuda_set_current_stream", || {
        #[cfg(feature = "cuda")]
        return cuda::set_current_stream(device, stream as usize);
        #[cfg(not(feature = "cuda"))]
        return {
            let _ = (device, stream);
            no_cuda()
        };
    })
}

/// The calling thread's current stream on `device` (-1: the current
/// device): what tsr_cuda_set_current_stream set, else NULL (the legacy
/// default stream; also without a driver or the cuda feature). Never
/// fails.
#[no_mangle]
pub extern "C" fn tsr_cuda_current_stream(device: i32) -> *mut c_void {
    guard_value("tsr_cuda_current_stream", std::ptr::null_mut(), || {
        #[cfg(feature = "cuda")]
        return cuda::current_stream(device) as *mut c_void;
        #[cfg(not(feature = "cuda"))]
        return {
            let _ = device;
            std::ptr::null_mut()
        };
    })
}

/// Records that CUDA `stream` (NULL: the legacy default stream) uses the
/// memory of `s`, as c10's recordStream: when the memory is freed, the
/// caching device allocator hands it out again only after the work queued
/// on `stream` by then is done (an event it polls), instead of at once.
/// Needed when memory allocated on one stream is used on another. Memory
/// of any other allocator (raw, plugins) needs nothing: TSR_OK.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; TSR_ERR_DEVICE (`s`
/// is not on a CUDA device).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_record_stream(
    s: *const TsrStorage,
    stream: *mut c_void,
) -> TsrStatus {
    guard("tsr_storage_record_stream", || {
        // SAFETY: `s` is NULL or a live handle (the header's contract);
        // storage_impl checks NULL and liveness.
        unsafe { storage_impl(s, "s")? }.record_stream(stream as usize)
    })
}

/// As tsr_storage_record_stream, for the storage of `t` (c10's
/// Tensor::record_stream).
///
/// # Safety
/// `t` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_tensor_record_stream(
    t: *const TsrTensor,
    stream: *mut c_void,
) -> TsrStatus {
    guard("tsr_tensor_record_stream", || {
        // SAFETY: `t` is NULL or a live handle (the header's contract);
        // tensor_impl checks NULL and liveness.
        unsafe { tensor_impl(t, "t")? }.record_stream(stream as usize)
    })
}
