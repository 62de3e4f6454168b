//! Saving and loading tensor dictionaries (SEMANTICS.md, Serialization)
//! in the formats of the table in [`formats`]: TORCH (torch.save's zip
//! archive, [`torch_write`] / [`torch_read`]), torch.save's legacy format
//! ([`torch_legacy`], read only), SAFETENSORS ([`safetensors_format`]) and
//! NumPy's NPY ([`npy`]) and NPZ ([`npz`]), llama.cpp's GGUF
//! ([`gguf`], [`gguf_write`]), and torch.distributed.checkpoint
//! directories ([`dcp`], a format stored as a directory). Besides the
//! table, a Hugging Face shard index is followed to its shards
//! ([`hf_shards`]; written by [`save_sharded`]).
//!
//! Loading never copies a record twice: a file is read once into a
//! storage from the CPU allocator (or mapped, [`LoadFlags::mmap`]), and
//! each record becomes a storage viewing those bytes (keeping them alive)
//! when its address suits its dtype's alignment, a copy otherwise.

mod byte_source;
mod checkpoint;
mod ckpt_index;
mod ckpt_open;
mod ckpt_parts;
mod dcp;
mod dcp_chunks;
mod dcp_index;
mod dcp_items;
mod dcp_metadata;
mod dcp_metadata_write;
pub mod dict;
mod dtypes;
mod fetch;
mod fetch_plan;
mod formats;
mod gguf;
mod gguf_types;
mod gguf_values;
mod gguf_write;
mod header_index;
mod hf_save;
mod hf_shards;
mod kernel_copy;
mod legacy_index;
mod name_index;
mod npy;
mod npz;
mod ranges;
mod read_file;
mod remote;
mod safetensors_format;
mod safetensors_header;
mod shard_files;
mod source;
mod sparse_copy;
mod torch_legacy;
mod torch_loader;
mod torch_pickle;
mod torch_read;
mod torch_tar;
mod torch_tensor;
mod torch_values;
mod torch_write;
mod torch_zip;
mod torchscript;
mod values;
mod verify;
mod verify_sets;
mod zip_head;
mod zip_index;

pub use checkpoint::{Checkpoint, FetchOptions, Progress, ProgressFn};
pub use dict::TensorDict;
pub use formats::{detect, Format};
pub use hf_save::save_sharded;
pub use remote::RemoteSettings;
pub use safetensors_format::row_major;
pub use torch_pickle::SKIPPED_KEY;
pub use values::{
    MAX_BYTES as MAX_VALUE_BYTES, MAX_DEPTH as MAX_VALUE_DEPTH, SOURCE_KEY, VALUES_KEY,
};
pub use verify::{check_archives, check_archives_progress, Verified, VerifiedFile};
pub use verify_sets::verify;

use crate::device::Device;
use crate::error::Result;
use crate::files::Opened;
use crate::storage::Storage;
use source::Source;
use std::fs::File;
use std::path::Path;

/// What a file format does.
pub(crate) trait FileFormat: Sync {
    /// Its name in messages ("torch zip", "npy").
    fn name(&self) -> &'static str;
    /// File name extensions that name it, without the dot.
    fn extensions(&self) -> &'static [&'static str];
    /// Whether `bytes` (a whole file) are in this format, by content.
    fn detect(&self, bytes: &[u8]) -> bool;
    /// Reads a dict from `source`.
    fn read(&self, source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict>;
    /// Whether tessera writes this format ([`FileFormat::write_bytes`] and
    /// [`FileFormat::write_file`] refuse otherwise).
    fn writes(&self) -> bool {
        true
    }
    /// The file bytes of `dict` (a read-only format: refused by name).
    fn write_bytes(&self, _dict: &TensorDict) -> Result<Vec<u8>> {
        Err(read_only(self.name()))
    }
    /// At most the size of the file [`FileFormat::write_file`] writes for
    /// `dict` (its tensors' bytes), reserved on disk before the write
    /// (`files::reserve`); 0 (the default): nothing reserved, as for a
    /// format whose writer reopens the file by its path.
    fn size_floor(&self, _dict: &TensorDict) -> u64 {
        0
    }
    /// Writes `dict` into `file`, a new empty file at `temp` that becomes
    /// `dest` when this returns Ok (errors name `dest`; a read-only
    /// format: refused by name).
    fn write_file(
        &self,
        _dict: &TensorDict,
        _file: &mut std::fs::File,
        _temp: &Path,
        _dest: &Path,
    ) -> Result<()> {
        Err(read_only(self.name()))
    }
    /// For a format stored as a directory of files (DCP): how it loads
    /// and saves by path (the one-file methods above refuse). None for a
    /// one-file format.
    fn directory(&self) -> Option<&dyn DirectoryFormat> {
        None
    }
}

/// A format stored as a directory of files ([`FileFormat::directory`]).
pub(crate) trait DirectoryFormat: Sync {
    /// Whether the directory `dir` holds a checkpoint of this format.
    fn holds(&self, dir: &Path) -> bool;
    /// Loads the checkpoint in the directory `path` (or named by its
    /// metadata file).
    fn load_dir(&self, path: &Path, flags: LoadFlags) -> Result<TensorDict>;
    /// Saves `dict` as a checkpoint in `dir`, atomically.
    fn save_dir(&self, dict: &TensorDict, dir: &Path, flags: SaveFlags) -> Result<()>;
}

/// How to load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadFlags {
    /// Tensors view a private (copy-on-write) mapping of the file.
    pub mmap: bool,
    /// With `mmap`: a read-only mapping instead, and read-only tensors
    /// (writing to one is refused). Saving such tensors copies their
    /// bytes from the file inside the kernel (`copy_file_range`) instead
    /// of through memory: what `tessera convert` does. Without `mmap`,
    /// no effect.
    pub read_only: bool,
    /// Load the tensors around pickled objects whose globals the
    /// allowlist does not know (placeholders: never imported or called),
    /// listing each in the metadata key [`SKIPPED_KEY`]; without it such a
    /// file is refused naming every unknown global.
    pub skip_unknown: bool,
}

/// The file bytes of `dict` in `format` (Auto: TORCH).
pub fn save_to_bytes(dict: &TensorDict, format: Format) -> Result<Vec<u8>> {
    let handler = format.handler().unwrap_or(&torch_zip::TORCH_ZIP);
    writable(handler)?;
    handler.write_bytes(dict)
}

/// The bytes of `dict`'s tensors, each written once in row-major order:
/// the least an npy, npz or GGUF file of them holds.
fn tensor_bytes(dict: &TensorDict) -> u64 {
    dict.iter()
        .map(|(_, t)| (t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64))
        .fold(0, u64::saturating_add)
}

/// The error for writing a format tessera only reads.
fn read_only(name: &str) -> crate::error::Error {
    crate::err!(
        Unsupported,
        "the {name} format is read only: tessera loads it but does not write it"
    )
}

/// Refuses a format tessera only reads, naming it.
fn writable(handler: &dyn FileFormat) -> Result<()> {
    if handler.writes() {
        Ok(())
    } else {
        Err(read_only(handler.name()))
    }
}

/// A storage holding the file bytes of `dict` in `format`.
pub fn save_to_storage(dict: &TensorDict, format: Format) -> Result<Storage> {
    let bytes = save_to_bytes(dict, format)?;
    let s = Storage::new(bytes.len(), Device::CPU, true)?;
    if !bytes.is_empty() {
        // SAFETY: s is a fresh CPU storage of bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, bytes.len()) };
    }
    Ok(s)
}

pub(crate) fn io_err(path: &Path, what: &str, e: std::io::Error) -> crate::error::Error {
    crate::err!(
        Io,
        "{what} {}: {}",
        path.display(),
        crate::files::reason(&e)
    )
}

/// How to save.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaveFlags {
    /// fsync the new file before it replaces the destination, and its
    /// directory after.
    pub sync: bool,
}

/// Saves `dict` to the file at `path`, atomically: the file is written
/// beside the destination under a temporary name (`.NAME.tsr-tmp-PID-N`,
/// `.tsr-tmp-PID-N` where that name is too long)
/// and renamed over it once complete. On an error the destination is as
/// it was and no file is left behind; a symbolic link at `path` stays and
/// its target is replaced; a destination that is not a regular file (a
/// FIFO, a device, a directory) is refused (Io) and left alone.
pub fn save(dict: &TensorDict, path: &Path, format: Format) -> Result<()> {
    save_flags(dict, path, format, SaveFlags::default())
}

/// [`save`] with `flags`.
pub fn save_flags(dict: &TensorDict, path: &Path, format: Format, flags: SaveFlags) -> Result<()> {
    if let Some(url) = remote::url_of(path) {
        // Written locally, then uploaded (remote/save.rs).
        return remote::save_to(url, |local| {
            save_flags(dict, local, format, flags).map(|()| local.to_path_buf())
        })
        .map(|_| ());
    }
    let handler = formats::for_saving(path, format);
    writable(handler)?;
    if let Some(dir_format) = handler.directory() {
        return dir_format.save_dir(dict, path, flags);
    }
    let floor = handler.size_floor(dict);
    crate::files::replace_file(path, flags.sync, "the tensors", |file, temp| {
        crate::files::reserve(file, floor).map_err(|e| {
            crate::err!(
                Io,
                "cannot write the tensors to '{}': reserving {floor} bytes for them failed: {}",
                path.display(),
                crate::files::reason(&e)
            )
        })?;
        handler.write_file(dict, file, temp, path)
    })
}

/// Loads a dict from `bytes`, its records viewing `backing` (the storage
/// holding `bytes`) where alignment allows; with the format read (for
/// Auto, the one the bytes tell).
fn load_source(
    source: &Source<'_>,
    format: Format,
    flags: LoadFlags,
) -> Result<(Format, TensorDict)> {
    let format = match format {
        Format::Auto => detect(source.bytes)?,
        f => f,
    };
    let handler = format.handler().expect("a detected format is concrete");
    Ok((format, handler.read(source, flags)?))
}

/// The bytes of a CPU storage.
fn storage_bytes(s: &Storage) -> Result<&[u8]> {
    crate::ensure!(
        s.device().is_cpu(),
        Device,
        "the bytes are on {}: expected a CPU storage",
        s.device()
    );
    if s.nbytes() == 0 || s.data().is_null() {
        return Ok(&[]);
    }
    // SAFETY: a CPU storage's data is valid for nbytes while `s` is
    // borrowed; loading only reads it.
    Ok(unsafe { std::slice::from_raw_parts(s.data() as *const u8, s.nbytes()) })
}

/// Loads a dict from the file bytes in `bytes`: tensors view that storage
/// (at their record's offset) where their alignment allows, copies
/// otherwise.
pub fn load_from_storage(bytes: &Storage, format: Format) -> Result<TensorDict> {
    load_backed(bytes, format, true, LoadFlags::default()).map(|(_, dict)| dict)
}

/// [`load_from_storage`] with `flags` (`mmap` has no effect here).
pub fn load_from_storage_flags(
    bytes: &Storage,
    format: Format,
    flags: LoadFlags,
) -> Result<TensorDict> {
    load_backed(bytes, format, true, flags).map(|(_, dict)| dict)
}

/// Loads a dict from the bytes of `bytes`, giving the format read
/// (`format`, or the one the bytes tell for Auto).
fn load_backed(
    bytes: &Storage,
    format: Format,
    direct: bool,
    flags: LoadFlags,
) -> Result<(Format, TensorDict)> {
    let slice = storage_bytes(bytes)?;
    load_source(
        &Source {
            bytes: slice,
            backing: Some(bytes),
            direct,
            lazy: None,
        },
        format,
        flags,
    )
}

/// Loads the dict in the file at `path`; a checkpoint directory (DCP)
/// in a format stored as one; and for a shard index (with `format` Auto,
/// or the format of its shards), every shard it names.
pub fn load(path: &Path, format: Format, flags: LoadFlags) -> Result<TensorDict> {
    load_as(path, format, flags).map(|(_, dict)| dict)
}

/// [`load`], also giving the format the file was read as: `format`, or
/// for Auto the one its bytes tell (what `tessera ls` shows): DCP for a
/// checkpoint directory, the shards' format for a shard index. Errors
/// name the path.
pub fn load_as(path: &Path, format: Format, flags: LoadFlags) -> Result<(Format, TensorDict)> {
    load_path(path, format, flags).map_err(|e| {
        let shown = shown_path(path);
        if e.message().contains(&shown) {
            e
        } else {
            e.context(shown)
        }
    })
}

/// Whether `path` is a URL (`http://`, `https://`, `s3://`, any case)
/// rather than a local path: what loads read remotely and saves upload.
pub fn is_url(path: &Path) -> bool {
    remote::url_of(path).is_some()
}

/// How messages name `path`: a URL without the user and password it may
/// hold, any other path as it displays.
pub fn shown_path(path: &Path) -> String {
    match remote::url_of(path) {
        Some(url) => remote::shown(url),
        None => path.display().to_string(),
    }
}

fn load_path(path: &Path, format: Format, flags: LoadFlags) -> Result<(Format, TensorDict)> {
    // A URL: indexed through its reads, every tensor fetched by ranged
    // requests into its own memory (no mapping: `mmap` has no file).
    if let Some(url) = remote::url_of(path) {
        let index = remote::open_index(url, format, flags, &RemoteSettings::default())?;
        return Ok((index.format, checkpoint::load_all(index)?));
    }
    // A DCP checkpoint that can be indexed by reads: loaded through its
    // index, every tensor read in parallel into its own memory.
    if !flags.mmap {
        if let Some(dict) = checkpoint::load_dcp_indexed(path, format, flags)? {
            return Ok((Format::Dcp, dict));
        }
    }
    if let Some(dir_format) = format.handler().and_then(|h| h.directory()) {
        return dir_format.load_dir(path, flags).map(|d| (Format::Dcp, d));
    }
    // One open for the whole load: a mapped load is this open, an fstat,
    // an fcntl and the mmap.
    let (file, meta) = match crate::files::open_for_reading(path, "cannot open")? {
        Opened::File(file, meta) => (file, meta),
        Opened::Directory => {
            if format == Format::Auto {
                if let Some(d) = load_directory(path, flags)? {
                    return Ok((Format::Dcp, d));
                }
            }
            return Err(crate::files::directory_refused(path, "cannot open"));
        }
    };
    // A file that can be indexed by reads (a header at its front:
    // safetensors, npy, GGUF; a zip archive: torch, TorchScript, npz) is
    // loaded through its index, then every tensor read in parallel into
    // its own memory.
    let file = if flags.mmap {
        file
    } else {
        match checkpoint::load_indexed(file, path, format, flags)? {
            Ok(loaded) => return Ok(loaded),
            Err(file) => file,
        }
    };
    let bytes = if flags.mmap {
        map_file(file, meta.len(), path, flags.read_only)?
    } else {
        read_file::read_file(file, path)?
    };
    let slice = storage_bytes(&bytes)?;
    if matches!(format, Format::Auto | Format::Safetensors | Format::Torch)
        && hf_shards::is_index(slice)
    {
        // The shards' format, told by their bytes (not the index's name).
        return hf_shards::load(path, slice, format, flags);
    }
    if format == Format::Auto {
        if let Ok(f) = detect(slice) {
            if let Some(dir_format) = f.handler().and_then(|h| h.directory()) {
                // A DCP checkpoint's .metadata: its directory.
                return dir_format.load_dir(path, flags).map(|d| (f, d));
            }
        }
    }
    // Only this function holds `bytes`: records get storages of their own.
    load_source(
        &Source {
            bytes: slice,
            backing: Some(&bytes),
            direct: false,
            lazy: None,
        },
        format,
        flags,
    )
}

/// Loads the directory `path` as the first directory format that holds
/// it; None when none does (the one-file path then refuses it).
fn load_directory(path: &Path, flags: LoadFlags) -> Result<Option<TensorDict>> {
    for f in Format::ALL {
        if let Some(dir_format) = f.handler().and_then(|h| h.directory()) {
            if dir_format.holds(path) {
                return dir_format.load_dir(path, flags).map(Some);
            }
        }
    }
    Ok(None)
}

/// A private (copy-on-write) mapping of the file at `path`, or with
/// `read_only` a read-only one; a directory is refused.
fn map_path(path: &Path, read_only: bool) -> Result<Storage> {
    match crate::files::open_for_reading(path, "cannot open")? {
        Opened::File(file, meta) => map_file(file, meta.len(), path, read_only),
        Opened::Directory => Err(crate::files::directory_refused(path, "cannot open")),
    }
}

/// A private (copy-on-write) mapping of the opened file at `path`, or
/// with `read_only` a read-only one.
fn map_file(file: File, len: u64, path: &Path, read_only: bool) -> Result<Storage> {
    crate::ensure!(
        len > 0,
        Format,
        "{} is empty: expected a tensor file",
        path.display()
    );
    use crate::storage::file::{c_path, FileMode};
    let mode = if read_only {
        FileMode::ReadOnly
    } else {
        FileMode::Private
    };
    Storage::map_opened(file, len, false, path, c_path(path)?, mode, 0)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_archives;
#[cfg(test)]
mod tests_dcp;
#[cfg(test)]
mod tests_kernel_copy;
#[cfg(test)]
mod tests_killed_saves;
#[cfg(test)]
mod tests_layouts;
#[cfg(test)]
mod tests_legacy;
#[cfg(test)]
mod tests_readers;
#[cfg(test)]
mod tests_values;
