//! Checking a tensor file end to end (`tessera verify`): more than a load,
//! which maps the file and reads only what it must to place the tensors.
//!
//! [`verify`] loads the file mapped, with every check a load makes (the
//! format by content, every record's bounds, every tensor's geometry,
//! and for the torch formats the accounting of every storage the pickle
//! reaches: in a loaded tensor, in `tessera.skipped`, or the load fails);
//! then, for the zip-based formats (torch, TorchScript, npz), reads every
//! record of the archive through its central directory, inflating
//! deflated ones, and compares each record's CRC-32 with the one the
//! archive gives; then reads every byte of every tensor, checking what
//! its dtype allows (a bool is one byte holding 0 or 1).

use super::dict::TensorDict;
use super::source::Source;
use super::{load_source, map_path, storage_bytes, Format, LoadFlags};
use crate::dtype::DType;
use crate::error::Result;
use std::path::Path;

/// What [`verify`] read and found in order.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The format the bytes are in.
    pub format: Format,
    /// The tensors loaded.
    pub tensors: usize,
    /// Their distinct storages.
    pub storages: usize,
    /// Archive records read and CRC-checked (0 for a format that is not a
    /// zip archive).
    pub records: usize,
    /// Bytes read: the records' (as stored) and the tensors'.
    pub bytes_read: u64,
    /// The entries of `tessera.skipped` (objects the load left out, with
    /// [`LoadFlags::skip_unknown`]), one per line as the load lists them.
    pub skipped: Vec<String>,
}

/// Verifies the file at `path` (module documentation), loaded with
/// `flags` (`mmap` is always on: a file larger than memory is verified
/// too). `progress(done, total)` is called as bytes are read.
///
/// Errors: `Io` when the file cannot be opened or mapped; `Format` naming
/// what is wrong: the load's own errors, a record whose bytes do not match
/// its CRC-32 (`record 'archive/data/0' (entry 5): CRC-32 0x1234abcd of
/// its 4096 bytes, the archive says 0x0badf00d`) or that cannot be read,
/// a bool tensor holding another byte.
pub fn verify(
    path: &Path,
    flags: LoadFlags,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified> {
    let mapped = map_path(path, true)?;
    let bytes = storage_bytes(&mapped)?;
    let source = Source {
        bytes,
        backing: Some(&mapped),
        direct: false,
    };
    let flags = LoadFlags {
        mmap: true,
        read_only: true,
        ..flags
    };
    let (format, dict) = load_source(&source, Format::Auto, flags)?;
    // The records as the readers see them (zip_index: duplicates,
    // overlaps and lying sizes already refused by the load above).
    let entries = if bytes.starts_with(b"PK") {
        super::zip_index::entries(bytes)?
    } else {
        Vec::new()
    };
    let records_total: u64 = entries.iter().map(|e| e.packed).sum();
    let tensors_total = super::tensor_bytes(&dict);
    let total = records_total.saturating_add(tensors_total);
    let mut done = 0u64;
    for e in &entries {
        check_record(e, bytes, &mut |n| {
            done += n;
            progress(done, total)
        })?;
    }
    let records = entries.len();
    let storages = check_tensors(&dict, &mut |n| {
        done += n;
        progress(done, total)
    })?;
    let skipped = dict
        .metadata(super::SKIPPED_KEY)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default();
    Ok(Verified {
        format,
        tensors: dict.len(),
        storages,
        records,
        bytes_read: done,
        skipped,
    })
}

/// The bytes of record `e` of the archive `bytes`: as stored (a slice of
/// the file) or inflated (deflated records, in pieces), counted through
/// `read`; their CRC-32 compared with the archive's.
fn check_record(
    e: &super::zip_index::Entry,
    bytes: &[u8],
    read: &mut dyn FnMut(u64),
) -> Result<()> {
    let (name, i) = (&e.name, e.index);
    let stored = &bytes[e.range()];
    let mut crc = crc32fast::Hasher::new();
    let mut n = 0u64;
    let mut take = |piece: &[u8]| {
        crc.update(piece);
        n += piece.len() as u64;
    };
    match e.method {
        super::zip_index::STORED => {
            for piece in stored.chunks(CHUNK) {
                take(piece);
                read(piece.len() as u64);
            }
        }
        super::zip_index::DEFLATED => {
            inflate(stored, e.size, &mut take).map_err(|why| {
                crate::err!(
                    Format,
                    "record '{name}' (entry {i}) does not inflate: {why}"
                )
            })?;
            read(stored.len() as u64);
        }
        _ => crate::bail!(
            Format,
            "record '{name}' (entry {i}) is {}: tessera reads stored and deflated records",
            e.method_name()
        ),
    }
    crate::ensure!(
        n == e.size,
        Format,
        "record '{name}' (entry {i}) holds {n} bytes: the archive says {}",
        e.size
    );
    let got = crc.finalize();
    crate::ensure!(
        got == e.crc,
        Format,
        "record '{name}' (entry {i}): CRC-32 {got:#010x} of its {n} bytes, the archive says \
         {:#010x}: the record is damaged",
        e.crc
    );
    Ok(())
}

/// Inflates raw deflate data `data` in pieces of [`CHUNK`] bytes, handed
/// to `take`; stops past `size` bytes (the record's declared size: a
/// record cannot make this read more).
fn inflate(data: &[u8], size: u64, take: &mut dyn FnMut(&[u8])) -> std::result::Result<(), String> {
    use miniz_oxide::inflate::stream::{inflate, InflateState};
    use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};
    let mut state = InflateState::new_boxed(DataFormat::Raw);
    let mut out = vec![0u8; CHUNK];
    let (mut input, mut total) = (data, 0u64);
    loop {
        let r = inflate(&mut state, input, &mut out, MZFlush::None);
        input = &input[r.bytes_consumed..];
        total += r.bytes_written as u64;
        if total > size {
            return Err(format!("it inflates past its declared {size} bytes"));
        }
        take(&out[..r.bytes_written]);
        match r.status {
            Ok(MZStatus::StreamEnd) => return Ok(()),
            Ok(_) if r.bytes_consumed == 0 && r.bytes_written == 0 => {
                return Err(format!("the data ends after {total} bytes inflated"))
            }
            Ok(_) | Err(MZError::Buf) if input.is_empty() && r.bytes_written == 0 => {
                return Err(format!("the data ends after {total} bytes inflated"))
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{e:?} after {total} bytes inflated")),
        }
    }
}

/// Bytes of a tensor read between two progress calls.
const CHUNK: usize = 1 << 20;

/// Reads every byte of every tensor, checking bools; gives the number of
/// distinct storages.
fn check_tensors(dict: &TensorDict, read: &mut dyn FnMut(u64)) -> Result<usize> {
    let mut storages = std::collections::HashSet::new();
    for (name, t) in dict.iter() {
        storages.insert(crate::refcount::Ref::as_ptr(&t.storage().0) as usize);
        let bytes = super::row_major(t);
        for (c, chunk) in bytes.chunks(CHUNK).enumerate() {
            if t.dtype() == DType::Bool {
                if let Some(at) = chunk.iter().position(|&b| b > 1) {
                    let index = c * CHUNK + at;
                    crate::bail!(
                        Format,
                        "tensor '{name}' (Bool): element {} holds the byte {}: a bool is 0 or 1",
                        index,
                        chunk[at]
                    );
                }
            } else {
                // Reading is the check here: the bytes are fetched (from
                // the mapped file), whatever they hold.
                std::hint::black_box(crc32fast::hash(chunk));
            }
            read(chunk.len() as u64);
        }
    }
    Ok(storages.len())
}
