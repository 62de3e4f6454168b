//! The C heap's aligned blocks and huge-page advice. malloc / calloc /
//! free are the C library's on every platform (libc names them
//! everywhere); what differs is here: `posix_memalign` (Unix) against an
//! over-allocation aligned by hand (Windows, whose `_aligned_malloc`
//! blocks need their own free), and `MADV_HUGEPAGE` (Linux only).

use std::ffi::c_void;

/// A block of `total` bytes from the C heap aligned to `align` (a power
/// of two): the pointer to give to `free` and the aligned start, the
/// first `total` bytes from which are the caller's; the OS error code on
/// failure.
#[cfg(unix)]
#[inline]
pub(crate) fn aligned_block(align: usize, total: usize) -> Result<(*mut c_void, *mut u8), i32> {
    let mut raw: *mut c_void = std::ptr::null_mut();
    // SAFETY: posix_memalign writes a pointer to `raw` on success.
    let rc = unsafe { libc::posix_memalign(&mut raw, align, total) };
    if rc != 0 || raw.is_null() {
        return Err(rc);
    }
    Ok((raw, raw as *mut u8))
}

/// As on Unix; Windows has no posix_memalign, so the block is `align`
/// bytes larger and its start aligned by hand (freed with plain `free`).
#[cfg(windows)]
pub(crate) fn aligned_block(align: usize, total: usize) -> Result<(*mut c_void, *mut u8), i32> {
    let Some(size) = total.checked_add(align) else {
        return Err(libc::ENOMEM);
    };
    // SAFETY: plain C allocation; checked for NULL below.
    let raw = unsafe { libc::malloc(size) };
    if raw.is_null() {
        return Err(libc::ENOMEM);
    }
    let skip = (raw as usize).next_multiple_of(align) - raw as usize;
    // SAFETY: skip < align, so the aligned start and `total` bytes after
    // it lie inside the `total + align` bytes just allocated.
    Ok((raw, unsafe { (raw as *mut u8).add(skip) }))
}

/// Advises transparent huge pages for `[addr, addr + len)` (Linux's
/// MADV_HUGEPAGE; a failure leaves normal pages). Elsewhere nothing is
/// advised.
///
/// # Safety
/// The range lies in memory the caller owns.
#[inline]
pub(crate) unsafe fn advise_huge_pages(addr: *mut u8, len: usize) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: the caller's contract; madvise only advises.
    unsafe {
        libc::madvise(addr as *mut c_void, len, libc::MADV_HUGEPAGE)
    };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (addr, len);
}
