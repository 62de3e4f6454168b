//! Where a checkpoint's bytes come from, read by range: the one interface
//! a checkpoint handle fetches through (docs/FORMATS.md, "Loading in
//! parts"). A source knows its length, reads any range of itself into a
//! caller's buffer (from several threads at once), counts the bytes it
//! read, and tells when what it reads from changed since it was opened.
//!
//! Here: a file read with positioned reads. The remote source (HTTP,
//! S3: `remote::object`) is another implementation of the same trait.

use crate::error::Result;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

/// Bytes read by range.
pub(crate) trait ByteSource: Send + Sync {
    /// The source's length in bytes, as it was when opened.
    fn len(&self) -> u64;
    /// Fills `buf` with the bytes at `offset`. A range past the length,
    /// or a source shorter than at open, is an error naming the source.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The bytes read since the source was opened (all threads).
    fn bytes_read(&self) -> u64;
    /// What messages call it (a path or a URL).
    fn name(&self) -> &str;
    /// Refuses a source whose length or modification time differ from
    /// those it had when opened (a file truncated, grown or written).
    fn check_unchanged(&self) -> Result<()>;
    /// The open file behind it, where there is one (a mapped load views
    /// it).
    fn file(&self) -> Option<&File> {
        None
    }
    /// How a fetch from it reads when the caller sets nothing (a remote
    /// source asks for more requests in flight than there are cores, and
    /// for small records read together).
    fn fetch_hints(&self) -> FetchHints {
        FetchHints::default()
    }
}

/// What a source asks of a fetch from it ([`ByteSource::fetch_hints`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FetchHints {
    /// Reading threads (None: the parallel-loop thread count).
    pub threads: Option<usize>,
    /// Bytes a read (None: the fetch's default).
    pub chunk: Option<u64>,
    /// Records of it closer than this many bytes are read by one read
    /// (up to a chunk), gaps included (None or 0: each record its own
    /// reads). Worth it where a read costs a round trip (a request to a
    /// server), not a system call.
    pub join_gap: Option<u64>,
}

/// A file read with positioned reads (`pread`): any thread, no shared
/// cursor.
pub(crate) struct FileSource {
    file: File,
    shown: String,
    len: u64,
    modified: Option<SystemTime>,
    read: AtomicU64,
}

impl FileSource {
    /// The opened `file` at `path` (for messages), its length and
    /// modification time taken now.
    pub(crate) fn new(file: File, path: &Path) -> Result<FileSource> {
        let meta = file.metadata().map_err(|e| {
            crate::err!(
                Io,
                "cannot stat {}: {}",
                path.display(),
                crate::files::reason(&e)
            )
        })?;
        Ok(FileSource {
            file,
            shown: path.display().to_string(),
            len: meta.len(),
            modified: meta.modified().ok(),
            read: AtomicU64::new(0),
        })
    }
}

impl FileSource {
    /// The open file, given back.
    pub(crate) fn into_file(self) -> File {
        self.file
    }
}

/// The first `n` bytes of `source` (fewer when it is shorter).
pub(crate) fn first_bytes(source: &dyn ByteSource, n: u64) -> Result<Vec<u8>> {
    let mut first = vec![0u8; source.len().min(n) as usize];
    source.read_at(0, &mut first)?;
    Ok(first)
}

impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        crate::ensure!(
            end.is_some_and(|e| e <= self.len),
            Format,
            "{}: bytes [{offset}, +{}) lie past its end: it is {} bytes",
            self.shown,
            buf.len(),
            self.len
        );
        read_exact_at(&self.file, buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                crate::err!(
                    Format,
                    "{} changed since it was opened: it ended before byte {} (it was {} \
                     bytes): expected the file as it was",
                    self.shown,
                    offset + buf.len() as u64,
                    self.len
                )
            } else {
                crate::err!(
                    Io,
                    "cannot read {}: {}",
                    self.shown,
                    crate::files::reason(&e)
                )
            }
        })?;
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    fn name(&self) -> &str {
        &self.shown
    }

    fn check_unchanged(&self) -> Result<()> {
        let meta = self.file.metadata().map_err(|e| {
            crate::err!(
                Io,
                "cannot stat {}: {}",
                self.shown,
                crate::files::reason(&e)
            )
        })?;
        crate::ensure!(
            meta.len() == self.len && meta.modified().ok() == self.modified,
            Format,
            "{} changed since it was opened (then {} bytes, now {}; or written since): \
             expected the file as it was: open it again",
            self.shown,
            self.len,
            meta.len()
        );
        Ok(())
    }

    fn file(&self) -> Option<&File> {
        Some(&self.file)
    }
}

/// Bytes [start, start + len) of another source as a source of their
/// own (a zip archive inside a file: a DCP checkpoint's chunks). Reads
/// are counted by the source it is a window of.
pub(crate) struct Window {
    pub inner: Arc<dyn ByteSource>,
    pub start: u64,
    pub len: u64,
}

impl ByteSource for Window {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        crate::ensure!(
            offset
                .checked_add(buf.len() as u64)
                .is_some_and(|end| end <= self.len),
            Format,
            "{}: bytes {offset}..+{} past the end of the part at {} of {} bytes",
            self.inner.name(),
            buf.len(),
            self.start,
            self.len
        );
        self.inner.read_at(self.start + offset, buf)
    }

    fn bytes_read(&self) -> u64 {
        0
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn check_unchanged(&self) -> Result<()> {
        self.inner.check_unchanged()
    }

    fn fetch_hints(&self) -> FetchHints {
        self.inner.fetch_hints()
    }
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    crate::platform::fs::read_exact_at(file, buf, offset)
}
