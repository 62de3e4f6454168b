//! torch.distributed.checkpoint (DCP) directories: `.metadata` (read and
//! written by `dcp_metadata`) and the `.distcp` files holding each item's
//! bytes, a tensor chunk as torch.save wrote it (a zip archive of one
//! tensor) and anything else as torch.save'd bytes.
//!
//! - **Load** (`tsr_load` of the directory, or of its `.metadata`): the
//!   whole state dict as full tensors whatever number of ranks wrote it,
//!   under the flattened names DCP keeps (`model.layer.weight`); a tensor
//!   in one chunk is that chunk's tensor (it views the mapping under
//!   TSR_LOAD_MMAP), a tensor in several is stitched into new memory by
//!   the chunks' offsets; non-tensor items are listed in
//!   `tessera.skipped`. Files are opened inside the directory only, read
//!   in parallel (or mapped), and every item's bytes must lie inside its
//!   file.
//! - **Save** (`tsr_save(dict, dir, TSR_FORMAT_DCP)`): one file
//!   `__0_0.distcp` with every tensor as one chunk, and `.metadata`, what
//!   one process of torch's `dcp.save` writes; the directory is filled
//!   beside the destination and swapped in (`files::replace_dir`), so a
//!   failed save leaves the old checkpoint as it was.

use super::dcp_items::{check_inside, files_of, METADATA};
use super::dcp_metadata::{self, Chunk, Item, Location, Metadata};
use super::dict::TensorDict;
use super::source::Source;
use super::{dtypes, shard_files, torch_read, torch_write};
use super::{DirectoryFormat, FileFormat, LoadFlags, SaveFlags, SKIPPED_KEY};
use crate::device::Device;
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::{MemoryFormat, Tensor};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The one data file tessera writes (rank 0, writer 0).
const DATA_FILE: &str = "__0_0.distcp";

/// The DCP format's row of the format table.
pub(crate) struct Dcp;

/// The DCP format.
pub(crate) static DCP: Dcp = Dcp;

fn is_directory_error(what: &str) -> crate::error::Error {
    crate::err!(
        Unsupported,
        "a DCP checkpoint is a directory of files: {what} by its directory path (tsr_load / \
         tsr_save with TSR_FORMAT_DCP), not as the bytes of one file"
    )
}

impl FileFormat for Dcp {
    fn name(&self) -> &'static str {
        "DCP"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[]
    }

    /// A `.metadata` file: a pickle whose first global is DCP's Metadata.
    fn detect(&self, bytes: &[u8]) -> bool {
        let head = &bytes[..bytes.len().min(128)];
        bytes.first() == Some(&0x80)
            && head
                .windows(37)
                .any(|w| w == b"torch.distributed.checkpoint.metadata")
    }

    fn read(&self, _: &Source<'_>, _: LoadFlags) -> Result<TensorDict> {
        Err(is_directory_error("load it"))
    }

    fn write_bytes(&self, _: &TensorDict) -> Result<Vec<u8>> {
        Err(is_directory_error("save it"))
    }

    fn write_file(&self, _: &TensorDict, _: &mut std::fs::File, _: &Path, _: &Path) -> Result<()> {
        Err(is_directory_error("save it"))
    }

    fn directory(&self) -> Option<&dyn DirectoryFormat> {
        Some(self)
    }
}

impl DirectoryFormat for Dcp {
    fn holds(&self, dir: &Path) -> bool {
        dir.join(METADATA).is_file()
    }

    fn load_dir(&self, path: &Path, flags: LoadFlags) -> Result<TensorDict> {
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return load(path, flags);
        }
        match (path.file_name(), path.parent()) {
            (Some(n), Some(dir)) if n == METADATA => load(
                if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                },
                flags,
            ),
            _ => crate::bail!(
                Io,
                "'{}' is not a directory: a DCP checkpoint is a directory holding {METADATA}: \
                 expected its directory or its {METADATA} file",
                path.display()
            ),
        }
    }

    fn save_dir(&self, dict: &TensorDict, dir: &Path, flags: SaveFlags) -> Result<()> {
        save(dict, dir, flags)
    }
}

/// Loads the DCP checkpoint in `dir`.
fn load(dir: &Path, flags: LoadFlags) -> Result<TensorDict> {
    let source = format!("the DCP checkpoint '{}'", dir.display());
    let roots = shard_files::roots(dir, &dir.join(METADATA))?;
    let (mut file, real) = crate::files::open_inside(dir, METADATA, &roots, &source)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| super::io_err(&real, "cannot read", e))?;
    let meta = dcp_metadata::parse(&bytes).map_err(|e| e.context(&source))?;
    let files = files_of(&meta);
    let what = format!("{source}'s metadata");
    let storages = shard_files::load_files(dir, &roots, &files, &what, flags)?;
    let storage_of = |at: &Location| {
        let i = files
            .iter()
            .position(|f| *f == at.file)
            .expect("collected above");
        &storages[i]
    };
    // Every item's bytes inside its file, and none shared with another
    // item: no two storages over one memory, and what a tensor's chunks
    // make is bounded by the bytes the files hold for them.
    for (name, item) in &meta.entries {
        match item {
            Item::Bytes(at) => {
                item_bytes(storage_of(at), at, name)?;
            }
            Item::Tensor { chunks, .. } => {
                for c in chunks {
                    item_bytes(storage_of(&c.at), &c.at, name)?;
                }
            }
        }
    }
    dcp_metadata::check_bytes_disjoint(&meta.entries).map_err(|e| e.context(&source))?;
    let mut dict = TensorDict::new();
    let mut skipped = Vec::new();
    for (name, item) in &meta.entries {
        match item {
            Item::Bytes(_) => skipped.push(name.clone()),
            Item::Tensor {
                dtype,
                size,
                chunks,
            } => {
                let whole = |c: &Chunk| c.offsets.iter().all(|&o| o == 0) && c.sizes == *size;
                let t = match chunks.as_slice() {
                    [c] if whole(c) => chunk_tensor(storage_of(&c.at), c, name, *dtype, flags)?,
                    _ => {
                        let parts = chunks
                            .iter()
                            .map(|c| chunk_tensor(storage_of(&c.at), c, name, *dtype, flags))
                            .collect::<Result<Vec<Tensor>>>()?;
                        stitch(name, size, *dtype, chunks, &parts)?
                    }
                };
                dict.set(name, t)?;
            }
        }
    }
    if !skipped.is_empty() {
        dict.set_metadata(SKIPPED_KEY, &skipped.join("\n"))?;
    }
    Ok(dict)
}

/// Tensor `name` of `size` and `dtype` made from its chunks' tensors
/// `parts` (each checked by [`chunk_tensor`] to hold bytes of its own,
/// numel x itemsize): allocated only once the parts are known to hold as
/// many bytes as it needs, so its size is bounded by the bytes the files
/// hold for it (the metadata's tiling check makes them cover it once).
///
/// Errors: `Format` when the parts hold another number of bytes;
/// `OutOfMemory`.
fn stitch(
    name: &str,
    size: &[i64],
    dtype: crate::dtype::DType,
    chunks: &[Chunk],
    parts: &[Tensor],
) -> Result<Tensor> {
    let bytes = |sizes: &[i64]| {
        sizes
            .iter()
            .try_fold(dtype.itemsize() as u64, |n, &s| n.checked_mul(s as u64))
    };
    let held = parts
        .iter()
        .try_fold(0u64, |n, p| n.checked_add(p.storage().nbytes() as u64));
    let needed = bytes(size);
    crate::ensure!(
        needed.is_some() && held == needed,
        Format,
        "the DCP checkpoint: tensor '{name}' of size {size:?} ({}) needs {} bytes, but its {} \
         chunks hold {} bytes: expected chunks holding its elements once",
        dtype.name(),
        needed.map_or("more than 2^64".into(), |n| n.to_string()),
        parts.len(),
        held.map_or("more than 2^64".into(), |n| n.to_string())
    );
    let full = Tensor::empty(size, dtype, Device::CPU)?;
    for (c, part) in chunks.iter().zip(parts) {
        let mut dst = full.clone();
        for (d, (&o, &s)) in c.offsets.iter().zip(&c.sizes).enumerate() {
            dst = dst.narrow(d as i64, o, s)?;
        }
        crate::kernels::copy_(&dst, part)?;
    }
    Ok(full)
}

/// The bytes of item `name` at `at` in its file's `storage`, checked to
/// lie inside the file.
fn item_bytes<'s>(storage: &'s Storage, at: &Location, name: &str) -> Result<&'s [u8]> {
    let all = super::storage_bytes(storage)?;
    check_inside(at, all.len() as u64, name)?;
    Ok(&all[at.offset as usize..(at.offset + at.length) as usize])
}

/// The tensor of chunk `c` of tensor `name`: the torch.save archive at
/// its location, viewing the file's storage where aligned; checked to be
/// one tensor of `dtype` and the chunk's sizes, compact: dense, not
/// overlapping itself, over a storage of exactly its bytes.
fn chunk_tensor(
    storage: &Storage,
    c: &Chunk,
    name: &str,
    dtype: crate::dtype::DType,
    flags: LoadFlags,
) -> Result<Tensor> {
    let bytes = item_bytes(storage, &c.at, name)?;
    let what = || {
        format!(
            "the DCP checkpoint: tensor '{name}', chunk at offsets {:?} ('{}' at {})",
            c.offsets, c.at.file, c.at.offset
        )
    };
    let source = Source {
        bytes,
        backing: Some(storage),
        direct: false,
        lazy: None,
    };
    let flags = LoadFlags {
        skip_unknown: false,
        ..flags
    };
    let d = torch_read::read(&source, flags).map_err(|e| {
        e.context(format!(
            "{}: expected the chunk as torch.save writes a tensor",
            what()
        ))
    })?;
    let t = d.get("tensor").filter(|_| d.len() == 1).ok_or_else(|| {
        crate::err!(
            Format,
            "{}: the archive holds {} tensors ({:?}): expected one tensor",
            what(),
            d.len(),
            d.iter().map(|(n, _)| n).collect::<Vec<_>>()
        )
    })?;
    crate::ensure!(
        t.dtype() == dtype && t.sizes() == c.sizes.as_slice(),
        Format,
        "{}: the archive holds a {} tensor of sizes {:?}: expected {} of sizes {:?} as the \
         metadata says",
        what(),
        t.dtype().name(),
        t.sizes(),
        dtype.name(),
        c.sizes
    );
    // torch's writer saves a chunk compact (its storage cloned unless it
    // has numel elements): a stride-0 expand or a view of a larger
    // storage would let a few bytes stand for a chunk of any size.
    let nbytes = (t.numel().max(0) as u64).checked_mul(t.itemsize() as u64);
    crate::ensure!(
        t.is_non_overlapping_and_dense() && nbytes == Some(t.storage().nbytes() as u64),
        Format,
        "{}: the archive's tensor has strides {:?} at offset {} over a storage of {} bytes: \
         expected a compact tensor whose storage holds its {} elements once ({} bytes, no \
         stride-0 or overlapping dims)",
        what(),
        t.strides(),
        t.storage_offset(),
        t.storage().nbytes(),
        t.numel(),
        nbytes.map_or("more than 2^64".into(), |n| n.to_string())
    );
    Ok(t.clone())
}

/// A writer whose positions start at `base` of the one it wraps, so that
/// a zip archive written in the middle of a file holds offsets from its
/// own first byte (as torch.save's do: DCP reads each as a file of its
/// own).
struct OffsetWriter<W> {
    inner: W,
    base: u64,
}

impl<W: Write> Write for OffsetWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Seek> Seek for OffsetWriter<W> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let to = match pos {
            SeekFrom::Start(n) => SeekFrom::Start(self.base + n),
            other => other,
        };
        let at = self.inner.seek(to)?;
        at.checked_sub(self.base).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a seek before the archive",
            )
        })
    }
}

/// `t` with its own storage of exactly its bytes, row-major (itself when
/// it already is): what torch's DCP writer saves for a chunk.
fn compact(t: &Tensor) -> Result<Tensor> {
    let bytes = (t.numel().max(0) as usize) * t.itemsize();
    if t.is_contiguous(MemoryFormat::Contiguous)
        && t.storage_offset() == 0
        && t.storage().nbytes() == bytes
    {
        return Ok(t.clone());
    }
    t.clone_tensor(MemoryFormat::Contiguous)
}

/// Saves `dict` as a DCP checkpoint in the directory `dir`.
fn save(dict: &TensorDict, dir: &Path, flags: SaveFlags) -> Result<()> {
    crate::ensure!(
        !dict.has_saved_metadata(),
        InvalidArgument,
        "a DCP checkpoint holds tensors and no string metadata: the dict has {} metadata keys or values \
         (save them in safetensors, torch or GGUF)",
        dict.saved_metadata_count()
    );
    for (name, t) in dict.iter() {
        torch_write::check_saveable(name, t)?;
        crate::ensure!(
            dtypes::torch_names(t.dtype()).is_some(),
            DType,
            "tensor '{name}' has dtype {}, which torch cannot save",
            t.dtype().name()
        );
    }
    let accept = |n: &str| n == METADATA || n.ends_with(".distcp");
    crate::files::replace_dir(dir, flags.sync, "the DCP checkpoint", accept, |temp| {
        let path = temp.join(DATA_FILE);
        let file = std::fs::File::create(&path)
            .map_err(|e| super::io_err(&dir.join(DATA_FILE), "cannot create", e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut entries = Vec::with_capacity(dict.len());
        let mut pos = 0u64;
        for (name, t) in dict.iter() {
            let t = compact(t)?;
            let mut one = TensorDict::new();
            one.set("tensor", t.clone())?;
            torch_write::write_lone(
                &one,
                "archive",
                OffsetWriter {
                    inner: &mut out,
                    base: pos,
                },
            )
            .map_err(|e| e.context(format!("tensor '{name}'")))?;
            let end = out
                .stream_position()
                .map_err(|e| super::io_err(&dir.join(DATA_FILE), "cannot write", e))?;
            let at = Location {
                file: DATA_FILE.to_owned(),
                offset: pos,
                length: end - pos,
            };
            pos = end;
            let chunk = Chunk {
                offsets: vec![0; t.sizes().len()],
                sizes: t.sizes().to_vec(),
                at,
            };
            entries.push((
                name.to_owned(),
                Item::Tensor {
                    dtype: t.dtype(),
                    size: t.sizes().to_vec(),
                    chunks: vec![chunk],
                },
            ));
        }
        out.flush()
            .map_err(|e| super::io_err(&dir.join(DATA_FILE), "cannot write", e))?;
        let pkl = super::dcp_metadata_write::write(&Metadata { entries })?;
        std::fs::write(temp.join(METADATA), pkl)
            .map_err(|e| super::io_err(&dir.join(METADATA), "cannot write", e))?;
        Ok(())
    })
}
