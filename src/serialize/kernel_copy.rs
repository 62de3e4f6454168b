//! A save's bytes copied from the file they came from, inside the kernel:
//! for a tensor loaded with `mmap` and `read_only` (what `tessera
//! convert` does), whose bytes are a read-only mapping of its file, the
//! writers copy them with `copy_file_range` into the new file instead of
//! writing them from memory. Measured on a 1 GiB conversion: `write`
//! from the mapping spent twice the system time of `cp`, which copies
//! this way (docs/PERFORMANCE.md, "The tessera command").
//!
//! The torch writer needs the bytes' CRC-32 for its zip entry: it is
//! computed from the mapping on a second thread while the kernel copies.
//! The bytes are the file's page for page, so both see the same bytes
//! (unless another process changes the file meanwhile, which a write
//! from the mapping would tear too).

use super::source::file_extent;
use crate::files::{copy_range, Copied};
use crate::storage::Storage;
use std::fs::File;

/// Smaller byte ranges are written from memory: a second thread and a
/// system call cost more than copying them.
const MIN_BYTES: usize = 1 << 20;

/// What [`copy`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Copy {
    /// The bytes are in the destination, which is positioned after them;
    /// `crc32` is their CRC-32 when it was asked for (else 0).
    Done { crc32: u32 },
    /// Nothing was written: the kernel cannot copy between these files
    /// (another file system). The caller writes the bytes from memory.
    NotCopied,
}

/// The file and offset to copy the `len` bytes at byte `start` of
/// `storage` from, when they are a read-only mapping of a file and worth
/// a copy by the kernel (at least 1 MiB).
pub(crate) fn source(storage: &Storage, start: usize, len: usize) -> Option<(&File, u64)> {
    if len < MIN_BYTES {
        return None;
    }
    file_extent(storage, start, len)
}

/// Copies `bytes`, which are the bytes at byte `offset` of `src` (from
/// [`source`]), into `dst` at its position; the caller flushed whatever
/// it buffered for `dst` first. With `crc`, also gives their CRC-32.
///
/// Errors: the OS error of a copy that started (ENOSPC, EIO), a source
/// file truncated since it was mapped.
pub(crate) fn copy(
    src: &File,
    offset: u64,
    bytes: &[u8],
    dst: &File,
    crc: bool,
) -> std::io::Result<Copy> {
    let len = bytes.len() as u64;
    if !crc {
        return Ok(match copy_range(src, offset, dst, len)? {
            Copied::All => Copy::Done { crc32: 0 },
            Copied::Unsupported => Copy::NotCopied,
        });
    }
    std::thread::scope(|s| {
        // A thread that cannot start leaves the CRC to this one, after.
        let hasher = std::thread::Builder::new()
            .name("tessera-crc32".into())
            .spawn_scoped(s, || crc32fast::hash(bytes))
            .ok();
        let copied = copy_range(src, offset, dst, len)?;
        let crc32 = match hasher {
            Some(h) => h
                .join()
                .map_err(|_| std::io::Error::other("the CRC-32 thread panicked"))?,
            None if copied == Copied::All => crc32fast::hash(bytes),
            None => 0,
        };
        Ok(match copied {
            Copied::All => Copy::Done { crc32 },
            Copied::Unsupported => Copy::NotCopied,
        })
    })
}
