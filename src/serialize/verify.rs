//! Checking a tensor file end to end (`tessera verify`): more than a load,
//! which maps the file and reads only what it must to place the tensors.
//!
//! [`super::verify`] loads the file mapped, with every check a load makes (the
//! format by content, every record's bounds, every tensor's geometry,
//! and for the torch formats the accounting of every storage the pickle
//! reaches: in a loaded tensor, in `tessera.skipped`, or the load fails);
//! then, for the zip-based formats (torch, TorchScript, npz), reads every
//! record of the archive through its central directory, inflating
//! deflated ones, and compares each record's CRC-32 with the one the
//! archive gives; then reads every byte of every tensor, checking what
//! its dtype allows (a bool is one byte holding 0 or 1).
//!
//! A checkpoint of several files (a Hugging Face shard index, a DCP
//! directory or its `.metadata`) is loaded whole with every check of its
//! own, then each file it names is checked the same way
//! (`verify_sets.rs`), and reported per file.

use super::dict::TensorDict;
use super::source::Source;
use super::zip_index::Entry;
use super::{load_source, storage_bytes, Format, LoadFlags};
use crate::dtype::DType;
use crate::error::Result;
use crate::storage::Storage;

/// What [`super::verify`] read and found in order.
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
    /// For a checkpoint of several files (a shard index, a DCP
    /// directory): each file it names, as checked; empty for one file.
    pub files: Vec<VerifiedFile>,
}

/// One file of a checkpoint of several, as [`verify`] checked it.
#[derive(Debug, Clone)]
pub struct VerifiedFile {
    /// Its path as the index or the metadata names it.
    pub name: String,
    /// The format its bytes are in (DCP for a `.distcp` file).
    pub format: Format,
    /// Tensors (a shard's) or tensor chunks (a DCP file's) it holds.
    pub tensors: usize,
    /// Zip records read and CRC-checked.
    pub records: usize,
    /// Bytes read: the records' and the tensors'.
    pub bytes_read: u64,
}

/// A file loaded with every check, before its bytes are read.
pub(crate) struct Loaded<'a> {
    pub format: Format,
    pub dict: TensorDict,
    pub bytes: &'a [u8],
    pub entries: Vec<Entry>,
}

impl<'a> Loaded<'a> {
    /// Loads the file bytes `mapped` (a read-only mapping) with every
    /// check of a load, and finds its zip records.
    pub(crate) fn new(mapped: &'a Storage, flags: LoadFlags) -> Result<Loaded<'a>> {
        let bytes = storage_bytes(mapped)?;
        let source = Source {
            bytes,
            backing: Some(mapped),
            direct: false,
            lazy: None,
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
        Ok(Loaded {
            format,
            dict,
            bytes,
            entries,
        })
    }

    /// The bytes [`Loaded::read_all`] reads.
    pub(crate) fn total(&self) -> u64 {
        let records: u64 = self.entries.iter().map(|e| e.packed).sum();
        records.saturating_add(super::tensor_bytes(&self.dict))
    }

    /// Reads every record (CRC-32 compared) and every tensor byte; gives
    /// the number of distinct storages.
    pub(crate) fn read_all(&self, read: &mut dyn FnMut(u64)) -> Result<usize> {
        for e in &self.entries {
            check_record(e, self.bytes, read)?;
        }
        check_tensors(&self.dict, read)
    }
}

/// The entries of `tessera.skipped` in `dict`, one per line.
pub(crate) fn skipped(dict: &TensorDict) -> Vec<String> {
    dict.metadata(super::SKIPPED_KEY)
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Verifies one file of a checkpoint, mapped read-only in `mapped`
/// ([`super::verify`] for a file, after the checkpoints of several files
/// are told apart): its load, its records' CRC-32s, every tensor byte.
pub(crate) fn verify_one(
    mapped: &Storage,
    flags: LoadFlags,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified> {
    let loaded = Loaded::new(mapped, flags)?;
    let total = loaded.total();
    let mut done = 0u64;
    let storages = loaded.read_all(&mut |n| {
        done += n;
        progress(done, total)
    })?;
    Ok(Verified {
        format: loaded.format,
        tensors: loaded.dict.len(),
        storages,
        records: loaded.entries.len(),
        bytes_read: done,
        skipped: skipped(&loaded.dict),
        files: Vec::new(),
    })
}

/// Reads every record of every zip archive (torch, TorchScript, npz)
/// that `dict`'s tensors view through a read-only mapping (a load with
/// `mmap` and `read_only`) and compares its CRC-32 with the one the
/// archive gives, as [`super::verify`] does: what a mapped load leaves
/// unchecked (it reads no tensor byte). Gives the records checked (0 when
/// no tensor views a zip archive: a copy load's tensors, safetensors,
/// GGUF, npy). A file that is not one archive (a DCP `.distcp` file, an
/// archive per item) is left to [`super::verify`]. `tessera convert` and
/// `tessera ls` call it.
pub fn check_archives(dict: &TensorDict) -> Result<usize> {
    check_archives_progress(dict, &mut |_, _| {})
}

/// [`check_archives`], calling `progress` with the bytes of records read
/// so far and the bytes it reads in all, after each piece (a few MiB) on
/// the calling thread: what `tessera ls` and `convert` show a bar with.
pub fn check_archives_progress(
    dict: &TensorDict,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<usize> {
    let mut seen = std::collections::HashSet::new();
    // Per archive: its path, its mapping and its records.
    let mut archives = Vec::new();
    for (_, t) in dict.iter() {
        let Some((file, path, _)) = super::source::mapped_extent(t.storage()) else {
            continue;
        };
        if !seen.insert(file as *const std::fs::File as usize) {
            continue;
        }
        let fail = |e: &dyn std::fmt::Display| crate::err!(Io, "{}: {e}", path.display());
        let len = file
            .metadata()
            .map_err(|e| fail(&crate::files::reason(&e)))?
            .len();
        let dup = file
            .try_clone()
            .map_err(|e| fail(&crate::files::reason(&e)))?;
        let mapped = super::map_file(dup, len, &path, true)?;
        // Not one zip archive (a DCP .distcp file holds several, one per
        // item: `verify` checks them through the checkpoint's metadata).
        let Ok(entries) = super::zip_index::entries(storage_bytes(&mapped)?).map_err(|_| ()) else {
            continue;
        };
        archives.push((path, mapped, entries));
    }
    let total: u64 = archives
        .iter()
        .flat_map(|(_, _, entries)| entries.iter().map(|e| e.packed))
        .sum();
    let (mut done, mut records) = (0u64, 0);
    for (path, mapped, entries) in &archives {
        let bytes = storage_bytes(mapped)?;
        for e in entries {
            check_record(e, bytes, &mut |n| {
                done += n;
                progress(done, total);
            })
            .map_err(|err| crate::err!(Format, "{}: {}", path.display(), err.message()))?;
            records += 1;
        }
    }
    Ok(records)
}

/// The bytes of record `e` of the archive `bytes`: as stored (a slice of
/// the file) or inflated (deflated records, in pieces), counted through
/// `read`; their CRC-32 compared with the archive's.
pub(crate) fn check_record(e: &Entry, bytes: &[u8], read: &mut dyn FnMut(u64)) -> Result<()> {
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
pub(crate) fn check_tensors(dict: &TensorDict, read: &mut dyn FnMut(u64)) -> Result<usize> {
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
