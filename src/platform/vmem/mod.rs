//! Address space: a reservation with no access and no commit charge,
//! pages committed (readable, writable, zero) and decommitted (their
//! memory back to the system at once) inside it, and the host's free and
//! total memory. Unix: `mmap` / `munmap` (`unix.rs`); Windows:
//! `VirtualAlloc` / `VirtualFree` and `GlobalMemoryStatusEx`
//! (`windows.rs`).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;

/// Why the host's memory could not be read.
pub(crate) enum NoMemoryInfo {
    /// The query failed (the message says how).
    #[cfg_attr(not(any(target_os = "linux", windows)), allow(dead_code))]
    Failed(String),
    /// This OS has no query for it.
    #[cfg_attr(any(target_os = "linux", windows), allow(dead_code))]
    Unsupported(String),
}
