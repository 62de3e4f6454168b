//! Shared memory on Windows: named segments are named file mappings
//! (sections backed by the paging file), anonymous ones are refused.
//!
//! Named (`share_name` / `open_shared`): `CreateFileMappingW` makes a
//! section of 64 + nbytes bytes under the same name a Unix build gives
//! ("/tessera-PID-TAG", in the session's namespace), a header {magic,
//! nbytes} in its first 64 bytes and the data after it; every storage
//! over it, in any process, holds its own handle (`OpenFileMappingW`)
//! and view. The name lives exactly as long as some handle does: the
//! kernel counts them, so the storage released last takes the name with
//! it, as the flock protocol does on Unix (`unix/named.rs`), and a
//! process that dies leaves nothing behind (its handles close). A section
//! backed by the paging file cannot shrink, so a view of it never faults.
//!
//! Refused (Unsupported, naming the platform): `share_memory` and the
//! descriptors (`share_fd` / `from_fd`): Windows has no descriptors to
//! hand out, and a section without a name is reached only by duplicating
//! a handle into a known process.

use crate::error::Result;
use std::convert::Infallible;
use std::ffi::{CStr, CString};
use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ALREADY_EXISTS, ERROR_FILE_NOT_FOUND, HANDLE,
    INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::System::Memory::{
    CreateFileMappingW, MapViewOfFile, OpenFileMappingW, UnmapViewOfFile, VirtualQuery,
    FILE_MAP_READ, FILE_MAP_WRITE, MEMORY_BASIC_INFORMATION, MEMORY_MAPPED_VIEW_ADDRESS,
    PAGE_READWRITE,
};

/// A descriptor number, as the C API spells it.
pub type RawFd = std::ffi::c_int;

/// An owned descriptor: none exists on Windows.
#[derive(Debug)]
pub struct OwnedFd(Infallible);

/// The header before a named segment's data.
const HEADER: usize = 64;
/// "tsrshmW1" in little-endian bytes: a segment of this layout.
const MAGIC: u64 = u64::from_le_bytes(*b"tsrshmW1");

/// A named section mapped into this process: the context of a shared
/// storage's DataPtr.
pub(crate) struct Segment {
    handle: HANDLE,
    /// The view of the whole section (header first).
    view: *mut u8,
    nbytes: usize,
    name: CString,
}

// SAFETY: the segment owns its handle and view; neither is tied to a
// thread.
unsafe impl Send for Segment {}
// SAFETY: shared access only reads the fields.
unsafe impl Sync for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        if !self.view.is_null() {
            let view = MEMORY_MAPPED_VIEW_ADDRESS {
                Value: self.view.cast(),
            };
            // SAFETY: the view this segment mapped; no storage uses it
            // any more (the DataPtr is being dropped).
            unsafe { UnmapViewOfFile(view) };
        }
        // SAFETY: the handle this segment opened, closed once.
        unsafe { CloseHandle(self.handle) };
    }
}

fn refused<T>(what: &str) -> Result<T> {
    crate::bail!(
        Unsupported,
        "{what} is not supported on {}: it needs descriptors of shared memory; share by name \
         (share_name / open_shared) instead (docs/PLATFORMS.md)",
        crate::platform::OS_NAME
    )
}

fn os_error(what: std::fmt::Arguments<'_>) -> crate::error::Error {
    let e = std::io::Error::last_os_error();
    crate::err!(Io, "{what} failed: {e}")
}

impl Segment {
    /// The start of the data; NULL for 0 bytes (as on Unix).
    pub(crate) fn base(&self) -> *mut u8 {
        if self.nbytes == 0 {
            return std::ptr::null_mut();
        }
        self.view.wrapping_add(HEADER)
    }

    /// The segment's name.
    pub(crate) fn name(&self) -> Option<&CStr> {
        Some(&self.name)
    }

    /// Refused: no descriptors.
    pub(crate) fn dup_fd(&self) -> Result<OwnedFd> {
        refused("share_fd")
    }

    /// Maps the whole section of `handle` (owned from here: closed on
    /// error) named `name`.
    fn map(handle: HANDLE, name: &CStr, what: &str) -> Result<Segment> {
        let mut seg = Segment {
            handle,
            view: std::ptr::null_mut(),
            nbytes: 0,
            name: name.to_owned(),
        };
        // SAFETY: a live section handle; offset 0, length 0 maps all of it.
        let view = unsafe { MapViewOfFile(handle, FILE_MAP_READ | FILE_MAP_WRITE, 0, 0, 0) };
        if view.Value.is_null() {
            return Err(os_error(format_args!("MapViewOfFile of {what}")));
        }
        seg.view = view.Value.cast();
        Ok(seg)
    }
}

/// Refused: no anonymous shared memory by descriptor.
pub(crate) fn anonymous_copy(_src: *const u8, _nbytes: usize) -> Result<Segment> {
    refused("share_memory")
}

/// Refused: no descriptors.
pub(crate) fn from_fd(_fd: RawFd, _nbytes: usize) -> Result<(Segment, usize, bool)> {
    refused("mapping a descriptor (from_fd)")
}

/// The descriptor's number (none exists).
pub(crate) fn into_raw(fd: OwnedFd) -> RawFd {
    match fd.0 {}
}

/// `name` as a NUL-terminated UTF-16 string.
fn wide(name: &CStr) -> Vec<u16> {
    name.to_string_lossy()
        .encode_utf16()
        .chain(std::iter::once(0))
        .collect()
}

/// Named segments: named file mappings.
pub(crate) mod named {
    use super::*;

    /// A new named segment of `nbytes` holding a copy of `src`.
    pub(crate) fn create(src: *const u8, nbytes: usize) -> Result<Segment> {
        let size = nbytes
            .checked_add(HEADER)
            .ok_or_else(|| crate::err!(OutOfMemory, "{nbytes} bytes do not fit a segment"))?
            as u64;
        for _ in 0..16 {
            let name = super::super::new_name();
            let w = wide(&name);
            // SAFETY: a section backed by the paging file (no file
            // handle), default security, a NUL-terminated name.
            let handle = unsafe {
                CreateFileMappingW(
                    INVALID_HANDLE_VALUE,
                    std::ptr::null(),
                    PAGE_READWRITE,
                    (size >> 32) as u32,
                    size as u32,
                    w.as_ptr(),
                )
            };
            if handle.is_null() {
                return Err(os_error(format_args!(
                    "CreateFileMappingW of {} ({size} bytes)",
                    name.to_string_lossy()
                )));
            }
            // SAFETY: reads the calling thread's last error, set by the
            // call above.
            if unsafe { GetLastError() } == ERROR_ALREADY_EXISTS {
                // Someone's section of that name: not ours to write.
                // SAFETY: the handle just opened, closed once.
                unsafe { CloseHandle(handle) };
                continue;
            }
            let what = format!("segment \"{}\"", name.to_string_lossy());
            let mut seg = Segment::map(handle, &name, &what)?;
            let mut header = [0u8; HEADER];
            header[..8].copy_from_slice(&MAGIC.to_le_bytes());
            header[8..16].copy_from_slice(&(nbytes as u64).to_le_bytes());
            // SAFETY: the view holds HEADER + nbytes writable bytes (the
            // section's size); `src` holds nbytes readable bytes of
            // other memory.
            unsafe {
                std::ptr::copy_nonoverlapping(header.as_ptr(), seg.view, HEADER);
                if nbytes > 0 {
                    std::ptr::copy_nonoverlapping(src, seg.view.add(HEADER), nbytes);
                }
            }
            seg.nbytes = nbytes;
            return Ok(seg);
        }
        crate::bail!(Io, "CreateFileMappingW: 16 new names were all taken")
    }

    /// Opens the named segment `name` (checked by the caller): its
    /// segment and its data size.
    pub(crate) fn open(name: &CStr) -> Result<(Segment, usize)> {
        let shown = name.to_string_lossy();
        crate::ensure!(
            !name.to_bytes().contains(&b'\\'),
            InvalidArgument,
            "name \"{shown}\" has a '\\': expected a name from share_name"
        );
        let w = wide(name);
        // SAFETY: a NUL-terminated name; the handle is not inherited.
        let handle = unsafe { OpenFileMappingW(FILE_MAP_READ | FILE_MAP_WRITE, 0, w.as_ptr()) };
        if handle.is_null() {
            let e = std::io::Error::last_os_error();
            crate::ensure!(
                e.raw_os_error() != Some(ERROR_FILE_NOT_FOUND as i32),
                Io,
                "no shared-memory segment is named \"{shown}\" ({e}): expected a name from \
                 share_name whose storages are alive"
            );
            crate::bail!(Io, "OpenFileMappingW of \"{shown}\" failed: {e}");
        }
        let what = format!("segment \"{shown}\"");
        let mut seg = Segment::map(handle, name, &what)?;
        // SAFETY: an all-zero MEMORY_BASIC_INFORMATION is a valid value
        // to fill.
        let mut info: MEMORY_BASIC_INFORMATION = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<MEMORY_BASIC_INFORMATION>();
        // SAFETY: asks about the view just mapped, into a writable struct.
        if unsafe { VirtualQuery(seg.view.cast(), &mut info, size) } != size {
            return Err(os_error(format_args!("VirtualQuery of {what}")));
        }
        // The view's length (whole pages): the section's size rounded up.
        let mapped = info.RegionSize;
        let not_ours = || {
            crate::err!(
                Format,
                "{what} has no tessera header: not a segment made by share_name"
            )
        };
        if mapped < HEADER {
            return Err(not_ours());
        }
        let mut header = [0u8; HEADER];
        // SAFETY: the view holds at least HEADER readable bytes (checked).
        unsafe { std::ptr::copy_nonoverlapping(seg.view, header.as_mut_ptr(), HEADER) };
        let word = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().expect("8 bytes"));
        let nbytes = usize::try_from(word(8)).unwrap_or(usize::MAX);
        if word(0) != MAGIC || nbytes > mapped - HEADER {
            return Err(not_ours());
        }
        seg.nbytes = nbytes;
        Ok((seg, nbytes))
    }
}
