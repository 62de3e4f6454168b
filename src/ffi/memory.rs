//! Memory history, snapshots and out-of-memory observers at the ABI
//! (docs/MEMORY_SNAPSHOT.md; the semantics are in allocator::history,
//! allocator::snapshot and allocator::oom).

use super::call::{check_not_null, guard, guard_value, read_sized, str_arg};
use super::types::*;
use crate::allocator::{cpu, history, oom, snapshot};
use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

/// Options of tsr_memory_record_history.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsrHistoryOptions {
    /// sizeof(TsrHistoryOptions) as compiled by the caller; must cover
    /// `backtraces`.
    pub struct_size: u32,
    /// The ring's capacity: it keeps the newest `max_entries` events (at
    /// least 1).
    pub max_entries: usize,
    /// Capture a backtrace with each allocation (return addresses only,
    /// up to 64 frames; symbolized when a snapshot is written).
    pub backtraces: bool,
}

/// TsrHistoryOptions as read from the caller: `backtraces` as a byte, so
/// that any byte a C bool may hold is a valid value.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawHistoryOptions {
    struct_size: u32,
    max_entries: usize,
    backtraces: u8,
}

/// The format of tsr_memory_snapshot.
pub type TsrSnapshotFormat = i32;
/// tessera's JSON (docs/MEMORY_SNAPSHOT.md, docs/snapshot.schema.json).
pub const TSR_SNAPSHOT_JSON: TsrSnapshotFormat = 0;
/// The pickle PyTorch's memory_viz (pytorch.org/memory_viz) reads.
pub const TSR_SNAPSHOT_TORCH: TsrSnapshotFormat = 1;

/// An out-of-memory observer: the allocator's name (valid during the
/// call), the device asked for, the bytes requested and the allocator's
/// allocated bytes at the failure.
pub type TsrOomObserverFn = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        allocator: *const c_char,
        device: TsrDevice,
        requested: usize,
        allocated_bytes: u64,
    ),
>;

/// What an out-of-memory observer added with tsr_add_oom_info_observer is
/// told. Valid during the call only. tessera sets `struct_size` to the
/// bytes it filled in; fields are only ever added at the end, so a host
/// reads those its header has that lie below `struct_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsrOomInfo {
    /// sizeof(TsrOomInfo) as this library fills it.
    pub struct_size: u32,
    /// The failing allocator's name (NUL-terminated).
    pub allocator: *const c_char,
    /// The device asked for.
    pub device: TsrDevice,
    /// The bytes requested.
    pub requested: usize,
    /// The allocator's allocated bytes at the failure.
    pub allocated_bytes: u64,
    /// Non-zero when `device_free` and `device_total` hold the device's
    /// memory (cuMemGetInfo on CUDA; the host's free and physical memory
    /// for the CPU allocator and caching allocators over it); zero when the
    /// allocator cannot tell (a plugin).
    pub has_device_memory: u8,
    /// The device's free memory at the failure, in bytes.
    pub device_free: u64,
    /// The device's total memory, in bytes.
    pub device_total: u64,
}

/// An out-of-memory observer taking a TsrOomInfo.
pub type TsrOomInfoObserverFn =
    Option<unsafe extern "C" fn(user: *mut c_void, info: *const TsrOomInfo)>;

/// One frame of a host's own stack (a Python frame: its source file, line
/// and function), innermost first, as a TsrHostFramesFn reports it. NULL
/// `file` or `function`: unknown; `line` < 1: unknown. The strings need
/// only stay valid until the allocation that called the function returns
/// (tessera copies them before).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsrHostFrame {
    /// The source file (UTF-8; other bytes are replaced), or NULL.
    pub file: *const c_char,
    /// The function (UTF-8), or NULL.
    pub function: *const c_char,
    /// The line in `file`, from 1; < 1 when unknown.
    pub line: i64,
}

/// Reports the calling thread's host frames, innermost first, into
/// `frames` (room for `capacity`, TSR_MAX_HOST_FRAMES), and returns how
/// many it wrote (at most `capacity`; 0: none). See
/// tsr_memory_set_host_frames.
pub type TsrHostFramesFn = Option<
    unsafe extern "C" fn(user: *mut c_void, frames: *mut TsrHostFrame, capacity: usize) -> usize,
>;

/// The most frames a TsrHostFramesFn is asked for (the innermost ones).
pub const TSR_MAX_HOST_FRAMES: usize = 128;
// cbindgen writes literals only: the history's bound, written out.
const _: () = assert!(TSR_MAX_HOST_FRAMES == history::MAX_HOST_FRAMES);

/// Registers `fn`, which reports a host's own stack (Python's), so that
/// memory history adds those frames to the stack of every allocation it
/// records while backtraces are on (TsrHistoryOptions.backtraces), as
/// PyTorch's memory history records Python stacks. `fn` NULL removes the
/// registration; another registration replaces it (one host at a time).
///
/// `host` names the host; snapshots write it on each of its frames (JSON
/// `"host"`, docs/MEMORY_SNAPSHOT.md). `enter` (NULL: none) is the native
/// function through which the host runs its frames, e.g. CPython's
/// `_PyEval_EvalFrameDefault`: a snapshot puts the host's frames before
/// the innermost native frame of that name, else after the native frames.
///
/// `fn` is called on the allocating thread, from inside the allocation
/// (after its block is taken, outside tessera's locks), only when history
/// records with backtraces: allocations pay nothing more otherwise. It may
/// run on several threads at once and must not unwind; an allocation it
/// makes is recorded without host frames. A registration is kept for the
/// life of the process (a call on another thread may still be running the
/// one a new registration replaces): `fn` and `user` must stay valid as
/// long as the process runs.
///
/// Errors: TSR_ERR_NULL_POINTER (`host` NULL while `fn` is not);
/// TSR_ERR_INVALID_ARGUMENT (`host` empty or not UTF-8, `enter` not
/// UTF-8).
///
/// # Safety
/// `host` and `enter` NULL or NUL-terminated strings; `fn`, if not NULL,
/// callable with `user` from any thread for the life of the process.
#[no_mangle]
pub unsafe extern "C" fn tsr_memory_set_host_frames(
    host: *const c_char,
    enter: *const c_char,
    fn_: TsrHostFramesFn,
    user: *mut c_void,
) -> TsrStatus {
    guard("tsr_memory_set_host_frames", || {
        let Some(f) = fn_ else {
            history::set_host_frames(None);
            return Ok(());
        };
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let host = unsafe { str_arg(host, "host") }?;
        crate::ensure!(
            !host.is_empty(),
            InvalidArgument,
            "host is \"\": expected the host's name, such as \"python\""
        );
        let enter = if enter.is_null() {
            None
        } else {
            // SAFETY: non-NULL and NUL-terminated (the caller's contract).
            Some(unsafe { str_arg(enter, "enter") }?.to_owned())
        };
        let user = user as usize;
        history::set_host_frames(Some(history::HostFrames {
            host: host.to_owned(),
            enter,
            gather: Box::new(move |sink| {
                let mut frames = [TsrHostFrame {
                    file: std::ptr::null(),
                    function: std::ptr::null(),
                    line: 0,
                }; TSR_MAX_HOST_FRAMES];
                // SAFETY: the host registered f with this user pointer for
                // the life of the process; `frames` has room for
                // TSR_MAX_HOST_FRAMES entries.
                let n = unsafe { f(user as *mut c_void, frames.as_mut_ptr(), frames.len()) };
                for fr in &frames[..n.min(frames.len())] {
                    let text = |p: *const c_char| {
                        (!p.is_null()).then(|| {
                            // SAFETY: non-NULL, NUL-terminated and valid
                            // until the allocation returns (TsrHostFrame's
                            // contract).
                            unsafe { CStr::from_ptr(p) }.to_string_lossy()
                        })
                    };
                    let line = u32::try_from(fr.line).ok().filter(|&l| l > 0);
                    if !sink.push(text(fr.file).as_deref(), text(fr.function).as_deref(), line) {
                        break;
                    }
                }
            }),
        }));
        Ok(())
    })
}

/// Starts recording the allocations and frees of every allocator (plugins
/// and caching allocators included) into a ring of the newest
/// `options->max_entries` events; NULL stops recording and forgets the
/// events. Calling it again while recording changes the options and keeps
/// the events that fit.
///
/// # Safety
/// `options` NULL or valid for reads of its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn tsr_memory_record_history(options: *const TsrHistoryOptions) -> TsrStatus {
    guard("tsr_memory_record_history", || {
        if options.is_null() {
            history::stop();
            return Ok(());
        }
        let min = std::mem::offset_of!(RawHistoryOptions, backtraces) + 1;
        // SAFETY: non-NULL, and the caller guarantees struct_size readable
        // bytes; RawHistoryOptions has TsrHistoryOptions' layout with
        // `backtraces` read as a byte.
        let o = unsafe {
            read_sized(
                options as *const RawHistoryOptions,
                min,
                "TsrHistoryOptions",
            )
        }?;
        let _ = o.struct_size;
        history::start(o.max_entries, o.backtraces != 0)
    })
}

/// Writes a snapshot of every allocator's live blocks, the caching
/// allocators' segments and the recorded events to `path`:
/// TSR_SNAPSHOT_JSON (tessera's documented JSON) or TSR_SNAPSHOT_TORCH
/// (the pickle memory_viz loads). TSR_ERR_IO names the path and the OS
/// reason when it can't be written.
///
/// The file is replaced atomically, as by tsr_save: written beside the
/// destination under a temporary name (".NAME.tsr-tmp-PID-N", or
/// ".tsr-tmp-PID-N" where that name is too long) and
/// renamed over it, so a failure leaves the destination as it was. A
/// symbolic link at `path` stays and its target is replaced; a path that
/// is not a regular file (a FIFO, a device such as /dev/null, a
/// directory) is refused with TSR_ERR_IO, without blocking, and left
/// alone.
///
/// # Safety
/// `path` NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tsr_memory_snapshot(
    path: *const c_char,
    format: TsrSnapshotFormat,
) -> TsrStatus {
    guard("tsr_memory_snapshot", || {
        check_not_null(path, "path")?;
        let format = match format {
            TSR_SNAPSHOT_JSON => snapshot::Format::Json,
            TSR_SNAPSHOT_TORCH => snapshot::Format::Torch,
            other => crate::bail!(
                InvalidArgument,
                "format is {other}: expected TSR_SNAPSHOT_JSON (0) or TSR_SNAPSHOT_TORCH (1)"
            ),
        };
        // SAFETY: non-NULL and NUL-terminated (the caller's contract).
        let path = unsafe { CStr::from_ptr(path) };
        let path = path.to_str().map_err(|_| {
            crate::err!(
                InvalidArgument,
                "path {:?} is not UTF-8: expected a UTF-8 file path",
                path
            )
        })?;
        snapshot::write(std::path::Path::new(path), format)
    })
}

/// Adds an observer called when any allocator runs out of memory, after
/// its own recovery failed and before the failing call returns its
/// error, from the failing thread, outside tessera's locks (it may call
/// into tessera). Observers stay for the life of the process.
///
/// Errors: TSR_ERR_NULL_POINTER (`fn_` NULL, as every NULL function
/// pointer).
///
/// # Safety
/// `fn_` must stay callable with `user` from any thread.
#[no_mangle]
pub unsafe extern "C" fn tsr_add_oom_observer(
    fn_: TsrOomObserverFn,
    user: *mut c_void,
) -> TsrStatus {
    guard("tsr_add_oom_observer", || {
        let Some(f) = fn_ else {
            crate::bail!(NullPointer, "fn is NULL: expected an observer function");
        };
        let user = user as usize;
        oom::add_oom_observer(Arc::new(move |e: &oom::OomEvent<'_>| {
            // SAFETY: the host registered f with this user pointer; the
            // name is NUL-terminated and outlives the call.
            unsafe {
                f(
                    user as *mut c_void,
                    e.allocator.as_ptr(),
                    TsrDevice::from_core(e.device),
                    e.requested,
                    e.allocated_bytes,
                )
            }
        }));
        Ok(())
    })
}

/// As tsr_add_oom_observer, with everything known about the failure in
/// one struct: also the device's free and total memory where the
/// allocator can tell (TsrOomInfo).
///
/// Errors: TSR_ERR_NULL_POINTER (`fn_` NULL).
///
/// # Safety
/// `fn_` must stay callable with `user` from any thread.
#[no_mangle]
pub unsafe extern "C" fn tsr_add_oom_info_observer(
    fn_: TsrOomInfoObserverFn,
    user: *mut c_void,
) -> TsrStatus {
    guard("tsr_add_oom_info_observer", || {
        let Some(f) = fn_ else {
            crate::bail!(NullPointer, "fn is NULL: expected an observer function");
        };
        let user = user as usize;
        oom::add_oom_observer(Arc::new(move |e: &oom::OomEvent<'_>| {
            let memory = e.device_memory;
            let info = TsrOomInfo {
                struct_size: std::mem::size_of::<TsrOomInfo>() as u32,
                allocator: e.allocator.as_ptr(),
                device: TsrDevice::from_core(e.device),
                requested: e.requested,
                allocated_bytes: e.allocated_bytes,
                has_device_memory: u8::from(memory.is_some()),
                device_free: memory.map_or(0, |m| m.free),
                device_total: memory.map_or(0, |m| m.total),
            };
            // SAFETY: the host registered f with this user pointer; info
            // and the name it points to outlive the call.
            unsafe { f(user as *mut c_void, &info) }
        }));
        Ok(())
    })
}

/// Frees the blocks every thread keeps in the built-in CPU allocator's
/// caches (tsr_cpu_allocator_release_cache frees only the caller's). A
/// thread inside the allocator at that moment frees its own as it leaves.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_release_all_caches() -> TsrStatus {
    guard("tsr_cpu_allocator_release_all_caches", || {
        cpu::release_all_caches();
        Ok(())
    })
}

/// Whether memory history records now.
#[no_mangle]
pub extern "C" fn tsr_memory_history_is_recording() -> bool {
    guard_value(
        "tsr_memory_history_is_recording",
        false,
        history::is_recording,
    )
}
