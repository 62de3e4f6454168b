//! Host address space for expandable segments over the built-in CPU
//! allocator: a reservation of address space with no access and no
//! commit charge, pages committed into it (mapped in) and decommitted
//! (unmapped: their memory goes back to the system at once), through
//! `platform::vmem` (Unix: mmap with PROT_NONE / MAP_FIXED; Windows:
//! VirtualAlloc / VirtualFree). Pages are 2 MiB (the size of a
//! transparent huge page) and the reservation is aligned to them. Also
//! the host's free and total memory, for memory fractions and
//! out-of-memory observers.

use super::device_hooks::{MemoryInfo, Reservation, VirtualMemory};
use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::platform::vmem;

/// The mapping granularity.
pub(crate) const PAGE: usize = 2 << 20;

/// The host's free and physical memory (platform::vmem: Linux's sysconf,
/// Windows' GlobalMemoryStatusEx; elsewhere Unsupported).
pub(crate) fn memory_info(_device: Device) -> Result<MemoryInfo> {
    match vmem::memory_info() {
        Ok((free, total)) => Ok(MemoryInfo { free, total }),
        Err(vmem::NoMemoryInfo::Failed(why)) => Err(Error::new(ErrorKind::Device, why)),
        Err(vmem::NoMemoryInfo::Unsupported(why)) => Err(Error::new(ErrorKind::Unsupported, why)),
    }
}

/// The CPU's [`VirtualMemory`].
pub(crate) struct HostVirtualMemory;

/// The one instance the CPU allocator's hooks hand out.
pub(crate) static HOST_VM: HostVirtualMemory = HostVirtualMemory;

fn os_error(what: String, e: std::io::Error) -> Error {
    let kind = if vmem::is_out_of_memory(&e) {
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
        let base = vmem::reserve(size, PAGE, span).map_err(|e| {
            os_error(
                format!(
                    "reserving {size} bytes of address space ({})",
                    vmem::RESERVE_CALL
                ),
                e,
            )
        })?;
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
        self.check(offset, len);
        // SAFETY: inside this reservation only (checked above), which
        // this object owns.
        unsafe { vmem::commit(self.base + offset, len) }.map_err(|e| {
            os_error(
                format!("mapping {len} bytes of host memory ({})", vmem::COMMIT_CALL),
                e,
            )
        })
    }

    fn unmap(&mut self, offset: usize, len: usize) -> Result<()> {
        self.check(offset, len);
        // SAFETY: inside this reservation only (checked above); the
        // caching layer unmaps only free pages.
        unsafe { vmem::decommit(self.base + offset, len) }.map_err(|e| {
            os_error(
                format!(
                    "unmapping {len} bytes of host memory ({})",
                    vmem::DECOMMIT_CALL
                ),
                e,
            )
        })
    }
}

impl Drop for HostReservation {
    fn drop(&mut self) {
        // SAFETY: the whole reservation, made in reserve and owned here;
        // no block of it is in use any more (the caching layer drops a
        // reservation only when every page is unmapped and free).
        unsafe { vmem::release(self.base, self.size) };
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
