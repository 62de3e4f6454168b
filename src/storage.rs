//! Storages: a refcounted span of bytes with the allocator that made it
//! (c10's StorageImpl).
//!
//! Reads are safe. Changes to a storage shared between threads (resize,
//! set_data_ptr, share_external) are `unsafe` with the same contract as
//! c10: no other thread may use the storage during the call.
//!
//! A storage may be read-only (beyond c10: NumPy's writeable flag,
//! DLPack's READ_ONLY, a read-only file mapping): the flag is one way
//! ([`StorageImpl::make_read_only`]) and every write path of the core
//! refuses such a storage with `ErrorKind::ReadOnly` (fill, copy into,
//! resize, share_external, set_data_ptr here; kernels' and iterator
//! outputs through [`StorageImpl::check_writable`]). File-backed storages
//! are in `file.rs`.

pub mod file;

use crate::allocator::{self, Allocator};
use crate::data_ptr::DataPtr;
use crate::device::{Device, DeviceType};
use crate::error::Result;
use crate::refcount::{RcTarget, Ref, WeakRef};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub mod shm;

/// Which allocator made a storage's data.
enum AllocatorHold {
    /// External memory (from a DataPtr).
    None,
    /// The built-in CPU allocator: lives for the whole process, so no
    /// reference count is taken.
    BuiltinCpu,
    /// Any other allocator, kept alive by this reference.
    Shared(Allocator),
}

impl AllocatorHold {
    fn of(allocator: &Allocator) -> AllocatorHold {
        if allocator.is_builtin_cpu() {
            AllocatorHold::BuiltinCpu
        } else {
            AllocatorHold::Shared(allocator.clone())
        }
    }

    fn get(&self) -> Option<&Allocator> {
        match self {
            AllocatorHold::None => None,
            AllocatorHold::BuiltinCpu => Some(crate::allocator::cpu::builtin_ref()),
            AllocatorHold::Shared(a) => Some(a),
        }
    }
}

struct StorageState {
    data_ptr: DataPtr,
    nbytes: usize,
    resizable: bool,
    allocator: AllocatorHold,
}

/// The object behind a [`Storage`] handle.
pub struct StorageImpl {
    state: UnsafeCell<StorageState>,
    /// Set once by make_read_only (or at creation), never cleared.
    read_only: AtomicBool,
    /// DLPack exports of this storage not yet deleted: while any is alive
    /// its consumer points at the current memory, so set_data_ptr refuses.
    exports: AtomicUsize,
}

// SAFETY: shared access only reads `state`; every write goes through an
// `unsafe` method whose contract forbids concurrent use of the storage, or
// through `&mut` access (release_resources, Drop).
unsafe impl Sync for StorageImpl {}
// SAFETY: all fields are Send (DataPtr and Allocator are Send).
unsafe impl Send for StorageImpl {}

impl RcTarget for StorageImpl {
    fn release_resources(&mut self) {
        let state = self.state.get_mut();
        state.data_ptr.clear();
        state.allocator = AllocatorHold::None;
    }
}

impl StorageImpl {
    fn state(&self) -> &StorageState {
        // SAFETY: writes only happen under the no-concurrent-use contract of
        // the unsafe mutators, so no write overlaps this read.
        unsafe { &*self.state.get() }
    }

    /// The size in bytes.
    pub fn nbytes(&self) -> usize {
        self.state().nbytes
    }

    /// The data address (NULL when empty).
    pub fn data(&self) -> *mut c_void {
        self.state().data_ptr.get()
    }

    /// The device of the data.
    pub fn device(&self) -> Device {
        self.state().data_ptr.device()
    }

    /// Whether resize is allowed.
    pub fn resizable(&self) -> bool {
        self.state().resizable
    }

    /// The allocator that made the data, if any (None for external memory).
    pub fn allocator(&self) -> Option<&Allocator> {
        self.state().allocator.get()
    }

    /// The allocator to use for new memory on this storage's device: its
    /// own, else the registry's for the device type.
    pub fn allocator_for_device(&self) -> Result<Allocator> {
        match self.allocator() {
            Some(a) => Ok(a.clone()),
            None => registry_allocator(self.device()),
        }
    }

    /// Whether the storage is read-only: every write path refuses it.
    pub fn is_read_only(&self) -> bool {
        self.read_only.load(Ordering::Acquire)
    }

    /// Makes the storage read-only, for good (there is no way back: a
    /// reader may rely on the memory not changing through tessera). Safe
    /// from any thread; a write already running finishes.
    pub fn make_read_only(&self) {
        self.read_only.store(true, Ordering::Release);
    }

    /// Refuses a read-only storage: `Err(ReadOnly)` naming `what` was
    /// attempted.
    pub fn check_writable(&self, what: &str) -> Result<()> {
        crate::ensure!(
            !self.is_read_only(),
            ReadOnly,
            "the storage of {} bytes is read-only: {what} would write it (expected a writable storage)",
            self.nbytes()
        );
        Ok(())
    }

    /// The checks before the storage's memory is replaced by other memory
    /// (set_data_ptr, share_external, a move into shared memory): a
    /// writable storage (ReadOnly) with no live DLPack export, whose
    /// consumer would keep the old, freed address (InvalidArgument).
    pub fn check_replaceable(&self, what: &str) -> Result<()> {
        self.check_writable(what)?;
        let live = self.live_exports();
        crate::ensure!(
            live == 0,
            InvalidArgument,
            "the storage has {live} live DLPack export(s): their consumers point at the current \
             memory, so {what} cannot move it (expected no live export; call the exports' \
             deleters first)"
        );
        Ok(())
    }

    /// Records a DLPack export of this storage (its consumer points at the
    /// current memory until [`StorageImpl::export_ended`]).
    pub(crate) fn export_started(&self) {
        self.exports.fetch_add(1, Ordering::AcqRel);
    }

    /// Records that a DLPack export of this storage was deleted.
    pub(crate) fn export_ended(&self) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    /// How many DLPack exports of this storage are alive.
    pub fn live_exports(&self) -> usize {
        self.exports.load(Ordering::Acquire)
    }

    /// Records that CUDA `stream` uses this storage's memory (see
    /// `Tensor::record_stream`); nothing for memory of an allocator
    /// without streams. Errors: not CUDA memory (Device).
    pub fn record_stream(&self, stream: usize) -> Result<()> {
        let device = self.device();
        crate::ensure!(
            device.device_type == crate::device::DeviceType::Cuda,
            Device,
            "record_stream needs CUDA memory: this storage is on {device}"
        );
        crate::allocator::caching::record_stream(self.data_ptr(), stream).map(|_| ())
    }

    /// The data pointer itself, borrowed (c10's `storage.data_ptr()`, a
    /// `const DataPtr&`): its context and deleter, e.g. for
    /// `cast_context`. Valid until the data is replaced or released.
    pub fn data_ptr(&self) -> &DataPtr {
        &self.state().data_ptr
    }

    /// Replaces the data pointer (c10's `StorageImpl::set_data_ptr` plus
    /// `set_nbytes`): `new` is consumed, nbytes becomes `nbytes`, and the
    /// old pointer is returned (dropping it frees the old memory). The
    /// allocator and the resizable flag are kept, as in c10; every tensor
    /// on the storage sees the new memory at once.
    ///
    /// Refused (and `new` dropped, which frees it; callers that must keep
    /// it check first with [`StorageImpl::check_set_data_ptr`]): a
    /// read-only storage (ReadOnly); a storage with a live DLPack export
    /// (InvalidArgument: its consumer would keep the old address); `new`
    /// on another device (InvalidArgument); NULL data with nbytes > 0
    /// (InvalidArgument).
    ///
    /// # Safety
    /// No other thread may use this storage (through any handle, or a
    /// tensor on it) during the call; pointers to the old data obtained
    /// before stay the caller's business (they point at the returned
    /// DataPtr's memory). Tensors on the storage must fit in `nbytes`
    /// (as after a resize, a view past the end would read out of bounds).
    pub unsafe fn set_data_ptr(&self, new: DataPtr, nbytes: usize) -> Result<DataPtr> {
        self.check_set_data_ptr(&new, nbytes)?;
        // SAFETY: the caller guarantees no other thread uses the storage
        // during the call, state_mut's requirement.
        let state = unsafe { self.state_mut() };
        state.nbytes = nbytes;
        Ok(std::mem::replace(&mut state.data_ptr, new))
    }

    /// The checks of [`StorageImpl::set_data_ptr`], without changing
    /// anything.
    pub fn check_set_data_ptr(&self, new: &DataPtr, nbytes: usize) -> Result<()> {
        self.check_replaceable("replacing its data pointer")?;
        let (old, dev) = (self.device(), new.device());
        crate::ensure!(
            old.same_as(dev),
            InvalidArgument,
            "the new data pointer is on {dev} but the storage is on {old}: expected the same device"
        );
        crate::ensure!(
            !(new.is_null() && nbytes > 0),
            InvalidArgument,
            "the new data pointer's data is NULL but nbytes is {nbytes}: expected memory of that size"
        );
        Ok(())
    }

    /// Sets whether resize is allowed (c10's set_resizable); a storage
    /// whose data is not its allocator's (share_memory, external memory)
    /// must not be resizable.
    ///
    /// # Safety
    /// No other thread may use this storage during the call.
    pub unsafe fn set_resizable(&self, resizable: bool) {
        // SAFETY: the caller guarantees no other thread uses the storage
        // during the call, state_mut's requirement.
        unsafe { self.state_mut() }.resizable = resizable;
    }

    /// Swaps in external memory: non-resizable, no allocator; the old data
    /// is freed. Callers check uniqueness first (share_external). Refused
    /// for a read-only storage (`data_ptr` is then dropped).
    ///
    /// # Safety
    /// No other thread may use this storage during the call.
    pub(crate) unsafe fn replace_data(&self, data_ptr: DataPtr, nbytes: usize) -> Result<()> {
        self.check_replaceable("sharing an external pointer")?;
        // SAFETY: the caller guarantees no other thread uses the storage
        // during the call, state_mut's requirement.
        let state = unsafe { self.state_mut() };
        state.data_ptr = data_ptr;
        state.nbytes = nbytes;
        state.resizable = false;
        state.allocator = AllocatorHold::None;
        Ok(())
    }

    /// Resizes to `nbytes` (c10's rules): only a resizable storage; new
    /// memory from its allocator; the first min(old, new) bytes are kept,
    /// the rest is uninitialized. Refused, as every call that moves the
    /// memory ([`StorageImpl::check_replaceable`]), for a read-only storage
    /// and while a DLPack export of it is alive (its consumer would keep
    /// the old, freed address).
    ///
    /// # Safety
    /// No other thread may use this storage (through any handle, or a
    /// tensor on it) during the call; pointers to the old data become
    /// dangling.
    pub unsafe fn resize(&self, nbytes: usize) -> Result<()> {
        self.check_replaceable("a resize")?;
        crate::ensure!(
            self.resizable(),
            NotResizable,
            "storage of {} bytes is not resizable: cannot resize it to {nbytes} bytes",
            self.nbytes()
        );
        let device = self.device();
        if device.device_type == DeviceType::Meta {
            // SAFETY: the caller guarantees no other thread uses the
            // storage during the call, state_mut's requirement.
            unsafe { self.state_mut() }.nbytes = nbytes;
            return Ok(());
        }
        let alloc = self.allocator_for_device()?;
        let new_ptr = alloc.allocate_on(nbytes, device)?;
        let keep = self.nbytes().min(nbytes);
        if keep > 0 {
            // SAFETY: both buffers hold at least `keep` bytes and are
            // distinct allocations.
            unsafe { alloc.copy_data(new_ptr.get(), self.data(), keep)? };
        }
        // SAFETY: resize's contract is state_mut's: no other thread uses
        // this storage until resize returns; on this thread no borrow from
        // state() is live (nbytes() and data() above returned copies), so
        // the &mut is the only reference for the two writes below.
        let state = unsafe { self.state_mut() };
        state.data_ptr = new_ptr;
        state.nbytes = nbytes;
        Ok(())
    }

    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) -> Result<()> {
        self.check_writable("a fill")?;
        let n = self.nbytes();
        if n == 0 {
            return Ok(());
        }
        crate::ensure!(
            self.device().is_cpu(),
            Unsupported,
            "fill of a {} storage: only CPU storages can be filled byte-wise",
            self.device()
        );
        // SAFETY: the storage owns n bytes of host memory at data().
        unsafe { std::ptr::write_bytes(self.data() as *mut u8, byte, n) };
        Ok(())
    }

    /// Copies all bytes of `src` into `self` (same nbytes); across devices
    /// through the device allocator's copy function.
    pub fn copy_from(&self, src: &StorageImpl) -> Result<()> {
        self.check_writable("a copy into it")?;
        let (n, m) = (self.nbytes(), src.nbytes());
        crate::ensure!(
            n == m,
            Shape,
            "storage sizes differ: destination has {n} bytes, source {m}: expected equal sizes"
        );
        if n == 0 || self.data() == src.data() {
            return Ok(());
        }
        let copier = if !self.device().is_cpu() {
            self.allocator_for_device()?
        } else if !src.device().is_cpu() {
            src.allocator_for_device()?
        } else {
            // SAFETY: two distinct host buffers of n bytes each (equal
            // addresses returned early); they may overlap only if two
            // storages alias the same memory, which memmove handles.
            unsafe { std::ptr::copy(src.data() as *const u8, self.data() as *mut u8, n) };
            return Ok(());
        };
        // SAFETY: both buffers hold n bytes.
        unsafe { copier.copy_data(self.data(), src.data(), n) }
    }

    /// A new storage on the same device (same allocator) with a copy of
    /// the bytes.
    pub fn clone_storage(&self) -> Result<Storage> {
        let device = self.device();
        let copy = if device.device_type == DeviceType::Meta {
            Storage::new(self.nbytes(), device, self.resizable())?
        } else {
            let alloc = self.allocator_for_device()?;
            Storage::new_on(self.nbytes(), &alloc, device, self.resizable())?
        };
        copy.copy_from(self)?;
        Ok(copy)
    }

    /// # Safety
    /// No other thread may use the storage during the call.
    #[allow(clippy::mut_from_ref)]
    unsafe fn state_mut(&self) -> &mut StorageState {
        // SAFETY: the state is in an UnsafeCell; the caller guarantees that
        // no other thread uses the storage during the call, and on this
        // thread the mutators of this file use the &mut for a statement or
        // two, with no borrow from state() live across it, so the &mut is
        // the only reference to the state while it lives.
        unsafe { &mut *self.state.get() }
    }
}

fn registry_allocator(device: Device) -> Result<Allocator> {
    allocator::get_allocator(device.device_type)
        .ok_or_else(|| crate::err!(Device, "no allocator is registered for device {device}"))
}

/// A refcounted handle to a storage; clones share it.
#[derive(Clone)]
pub struct Storage(pub(crate) Ref<StorageImpl>);

/// A weak handle to a storage (does not keep its data alive).
#[derive(Clone)]
pub struct WeakStorage(pub(crate) WeakRef<StorageImpl>);

impl std::ops::Deref for Storage {
    type Target = StorageImpl;
    fn deref(&self) -> &StorageImpl {
        &self.0
    }
}

impl Storage {
    fn from_state(state: StorageState) -> Storage {
        Storage(Ref::new(StorageImpl {
            state: UnsafeCell::new(state),
            read_only: AtomicBool::new(false),
            exports: AtomicUsize::new(0),
        }))
    }

    /// Allocates `nbytes` on `device` with the allocator registered for its
    /// type. Meta storages hold no data.
    pub fn new(nbytes: usize, device: Device, resizable: bool) -> Result<Storage> {
        if device.device_type == DeviceType::Meta {
            return Ok(Storage::from_state(StorageState {
                data_ptr: DataPtr::empty(device),
                nbytes,
                resizable,
                allocator: AllocatorHold::None,
            }));
        }
        if device.is_cpu() && allocator::registry::cpu_slot_is_builtin() {
            return Storage::new_on(
                nbytes,
                crate::allocator::cpu::builtin_ref(),
                device,
                resizable,
            );
        }
        let alloc = registry_allocator(device)?;
        Storage::new_on(nbytes, &alloc, device, resizable)
    }

    /// Allocates `nbytes` with `allocator` on its default device.
    pub fn with_allocator(
        nbytes: usize,
        allocator: &Allocator,
        resizable: bool,
    ) -> Result<Storage> {
        Storage::new_on(nbytes, allocator, allocator.default_device(), resizable)
    }

    /// Allocates `nbytes` with `allocator` on `device`.
    pub fn new_on(
        nbytes: usize,
        allocator: &Allocator,
        device: Device,
        resizable: bool,
    ) -> Result<Storage> {
        let data_ptr = allocator.allocate_on(nbytes, device)?;
        Ok(Storage::from_state(StorageState {
            data_ptr,
            nbytes,
            resizable,
            allocator: AllocatorHold::of(allocator),
        }))
    }

    /// Wraps external memory (c10's from_blob): not resizable, no
    /// allocator; the data pointer's deleter runs when the storage's data
    /// is released.
    pub fn from_data_ptr(data_ptr: DataPtr, nbytes: usize) -> Storage {
        Storage::from_state(StorageState {
            data_ptr,
            nbytes,
            resizable: false,
            allocator: AllocatorHold::None,
        })
    }

    /// The strong count.
    pub fn use_count(&self) -> usize {
        Ref::use_count(&self.0)
    }

    /// A weak handle.
    pub fn downgrade(&self) -> WeakStorage {
        WeakStorage(Ref::downgrade(&self.0))
    }

    /// Whether two handles share one storage.
    pub fn ptr_eq(a: &Storage, b: &Storage) -> bool {
        Ref::ptr_eq(&a.0, &b.0)
    }

    /// Replaces the data with external memory (c10's
    /// UniqueStorageShareExternalPointer): only when this is the only
    /// strong reference; the storage becomes non-resizable and drops its
    /// allocator. The old data is freed.
    ///
    /// # Safety
    /// No other thread may use this storage during the call.
    pub unsafe fn share_external(&self, data_ptr: DataPtr, nbytes: usize) -> Result<()> {
        let n = self.use_count();
        crate::ensure!(
            n == 1,
            InvalidArgument,
            "the storage has {n} strong references: sharing an external pointer needs it uniquely owned"
        );
        // SAFETY: the caller guarantees no other thread uses the storage
        // during the call, replace_data's requirement.
        unsafe { self.0.replace_data(data_ptr, nbytes) }
    }

    /// The refcounted object (for the C handle).
    pub fn as_rc(&self) -> &Ref<StorageImpl> {
        &self.0
    }

    /// Wraps a refcounted object.
    pub fn from_ref(r: Ref<StorageImpl>) -> Storage {
        Storage(r)
    }

    /// Unwraps into the refcounted object.
    pub fn into_ref(self) -> Ref<StorageImpl> {
        self.0
    }
}

impl WeakStorage {
    /// A strong handle, or None once every strong one is gone.
    pub fn lock(&self) -> Option<Storage> {
        self.0.lock().map(Storage)
    }

    /// Whether every strong handle is gone (the data was freed).
    pub fn expired(&self) -> bool {
        self.0.expired()
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("nbytes", &self.nbytes())
            .field("device", &self.device())
            .field("resizable", &self.resizable())
            .field("read_only", &self.is_read_only())
            .finish()
    }
}

#[cfg(test)]
mod tests;
