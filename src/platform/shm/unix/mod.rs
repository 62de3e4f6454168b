//! Shared memory on Unix: anonymous objects (memfd on Linux; elsewhere
//! a POSIX object whose name is removed at once), named POSIX objects
//! (`named.rs`), `MAP_SHARED` mappings of either, and the descriptors
//! that reach them (storage/shm.rs has the model).
//!
//! libc gives memfd_create / shm_open / mmap / fstat directly; a mapping
//! crate would still need libc for the first two.

use crate::error::Result;
use std::ffi::{c_void, CStr, CString};
use std::os::fd::IntoRawFd;
use std::os::fd::{AsRawFd, FromRawFd};
pub(crate) use std::os::fd::{OwnedFd, RawFd};

pub(crate) mod named;

/// A shared-memory object mapped into this process: the context of a
/// shared storage's DataPtr.
pub(crate) struct Segment {
    fd: OwnedFd,
    /// Start of the mapping; NULL when nothing is mapped (0 bytes).
    base: *mut u8,
    map_len: usize,
    /// Named segments: the name, and the process that took the count (a
    /// child made by fork() inherits the storage but not a count).
    name: Option<(CString, u32)>,
}

// SAFETY: the segment owns its descriptor and mapping; nothing in it is
// tied to a thread.
unsafe impl Send for Segment {}
// SAFETY: shared access only reads the fields.
unsafe impl Sync for Segment {}

impl Segment {
    /// The descriptor (valid while the segment lives).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The name of a named segment.
    pub(crate) fn name(&self) -> Option<&CStr> {
        self.name.as_ref().map(|(n, _)| n.as_c_str())
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if let Some((name, pid)) = &self.name {
            // A fork()ed child inherits the segment (and shares its open
            // file description) but holds no lock of its own.
            if *pid == std::process::id() {
                named::release(&self.fd, name);
            }
        }
        if !self.base.is_null() {
            // SAFETY: base/map_len are the mapping this segment made; no
            // storage uses it any more (the DataPtr is being dropped).
            unsafe { libc::munmap(self.base as *mut c_void, self.map_len) };
        }
        // the descriptor closes with `fd`
    }
}

pub(super) fn os_error(what: std::fmt::Arguments<'_>) -> crate::error::Error {
    let e = std::io::Error::last_os_error();
    crate::err!(Io, "{what} failed: {e}")
}

/// Maps `len` bytes of `fd` shared, read-write; NULL for 0 bytes. Pages
/// are mapped as they are touched: MAP_POPULATE on a segment just filled
/// cost more than touching every page afterwards (benches/bench.cpp).
pub(super) fn map(fd: &OwnedFd, len: usize, what: &str) -> Result<*mut u8> {
    map_prot(fd, len, what, libc::PROT_READ | libc::PROT_WRITE)
}

/// As [`map`], with the protection `prot`.
fn map_prot(fd: &OwnedFd, len: usize, what: &str, prot: libc::c_int) -> Result<*mut u8> {
    if len == 0 {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: a fresh mapping chosen by the kernel; the arguments are
    // plain values and a live descriptor.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_error(format_args!("mmap of {len} bytes of {what}")));
    }
    Ok(p as *mut u8)
}

pub(super) fn truncate(fd: &OwnedFd, len: usize, what: &str) -> Result<()> {
    let n = libc::off_t::try_from(len)
        .map_err(|_| crate::err!(OutOfMemory, "{len} bytes do not fit a file size"))?;
    // SAFETY: a live descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), n) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EFBIG) {
            crate::bail!(OutOfMemory, "growing {what} to {len} bytes failed: {e}");
        }
        return Err(crate::err!(Io, "growing {what} to {len} bytes failed: {e}"));
    }
    Ok(())
}

/// A new anonymous shared-memory object (memfd on Linux; elsewhere a
/// POSIX object whose name is removed at once).
fn anonymous_object() -> Result<OwnedFd> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::memfd_create(c"tessera".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_error(format_args!("memfd_create")));
        }
        // SAFETY: a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let (fd, name) = named::create_object()?;
        // SAFETY: a NUL-terminated name this process just created.
        unsafe { libc::shm_unlink(name.as_ptr()) };
        Ok(fd)
    }
}

/// An anonymous segment of `nbytes` holding a copy of `src`.
pub(crate) fn anonymous_copy(src: *const u8, nbytes: usize) -> Result<Segment> {
    let fd = anonymous_object()?;
    truncate(&fd, nbytes, "a shared-memory object")?;
    write_in(&fd, src, nbytes)?;
    let base = map(&fd, nbytes, "a shared-memory object")?;
    Ok(Segment {
        fd,
        base,
        map_len: nbytes,
        name: None,
    })
}

/// Writes `nbytes` at `src` to the start of the object with pwrite, before
/// it is mapped: the kernel fills new pages as it allocates them, where a
/// copy through the mapping would take a fault and a zeroing per page
/// (benches/bench.cpp, "share_memory").
pub(super) fn write_in(fd: &OwnedFd, src: *const u8, nbytes: usize) -> Result<()> {
    let mut done = 0;
    while done < nbytes {
        // SAFETY: src holds nbytes readable bytes (the storage's data);
        // the descriptor is live.
        let n = unsafe {
            libc::pwrite(
                fd.as_raw_fd(),
                src.add(done) as *const c_void,
                nbytes - done,
                done as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if e.raw_os_error() == Some(libc::ENOSPC) {
                crate::bail!(
                    OutOfMemory,
                    "filling a shared-memory object of {nbytes} bytes failed: {e}"
                );
            }
            crate::bail!(
                Io,
                "filling a shared-memory object of {nbytes} bytes failed: {e}"
            );
        }
        crate::ensure!(
            n > 0,
            Io,
            "filling a shared-memory object of {nbytes} bytes: pwrite wrote nothing"
        );
        done += n as usize;
    }
    Ok(())
}

fn check_dup(fd: RawFd) -> Result<OwnedFd> {
    crate::ensure!(
        fd >= 0,
        InvalidArgument,
        "descriptor {fd} is negative: expected an open descriptor"
    );
    // SAFETY: fcntl on any integer is defined (EBADF when not open).
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if d < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBADF) {
            crate::bail!(
                InvalidArgument,
                "descriptor {fd} is not open ({e}): expected an open descriptor"
            );
        }
        crate::bail!(Io, "duplicating descriptor {fd} failed: {e}");
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

/// The size of a regular file / shared-memory object, or an error naming
/// what it is instead.
pub(super) fn object_size(fd: &OwnedFd, what: &dyn std::fmt::Display) -> Result<usize> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a writable stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(os_error(format_args!("fstat of {what}")));
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => None,
        libc::S_IFIFO => Some("a pipe"),
        libc::S_IFSOCK => Some("a socket"),
        libc::S_IFCHR => Some("a character device"),
        libc::S_IFDIR => Some("a directory"),
        libc::S_IFBLK => Some("a block device"),
        _ => Some("not a regular file"),
    };
    if let Some(kind) = kind {
        crate::bail!(
            InvalidArgument,
            "{what} is {kind}: expected a shared-memory object or a regular file"
        );
    }
    usize::try_from(st.st_size).map_err(|_| crate::err!(Io, "{what} has a size that does not fit"))
}

impl Segment {
    /// The start of the mapping (NULL for 0 bytes).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// A new close-on-exec descriptor of the object (the caller owns it).
    pub(crate) fn dup_fd(&self) -> Result<OwnedFd> {
        // SAFETY: fcntl on a live descriptor.
        let d = unsafe { libc::fcntl(self.fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if d < 0 {
            return Err(os_error(format_args!(
                "duplicating the segment's descriptor"
            )));
        }
        // SAFETY: a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(d) })
    }
}

/// A segment over the object (or regular file) behind `fd` (borrowed:
/// duplicated): its first `nbytes` bytes (0: the whole object), mapped
/// shared; the segment, its size in bytes and whether the descriptor was
/// opened read-only (then so is the mapping).
pub(crate) fn from_fd(fd: RawFd, nbytes: usize) -> Result<(Segment, usize, bool)> {
    let own = check_dup(fd)?;
    let what = format!("descriptor {fd}");
    let size = object_size(&own, &what)?;
    let nbytes = if nbytes == 0 { size } else { nbytes };
    crate::ensure!(
        nbytes <= size,
        InvalidArgument,
        "nbytes {nbytes} is larger than {what}, which holds {size} bytes: expected at most {size}"
    );
    // SAFETY: fcntl on a live descriptor.
    let flags = unsafe { libc::fcntl(own.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(os_error(format_args!("fcntl(F_GETFL) of {what}")));
    }
    // A descriptor opened read-only: a read-only mapping (a writable
    // one is refused by mmap) and a read-only storage.
    let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY;
    let prot = if read_only {
        libc::PROT_READ
    } else {
        libc::PROT_READ | libc::PROT_WRITE
    };
    let base = map_prot(&own, nbytes, &what, prot)?;
    let seg = Segment {
        fd: own,
        base,
        map_len: nbytes,
        name: None,
    };
    Ok((seg, nbytes, read_only))
}

/// The descriptor's number, handed to the caller who now owns it.
pub(crate) fn into_raw(fd: OwnedFd) -> RawFd {
    fd.into_raw_fd()
}
