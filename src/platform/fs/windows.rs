//! Files on Windows. A file opened by path never blocks (no FIFOs in the
//! file system), so nothing is cleared after opening; permissions are the
//! read-only flag only (left to the system); nothing is preallocated;
//! a file replaces another by `MoveFileExW(MOVEFILE_REPLACE_EXISTING |
//! MOVEFILE_WRITE_THROUGH)`, which returns once the move is on disk, so
//! directories are not synced apart (FlushFileBuffers needs a directory
//! opened for writing); there is no
//! exchange of two directories (the caller renames in two steps) and no
//! in-kernel copy (the caller writes). Paths crossing the C ABI are UTF-8.

use std::borrow::Cow;
use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io;
use std::os::windows::io::AsRawHandle;
use std::path::{Path, PathBuf};
use windows_sys::Win32::Foundation::{ERROR_FILENAME_EXCED_RANGE, HANDLE};
use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, MoveFileExW, BY_HANDLE_FILE_INFORMATION,
    FILE_FLAG_BACKUP_SEMANTICS, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH,
};

/// Reads up to `buf.len()` bytes of `file` at `offset` (ReadFile with an
/// offset; the file's position moves).
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// Reads exactly `buf.len()` bytes of `file` at `offset`.
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// An open by path does not block here; FILE_FLAG_BACKUP_SEMANTICS lets
/// it open a directory too, which the caller then tells apart (as a
/// Unix open does; without it Windows answers "Access denied").
pub(crate) fn open_nonblocking(options: &mut OpenOptions) {
    use std::os::windows::fs::OpenOptionsExt;
    options.custom_flags(FILE_FLAG_BACKUP_SEMANTICS);
}

/// No FIFOs without a peer here.
pub(crate) fn is_no_peer(_e: &io::Error) -> bool {
    false
}

/// Already blocking.
pub(crate) fn set_blocking(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Already blocking.
pub(crate) fn clear_read_only_flags(_file: &File) -> io::Result<()> {
    Ok(())
}

/// No special files reachable by path here.
pub(crate) fn special_kind(_t: &FileType) -> Option<&'static str> {
    None
}

/// Windows error codes are named by their message only.
pub(crate) fn errno_name(_code: i32) -> Option<&'static str> {
    None
}

/// Permission bits do not exist here: files get the directory's ACL.
pub(crate) fn create_mode(_options: &mut OpenOptions, _mode: u32) {}

/// Whether a name was too long (ERROR_FILENAME_EXCED_RANGE).
pub(crate) fn is_name_too_long(e: &io::Error) -> bool {
    e.raw_os_error() == Some(ERROR_FILENAME_EXCED_RANGE as i32)
}

/// No permission bits to copy (0, which [`set_permission_bits`] ignores).
pub(crate) fn permission_bits(_meta: &Metadata) -> u32 {
    0
}

/// No permission bits to set.
pub(crate) fn set_permission_bits(_file: &File, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// Nothing is reserved.
pub(crate) fn preallocate(_file: &File, _bytes: u64) -> io::Result<()> {
    Ok(())
}

/// Flushes the file at `path` (FlushFileBuffers needs a handle open for
/// writing).
pub(crate) fn sync_file(path: &Path) -> io::Result<()> {
    OpenOptions::new().write(true).open(path)?.sync_all()
}

/// Moves the file `from` over `to` in one step, written through: the
/// call returns once the move is on disk (what syncing the directory
/// gives on Unix). Windows refuses to replace a file that is mapped or
/// open without delete sharing: the error, and `to` is untouched.
pub(crate) fn replace_file(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::windows::ffi::OsStrExt;
    let wide = |p: &Path| -> Vec<u16> {
        p.as_os_str()
            .encode_wide()
            .chain(std::iter::once(0))
            .collect()
    };
    let (f, t) = (wide(from), wide(to));
    // SAFETY: two NUL-terminated UTF-16 paths that outlive the call.
    let ok = unsafe {
        MoveFileExW(
            f.as_ptr(),
            t.as_ptr(),
            MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Directories are not synced here: a replace is written through (see
/// the module's comment).
pub(crate) fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// No exchange: [`exchange_missing`].
pub(crate) fn exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(exchange_missing())
}

/// The error of an exchange the system cannot do.
pub(crate) fn exchange_missing() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "Windows cannot exchange two directories in one step",
    )
}

/// Whether an exchange failed because the system cannot do it.
pub(crate) fn exchange_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}

/// No in-kernel copy: always [`copy_unsupported`].
pub(crate) fn copy_file_range(_: &File, _: &mut i64, _: &File, _: usize) -> io::Result<usize> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Whether a copy failed because it cannot be done inside the kernel.
pub(crate) fn copy_unsupported(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Unsupported
}

/// Not asked of the system here (the path checks before the open stand).
pub(crate) fn opened_path(_file: &File) -> Option<PathBuf> {
    None
}

/// What tells one file from another: (volume serial number, file index).
pub(crate) fn identity(file: &File, _meta: &Metadata) -> io::Result<(u64, u64)> {
    // SAFETY: an all-zero BY_HANDLE_FILE_INFORMATION is a valid value to
    // fill.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: a handle `file` owns and keeps open for the call, and a
    // writable structure.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle() as HANDLE, &mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok((u64::from(info.dwVolumeSerialNumber), index))
}

/// The path a C string's bytes name: UTF-8 (None otherwise).
pub(crate) fn path_from_bytes(bytes: &[u8]) -> Option<&Path> {
    std::str::from_utf8(bytes).ok().map(Path::new)
}

/// The bytes of a path, as C functions take them (UTF-8; a name that is
/// not valid Unicode is written lossily).
pub(crate) fn path_bytes(path: &Path) -> Cow<'_, [u8]> {
    match path.to_string_lossy() {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}
