//! [`verify`]: a file, or a checkpoint of several files: a Hugging Face shard index
//! and a DCP directory. Each is first loaded whole, mapped, with every
//! check its load makes (an index's tensors in the shards it names and
//! its `total_size`; DCP's chunks tiling each tensor, every item inside
//! its file); then every file it names is opened inside its directory
//! (`shard_files`, as the load opens them) and checked as `verify`
//! checks one file:
//!
//! - a shard: loaded with every check, each zip record's CRC-32 compared
//!   (a `.bin` shard is a torch archive), every tensor byte read;
//! - a `.distcp` file: each item's bytes that are a zip archive (a tensor
//!   chunk is a torch.save archive) have every record's CRC-32 compared;
//!   then every byte of every tensor of the whole checkpoint is read.
//!
//! Each file is reported with what was read from it.

use super::dcp_metadata::{self, Item, Location};
use super::verify::{
    check_record, check_tensors, skipped, verify_one, Loaded, Verified, VerifiedFile,
};
use super::{hf_shards, shard_files, Format, LoadFlags};
use crate::error::Result;
use std::io::Read;
use std::path::Path;

/// The metadata file of a DCP directory.
const METADATA: &str = ".metadata";

/// Verifies the file at `path` (module documentation), loaded with
/// `flags` (`mmap` is always on: a file larger than memory is verified
/// too); a shard index or a DCP checkpoint (its directory or its
/// `.metadata`) with every file it names. `progress(done, total)` is
/// called as bytes are read.
///
/// Errors: `Io` when the file cannot be opened or mapped; `Format` naming
/// what is wrong: the load's own errors, a record whose bytes do not match
/// its CRC-32 (`record 'archive/data/0' (entry 5): CRC-32 0x1234abcd of
/// its 4096 bytes, the archive says 0x0badf00d`) or that cannot be read,
/// a bool tensor holding another byte; for a checkpoint of several files,
/// its own load's errors and each file's, naming the file.
pub fn verify(
    path: &Path,
    flags: LoadFlags,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified> {
    if let Some(url) = super::remote::url_of(path) {
        // A URL: its objects copied to a temporary directory, verified
        // there (every byte is read anyway); messages name the URL.
        let (_tmp, local) = super::remote::download(url, Format::Auto)?;
        let shown = super::remote::shown(url);
        return verify(&local, flags, progress).map_err(|e| {
            let m = e.message().replace(&*local.to_string_lossy(), &shown);
            crate::error::Error::new(e.kind(), m)
        });
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return dcp(path, flags, progress);
    }
    let mapped = super::map_path(path, true)?;
    let bytes = super::storage_bytes(&mapped)?;
    if super::hf_shards::is_index(bytes) {
        return index(path, bytes, flags, progress);
    }
    if super::detect(bytes).is_ok_and(|f| f == Format::Dcp) {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        return dcp(dir, flags, progress);
    }
    verify_one(&mapped, flags, progress)
}

/// Mapped and read-only, as `verify` loads.
fn mapped(flags: LoadFlags) -> LoadFlags {
    LoadFlags {
        mmap: true,
        read_only: true,
        ..flags
    }
}

/// The directory a file of a checkpoint is in.
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The distinct storages of `dict`'s tensors.
fn storages(dict: &super::TensorDict) -> usize {
    let mut seen = std::collections::HashSet::new();
    for (_, t) in dict.iter() {
        seen.insert(crate::refcount::Ref::as_ptr(&t.storage().0) as usize);
    }
    seen.len()
}

/// Verifies the shard index at `path` (its bytes `bytes`) and every shard
/// it names.
pub(crate) fn index(
    path: &Path,
    bytes: &[u8],
    flags: LoadFlags,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified> {
    let flags = mapped(flags);
    let (format, whole) = super::load_as(path, Format::Auto, flags)?;
    let what = format!("the shard index '{}'", path.display());
    let index = hf_shards::parse_index(bytes, &what)?;
    let dir = dir_of(path);
    let roots = shard_files::roots(dir, path)?;
    let files = shard_files::load_files(dir, &roots, &index.files, &what, flags)?;
    let shard = |name: &str| format!("shard '{name}' of {what}");
    let mut loaded = Vec::with_capacity(files.len());
    for (name, storage) in index.files.iter().zip(&files) {
        loaded.push(Loaded::new(storage, flags).map_err(|e| e.context(shard(name)))?);
    }
    let total: u64 = loaded.iter().map(Loaded::total).sum();
    let mut done = 0u64;
    let mut checked = Vec::with_capacity(loaded.len());
    for (name, l) in index.files.iter().zip(&loaded) {
        let before = done;
        l.read_all(&mut |n| {
            done += n;
            progress(done, total)
        })
        .map_err(|e| e.context(shard(name)))?;
        checked.push(VerifiedFile {
            name: name.clone(),
            format: l.format,
            tensors: l.dict.len(),
            records: l.entries.len(),
            bytes_read: done - before,
        });
    }
    Ok(Verified {
        format,
        tensors: whole.len(),
        storages: storages(&whole),
        records: checked.iter().map(|f| f.records).sum(),
        bytes_read: done,
        skipped: skipped(&whole),
        files: checked,
    })
}

/// Verifies the DCP checkpoint in `dir` and every `.distcp` file its
/// metadata names.
pub(crate) fn dcp(
    dir: &Path,
    flags: LoadFlags,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Verified> {
    let flags = mapped(flags);
    let (format, whole) = super::load_as(dir, Format::Auto, flags)?;
    let source = format!("the DCP checkpoint '{}'", dir.display());
    let roots = shard_files::roots(dir, &dir.join(METADATA))?;
    let (mut file, real) = crate::files::open_inside(dir, METADATA, &roots, &source)?;
    let mut meta = Vec::new();
    file.read_to_end(&mut meta)
        .map_err(|e| super::io_err(&real, "cannot read", e))?;
    let meta = dcp_metadata::parse(&meta).map_err(|e| e.context(&source))?;
    // Per file, the items in it: (location, a tensor chunk).
    let mut names: Vec<String> = Vec::new();
    let mut items: Vec<Vec<(&Location, bool)>> = Vec::new();
    let mut located: Vec<(&Location, bool)> = Vec::new();
    for (_, item) in &meta.entries {
        match item {
            Item::Bytes(at) => located.push((at, false)),
            Item::Tensor { chunks, .. } => located.extend(chunks.iter().map(|c| (&c.at, true))),
        }
    }
    for (at, chunk) in located {
        let i = match names.iter().position(|n| *n == at.file) {
            Some(i) => i,
            None => {
                names.push(at.file.clone());
                items.push(Vec::new());
                names.len() - 1
            }
        };
        items[i].push((at, chunk));
    }
    let what = format!("{source}'s metadata");
    let files = shard_files::load_files(dir, &roots, &names, &what, flags)?;
    // Every item's records, found first (for the progress total).
    let mut archives = Vec::with_capacity(files.len());
    for ((name, storage), located) in names.iter().zip(&files).zip(&items) {
        let bytes = super::storage_bytes(storage)?;
        let mut found = Vec::new();
        for (at, chunk) in located {
            // In bounds: the load above checked every item.
            let range = usize::try_from(at.offset)
                .ok()
                .zip(usize::try_from(at.offset.saturating_add(at.length)).ok());
            let item = range.and_then(|(a, b)| bytes.get(a..b)).ok_or_else(|| {
                crate::err!(Format, "{source}: an item runs past the end of '{name}'")
            })?;
            if *chunk || item.starts_with(b"PK\x03\x04") {
                let entries = super::zip_index::entries(item).map_err(|e| {
                    e.context(format!(
                        "{source}: '{name}' at {} (+{})",
                        at.offset, at.length
                    ))
                })?;
                found.push((item, entries, *at));
            }
        }
        archives.push(found);
    }
    let total = archives
        .iter()
        .flatten()
        .flat_map(|(_, entries, _)| entries.iter().map(|e| e.packed))
        .sum::<u64>()
        .saturating_add(super::tensor_bytes(&whole));
    let mut done = 0u64;
    let mut checked = Vec::with_capacity(files.len());
    for ((name, found), located) in names.iter().zip(&archives).zip(&items) {
        let before = done;
        let mut records = 0;
        for (item, entries, at) in found {
            for e in entries {
                check_record(e, item, &mut |n| {
                    done += n;
                    progress(done, total)
                })
                .map_err(|e| {
                    e.context(format!(
                        "{source}: '{name}', the item at {} (+{})",
                        at.offset, at.length
                    ))
                })?;
            }
            records += entries.len();
        }
        checked.push(VerifiedFile {
            name: name.clone(),
            format: Format::Dcp,
            tensors: located.iter().filter(|(_, chunk)| *chunk).count(),
            records,
            bytes_read: done - before,
        });
    }
    let storages = check_tensors(&whole, &mut |n| {
        done += n;
        progress(done, total)
    })?;
    Ok(Verified {
        format,
        tensors: whole.len(),
        storages,
        records: checked.iter().map(|f| f.records).sum(),
        bytes_read: done,
        skipped: skipped(&whole),
        files: checked,
    })
}
