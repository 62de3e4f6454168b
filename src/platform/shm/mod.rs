//! Shared memory: anonymous segments reached by descriptor, named
//! segments reached by name, their mappings and the locks that decide who
//! removes a name (storage/shm.rs has the model). Unix: memfd / POSIX
//! `shm_open`, `flock`, `mmap` (`unix/`). Windows: named file mappings
//! (`windows.rs`); no descriptors there, so the anonymous segments and
//! their descriptors are refused.

use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The length of the names `share_name` makes, without the NUL:
/// "/tessera-" + 8 hex digits (pid) + "-" + 16 hex digits.
pub const NEW_NAME_LEN: usize = 9 + 8 + 1 + 16;

static NAME_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A new segment name, [`NEW_NAME_LEN`] bytes: this process's id and a
/// tag no other of its names had.
fn new_name() -> CString {
    let n = NAME_COUNTER.fetch_add(1, Ordering::Relaxed) as u64;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // A counter for this process, mixed with the time so that a reused
    // pid does not meet its predecessor's left-over names.
    let tag = (n << 40) ^ (t & ((1 << 40) - 1)) ^ (n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let s = format!("/tessera-{:08x}-{tag:016x}", std::process::id());
    debug_assert_eq!(s.len(), NEW_NAME_LEN);
    CString::new(s).expect("no NUL in a formatted name")
}

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
