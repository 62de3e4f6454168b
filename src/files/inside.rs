//! [`open_inside`]: opening a file named by another file (a shard index's
//! weight map, a DCP checkpoint's metadata), which must stay inside the
//! directories the caller allows.

use super::open_regular;
use crate::error::Result;
use std::fs::{File, OpenOptions};
use std::path::{Component, Path, PathBuf};

/// Checks that `name`, a path read from `source` (a file the caller does
/// not trust), is relative and goes down only: not empty, not absolute,
/// no `..`, no NUL byte. Errors: `Format`, naming the path and `source`.
pub(crate) fn check_relative<'a>(name: &'a str, source: &str) -> Result<&'a Path> {
    crate::ensure!(
        !name.is_empty(),
        Format,
        "{source} names a file by the empty path: expected a file name"
    );
    crate::ensure!(
        !name.contains('\0'),
        Format,
        "{source} names the file {name:?}, which holds a NUL byte: expected a file name"
    );
    let path = Path::new(name);
    for c in path.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => crate::bail!(
                Format,
                "{source} names the file '{name}', which goes up with '..': expected a path \
                 inside its directory"
            ),
            Component::RootDir | Component::Prefix(_) => crate::bail!(
                Format,
                "{source} names the file '{name}' by an absolute path: expected a path relative \
                 to its directory"
            ),
        }
    }
    Ok(path)
}

/// The directories `dir` stands for: itself as named and as its links
/// resolve (what [`open_inside`] takes as `roots`).
pub(crate) fn canonical_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(dir).map_err(|e| {
        crate::err!(
            Io,
            "cannot open the directory '{}': {}",
            dir.display(),
            super::reason(&e)
        )
    })
}

/// Opens the regular file `name` (checked by [`check_relative`]) of `dir`
/// for reading, without blocking (as [`open_regular`]). Symbolic links are
/// followed, but the file they reach must lie inside one of `roots`
/// (canonical directories, [`canonical_dir`]): a link out of them is
/// refused (`Format`, naming the file, where it leads and `source`).
/// The check is made on the file opened (its path as the kernel knows it,
/// where /proc tells it), so a link swapped in meanwhile is caught too.
/// Returns the file and its canonical path.
pub(crate) fn open_inside(
    dir: &Path,
    name: &str,
    roots: &[PathBuf],
    source: &str,
) -> Result<(File, PathBuf)> {
    let rel = check_relative(name, source)?;
    let joined = dir.join(rel);
    let real = std::fs::canonicalize(&joined).map_err(|e| {
        crate::err!(
            Io,
            "cannot open '{}' (named by {source}): {}",
            joined.display(),
            super::reason(&e)
        )
    })?;
    let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    let outside = |p: &Path| {
        crate::err!(
            Format,
            "'{name}' (named by {source}) leads to '{}', outside '{}': expected a file inside \
             the directory (a symbolic link out of it is refused)",
            p.display(),
            dir.display()
        )
    };
    if !inside(&real) {
        return Err(outside(&real));
    }
    let file = open_regular(&real, OpenOptions::new().read(true), "cannot open")?;
    if let Some(opened) = crate::platform::fs::opened_path(&file) {
        if !inside(&opened) {
            return Err(outside(&opened));
        }
    }
    Ok((file, real))
}
