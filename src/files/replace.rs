//! [`replace_file`]: atomic replacement of a destination file (a new file
//! beside it, renamed over it once complete).

use super::{kind_name, reason};
use crate::error::Result;
use crate::platform::fs as os;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What every temporary file's name holds: `.NAME.tsr-tmp-PID-N` beside
/// the destination NAME, or `.tsr-tmp-PID-N` where the file system
/// refuses that name as too long. A process killed while saving leaves
/// one behind.
pub(super) const TEMP_MARK: &str = ".tsr-tmp-";

/// Symbolic links followed at most (Linux's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// Numbers the temporary files of this process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces the file at `path` with what `write` writes: `write` gets a
/// new empty file beside the destination (same directory, a unique name,
/// created exclusively with mode 0666 less the umask, or the destination's
/// permission bits when it exists) and its path; once it returns Ok, the
/// file is renamed over the destination. With `sync`, the file is fsynced
/// before the rename and its directory after.
///
/// A symbolic link at `path` is followed (the link stays, its target is
/// replaced; a dangling link's target is created). A destination that
/// exists and is not a regular file (a FIFO, a device, a directory, a
/// socket) is refused with an Io error before anything is opened or
/// created, as is one the caller may not open for writing. On any
/// error the new file is removed and the destination is untouched. `what`
/// names the file in messages ("the memory snapshot", "the tensors").
pub(crate) fn replace_file(
    path: &Path,
    sync: bool,
    what: &str,
    write: impl FnOnce(&mut File, &Path) -> Result<()>,
) -> Result<()> {
    let shown = path.display();
    let dest = resolve(path)?;
    let existing = match std::fs::symlink_metadata(&dest) {
        Ok(m) => {
            crate::ensure!(
                m.is_file(),
                Io,
                "cannot write {what} to '{shown}': it is {}, not a regular file: expected a \
                 regular file or a new path (it is left as it is)",
                kind_name(m.file_type())
            );
            // The caller must be allowed to write the file itself (a
            // read-only file is not replaced), as when it was truncated.
            let prefix = format!("cannot write {what} to");
            drop(super::open_regular(
                &dest,
                OpenOptions::new().write(true),
                &prefix,
            )?);
            Some(os::permission_bits(&m))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => crate::bail!(Io, "cannot write {what} to '{shown}': {}", reason(&e)),
    };
    let (mut file, temp) = create_temp(&dest).map_err(|e| {
        let dir = dest.parent().filter(|d| !d.as_os_str().is_empty());
        match dir {
            Some(dir) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => {
                crate::err!(
                    Io,
                    "cannot write {what} to '{}': the directory '{}' does not exist",
                    dest.display(),
                    dir.display()
                )
            }
            _ => crate::err!(
                Io,
                "cannot write {what} to '{}': cannot create a file in its directory: {}",
                dest.display(),
                reason(&e)
            ),
        }
    })?;
    let mut guard = RemoveOnDrop(Some(temp));
    let temp = guard.0.as_deref().expect("set above");
    if let Some(mode) = existing {
        os::set_permission_bits(&file, mode).map_err(|e| {
            crate::err!(
                Io,
                "cannot set the mode of '{}': {}",
                temp.display(),
                reason(&e)
            )
        })?;
    }
    write(&mut file, temp)?;
    if sync {
        file.sync_all().map_err(|e| {
            crate::err!(
                Io,
                "cannot write {what} to '{shown}': fsync failed: {}",
                reason(&e)
            )
        })?;
    }
    drop(file);
    os::replace_file(temp, &dest).map_err(|e| {
        crate::err!(
            Io,
            "cannot write {what} to '{shown}': renaming the new file over it failed: {}",
            reason(&e)
        )
    })?;
    guard.0 = None;
    if sync {
        sync_dir(&dest).map_err(|e| {
            crate::err!(
                Io,
                "{what} replaced '{shown}', but fsync of its directory failed: {}",
                reason(&e)
            )
        })?;
    }
    Ok(())
}

/// Removes the temporary file unless taken out.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `path` with every symbolic link in its last component followed.
fn resolve(path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).map_err(|e| {
                    crate::err!(Io, "cannot read the link '{}': {}", p.display(), reason(&e))
                })?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    crate::bail!(
        Io,
        "'{}' is a chain of more than {MAX_LINKS} symbolic links: expected a file",
        path.display()
    )
}

/// The directory holding `path` ("." for a bare name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new file `.NAME.tsr-tmp-PID-N` beside `dest`, created exclusively;
/// `.tsr-tmp-PID-N` once the file system refuses the long name as too
/// long (a valid destination name of 230-255 bytes passes NAME_MAX with
/// the mark added; some file systems take fewer bytes).
fn create_temp(dest: &Path) -> std::io::Result<(File, PathBuf)> {
    let name = dest.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut options = OpenOptions::new();
    options.write(true).read(true).create_new(true);
    os::create_mode(&mut options, 0o666);
    let mut long = true;
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mark = format!("{TEMP_MARK}{}-{n}", std::process::id());
        let mut temp_name = std::ffi::OsString::new();
        if long {
            temp_name.push(".");
            temp_name.push(name);
        }
        temp_name.push(&mark);
        let temp = dir_of(dest).join(temp_name);
        match options.open(&temp) {
            Ok(f) => return Ok((f, temp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) if os::is_name_too_long(&e) && long => {
                long = false;
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("16 tries"))
}

/// Saves smaller than this reserve nothing (one syscall saved).
const RESERVE_MIN: u64 = 1 << 20;

/// Reserves `bytes` of disk for `file` (new and empty) before it is
/// written (Linux; elsewhere nothing is reserved, platform::fs):
/// fallocate with FALLOC_FL_KEEP_SIZE (the size stays 0, so
/// reserving less than is then written, as callers do, leaves nothing
/// past the end). The writes then fill blocks already allocated: ext4's
/// delayed allocation reserves nothing per page, and its flush on the
/// rename over an existing file (auto_da_alloc) has no blocks left to
/// allocate. A full disk is an error here, before anything is written;
/// a file system without fallocate (or any other refusal) reserves
/// nothing and the save goes on.
pub(crate) fn reserve(file: &File, bytes: u64) -> std::io::Result<()> {
    if bytes < RESERVE_MIN || bytes > i64::MAX as u64 {
        return Ok(());
    }
    os::preallocate(file, bytes)
}

/// fsyncs the directory holding `path`.
fn sync_dir(path: &Path) -> std::io::Result<()> {
    os::sync_dir(dir_of(path))
}
