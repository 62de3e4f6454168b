//! NumPy's NPZ format (np.savez, np.savez_compressed): a zip archive of
//! NPY files, entry `NAME.npy` holding array `NAME`.
//!
//! Stored entries (np.savez) are read in place through [`npy`]: each
//! array views the loaded bytes (a mapping under TSR_LOAD_MMAP) where its
//! data are aligned for its dtype, and is copied otherwise, as for a
//! lone NPY file. Deflated entries (np.savez_compressed) are inflated
//! into a fresh storage that the array then views: the inflated size is
//! the entry's declared size, at most 1032 times its compressed size
//! (deflate's largest ratio), and must come out exactly, with the
//! entry's CRC-32. Saving writes what np.savez writes (stored entries),
//! each NPY file's data aligned to 64 bytes in the archive.
//!
//! The entries come from [`zip_index`], which refuses two entries of one
//! name (so no array appears twice), entries over the same bytes (so no
//! deflated entry inflates twice: all entries together inflate to at most
//! 1032 times the archive's length) and local headers naming another
//! file.
//!
//! Detection by content: a zip archive whose entries are all `*.npy`
//! (a torch archive holds `*/data.pkl`).

use super::dict::TensorDict;
use super::npy;
use super::source::Source;
use super::zip_index;
use super::{FileFormat, LoadFlags};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::storage::Storage;
use std::fs::File;
use std::io::{Cursor, Seek, Write};
use std::path::Path;
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// The NPZ format.
pub(crate) struct Npz;

/// The NPZ format's entry in the format table.
pub(crate) static NPZ: Npz = Npz;

/// Where each NPY file's data start in a written archive.
const ALIGNMENT: u16 = 64;

fn fmt_err(what: impl std::fmt::Display) -> Error {
    crate::err!(Format, "npz: {what}")
}

/// The tensor name of an entry name ("w.npy" -> "w").
fn array_name(entry: &str) -> Option<&str> {
    entry.strip_suffix(".npy")
}

/// A CPU storage holding the `size` bytes that `compressed` (raw
/// deflate) inflates to, checked against `crc`. The size is at most
/// deflate's largest ratio of the compressed bytes ([`zip_index`] checked
/// it).
fn inflate(entry: &str, compressed: &[u8], size: u64, crc: u32) -> Result<Storage> {
    let len = usize::try_from(size).map_err(|_| fmt_err(format_args!("{entry}: size {size}")))?;
    let s = Storage::new(len, Device::CPU, true)?;
    if len == 0 {
        return Ok(s);
    }
    // SAFETY: s is a fresh, unshared CPU storage of len bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(s.data() as *mut u8, len) };
    let got = miniz_oxide::inflate::decompress_slice_iter_to_slice(
        out,
        std::iter::once(compressed),
        false,
        true,
    )
    .map_err(|e| {
        fmt_err(format_args!(
            "entry {entry} does not inflate to its declared {size} bytes: {e:?}"
        ))
    })?;
    crate::ensure!(
        got == len,
        Format,
        "npz: entry {entry} inflates to {got} bytes: its header declares {size}"
    );
    let actual = crc32fast::hash(out);
    crate::ensure!(
        actual == crc,
        Format,
        "npz: entry {entry}: CRC-32 {actual:#010x} of the inflated bytes: expected {crc:#010x}"
    );
    Ok(s)
}

/// Reads every entry of the archive in `source`.
fn read(source: &Source<'_>) -> Result<TensorDict> {
    let bytes = source.bytes;
    let entries = zip_index::entries(bytes).map_err(|e| e.context("npz"))?;
    let mut dict = TensorDict::new();
    for f in &entries {
        let entry = &f.name;
        let Some(name) = array_name(entry) else {
            crate::bail!(
                Format,
                "npz: zip entry {entry:?} is not an .npy file: expected only NAME.npy entries"
            )
        };
        crate::ensure!(
            !f.encrypted,
            Format,
            "npz: entry {entry} is encrypted: expected stored or deflated data"
        );
        let range = f.range();
        let tensor = match f.method {
            zip_index::STORED => npy::read_array_at(source, range.start, range.len(), name),
            zip_index::DEFLATED => {
                let inflated = inflate(entry, &bytes[range], f.size, f.crc)?;
                let slice = super::storage_bytes(&inflated)?;
                let sub = Source {
                    bytes: slice,
                    backing: Some(&inflated),
                    direct: false,
                    lazy: None,
                };
                npy::read_array(&sub, name)
            }
            _ => crate::bail!(
                Format,
                "npz: entry {entry} is compressed with {}: expected stored (np.savez) or \
                 deflated (np.savez_compressed)",
                f.method_name()
            ),
        };
        let tensor = tensor.map_err(|e| e.context(format!("npz entry {entry}")))?;
        dict.set(name, tensor)?;
    }
    Ok(dict)
}

/// Refuses what an NPZ file cannot hold: metadata, a name NumPy's
/// reader would not give back.
fn check_dict(dict: &TensorDict) -> Result<()> {
    crate::ensure!(
        !dict.has_saved_metadata(),
        InvalidArgument,
        "npz holds arrays and no metadata: the dict has {} metadata keys or values (save them as \
         safetensors, torch or gguf)",
        dict.saved_metadata_count()
    );
    for (name, t) in dict.iter() {
        crate::ensure!(
            !name.is_empty(),
            InvalidArgument,
            "npz: a tensor name is empty: expected a name for its entry NAME.npy"
        );
        super::torch_write::check_saveable(name, t)?;
    }
    Ok(())
}

fn zip_err(e: zip::result::ZipError) -> Error {
    match e {
        zip::result::ZipError::Io(io) => crate::err!(Io, "{}", crate::files::reason(&io)),
        e => crate::err!(Io, "writing the zip archive failed: {e}"),
    }
}

/// Writes `dict` as np.savez does, into `out`.
fn write<W: Write + Seek>(dict: &TensorDict, out: W) -> Result<W> {
    check_dict(dict)?;
    let mut zip = zip::ZipWriter::new(out);
    for (name, t) in dict.iter() {
        let bytes = (t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64);
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .with_alignment(ALIGNMENT)
            .large_file(bytes >= u32::MAX as u64 - (1 << 20));
        zip.start_file(format!("{name}.npy"), options)
            .map_err(zip_err)?;
        npy::write_array(name, t, &mut zip)?;
    }
    zip.finish().map_err(zip_err)
}

impl FileFormat for Npz {
    fn name(&self) -> &'static str {
        "npz"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["npz"]
    }

    fn detect(&self, bytes: &[u8]) -> bool {
        if !(bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")) {
            return false;
        }
        zip_index::entries(bytes).is_ok_and(|es| es.iter().all(|e| array_name(&e.name).is_some()))
    }

    fn read(&self, source: &Source<'_>, _: LoadFlags) -> Result<TensorDict> {
        read(source)
    }

    fn write_bytes(&self, dict: &TensorDict) -> Result<Vec<u8>> {
        Ok(write(dict, Cursor::new(Vec::new()))?.into_inner())
    }

    fn size_floor(&self, dict: &TensorDict) -> u64 {
        super::tensor_bytes(dict)
    }

    fn write_file(&self, dict: &TensorDict, file: &mut File, _: &Path, dest: &Path) -> Result<()> {
        let w = std::io::BufWriter::with_capacity(1 << 20, file);
        write(dict, w)
            .and_then(|mut w| {
                w.flush()
                    .map_err(|e| crate::err!(Io, "{}", crate::files::reason(&e)))
            })
            .map_err(|e| match e.kind() {
                crate::error::ErrorKind::Io => {
                    e.context(format!("cannot write {}", dest.display()))
                }
                _ => e,
            })
    }
}
