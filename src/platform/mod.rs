//! The operating system, one module per concept: the only place in the
//! crate that names `libc`'s or Win32's calls for them, or `cfg`s an OS.
//! Each concept is a set of plain functions (and a few owner types) with
//! one implementation per OS family chosen at compile time: a Linux build
//! compiles exactly the code it ran before the layer existed, inlined
//! where it was, with no indirection (docs/PLATFORMS.md has the table of
//! what each OS does).
//!
//! - [`fs`]: opening a caller's file (non-blocking, close-on-exec),
//!   permissions, reserving disk, durable writes (fsync; `F_FULLFSYNC` on
//!   macOS through std's `sync_all`), directory syncs, exchanging two
//!   directories, in-kernel copies, positioned reads, file identity, path
//!   bytes, errno names.
//! - [`vmem`]: reserving, committing and decommitting address space; the
//!   host's memory.
//! - [`heap`]: the C heap and aligned blocks, huge-page advice.
//! - [`shm`]: shared memory (anonymous and by name) with its locks.
//! - [`process`]: the process id, fork handlers, the process-wide memory
//!   barrier.
//!
//! Two concepts keep their own portable fallbacks where they are (both in
//! hot paths, chosen by `cfg` inside one file each): the thread-local slot
//! (`allocator/thread_slot.rs`) and the clock (`allocator/history/clock.rs`).

pub(crate) mod fs;
pub(crate) mod heap;
pub(crate) mod process;
pub(crate) mod shm;
pub(crate) mod vmem;

/// The name of the OS this build is for, for messages ("... is not
/// supported on Windows").
pub(crate) const OS_NAME: &str = if cfg!(windows) {
    "Windows"
} else if cfg!(target_os = "macos") {
    "macOS"
} else if cfg!(target_os = "linux") {
    "Linux"
} else {
    "this platform"
};
