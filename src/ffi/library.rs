//! Library-wide functions: version and threads.

use super::call::guard_value;
use std::ffi::c_char;

/// Major version, as in tsr_version().
pub const TSR_VERSION_MAJOR: u32 = 0;
/// Minor version.
pub const TSR_VERSION_MINOR: u32 = 2;
/// Patch version.
pub const TSR_VERSION_PATCH: u32 = 0;

/// The library version, "MAJOR.MINOR.PATCH". Static; never NULL.
#[no_mangle]
pub extern "C" fn tsr_version() -> *const c_char {
    guard_value("tsr_version", c"".as_ptr(), || {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
    })
}

/// Sets the number of threads parallel loops (tsr_iter_for_each, the
/// built-in kernels) use; values below 1 mean 1. Process-wide.
#[no_mangle]
pub extern "C" fn tsr_set_num_threads(n: i32) {
    guard_value("tsr_set_num_threads", (), || {
        crate::parallel::set_num_threads(n.max(1) as usize)
    })
}

/// The number of threads parallel loops use (default: the machine's
/// available parallelism).
#[no_mangle]
pub extern "C" fn tsr_get_num_threads() -> i32 {
    guard_value("tsr_get_num_threads", 1, || {
        crate::parallel::get_num_threads().min(i32::MAX as usize) as i32
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_macros_match_the_crate() {
        let v = format!("{TSR_VERSION_MAJOR}.{TSR_VERSION_MINOR}.{TSR_VERSION_PATCH}");
        assert_eq!(v, env!("CARGO_PKG_VERSION"));
        // SAFETY: tsr_version returns a static NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(tsr_version()) };
        assert_eq!(s.to_str().unwrap(), v);
    }
}
