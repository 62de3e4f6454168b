//! Shared memory: anonymous segments reached by descriptor, named
//! segments reached by name, their mappings and the locks that decide who
//! removes a name (storage/shm.rs has the model). Unix: memfd / POSIX
//! `shm_open`, `flock`, `mmap` (`unix/`). Windows: refused (`windows.rs`).

/// The length of the names `share_name` makes, without the NUL:
/// "/tessera-" + 8 hex digits (pid) + "-" + 16 hex digits.
pub const NEW_NAME_LEN: usize = 9 + 8 + 1 + 16;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
