//! Shared-memory storages (torch's `share_memory_`, and its
//! file-descriptor and file-system sharing strategies).
//!
//! A shared storage's DataPtr owns a [`Segment`]: a descriptor of a
//! shared-memory object and a `MAP_SHARED` mapping of it. Two kinds:
//!
//! - anonymous (memfd on Linux): what `share_memory` makes. Other
//!   processes reach it through a descriptor (`share_fd` / `from_fd`);
//!   the kernel frees it when the last descriptor and mapping are gone, so
//!   nothing is left behind even when every process crashes.
//! - named (POSIX `shm_open`): what `share_name` makes, for unrelated
//!   processes (`open_shared`). Every storage using the segment, in any
//!   process, holds a shared flock on it; the one released last gets the
//!   exclusive lock and removes the name (`shm_unlink`). A process that
//!   dies without releasing leaves the name in /dev/shm (see docs/C_API.md,
//!   "Shared memory"). The object ends with a 64-byte trailer {magic,
//!   nbytes} after the data, so that the data of every segment starts at
//!   offset 0 of its descriptor: a descriptor of a named segment maps with
//!   `from_fd` like any other. `named.rs` has the protocol and why the
//!   count is not kept inside the segment (c10's RefcountedMapAllocator
//!   keeps it there): releasing never touches the segment's memory, which
//!   a peer can take away with ftruncate.
//!
//! A peer that shrinks an object after it is mapped makes reads and
//! writes of the missing pages fault (SIGBUS), as with any shared file
//! mapping; that is the host's affair, as for file storages. Nothing
//! tessera does to make, open or release a segment touches its mapping.
//!
//! The objects, mappings and locks are the OS's: `platform::shm` (on
//! Windows named segments are named file mappings, whose names the kernel
//! removes with their last handle; the anonymous segments and descriptors
//! are refused, Unsupported, naming the platform; docs/PLATFORMS.md).

use super::{Storage, StorageImpl};
use crate::data_ptr::{same_deleter, DataPtr};
use crate::device::{Device, DeviceType};
use crate::error::Result;
use crate::platform::shm::{named, Segment};
use crate::platform::shm::{OwnedFd, RawFd};
use std::ffi::{c_void, CStr, CString};
use std::sync::Mutex;

/// The longest name (bytes after the leading '/') POSIX shm accepts on
/// Linux (NAME_MAX).
pub const MAX_NAME_LEN: usize = 255;
pub use crate::platform::shm::NEW_NAME_LEN;

unsafe extern "C" fn release_segment(ctx: *mut c_void) {
    // SAFETY: ctx is the Box<Segment> that into_data_ptr leaked, and the
    // DataPtr runs its deleter exactly once.
    drop(unsafe { Box::from_raw(ctx as *mut Segment) });
}

fn into_data_ptr(seg: Segment) -> DataPtr {
    let base = seg.base() as *mut c_void;
    let ctx = Box::into_raw(Box::new(seg)) as *mut c_void;
    // SAFETY: release_segment frees the box once; the mapping at `base`
    // lives until then.
    unsafe { DataPtr::from_raw_parts(base, ctx, Some(release_segment), Device::CPU) }
}

/// The segment behind a DataPtr made here.
fn segment_of(dp: &DataPtr) -> Option<&Segment> {
    if !same_deleter(dp.deleter(), Some(release_segment)) || dp.context().is_null() {
        return None;
    }
    // SAFETY: a DataPtr whose deleter is release_segment owns a Segment
    // as its context, alive as long as the DataPtr.
    Some(unsafe { &*(dp.context() as *const Segment) })
}

/// Locks that serialize share_memory / share_name on one storage (striped
/// by the storage's address).
static LOCKS: [Mutex<()>; 16] = [const { Mutex::new(()) }; 16];

fn lock_for(s: &StorageImpl) -> std::sync::MutexGuard<'static, ()> {
    let i = (s as *const StorageImpl as usize >> 6) % LOCKS.len();
    LOCKS[i].lock().unwrap_or_else(|p| p.into_inner())
}

fn check_name(name: &[u8]) -> Result<()> {
    let shown = String::from_utf8_lossy(name);
    let rest = name.strip_prefix(b"/").unwrap_or(name);
    crate::ensure!(
        !rest.is_empty(),
        InvalidArgument,
        "name \"{shown}\" is empty: expected a name such as \"/tessera-...\""
    );
    crate::ensure!(
        rest.len() <= MAX_NAME_LEN,
        InvalidArgument,
        "name of {} bytes is too long: at most {MAX_NAME_LEN} bytes after the leading '/'",
        rest.len()
    );
    crate::ensure!(
        !rest.contains(&b'/'),
        InvalidArgument,
        "name \"{shown}\" has a '/' after the first character: expected one path component"
    );
    Ok(())
}

impl StorageImpl {
    /// The shared-memory segment this storage's data lives in, if any.
    pub(crate) fn segment(&self) -> Option<&Segment> {
        segment_of(&self.state().data_ptr)
    }

    /// Whether the data is shared between processes: shared-memory
    /// storages, SHARED file storages and CUDA memory (as torch's
    /// is_shared).
    pub fn is_shared(&self) -> bool {
        self.segment().is_some()
            || self.filename().is_some()
            || self.device().device_type == DeviceType::Cuda
    }

    /// The POSIX name of a storage in a named segment.
    pub fn shared_name(&self) -> Option<CString> {
        self.segment()?.name().map(CStr::to_owned)
    }

    /// A new descriptor (close-on-exec; the caller owns it) of the
    /// shared-memory object this storage lives in.
    pub fn share_fd(&self) -> Result<OwnedFd> {
        self.check_no_alias("share_fd")?;
        let Some(seg) = self.segment() else {
            crate::bail!(
                InvalidArgument,
                "the storage ({} bytes on {}) is not in shared memory: expected a storage \
                 made shared by share_memory, from_fd or open_shared",
                self.nbytes(),
                self.device()
            );
        };
        seg.dup_fd()
    }

    /// Moves the bytes into an anonymous shared-memory segment in place
    /// (torch's share_memory_): the DataPtr is swapped, every tensor on
    /// the storage sees the same values at the new address, the old
    /// memory is freed, the storage becomes non-resizable and loses its
    /// allocator. No-op when already shared (and for CUDA storages).
    /// Concurrent calls on one storage are serialized: one moves.
    ///
    /// # Safety
    /// No other thread may use the storage during the call, except
    /// through `share_memory` / `share_name`; pointers to the old data
    /// become dangling.
    pub unsafe fn share_memory(&self) -> Result<()> {
        let _guard = lock_for(self);
        if self.is_shared() {
            return Ok(());
        }
        self.check_host("share_memory")?;
        self.check_replaceable("share_memory")?;
        let seg = crate::platform::shm::anonymous_copy(self.data() as *const u8, self.nbytes())?;
        // SAFETY: the caller's contract, and the lock, keep every other
        // thread off the storage.
        unsafe { self.replace_data(into_data_ptr(seg), self.nbytes()) }?;
        Ok(())
    }

    /// Moves the bytes into a named segment in place (as share_memory)
    /// unless they are in one already, and returns the name. A storage
    /// in an anonymous segment moves once more (descriptors given out
    /// before keep the old segment).
    ///
    /// # Safety
    /// As [`StorageImpl::share_memory`].
    pub unsafe fn share_name(&self) -> Result<CString> {
        self.check_no_alias("share_name")?;
        let _guard = lock_for(self);
        if let Some(name) = self.shared_name() {
            return Ok(name);
        }
        self.check_host("share_name")?;
        self.check_replaceable("share_name")?;
        let seg = named::create(self.data() as *const u8, self.nbytes())?;
        let name = seg.name().map(CStr::to_owned).expect("a named segment");
        // SAFETY: as in share_memory.
        unsafe { self.replace_data(into_data_ptr(seg), self.nbytes()) }?;
        Ok(name)
    }

    /// Refuses to hand out a way into a read-only storage's memory (a
    /// descriptor or a name): every one of them maps it writable, so a
    /// peer could change bytes this process relies on not changing.
    fn check_no_alias(&self, what: &str) -> Result<()> {
        crate::ensure!(
            !self.is_read_only(),
            ReadOnly,
            "the storage of {} bytes is read-only: {what} would hand out a writable alias of its \
             memory (expected a writable storage; copy it with clone_storage to share the bytes)",
            self.nbytes()
        );
        Ok(())
    }

    fn check_host(&self, what: &str) -> Result<()> {
        let d = self.device();
        crate::ensure!(
            d.is_cpu(),
            Unsupported,
            "{what} of a {d} storage: only CPU storages move into shared memory"
        );
        Ok(())
    }
}

impl Storage {
    /// A storage over the shared-memory object (or regular file) behind
    /// `fd` (borrowed: duplicated, the caller keeps `fd`): its first
    /// `nbytes` bytes (0: the whole object), mapped shared. A descriptor
    /// opened read-only gives a read-only mapping and a read-only storage.
    pub fn from_fd(fd: RawFd, nbytes: usize) -> Result<Storage> {
        let (seg, nbytes, read_only) = crate::platform::shm::from_fd(fd, nbytes)?;
        let s = Storage::from_data_ptr(into_data_ptr(seg), nbytes);
        if read_only {
            s.make_read_only();
        }
        Ok(s)
    }

    /// A storage over the named segment `name` made by `share_name` (in
    /// this or another process); it holds one shared lock of the segment
    /// (named.rs), so the name stays while it lives.
    pub fn open_shared(name: &CStr) -> Result<Storage> {
        check_name(name.to_bytes())?;
        let (seg, nbytes) = named::open(name)?;
        Ok(Storage::from_data_ptr(into_data_ptr(seg), nbytes))
    }
}

// The tests make and inspect POSIX descriptors and names.
#[cfg(all(test, unix))]
mod tests;
// Named segments on every platform, across processes too.
#[cfg(test)]
mod named_tests;
