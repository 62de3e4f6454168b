//! Owned data pointers with a C deleter (c10's `DataPtr` / `UniqueVoidPtr`).
//!
//! A leaf: it knows nothing of allocators. The two methods that see
//! through an allocator's statistics wrapper (`compare_exchange_deleter`,
//! `cast_context`) are defined beside that wrapper, in
//! allocator/tracked.rs.

use crate::device::Device;
use std::ffi::c_void;
use std::ptr;

/// A deleter: receives the context of a [`DataPtr`] and frees it. It must
/// be callable from any thread.
pub type DeleterFn = unsafe extern "C" fn(ctx: *mut c_void);

/// Memory with its owner: `data` is the address used, `ctx` what the
/// deleter receives. The deleter runs exactly once, with `ctx`, when `ctx`
/// is non-NULL (even if `data` is NULL); a NULL deleter frees nothing.
pub struct DataPtr {
    data: *mut c_void,
    ctx: *mut c_void,
    deleter: Option<DeleterFn>,
    device: Device,
}

// SAFETY: a DataPtr owns its context like a Box owns its value; the
// deleter contract (documented on DeleterFn) requires it to be callable
// from any thread, so the owner may move between threads.
unsafe impl Send for DataPtr {}
// SAFETY: shared access only reads the pointer values, never calls the
// deleter.
unsafe impl Sync for DataPtr {}

impl DataPtr {
    /// A pointer that owns nothing (data NULL, no deleter).
    pub const fn empty(device: Device) -> DataPtr {
        DataPtr {
            data: ptr::null_mut(),
            ctx: ptr::null_mut(),
            deleter: None,
            device,
        }
    }

    /// Memory that is not owned: `data` stays valid as long as its real
    /// owner says; nothing runs when this pointer is dropped.
    ///
    /// # Safety
    /// `data` must stay valid for as long as this DataPtr and anything built
    /// on it uses it.
    pub unsafe fn borrowed(data: *mut c_void, device: Device) -> DataPtr {
        DataPtr {
            data,
            ctx: ptr::null_mut(),
            deleter: None,
            device,
        }
    }

    /// Takes ownership of `ctx` with `deleter`.
    ///
    /// # Safety
    /// Calling `deleter(ctx)` once, from any thread, when this pointer is
    /// dropped must be sound, and `data` must stay valid until then.
    pub unsafe fn from_raw_parts(
        data: *mut c_void,
        ctx: *mut c_void,
        deleter: Option<DeleterFn>,
        device: Device,
    ) -> DataPtr {
        DataPtr {
            data,
            ctx,
            deleter,
            device,
        }
    }

    /// Gives up ownership: returns (data, ctx, deleter, device) without
    /// running the deleter.
    pub fn into_raw_parts(self) -> (*mut c_void, *mut c_void, Option<DeleterFn>, Device) {
        let parts = (self.data, self.ctx, self.deleter, self.device);
        std::mem::forget(self);
        parts
    }

    /// The data address.
    pub fn get(&self) -> *mut c_void {
        self.data
    }

    /// The context the deleter will receive.
    pub fn context(&self) -> *mut c_void {
        self.ctx
    }

    /// The deleter.
    pub fn deleter(&self) -> Option<DeleterFn> {
        self.deleter
    }

    /// The device the memory lives on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Changes the recorded device (the memory is not moved).
    pub fn set_device(&mut self, device: Device) {
        self.device = device;
    }

    /// Whether the data address is NULL.
    pub fn is_null(&self) -> bool {
        self.data.is_null()
    }

    /// Takes ownership of the context out: the deleter will not run; the
    /// caller now owns `ctx` (c10's release_context). Returns (ctx, deleter).
    pub fn release_context(&mut self) -> (*mut c_void, Option<DeleterFn>) {
        let out = (self.ctx, self.deleter);
        self.ctx = ptr::null_mut();
        self.deleter = None;
        out
    }

    /// Replaces the deleter with `new` only if this pointer's own deleter
    /// is `expected`; returns whether it did. The public
    /// `compare_exchange_deleter`, which also sees through an allocator's
    /// statistics wrapper, is in allocator/tracked.rs, beside the wrapper.
    #[inline]
    pub(crate) fn compare_exchange_own_deleter(
        &mut self,
        expected: Option<DeleterFn>,
        new: Option<DeleterFn>,
    ) -> bool {
        if same_deleter(self.deleter, expected) {
            self.deleter = new;
            return true;
        }
        false
    }

    /// Runs the deleter now (if any) and leaves the pointer empty.
    pub fn clear(&mut self) {
        let old = std::mem::replace(self, DataPtr::empty(self.device));
        drop(old);
    }
}

/// Compares deleters by address.
pub(crate) fn same_deleter(a: Option<DeleterFn>, b: Option<DeleterFn>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => std::ptr::fn_addr_eq(x, y),
        _ => false,
    }
}

impl Drop for DataPtr {
    fn drop(&mut self) {
        if self.ctx.is_null() {
            return;
        }
        if let Some(deleter) = self.deleter {
            // SAFETY: from_raw_parts' contract: calling deleter(ctx) once is
            // sound; ownership of ctx ends here, so it runs exactly once.
            unsafe { deleter(self.ctx) };
        }
    }
}

impl std::fmt::Debug for DataPtr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataPtr")
            .field("data", &self.data)
            .field("ctx", &self.ctx)
            .field("has_deleter", &self.deleter.is_some())
            .field("device", &self.device)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn count(ctx: *mut c_void) {
        assert_eq!(ctx as usize, 0x10);
        CALLS.fetch_add(1, Ordering::SeqCst);
    }
    unsafe extern "C" fn other(_: *mut c_void) {}

    fn counted() -> DataPtr {
        // SAFETY: `count` accepts any context and frees nothing.
        unsafe {
            DataPtr::from_raw_parts(
                ptr::null_mut(),
                0x10 as *mut c_void,
                Some(count),
                Device::CPU,
            )
        }
    }

    #[test]
    fn deleter_lifecycle() {
        // All in one test: CALLS is shared.
        let before = CALLS.load(Ordering::SeqCst);
        drop(counted()); // runs even though data is NULL
        assert_eq!(CALLS.load(Ordering::SeqCst), before + 1);

        let mut p = counted();
        p.clear();
        assert!(p.context().is_null());
        drop(p);
        assert_eq!(CALLS.load(Ordering::SeqCst), before + 2);

        let mut p = counted();
        let (ctx, d) = p.release_context();
        assert_eq!(ctx as usize, 0x10);
        assert!(same_deleter(d, Some(count)));
        drop(p);
        assert_eq!(CALLS.load(Ordering::SeqCst), before + 2);

        let mut p = counted();
        assert_eq!(p.cast_context(count), Some(0x10 as *mut c_void));
        assert_eq!(p.cast_context(other), None);
        assert!(!p.compare_exchange_deleter(Some(other), None));
        assert!(p.compare_exchange_deleter(Some(count), Some(other)));
        drop(p); // `other` ran instead
        assert_eq!(CALLS.load(Ordering::SeqCst), before + 2);

        let p = counted();
        let (_, ctx, d, _) = p.into_raw_parts();
        // SAFETY: we took ownership back; run the deleter ourselves once.
        unsafe { d.unwrap()(ctx) };
        assert_eq!(CALLS.load(Ordering::SeqCst), before + 3);
    }
}
