//! [`open_regular`]: opening a user's file without blocking on a FIFO,
//! refusing anything that is not a regular file.

use super::{kind_name, reason};
use crate::error::{Error, Result};
use crate::platform::fs as os;
use std::fs::{File, Metadata, OpenOptions};
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
    let (file, meta) = open_nonblocking(path, options, what)?;
    check_regular(&meta, path, what)?;
    set_blocking(&file).map_err(|e| {
        crate::err!(
            Io,
            "{what} '{}': fcntl failed: {}",
            path.display(),
            reason(&e)
        )
    })?;
    Ok(file)
}

/// What [`open_for_reading`] found at a path.
pub(crate) enum Opened {
    /// A regular file, open for reading (blocking as usual), and its
    /// metadata.
    File(File, Metadata),
    /// A directory (closed again).
    Directory,
}

/// Opens `path` for reading as [`open_regular`] does, but tells a
/// directory apart instead of refusing it (a loader then looks for a
/// checkpoint directory), and returns the metadata it checked: one open,
/// one fstat and one fcntl for a regular file (a load's whole cost when
/// it maps the file). Anything else that is not a regular file is
/// refused with [`open_regular`]'s messages.
pub(crate) fn open_for_reading(path: &Path, what: &str) -> Result<Opened> {
    let (file, meta) = open_nonblocking(path, OpenOptions::new().read(true), what)?;
    if meta.is_dir() {
        return Ok(Opened::Directory);
    }
    check_regular(&meta, path, what)?;
    if let Err(e) = os::clear_read_only_flags(&file) {
        crate::bail!(
            Io,
            "{what} '{}': fcntl failed: {}",
            path.display(),
            reason(&e)
        );
    }
    Ok(Opened::File(file, meta))
}

/// Opens `path` with `options` and O_NONBLOCK (so a FIFO does not block),
/// and reads its metadata.
fn open_nonblocking(path: &Path, options: &OpenOptions, what: &str) -> Result<(File, Metadata)> {
    let shown = path.display();
    let mut options = options.clone();
    os::open_nonblocking(&mut options);
    let file = options.open(path).map_err(|e| {
        if os::is_no_peer(&e) {
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
    Ok((file, meta))
}

/// Refuses what is not a regular file, naming what it is.
fn check_regular(meta: &Metadata, path: &Path, what: &str) -> Result<()> {
    if meta.is_file() {
        Ok(())
    } else {
        Err(not_regular(path, what, kind_name(meta.file_type())))
    }
}

/// The refusal of a directory where a regular file is expected, worded
/// as [`open_regular`]'s.
pub(crate) fn directory_refused(path: &Path, what: &str) -> Error {
    not_regular(path, what, "a directory")
}

fn not_regular(path: &Path, what: &str, kind: &str) -> Error {
    crate::err!(
        Io,
        "{what} '{}': it is {kind}, not a regular file: expected a regular file",
        path.display()
    )
}

/// Clears O_NONBLOCK on `file`.
fn set_blocking(file: &File) -> std::io::Result<()> {
    os::set_blocking(file)
}
