//! A save's bytes read from the file they came from, never from its
//! mapping: for a tensor loaded with `mmap` and `read_only` (what
//! `tessera convert` does), whose bytes are a read-only mapping of its
//! file, the writers copy them with `copy_file_range` into the new file
//! (1 MiB or more) or read them with `pread` (smaller ones, or where the
//! kernel cannot copy) instead of writing them from memory. Measured on a
//! 1 GiB conversion: `write` from the mapping spent twice the system time
//! of `cp`, which copies this way (docs/PERFORMANCE.md, "The tessera
//! command").
//!
//! The mapping is not touched because the file may shrink meanwhile
//! (another process truncates or rewrites it): a page past its new end
//! is SIGBUS on access, which kills the process, its temporary file left
//! behind; `copy_file_range` and `pread` return short instead, an error
//! naming the input.
//!
//! The torch writer needs the bytes' CRC-32 for its zip entry: it is
//! computed from what was written, read back from the destination
//! (`pread` on the page cache) on a second thread, one piece behind the
//! copy.

use super::source::file_extent;
use crate::files::{copy_range, Copied};
use crate::platform::fs::read_at;
use crate::storage::Storage;
use std::ffi::CStr;
use std::fs::File;
use std::io::{Seek, Write};

/// Smaller byte ranges are read with `pread` and written: a second
/// thread and a system call cost more than copying them.
const MIN_BYTES: usize = 1 << 20;
/// Bytes copied by the kernel before the CRC thread is handed them.
const PIECE: u64 = 32 << 20;
/// The buffer of a read with `pread`.
const BUFFER: usize = 1 << 20;

/// Where bytes to save lie in the file a read-only mapping maps.
#[derive(Clone, Copy)]
pub(crate) struct Src<'a> {
    pub file: &'a File,
    pub offset: u64,
    /// The path the file was mapped from, for messages.
    pub path: &'a CStr,
}

impl Src<'_> {
    /// Whether `len` bytes are worth a copy by the kernel.
    pub(crate) fn worth_kernel(len: usize) -> bool {
        len >= MIN_BYTES
    }

    /// An error for the file ending before byte `end`.
    fn shrank(&self, end: u64) -> std::io::Error {
        let now = self.file.metadata().map_or(String::new(), |m| {
            format!(" (it holds {} bytes now)", m.len())
        });
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "the input '{}' ends before byte {end}{now}: it was truncated while it was \
                 being saved from",
                self.path.to_string_lossy()
            ),
        )
    }
}

/// Where the `len` bytes at byte `start` of `storage` lie in a file, when
/// they are a read-only mapping of it (any length: see
/// [`Src::worth_kernel`]).
pub(crate) fn source(storage: &Storage, start: usize, len: usize) -> Option<Src<'_>> {
    let (file, path, offset) = file_extent(storage, start, len)?;
    Some(Src { file, offset, path })
}

/// Writes the `len` bytes of `src` to `out` through a buffer (`pread`),
/// each piece also handed to `seen` (a CRC).
///
/// Errors: the OS error of a read or write; `UnexpectedEof` naming the
/// input when it ends before them.
pub(crate) fn write_from(
    src: &Src<'_>,
    len: u64,
    out: &mut dyn Write,
    seen: &mut dyn FnMut(&[u8]),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; BUFFER.min(len as usize)];
    let mut done = 0u64;
    while done < len {
        let want = buf.len().min((len - done) as usize);
        let n = match read_at(src.file, &mut buf[..want], src.offset + done) {
            Ok(0) => return Err(src.shrank(src.offset + len)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        seen(&buf[..n]);
        out.write_all(&buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// Copies the `len` bytes of `src` into `dst` at its position, inside
/// the kernel where it can, else through a buffer ([`write_from`]); the
/// caller flushed whatever it buffered for `dst` first. With `crc`, gives
/// their CRC-32 as read back from `dst` (else 0).
///
/// Errors: the OS error of a copy, read or write (ENOSPC, EIO);
/// `UnexpectedEof` naming the input when it was truncated since it was
/// mapped.
pub(crate) fn copy(src: &Src<'_>, len: u64, dst: &File, crc: bool) -> std::io::Result<u32> {
    let mut at = dst;
    let start = at.stream_position()?;
    if !crc {
        return copy_pieces(src, len, dst, &mut |_, _| Ok(())).map(|_| 0);
    }
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<(u64, u64)>();
        // A thread that cannot start leaves the CRC to this one, after.
        let hasher = std::thread::Builder::new()
            .name("tessera-crc32".into())
            .spawn_scoped(s, move || {
                let mut h = crc32fast::Hasher::new();
                for (from, n) in rx {
                    hash_range(dst, from, n, &mut h)?;
                }
                Ok::<u32, std::io::Error>(h.finalize())
            })
            .ok();
        let copied = copy_pieces(src, len, dst, &mut |from, n| {
            if hasher.is_some() {
                // A send fails only when the thread ended on an error,
                // which its join gives.
                let _ = tx.send((start + from, n));
            }
            Ok(())
        });
        drop(tx);
        let hashed = hasher.map(|h| {
            h.join()
                .map_err(|_| std::io::Error::other("the CRC-32 thread panicked"))?
        });
        copied?;
        match hashed {
            Some(crc) => crc,
            None => {
                let mut h = crc32fast::Hasher::new();
                hash_range(dst, start, len, &mut h)?;
                Ok(h.finalize())
            }
        }
    })
}

/// Copies the `len` bytes of `src` into `dst` in pieces of [`PIECE`]
/// bytes, telling `done(from, n)` of each (from: its offset in the
/// range); where the kernel cannot copy, the rest through a buffer.
fn copy_pieces(
    src: &Src<'_>,
    len: u64,
    dst: &File,
    done: &mut dyn FnMut(u64, u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut from = 0u64;
    while from < len {
        let n = PIECE.min(len - from);
        match copy_range(src.file, src.offset + from, dst, n) {
            Ok(Copied::All) => {}
            Ok(Copied::Unsupported) => {
                let rest = Src {
                    offset: src.offset + from,
                    ..*src
                };
                let mut out = dst;
                write_from(&rest, len - from, &mut out, &mut |_| {})?;
                return done(from, len - from);
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(src.shrank(src.offset + len))
            }
            Err(e) => return Err(e),
        }
        done(from, n)?;
        from += n;
    }
    Ok(())
}

/// Adds the `n` bytes at `from` of `file` (what a copy wrote) to `h`.
fn hash_range(file: &File, from: u64, n: u64, h: &mut crc32fast::Hasher) -> std::io::Result<()> {
    let mut buf = vec![0u8; BUFFER.min(n as usize)];
    let mut done = 0u64;
    while done < n {
        let want = buf.len().min((n - done) as usize);
        match read_at(file, &mut buf[..want], from + done) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "the output ended {} bytes short of byte {} while its CRC-32 was read",
                        n - done,
                        from + n
                    ),
                ))
            }
            Ok(k) => {
                h.update(&buf[..k]);
                done += k as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
