//! Address space on Windows: a reservation is `VirtualAlloc(MEM_RESERVE,
//! PAGE_NOACCESS)`; committing is `VirtualAlloc(MEM_COMMIT,
//! PAGE_READWRITE)` of pages inside it (fresh pages are zero);
//! decommitting is `VirtualFree(MEM_DECOMMIT)`, which gives their memory
//! back at once. A reservation cannot be trimmed, so an aligned one is
//! found by reserving `size + align`, releasing it and reserving again at
//! the aligned address inside (another thread may take it meanwhile: a
//! few tries). The host's memory through `GlobalMemoryStatusEx`.

use std::ffi::c_void;
use std::io;

use super::NoMemoryInfo;

/// The calls that reserve, commit and decommit (for messages).
pub(crate) const RESERVE_CALL: &str = "VirtualAlloc";
/// See [`RESERVE_CALL`].
pub(crate) const COMMIT_CALL: &str = "VirtualAlloc";
/// See [`RESERVE_CALL`].
pub(crate) const DECOMMIT_CALL: &str = "VirtualFree";
use windows_sys::Win32::Foundation::{
    ERROR_COMMITMENT_LIMIT, ERROR_NOT_ENOUGH_MEMORY, ERROR_OUTOFMEMORY,
};
use windows_sys::Win32::System::Memory::{
    VirtualAlloc, VirtualFree, MEM_COMMIT, MEM_DECOMMIT, MEM_RELEASE, MEM_RESERVE, PAGE_NOACCESS,
    PAGE_READWRITE,
};
use windows_sys::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};

/// Whether `e` says the system is out of memory or commit charge.
pub(crate) fn is_out_of_memory(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(|c| c as u32),
        Some(ERROR_NOT_ENOUGH_MEMORY | ERROR_OUTOFMEMORY | ERROR_COMMITMENT_LIMIT)
    )
}

/// The host's free and physical memory in bytes.
///
/// A report of no physical memory is asked again (a few times, a
/// millisecond apart): Wine's GlobalMemoryStatusEx keeps its answer for a
/// second and marks it fresh before filling it, so a thread that asks
/// while another fills it gets zeros (seen once in CI under Wine 8.0: an
/// expandable segment's reservation came out 0 bytes).
pub(crate) fn memory_info() -> Result<(u64, u64), NoMemoryInfo> {
    for _ in 0..100 {
        // SAFETY: an all-zero MEMORYSTATUSEX is a valid value to fill.
        let mut st: MEMORYSTATUSEX = unsafe { std::mem::zeroed() };
        st.dwLength = std::mem::size_of::<MEMORYSTATUSEX>() as u32;
        // SAFETY: a writable MEMORYSTATUSEX with its length set.
        if unsafe { GlobalMemoryStatusEx(&mut st) } == 0 {
            return Err(NoMemoryInfo::Failed(format!(
                "GlobalMemoryStatusEx could not tell the host's memory: {}",
                io::Error::last_os_error()
            )));
        }
        if st.ullTotalPhys > 0 {
            return Ok((st.ullAvailPhys, st.ullTotalPhys));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Err(NoMemoryInfo::Failed(
        "GlobalMemoryStatusEx reported 0 bytes of physical memory".into(),
    ))
}

/// Reserves `size` bytes of address space aligned to `align`: the aligned
/// base. `span` is `size + align` (checked by the caller).
pub(crate) fn reserve(size: usize, align: usize, span: usize) -> io::Result<usize> {
    for _ in 0..16 {
        // SAFETY: a new reservation at an address of the system's choice.
        let p = unsafe { VirtualAlloc(std::ptr::null(), span, MEM_RESERVE, PAGE_NOACCESS) };
        if p.is_null() {
            return Err(io::Error::last_os_error());
        }
        let base = (p as usize).next_multiple_of(align);
        // SAFETY: the reservation just made, released whole.
        unsafe { VirtualFree(p, 0, MEM_RELEASE) };
        // SAFETY: a new reservation inside the range just released.
        let q = unsafe { VirtualAlloc(base as *const c_void, size, MEM_RESERVE, PAGE_NOACCESS) };
        if !q.is_null() {
            return Ok(q as usize);
        }
    }
    Err(io::Error::last_os_error())
}

/// Commits `[addr, addr + len)`: readable, writable, zero.
///
/// # Safety
/// The range lies inside a reservation the caller owns.
pub(crate) unsafe fn commit(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: pages of the caller's reservation (the caller's contract).
    let p = unsafe { VirtualAlloc(addr as *const c_void, len, MEM_COMMIT, PAGE_READWRITE) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Decommits `[addr, addr + len)`: no access, its memory given back.
///
/// # Safety
/// The range lies inside a reservation the caller owns, and nothing uses
/// its memory any more.
pub(crate) unsafe fn decommit(addr: usize, len: usize) -> io::Result<()> {
    // SAFETY: pages of the caller's reservation, unused (the contract).
    if unsafe { VirtualFree(addr as *mut c_void, len, MEM_DECOMMIT) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives a whole reservation back.
///
/// # Safety
/// `base` is a reservation made by [`reserve`], owned by the caller, no
/// part of it in use any more.
pub(crate) unsafe fn release(base: usize, _size: usize) {
    // SAFETY: the caller's contract; MEM_RELEASE takes the whole
    // reservation from its base, with size 0.
    unsafe { VirtualFree(base as *mut c_void, 0, MEM_RELEASE) };
}
