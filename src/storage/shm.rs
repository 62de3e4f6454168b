//! Shared-memory storages (torch's `share_memory_`, and its
//! file-descriptor and file-system sharing strategies).
//!
//! A shared storage's DataPtr owns a [`Segment`]: a descriptor of a
//! shared-memory object and a `MAP_SHARED` mapping of it. Two kinds:
//!
//! - anonymous (memfd on Linux): what `share_memory` makes. Other
//!   processes reach it through a descriptor (`share_fd` / `from_fd`);
//!   the kernel frees it when the last descriptor and mapping are gone, so
//!   nothing is left behind even when every process crashes.
//! - named (POSIX `shm_open`): what `share_name` makes, for unrelated
//!   processes (`open_shared`). Every storage using the segment, in any
//!   process, holds a shared flock on it; the one released last gets the
//!   exclusive lock and removes the name (`shm_unlink`). A process that
//!   dies without releasing leaves the name in /dev/shm (see docs/C_API.md,
//!   "Shared memory"). The object ends with a 64-byte trailer {magic,
//!   nbytes} after the data, so that the data of every segment starts at
//!   offset 0 of its descriptor: a descriptor of a named segment maps with
//!   `from_fd` like any other. `named.rs` has the protocol and why the
//!   count is not kept inside the segment (c10's RefcountedMapAllocator
//!   keeps it there): releasing never touches the segment's memory, which
//!   a peer can take away with ftruncate.
//!
//! A peer that shrinks an object after it is mapped makes reads and
//! writes of the missing pages fault (SIGBUS), as with any shared file
//! mapping; that is the host's affair, as for file storages. Nothing
//! tessera does to make, open or release a segment touches its mapping.
//!
//! libc gives memfd_create / shm_open / mmap / fstat directly and is
//! already a dependency; a mapping crate would still need libc for the
//! first two.

use super::{Storage, StorageImpl};
use crate::data_ptr::{same_deleter, DataPtr};
use crate::device::{Device, DeviceType};
use crate::error::Result;
use std::ffi::{c_void, CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

/// The longest name (bytes after the leading '/') POSIX shm accepts on
/// Linux (NAME_MAX).
pub const MAX_NAME_LEN: usize = 255;
/// The length of the names `share_name` makes, without the NUL:
/// "/tessera-" + 8 hex digits (pid) + "-" + 16 hex digits.
pub const NEW_NAME_LEN: usize = 9 + 8 + 1 + 16;

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

unsafe extern "C" fn release_segment(ctx: *mut c_void) {
    // SAFETY: ctx is the Box<Segment> that into_data_ptr leaked, and the
    // DataPtr runs its deleter exactly once.
    drop(unsafe { Box::from_raw(ctx as *mut Segment) });
}

fn os_error(what: std::fmt::Arguments<'_>) -> crate::error::Error {
    let e = std::io::Error::last_os_error();
    crate::err!(Io, "{what} failed: {e}")
}

fn into_data_ptr(seg: Segment) -> DataPtr {
    let base = seg.base as *mut c_void;
    let ctx = Box::into_raw(Box::new(seg)) as *mut c_void;
    // SAFETY: release_segment frees the box once; the mapping at `base`
    // lives until then.
    unsafe { DataPtr::from_raw_parts(base, ctx, Some(release_segment), Device::CPU) }
}

/// The segment behind a DataPtr made here.
fn segment_of(dp: &DataPtr) -> Option<&Segment> {
    if !same_deleter(dp.deleter(), Some(release_segment)) || dp.context().is_null() {
        return None;
    }
    // SAFETY: a DataPtr whose deleter is release_segment owns a Segment
    // as its context, alive as long as the DataPtr.
    Some(unsafe { &*(dp.context() as *const Segment) })
}

/// Maps `len` bytes of `fd` shared, read-write; NULL for 0 bytes. Pages
/// are mapped as they are touched: MAP_POPULATE on a segment just filled
/// cost more than touching every page afterwards (benches/bench.cpp).
fn map(fd: &OwnedFd, len: usize, what: &str) -> Result<*mut u8> {
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

fn truncate(fd: &OwnedFd, len: usize, what: &str) -> Result<()> {
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
fn anonymous_copy(src: *const u8, nbytes: usize) -> Result<Segment> {
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
fn write_in(fd: &OwnedFd, src: *const u8, nbytes: usize) -> Result<()> {
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

/// Locks that serialize share_memory / share_name on one storage (striped
/// by the storage's address).
static LOCKS: [Mutex<()>; 16] = [const { Mutex::new(()) }; 16];

fn lock_for(s: &StorageImpl) -> std::sync::MutexGuard<'static, ()> {
    let i = (s as *const StorageImpl as usize >> 6) % LOCKS.len();
    LOCKS[i].lock().unwrap_or_else(|p| p.into_inner())
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
fn object_size(fd: &OwnedFd, what: &dyn std::fmt::Display) -> Result<usize> {
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

fn check_name(name: &[u8]) -> Result<()> {
    let shown = String::from_utf8_lossy(name);
    let rest = name.strip_prefix(b"/").unwrap_or(name);
    crate::ensure!(
        !rest.is_empty(),
        InvalidArgument,
        "name \"{shown}\" is empty: expected a name such as \"/tessera-...\""
    );
    crate::ensure!(
        rest.len() <= MAX_NAME_LEN,
        InvalidArgument,
        "name of {} bytes is too long: at most {MAX_NAME_LEN} bytes after the leading '/'",
        rest.len()
    );
    crate::ensure!(
        !rest.contains(&b'/'),
        InvalidArgument,
        "name \"{shown}\" has a '/' after the first character: expected one path component"
    );
    Ok(())
}

impl StorageImpl {
    /// The shared-memory segment this storage's data lives in, if any.
    pub(crate) fn segment(&self) -> Option<&Segment> {
        segment_of(&self.state().data_ptr)
    }

    /// Whether the data is shared between processes: shared-memory
    /// storages, SHARED file storages and CUDA memory (as torch's
    /// is_shared).
    pub fn is_shared(&self) -> bool {
        self.segment().is_some()
            || self.filename().is_some()
            || self.device().device_type == DeviceType::Cuda
    }

    /// The POSIX name of a storage in a named segment.
    pub fn shared_name(&self) -> Option<CString> {
        self.segment()?.name().map(CStr::to_owned)
    }

    /// A new descriptor (close-on-exec; the caller owns it) of the
    /// shared-memory object this storage lives in.
    pub fn share_fd(&self) -> Result<OwnedFd> {
        self.check_no_alias("share_fd")?;
        let Some(seg) = self.segment() else {
            crate::bail!(
                InvalidArgument,
                "the storage ({} bytes on {}) is not in shared memory: expected a storage \
                 made shared by share_memory, from_fd or open_shared",
                self.nbytes(),
                self.device()
            );
        };
        // SAFETY: fcntl on a live descriptor.
        let d = unsafe { libc::fcntl(seg.fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if d < 0 {
            return Err(os_error(format_args!(
                "duplicating the segment's descriptor"
            )));
        }
        // SAFETY: a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(d) })
    }

    /// Moves the bytes into an anonymous shared-memory segment in place
    /// (torch's share_memory_): the DataPtr is swapped, every tensor on
    /// the storage sees the same values at the new address, the old
    /// memory is freed, the storage becomes non-resizable and loses its
    /// allocator. No-op when already shared (and for CUDA storages).
    /// Concurrent calls on one storage are serialized: one moves.
    ///
    /// # Safety
    /// No other thread may use the storage during the call, except
    /// through `share_memory` / `share_name`; pointers to the old data
    /// become dangling.
    pub unsafe fn share_memory(&self) -> Result<()> {
        let _guard = lock_for(self);
        if self.is_shared() {
            return Ok(());
        }
        self.check_host("share_memory")?;
        self.check_replaceable("share_memory")?;
        let seg = anonymous_copy(self.data() as *const u8, self.nbytes())?;
        // SAFETY: the caller's contract, and the lock, keep every other
        // thread off the storage.
        unsafe { self.replace_data(into_data_ptr(seg), self.nbytes()) }?;
        Ok(())
    }

    /// Moves the bytes into a named segment in place (as share_memory)
    /// unless they are in one already, and returns the name. A storage
    /// in an anonymous segment moves once more (descriptors given out
    /// before keep the old segment).
    ///
    /// # Safety
    /// As [`StorageImpl::share_memory`].
    pub unsafe fn share_name(&self) -> Result<CString> {
        self.check_no_alias("share_name")?;
        let _guard = lock_for(self);
        if let Some(name) = self.shared_name() {
            return Ok(name);
        }
        self.check_host("share_name")?;
        self.check_replaceable("share_name")?;
        let seg = named::create(self.data() as *const u8, self.nbytes())?;
        let name = seg.name().map(CStr::to_owned).expect("a named segment");
        // SAFETY: as in share_memory.
        unsafe { self.replace_data(into_data_ptr(seg), self.nbytes()) }?;
        Ok(name)
    }

    /// Refuses to hand out a way into a read-only storage's memory (a
    /// descriptor or a name): every one of them maps it writable, so a
    /// peer could change bytes this process relies on not changing.
    fn check_no_alias(&self, what: &str) -> Result<()> {
        crate::ensure!(
            !self.is_read_only(),
            ReadOnly,
            "the storage of {} bytes is read-only: {what} would hand out a writable alias of its \
             memory (expected a writable storage; copy it with clone_storage to share the bytes)",
            self.nbytes()
        );
        Ok(())
    }

    fn check_host(&self, what: &str) -> Result<()> {
        let d = self.device();
        crate::ensure!(
            d.is_cpu(),
            Unsupported,
            "{what} of a {d} storage: only CPU storages move into shared memory"
        );
        Ok(())
    }
}

impl Storage {
    /// A storage over the shared-memory object (or regular file) behind
    /// `fd` (borrowed: duplicated, the caller keeps `fd`): its first
    /// `nbytes` bytes (0: the whole object), mapped shared. A descriptor
    /// opened read-only gives a read-only mapping and a read-only storage.
    pub fn from_fd(fd: RawFd, nbytes: usize) -> Result<Storage> {
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
        let s = Storage::from_data_ptr(into_data_ptr(seg), nbytes);
        if read_only {
            s.make_read_only();
        }
        Ok(s)
    }

    /// A storage over the named segment `name` made by `share_name` (in
    /// this or another process); it holds one shared lock of the segment
    /// (named.rs), so the name stays while it lives.
    pub fn open_shared(name: &CStr) -> Result<Storage> {
        let (seg, nbytes) = named::open(name)?;
        Ok(Storage::from_data_ptr(into_data_ptr(seg), nbytes))
    }
}

mod named;
#[cfg(test)]
mod tests;
