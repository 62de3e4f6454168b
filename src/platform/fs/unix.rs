//! Files on Unix (Linux's own calls where it has them).

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Reads up to `buf.len()` bytes of `file` at `offset` (pread).
#[inline]
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

/// Reads exactly `buf.len()` bytes of `file` at `offset` (pread).
#[inline]
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Makes `options` open without blocking (O_NONBLOCK: a FIFO without a
/// peer opens at once) and close-on-exec.
pub(crate) fn open_nonblocking(options: &mut OpenOptions) {
    options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
}

/// Whether an open failed on a FIFO or device without a peer (ENXIO).
pub(crate) fn is_no_peer(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENXIO)
}

/// Clears O_NONBLOCK on `file`.
pub(crate) fn set_blocking(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fd is a descriptor `file` owns and keeps open for the call;
    // F_GETFL reads its status flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFL changes only the status flags of fd.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Clears the status flags of `file`, opened read-only by
/// [`open_nonblocking`] options: one fcntl instead of [`set_blocking`]'s
/// two.
pub(crate) fn clear_read_only_flags(file: &File) -> io::Result<()> {
    // SAFETY: fd is a descriptor `file` owns and keeps open for the call.
    // The file was opened read-only with O_NONBLOCK as its only status
    // flag (O_CLOEXEC is a descriptor flag), so setting the status flags
    // to none clears O_NONBLOCK and changes nothing else (F_SETFL leaves
    // the access mode alone).
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What a special file is (a FIFO, a device, a socket), for messages.
pub(crate) fn special_kind(t: &FileType) -> Option<&'static str> {
    if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// The errno name of an OS error code, where messages name it.
pub(crate) fn errno_name(code: i32) -> Option<&'static str> {
    Some(match code {
        libc::ENOSPC => "ENOSPC",
        libc::EDQUOT => "EDQUOT",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EROFS => "EROFS",
        libc::EIO => "EIO",
        libc::EFBIG => "EFBIG",
        libc::ELOOP => "ELOOP",
        libc::EXDEV => "EXDEV",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        _ => return None,
    })
}

/// Makes `options` create with permission bits `mode` (before the umask)
/// and close-on-exec.
pub(crate) fn create_mode(options: &mut OpenOptions, mode: u32) {
    options.mode(mode).custom_flags(libc::O_CLOEXEC);
}

/// Whether a name was too long for the file system (ENAMETOOLONG).
pub(crate) fn is_name_too_long(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENAMETOOLONG)
}

/// The permission bits of a file.
pub(crate) fn permission_bits(meta: &Metadata) -> u32 {
    meta.permissions().mode() & 0o777
}

/// Sets the permission bits of a file.
pub(crate) fn set_permission_bits(file: &File, mode: u32) -> io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Reserves `bytes` of disk for `file` without changing its size
/// (fallocate with FALLOC_FL_KEEP_SIZE); Err only for a full disk or
/// quota, anything else (a file system without fallocate) reserves
/// nothing. Other Unixes reserve nothing.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn preallocate(file: &File, bytes: u64) -> io::Result<()> {
    // SAFETY: fallocate on an open descriptor this File owns, with plain
    // integer arguments; no memory is passed.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            0,
            bytes as libc::off_t,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => Err(e),
        _ => Ok(()),
    }
}

/// Nothing is reserved here (macOS's F_PREALLOCATE does not keep the
/// size: not used).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn preallocate(_file: &File, _bytes: u64) -> io::Result<()> {
    Ok(())
}

/// fsyncs the file at `path` (opened for reading: enough for fsync here).
pub(crate) fn sync_file(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Renames the file `from` over `to` in one step (rename(2)); `to`'s
/// directory is synced apart ([`sync_dir`]).
pub(crate) fn replace_file(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

/// fsyncs the directory `dir` itself (so that names made or renamed in
/// it are durable).
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?
        .sync_all()
}

/// Swaps the two paths in one step (Linux's renameat2 RENAME_EXCHANGE).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: two valid NUL-terminated paths, kept alive for the call;
    // renameat2 reads them only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// No exchange here: [`exchange_missing`].
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(exchange_missing())
}

/// The error of an exchange the system cannot do.
pub(crate) fn exchange_missing() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSYS)
}

/// Whether an exchange failed because the system or the file system
/// cannot do it (the caller renames in two steps instead).
pub(crate) fn exchange_unsupported(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS))
}

/// Copies up to `len` bytes of `src` from `*off_in` (advanced) to `dst`
/// at its position inside the kernel (Linux's copy_file_range): the
/// bytes copied, 0 at the end of `src`.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
pub(crate) fn copy_file_range(
    src: &File,
    off_in: &mut i64,
    dst: &File,
    len: usize,
) -> io::Result<usize> {
    // SAFETY: both descriptors are open files borrowed for the call;
    // off_in is a live i64 the kernel reads and advances; a null off_out
    // means dst's own position, which the call advances.
    let n = unsafe {
        libc::copy_file_range(
            src.as_raw_fd(),
            off_in,
            dst.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// No in-kernel copy here (macOS): always [`copy_unsupported`], and the
/// caller writes the bytes itself.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn copy_file_range(_: &File, _: &mut i64, _: &File, _: usize) -> io::Result<usize> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

/// Whether a copy failed because these files cannot be copied between
/// inside the kernel (another file system, a kernel without the call, a
/// sandbox refusing it, a file that is not a regular file). EPERM and
/// EBADF too: a seccomp filter may answer EPERM for a call it does not
/// know; writing instead then meets the real error if there is one.
pub(crate) fn copy_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EXDEV
                | libc::EINVAL
                | libc::ENOSYS
                | libc::EOPNOTSUPP
                | libc::EPERM
                | libc::EBADF
        )
    )
}

/// The path the system says an open file has (Linux's /proc/self/fd);
/// None where it cannot tell.
pub(crate) fn opened_path(file: &File) -> Option<PathBuf> {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    } else {
        None
    }
}

/// What tells one file from another: (device, inode).
pub(crate) fn identity(_file: &File, meta: &Metadata) -> io::Result<(u64, u64)> {
    Ok((meta.dev(), meta.ino()))
}

/// The path a C string's bytes name (any bytes but NUL).
pub(crate) fn path_from_bytes(bytes: &[u8]) -> Option<&Path> {
    Some(Path::new(OsStr::from_bytes(bytes)))
}

/// The bytes of a path, as C functions take them.
pub(crate) fn path_bytes(path: &Path) -> Cow<'_, [u8]> {
    Cow::Borrowed(path.as_os_str().as_bytes())
}
