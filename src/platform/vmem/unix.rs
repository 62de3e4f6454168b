//! Address space on Unix: a reservation is an anonymous mapping with no
//! access (PROT_NONE, MAP_NORESERVE: no memory and no commit charge);
//! committing maps fresh readable and writable anonymous memory over
//! pages (MAP_FIXED, inside the reservation only), decommitting maps
//! PROT_NONE memory back over them, which gives their memory to the
//! system at once. The host's memory through `sysconf` (Linux: glibc
//! reads /proc/meminfo); elsewhere it has no portable query.

use std::ffi::c_void;
use std::io;

use super::NoMemoryInfo;

/// The calls that reserve, commit and decommit (for messages).
pub(crate) const RESERVE_CALL: &str = "mmap";
/// See [`RESERVE_CALL`].
pub(crate) const COMMIT_CALL: &str = "mmap";
/// See [`RESERVE_CALL`].
pub(crate) const DECOMMIT_CALL: &str = "mmap";

/// Whether `e` says the system is out of memory (ENOMEM).
pub(crate) fn is_out_of_memory(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOMEM)
}

/// The host's free and physical memory in bytes; Err with the values
/// read when sysconf cannot tell.
#[cfg(target_os = "linux")]
pub(crate) fn memory_info() -> Result<(u64, u64), NoMemoryInfo> {
    // SAFETY: sysconf only reads system information.
    let (pages, free, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_AVPHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if !(pages > 0 && free >= 0 && page > 0) {
        return Err(NoMemoryInfo::Failed(format!(
            "sysconf could not tell the host's memory (physical pages {pages}, free {free}, \
             page size {page})"
        )));
    }
    Ok((free as u64 * page as u64, pages as u64 * page as u64))
}

/// The host's free memory has no portable query off Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) fn memory_info() -> Result<(u64, u64), NoMemoryInfo> {
    Err(NoMemoryInfo::Unsupported(format!(
        "the host's free memory can only be read on Linux, not on {}",
        crate::platform::OS_NAME
    )))
}

/// Reserves `size` bytes of address space aligned to `align` (a power of
/// two, a multiple of the system page, as is `size`): the aligned base.
/// `span` is `size + align` (checked by the caller).
pub(crate) fn reserve(size: usize, align: usize, span: usize) -> io::Result<usize> {
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
        return Err(io::Error::last_os_error());
    }
    // Trim to a range aligned to `align`: the head and the tail go back
    // (each a whole number of system pages).
    let start = p as usize;
    let base = start.next_multiple_of(align);
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
    Ok(base)
}

/// Maps fresh anonymous memory with `prot` over `[addr, addr + len)`.
///
/// # Safety
/// The range lies inside a reservation the caller owns.
unsafe fn remap(addr: usize, len: usize, prot: i32, flags: i32) -> io::Result<()> {
    // SAFETY: MAP_FIXED inside the caller's reservation only (the
    // caller's contract): no other mapping is replaced.
    let p = unsafe {
        libc::mmap(
            addr as *mut c_void,
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Commits `[addr, addr + len)`: readable, writable, zero.
///
/// # Safety
/// The range lies inside a reservation the caller owns.
pub(crate) unsafe fn commit(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe { remap(addr, len, libc::PROT_READ | libc::PROT_WRITE, 0) }
}

/// Decommits `[addr, addr + len)`: no access, its memory given back.
///
/// # Safety
/// The range lies inside a reservation the caller owns, and nothing uses
/// its memory any more.
pub(crate) unsafe fn decommit(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe { remap(addr, len, libc::PROT_NONE, libc::MAP_NORESERVE) }
}

/// Gives a whole reservation back.
///
/// # Safety
/// `[base, base + size)` is a reservation made by [`reserve`], owned by
/// the caller, no part of it in use any more.
pub(crate) unsafe fn release(base: usize, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { libc::munmap(base as *mut c_void, size) };
}
