//! File-backed storages (torch.UntypedStorage.from_file, c10's
//! MapAllocator): a CPU storage over a memory mapping of a file.
//!
//! The mapping is the storage's [`DataPtr`]: its context is a boxed
//! [`FileMapping`] (the map, the open file and the path) and its deleter
//! unmaps and closes, so views, reference counts, weak references and
//! DLPack exports follow the usual model: the mapping lives while the
//! storage's data does, and is released on whichever thread drops the
//! last strong reference. No allocator is involved (no statistics).
//!
//! Modes (SEMANTICS.md, "Storages beyond process memory"):
//! - [`FileMode::Private`]: copy-on-write, writable, the file never
//!   changes; the file must hold at least `nbytes`.
//! - [`FileMode::Shared`]: writes reach the file (and every process that
//!   maps it); the file is created (mode 0600) or extended to `nbytes`.
//! - [`FileMode::ReadOnly`]: a read-only mapping and a read-only storage.
//!
//! `nbytes` 0 means the file's size. File storages are not resizable. A
//! file truncated by someone else below the mapped size makes accesses
//! past its end fault (SIGBUS), as with any mapping.

use super::{Storage, StorageImpl};
use crate::data_ptr::{DataPtr, DeleterFn};
use crate::device::Device;
use crate::error::Result;
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::ffi::{c_void, CStr, CString};
use std::fs::{File, OpenOptions};
use std::path::Path;

/// How a file is mapped (TSR_FILE_PRIVATE / SHARED / READ_ONLY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// Copy-on-write: writable, the file never changes.
    Private,
    /// Writes reach the file; created or extended to nbytes.
    Shared,
    /// A read-only mapping: a read-only storage.
    ReadOnly,
}

impl FileMode {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            FileMode::Private => "PRIVATE",
            FileMode::Shared => "SHARED",
            FileMode::ReadOnly => "READ_ONLY",
        }
    }
}

enum Map {
    ReadOnly(Mmap),
    Writable(MmapMut),
}

/// The context of a file storage's DataPtr: the mapping, the file it maps
/// (closed with it) and its path.
pub struct FileMapping {
    map: Map,
    /// The mapped file (mapped from its first byte), closed with the
    /// mapping.
    file: File,
    path: CString,
    mode: FileMode,
}

impl FileMapping {
    fn ptr(&self) -> *mut c_void {
        match &self.map {
            Map::ReadOnly(m) => m.as_ptr() as *mut c_void,
            Map::Writable(m) => m.as_ptr() as *mut c_void,
        }
    }

    /// The file behind a read-only mapping and the offset in it of the
    /// `len` bytes at `ptr` (which must lie in the mapping): bytes that
    /// are the file's own, page for page, so they can be copied from the
    /// file instead of from memory. None for a private or writable
    /// mapping (its pages may hold what the file does not) and for a
    /// range outside the mapping.
    pub(crate) fn read_only_extent(&self, ptr: *const u8, len: usize) -> Option<(&File, u64)> {
        let Map::ReadOnly(m) = &self.map else {
            return None;
        };
        let start = (ptr as usize).checked_sub(m.as_ptr() as usize)?;
        (start.checked_add(len)? <= m.len()).then_some((&self.file, start as u64))
    }

    /// The mode it was mapped with.
    pub fn mode(&self) -> FileMode {
        self.mode
    }

    /// The path it was opened with.
    pub fn path(&self) -> &CStr {
        &self.path
    }

    /// Writes dirty pages back to the file (msync); nothing for
    /// read-only and private mappings (a private mapping never reaches
    /// the file).
    pub fn flush(&self) -> Result<()> {
        match (&self.map, self.mode) {
            (Map::Writable(m), FileMode::Shared) => m.flush().map_err(|e| {
                crate::err!(Io, "msync of '{}' failed: {e}", self.path.to_string_lossy())
            }),
            _ => Ok(()),
        }
    }
}

/// The deleter of a file storage's DataPtr: unmaps and closes.
unsafe extern "C" fn release_mapping(ctx: *mut c_void) {
    // SAFETY: ctx is the Box<FileMapping> leaked by from_file; the DataPtr
    // calls its deleter once.
    drop(unsafe { Box::from_raw(ctx as *mut FileMapping) });
}

const RELEASE: DeleterFn = release_mapping;

fn io_err(what: &str, path: &Path, e: std::io::Error) -> crate::error::Error {
    crate::err!(
        Io,
        "cannot {what} '{}': {}",
        path.display(),
        crate::files::reason(&e)
    )
}

/// Removes what a failed SHARED open left: the file it created, or the
/// size it had before being extended.
struct Undo<'a> {
    path: &'a Path,
    created: bool,
    old_len: Option<(u64, &'a File)>,
}

impl Undo<'_> {
    fn disarm(&mut self) {
        self.created = false;
        self.old_len = None;
    }
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if self.created {
            let _ = std::fs::remove_file(self.path);
        } else if let Some((len, file)) = self.old_len {
            let _ = file.set_len(len);
        }
    }
}

/// `path` as a C string (what a file storage keeps for its filename);
/// InvalidArgument for a path with a NUL byte.
pub(crate) fn c_path(path: &Path) -> Result<CString> {
    CString::new(crate::platform::fs::path_bytes(path).into_owned()).map_err(|_| {
        crate::err!(
            InvalidArgument,
            "the path '{}' holds a NUL byte: expected a C string",
            path.display()
        )
    })
}

impl Storage {
    /// A CPU storage over a mapping of the file at `path` (see the module
    /// documentation for the modes); `nbytes` 0 maps the whole file.
    ///
    /// Errors (nothing is left behind: a file SHARED created is removed,
    /// one it extended gets its old size back): Io (the file cannot be
    /// opened, created, extended or mapped, or is not a regular file; the
    /// message names the path and the OS reason); InvalidArgument (nbytes
    /// larger than a PRIVATE or READ_ONLY file; nbytes above isize::MAX;
    /// a path with a NUL byte).
    pub fn from_file(path: &Path, mode: FileMode, nbytes: usize) -> Result<Storage> {
        let shown = path.display();
        crate::ensure!(
            nbytes <= isize::MAX as usize,
            InvalidArgument,
            "nbytes {nbytes} for '{shown}' is too large: a mapping holds at most {} bytes",
            isize::MAX
        );
        let cpath = c_path(path)?;
        let what = format!("cannot open ({} mode)", mode.name());
        let open = |options: &OpenOptions| crate::files::open_regular(path, options, &what);
        // SHARED: create the file only if it does not exist (so a failure
        // below removes exactly what this call created), else open it.
        // Every open refuses a FIFO, device or directory without blocking.
        let (file, created) = match mode {
            FileMode::Shared => {
                let mut options = OpenOptions::new();
                options.read(true).write(true);
                let mut create = options.clone();
                create.create_new(true);
                crate::platform::fs::create_mode(&mut create, 0o600);
                match open(&create) {
                    Ok(f) => (f, true),
                    Err(_) if path.exists() || path.is_symlink() => (open(&options)?, false),
                    Err(e) => return Err(e),
                }
            }
            _ => (open(OpenOptions::new().read(true))?, false),
        };
        let size = match file.metadata() {
            Ok(meta) => meta.len(),
            Err(e) => {
                if created {
                    let _ = std::fs::remove_file(path);
                }
                return Err(io_err("read the metadata of", path, e));
            }
        };
        Storage::map_opened(file, size, created, path, cpath, mode, nbytes)
    }

    /// [`Storage::from_file`] of a file already open (read-write for
    /// SHARED, else read-only; blocking) whose size is `size`: `created`
    /// says the open created it (removed again on failure). A loader
    /// that opened the file itself maps it without opening it again.
    pub(crate) fn map_opened(
        file: File,
        size: u64,
        created: bool,
        path: &Path,
        cpath: CString,
        mode: FileMode,
        nbytes: usize,
    ) -> Result<Storage> {
        let shown = path.display();
        let mut undo = Undo {
            path,
            created,
            old_len: None,
        };
        let len = if nbytes == 0 {
            usize::try_from(size)
                .ok()
                .filter(|&n| n <= isize::MAX as usize)
                .ok_or_else(|| {
                    crate::err!(
                        InvalidArgument,
                        "'{shown}' holds {size} bytes: too large to map"
                    )
                })?
        } else {
            nbytes
        };
        if (len as u64) > size {
            crate::ensure!(
                mode == FileMode::Shared,
                InvalidArgument,
                "nbytes {len} is larger than '{shown}' ({size} bytes): a {} mapping must lie \
                 inside the file (expected at most {size})",
                mode.name()
            );
            file.set_len(len as u64)
                .map_err(|e| io_err(&format!("extend to {len} bytes"), path, e))?;
            undo.old_len = Some((size, &file));
        }
        let mut options = MmapOptions::new();
        options.len(len);
        // memmap2's maps are unsafe because the file may change under the
        // mapping; here that is what a file storage is.
        let map = match mode {
            // SAFETY: the file is open and holds at least len bytes (a
            // read-only map of more is refused above). Changes to the file
            // by other processes show through; a truncation by someone
            // else is documented to fault.
            FileMode::ReadOnly => unsafe { options.map(&file) }.map(Map::ReadOnly),
            // SAFETY: the file is open and holds at least len bytes (a
            // private map of more is refused above); writes go to private
            // copies of the pages. Changes by other processes to pages not
            // yet written may show through; a truncation is documented to
            // fault.
            FileMode::Private => unsafe { options.map_copy(&file) }.map(Map::Writable),
            // SAFETY: the file is open and holds at least len bytes (set_len
            // extended it above when it was shorter). Changes to the file
            // by other processes show through, as a shared file storage
            // means; a truncation by someone else is documented to fault.
            FileMode::Shared => unsafe { options.map_mut(&file) }.map(Map::Writable),
        }
        .map_err(|e| io_err(&format!("map {len} bytes of"), path, e))?;
        undo.disarm();
        drop(undo);
        let mapping = Box::new(FileMapping {
            map,
            file,
            path: cpath,
            mode,
        });
        let data = mapping.ptr();
        let ctx = Box::into_raw(mapping) as *mut c_void;
        // SAFETY: release_mapping frees the box once, from any thread
        // (Mmap and File are Send); the mapping stays valid until then.
        let dp = unsafe { DataPtr::from_raw_parts(data, ctx, Some(RELEASE), Device::CPU) };
        let storage = Storage::from_data_ptr(dp, len);
        if mode == FileMode::ReadOnly {
            storage.make_read_only();
        }
        Ok(storage)
    }
}

impl StorageImpl {
    /// The file mapping behind the data, if the storage is file-backed.
    pub fn file_mapping(&self) -> Option<&FileMapping> {
        let ctx = self.data_ptr().cast_context(RELEASE)?;
        // SAFETY: a context whose deleter is release_mapping is a live
        // FileMapping owned by this storage's DataPtr, which outlives the
        // borrow of self.
        Some(unsafe { &*(ctx as *const FileMapping) })
    }

    /// The path of a SHARED file storage (torch: only shared file storages
    /// have a filename); None otherwise.
    pub fn filename(&self) -> Option<&CStr> {
        self.file_mapping()
            .filter(|m| m.mode == FileMode::Shared)
            .map(|m| m.path())
    }

    /// Writes a SHARED file storage's dirty pages to the file (msync);
    /// nothing for other storages.
    pub fn flush(&self) -> Result<()> {
        match self.file_mapping() {
            Some(m) => m.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("tessera-file-{}-{name}", std::process::id()));
        let mut f = File::create(&p).unwrap();
        f.write_all(bytes).unwrap();
        p
    }

    fn bytes_of(s: &Storage) -> Vec<u8> {
        // SAFETY: a CPU storage of nbytes bytes.
        unsafe { std::slice::from_raw_parts(s.data() as *const u8, s.nbytes()) }.to_vec()
    }

    fn write_at(s: &Storage, i: usize, b: u8) {
        assert!(i < s.nbytes());
        // SAFETY: i is inside the writable mapping.
        unsafe { *(s.data() as *mut u8).add(i) = b };
    }

    fn read_file(p: &Path) -> Vec<u8> {
        let mut v = Vec::new();
        File::open(p).unwrap().read_to_end(&mut v).unwrap();
        v
    }

    #[test]
    fn private_writes_stay_in_memory() {
        let p = temp("private", b"abcdefgh");
        let s = Storage::from_file(&p, FileMode::Private, 0).unwrap();
        assert_eq!(bytes_of(&s), b"abcdefgh");
        assert!(!s.is_read_only() && !s.resizable());
        assert!(s.filename().is_none());
        write_at(&s, 0, b'X');
        s.flush().unwrap();
        assert_eq!(bytes_of(&s)[0], b'X');
        drop(s);
        assert_eq!(read_file(&p), b"abcdefgh");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn shared_writes_reach_the_file_and_other_mappings() {
        let p = temp("shared", b"abcd");
        let s = Storage::from_file(&p, FileMode::Shared, 8).unwrap();
        assert_eq!(&bytes_of(&s)[..4], b"abcd");
        assert_eq!(&bytes_of(&s)[4..], &[0; 4]);
        assert_eq!(
            s.filename().unwrap().to_bytes(),
            &*crate::platform::fs::path_bytes(&p)
        );
        let second = Storage::from_file(&p, FileMode::ReadOnly, 0).unwrap();
        write_at(&s, 7, b'Z');
        assert_eq!(bytes_of(&second)[7], b'Z');
        s.flush().unwrap();
        assert_eq!(read_file(&p), b"abcd\0\0\0Z");
        drop((s, second));
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn read_only_and_sizes() {
        let p = temp("ro", b"0123456789");
        let s = Storage::from_file(&p, FileMode::ReadOnly, 4).unwrap();
        assert_eq!(bytes_of(&s), b"0123");
        assert!(s.is_read_only());
        let e = s.fill(0).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::ReadOnly);
        for mode in [FileMode::ReadOnly, FileMode::Private] {
            let e = Storage::from_file(&p, mode, 11).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("11"), "{e}");
        }
        let e = Storage::from_file(&p, FileMode::Shared, usize::MAX).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::InvalidArgument);
        assert_eq!(read_file(&p), b"0123456789");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn bad_paths_leave_nothing() {
        let dir = std::env::temp_dir();
        let e = Storage::from_file(&dir, FileMode::ReadOnly, 0).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Io);
        assert!(e.to_string().contains("directory"), "{e}");
        let missing = dir.join(format!("tessera-missing-{}", std::process::id()));
        let e = Storage::from_file(&missing, FileMode::Private, 0).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Io);
        assert!(!missing.exists());
    }

    /// A save over a file that a storage maps: Unix renames the new file
    /// over it (the mapping keeps the old bytes); Windows refuses to
    /// replace a mapped file, and the save fails with the old file kept
    /// whole. Either way nothing is lost.
    #[test]
    fn a_save_over_a_mapped_file_never_loses_it() {
        let p = temp("mapped-save", b"old!");
        let s = Storage::from_file(&p, FileMode::ReadOnly, 0).unwrap();
        let saved = crate::files::replace_file(&p, false, "the test", |f, _| {
            f.write_all(b"new!").map_err(|e| crate::err!(Io, "{e}"))
        });
        assert_eq!(bytes_of(&s), b"old!");
        if cfg!(windows) {
            let e = saved.unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Io, "{e}");
            assert_eq!(std::fs::read(&p).unwrap(), b"old!");
        } else {
            saved.unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), b"new!");
        }
        drop(s);
        std::fs::remove_file(&p).unwrap();
        let dir = p.parent().unwrap();
        let left = std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().contains("mapped-save")
            })
            .count();
        assert_eq!(left, 0, "a temporary file was left beside it");
    }
}
