//! CUDA streams for the caching device allocator: the calling thread's
//! current stream per device (c10's getCurrentCUDAStream /
//! setCurrentCUDAStream), the events the caching layer waits on for
//! `record_stream`, and the stream handshake of a DLPack export.
//!
//! A stream is a CUstream handle as a word; 0 is the legacy default stream
//! (also what every thread starts with), and CU_STREAM_LEGACY (1) and
//! CU_STREAM_PER_THREAD (2) are the driver's own special handles, which
//! DLPack's stream numbers for CUDA happen to equal.

use super::{check, driver};
use crate::allocator::caching::StreamOps;
use crate::device::{Device, DeviceType};
use crate::error::Result;
use cudarc::driver::sys;
use std::cell::RefCell;

thread_local! {
    /// The current stream of each device index (missing: 0).
    static CURRENT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Makes `stream` the calling thread's current stream on device `index`
/// (-1: the current device): allocations there come from its pools.
pub fn set_current_stream(index: i32, stream: usize) -> Result<()> {
    let d = driver()?;
    crate::ensure!(
        (-1..=i32::from(i8::MAX)).contains(&index),
        Device,
        "cuda:{index} is not a device: expected -1 (the current device) or an index below {}",
        d.device_count
    );
    let index = d.index_of(Device::new(DeviceType::Cuda, index as i8)?)?;
    d.context(index)?;
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let i = index as usize;
        if c.len() <= i {
            c.resize(i + 1, 0);
        }
        c[i] = stream;
    });
    Ok(())
}

/// Runs `f` with `stream` as the calling thread's current stream on device
/// `index` (a real index, not -1), then puts the previous one back: for a
/// host that names the stream with each request (PyTorch's pluggable
/// allocator), without the checks of [`set_current_stream`].
pub(super) fn with_stream<R>(index: usize, stream: usize, f: impl FnOnce() -> R) -> R {
    let swap = |s: usize| {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() <= index {
                c.resize(index + 1, 0);
            }
            std::mem::replace(&mut c[index], s)
        })
    };
    let previous = swap(stream);
    let r = f();
    swap(previous);
    r
}

/// The calling thread's current stream on device `index` (0 until set).
pub fn current_stream(index: i32) -> usize {
    if index < 0 {
        return match driver() {
            Ok(d) => current_stream(d.current_device()),
            Err(_) => 0,
        };
    }
    CURRENT.with(|c| c.borrow().get(index as usize).copied().unwrap_or(0))
}

/// Makes `consumer` wait for the work queued so far on the current stream
/// of device `index` (an event recorded there); nothing when they are the
/// same stream.
pub fn stream_wait(index: i32, consumer: usize) -> Result<()> {
    let producer = current_stream(index);
    if producer == consumer {
        return Ok(());
    }
    let device = Device::new(DeviceType::Cuda, index as i8)?;
    let event = OPS.record(device, producer)?;
    let d = driver()?;
    let result = d.on_device(index, || {
        // SAFETY: the driver is loaded, the device's context is current,
        // and `event` was just recorded in it; the stream is the caller's.
        check(
            unsafe { sys::cuStreamWaitEvent(consumer as sys::CUstream, event as sys::CUevent, 0) },
            || format!("cuStreamWaitEvent(stream {consumer:#x})"),
        )
    });
    // Destroying an event a stream waits on is allowed: the driver frees
    // it once the wait is done.
    OPS.destroy(device, event);
    result
}

/// The caching layer's view of CUDA streams.
pub(super) struct CudaStreams;

/// The one instance the device allocator hands out.
pub(super) static OPS: CudaStreams = CudaStreams;

fn index(device: Device) -> i32 {
    i32::from(device.index.max(0))
}

impl StreamOps for CudaStreams {
    fn current(&self, device: Device) -> usize {
        current_stream(index(device))
    }

    fn record(&self, device: Device, stream: usize) -> Result<usize> {
        driver()?.on_device(index(device), || {
            let mut event: sys::CUevent = std::ptr::null_mut();
            let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
            // SAFETY: the device's context is current; `event` is a valid
            // out-pointer.
            check(unsafe { sys::cuEventCreate(&mut event, flags) }, || {
                "cuEventCreate".into()
            })?;
            // SAFETY: the event was just created in this context; the
            // stream is one the host made current or recorded.
            let r = unsafe { sys::cuEventRecord(event, stream as sys::CUstream) };
            if let Err(e) = check(r, || format!("cuEventRecord(stream {stream:#x})")) {
                // SAFETY: created above and never recorded or shared.
                unsafe { sys::cuEventDestroy_v2(event) };
                return Err(e);
            }
            Ok(event as usize)
        })
    }

    fn query(&self, device: Device, event: usize) -> Result<bool> {
        driver()?.on_device(index(device), || {
            // SAFETY: `event` is a live event of this device's context.
            match unsafe { sys::cuEventQuery(event as sys::CUevent) } {
                sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                r => check(r, || "cuEventQuery".into()).map(|_| true),
            }
        })
    }

    fn synchronize(&self, device: Device, event: usize) -> Result<()> {
        driver()?.on_device(index(device), || {
            // SAFETY: `event` is a live event of this device's context.
            check(
                unsafe { sys::cuEventSynchronize(event as sys::CUevent) },
                || "cuEventSynchronize".into(),
            )
        })
    }

    fn destroy(&self, device: Device, event: usize) {
        if let Ok(d) = driver() {
            let _ = d.on_device(index(device), || {
                // SAFETY: `event` is a live event, destroyed once.
                check(
                    unsafe { sys::cuEventDestroy_v2(event as sys::CUevent) },
                    || "cuEventDestroy".into(),
                )
            });
        }
    }
}
