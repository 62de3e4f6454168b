//! Tensor dictionaries, saving and loading at the ABI (tsr_dict_*,
//! tsr_save / tsr_load and their storage forms).

use super::call::{check_not_null, getter, guard, guard_value, str_arg, write_out};
use super::handle::{box_from, box_into, box_mut, box_ref};
use super::storage::{storage_handle, storage_ref};
use super::tensor::{tensor_handle, tensor_ref};
use super::types::*;
pub use super::types::{
    TsrFormat, TsrTensorDict, TSR_FORMAT_AUTO, TSR_FORMAT_DCP, TSR_FORMAT_GGUF, TSR_FORMAT_NPY,
    TSR_FORMAT_NPZ, TSR_FORMAT_SAFETENSORS, TSR_FORMAT_TORCH, TSR_FORMAT_TORCHSCRIPT,
    TSR_FORMAT_TORCH_LEGACY, TSR_LOAD_MMAP, TSR_LOAD_READ_ONLY, TSR_LOAD_SKIP_UNKNOWN,
    TSR_SAVE_SYNC,
};
use crate::error::Result;
use crate::serialize::{self, Format, LoadFlags, SaveFlags, TensorDict};
use std::ffi::{c_char, CStr};
use std::path::Path;
use std::ptr;

/// A NUL-terminated path argument (any bytes, as the OS takes them).
///
/// # Safety
/// `p` NULL or a NUL-terminated string.
pub(super) unsafe fn path_arg<'a>(p: *const c_char) -> Result<&'a Path> {
    check_not_null(p, "path")?;
    // SAFETY: p is non-NULL and NUL-terminated (the caller's contract).
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    crate::ensure!(
        !bytes.is_empty(),
        InvalidArgument,
        "argument 'path' is empty: expected a file path"
    );
    path_of(bytes, "path")
}

/// The path named by a C string's bytes: any bytes on Unix, UTF-8 on
/// Windows (where the ABI's paths are UTF-8).
pub(super) fn path_of<'a>(bytes: &'a [u8], arg: &str) -> Result<&'a Path> {
    crate::platform::fs::path_from_bytes(bytes).ok_or_else(|| {
        crate::err!(
            InvalidArgument,
            "argument '{arg}' (\"{}\") is not UTF-8: expected a UTF-8 path on {}",
            String::from_utf8_lossy(bytes),
            crate::platform::OS_NAME
        )
    })
}

pub(super) fn format_arg(format: TsrFormat) -> Result<Format> {
    Format::from_raw(format).ok_or_else(|| {
        crate::err!(
            InvalidArgument,
            "unknown format {format}: expected one of the TSR_FORMAT_* values: {}",
            Format::expected()
        )
    })
}

// The header's literals (cbindgen writes no expressions) are the table's
// numbers.
const _: () = assert!(TSR_FORMAT_AUTO == 0 && TSR_FORMAT_TORCH == 1);
const _: () = assert!(TSR_FORMAT_SAFETENSORS == 2 && TSR_FORMAT_NPY == 3);
const _: () = assert!(TSR_FORMAT_TORCH_LEGACY == 4 && TSR_FORMAT_TORCHSCRIPT == 5);
const _: () = assert!(TSR_FORMAT_NPZ == 6 && TSR_FORMAT_GGUF == 7);
const _: () = assert!(TSR_FORMAT_DCP == 8);

pub(super) fn flags_arg(flags: u32) -> Result<LoadFlags> {
    crate::ensure!(
        flags & !(TSR_LOAD_MMAP | TSR_LOAD_SKIP_UNKNOWN | TSR_LOAD_READ_ONLY) == 0,
        InvalidArgument,
        "unknown load flags 0x{:x} in 0x{flags:x}: expected TSR_LOAD_MMAP (0x1), \
         TSR_LOAD_SKIP_UNKNOWN (0x2) and TSR_LOAD_READ_ONLY (0x4), or 0",
        flags & !(TSR_LOAD_MMAP | TSR_LOAD_SKIP_UNKNOWN | TSR_LOAD_READ_ONLY)
    );
    let read_only = flags & TSR_LOAD_READ_ONLY != 0;
    crate::ensure!(
        !read_only || flags & TSR_LOAD_MMAP != 0,
        InvalidArgument,
        "load flags 0x{flags:x}: TSR_LOAD_READ_ONLY (0x4) needs TSR_LOAD_MMAP (0x1): it makes \
         the mapping read-only"
    );
    Ok(LoadFlags {
        mmap: flags & TSR_LOAD_MMAP != 0,
        skip_unknown: flags & TSR_LOAD_SKIP_UNKNOWN != 0,
        read_only,
    })
}

fn save_flags_arg(flags: u32) -> Result<SaveFlags> {
    crate::ensure!(
        flags & !TSR_SAVE_SYNC == 0,
        InvalidArgument,
        "unknown save flags 0x{:x} in 0x{flags:x}: expected 0 or TSR_SAVE_SYNC (0x1)",
        flags & !TSR_SAVE_SYNC
    );
    Ok(SaveFlags {
        sync: flags & TSR_SAVE_SYNC != 0,
    })
}

/// # Safety
/// `out` NULL or writable.
unsafe fn put_dict(out: *mut *mut TsrTensorDict, d: TensorDict) {
    // SAFETY: out checked non-NULL by the caller.
    unsafe { write_out(out, box_into::<TsrTensorDict>(Box::new(d))) }
}

/// Creates an empty dictionary.
///
/// Errors: TSR_ERR_NULL_POINTER (out).
///
/// # Safety
/// `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_new(out: *mut *mut TsrTensorDict) -> TsrStatus {
    guard("tsr_dict_new", || {
        check_not_null(out, "out")?;
        // SAFETY: out checked non-NULL.
        unsafe { put_dict(out, TensorDict::new()) };
        Ok(())
    })
}

/// Frees a dictionary and its references to its tensors. NULL does
/// nothing.
///
/// # Safety
/// `dict` NULL or a live dictionary, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_free(dict: *mut TsrTensorDict) {
    guard_value("tsr_dict_free", (), || {
        if !dict.is_null() {
            // SAFETY: dict is non-NULL, made by box_into, given up here.
            drop(unsafe { box_from(dict) });
        }
    })
}

/// Adds `t` under `name` (the dict keeps its own reference), or replaces
/// the tensor already under that name (keeping its position).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT (t);
/// TSR_ERR_INVALID_ARGUMENT (a name that is not UTF-8).
///
/// # Safety
/// `dict` NULL or live; `name` NULL or NUL-terminated; `t` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_set(
    dict: *mut TsrTensorDict,
    name: *const c_char,
    t: *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_dict_set", || {
        // SAFETY: dict is NULL or a live dictionary owned by the caller.
        let d = unsafe { box_mut(dict, "dict")? };
        // SAFETY: name is NULL or NUL-terminated.
        let name = unsafe { str_arg(name, "name")? };
        // SAFETY: t is NULL or a live tensor handle; tensor_ref checks.
        let t = unsafe { tensor_ref(t, "t")? };
        d.set(name, t)
    })
}

/// The number of tensors; 0 for NULL.
///
/// # Safety
/// `dict` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_size(dict: *const TsrTensorDict) -> usize {
    guard_value("tsr_dict_size", 0, || {
        // SAFETY: dict is NULL or a live dictionary.
        unsafe { box_ref(dict, "dict") }.map_or(0, |d| d.len())
    })
}

/// The `i`-th name in insertion order, valid until the dict is changed or
/// freed; NULL past the end or for NULL.
///
/// # Safety
/// `dict` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_name(dict: *const TsrTensorDict, i: usize) -> *const c_char {
    getter("tsr_dict_name", ptr::null(), || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        Ok(d.name_c(i).map_or(ptr::null(), |n| n.as_ptr()))
    })
}

/// A new reference to the tensor under `name`; NULL when absent (no
/// error recorded) or on a NULL argument (error recorded).
///
/// # Safety
/// `dict` NULL or live; `name` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_get(
    dict: *const TsrTensorDict,
    name: *const c_char,
) -> *mut TsrTensor {
    getter("tsr_dict_get", ptr::null_mut(), || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        // SAFETY: name is NULL or NUL-terminated.
        let name = unsafe { str_arg(name, "name")? };
        Ok(d.get(name)
            .map_or(ptr::null_mut(), |t| tensor_handle(t.clone())))
    })
}

/// Sets the metadata `key` to `value` (copied; replaces any previous one).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (not UTF-8).
///
/// # Safety
/// `dict` NULL or live; `key`, `value` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_set_metadata(
    dict: *mut TsrTensorDict,
    key: *const c_char,
    value: *const c_char,
) -> TsrStatus {
    guard("tsr_dict_set_metadata", || {
        // SAFETY: dict is NULL or a live dictionary owned by the caller.
        let d = unsafe { box_mut(dict, "dict")? };
        // SAFETY: key and value are NULL or NUL-terminated.
        let (key, value) = unsafe { (str_arg(key, "key")?, str_arg(value, "value")?) };
        d.set_metadata(key, value)
    })
}

/// The metadata value of `key`, valid until the dict is changed or freed;
/// NULL when absent (no error recorded) or on a NULL argument.
///
/// # Safety
/// `dict` NULL or live; `key` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_metadata(
    dict: *const TsrTensorDict,
    key: *const c_char,
) -> *const c_char {
    getter("tsr_dict_metadata", ptr::null(), || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        // SAFETY: key is NULL or NUL-terminated.
        let key = unsafe { str_arg(key, "key")? };
        Ok(d.metadata_c(key).map_or(ptr::null(), |v| v.as_ptr()))
    })
}

/// The number of metadata keys; 0 for NULL.
///
/// # Safety
/// `dict` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_metadata_count(dict: *const TsrTensorDict) -> usize {
    guard_value("tsr_dict_metadata_count", 0, || {
        // SAFETY: dict is NULL or a live dictionary.
        unsafe { box_ref(dict, "dict") }.map_or(0, |d| d.metadata_len())
    })
}

/// The `i`-th metadata key in the order first set (its value:
/// tsr_dict_metadata), valid until the dict is changed or freed; NULL
/// past the end (no error recorded) or for NULL.
///
/// # Safety
/// `dict` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_metadata_key(
    dict: *const TsrTensorDict,
    i: usize,
) -> *const c_char {
    getter("tsr_dict_metadata_key", ptr::null(), || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        Ok(d.metadata_key_c(i).map_or(ptr::null(), |k| k.as_ptr()))
    })
}

/// Sets the non-tensor value `name` (a checkpoint's `global_step`, a
/// config dict) from its JSON text `json` (copied; replaces any previous
/// value of that name). Torch saves write it as the Python value,
/// safetensors and GGUF under `tessera.values` (docs/FORMATS.md, Values).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (not UTF-8,
/// not one JSON value, nested more than 32 levels or longer than 1 MiB,
/// the name of a tensor of the dict).
///
/// # Safety
/// `dict` NULL or live; `name`, `json` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_set_value_json(
    dict: *mut TsrTensorDict,
    name: *const c_char,
    json: *const c_char,
) -> TsrStatus {
    guard("tsr_dict_set_value_json", || {
        // SAFETY: dict is NULL or a live dictionary owned by the caller.
        let d = unsafe { box_mut(dict, "dict")? };
        // SAFETY: name and json are NULL or NUL-terminated.
        let (name, json) = unsafe { (str_arg(name, "name")?, str_arg(json, "json")?) };
        d.set_value_json(name, json)
    })
}

/// The number of non-tensor values; 0 for NULL.
///
/// # Safety
/// `dict` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_value_count(dict: *const TsrTensorDict) -> usize {
    guard_value("tsr_dict_value_count", 0, || {
        // SAFETY: dict is NULL or a live dictionary.
        unsafe { box_ref(dict, "dict") }.map_or(0, |d| d.value_count())
    })
}

/// The `i`-th value's name in the order first set, valid until the dict
/// is changed or freed; NULL past the end or for NULL.
///
/// # Safety
/// `dict` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_value_name(
    dict: *const TsrTensorDict,
    i: usize,
) -> *const c_char {
    getter("tsr_dict_value_name", ptr::null(), || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        Ok(d.value_name_c(i).map_or(ptr::null(), |n| n.as_ptr()))
    })
}

/// The JSON text of the value `name` (compact; object keys sorted),
/// valid until the dict is changed or freed; NULL when absent (no error
/// recorded) or on a NULL argument.
///
/// # Safety
/// `dict` NULL or live; `name` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_dict_value_json(
    dict: *const TsrTensorDict,
    name: *const c_char,
) -> *const c_char {
    getter("tsr_dict_value_json", ptr::null(), || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        // SAFETY: name is NULL or NUL-terminated.
        let name = unsafe { str_arg(name, "name")? };
        Ok(d.value_json_c(name).map_or(ptr::null(), |v| v.as_ptr()))
    })
}

/// Saves `dict` to the file at `path` in `format` (TSR_FORMAT_AUTO:
/// safetensors for a ".safetensors" path, else torch): tsr_save_flags
/// with flags 0.
///
/// The destination is replaced atomically: everything is checked first,
/// then the file is written beside it under a temporary name
/// (".NAME.tsr-tmp-PID-N", or ".tsr-tmp-PID-N" where that name is too
/// long for the file system; mode 0666 less the umask, or the replaced
/// file's permission bits) and renamed over it once complete. On an error
/// the destination is unchanged, byte for byte, and no file is left
/// behind (a process killed during the save may leave the temporary
/// file). A symbolic link at `path` stays: its target is replaced. A
/// destination that is not a regular file (a FIFO, a device, a
/// directory, a socket) is refused with TSR_ERR_IO and left alone, as is
/// a file the caller may not write. Tensors loaded with TSR_LOAD_MMAP
/// from `path` itself stay valid (they map the replaced file).
///
/// `path` may be an "s3://BUCKET/KEY" URL (Linux, feature remote): the
/// file is written to a temporary directory, then uploaded (multipart
/// above one part); the object appears only when complete, so a failed
/// save leaves the old one (docs/FORMATS.md, "Saves to S3").
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (unknown
/// format, empty path, safetensors tensors sharing memory, an S3 URL
/// naming no object); TSR_ERR_DEVICE (a tensor not on the CPU);
/// TSR_ERR_DTYPE (a dtype the format cannot hold); TSR_ERR_IO (the path,
/// the OS reason and its errno name, e.g. ENOSPC; or what the special
/// file at the path is; or the upload's failure, naming the URL);
/// TSR_ERR_UNSUPPORTED (an http:// or https:// URL, or a URL in a build
/// without the remote feature).
///
/// # Safety
/// `dict` NULL or live; `path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_save(
    dict: *const TsrTensorDict,
    path: *const c_char,
    format: TsrFormat,
) -> TsrStatus {
    guard("tsr_save", || {
        // SAFETY: dict is NULL or a live dictionary; path NULL or
        // NUL-terminated (the caller's contract).
        unsafe { save_body(dict, path, format, 0) }
    })
}

/// tsr_save with `flags`: 0, or TSR_SAVE_SYNC (fsync the new file
/// before the rename and its directory after).
///
/// Errors: as tsr_save; TSR_ERR_INVALID_ARGUMENT (unknown flag bits,
/// named).
///
/// # Safety
/// `dict` NULL or live; `path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_save_flags(
    dict: *const TsrTensorDict,
    path: *const c_char,
    format: TsrFormat,
    flags: u32,
) -> TsrStatus {
    guard("tsr_save_flags", || {
        // SAFETY: as tsr_save's (the caller's contract).
        unsafe { save_body(dict, path, format, flags) }
    })
}

/// The body of tsr_save and tsr_save_flags.
///
/// # Safety
/// `dict` NULL or live; `path` NULL or NUL-terminated.
unsafe fn save_body(
    dict: *const TsrTensorDict,
    path: *const c_char,
    format: TsrFormat,
    flags: u32,
) -> Result<()> {
    // SAFETY: dict is NULL or a live dictionary.
    let d = unsafe { box_ref(dict, "dict")? };
    // SAFETY: path is NULL or NUL-terminated.
    let path = unsafe { path_arg(path)? };
    let format = format_arg(format)?;
    serialize::save_flags(d, path, format, save_flags_arg(flags)?)
}

/// Saves `dict` into the directory `directory` (made when missing) as a
/// Hugging Face sharded checkpoint: shards of at most `max_shard_bytes`
/// bytes of tensors (a larger tensor alone in its shard), named as
/// transformers' save_pretrained names them, plus the index.
/// TSR_FORMAT_SAFETENSORS or TSR_FORMAT_AUTO: model-00001-of-00003.safetensors
/// ... and model.safetensors.index.json; TSR_FORMAT_TORCH: torch.save
/// shards pytorch_model-00001-of-00003.bin ... and
/// pytorch_model.bin.index.json. A dict that fits in one shard is written
/// as the one file model.safetensors / pytorch_model.bin, without an
/// index, as transformers does. tsr_load of the index (or of the one
/// file) loads it back. `flags`: 0 or TSR_SAVE_SYNC.
///
/// Nothing in the directory changes until every file is written (in a
/// temporary directory inside it); then each is renamed into place, the
/// index last, and shards of an earlier save under those names that the
/// new one does not use are removed (other files are left alone).
/// `directory` may be an "s3://BUCKET/PREFIX" URL: the files are written
/// locally, then uploaded, the index last (as tsr_save).
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (another
/// format, max_shard_bytes 0, unknown flags, an empty path; safetensors
/// tensors sharing memory); TSR_ERR_DEVICE; TSR_ERR_DTYPE; TSR_ERR_IO.
///
/// # Safety
/// `dict` NULL or live; `directory` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn tsr_save_sharded(
    dict: *const TsrTensorDict,
    directory: *const c_char,
    format: TsrFormat,
    max_shard_bytes: u64,
    flags: u32,
) -> TsrStatus {
    guard("tsr_save_sharded", || {
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        check_not_null(directory, "directory")?;
        // SAFETY: directory is non-NULL and NUL-terminated.
        let dir = unsafe { path_arg(directory)? };
        let format = format_arg(format)?;
        let flags = save_flags_arg(flags)?;
        serialize::save_sharded(d, dir, format, max_shard_bytes, flags).map(|_| ())
    })
}

/// Loads the file at `path` into a new dictionary. flags 0: tensors own
/// memory from the CPU allocator (the file is read once); TSR_LOAD_MMAP:
/// they view a private mapping of the file. Also loads a Hugging Face
/// shard index (model.safetensors.index.json, pytorch_model.bin.index.json:
/// every shard, read in parallel, checked against the index; shard paths
/// must stay inside the index's directory) and a torch.distributed.checkpoint
/// directory (TSR_FORMAT_DCP: full tensors, names joined by '.').
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (format,
/// flags); TSR_ERR_IO (the path and the OS reason; a path that is not a
/// regular file, such as a FIFO, a device or a directory, is refused at
/// once, without blocking); TSR_ERR_FORMAT (a
/// malformed, truncated or refused file: what is wrong is named);
/// TSR_ERR_OUT_OF_MEMORY.
///
/// # Safety
/// `path` NULL or NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_load(
    path: *const c_char,
    format: TsrFormat,
    flags: u32,
    out: *mut *mut TsrTensorDict,
) -> TsrStatus {
    guard("tsr_load", || {
        check_not_null(out, "out")?;
        // SAFETY: path is NULL or NUL-terminated.
        let path = unsafe { path_arg(path)? };
        let d = serialize::load(path, format_arg(format)?, flags_arg(flags)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_dict(out, d) };
        Ok(())
    })
}

/// Writes the file bytes of `dict` in `format` (TSR_FORMAT_AUTO: torch)
/// into a new CPU storage.
///
/// Errors: as tsr_save, without TSR_ERR_IO.
///
/// # Safety
/// `dict` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_save_to_storage(
    dict: *const TsrTensorDict,
    format: TsrFormat,
    out: *mut *mut TsrStorage,
) -> TsrStatus {
    guard("tsr_save_to_storage", || {
        check_not_null(out, "out")?;
        // SAFETY: dict is NULL or a live dictionary.
        let d = unsafe { box_ref(dict, "dict")? };
        let s = serialize::save_to_storage(d, format_arg(format)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, storage_handle(s)) };
        Ok(())
    })
}

/// Loads a dictionary from the file bytes held by the CPU storage
/// `bytes` (borrowed): tensors view that storage itself (keeping it
/// alive) at their record's position, so their storage offsets are
/// shifted by it (tensors that shared a storage keep their relative
/// offsets); a record misaligned for its dtype is copied. TSR_LOAD_MMAP
/// (and TSR_LOAD_READ_ONLY with it) changes nothing here.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT; TSR_ERR_DEVICE (not
/// a CPU storage); TSR_ERR_INVALID_ARGUMENT (format, flags);
/// TSR_ERR_FORMAT.
///
/// # Safety
/// `bytes` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_load_from_storage(
    bytes: *mut TsrStorage,
    format: TsrFormat,
    flags: u32,
    out: *mut *mut TsrTensorDict,
) -> TsrStatus {
    guard("tsr_load_from_storage", || {
        check_not_null(out, "out")?;
        // SAFETY: bytes is NULL or a live storage handle; storage_ref checks.
        let s = unsafe { storage_ref(bytes, "bytes")? };
        let format = format_arg(format)?;
        let d = serialize::load_from_storage_flags(&s, format, flags_arg(flags)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_dict(out, d) };
        Ok(())
    })
}
