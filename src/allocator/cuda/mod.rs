//! CUDA allocators through the driver API (cudarc, feature "cuda"): device
//! memory (cuMemAlloc / cuMemFree per device) and pinned host memory
//! (cuMemHostAlloc), with copies in every direction through cuMemcpy.
//!
//! Nothing is loaded when the library loads: the driver (libcuda) is
//! opened, checked for every entry point used here and initialized on the
//! first call that needs it, once per process. Without a usable driver
//! every such call fails with a Device error "CUDA driver not available:
//! <reason>", and nothing panics.
//!
//! Contexts: each device's primary context is retained on first use and
//! kept for the life of the process; every driver call runs with it pushed
//! as the calling thread's current context and popped afterwards, so the
//! host's own context state is left as it was. Device index -1 means the
//! device of the thread's current context, or device 0 when none is
//! current.
//!
//! The device allocator registered for TSR_CUDA (see
//! `registry::get_allocator`) is [`device_allocator`]: the raw one wrapped
//! in the caching layer, made on first request without touching the
//! driver, so asking for it is cheap and its allocations report why CUDA
//! is unavailable. Its pools are per stream, as c10's are: an allocation
//! comes from the pools of the calling thread's current stream
//! ([`set_current_stream`]; the legacy default stream 0 until set), a freed
//! block is reused by that stream only, and a block recorded as used by
//! other streams (`record_stream`) waits for their queued work before
//! reuse (streams.rs). tessera's own copies (cuMemcpy) run on the legacy
//! default stream.

use super::caching::{self, CachingOptions};
use super::{Allocator, RawAllocator};
use crate::data_ptr::{DataPtr, DeleterFn};
use crate::device::{Device, DeviceType};
use crate::error::{Error, ErrorKind, Result};
use cudarc::driver::sys;
use std::any::Any;
use std::ffi::{c_void, CStr};
use std::sync::{Mutex, OnceLock};

mod streams;
pub mod torch;
mod vmm;
pub use streams::{current_stream, set_current_stream, stream_wait};
use vmm::memory_info;

/// The driver entry points used here (checked when the driver loads, so
/// no later call can hit cudarc's panic on a missing symbol).
const ENTRY_POINTS: [&str; 20] = [
    "cuInit",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDevicePrimaryCtxRetain",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuCtxGetDevice",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpy",
    "cuPointerGetAttributes",
    "cuGetErrorString",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuStreamWaitEvent",
];

struct Driver {
    device_count: i32,
    /// Retained primary contexts (CUcontext as usize), 0 until first use.
    contexts: Mutex<Vec<usize>>,
}

static DRIVER: OnceLock<std::result::Result<Driver, String>> = OnceLock::new();

/// The driver, loaded and initialized on first use.
fn driver() -> Result<&'static Driver> {
    match DRIVER.get_or_init(|| {
        std::panic::catch_unwind(load).unwrap_or_else(|_| Err("loading it panicked".into()))
    }) {
        Ok(d) => Ok(d),
        Err(reason) => crate::bail!(Device, "CUDA driver not available: {reason}"),
    }
}

fn load() -> std::result::Result<Driver, String> {
    // SAFETY: only tries to open the library under its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err("the library libcuda.so (the NVIDIA driver) was not found".into());
    }
    // SAFETY: the library is present (checked above), so this loads it
    // instead of panicking.
    let lib = unsafe { sys::culib() };
    for name in ENTRY_POINTS {
        // SAFETY: looks the symbol up without calling it; the type is only
        // a placeholder for the address.
        if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
            return Err(format!(
                "libcuda.so has no entry point {name} (driver too old?)"
            ));
        }
    }
    // SAFETY: every entry point used here exists (checked above).
    let r = unsafe { sys::cuInit(0) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuInit failed: {}", describe(r)));
    }
    let mut count = 0;
    // SAFETY: cuDeviceGetCount is among ENTRY_POINTS, found in the loop
    // above, and cuInit succeeded; `count` is a live local c_int, a valid
    // out-pointer.
    let r = unsafe { sys::cuDeviceGetCount(&mut count) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuDeviceGetCount failed: {}", describe(r)));
    }
    Ok(Driver {
        device_count: count,
        contexts: Mutex::new(vec![0; count.max(0) as usize]),
    })
}

/// "CUDA_ERROR_X (description)".
fn describe(r: sys::CUresult) -> String {
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: only called once the driver is loaded with this entry point;
    // `text` is a valid out-pointer.
    let ok = unsafe { sys::cuGetErrorString(r, &mut text) } == sys::CUresult::CUDA_SUCCESS;
    if ok && !text.is_null() {
        // SAFETY: the driver returns a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{r:?} ({s})")
    } else {
        format!("{r:?}")
    }
}

/// Turns a driver result into an error naming the call.
fn check(r: sys::CUresult, what: impl FnOnce() -> String) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let kind = if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        ErrorKind::OutOfMemory
    } else {
        ErrorKind::Device
    };
    Err(Error::new(
        kind,
        format!("{} failed: {}", what(), describe(r)),
    ))
}

impl Driver {
    /// The primary context of `index`, retained on first use.
    fn context(&self, index: i32) -> Result<sys::CUcontext> {
        crate::ensure!(
            (0..self.device_count).contains(&index),
            Device,
            "cuda:{index} is not a device: this machine has {} CUDA device(s)",
            self.device_count
        );
        let mut contexts = self.contexts.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut contexts[index as usize];
        if *slot == 0 {
            let mut dev = 0;
            // SAFETY: the driver is loaded and initialized; out-pointers
            // are valid.
            check(unsafe { sys::cuDeviceGet(&mut dev, index) }, || {
                format!("cuDeviceGet({index})")
            })?;
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: the driver is loaded and initialized (a Driver exists
            // only once load's cuInit succeeded); `dev` is the device
            // cuDeviceGet just returned, and `ctx` a valid out-pointer.
            let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) };
            check(r, || format!("cuDevicePrimaryCtxRetain(cuda:{index})"))?;
            *slot = ctx as usize;
        }
        Ok(*slot as sys::CUcontext)
    }

    /// Runs `f` with device `index`'s primary context current.
    fn on_device<T>(&self, index: i32, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let ctx = self.context(index)?;
        // SAFETY: ctx is a retained primary context.
        check(unsafe { sys::cuCtxPushCurrent_v2(ctx) }, || {
            format!("cuCtxPushCurrent(cuda:{index})")
        })?;
        let result = f();
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed above; `popped` is a valid
        // out-pointer.
        let r = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
        result.and_then(|v| check(r, || "cuCtxPopCurrent".into()).map(|_| v))
    }

    /// The device of the thread's current context, or 0.
    fn current_device(&self) -> i32 {
        // With one device there is nothing to ask (every allocation with
        // the default device -1 comes here).
        if self.device_count == 1 {
            return 0;
        }
        let mut dev = 0;
        // SAFETY: driver loaded; a valid out-pointer. Fails (leaving 0)
        // when no context is current.
        let r = unsafe { sys::cuCtxGetDevice(&mut dev) };
        if r == sys::CUresult::CUDA_SUCCESS {
            dev
        } else {
            0
        }
    }

    /// The device index a CUDA device stands for.
    fn index_of(&self, device: Device) -> Result<i32> {
        crate::ensure!(
            device.device_type == DeviceType::Cuda,
            Device,
            "the CUDA device allocator cannot allocate on {device}"
        );
        Ok(if device.index < 0 {
            self.current_device()
        } else {
            i32::from(device.index)
        })
    }

    /// The device whose memory `p` is, if the driver knows the address
    /// (device memory, or host memory it pinned or registered). Asked with
    /// cuPointerGetAttributes, which, unlike cuPointerGetAttribute, succeeds
    /// for host memory the driver does not know (memory type 0), so probing
    /// a plain host pointer is not an error (compute-sanitizer reported each
    /// such probe of the singular call as one).
    fn device_of(&self, p: *const c_void) -> Option<i32> {
        let mut memory_type: u32 = 0;
        let mut ordinal: i32 = -1;
        let mut attributes = [
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        ];
        let mut data = [
            &mut memory_type as *mut u32 as *mut c_void,
            &mut ordinal as *mut i32 as *mut c_void,
        ];
        let r = self
            .on_device(0, || {
                // SAFETY: driver loaded; two attributes, each with a valid
                // out-pointer of its type (CUmemorytype: unsigned int;
                // the ordinal: int).
                Ok(unsafe {
                    sys::cuPointerGetAttributes(
                        2,
                        attributes.as_mut_ptr(),
                        data.as_mut_ptr(),
                        p as sys::CUdeviceptr,
                    )
                })
            })
            .ok()?;
        (r == sys::CUresult::CUDA_SUCCESS && memory_type != 0 && ordinal >= 0).then_some(ordinal)
    }

    /// cuMemcpy between any two pointers (unified addressing tells host and
    /// device memory apart), with the context of the device involved.
    ///
    /// # Safety
    /// `dst` and `src` valid for `nbytes` on their devices, not overlapping.
    unsafe fn copy(&self, dst: *mut c_void, src: *const c_void, nbytes: usize) -> Result<()> {
        if nbytes == 0 {
            return Ok(());
        }
        let device = self.device_of(dst).or_else(|| self.device_of(src));
        self.on_device(device.unwrap_or(0), || {
            // SAFETY: the caller guarantees both ranges valid for nbytes
            // on their devices and disjoint, cuMemcpy's contract; on_device
            // made the device's context current, which the call needs.
            check(
                unsafe { sys::cuMemcpy(dst as sys::CUdeviceptr, src as sys::CUdeviceptr, nbytes) },
                || format!("cuMemcpy of {nbytes} bytes"),
            )
        })
    }
}

/// Whether a driver loads and sees at least one device (loads the driver
/// on first call).
pub fn is_available() -> bool {
    device_count() > 0
}

/// The number of CUDA devices; 0 without a driver.
pub fn device_count() -> i32 {
    driver().map_or(0, |d| d.device_count)
}

/// Loads and initializes the driver; the error says why CUDA cannot be
/// used.
pub fn init() -> Result<()> {
    let d = driver()?;
    crate::ensure!(
        d.device_count > 0,
        Device,
        "CUDA driver not available: it reports no CUDA device"
    );
    Ok(())
}

/// Resolves index -1 ("current") for the caching layer.
fn resolve_device(device: Device) -> Result<Device> {
    let index = driver()?.index_of(device)?;
    Device::new(DeviceType::Cuda, index as i8)
}

/// Device memory: one cuMemAlloc per allocation.
struct CudaDevice;

/// The context of a device allocation.
struct DeviceBlock {
    ptr: sys::CUdeviceptr,
    device: i32,
}

unsafe extern "C" fn device_free(ctx: *mut c_void) {
    // SAFETY: ctx is the Box made in CudaDevice::allocate, freed once here.
    let block = unsafe { Box::from_raw(ctx as *mut DeviceBlock) };
    if let Ok(d) = driver() {
        // A failure cannot be reported from a deleter; it happens only
        // when the driver is shutting down with the process.
        let _ = d.on_device(block.device, || {
            // SAFETY: the pointer came from cuMemAlloc on this device and
            // is freed once.
            check(unsafe { sys::cuMemFree_v2(block.ptr) }, || {
                "cuMemFree".into()
            })
        });
    }
}

impl RawAllocator for CudaDevice {
    fn device_hooks(&self) -> crate::allocator::DeviceHooks {
        crate::allocator::DeviceHooks {
            resolve_current: Some(resolve_device),
            streams: Some(&streams::OPS),
            memory_info: Some(memory_info),
            virtual_memory: Some(&vmm::DEVICE_VM),
        }
    }

    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        let d = driver()?;
        let index = d.index_of(device)?;
        let device = Device::new(DeviceType::Cuda, index as i8)?;
        if nbytes == 0 {
            return Ok(DataPtr::empty(device));
        }
        let ptr = d.on_device(index, || {
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: a context is current; `p` is a valid out-pointer.
            check(unsafe { sys::cuMemAlloc_v2(&mut p, nbytes) }, || {
                format!("cuMemAlloc of {nbytes} bytes on {device}")
            })?;
            Ok(p)
        })?;
        let ctx = Box::into_raw(Box::new(DeviceBlock { ptr, device: index }));
        // SAFETY: device_free frees exactly this allocation, once.
        Ok(unsafe {
            DataPtr::from_raw_parts(
                ptr as *mut c_void,
                ctx as *mut c_void,
                Some(device_free),
                device,
            )
        })
    }

    unsafe fn copy_data(&self, dst: *mut c_void, src: *const c_void, nbytes: usize) -> Result<()> {
        // SAFETY: copy_data's contract (both ranges valid for nbytes,
        // disjoint) is Driver::copy's, and the caller upholds it.
        unsafe { driver()?.copy(dst, src, nbytes) }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Page-locked host memory: cuMemHostAlloc (portable to every context).
struct CudaPinned;

unsafe extern "C" fn pinned_free(ctx: *mut c_void) {
    if let Ok(d) = driver() {
        // As in device_free, a failure cannot be reported here.
        let _ = d.on_device(0, || {
            // SAFETY: ctx came from cuMemHostAlloc and is freed once.
            check(unsafe { sys::cuMemFreeHost(ctx) }, || {
                "cuMemFreeHost".into()
            })
        });
    }
}

impl RawAllocator for CudaPinned {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        crate::ensure!(
            device.is_cpu(),
            Device,
            "the CUDA pinned-memory allocator allocates host memory, not {device}"
        );
        let d = driver()?;
        if nbytes == 0 {
            return Ok(DataPtr::empty(Device::CPU));
        }
        let p = d.on_device(0, || {
            let mut p: *mut c_void = std::ptr::null_mut();
            // SAFETY: the driver is loaded (driver() succeeded) and
            // on_device made device 0's primary context current for this
            // closure; `p` is a valid out-pointer.
            let r = unsafe { sys::cuMemHostAlloc(&mut p, nbytes, sys::CU_MEMHOSTALLOC_PORTABLE) };
            check(r, || format!("cuMemHostAlloc of {nbytes} bytes"))?;
            Ok(p)
        })?;
        // SAFETY: pinned_free frees exactly this allocation, given its
        // address, once.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(pinned_free), Device::CPU) })
    }

    fn raw_deleter(&self) -> Option<DeleterFn> {
        Some(pinned_free)
    }

    unsafe fn copy_data(&self, dst: *mut c_void, src: *const c_void, nbytes: usize) -> Result<()> {
        // SAFETY: copy_data's contract (both ranges valid for nbytes,
        // disjoint) is Driver::copy's, and the caller upholds it.
        unsafe { driver()?.copy(dst, src, nbytes) }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The device allocator without caching: every allocation is a
/// cuMemAlloc. Made on first request, without loading the driver.
pub fn raw_device_allocator() -> Allocator {
    static RAW: OnceLock<Allocator> = OnceLock::new();
    RAW.get_or_init(|| {
        let current = Device::new(DeviceType::Cuda, -1).expect("cuda:-1 is a device");
        Allocator::new("cuda_raw", current, Box::new(CudaDevice))
    })
    .clone()
}

/// The device allocator of TSR_CUDA: [`raw_device_allocator`] behind the
/// caching layer (pools per device).
pub fn device_allocator() -> Allocator {
    static CACHED: OnceLock<Allocator> = OnceLock::new();
    CACHED
        .get_or_init(|| {
            let options = CachingOptions {
                name: Some("cuda".into()),
                ..Default::default()
            };
            caching::new(raw_device_allocator(), options).expect("default options are valid")
        })
        .clone()
}

/// Pinned host memory for CPU tensors (fast host <-> device copies),
/// behind the caching layer: cuMemHostAlloc is slow, so freed memory is
/// kept for reuse.
pub fn pinned_allocator() -> Allocator {
    static PINNED: OnceLock<Allocator> = OnceLock::new();
    PINNED
        .get_or_init(|| {
            let raw = Allocator::new("cuda_pinned_raw", Device::CPU, Box::new(CudaPinned));
            let options = CachingOptions {
                name: Some("cuda_pinned".into()),
                ..Default::default()
            };
            caching::new(raw, options).expect("default options are valid")
        })
        .clone()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vmm_tests;
