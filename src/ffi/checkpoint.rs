//! Checkpoints opened once and loaded in parts at the ABI
//! (tsr_checkpoint_*): thin conversions over `serialize::Checkpoint`.

use super::call::{check_not_null, getter, guard, guard_value, read_sized, str_arg, write_out};
use super::handle::{arc_clone, arc_from, arc_into, arc_ref, box_into, tensor_handle};
use super::serialize::{flags_arg, format_arg, path_arg};
use super::types::*;
use crate::error::Result;
use crate::serialize::{Checkpoint, FetchOptions, Progress, RemoteSettings, TensorDict};
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::Arc;

pub use super::types::TsrCheckpoint;

/// Called after each chunk a load reads, on the thread that called the
/// load: `done` of `total` bytes, and the name of the tensor whose last
/// bytes that chunk read (else NULL; valid during the call). Return 0 to
/// go on, nonzero to cancel the load (TSR_ERR_CANCELLED, nothing kept).
pub type TsrProgressFn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        done: u64,
        total: u64,
        finished: *const c_char,
    ) -> c_int,
>;

/// How tsr_checkpoint_load_many_with fetches. Set struct_size to
/// sizeof(TsrLoadOptions); zero fields take the defaults.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TsrLoadOptions {
    /// sizeof(TsrLoadOptions) as the host compiled it.
    pub struct_size: u32,
    /// Threads reading at once (0: tsr_get_num_threads()).
    pub concurrency: u32,
    /// Bytes a read asks for (0: 8 MiB; rounded up to a multiple of 16).
    pub chunk_bytes: u64,
    /// Progress and cancellation (NULL: none).
    pub progress: TsrProgressFn,
    /// Passed to `progress`.
    pub user: *mut c_void,
}

/// The checkpoint and the C strings its getters hand out.
struct Held {
    ckpt: Checkpoint,
    names: Vec<CString>,
    sizes: Vec<Vec<i64>>,
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "\\0")).unwrap_or_default()
}

/// Per-load flags: none are defined yet.
fn load_flags_arg(flags: u32) -> Result<()> {
    crate::ensure!(
        flags == 0,
        InvalidArgument,
        "unknown per-load flags 0x{flags:x}: expected 0 (a checkpoint's load flags are given \
         to tsr_checkpoint_open)"
    );
    Ok(())
}

/// Opens a checkpoint without loading any tensor: reads only its index
/// (a safetensors header; for the other formats the file is mapped and
/// only the pages its reader looks at are read). Any format tsr_load
/// reads: a file, a Hugging Face shard index, a DCP directory. `flags`:
/// as tsr_load's (TSR_LOAD_MMAP: CPU loads view a mapping of the file).
///
/// Errors: as tsr_load.
///
/// # Safety
/// `path` NULL or NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_open(
    path: *const c_char,
    format: TsrFormat,
    flags: u32,
    out: *mut *mut TsrCheckpoint,
) -> TsrStatus {
    guard("tsr_checkpoint_open", || {
        check_not_null(out, "out")?;
        // SAFETY: path is NULL or NUL-terminated.
        let path = unsafe { path_arg(path)? };
        let ckpt = Checkpoint::open(path, format_arg(format)?, flags_arg(flags)?)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, held(ckpt)) };
        Ok(())
    })
}

/// One setting of tsr_checkpoint_open_with: a variable's name and the
/// value that replaces the environment's for that open.
#[repr(C)]
pub struct TsrSetting {
    /// TSR_REMOTE_CONCURRENCY, TSR_REMOTE_CHUNK_BYTES,
    /// TSR_REMOTE_JOIN_GAP_BYTES, TSR_REMOTE_TIMEOUT_MS,
    /// TSR_REMOTE_RETRIES, or an AWS_ variable
    /// (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_REGION, AWS_SESSION_TOKEN, AWS_ALLOW_HTTP, ...).
    pub name: *const c_char,
    /// Its value (NUL-terminated UTF-8).
    pub value: *const c_char,
}

/// tsr_checkpoint_open with `n_settings` settings for a URL, each over
/// the environment variable of its name for this open only (its requests,
/// S3's endpoint, region and credentials: another thread's opens and the
/// environment are untouched). A later setting of the same name wins. A
/// local path ignores them. Secret values (AWS_SECRET_ACCESS_KEY,
/// AWS_SESSION_TOKEN, AWS_ACCESS_KEY_ID) never appear in messages.
///
/// Errors: as tsr_checkpoint_open; TSR_ERR_NULL_POINTER (`settings` NULL
/// with n_settings > 0, a NULL name or value, naming its index);
/// TSR_ERR_INVALID_ARGUMENT (a name that is neither a TSR_REMOTE_ setting
/// nor an AWS_ variable, or, at a URL's open, one object_store does not
/// read; a value out of its range, naming both).
///
/// # Safety
/// `path` NULL or NUL-terminated; `settings` NULL or `n_settings`
/// readable entries whose strings are NULL or NUL-terminated; `out` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_open_with(
    path: *const c_char,
    format: TsrFormat,
    flags: u32,
    settings: *const TsrSetting,
    n_settings: usize,
    out: *mut *mut TsrCheckpoint,
) -> TsrStatus {
    guard("tsr_checkpoint_open_with", || {
        check_not_null(out, "out")?;
        // SAFETY: path is NULL or NUL-terminated.
        let path = unsafe { path_arg(path)? };
        let mut over = RemoteSettings::new();
        if n_settings > 0 {
            check_not_null(settings, "settings")?;
            // SAFETY: settings is non-NULL with n_settings readable
            // entries (the caller's contract).
            let list = unsafe { std::slice::from_raw_parts(settings, n_settings) };
            for (i, s) in list.iter().enumerate() {
                // SAFETY: each string NULL or NUL-terminated.
                let name = unsafe { str_arg(s.name, &format!("settings[{i}].name"))? };
                // SAFETY: as above.
                let value = unsafe { str_arg(s.value, &format!("settings[{i}].value"))? };
                over.set(name, value)?;
            }
        }
        let ckpt = Checkpoint::open_with(path, format_arg(format)?, flags_arg(flags)?, &over)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, held(ckpt)) };
        Ok(())
    })
}

/// `ckpt` as a handle, with the names and sizes its getters hand out.
fn held(ckpt: Checkpoint) -> *mut TsrCheckpoint {
    let names = (0..ckpt.len())
        .map(|i| cstring(ckpt.name(i).unwrap_or_default()))
        .collect();
    let sizes = (0..ckpt.len())
        .map(|i| ckpt.info(i).map(|(_, s, _)| s.to_vec()).unwrap_or_default())
        .collect();
    arc_into::<TsrCheckpoint, Held>(Arc::new(Held { ckpt, names, sizes }))
}

/// The number of tensors in the checkpoint (0 for NULL).
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_size(c: *const TsrCheckpoint) -> usize {
    getter("tsr_checkpoint_size", 0, || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        Ok(unsafe { arc_ref::<_, Held>(c, "c")? }.names.len())
    })
}

/// The name of tensor `i` (in the order tsr_checkpoint_load_many gives
/// them), valid until the checkpoint is closed; NULL past the end.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_name(c: *const TsrCheckpoint, i: usize) -> *const c_char {
    getter("tsr_checkpoint_name", std::ptr::null(), || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_ref::<_, Held>(c, "c")? };
        Ok(held.names.get(i).map_or(std::ptr::null(), |n| n.as_ptr()))
    })
}

/// The position of the tensor named `name` in `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER (c, name, out); TSR_ERR_INVALID_ARGUMENT
/// (no such tensor, or a name that is not UTF-8).
///
/// # Safety
/// `c` NULL or open; `name` NULL or NUL-terminated; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_find(
    c: *const TsrCheckpoint,
    name: *const c_char,
    out: *mut usize,
) -> TsrStatus {
    guard("tsr_checkpoint_find", || {
        check_not_null(out, "out")?;
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_ref::<_, Held>(c, "c")? };
        // SAFETY: name is NULL or NUL-terminated (the contract).
        let name = unsafe { str_arg(name, "name")? };
        let i = held.ckpt.find(name).ok_or_else(|| {
            crate::err!(
                InvalidArgument,
                "no tensor named '{name}' in the checkpoint: expected one of its {} names",
                held.names.len()
            )
        })?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, i) };
        Ok(())
    })
}

/// Tensor `i`'s dtype, without reading it; -1 past the end or for NULL.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_dtype(c: *const TsrCheckpoint, i: usize) -> TsrDType {
    getter("tsr_checkpoint_dtype", -1, || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_ref::<_, Held>(c, "c")? };
        Ok(held
            .ckpt
            .info(i)
            .map_or(-1, |(d, _, _)| d.raw() as TsrDType))
    })
}

/// Tensor `i`'s number of dims; -1 past the end or for NULL.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_ndim(c: *const TsrCheckpoint, i: usize) -> i64 {
    getter("tsr_checkpoint_ndim", -1, || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_ref::<_, Held>(c, "c")? };
        Ok(held.sizes.get(i).map_or(-1, |s| s.len() as i64))
    })
}

/// Tensor `i`'s sizes (ndim of them), valid until the checkpoint is
/// closed; NULL past the end or for NULL.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_sizes(c: *const TsrCheckpoint, i: usize) -> *const i64 {
    getter("tsr_checkpoint_sizes", std::ptr::null(), || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_ref::<_, Held>(c, "c")? };
        Ok(held.sizes.get(i).map_or(std::ptr::null(), |s| s.as_ptr()))
    })
}

/// Tensor `i`'s bytes (numel x itemsize); 0 past the end or for NULL.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_nbytes(c: *const TsrCheckpoint, i: usize) -> u64 {
    getter("tsr_checkpoint_nbytes", 0, || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_ref::<_, Held>(c, "c")? };
        Ok(held.ckpt.info(i).map_or(0, |(_, _, n)| n))
    })
}

/// The format the checkpoint was read as (TSR_FORMAT_*); -1 for NULL.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_format(c: *const TsrCheckpoint) -> TsrFormat {
    getter("tsr_checkpoint_format", -1, || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        Ok(unsafe { arc_ref::<_, Held>(c, "c")? }.ckpt.format().raw())
    })
}

/// The bytes read from the checkpoint's files since open, by every
/// thread: the index's (safetensors) and every load's; 0 for NULL.
///
/// # Safety
/// `c` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_bytes_read(c: *const TsrCheckpoint) -> u64 {
    getter("tsr_checkpoint_bytes_read", 0, || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        Ok(unsafe { arc_ref::<_, Held>(c, "c")? }.ckpt.bytes_read())
    })
}

/// One tensor, into memory from the allocator registered for `device`,
/// reading only its bytes. `flags`: 0.
///
/// Errors: TSR_ERR_NULL_POINTER (c, name, out); TSR_ERR_INVALID_ARGUMENT
/// (no such tensor, flags); TSR_ERR_DEVICE (no allocator for `device`);
/// TSR_ERR_FORMAT (the file changed since open); TSR_ERR_IO.
///
/// # Safety
/// `c` NULL or open (a close on another thread during the call is
/// safe); `name` NULL or NUL-terminated; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_load(
    c: *mut TsrCheckpoint,
    name: *const c_char,
    device: TsrDevice,
    flags: u32,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_checkpoint_load", || {
        check_not_null(out, "out")?;
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_clone::<_, Held>(c, "c")? };
        // SAFETY: name is NULL or NUL-terminated (the contract).
        let name = unsafe { str_arg(name, "name")? };
        load_flags_arg(flags)?;
        let t = held.ckpt.load(name, device.to_core()?)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, tensor_handle(t)) };
        Ok(())
    })
}

/// Rows [start, stop) along dim 0 of one tensor, reading only the bytes
/// those rows span (for a strided tensor, the range covering them).
///
/// Errors: as tsr_checkpoint_load; TSR_ERR_INVALID_ARGUMENT (not 0 <=
/// start <= stop <= rows); TSR_ERR_SHAPE (a 0-d tensor).
///
/// # Safety
/// As tsr_checkpoint_load.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_load_rows(
    c: *mut TsrCheckpoint,
    name: *const c_char,
    start: i64,
    stop: i64,
    device: TsrDevice,
    flags: u32,
    out: *mut *mut TsrTensor,
) -> TsrStatus {
    guard("tsr_checkpoint_load_rows", || {
        check_not_null(out, "out")?;
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_clone::<_, Held>(c, "c")? };
        // SAFETY: name is NULL or NUL-terminated (the contract).
        let name = unsafe { str_arg(name, "name")? };
        load_flags_arg(flags)?;
        let t = held.ckpt.load_rows(name, start, stop, device.to_core()?)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, tensor_handle(t)) };
        Ok(())
    })
}

/// Several tensors (`names` NULL: all), fetched in parallel, into one
/// dict with the checkpoint's metadata (names as tsr_load gives them).
///
/// Errors: as tsr_checkpoint_load; TSR_ERR_INVALID_ARGUMENT (a name
/// given twice).
///
/// # Safety
/// As tsr_checkpoint_load; `names` NULL or `n` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_load_many(
    c: *mut TsrCheckpoint,
    names: *const *const c_char,
    n: usize,
    device: TsrDevice,
    flags: u32,
    out: *mut *mut TsrTensorDict,
) -> TsrStatus {
    guard("tsr_checkpoint_load_many", || {
        // SAFETY: the contract of this function is load_many's.
        unsafe { load_many(c, names, n, device, flags, None, out) }
    })
}

/// tsr_checkpoint_load_many with fetch options (`opts` NULL: defaults):
/// threads, chunk size, and a progress callback that can cancel
/// (TSR_ERR_CANCELLED; nothing is kept). The callback runs on the
/// calling thread.
///
/// Errors: as tsr_checkpoint_load_many; TSR_ERR_INVALID_ARGUMENT
/// (struct_size); TSR_ERR_CANCELLED.
///
/// # Safety
/// As tsr_checkpoint_load_many; `opts` NULL or readable for its
/// struct_size.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_load_many_with(
    c: *mut TsrCheckpoint,
    names: *const *const c_char,
    n: usize,
    device: TsrDevice,
    flags: u32,
    opts: *const TsrLoadOptions,
    out: *mut *mut TsrTensorDict,
) -> TsrStatus {
    guard("tsr_checkpoint_load_many_with", || {
        let opts = if opts.is_null() {
            None
        } else {
            // SAFETY: opts is readable for its struct_size (the contract).
            Some(unsafe { read_sized(opts, 4, "TsrLoadOptions")? })
        };
        // SAFETY: the contract of this function is load_many's.
        unsafe { load_many(c, names, n, device, flags, opts, out) }
    })
}

/// The body of both load_many exports.
///
/// # Safety
/// As tsr_checkpoint_load_many.
unsafe fn load_many(
    c: *mut TsrCheckpoint,
    names: *const *const c_char,
    n: usize,
    device: TsrDevice,
    flags: u32,
    opts: Option<TsrLoadOptions>,
    out: *mut *mut TsrTensorDict,
) -> Result<()> {
    check_not_null(out, "out")?;
    // SAFETY: c is NULL or open.
    let held = unsafe { arc_clone::<_, Held>(c, "c")? };
    load_flags_arg(flags)?;
    let list: Option<Vec<&str>> = if names.is_null() {
        None
    } else {
        let mut v = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: names holds n pointers (the contract).
            let p = unsafe { *names.add(i) };
            // SAFETY: each is NULL or NUL-terminated.
            v.push(unsafe { str_arg(p, &format!("names[{i}]"))? });
        }
        Some(v)
    };
    let opts = opts.unwrap_or(TsrLoadOptions {
        struct_size: 0,
        concurrency: 0,
        chunk_bytes: 0,
        progress: None,
        user: std::ptr::null_mut(),
    });
    let mut report = |p: &Progress<'_>| -> bool {
        let Some(cb) = opts.progress else {
            return true;
        };
        let name = p
            .finished
            .and_then(|n| held.ckpt.find(n))
            .map_or(std::ptr::null(), |i| held.names[i].as_ptr());
        // SAFETY: the host's callback with its own user pointer; name is
        // NULL or a NUL-terminated string that outlives the call.
        unsafe { cb(opts.user, p.done, p.total, name) == 0 }
    };
    let fetch = FetchOptions {
        concurrency: opts.concurrency as usize,
        chunk_bytes: opts.chunk_bytes,
        progress: opts.progress.map(|_| &mut report as &mut _),
    };
    let d: TensorDict = held
        .ckpt
        .load_many(list.as_deref(), device.to_core()?, fetch)?;
    // SAFETY: out checked non-NULL.
    unsafe { write_out(out, box_into::<TsrTensorDict>(Box::new(d))) };
    Ok(())
}

/// The elements of one tensor in row-major order into the host's buffer
/// `dst` of exactly its size (tsr_checkpoint_nbytes): read straight into
/// it when the file holds it row-major, with no allocation.
///
/// Errors: as tsr_checkpoint_load; TSR_ERR_NULL_POINTER (dst, unless
/// nbytes is 0); TSR_ERR_INVALID_ARGUMENT (nbytes not the tensor's).
///
/// # Safety
/// As tsr_checkpoint_load; `dst` writable for `nbytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_read_into(
    c: *mut TsrCheckpoint,
    name: *const c_char,
    dst: *mut c_void,
    nbytes: usize,
) -> TsrStatus {
    guard("tsr_checkpoint_read_into", || {
        // SAFETY: c is NULL or an open checkpoint (the contract).
        let held = unsafe { arc_clone::<_, Held>(c, "c")? };
        // SAFETY: name is NULL or NUL-terminated (the contract).
        let name = unsafe { str_arg(name, "name")? };
        let buf: &mut [u8] = if nbytes == 0 {
            &mut []
        } else {
            check_not_null(dst, "dst")?;
            // SAFETY: dst is writable for nbytes bytes (the contract).
            unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, nbytes) }
        };
        held.ckpt.read_into(name, buf)
    })
}

/// Closes the checkpoint: loads running on other threads finish first
/// (each holds it while it runs); loaded tensors stay valid. NULL is a
/// no-op.
///
/// # Safety
/// `c` NULL or open; not used after.
#[no_mangle]
pub unsafe extern "C" fn tsr_checkpoint_close(c: *mut TsrCheckpoint) {
    guard_value("tsr_checkpoint_close", (), || {
        if !c.is_null() {
            // SAFETY: c is open and given up by the caller.
            drop(unsafe { arc_from::<_, Held>(c) });
        }
    })
}
