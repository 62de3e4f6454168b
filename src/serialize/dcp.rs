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

/// The metadata file's name in the directory.
const METADATA: &str = ".metadata";
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
    let mut files: Vec<String> = Vec::new();
    let mut add = |at: &Location| {
        if !files.contains(&at.file) {
            files.push(at.file.clone());
        }
    };
    for (_, item) in &meta.entries {
        match item {
            Item::Bytes(at) => add(at),
            Item::Tensor { chunks, .. } => chunks.iter().for_each(|c| add(&c.at)),
        }
    }
    let what = format!("{source}'s metadata");
    let storages = shard_files::load_files(dir, &roots, &files, &what, flags)?;
    let storage_of = |at: &Location| {
        let i = files
            .iter()
            .position(|f| *f == at.file)
            .expect("collected above");
        &storages[i]
    };
    let mut dict = TensorDict::new();
    let mut skipped = Vec::new();
    for (name, item) in &meta.entries {
        match item {
            Item::Bytes(at) => {
                item_bytes(storage_of(at), at, name)?;
                skipped.push(name.clone());
            }
            Item::Tensor {
                dtype,
                size,
                chunks,
            } => {
                let whole = |c: &Chunk| c.offsets.iter().all(|&o| o == 0) && c.sizes == *size;
                let t = match chunks.as_slice() {
                    [c] if whole(c) => chunk_tensor(storage_of(&c.at), c, name, *dtype, flags)?,
                    _ => {
                        let full = Tensor::empty(size, *dtype, Device::CPU)?;
                        for c in chunks {
                            let part = chunk_tensor(storage_of(&c.at), c, name, *dtype, flags)?;
                            let mut dst = full.clone();
                            for (d, (&o, &s)) in c.offsets.iter().zip(&c.sizes).enumerate() {
                                dst = dst.narrow(d as i64, o, s)?;
                            }
                            crate::kernels::copy_(&dst, &part)?;
                        }
                        full
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

/// The bytes of item `name` at `at` in its file's `storage`, checked to
/// lie inside the file.
fn item_bytes<'s>(storage: &'s Storage, at: &Location, name: &str) -> Result<&'s [u8]> {
    let all = super::storage_bytes(storage)?;
    let end = at.offset.checked_add(at.length);
    crate::ensure!(
        end.is_some_and(|e| e <= all.len() as u64),
        Format,
        "the DCP checkpoint: '{name}': its bytes at {} (+{}) run past the end of '{}' ({} \
         bytes)",
        at.offset,
        at.length,
        at.file,
        all.len()
    );
    Ok(&all[at.offset as usize..(at.offset + at.length) as usize])
}

/// The tensor of chunk `c` of tensor `name`: the torch.save archive at
/// its location, viewing the file's storage where aligned; checked to be
/// one tensor of `dtype` and the chunk's sizes.
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
        dict.metadata_iter().next().is_none(),
        InvalidArgument,
        "a DCP checkpoint holds tensors and no string metadata: the dict has {} metadata keys \
         (save metadata in safetensors, torch or GGUF)",
        dict.metadata_iter().count()
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
        let pkl = dcp_metadata::write(&Metadata { entries })?;
        std::fs::write(temp.join(METADATA), pkl)
            .map_err(|e| super::io_err(&dir.join(METADATA), "cannot write", e))?;
        Ok(())
    })
}
