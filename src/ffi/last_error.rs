//! The exports that read and set the calling thread's last-error message
//! and name status codes. The slot itself is in ffi/error.rs.

use super::call::guard_value;
use super::error::{clear_message, last_message, store_message};
use super::types::*;
use std::ffi::{c_char, CStr};

/// The message of the last failure on the calling thread, or "" if none.
/// The string stays valid until this thread's next failing call. Never
/// NULL.
#[no_mangle]
pub extern "C" fn tsr_last_error_message() -> *const c_char {
    guard_value("tsr_last_error_message", c"".as_ptr(), last_message)
}

/// Clears the calling thread's last error message.
#[no_mangle]
pub extern "C" fn tsr_clear_last_error() {
    guard_value("tsr_clear_last_error", (), clear_message)
}

/// Records a message as the calling thread's last error. For allocator
/// plugins and other callbacks: a callback that fails calls this, then
/// returns its error status; tessera passes the message on to the caller.
/// `message` NULL records "". Returns `status` unchanged, so a plugin can
/// write `return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "...");`.
///
/// # Safety
/// `message` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tsr_set_last_error(
    status: TsrStatus,
    message: *const c_char,
) -> TsrStatus {
    guard_value("tsr_set_last_error", status, || {
        let text = if message.is_null() {
            String::new()
        } else {
            // SAFETY: the caller passes a NUL-terminated string.
            unsafe { CStr::from_ptr(message) }
                .to_string_lossy()
                .into_owned()
        };
        store_message(text);
        status
    })
}

/// The name of a status code ("TSR_OK", "TSR_ERR_SHAPE", ...), or
/// "TSR_ERR_UNKNOWN" for a number that is not a status. Never NULL; static.
#[no_mangle]
pub extern "C" fn tsr_status_name(status: TsrStatus) -> *const c_char {
    guard_value("tsr_status_name", c"TSR_ERR_UNKNOWN".as_ptr(), || {
        let name: &'static CStr = match status {
            TSR_OK => c"TSR_OK",
            TSR_ERR_INVALID_ARGUMENT => c"TSR_ERR_INVALID_ARGUMENT",
            TSR_ERR_NULL_POINTER => c"TSR_ERR_NULL_POINTER",
            TSR_ERR_OUT_OF_MEMORY => c"TSR_ERR_OUT_OF_MEMORY",
            TSR_ERR_SHAPE => c"TSR_ERR_SHAPE",
            TSR_ERR_DTYPE => c"TSR_ERR_DTYPE",
            TSR_ERR_DEVICE => c"TSR_ERR_DEVICE",
            TSR_ERR_OVERLAP => c"TSR_ERR_OVERLAP",
            TSR_ERR_NOT_RESIZABLE => c"TSR_ERR_NOT_RESIZABLE",
            TSR_ERR_UNSUPPORTED => c"TSR_ERR_UNSUPPORTED",
            TSR_ERR_INTERNAL => c"TSR_ERR_INTERNAL",
            TSR_ERR_DEAD_OBJECT => c"TSR_ERR_DEAD_OBJECT",
            TSR_ERR_ZERO_DIVISION => c"TSR_ERR_ZERO_DIVISION",
            TSR_ERR_READ_ONLY => c"TSR_ERR_READ_ONLY",
            TSR_ERR_IO => c"TSR_ERR_IO",
            TSR_ERR_FORMAT => c"TSR_ERR_FORMAT",
            TSR_ERR_CANCELLED => c"TSR_ERR_CANCELLED",
            _ => c"TSR_ERR_UNKNOWN",
        };
        name.as_ptr()
    })
}
