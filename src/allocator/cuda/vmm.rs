//! CUDA's virtual memory management for expandable segments (c10's
//! ExpandableSegment): a reservation is cuMemAddressReserve'd address
//! space on one device; mapping creates one physical allocation per page
//! (cuMemCreate, pinned device memory), maps it (cuMemMap) and makes the
//! range readable and writable from that device (cuMemSetAccess);
//! unmapping undoes it (cuMemUnmap, cuMemRelease). Pages are the
//! driver's allocation granularity, at least 2 MiB. Also the device's free
//! and total memory (cuMemGetInfo).
//!
//! The entry points are looked up when first needed, so that a driver
//! without them (older than CUDA 10.2) only fails expandable segments,
//! with a message saying so.

use super::{check, driver};
use crate::allocator::{MemoryInfo, Reservation, VirtualMemory};
use crate::device::{Device, DeviceType};
use crate::error::Result;
use cudarc::driver::sys;
use std::sync::OnceLock;

/// The entry points used here (checked before the first call).
const VMM_ENTRY_POINTS: [&str; 9] = [
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemGetAllocationGranularity",
    "cuMemGetInfo_v2",
];

/// The smallest page: c10's small-pool segment size.
const MIN_PAGE: usize = 2 << 20;

/// Whether the driver has every entry point used here.
fn vmm_entry_points() -> Result<()> {
    static CHECKED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        driver().map_err(|e| e.message().to_string())?;
        // SAFETY: driver() succeeded, so the library is loaded.
        let lib = unsafe { sys::culib() };
        for name in VMM_ENTRY_POINTS {
            // SAFETY: looks the symbol up without calling it.
            if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
                return Err(format!(
                    "libcuda.so has no entry point {name} (virtual memory management needs a \
                     driver for CUDA 10.2 or newer)"
                ));
            }
        }
        Ok(())
    });
    match checked {
        Ok(()) => Ok(()),
        Err(reason) => crate::bail!(Device, "CUDA expandable segments not available: {reason}"),
    }
}

/// The device index of a CUDA device (-1: the current device).
fn index_of(device: Device) -> Result<i32> {
    driver()?.index_of(device)
}

/// The device's free and total memory.
pub(super) fn memory_info(device: Device) -> Result<MemoryInfo> {
    vmm_entry_points()?;
    let d = driver()?;
    let index = d.index_of(device)?;
    d.on_device(index, || {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: the entry point exists (checked above); the device's
        // context is current; both out-pointers are valid.
        let r = unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) };
        check(r, || format!("cuMemGetInfo(cuda:{index})"))?;
        Ok(MemoryInfo {
            free: free as u64,
            total: total as u64,
        })
    })
}

/// Pinned memory on device `index`, with no shareable handle.
fn allocation_prop(index: i32) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct, all zero bytes is a valid value (zero
    // flags, a NULL pointer), the fields that matter set below.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = index;
    prop
}

/// The CUDA devices' [`VirtualMemory`].
pub(super) struct DeviceVm;

/// The one instance the device allocator's hooks hand out.
pub(super) static DEVICE_VM: DeviceVm = DeviceVm;

impl VirtualMemory for DeviceVm {
    fn page_size(&self, device: Device) -> Result<usize> {
        vmm_entry_points()?;
        let d = driver()?;
        let index = d.index_of(device)?;
        let prop = allocation_prop(index);
        let mut granularity = 0usize;
        d.on_device(index, || {
            // SAFETY: entry point checked; `prop` and the out-pointer are
            // valid for the call.
            check(
                unsafe {
                    sys::cuMemGetAllocationGranularity(
                        &mut granularity,
                        &prop,
                        sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                    )
                },
                || format!("cuMemGetAllocationGranularity(cuda:{index})"),
            )
        })?;
        crate::ensure!(
            granularity > 0 && granularity.is_power_of_two(),
            Device,
            "cuda:{index} reports an allocation granularity of {granularity} bytes: expected a \
             power of two"
        );
        Ok(granularity.max(MIN_PAGE))
    }

    fn reservation_size(&self, device: Device) -> Result<usize> {
        // As c10: 1 1/8 of the device's memory.
        let total = memory_info(device)?.total;
        Ok(usize::try_from(total.saturating_add(total / 8)).unwrap_or(usize::MAX / 2))
    }

    fn reserve(&self, device: Device, size: usize) -> Result<Box<dyn Reservation>> {
        let page = self.page_size(device)?;
        let d = driver()?;
        let index = index_of(device)?;
        let size = size.next_multiple_of(page);
        let base = d.on_device(index, || {
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: entry point checked; the context is current; `p` is a
            // valid out-pointer; no fixed address is asked for.
            let r = unsafe { sys::cuMemAddressReserve(&mut p, size, page, 0, 0) };
            check(r, || {
                format!("cuMemAddressReserve of {size} bytes on cuda:{index}")
            })?;
            Ok(p)
        })?;
        Ok(Box::new(DeviceReservation {
            index,
            base,
            size,
            page,
            handles: vec![None; size / page],
        }))
    }
}

/// Reserved address space on one device, with the physical page
/// allocations mapped into it.
struct DeviceReservation {
    index: i32,
    base: sys::CUdeviceptr,
    size: usize,
    page: usize,
    /// Per page, its physical allocation while mapped.
    handles: Vec<Option<sys::CUmemGenericAllocationHandle>>,
}

impl DeviceReservation {
    /// Unmaps and releases pages `first..last` that are mapped (a failure
    /// is ignored: the pages stay counted as mapped in the driver's view
    /// only, and the reservation's release frees them with the context).
    fn release_pages(&mut self, first: usize, last: usize) {
        let (base, page) = (self.base, self.page);
        for i in first..last {
            if let Some(h) = self.handles[i].take() {
                let addr = base + (i * page) as u64;
                // SAFETY: page i is mapped at addr with handle h (recorded
                // when mapped), and is unmapped and released once here.
                unsafe {
                    sys::cuMemUnmap(addr, page);
                    sys::cuMemRelease(h);
                }
            }
        }
    }
}

impl Reservation for DeviceReservation {
    fn base(&self) -> usize {
        self.base as usize
    }

    fn size(&self) -> usize {
        self.size
    }

    fn device(&self) -> Device {
        Device {
            device_type: DeviceType::Cuda,
            index: self.index as i8,
        }
    }

    fn map(&mut self, offset: usize, len: usize) -> Result<()> {
        debug_assert!(offset % self.page == 0 && len % self.page == 0);
        let (first, last) = (offset / self.page, (offset + len) / self.page);
        let d = driver()?;
        let index = self.index;
        let prop = allocation_prop(index);
        let result = d.on_device(index, || {
            for i in first..last {
                let mut h: sys::CUmemGenericAllocationHandle = 0;
                // SAFETY: entry points checked when the reservation was
                // made; the context is current; `prop` and `h` are valid.
                let r = unsafe { sys::cuMemCreate(&mut h, self.page, &prop, 0) };
                check(r, || {
                    format!("cuMemCreate of {} bytes on cuda:{index}", self.page)
                })?;
                let addr = self.base + (i * self.page) as u64;
                // SAFETY: addr..addr+page lies in this reservation and is
                // not mapped (the caller's contract); h was just created
                // with that size.
                if let Err(e) = check(unsafe { sys::cuMemMap(addr, self.page, 0, h, 0) }, || {
                    format!("cuMemMap on cuda:{index}")
                }) {
                    // SAFETY: h was created above and never mapped.
                    unsafe { sys::cuMemRelease(h) };
                    return Err(e);
                }
                self.handles[i] = Some(h);
            }
            // SAFETY: a plain C struct; all zero is valid.
            let mut access: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
            access.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
            access.location.id = index;
            access.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            let addr = self.base + offset as u64;
            // SAFETY: the range was just mapped; one access descriptor.
            check(
                unsafe { sys::cuMemSetAccess(addr, len, &access, 1) },
                || format!("cuMemSetAccess on cuda:{index}"),
            )
        });
        if result.is_err() {
            // Nothing stays mapped of a failed call.
            let _ = d.on_device(index, || {
                self.release_pages(first, last);
                Ok(())
            });
        }
        result
    }

    fn unmap(&mut self, offset: usize, len: usize) -> Result<()> {
        debug_assert!(offset % self.page == 0 && len % self.page == 0);
        let (first, last) = (offset / self.page, (offset + len) / self.page);
        let index = self.index;
        driver()?.on_device(index, || {
            self.release_pages(first, last);
            Ok(())
        })
    }
}

impl Drop for DeviceReservation {
    fn drop(&mut self) {
        if let Ok(d) = driver() {
            let index = self.index;
            let pages = self.handles.len();
            let _ = d.on_device(index, || {
                self.release_pages(0, pages);
                // SAFETY: the range was reserved in `reserve` and nothing
                // is mapped in it any more.
                unsafe { sys::cuMemAddressFree(self.base, self.size) };
                Ok(())
            });
        }
    }
}
