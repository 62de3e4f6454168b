//! [`replace_dir`]: atomic replacement of a destination directory (a new
//! directory beside it, filled, then swapped with it in one rename), and
//! [`write_beside`]: several new files put into a directory together,
//! each renamed over its name only once all are written.

use super::replace::TEMP_MARK;
use super::{kill_point, reason};
use crate::error::Result;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the temporary directories of this process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Removes a temporary directory (and what it holds) unless taken out.
struct RemoveDirOnDrop(Option<PathBuf>);

impl Drop for RemoveDirOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// The directory holding `path` ("." for a bare name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new directory `.NAME.tsr-tmp-PID-dN` beside `dest`, made exclusively.
fn create_temp_dir(dest: &Path) -> std::io::Result<PathBuf> {
    let name = dest.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut temp_name = OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!("{TEMP_MARK}{}-d{n}", std::process::id()));
        let temp = dir_of(dest).join(temp_name);
        match std::fs::create_dir(&temp) {
            Ok(()) => return Ok(temp),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("16 tries"))
}

/// fsyncs every regular file directly in `dir`, then `dir` itself.
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            crate::platform::fs::sync_file(&entry.path())?;
        }
    }
    sync_dir_itself(dir)
}

fn sync_dir_itself(dir: &Path) -> std::io::Result<()> {
    crate::platform::fs::sync_dir(dir)
}

/// Swaps the two paths in one step (Linux's renameat2 RENAME_EXCHANGE;
/// elsewhere an error that `exchange_unsupported` recognises).
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    crate::platform::fs::exchange(a, b)
}

/// Replaces the directory at `path` with one `write` fills: `write` gets
/// a new empty directory beside the destination (`.NAME.tsr-tmp-PID-dN`)
/// and writes its files there; once it returns Ok, the new directory takes
/// the destination's name in one rename (when a directory is there, the
/// two are exchanged atomically, renameat2's RENAME_EXCHANGE, and the old
/// one is removed after; a file system without it: the old directory is
/// renamed aside first and back if the second rename fails). With `sync`,
/// every file and the new directory are fsynced before the swap, and the
/// parent after.
///
/// A directory already at `path` is replaced only when every entry in it
/// is a regular file (not a link, directory or special file, whatever its
/// name) that `replaceable(name)` accepts (a checkpoint of the same kind,
/// or nothing): anything else is refused (Io) and left alone, as are a
/// symbolic link, a file or a special file at `path`. On any error the
/// new directory is removed and the destination is untouched. `what`
/// names the content in messages ("the DCP checkpoint").
pub(crate) fn replace_dir(
    path: &Path,
    sync: bool,
    what: &str,
    replaceable: impl Fn(&str) -> bool,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let shown = path.display();
    let existing = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let entries = std::fs::read_dir(path).map_err(|e| {
                crate::err!(Io, "cannot read the directory '{shown}': {}", reason(&e))
            })?;
            for entry in entries {
                let entry = entry.map_err(|e| {
                    crate::err!(Io, "cannot read the directory '{shown}': {}", reason(&e))
                })?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                crate::ensure!(
                    replaceable(&name),
                    Io,
                    "cannot write {what} to '{shown}': the directory holds '{name}', which is \
                     not part of {what}: expected a new path, an empty directory or {what} to \
                     replace (it is left as it is)"
                );
                // A name alone does not make a file the checkpoint's own: a
                // directory `.metadata` (an Eclipse workspace's) or a link
                // named like one is the user's.
                let kind = entry.file_type().map_err(|e| {
                    crate::err!(Io, "cannot read the directory '{shown}': {}", reason(&e))
                })?;
                crate::ensure!(
                    kind.is_file(),
                    Io,
                    "cannot write {what} to '{shown}': the directory holds '{name}', which is {}, \
                     not a regular file of {what}: expected a new path, an empty directory or \
                     {what} to replace (it is left as it is)",
                    super::kind_name(kind)
                );
            }
            true
        }
        Ok(m) => crate::bail!(
            Io,
            "cannot write {what} to '{shown}': it is {}, not a directory: expected a directory \
             or a new path (it is left as it is)",
            super::kind_name(m.file_type())
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => crate::bail!(Io, "cannot write {what} to '{shown}': {}", reason(&e)),
    };
    let temp = create_temp_dir(path).map_err(|e| {
        crate::err!(
            Io,
            "cannot create a new directory beside '{shown}' for {what}: {}",
            reason(&e)
        )
    })?;
    let mut guard = RemoveDirOnDrop(Some(temp.clone()));
    write(&temp)?;
    if sync {
        sync_tree(&temp).map_err(|e| {
            crate::err!(
                Io,
                "cannot write {what} to '{shown}': fsync failed: {}",
                reason(&e)
            )
        })?;
    }
    let swapped = |e: std::io::Error| {
        crate::err!(
            Io,
            "cannot write {what} to '{shown}': renaming the new directory over it failed: {}",
            reason(&e)
        )
    };
    if !existing {
        std::fs::rename(&temp, path).map_err(swapped)?;
        guard.0 = None;
    } else {
        let swap = if kill_point::exchange_missing() {
            Err(crate::platform::fs::exchange_missing())
        } else {
            exchange(&temp, path)
        };
        match swap {
            // The old checkpoint is now at `temp`: the guard removes it.
            Ok(()) => {}
            Err(e) if crate::platform::fs::exchange_unsupported(&e) => {
                let aside = create_temp_dir(path).map_err(swapped)?;
                std::fs::remove_dir(&aside).map_err(swapped)?;
                std::fs::rename(path, &aside).map_err(swapped)?;
                if kill_point::reached() {
                    guard.0 = None;
                    return Err(kill_point::killed("renaming the old directory aside"));
                }
                if let Err(e) = std::fs::rename(&temp, path) {
                    let _ = std::fs::rename(&aside, path);
                    return Err(swapped(e));
                }
                guard.0 = Some(aside);
            }
            Err(e) => return Err(swapped(e)),
        }
    }
    if kill_point::reached() {
        guard.0 = None;
        return Err(kill_point::killed("the swap"));
    }
    drop(guard);
    if sync {
        sync_dir_itself(dir_of(path)).map_err(|e| {
            crate::err!(
                Io,
                "{what} replaced '{shown}', but fsync of its directory failed: {}",
                reason(&e)
            )
        })?;
    }
    Ok(())
}

/// Puts several files into the existing directory `dir` together:
/// `write` gets a new empty directory inside `dir`
/// (`.shards.tsr-tmp-PID-dN`) and writes the files there under their final
/// names; once it returns Ok, each is renamed into `dir` over any file of
/// that name, in the order of `names` (the last one, an index, makes the
/// set visible). On an error before the renames nothing in `dir` has
/// changed; the temporary directory is always removed. With `sync`,
/// every file is fsynced before the renames and `dir` after. A name in
/// `dir` that is a directory or a special file is refused before anything
/// is written.
pub(crate) fn write_beside(
    dir: &Path,
    names: &[String],
    sync: bool,
    what: &str,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    for name in names {
        let dest = dir.join(name);
        if let Ok(m) = std::fs::metadata(&dest) {
            crate::ensure!(
                m.is_file(),
                Io,
                "cannot write {what} to '{}': it is {}, not a regular file: expected a regular \
                 file or a new path (it is left as it is)",
                dest.display(),
                super::kind_name(m.file_type())
            );
        }
    }
    let temp = create_temp_dir(&dir.join("shards")).map_err(|e| {
        crate::err!(
            Io,
            "cannot create a new directory in '{}' for {what}: {}",
            dir.display(),
            reason(&e)
        )
    })?;
    let mut guard = RemoveDirOnDrop(Some(temp.clone()));
    write(&temp)?;
    if sync {
        sync_tree(&temp).map_err(|e| {
            crate::err!(
                Io,
                "cannot write {what} to '{}': fsync failed: {}",
                dir.display(),
                reason(&e)
            )
        })?;
    }
    for name in names {
        let dest = dir.join(name);
        crate::platform::fs::replace_file(&temp.join(name), &dest).map_err(|e| {
            crate::err!(
                Io,
                "cannot write {what} to '{}': renaming the new file over it failed: {}",
                dest.display(),
                reason(&e)
            )
        })?;
        if kill_point::reached() {
            guard.0 = None;
            return Err(kill_point::killed(&format!("renaming '{name}'")));
        }
    }
    if sync {
        sync_dir_itself(dir).map_err(|e| {
            crate::err!(
                Io,
                "{what} written to '{}', but fsync of the directory failed: {}",
                dir.display(),
                reason(&e)
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("tsr-replace-dir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        p
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn fill<'a>(files: &'a [(&'a str, &'a str)]) -> impl FnOnce(&Path) -> Result<()> + 'a {
        move |d: &Path| {
            for (n, text) in files {
                std::fs::write(d.join(n), text).unwrap();
            }
            Ok(())
        }
    }

    #[test]
    fn a_directory_is_made_then_swapped_whole() {
        let root = scratch("swap");
        let dest = root.join("ckpt");
        let ok = |n: &str| n.ends_with(".part");
        replace_dir(
            &dest,
            false,
            "the test",
            ok,
            fill(&[("a.part", "1"), ("b.part", "1")]),
        )
        .unwrap();
        assert_eq!(listing(&dest), ["a.part", "b.part"]);
        replace_dir(&dest, true, "the test", ok, fill(&[("c.part", "2")])).unwrap();
        assert_eq!(listing(&dest), ["c.part"]);
        // Nothing left beside it.
        assert_eq!(listing(&root), ["ckpt"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_the_old_directory() {
        let root = scratch("fail");
        let dest = root.join("ckpt");
        let ok = |n: &str| n.ends_with(".part");
        replace_dir(&dest, false, "the test", ok, fill(&[("a.part", "old")])).unwrap();
        let err = replace_dir(&dest, false, "the test", ok, |d: &Path| {
            std::fs::write(d.join("b.part"), "half").unwrap();
            crate::bail!(Io, "the disk filled up")
        })
        .unwrap_err();
        assert!(err.to_string().contains("filled up"), "{err}");
        assert_eq!(listing(&dest), ["a.part"]);
        assert_eq!(std::fs::read_to_string(dest.join("a.part")).unwrap(), "old");
        assert_eq!(listing(&root), ["ckpt"]);
        // A directory holding anything else is not replaced.
        std::fs::write(dest.join("notes.txt"), "mine").unwrap();
        let err = replace_dir(&dest, false, "the test", ok, fill(&[])).unwrap_err();
        assert!(err.to_string().contains("'notes.txt'"), "{err}");
        assert_eq!(listing(&dest), ["a.part", "notes.txt"]);
        // Nor a file.
        let file = root.join("file");
        std::fs::write(&file, "x").unwrap();
        let err = replace_dir(&file, false, "the test", ok, fill(&[])).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn files_written_beside_appear_together_or_not_at_all() {
        let dir = scratch("beside");
        std::fs::write(dir.join("keep"), "k").unwrap();
        let names = vec!["s1".to_owned(), "index".to_owned()];
        let err = write_beside(&dir, &names, false, "the test", |t: &Path| {
            std::fs::write(t.join("s1"), "1").unwrap();
            crate::bail!(Io, "the second shard failed")
        })
        .unwrap_err();
        assert!(err.to_string().contains("second shard"), "{err}");
        assert_eq!(listing(&dir), ["keep"]);
        write_beside(
            &dir,
            &names,
            true,
            "the test",
            fill(&[("s1", "1"), ("index", "i")]),
        )
        .unwrap();
        assert_eq!(listing(&dir), ["index", "keep", "s1"]);
        // A name that is a directory in `dir` is refused before writing.
        std::fs::create_dir(dir.join("sub")).unwrap();
        let err =
            write_beside(&dir, &["sub".to_owned()], false, "the test", fill(&[])).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
