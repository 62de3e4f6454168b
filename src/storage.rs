//! Storages: a refcounted span of bytes with the allocator that made it
//! (c10's StorageImpl).
//!
//! Reads are safe. Changes to a storage shared between threads (resize,
//! set_data_ptr, share_external) are `unsafe` with the same contract as
//! c10: no other thread may use the storage during the call.

use crate::allocator::{self, Allocator};
use crate::data_ptr::DataPtr;
use crate::device::{Device, DeviceType};
use crate::error::Result;
use crate::refcount::{RcTarget, Ref, WeakRef};
use std::cell::UnsafeCell;
use std::ffi::c_void;

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

    /// Swaps in external memory: non-resizable, no allocator; the old data
    /// is freed. Callers check uniqueness first (share_external).
    ///
    /// # Safety
    /// No other thread may use this storage during the call.
    pub(crate) unsafe fn replace_data(&self, data_ptr: DataPtr, nbytes: usize) {
        // SAFETY: the caller guarantees no other thread uses the storage
        // during the call, state_mut's requirement.
        let state = unsafe { self.state_mut() };
        state.data_ptr = data_ptr;
        state.nbytes = nbytes;
        state.resizable = false;
        state.allocator = AllocatorHold::None;
    }

    /// Resizes to `nbytes` (c10's rules): only a resizable storage; new
    /// memory from its allocator; the first min(old, new) bytes are kept,
    /// the rest is uninitialized.
    ///
    /// # Safety
    /// No other thread may use this storage (through any handle, or a
    /// tensor on it) during the call; pointers to the old data become
    /// dangling.
    pub unsafe fn resize(&self, nbytes: usize) -> Result<()> {
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
        // SAFETY: as above: no other thread uses the storage during the
        // call (the caller's guarantee).
        let state = unsafe { self.state_mut() };
        state.data_ptr = new_ptr;
        state.nbytes = nbytes;
        Ok(())
    }

    /// Sets every byte to `byte`.
    pub fn fill(&self, byte: u8) -> Result<()> {
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
        unsafe { self.0.replace_data(data_ptr, nbytes) };
        Ok(())
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
            .finish()
    }
}

#[cfg(test)]
mod tests;
