//! PyTorch's CUDA memory through tessera: the functions behind the C
//! exports `tsr_torch_cuda_malloc` / `tsr_torch_cuda_free` that
//! `torch.cuda.memory.CUDAPluggableAllocator` loads, and its optional hooks
//! (empty_cache, memory fraction, record_stream, init). Memory comes from
//! the CUDA device allocator (`device_allocator`: the caching layer over
//! cuMemAlloc, or over expandable segments with TESSERA_ALLOC_CONF's
//! `expandable_segments:true`), on the stream PyTorch names for each
//! request. PyTorch frees by address, so the handed-out blocks are kept
//! by address until then (a sharded table: one lock per 1/16 of the
//! addresses).

use super::{device_allocator, streams};
use crate::allocator::caching;
use crate::data_ptr::DataPtr;
use crate::device::{Device, DeviceType};
use crate::error::Result;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

const SHARDS: usize = 16;

/// The blocks handed out to PyTorch, by address.
static LIVE: [Mutex<BTreeMap<usize, DataPtr>>; SHARDS] =
    [const { Mutex::new(BTreeMap::new()) }; SHARDS];

fn shard(ptr: usize) -> MutexGuard<'static, BTreeMap<usize, DataPtr>> {
    // Blocks are 512-byte aligned: the bits above pick the shard.
    LIVE[(ptr >> 9) % SHARDS]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn cuda_device(device: i32) -> Result<Device> {
    crate::ensure!(
        (0..=i32::from(i8::MAX)).contains(&device),
        Device,
        "device {device} is not a CUDA device index: expected 0 or more"
    );
    Device::new(DeviceType::Cuda, device as i8)
}

/// Allocates `size` bytes on CUDA device `device` for work on `stream`;
/// NULL for 0 bytes.
pub fn malloc(size: isize, device: i32, stream: usize) -> Result<*mut c_void> {
    crate::ensure!(
        size >= 0,
        InvalidArgument,
        "size {size} is negative: expected a number of bytes"
    );
    let dev = cuda_device(device)?;
    if size == 0 {
        return Ok(std::ptr::null_mut());
    }
    let alloc = device_allocator();
    let dp = streams::with_stream(device as usize, stream, || {
        alloc.allocate_on(size as usize, dev)
    })?;
    let ptr = dp.get();
    shard(ptr as usize).insert(ptr as usize, dp);
    Ok(ptr)
}

/// Frees what [`malloc`] returned (the block goes back to the pools of
/// the stream it was allocated on); false for an address it did not
/// return (nothing done).
pub fn free(ptr: *mut c_void) -> bool {
    if ptr.is_null() {
        return true;
    }
    let dp = shard(ptr as usize).remove(&(ptr as usize));
    // Dropped outside the table's lock: the free takes the pool's.
    dp.is_some()
}

/// c10's recordStream for memory [`malloc`] returned: its reuse after the
/// free waits for the work queued on `stream` by then.
pub fn record_stream(ptr: *mut c_void, stream: usize) -> Result<()> {
    let table = shard(ptr as usize);
    let Some(dp) = table.get(&(ptr as usize)) else {
        crate::bail!(
            InvalidArgument,
            "{ptr:?} is not memory tsr_torch_cuda_malloc handed out (or it was freed)"
        );
    };
    caching::record_stream(dp, stream)?;
    Ok(())
}

/// Returns the unused cached memory of every device.
pub fn empty_cache() -> Result<()> {
    device_allocator().empty_cache()
}

/// c10's set_per_process_memory_fraction for device `device`.
pub fn set_memory_fraction(fraction: f64, device: i32) -> Result<()> {
    let dev = cuda_device(device)?;
    let alloc = device_allocator();
    let c = caching::of(&alloc).expect("the device allocator is a caching allocator");
    c.set_memory_fraction(dev, fraction)
}

/// The number of blocks handed out to PyTorch and not freed (tests).
pub fn live_blocks() -> usize {
    LIVE.iter()
        .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
        .sum()
}
