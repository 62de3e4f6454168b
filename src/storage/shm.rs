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
//!   processes (`open_shared`). The mapping ends with a 64-byte trailer
//!   {magic, nbytes, refcount}: every storage using the segment, in any
//!   process, holds one count; the one that drops it to zero removes the
//!   name (`shm_unlink`). A process that dies without releasing leaves the
//!   name in /dev/shm (see README, "Shared memory").
//!
//! The trailer sits after the data (c10's RefcountedMapAllocator keeps its
//! count in a header before it) so that the data of every segment starts
//! at offset 0 of its descriptor: a descriptor of a named segment maps
//! with `from_fd` like any other.
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The trailer of a named segment, at `trailer_offset(nbytes)`.
#[repr(C)]
struct Trailer {
    magic: u64,
    nbytes: u64,
    refcount: AtomicU64,
    _pad: [u64; 5],
}

const TRAILER_SIZE: usize = std::mem::size_of::<Trailer>();
/// "tsrshm01" in little-endian bytes.
const MAGIC: u64 = u64::from_le_bytes(*b"tsrshm01");
/// The longest name (bytes after the leading '/') POSIX shm accepts on
/// Linux (NAME_MAX).
pub const MAX_NAME_LEN: usize = 255;
/// The length of the names `share_name` makes, without the NUL:
/// "/tessera-" + 8 hex digits (pid) + "-" + 16 hex digits.
pub const NEW_NAME_LEN: usize = 9 + 8 + 1 + 16;

const _: () = assert!(TRAILER_SIZE == 64);

fn trailer_offset(nbytes: usize) -> Option<usize> {
    nbytes.checked_next_multiple_of(TRAILER_SIZE)
}

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
// tied to a thread, and the trailer's count is atomic.
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
            // SAFETY: the trailer is the last TRAILER_SIZE bytes of the
            // mapping, which is still mapped here.
            let trailer =
                unsafe { &*(self.base.add(self.map_len - TRAILER_SIZE) as *const Trailer) };
            if *pid == std::process::id() && trailer.refcount.fetch_sub(1, Ordering::AcqRel) == 1 {
                // SAFETY: a NUL-terminated name. A failure (someone removed
                // the name already) leaves nothing to do.
                unsafe { libc::shm_unlink(name.as_ptr()) };
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
    if len == 0 {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: a fresh mapping chosen by the kernel; the arguments are
    // plain values and a live descriptor.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
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
        let (fd, name) = create_named()?;
        // SAFETY: a NUL-terminated name this process just created.
        unsafe { libc::shm_unlink(name.as_ptr()) };
        Ok(fd)
    }
}

static NAME_COUNTER: AtomicUsize = AtomicUsize::new(0);

fn new_name() -> CString {
    let n = NAME_COUNTER.fetch_add(1, Ordering::Relaxed) as u64;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // A counter for this process, mixed with the time so that a reused
    // pid does not meet its predecessor's left-over names.
    let tag = (n << 40) ^ (t & ((1 << 40) - 1)) ^ (n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let s = format!("/tessera-{:08x}-{tag:016x}", std::process::id());
    debug_assert_eq!(s.len(), NEW_NAME_LEN);
    CString::new(s).expect("no NUL in a formatted name")
}

/// Creates a new named object (O_EXCL, mode 0600).
fn create_named() -> Result<(OwnedFd, CString)> {
    for _ in 0..16 {
        let name = new_name();
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe {
            libc::shm_open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600 as libc::mode_t,
            )
        };
        if fd >= 0 {
            // SAFETY: a new descriptor that nothing else owns.
            return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, name));
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(os_error(format_args!(
                "shm_open of {}",
                name.to_string_lossy()
            )));
        }
    }
    crate::bail!(Io, "shm_open: 16 new names were all taken")
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

/// A named segment of `nbytes` holding a copy of `src`, count 1.
fn named_copy(src: *const u8, nbytes: usize) -> Result<Segment> {
    let (fd, name) = create_named()?;
    let map_len = trailer_offset(nbytes)
        .and_then(|o| o.checked_add(TRAILER_SIZE))
        .ok_or_else(|| crate::err!(OutOfMemory, "{nbytes} bytes do not fit a segment"))?;
    let made = truncate(&fd, map_len, "a shared-memory object")
        .and_then(|()| write_in(&fd, src, nbytes))
        .and_then(|()| map(&fd, map_len, "a shared-memory object"));
    let base = match made {
        Ok(b) => b,
        Err(e) => {
            // SAFETY: the NUL-terminated name this process just created.
            unsafe { libc::shm_unlink(name.as_ptr()) };
            return Err(e);
        }
    };
    // SAFETY: the mapping is map_len bytes, the trailer its last 64,
    // 8-aligned; nobody else knows the name yet.
    unsafe {
        (base.add(map_len - TRAILER_SIZE) as *mut Trailer).write(Trailer {
            magic: MAGIC,
            nbytes: nbytes as u64,
            refcount: AtomicU64::new(1),
            _pad: [0; 5],
        })
    };
    Ok(Segment {
        fd,
        base,
        map_len,
        name: Some((name, std::process::id())),
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
        let _guard = lock_for(self);
        if let Some(name) = self.shared_name() {
            return Ok(name);
        }
        self.check_host("share_name")?;
        self.check_replaceable("share_name")?;
        let seg = named_copy(self.data() as *const u8, self.nbytes())?;
        let name = seg.name().map(CStr::to_owned).expect("a named segment");
        // SAFETY: as in share_memory.
        unsafe { self.replace_data(into_data_ptr(seg), self.nbytes()) }?;
        Ok(name)
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
    /// `nbytes` bytes (0: the whole object), mapped shared.
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
        let base = map(&own, nbytes, &what)?;
        let seg = Segment {
            fd: own,
            base,
            map_len: nbytes,
            name: None,
        };
        Ok(Storage::from_data_ptr(into_data_ptr(seg), nbytes))
    }

    /// A storage over the named segment `name` made by `share_name` (in
    /// this or another process); it holds one count of the segment.
    pub fn open_shared(name: &CStr) -> Result<Storage> {
        let shown = name.to_string_lossy();
        check_name(name.to_bytes())?;
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe { libc::shm_open(name.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                crate::bail!(
                    Io,
                    "no shared-memory segment is named \"{shown}\" ({e}): expected a name from share_name whose storages are alive"
                );
            }
            crate::bail!(Io, "shm_open of \"{shown}\" failed: {e}");
        }
        // SAFETY: a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let what = format!("segment \"{shown}\"");
        let size = object_size(&fd, &what)?;
        crate::ensure!(
            size >= TRAILER_SIZE && size % TRAILER_SIZE == 0,
            Format,
            "{what} holds {size} bytes: not a segment made by share_name"
        );
        let base = map(&fd, size, &what)?;
        let mut seg = Segment {
            fd,
            base,
            map_len: size,
            name: None, // no count held yet: dropping it only unmaps
        };
        // SAFETY: the mapping is `size` bytes, a multiple of 64 >= 64; its
        // last 64 are read as a trailer (any bytes are valid u64s).
        let trailer = unsafe { &*(base.add(size - TRAILER_SIZE) as *const Trailer) };
        let nbytes = usize::try_from(trailer.nbytes).unwrap_or(usize::MAX);
        crate::ensure!(
            trailer.magic == MAGIC && trailer_offset(nbytes) == Some(size - TRAILER_SIZE),
            Format,
            "{what} has no tessera trailer: not a segment made by share_name"
        );
        let before = trailer.refcount.fetch_add(1, Ordering::AcqRel);
        if before == 0 {
            trailer.refcount.fetch_sub(1, Ordering::AcqRel);
            crate::bail!(Io, "{what} is being removed: its last storage was released");
        }
        seg.name = Some((name.to_owned(), std::process::id()));
        Ok(Storage::from_data_ptr(into_data_ptr(seg), nbytes))
    }
}

#[cfg(test)]
mod tests;
