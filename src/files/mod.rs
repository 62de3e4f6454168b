//! Opening and replacing a user's files: the one place every path tessera
//! is handed goes through (docs/RELIABILITY.md, "Files").
//!
//! - [`open_regular`] opens without blocking (a FIFO would otherwise block
//!   `open` until a writer or reader comes) and refuses anything that is
//!   not a regular file: a FIFO, a directory, a device or a socket is an
//!   Io error naming the path and what it is.
//! - [`replace_file`] writes a new file beside the destination and
//!   renames it over the destination once complete, so a failed save
//!   leaves the destination as it was, byte for byte; [`reserve`]
//!   allocates the new file's disk space before it is written.
//! - [`replace_dir`] does the same for a directory (a checkpoint of
//!   several files): filled beside the destination, then swapped with it
//!   in one rename; [`write_beside`] puts several files into a directory
//!   together (shards and their index), renamed only once all are written.
//! - [`open_inside`] opens a file that another file names (a shard index,
//!   a DCP checkpoint's metadata), refusing a path that leaves its
//!   directory (`..`, an absolute path, a symbolic link out of it).
//! - [`copy_range`] copies bytes from one file into another inside the
//!   kernel (a save of tensors that are a read-only mapping of a file).
//!
//! Uses only `error`.

mod copy_range;
mod inside;
pub(crate) mod kill_point;
mod open;
mod replace;
mod replace_dir;

#[cfg(test)]
pub(crate) use copy_range::COPIED;
pub(crate) use copy_range::{copy_range, Copied};
pub(crate) use inside::{canonical_dir, check_relative, open_inside};
pub(crate) use open::{directory_refused, open_for_reading, open_regular, Opened};
pub(crate) use replace::{replace_file, reserve};
pub(crate) use replace_dir::{replace_dir, write_beside};

use std::fs::FileType;

/// What a file that is not a regular file is, for messages.
pub(crate) fn kind_name(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if let Some(kind) = crate::platform::fs::special_kind(&t) {
        kind
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// The OS reason of `e` with its errno name where known: "No space left
/// on device (os error 28, ENOSPC)".
pub(crate) fn reason(e: &std::io::Error) -> String {
    let Some(name) = e.raw_os_error().and_then(crate::platform::fs::errno_name) else {
        return e.to_string();
    };
    match e.to_string().strip_suffix(')') {
        Some(s) => format!("{s}, {name})"),
        None => format!("{e} ({name})"),
    }
}

#[cfg(test)]
mod tests;
