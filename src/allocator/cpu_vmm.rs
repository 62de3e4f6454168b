//! Host address space for expandable segments over the built-in CPU
//! allocator: a reservation is an anonymous mapping with no access
//! (PROT_NONE, MAP_NORESERVE: no memory and no commit charge), pages are
//! mapped in by mapping fresh readable and writable anonymous memory over
//! them (MAP_FIXED, inside the reservation only), and unmapped by mapping
//! PROT_NONE memory back over them, which gives their memory to the
//! system at once. Pages are 2 MiB (the size of a transparent huge page)
//! and the reservation is aligned to them. Also the host's free and total
//! memory (`sysconf`), for memory fractions and out-of-memory observers.

use super::device_hooks::{MemoryInfo, Reservation, VirtualMemory};
use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use std::ffi::c_void;

/// The mapping granularity.
pub(crate) const PAGE: usize = 2 << 20;

/// The host's free and physical memory (Linux: glibc reads both from
/// /proc/meminfo).
#[cfg(target_os = "linux")]
pub(crate) fn memory_info(_device: Device) -> Result<MemoryInfo> {
    // SAFETY: sysconf only reads system information.
    let (pages, free, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_AVPHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    crate::ensure!(
        pages > 0 && free >= 0 && page > 0,
        Device,
        "sysconf could not tell the host's memory (physical pages {pages}, free {free}, page \
         size {page})"
    );
    Ok(MemoryInfo {
        free: free as u64 * page as u64,
        total: pages as u64 * page as u64,
    })
}

/// Elsewhere the host's free memory has no portable query.
#[cfg(not(target_os = "linux"))]
pub(crate) fn memory_info(_device: Device) -> Result<MemoryInfo> {
    crate::bail!(
        Unsupported,
        "the host's free memory can only be read on Linux"
    )
}

/// The CPU's [`VirtualMemory`].
pub(crate) struct HostVirtualMemory;

/// The one instance the CPU allocator's hooks hand out.
pub(crate) static HOST_VM: HostVirtualMemory = HostVirtualMemory;

fn os_error(what: String) -> Error {
    let e = std::io::Error::last_os_error();
    let kind = if e.raw_os_error() == Some(libc::ENOMEM) {
        ErrorKind::OutOfMemory
    } else {
        ErrorKind::Internal
    };
    Error::new(kind, format!("{what} failed: {e}"))
}

impl VirtualMemory for HostVirtualMemory {
    fn page_size(&self, _device: Device) -> Result<usize> {
        Ok(PAGE)
    }

    fn reservation_size(&self, device: Device) -> Result<usize> {
        // As c10 on a GPU: 1 1/8 of the memory there is.
        let total = memory_info(device)?.total;
        let size = total.saturating_add(total / 8);
        let size = usize::try_from(size).unwrap_or(usize::MAX / 2);
        Ok(size.next_multiple_of(PAGE).min(isize::MAX as usize / 2))
    }

    fn reserve(&self, _device: Device, size: usize) -> Result<Box<dyn Reservation>> {
        crate::ensure!(
            size > 0 && size % PAGE == 0,
            InvalidArgument,
            "a host reservation of {size} bytes: expected a positive multiple of {PAGE}"
        );
        let span = size.checked_add(PAGE).ok_or_else(|| {
            crate::err!(
                OutOfMemory,
                "a host reservation of {size} bytes is too large"
            )
        })?;
        // SAFETY: a new anonymous mapping at an address of the kernel's
        // choice; nothing is accessed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_error(format!(
                "reserving {size} bytes of address space (mmap)"
            )));
        }
        // Trim to a range aligned to the page: the head and the tail go
        // back (each a whole number of system pages).
        let start = p as usize;
        let base = start.next_multiple_of(PAGE);
        let head = base - start;
        let tail = span - head - size;
        // SAFETY: both ranges lie inside the mapping just made and nothing
        // uses them.
        unsafe {
            if head > 0 {
                libc::munmap(p, head);
            }
            if tail > 0 {
                libc::munmap((base + size) as *mut c_void, tail);
            }
        }
        Ok(Box::new(HostReservation { base, size }))
    }
}

/// A reserved range of host address space.
struct HostReservation {
    base: usize,
    size: usize,
}

impl HostReservation {
    fn check(&self, offset: usize, len: usize) {
        debug_assert!(offset % PAGE == 0 && len % PAGE == 0 && len > 0);
        debug_assert!(offset.checked_add(len).is_some_and(|end| end <= self.size));
    }

    /// Maps fresh anonymous memory with `prot` over part of the range.
    fn remap(&self, offset: usize, len: usize, prot: i32, flags: i32) -> *mut c_void {
        self.check(offset, len);
        // SAFETY: MAP_FIXED inside this reservation only (checked above),
        // which this object owns: no other mapping is replaced.
        unsafe {
            libc::mmap(
                (self.base + offset) as *mut c_void,
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | flags,
                -1,
                0,
            )
        }
    }
}

impl Reservation for HostReservation {
    fn base(&self) -> usize {
        self.base
    }

    fn size(&self) -> usize {
        self.size
    }

    fn device(&self) -> Device {
        Device::CPU
    }

    fn map(&mut self, offset: usize, len: usize) -> Result<()> {
        let p = self.remap(offset, len, libc::PROT_READ | libc::PROT_WRITE, 0);
        if p == libc::MAP_FAILED {
            return Err(os_error(format!(
                "mapping {len} bytes of host memory (mmap)"
            )));
        }
        Ok(())
    }

    fn unmap(&mut self, offset: usize, len: usize) -> Result<()> {
        let p = self.remap(offset, len, libc::PROT_NONE, libc::MAP_NORESERVE);
        if p == libc::MAP_FAILED {
            return Err(os_error(format!(
                "unmapping {len} bytes of host memory (mmap)"
            )));
        }
        Ok(())
    }
}

impl Drop for HostReservation {
    fn drop(&mut self) {
        // SAFETY: the whole reservation, made in reserve and owned here;
        // no block of it is in use any more (the caching layer drops a
        // reservation only when every page is unmapped and free).
        unsafe { libc::munmap(self.base as *mut c_void, self.size) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_map_and_unmap() {
        let vm = &HOST_VM;
        assert_eq!(vm.page_size(Device::CPU).unwrap(), PAGE);
        let total = memory_info(Device::CPU).unwrap();
        assert!(total.total > 0 && total.free <= total.total);
        assert!(vm.reservation_size(Device::CPU).unwrap() as u64 >= total.total);
        let mut r = vm.reserve(Device::CPU, 8 * PAGE).unwrap();
        assert_eq!(r.base() % PAGE, 0);
        assert_eq!((r.size(), r.device()), (8 * PAGE, Device::CPU));
        r.map(2 * PAGE, 2 * PAGE).unwrap();
        let p = (r.base() + 2 * PAGE) as *mut u8;
        // SAFETY: the two pages at p were just mapped read-write.
        unsafe {
            p.write(7);
            p.add(2 * PAGE - 1).write(9);
            assert_eq!((p.read(), p.add(2 * PAGE - 1).read()), (7, 9));
        }
        r.unmap(2 * PAGE, 2 * PAGE).unwrap();
        r.map(2 * PAGE, PAGE).unwrap();
        // SAFETY: mapped again: fresh memory, zero.
        assert_eq!(unsafe { p.read() }, 0);
        assert!(vm.reserve(Device::CPU, 3).is_err());
    }
}
