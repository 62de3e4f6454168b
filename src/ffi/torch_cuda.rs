//! PyTorch's CUDA memory through tessera, at the ABI: the two functions
//! `torch.cuda.memory.CUDAPluggableAllocator(lib, "tsr_torch_cuda_malloc",
//! "tsr_torch_cuda_free")` loads, with the signatures it calls, and its
//! optional hooks (the C++ CUDAPluggableAllocator's set_reset_fn,
//! set_memory_fraction_fn, set_record_stream_fn, set_init_fn). They exist
//! in every build; without the cuda feature tsr_torch_cuda_malloc returns
//! NULL and every hook records TSR_ERR_UNSUPPORTED in the last-error slot.
//! None returns a status (PyTorch's signatures have none): a failure
//! leaves its message in tsr_last_error_message.
//!
//! `size` is a `ptrdiff_t` here, which is `ssize_t` on every platform
//! tessera supports (the header includes only standard C headers); the
//! stream is a `cudaStream_t` (a `CUstream`; NULL: the legacy default
//! stream).

use super::call::{getter, guard};
use std::ffi::{c_int, c_void};

#[cfg(feature = "cuda")]
use crate::allocator::cuda::torch;

#[cfg(not(feature = "cuda"))]
fn no_cuda<T>() -> crate::error::Result<T> {
    crate::bail!(Unsupported, "tessera was built without the cuda feature")
}

/// Allocates `size` bytes on CUDA device `device` for work on `stream`
/// (PyTorch's alloc_fn), from tessera's CUDA device allocator (the one
/// tsr_cuda_allocator returns; its settings come from TESSERA_ALLOC_CONF,
/// e.g. `expandable_segments:true`), from the pools of that stream. NULL
/// for 0 bytes, and on failure (the message in tsr_last_error_message:
/// out of memory, no driver, a negative size or device, or a build
/// without the cuda feature).
#[no_mangle]
pub extern "C" fn tsr_torch_cuda_malloc(
    size: isize,
    device: c_int,
    stream: *mut c_void,
) -> *mut c_void {
    getter("tsr_torch_cuda_malloc", std::ptr::null_mut(), || {
        #[cfg(feature = "cuda")]
        return torch::malloc(size, device, stream as usize);
        #[cfg(not(feature = "cuda"))]
        return {
            let _ = (size, device, stream);
            no_cuda()
        };
    })
}

/// Frees memory tsr_torch_cuda_malloc returned (PyTorch's free_fn): the
/// block goes back to the pools of the stream it was allocated for, to be
/// reused there (after the streams recorded with
/// tsr_torch_cuda_record_stream finish their work). `size`, `device` and
/// `stream` are PyTorch's and not needed. NULL, or an address
/// tsr_torch_cuda_malloc did not return, does nothing (the latter records
/// TSR_ERR_INVALID_ARGUMENT in the last-error slot).
#[no_mangle]
pub extern "C" fn tsr_torch_cuda_free(
    ptr: *mut c_void,
    size: isize,
    device: c_int,
    stream: *mut c_void,
) {
    let _ = (size, device, stream);
    getter("tsr_torch_cuda_free", (), || {
        #[cfg(feature = "cuda")]
        crate::ensure!(
            torch::free(ptr),
            InvalidArgument,
            "{ptr:?} is not memory tsr_torch_cuda_malloc handed out (or it was freed already)"
        );
        #[cfg(not(feature = "cuda"))]
        crate::ensure!(
            ptr.is_null(),
            InvalidArgument,
            "{ptr:?} is not memory tsr_torch_cuda_malloc handed out (tessera was built without \
             the cuda feature)"
        );
        Ok(())
    })
}

/// PyTorch's reset_fn (torch.cuda.empty_cache): returns the unused cached
/// memory of every device.
#[no_mangle]
pub extern "C" fn tsr_torch_cuda_empty_cache() {
    let _ = guard("tsr_torch_cuda_empty_cache", || {
        #[cfg(feature = "cuda")]
        return torch::empty_cache();
        #[cfg(not(feature = "cuda"))]
        return no_cuda();
    });
}

/// PyTorch's memory_fraction_fn (torch.cuda.set_per_process_memory_fraction):
/// device `device` may reserve at most `fraction` of its memory, in [0, 1]
/// (0: no limit), as tsr_caching_allocator_set_memory_fraction.
#[no_mangle]
pub extern "C" fn tsr_torch_cuda_set_memory_fraction(fraction: f64, device: c_int) {
    let _ = guard("tsr_torch_cuda_set_memory_fraction", || {
        #[cfg(feature = "cuda")]
        return torch::set_memory_fraction(fraction, device);
        #[cfg(not(feature = "cuda"))]
        return {
            let _ = (fraction, device);
            no_cuda()
        };
    });
}

/// PyTorch's record_stream_fn (Tensor.record_stream): memory
/// tsr_torch_cuda_malloc returned is used by `stream` too, so its reuse
/// after the free waits for the work queued there by then.
#[no_mangle]
pub extern "C" fn tsr_torch_cuda_record_stream(ptr: *mut c_void, stream: *mut c_void) {
    let _ = guard("tsr_torch_cuda_record_stream", || {
        #[cfg(feature = "cuda")]
        return torch::record_stream(ptr, stream as usize);
        #[cfg(not(feature = "cuda"))]
        return {
            let _ = (ptr, stream);
            no_cuda()
        };
    });
}

/// PyTorch's init_fn: loads the CUDA driver and checks that `device` is a
/// CUDA device.
#[no_mangle]
pub extern "C" fn tsr_torch_cuda_init(device: c_int) {
    let _ = guard("tsr_torch_cuda_init", || {
        #[cfg(feature = "cuda")]
        return crate::allocator::cuda::init().and_then(|_| {
            crate::ensure!(
                (0..crate::allocator::cuda::device_count()).contains(&device),
                Device,
                "cuda:{device} is not a device: this machine has {} CUDA device(s)",
                crate::allocator::cuda::device_count()
            );
            Ok(())
        });
        #[cfg(not(feature = "cuda"))]
        return {
            let _ = device;
            no_cuda()
        };
    });
}
