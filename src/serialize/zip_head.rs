//! A zip-based checkpoint (torch, TorchScript, npz) indexed by reads: the
//! format's own reader runs over a sparse copy of the file that holds
//! only what it looks at, and notes the records it would load instead of
//! loading them (`Source::lazy`).
//!
//! The copy (`sparse_copy`) is filled in steps through the byte source
//! (each step's ranges read at once where the source reads in parallel):
//! the last 128 KiB (the end record, a ZIP64 locator and end record,
//! usually the whole central directory), the central directory, each
//! record's local header, then every record that is not a tensor storage
//! (the pickles, version and byte-order records, TorchScript's code)
//! whole, and of each stored `.npy` entry its header. Storage records (a
//! name whose last part is a number) and the arrays of
//! npz entries are never read: they become ranges of the index. A deflated
//! record is read whole (an npz entry is inflated at open).
//!
//! Any error on this way (a file that does not parse as a zip archive
//! here, a reader that finds what it needs missing) leaves the file to the
//! mapped index, whose reader gives the error the file deserves.

use super::byte_source::ByteSource;
use super::ckpt_index::{Index, RecordCrc};
use super::formats::Format;
use super::sparse_copy::Sparse;
use super::zip_index::{self, STORED};
use super::LoadFlags;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Arc;

/// The end of the file read first.
const TAIL: u64 = 128 << 10;
/// Bytes read past a local header's name (its extra field starts there).
const LOCAL_SLACK: u64 = 16;
/// The bytes of an .npy entry read ahead for its header (NumPy writes 64
/// or 128; a longer header is read when found).
const NPY_HEADER: u64 = 128;

/// Whether `first` (the file's first bytes) starts a zip archive.
pub(crate) fn is_zip(first: &[u8]) -> bool {
    first.starts_with(b"PK\x03\x04") || first.starts_with(b"PK\x05\x06")
}

/// The index of the zip archive in `source` (`format`: Auto or the one it
/// must be), or None when this way does not index it (the caller maps
/// the file; see the module documentation).
pub(crate) fn index(
    source: Arc<dyn ByteSource>,
    format: Format,
    flags: LoadFlags,
) -> Result<Option<Index>> {
    let len = source.len();
    let Some(mut sparse) = Sparse::new(&*source) else {
        return Ok(None);
    };
    // Reads that fail (the file changed, an I/O error) are errors; a
    // file this way cannot parse is the mapped index's to refuse.
    sparse.fill(len.saturating_sub(TAIL), len)?;
    let Ok((start, end)) = zip_index::central_span(sparse.bytes()) else {
        return Ok(None);
    };
    sparse.fill(start, end)?;
    let headers: Vec<(u64, u64)> = match zip_index::central(sparse.bytes()) {
        Ok((_, records)) => records
            .iter()
            .map(|(e, raw)| (e.header, raw.len() as u64))
            .collect(),
        Err(_) => return Ok(None),
    };
    let local: Vec<(u64, u64)> = headers
        .iter()
        .map(|&(at, name)| (at, at.saturating_add(30 + name + LOCAL_SLACK)))
        .collect();
    sparse.fill_many(&local)?;
    let Ok(entries) = zip_index::entries(sparse.bytes()) else {
        return Ok(None);
    };
    let is_storage = |e: &zip_index::Entry| {
        let last = e.name.rsplit('/').next().unwrap_or_default();
        !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit())
    };
    // What the loop below reads, read first all at once (for a remote
    // object, in parallel): each .npy header's usual size, every record
    // read whole.
    let first: Vec<(u64, u64)> = entries
        .iter()
        .filter(|e| !(is_storage(e) && e.method == STORED))
        .map(|e| {
            let end = e.data.saturating_add(e.packed);
            if e.method == STORED && e.name.ends_with(".npy") {
                (e.data, e.data.saturating_add(NPY_HEADER).min(end))
            } else {
                (e.data, end)
            }
        })
        .collect();
    sparse.fill_many(&first)?;
    // Per offset where a stored record will be fetched from: its length
    // and its entry's CRC-32 (the bytes before it hashed).
    let mut crcs = HashMap::new();
    for e in &entries {
        let storage = is_storage(e);
        let end = e.data.saturating_add(e.packed);
        let crc = |prefix: &[u8]| {
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(prefix);
            RecordCrc {
                entry: e.name.clone(),
                expected: e.crc,
                prefix: hasher,
            }
        };
        if e.method == STORED && e.name.ends_with(".npy") {
            sparse.fill(e.data, e.data.saturating_add(16).min(end))?;
            let first = &sparse.bytes()[e.data as usize..(e.data + 16).min(end) as usize];
            let header = super::npy::header_len(first) as u64;
            let at = e.data.saturating_add(header).min(end);
            sparse.fill(e.data, at)?;
            let prefix = &sparse.bytes()[e.data as usize..at as usize];
            crcs.insert(at, (end - at, crc(prefix)));
        } else if storage && e.method == STORED {
            crcs.insert(e.data, (e.packed, crc(&[])));
        } else {
            sparse.fill(e.data, end)?;
            if e.method == STORED {
                check_whole(
                    source.name(),
                    e,
                    &sparse.bytes()[e.data as usize..end as usize],
                )?;
            }
        }
    }
    sparse.index(source.clone(), format, flags, &crcs)
}

/// Refuses a stored record read whole (a pickle, TorchScript's code)
/// whose bytes do not have the CRC-32 the archive gives it.
fn check_whole(file: &str, e: &zip_index::Entry, bytes: &[u8]) -> Result<()> {
    let got = crc32fast::hash(bytes);
    crate::ensure!(
        got == e.crc,
        Format,
        "{file}: record '{}': CRC-32 {got:#010x} of its {} bytes, the archive says {:#010x}: \
         the record is damaged",
        e.name,
        bytes.len(),
        e.crc
    );
    Ok(())
}
