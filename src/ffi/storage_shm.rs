//! Shared-memory storages at the ABI (storage/shm.rs): share_memory,
//! is_shared, by descriptor and by name.

use super::call::{check_not_null, getter, guard, write_out};
use super::handle;
use super::storage::{storage_handle, storage_ref};
use super::types::*;
use crate::storage::shm::NEW_NAME_LEN;
use crate::storage::Storage;
use std::ffi::{c_char, c_int, CStr};

/// Moves the storage's bytes into a new shared-memory segment (an
/// anonymous memfd on Linux), in place (torch's share_memory_): the
/// storage's DataPtr is swapped, so every tensor on it sees the same
/// values at the new address; the old memory is freed (its allocator's
/// statistics drop); the storage becomes non-resizable and has no
/// allocator any more. Handles, weak references and version counters are
/// unchanged. No-op when already shared (and for CUDA storages).
///
/// Thread safety: concurrent tsr_storage_share_memory /
/// tsr_storage_share_name calls on one storage are serialized (one moves
/// the bytes); no other use of the storage or its tensors may overlap the
/// call. Pointers to the old data become invalid, as after a resize:
/// tsr_storage_data / tsr_tensor_data values taken before. A storage with
/// a live DLPack export is refused (as tsr_storage_set_data_ptr): the
/// consumer would keep the freed address.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; TSR_ERR_UNSUPPORTED
/// (not a CPU storage); TSR_ERR_READ_ONLY (a read-only storage: other
/// processes would get writable memory); TSR_ERR_INVALID_ARGUMENT (a live
/// DLPack export of a tensor on the storage); TSR_ERR_OUT_OF_MEMORY /
/// TSR_ERR_IO (the segment could not be made or mapped). On every error
/// the storage is unchanged.
///
/// # Safety
/// `s` NULL or a live handle, used by no other thread except through
/// share_memory / share_name during the call.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_share_memory(s: *mut TsrStorage) -> TsrStatus {
    guard("tsr_storage_share_memory", || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let st = unsafe { storage_ref(s, "s")? };
        // SAFETY: the header's contract: no overlapping use except the
        // serialized share calls.
        unsafe { st.share_memory() }
    })
}

/// Whether the storage's data is shared between processes: storages made
/// by tsr_storage_share_memory, tsr_storage_share_name,
/// tsr_storage_from_fd and tsr_storage_open_shared, TSR_FILE_SHARED file
/// storages, and CUDA storages.
/// false for NULL (with a message).
///
/// # Safety
/// `s` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_is_shared(s: *const TsrStorage) -> bool {
    getter("tsr_storage_is_shared", false, || {
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); borrow checks NULL and liveness.
        let st: &crate::storage::StorageImpl = unsafe { handle::borrow(s, "s")? };
        Ok(st.is_shared())
    })
}

/// Writes to `*fd_out` a new descriptor of the shared-memory object the
/// storage lives in; the caller owns it (close it when done). It is
/// close-on-exec: send it over a Unix socket (SCM_RIGHTS), or clear
/// FD_CLOEXEC to leave it to an exec'd child; the other process maps it
/// with tsr_storage_from_fd. The object lives while any process maps it or
/// holds a descriptor of it; the kernel frees it when all are gone, even
/// after a crash.
///
/// The descriptor is writable (a mapping of it can change the storage's
/// bytes), so a read-only storage (tsr_storage_make_read_only) gives none:
/// TSR_ERR_READ_ONLY, even when it was shared before it was made
/// read-only (descriptors handed out before stay writable). To give a
/// peer a read-only view, open the descriptor again read-only (e.g.
/// open("/proc/self/fd/N", O_RDONLY)): tsr_storage_from_fd maps such a
/// descriptor read-only.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; TSR_ERR_READ_ONLY
/// (a read-only storage); TSR_ERR_INVALID_ARGUMENT (the storage is not in
/// shared memory: call tsr_storage_share_memory first); TSR_ERR_IO (no
/// descriptor left). `*fd_out` is untouched on error.
///
/// # Safety
/// `s` NULL or a live handle; `fd_out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_share_fd(
    s: *const TsrStorage,
    fd_out: *mut c_int,
) -> TsrStatus {
    guard("tsr_storage_share_fd", || {
        check_not_null(fd_out, "fd_out")?;
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let st = unsafe { storage_ref(s, "s")? };
        let fd = crate::platform::shm::into_raw(st.share_fd()?);
        // SAFETY: fd_out checked non-NULL.
        unsafe { write_out(fd_out, fd) };
        Ok(())
    })
}

/// Maps the shared-memory object (or regular file) behind `fd` into a new
/// CPU storage of `nbytes` bytes (0: the object's size) and writes a new
/// reference to `*out`. `fd` is borrowed: the storage keeps its own
/// duplicate, the caller still closes `fd`. Writes through the storage
/// reach every process mapping the object. The storage is shared
/// (tsr_storage_is_shared), not resizable, has no allocator. A descriptor
/// of a named segment (tsr_storage_share_name) holds a 64-byte trailer
/// after the data: pass its nbytes rather than 0. A descriptor opened
/// read-only (O_RDONLY) is mapped read-only (PROT_READ) into a read-only
/// storage (tsr_storage_is_read_only): tessera refuses writes with
/// TSR_ERR_READ_ONLY, and a host write through tsr_storage_data faults.
///
/// The object's size is checked once, here. If another process shrinks
/// it afterwards (ftruncate), reading or writing the pages that are gone
/// raises SIGBUS, as with any shared file mapping (and as for
/// tsr_storage_from_file): keeping the object's size is the host's
/// affair. Releasing the storage touches none of its memory, so it never
/// faults.
///
/// Errors: TSR_ERR_NULL_POINTER (out); TSR_ERR_INVALID_ARGUMENT (a
/// negative or closed descriptor, a pipe / socket / directory, nbytes
/// larger than the object); TSR_ERR_IO (fcntl, fstat or mmap failed).
/// Nothing is kept on error.
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_from_fd(
    fd: c_int,
    nbytes: usize,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_from_fd", || {
        check_not_null(out, "out")?;
        let s = Storage::from_fd(fd, nbytes)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}

/// Moves the storage into a named POSIX shared-memory segment, in place
/// (as tsr_storage_share_memory; a storage already in an anonymous
/// segment moves once more, and descriptors given out before keep the old
/// segment), unless it is in one already, and writes the segment's
/// NUL-terminated name ("/tessera-...", TSR_SHM_NAME_SIZE = 35 bytes with
/// the NUL) to `buf`.
/// An unrelated process opens it with tsr_storage_open_shared. The name
/// is removed when the last storage using it, in any process, is
/// released; a process that dies holding one leaves the name in /dev/shm
/// (docs/C_API.md, "Shared memory", says how to clean it). The users are counted
/// with a flock per storage, outside the segment's memory: a peer that
/// truncates the segment cannot make a release fault (reads and writes
/// of pages it took away do raise SIGBUS: see tsr_storage_from_fd).
/// On Windows the segment is a named file mapping of the paging file
/// under the same name; the kernel removes the name with its last handle,
/// so a process that dies leaves nothing behind (docs/PLATFORMS.md).
///
/// The name lets any process map the memory writable, so a read-only
/// storage gives none (TSR_ERR_READ_ONLY), even one moved into a named
/// segment before it was made read-only (processes that opened the name
/// before keep their writable storages).
///
/// Errors: TSR_ERR_NULL_POINTER (s or buf); TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (buflen smaller than the name: the message
/// says the size needed; nothing moved); TSR_ERR_UNSUPPORTED (not a CPU
/// storage); TSR_ERR_READ_ONLY (a read-only storage, named already or
/// not); TSR_ERR_INVALID_ARGUMENT (a live DLPack export: as
/// tsr_storage_share_memory);
/// TSR_ERR_IO / TSR_ERR_OUT_OF_MEMORY (the segment could not be made: the
/// storage is unchanged). Thread safety: as
/// tsr_storage_share_memory.
///
/// # Safety
/// `s` NULL or a live handle (see tsr_storage_share_memory); `buf` NULL or
/// `buflen` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_share_name(
    s: *mut TsrStorage,
    buf: *mut c_char,
    buflen: usize,
) -> TsrStatus {
    guard("tsr_storage_share_name", || {
        check_not_null(buf, "buf")?;
        // SAFETY: `s` is NULL or a live TsrStorage handle (the header's
        // contract, ffi/handle.rs); storage_ref checks NULL and liveness.
        let st = unsafe { storage_ref(s, "s")? };
        let need = st
            .shared_name()
            .map_or(NEW_NAME_LEN + 1, |n| n.as_bytes_with_nul().len());
        crate::ensure!(
            buflen >= need,
            InvalidArgument,
            "buflen {buflen} is too small: the name needs {need} bytes with its NUL"
        );
        // SAFETY: the header's contract, as in tsr_storage_share_memory.
        let name = unsafe { st.share_name()? };
        let bytes = name.as_bytes_with_nul();
        crate::ensure!(
            bytes.len() <= buflen,
            InvalidArgument,
            "buflen {buflen} is too small: the name needs {} bytes with its NUL",
            bytes.len()
        );
        // SAFETY: buf holds buflen >= bytes.len() writable bytes (the
        // caller's contract), distinct from the name's own memory.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len()) };
        Ok(())
    })
}

/// Opens the named segment `name` (from tsr_storage_share_name, in this
/// or another process) as a new CPU storage sharing its memory, and
/// writes a new reference to `*out`. The storage holds the segment (its
/// name stays until every storage using it is released). Shared, not
/// resizable, no allocator, writable. A peer that truncates the segment
/// afterwards: as tsr_storage_from_fd (access faults, release does not).
///
/// Errors: TSR_ERR_NULL_POINTER (name or out); TSR_ERR_INVALID_ARGUMENT
/// (an empty name, one longer than 255 bytes after its '/', or with a
/// second '/'); TSR_ERR_IO (no segment of that name, no permission, or it
/// is being removed); TSR_ERR_FORMAT (a segment not made by
/// tsr_storage_share_name, or one truncated since). Nothing is kept on
/// error.
///
/// # Safety
/// `name` NULL or a NUL-terminated string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_storage_open_shared(
    name: *const c_char,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_storage_open_shared", || {
        check_not_null(name, "name")?;
        check_not_null(out, "out")?;
        // SAFETY: name checked non-NULL, NUL-terminated per the caller.
        let name = unsafe { CStr::from_ptr(name) };
        let s = Storage::open_shared(name)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}
