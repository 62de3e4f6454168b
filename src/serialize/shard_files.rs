//! The files of a checkpoint in several files (a shard index's shards, a
//! DCP checkpoint's `.distcp` files): opened inside the checkpoint's
//! directory only (`files::open_inside`) and loaded together, read into
//! fresh memory in parallel or mapped.

use super::read_file;
use crate::device::Device;
use crate::error::Result;
use crate::storage::file::FileMode;
use crate::storage::Storage;
use std::path::{Path, PathBuf};

/// The canonical directories a checkpoint's files may lie in: `dir`
/// itself, and the directory `named_by` (the index or metadata file)
/// resolves into when it is a symbolic link (a Hugging Face cache
/// snapshot links each file to its blob).
pub(crate) fn roots(dir: &Path, named_by: &Path) -> Result<Vec<PathBuf>> {
    let mut roots = vec![crate::files::canonical_dir(dir)?];
    if let Some(parent) = std::fs::canonicalize(named_by)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        if !roots.contains(&parent) {
            roots.push(parent);
        }
    }
    Ok(roots)
}

/// Each file of `names` (paths relative to `dir`, named by `source`),
/// opened inside `roots` and loaded into a storage, each file once (see
/// [`open_files`]). Mapped with `flags.mmap` (privately, or read-only
/// with `flags.read_only`), else read into fresh memory, the parts of all
/// files read in parallel on the parallel-loop threads.
pub(crate) fn load_files(
    dir: &Path,
    roots: &[PathBuf],
    names: &[String],
    source: &str,
    flags: super::LoadFlags,
) -> Result<Vec<Storage>> {
    let opened = open_files(dir, roots, names, source)?;
    if !flags.mmap {
        return read_file::read_opened(&opened);
    }
    opened
        .into_iter()
        .map(|(file, real)| {
            let len = file
                .metadata()
                .map_err(|e| super::io_err(&real, "cannot stat", e))?
                .len();
            drop(file);
            if len == 0 {
                Storage::new(0, Device::CPU, true)
            } else {
                let mode = if flags.read_only {
                    FileMode::ReadOnly
                } else {
                    FileMode::Private
                };
                Storage::from_file(&real, mode, 0)
            }
        })
        .collect()
}

/// Each file of `names` (paths relative to `dir`, named by `source`),
/// opened inside `roots` with the path it resolved to, each file once:
/// two names of one file (`./a` beside `a`, a link, a hard link) are
/// refused (`Format`, naming both) before anything is read.
pub(crate) fn open_files(
    dir: &Path,
    roots: &[PathBuf],
    names: &[String],
    source: &str,
) -> Result<Vec<(std::fs::File, PathBuf)>> {
    let mut opened = Vec::with_capacity(names.len());
    // (device, inode) -> the first name of that file.
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    for name in names {
        let (file, real) = crate::files::open_inside(dir, name, roots, source)?;
        let m = file
            .metadata()
            .map_err(|e| super::io_err(&real, "cannot stat", e))?;
        let id = crate::platform::fs::identity(&file, &m)
            .map_err(|e| super::io_err(&real, "cannot stat", e))?;
        if let Some(first) = seen.insert(id, name) {
            crate::bail!(
                Format,
                "{source} names one file twice, as '{first}' and as '{name}' (both '{}'): \
                 expected each file under one name (two names of one file would load its bytes \
                 twice)",
                real.display()
            );
        }
        opened.push((file, real));
    }
    Ok(opened)
}
