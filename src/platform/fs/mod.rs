//! Files: opening a caller's file without blocking, permissions, reserving
//! disk, durable writes, directory syncs, exchanging two directories,
//! in-kernel copies, positioned reads, file identity, path bytes and
//! errno names. Unix in `unix.rs` (Linux's calls where it has them:
//! fallocate, renameat2, copy_file_range, /proc/self/fd), Windows in
//! `windows.rs`.
//!
//! Durable writes are `File::sync_all` everywhere: std makes it fsync on
//! Linux, `fcntl(F_FULLFSYNC)` on macOS (fsync alone leaves the data in
//! the drive's cache there) and FlushFileBuffers on Windows.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::*;
