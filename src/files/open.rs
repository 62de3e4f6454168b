//! [`open_regular`]: opening a user's file without blocking on a FIFO,
//! refusing anything that is not a regular file.

use super::{kind_name, reason};
use crate::error::Result;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` with `options` (O_CLOEXEC, as std always does), never
/// blocking: the open is non-blocking, so a FIFO without a peer opens at
/// once (or fails with ENXIO for writing), and is then refused. Anything
/// that is not a regular file (after following symbolic links) is an Io
/// error naming the path and what it is; the file is closed again. The
/// returned file is blocking as usual.
///
/// `what` starts the messages: "cannot open" gives "cannot open '/x':
/// No such file or directory (os error 2, ENOENT)" and "cannot open
/// '/tmp/f': it is a FIFO, not a regular file: expected a regular file".
pub(crate) fn open_regular(path: &Path, options: &OpenOptions, what: &str) -> Result<File> {
    let shown = path.display();
    let mut options = options.clone();
    options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    let file = options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ENXIO) {
            // Opening a FIFO for writing without a reader.
            crate::err!(
                Io,
                "{what} '{shown}': it is a FIFO or device without a peer ({}), not a regular file: expected a regular file",
                reason(&e)
            )
        } else {
            crate::err!(Io, "{what} '{shown}': {}", reason(&e))
        }
    })?;
    let meta = file
        .metadata()
        .map_err(|e| crate::err!(Io, "{what} '{shown}': fstat failed: {}", reason(&e)))?;
    crate::ensure!(
        meta.is_file(),
        Io,
        "{what} '{shown}': it is {}, not a regular file: expected a regular file",
        kind_name(meta.file_type())
    );
    set_blocking(&file)
        .map_err(|e| crate::err!(Io, "{what} '{shown}': fcntl failed: {}", reason(&e)))?;
    Ok(file)
}

/// Clears O_NONBLOCK on `file`.
fn set_blocking(file: &File) -> std::io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fd is a descriptor `file` owns and keeps open for the call;
    // F_GETFL reads its status flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFL changes only the status flags of fd.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
