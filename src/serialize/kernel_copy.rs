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

/// What [`copy_from_file`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Copy {
    /// The bytes are in the destination, which is positioned after them;
    /// `crc32` is their CRC-32 when it was asked for (else 0).
    Done { crc32: u32 },
    /// Nothing was written: the bytes are not a read-only mapping of a
    /// file, are too few, or the kernel cannot copy between these files.
    /// The caller writes them from memory.
    NotCopied,
}

/// Copies `bytes`, which are the bytes at byte `start` of `storage`, into
/// `dst` at its position when they are a read-only mapping of a file,
/// calling `flush` first (the caller's buffered writes to `dst` must
/// precede them; nothing is flushed when nothing is copied). With `crc`,
/// also gives their CRC-32.
///
/// Errors: `flush`'s, the OS error of a copy that started (ENOSPC, EIO),
/// a source file truncated since it was mapped.
pub(crate) fn copy_from_file(
    storage: &Storage,
    start: usize,
    bytes: &[u8],
    dst: &File,
    crc: bool,
    flush: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<Copy> {
    if bytes.len() < MIN_BYTES {
        return Ok(Copy::NotCopied);
    }
    let Some((src, offset)) = file_extent(storage, start, bytes.len()) else {
        return Ok(Copy::NotCopied);
    };
    flush()?;
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
