//! Named segments (`share_name` / `open_shared`): the POSIX objects, the
//! trailer that marks them as tessera's, and which storage removes the
//! name.
//!
//! Who removes the name. Every storage using a named segment, in any
//! process, holds a shared `flock(2)` on its own open of the object (its
//! own open file description: `shm_open` once per storage). Releasing
//! asks for the exclusive lock without waiting: it is granted only when
//! no other storage holds a shared one, so the storage released last gets
//! it and removes the name (`shm_unlink`); then it unlocks. The count of
//! users is thus kept by the kernel, beside the memory, never in it.
//!
//! Why not a count inside the segment, as c10's RefcountedMapAllocator
//! keeps (and tessera did, in the trailer): a peer that shrinks the
//! object (`ftruncate` to 0) takes that memory away, and the next release
//! in every process died with SIGBUS on the count. Checking the size
//! with `fstat` first leaves a window between the check and the touch.
//! A lock is a system call on a descriptor: no page of the object is
//! touched, whatever its size, so a release cannot fault.
//!
//! The races: an opener takes its shared lock after `shm_open`, then
//! checks that the name still names the object it opened (same device
//! and inode). If the last user removed the name in between, the check
//! fails and the open is refused ("being removed"); if the opener locked
//! first, the last user's exclusive lock fails and the name stays. The
//! exclusive lock is only ever held while removing, so an opener that
//! meets it (EWOULDBLOCK) is refused the same way. Two last users
//! releasing at once: each drops its shared lock before asking for the
//! exclusive one (flock converts that way), so at least one gets it.
//!
//! The trailer (64 bytes after the data, at the next multiple of 64)
//! carries a magic and the data's size; it is written and read with
//! `pwrite` / `pread`, which report a short or failed transfer on a
//! truncated object instead of faulting. The mapping covers the data
//! only.

use super::{object_size, os_error, truncate, write_in, Segment};
use crate::error::Result;
use std::ffi::{c_void, CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub(super) const TRAILER_SIZE: usize = 64;
/// "tsrshm02" in little-endian bytes (02: the count moved out of the
/// trailer into flock; a segment of the old layout is refused).
const MAGIC: u64 = u64::from_le_bytes(*b"tsrshm02");

/// The offset of the trailer of a segment of `nbytes` data bytes.
fn trailer_offset(nbytes: usize) -> Option<usize> {
    nbytes.checked_next_multiple_of(TRAILER_SIZE)
}

/// Creates a new named object (O_EXCL, mode 0600).
pub(super) fn create_object() -> Result<(OwnedFd, CString)> {
    for _ in 0..16 {
        let name = super::super::new_name();
        // SAFETY: a NUL-terminated name and valid flags.
        let fd = unsafe {
            libc::shm_open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
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

/// flock(2) on `fd`; Ok(false) when a non-blocking request would wait.
fn lock(fd: &OwnedFd, op: libc::c_int) -> std::io::Result<bool> {
    loop {
        // SAFETY: flock on a live descriptor.
        if unsafe { libc::flock(fd.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(e),
        }
    }
}

fn trailer_bytes(nbytes: usize) -> [u8; TRAILER_SIZE] {
    let mut t = [0u8; TRAILER_SIZE];
    t[..8].copy_from_slice(&MAGIC.to_le_bytes());
    t[8..16].copy_from_slice(&(nbytes as u64).to_le_bytes());
    t
}

/// A named segment of `nbytes` holding a copy of `src`, this storage's
/// shared lock taken (before anyone can know the name).
pub(crate) fn create(src: *const u8, nbytes: usize) -> Result<Segment> {
    let (fd, name) = create_object()?;
    let made = (|| {
        let at = trailer_offset(nbytes)
            .filter(|o| o.checked_add(TRAILER_SIZE).is_some())
            .ok_or_else(|| crate::err!(OutOfMemory, "{nbytes} bytes do not fit a segment"))?;
        truncate(&fd, at + TRAILER_SIZE, "a shared-memory object")?;
        write_in(&fd, src, nbytes)?;
        let t = trailer_bytes(nbytes);
        // SAFETY: 64 readable bytes; a live descriptor.
        let n = unsafe {
            libc::pwrite(
                fd.as_raw_fd(),
                t.as_ptr() as *const c_void,
                t.len(),
                at as libc::off_t,
            )
        };
        if n != TRAILER_SIZE as isize {
            return Err(os_error(format_args!("writing the segment's trailer")));
        }
        if !lock(&fd, libc::LOCK_SH | libc::LOCK_NB)
            .map_err(|e| crate::err!(Io, "flock of a new shared-memory object failed: {e}"))?
        {
            crate::bail!(Io, "flock of a new shared-memory object would wait");
        }
        super::map(&fd, nbytes, "a shared-memory object")
    })();
    match made {
        Ok(base) => Ok(Segment {
            fd,
            base,
            map_len: nbytes,
            name: Some((name, std::process::id())),
        }),
        Err(e) => {
            // SAFETY: the NUL-terminated name this process just created.
            unsafe { libc::shm_unlink(name.as_ptr()) };
            Err(e)
        }
    }
}

/// (device, inode) of an open object.
fn identity(fd: &OwnedFd, what: &str) -> Result<(u64, u64)> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a writable stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(os_error(format_args!("fstat of {what}")));
    }
    Ok((st.st_dev as u64, st.st_ino as u64))
}

fn shm_open(name: &CStr, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe { libc::shm_open(name.as_ptr(), flags | libc::O_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the named segment `name` (checked by the caller): its segment
/// (this storage's shared lock held) and its data size.
pub(crate) fn open(name: &CStr) -> Result<(Segment, usize)> {
    let shown = name.to_string_lossy();
    let fd = shm_open(name, libc::O_RDWR).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOENT) {
            crate::err!(
                Io,
                "no shared-memory segment is named \"{shown}\" ({e}): expected a name from share_name whose storages are alive"
            )
        } else {
            crate::err!(Io, "shm_open of \"{shown}\" failed: {e}")
        }
    })?;
    let what = format!("segment \"{shown}\"");
    let not_ours = || {
        crate::err!(
            Format,
            "{what} has no tessera trailer: not a segment made by share_name"
        )
    };
    let size = object_size(&fd, &what)?;
    crate::ensure!(
        size >= TRAILER_SIZE && size % TRAILER_SIZE == 0,
        Format,
        "{what} holds {size} bytes: not a segment made by share_name"
    );
    let mut t = [0u8; TRAILER_SIZE];
    // SAFETY: 64 writable bytes; a live descriptor.
    let n = unsafe {
        libc::pread(
            fd.as_raw_fd(),
            t.as_mut_ptr() as *mut c_void,
            t.len(),
            (size - TRAILER_SIZE) as libc::off_t,
        )
    };
    if n != TRAILER_SIZE as isize {
        return Err(not_ours());
    }
    let word = |i: usize| u64::from_le_bytes(t[i..i + 8].try_into().expect("8 bytes"));
    let nbytes = usize::try_from(word(8)).unwrap_or(usize::MAX);
    if word(0) != MAGIC || trailer_offset(nbytes) != Some(size - TRAILER_SIZE) {
        return Err(not_ours());
    }
    let locked = lock(&fd, libc::LOCK_SH | libc::LOCK_NB)
        .map_err(|e| crate::err!(Io, "flock of {what} failed: {e}"))?;
    let removing = || crate::err!(Io, "{what} is being removed: its last storage was released");
    if !locked {
        return Err(removing());
    }
    // The lock is held: the name now stays unless it already names
    // another object (or none), i.e. the last user removed it meanwhile.
    let same = match shm_open(name, libc::O_RDONLY) {
        Ok(again) => identity(&again, &what)? == identity(&fd, &what)?,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => false,
        Err(e) => crate::bail!(Io, "shm_open of \"{shown}\" failed: {e}"),
    };
    if !same {
        return Err(removing()); // the lock goes with the descriptor
    }
    // From here this storage is a user: an error drops `seg`, whose
    // release removes the name if every other user left meanwhile (their
    // exclusive lock failed on this one's shared lock).
    let mut seg = Segment {
        fd,
        base: std::ptr::null_mut(),
        map_len: 0,
        name: Some((name.to_owned(), std::process::id())),
    };
    seg.base = super::map(&seg.fd, nbytes, &what)?;
    seg.map_len = nbytes;
    Ok((seg, nbytes))
}

/// Releases a storage's hold on a named segment: the last one removes the
/// name. Touches no byte of the segment (see the module's comment).
pub(super) fn release(fd: &OwnedFd, name: &CStr) {
    // Failures leave the name behind at worst; there is no caller to
    // tell (this runs in a deleter).
    if let Ok(true) = lock(fd, libc::LOCK_EX | libc::LOCK_NB) {
        // SAFETY: a NUL-terminated name. A failure (someone removed the
        // name already) leaves nothing to do.
        unsafe { libc::shm_unlink(name.as_ptr()) };
    }
    // Drop the lock itself, not only with the descriptor: a descriptor
    // given out by share_fd shares this open file description.
    let _ = lock(fd, libc::LOCK_UN);
}
