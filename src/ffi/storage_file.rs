//! File-backed storages at the ABI (torch.UntypedStorage.from_file,
//! filename; msync). The core is src/storage/file.rs.

use super::call::{check_not_null, getter, guard, write_out};
use super::storage::{storage_handle, storage_impl};
use super::types::*;
use crate::error::Result;
use crate::storage::file::FileMode;
use crate::storage::Storage;
use std::ffi::{c_char, CStr};

fn file_mode(mode: TsrFileMode) -> Result<FileMode> {
    Ok(match mode {
        TSR_FILE_PRIVATE => FileMode::Private,
        TSR_FILE_SHARED => FileMode::Shared,
        TSR_FILE_READ_ONLY => FileMode::ReadOnly,
        _ => crate::bail!(
            InvalidArgument,
            "mode {mode} is not a file mode: expected TSR_FILE_PRIVATE (0), TSR_FILE_SHARED (1) \
             or TSR_FILE_READ_ONLY (2)"
        ),
    })
}

/// Maps the file at `path` into a new CPU storage (torch's
/// UntypedStorage.from_file) and writes a new reference to `*out`. The
/// mapping is the storage's data: views, weak references and DLPack
/// exports work as for any storage, and the file is unmapped and closed
/// when the storage's data is released (on any thread). No allocator is
/// involved; the storage is not resizable.
///
/// `mode`: TSR_FILE_PRIVATE (copy-on-write: writable, the file never
/// changes; the file must hold nbytes), TSR_FILE_SHARED (writes reach the
/// file and every process mapping it; a missing file is created with mode
/// 0600, a shorter one extended to nbytes, sparse), TSR_FILE_READ_ONLY (a
/// read-only mapping and a read-only storage: every write through tessera
/// fails with TSR_ERR_READ_ONLY). `nbytes` 0 maps the whole file; less
/// than the file maps its first nbytes. Files over 4 GiB work. If another
/// process truncates the file below the mapping, accesses past its end
/// fault (SIGBUS), as for any mapping.
///
/// Errors: TSR_ERR_NULL_POINTER (path or out); TSR_ERR_INVALID_ARGUMENT
/// (an unknown mode; nbytes larger than a PRIVATE or READ_ONLY file, with
/// both sizes in the message; nbytes above PTRDIFF_MAX); TSR_ERR_IO (the
/// file cannot be opened, created, extended or mapped, or is not a
/// regular file: a directory, a FIFO, a device or a socket is refused at
/// once, without blocking, and named; the message names the path and the
/// OS reason). On
/// error nothing is left behind (a file SHARED created is removed, one it
/// extended gets its size back) and `*out` is untouched.
///
/// # Safety
/// `path` NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_from_file(
    path: *const c_char,
    mode: TsrFileMode,
    nbytes: usize,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_from_file", || {
        check_not_null(path, "path")?;
        check_not_null(out, "out")?;
        let mode = file_mode(mode)?;
        // SAFETY: path checked non-NULL, NUL-terminated per the caller.
        let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
        let s = Storage::from_file(super::serialize::path_of(bytes, "path")?, mode, nbytes)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}

/// The path of a TSR_FILE_SHARED file storage, as given to
/// tsr_storage_from_file (torch: only shared file storages have a
/// filename); NULL for every other storage (not an error) and for NULL
/// `s` (with a message). The string belongs to the storage's mapping: it
/// stays valid while the storage's data does (until the last strong
/// reference goes or tsr_storage_set_data_ptr replaces the data).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_filename(s: *const TsrStorage) -> *const c_char {
    getter("tsr_storage_filename", std::ptr::null(), || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        let st = unsafe { storage_impl(s, "s")? };
        Ok(st.filename().map_or(std::ptr::null(), |p| p.as_ptr()))
    })
}

/// Writes the dirty pages of a TSR_FILE_SHARED file storage to its file
/// (msync, synchronous): after it a plain read() of the file sees every
/// write made before the call. A no-op (TSR_OK) for PRIVATE and
/// READ_ONLY file storages and for storages not backed by a file.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; TSR_ERR_IO (msync
/// failed; path and OS reason in the message).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_flush(s: *mut TsrStorage) -> TsrStatus {
    guard("tsr_storage_flush", || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_impl checks NULL and liveness.
        unsafe { storage_impl(s, "s")? }.flush()
    })
}
