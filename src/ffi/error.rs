//! The error side of the ABI: status codes from core errors and back,
//! and the thread-local last-error message (what the guards in
//! ffi/call.rs record), and the NULL-argument errors. Uses only
//! ffi/types.rs of ffi: the exports that read and set the message are in
//! ffi/last_error.rs.

use super::types::*;
use crate::error::{Error, ErrorKind, Result};
use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// The status code of an error kind.
pub(crate) fn status_of(kind: ErrorKind) -> TsrStatus {
    match kind {
        ErrorKind::InvalidArgument => TSR_ERR_INVALID_ARGUMENT,
        ErrorKind::NullPointer => TSR_ERR_NULL_POINTER,
        ErrorKind::OutOfMemory => TSR_ERR_OUT_OF_MEMORY,
        ErrorKind::Shape => TSR_ERR_SHAPE,
        ErrorKind::DType => TSR_ERR_DTYPE,
        ErrorKind::Device => TSR_ERR_DEVICE,
        ErrorKind::Overlap => TSR_ERR_OVERLAP,
        ErrorKind::NotResizable => TSR_ERR_NOT_RESIZABLE,
        ErrorKind::Unsupported => TSR_ERR_UNSUPPORTED,
        ErrorKind::Internal => TSR_ERR_INTERNAL,
        ErrorKind::DeadObject => TSR_ERR_DEAD_OBJECT,
        ErrorKind::ZeroDivision => TSR_ERR_ZERO_DIVISION,
        ErrorKind::ReadOnly => TSR_ERR_READ_ONLY,
        ErrorKind::Io => TSR_ERR_IO,
        ErrorKind::Format => TSR_ERR_FORMAT,
        ErrorKind::Cancelled => TSR_ERR_CANCELLED,
    }
}

/// The error kind of a status code (for statuses returned by C plugins).
pub(crate) fn kind_of(status: TsrStatus) -> ErrorKind {
    match status {
        TSR_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
        TSR_ERR_NULL_POINTER => ErrorKind::NullPointer,
        TSR_ERR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        TSR_ERR_SHAPE => ErrorKind::Shape,
        TSR_ERR_DTYPE => ErrorKind::DType,
        TSR_ERR_DEVICE => ErrorKind::Device,
        TSR_ERR_OVERLAP => ErrorKind::Overlap,
        TSR_ERR_NOT_RESIZABLE => ErrorKind::NotResizable,
        TSR_ERR_UNSUPPORTED => ErrorKind::Unsupported,
        TSR_ERR_DEAD_OBJECT => ErrorKind::DeadObject,
        TSR_ERR_ZERO_DIVISION => ErrorKind::ZeroDivision,
        TSR_ERR_READ_ONLY => ErrorKind::ReadOnly,
        TSR_ERR_IO => ErrorKind::Io,
        TSR_ERR_FORMAT => ErrorKind::Format,
        TSR_ERR_CANCELLED => ErrorKind::Cancelled,
        _ => ErrorKind::Internal,
    }
}

pub(crate) fn store_message(message: String) {
    // Interior NULs cannot be represented in a C string: replace them.
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = c);
}

/// Records `err` as the calling thread's last error, prefixed with the
/// function name, and returns its status.
#[cold]
#[inline(never)]
pub(crate) fn fail(fname: &str, err: &Error) -> TsrStatus {
    store_message(format!("{fname}: {}", err.message()));
    status_of(err.kind())
}

/// The message of a caught panic payload.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Records a caught panic as the last error.
#[cold]
#[inline(never)]
pub(crate) fn record_panic(fname: &str, payload: Box<dyn Any + Send>) {
    store_message(format!(
        "{fname}: internal error (caught panic): {}",
        panic_message(&*payload)
    ));
}

/// Maps a body's error to its status (recording the message).
#[cold]
#[inline(never)]
pub(crate) fn fail_owned(fname: &str, err: Error) -> TsrStatus {
    fail(fname, &err)
}

/// Calls a host callback (an allocator plugin's function) with the calling
/// thread's last-error slot emptied, and returns its status with what it
/// recorded there (tsr_set_last_error). The message that was in the slot
/// before is put back, the same allocation, whatever the callback did: the
/// pointer tsr_last_error_message returned to the host stays valid until
/// the exported call itself fails, as the header promises, even when the
/// call succeeds through a plugin or retries after a plugin's failure.
pub(crate) fn call_host(f: impl FnOnce() -> TsrStatus) -> (TsrStatus, String) {
    let saved = LAST_ERROR.with(|slot| std::mem::take(&mut *slot.borrow_mut()));
    let status = f();
    let recorded = LAST_ERROR.with(|slot| std::mem::replace(&mut *slot.borrow_mut(), saved));
    (status, recorded.to_string_lossy().into_owned())
}

/// The calling thread's last error message (valid until its next failure).
pub(crate) fn last_message() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

/// Empties the calling thread's last error message.
pub(crate) fn clear_message() {
    LAST_ERROR.with(|slot| *slot.borrow_mut() = CString::default())
}

// ---- NULL arguments. ----

/// The error for a NULL pointer argument.
#[cold]
#[inline(never)]
pub(crate) fn null_arg(name: &str) -> Error {
    Error::new(
        ErrorKind::NullPointer,
        format!("argument '{name}' is NULL: expected a valid pointer"),
    )
}

/// Checks that a pointer argument is not NULL.
#[inline(always)]
pub(crate) fn check_not_null<T>(p: *const T, name: &str) -> Result<()> {
    if p.is_null() {
        Err(null_arg(name))
    } else {
        Ok(())
    }
}
