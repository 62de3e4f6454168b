//! Intrusive strong + weak reference counting with c10's semantics
//! (`intrusive_ptr` / `weak_intrusive_ptr`).
//!
//! An object lives in an [`RcBox`]: two atomic counts followed by the value.
//! * `strong` counts [`Ref`]s; `weak` counts [`WeakRef`]s plus one while
//!   `strong > 0`. A new object starts at strong 1, weak 1.
//! * When `strong` reaches 0 it never rises again: [`WeakRef::lock`] only
//!   succeeds while `strong != 0`.
//! * When the last strong reference goes: if no weak reference remains the
//!   object is destroyed at once; otherwise [`RcTarget::release_resources`]
//!   runs (a storage frees its data there) and the memory of the object
//!   stays until the last weak reference goes.
//!
//! Increments are relaxed, decrements acquire-release, and the successful
//! compare-and-swap of `lock` acquires, as in c10.
//!
//! The C API hands out the address of the `RcBox` as an opaque handle; the
//! `*_raw` functions here are what it calls. They detect the misuse that can
//! be detected while the object's memory is still alive (incref or decref
//! after the strong count reached zero) and report it as an error.

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Result;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::{self, NonNull};

/// Counts above this are treated as an overflow (as `Arc` does), so a
/// leaked-increment loop cannot wrap a count to zero.
const MAX_COUNT: usize = isize::MAX as usize;

/// A type that can live behind a [`Ref`].
pub trait RcTarget: Send + Sync {
    /// Called once when the strong count reaches zero while weak
    /// references remain; the object's memory stays until they are gone.
    /// Free expensive resources here. Not called when the object is
    /// destroyed directly (no weak references), where `Drop` does all.
    fn release_resources(&mut self) {}
}

/// The heap block of a refcounted object: the counts, then the value.
#[repr(C)]
pub struct RcBox<T> {
    strong: AtomicUsize,
    weak: AtomicUsize,
    value: T,
}

/// A strong reference: keeps the object alive and gives access to it.
pub struct Ref<T: RcTarget> {
    ptr: NonNull<RcBox<T>>,
    _owns: PhantomData<RcBox<T>>,
}

/// A weak reference: keeps the object's memory (not its resources) and can
/// be upgraded with [`WeakRef::lock`] while strong references remain.
pub struct WeakRef<T: RcTarget> {
    ptr: NonNull<RcBox<T>>,
    _owns: PhantomData<RcBox<T>>,
}

// SAFETY: a Ref only gives shared access to T (Deref), and T: Send + Sync;
// the counts are atomics. Sending or sharing a Ref across threads is like
// sending or sharing an Arc<T>.
unsafe impl<T: RcTarget> Send for Ref<T> {}
// SAFETY: see Send above.
unsafe impl<T: RcTarget> Sync for Ref<T> {}
// SAFETY: a WeakRef gives no access to T, only to the atomic counts; it can
// produce a Ref (lock), which is Send + Sync as above.
unsafe impl<T: RcTarget> Send for WeakRef<T> {}
// SAFETY: see Send above.
unsafe impl<T: RcTarget> Sync for WeakRef<T> {}

impl<T: RcTarget> Ref<T> {
    /// Moves `value` into a new object with strong 1, weak 1.
    pub fn new(value: T) -> Ref<T> {
        let boxed = Box::new(RcBox {
            strong: AtomicUsize::new(1),
            weak: AtomicUsize::new(1),
            value,
        });
        Ref {
            ptr: NonNull::from(Box::leak(boxed)),
            _owns: PhantomData,
        }
    }

    fn inner(&self) -> &RcBox<T> {
        // SAFETY: a Ref holds a strong count, so the block is alive.
        unsafe { self.ptr.as_ref() }
    }

    /// The strong count.
    pub fn use_count(this: &Self) -> usize {
        this.inner().strong.load(Ordering::Acquire)
    }

    /// The raw weak count (weak references + 1 while strong > 0).
    pub fn weak_use_count(this: &Self) -> usize {
        this.inner().weak.load(Ordering::Acquire)
    }

    /// Whether this is the only strong reference.
    pub fn is_unique(this: &Self) -> bool {
        Self::use_count(this) == 1
    }

    /// A new weak reference to the same object.
    pub fn downgrade(this: &Self) -> WeakRef<T> {
        let old = this.inner().weak.fetch_add(1, Ordering::Relaxed);
        if old >= MAX_COUNT {
            std::process::abort();
        }
        WeakRef {
            ptr: this.ptr,
            _owns: PhantomData,
        }
    }

    /// Mutable access when this is the only reference, strong or weak.
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        let inner = this.inner();
        if inner.strong.load(Ordering::Acquire) == 1 && inner.weak.load(Ordering::Acquire) == 1 {
            // SAFETY: no other Ref or WeakRef exists (both counts are at
            // their minimum for a live object) and we hold `&mut self`, so
            // nothing else can reach the value while the borrow lasts.
            Some(unsafe { &mut (*this.ptr.as_ptr()).value })
        } else {
            None
        }
    }

    /// Whether two references point at the same object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// The address of the object's block (the C handle).
    pub fn as_ptr(this: &Self) -> *const RcBox<T> {
        this.ptr.as_ptr()
    }

    /// Gives up this reference without decrementing, returning the handle.
    pub fn into_raw(this: Self) -> *const RcBox<T> {
        let p = this.ptr.as_ptr();
        std::mem::forget(this);
        p
    }

    /// Takes over a strong reference previously given up by `into_raw`.
    ///
    /// # Safety
    /// `ptr` must come from [`Ref::into_raw`] (or count one strong reference
    /// obtained otherwise) and that reference must not be used again.
    pub unsafe fn from_raw(ptr: *const RcBox<T>) -> Ref<T> {
        Ref {
            // SAFETY: the caller guarantees ptr came from into_raw, which
            // never returns NULL.
            ptr: unsafe { NonNull::new_unchecked(ptr as *mut RcBox<T>) },
            _owns: PhantomData,
        }
    }

    /// A new strong reference to the object behind a borrowed handle,
    /// failing if its strong count already reached zero.
    ///
    /// # Safety
    /// `ptr` must point at a live block (strong or weak count non-zero).
    pub unsafe fn clone_from_raw(ptr: *const RcBox<T>) -> Result<Ref<T>> {
        // SAFETY: the caller guarantees a live block, incref_raw's only
        // requirement.
        unsafe { incref_raw(ptr)? };
        // SAFETY: incref_raw added the strong count this Ref now owns.
        Ok(unsafe { Ref::from_raw(ptr) })
    }

    /// Borrows the value behind a handle.
    ///
    /// # Safety
    /// `ptr` must point at a live block whose strong count is non-zero, and
    /// stay so for `'a`.
    pub unsafe fn borrow_raw<'a>(ptr: *const RcBox<T>) -> &'a T {
        // SAFETY: a non-zero strong count keeps the value alive (it is
        // dropped only when that count reaches zero), and the caller keeps
        // it so for 'a.
        unsafe { &(*ptr).value }
    }
}

impl<T: RcTarget> Clone for Ref<T> {
    fn clone(&self) -> Ref<T> {
        let old = self.inner().strong.fetch_add(1, Ordering::Relaxed);
        if old >= MAX_COUNT {
            std::process::abort();
        }
        Ref {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T: RcTarget> Deref for Ref<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T: RcTarget> Drop for Ref<T> {
    fn drop(&mut self) {
        if self.inner().strong.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: we held the last strong reference.
            unsafe { last_strong_released(self.ptr.as_ptr()) };
        }
    }
}

impl<T: RcTarget + std::fmt::Debug> std::fmt::Debug for Ref<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Runs when the strong count has just dropped to zero.
///
/// # Safety
/// The caller has just moved the strong count of the live block `ptr` from
/// one to zero; no strong reference remains.
unsafe fn last_strong_released<T: RcTarget>(ptr: *mut RcBox<T>) {
    // SAFETY: the block is alive: the strong count was 1 until just now, so
    // weak >= 1.
    let weak = unsafe { &(*ptr).weak };
    let mut destroy = weak.load(Ordering::Acquire) == 1;
    if !destroy {
        // SAFETY: strong is 0, so no Ref exists and no lock can succeed:
        // nothing else can reach the value while it is borrowed mutably;
        // the counts are not part of the borrow.
        let value = unsafe { &mut *ptr::addr_of_mut!((*ptr).value) };
        value.release_resources();
        destroy = weak.fetch_sub(1, Ordering::AcqRel) == 1;
    }
    if destroy {
        // SAFETY: both counts are zero, so this was the last reference of
        // any kind; the block came from Box::leak in Ref::new.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

impl<T: RcTarget> WeakRef<T> {
    fn inner(&self) -> &RcBox<T> {
        // SAFETY: a WeakRef holds a weak count, so the block is alive.
        unsafe { self.ptr.as_ref() }
    }

    /// A new strong reference, or None once the object expired (strong
    /// count zero).
    pub fn lock(&self) -> Option<Ref<T>> {
        match lock_strong(&self.inner().strong) {
            // Built only when locked: a Ref dropped unused would decref.
            Ok(locked) => locked.then(|| Ref {
                ptr: self.ptr,
                _owns: PhantomData,
            }),
            Err(_) => std::process::abort(),
        }
    }

    /// The strong count (as c10's weak_intrusive_ptr::use_count).
    pub fn use_count(&self) -> usize {
        self.inner().strong.load(Ordering::Acquire)
    }

    /// The raw weak count.
    pub fn weak_use_count(&self) -> usize {
        self.inner().weak.load(Ordering::Acquire)
    }

    /// Whether the strong count reached zero.
    pub fn expired(&self) -> bool {
        self.use_count() == 0
    }

    /// Gives up this weak reference without decrementing.
    pub fn into_raw(this: Self) -> *const RcBox<T> {
        let p = this.ptr.as_ptr();
        std::mem::forget(this);
        p
    }

    /// Takes over a weak reference given up by `into_raw`.
    ///
    /// # Safety
    /// `ptr` must come from [`WeakRef::into_raw`] (or count one weak
    /// reference obtained otherwise) and not be used again.
    pub unsafe fn from_raw(ptr: *const RcBox<T>) -> WeakRef<T> {
        WeakRef {
            // SAFETY: into_raw never returns NULL.
            ptr: unsafe { NonNull::new_unchecked(ptr as *mut RcBox<T>) },
            _owns: PhantomData,
        }
    }
}

impl<T: RcTarget> Clone for WeakRef<T> {
    fn clone(&self) -> WeakRef<T> {
        let old = self.inner().weak.fetch_add(1, Ordering::Relaxed);
        if old >= MAX_COUNT {
            std::process::abort();
        }
        WeakRef {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T: RcTarget> Drop for WeakRef<T> {
    fn drop(&mut self) {
        if self.inner().weak.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the weak count reached zero, so the strong count is
            // zero too (strong > 0 holds one weak); the last reference of
            // any kind is gone and the block came from Box::leak.
            drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
        }
    }
}

/// Reads the counts of a handle: (strong, raw weak).
///
/// # Safety
/// `ptr` must point at a live block.
pub unsafe fn counts_raw<T>(ptr: *const RcBox<T>) -> (usize, usize) {
    // SAFETY: a live block (the caller's guarantee) is not freed while its
    // weak count is non-zero; only its atomic counts are read.
    let b = unsafe { &*ptr };
    (
        b.strong.load(Ordering::Acquire),
        b.weak.load(Ordering::Acquire),
    )
}

/// Adds a strong reference through a handle. Fails (and changes nothing)
/// when the strong count already reached zero.
///
/// # Safety
/// `ptr` must point at a live block.
#[inline]
pub unsafe fn incref_raw<T>(ptr: *const RcBox<T>) -> Result<()> {
    // SAFETY: the caller guarantees a live block, try_incref_raw's only
    // requirement.
    unsafe { try_incref_raw(ptr) }.map_err(bad_incref)
}

/// As [`incref_raw`], reporting a refused increment by the count it found
/// (0: released; at or above the limit: overflow) instead of an error, so
/// the caller's fast path builds no error value.
///
/// # Safety
/// `ptr` must point at a live block.
#[inline(always)]
pub unsafe fn try_incref_raw<T>(ptr: *const RcBox<T>) -> std::result::Result<(), usize> {
    // SAFETY: a live block (the caller's guarantee) stays allocated for
    // the call; only its atomic strong count is touched.
    let strong = unsafe { &(*ptr).strong };
    let old = strong.fetch_add(1, Ordering::Relaxed);
    // 0 (released) or at least MAX_COUNT + 1 = 2^63 (overflow), in one
    // signed compare.
    if old as isize <= 0 {
        strong.fetch_sub(1, Ordering::Relaxed);
        return Err(old);
    }
    Ok(())
}

/// The error for an increment [`try_incref_raw`] refused at count `old`.
#[cold]
#[inline(never)]
pub fn bad_incref(old: usize) -> crate::error::Error {
    if old == 0 {
        crate::err!(
            DeadObject,
            "the object's strong count is 0 (already released): expected a live handle"
        )
    } else {
        crate::err!(InvalidArgument, "strong count overflow ({old} references)")
    }
}

/// Drops a strong reference through a handle, releasing and destroying the
/// object as [`Ref`]'s drop does. Fails (and changes nothing) when the
/// strong count is already zero.
///
/// # Safety
/// `ptr` must point at a live block and the caller must own one strong
/// reference to it, which this call consumes.
#[inline]
pub unsafe fn decref_raw<T: RcTarget>(ptr: *const RcBox<T>) -> Result<()> {
    // SAFETY: the caller owns a strong reference to a live block, which is
    // decref_step's requirement; its Last case is handled just below.
    match unsafe { decref_step(ptr) } {
        Decref::Alive => Ok(()),
        Decref::Last => {
            // SAFETY: decref_step moved the strong count from 1 to 0.
            unsafe { finish_last_strong(ptr) };
            Ok(())
        }
        Decref::Dead => Err(dead_decref()),
    }
}

/// What a strong decrement through a handle found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decref {
    /// Other strong references remain.
    Alive,
    /// This was the last strong reference: the caller must call
    /// [`finish_last_strong`].
    Last,
    /// The strong count was already 0; it is left unchanged.
    Dead,
}

/// The atomic half of [`decref_raw`]: decrements the strong count and says
/// what is left to do, so the common case is one atomic and a compare.
///
/// # Safety
/// As [`decref_raw`]; on [`Decref::Last`] the caller must call
/// [`finish_last_strong`] with the same pointer.
#[inline(always)]
pub unsafe fn decref_step<T>(ptr: *const RcBox<T>) -> Decref {
    // SAFETY: the caller's strong reference keeps the block allocated
    // until this decrement; only its atomic strong count is touched.
    let strong = unsafe { &(*ptr).strong };
    match strong.fetch_sub(1, Ordering::AcqRel) {
        1 => Decref::Last,
        0 => {
            // Misuse: undo the wrap-around. (A concurrent lock could observe
            // the transient value; that race needs a second misuse, a decref
            // of a dead object while another thread locks.)
            strong.fetch_add(1, Ordering::Relaxed);
            Decref::Dead
        }
        _ => Decref::Alive,
    }
}

/// Releases and, when no weak reference remains, destroys the object whose
/// last strong reference [`decref_step`] just dropped.
///
/// # Safety
/// [`decref_step`] returned [`Decref::Last`] for `ptr`, and this is the one
/// call that follows it.
#[cold]
#[inline(never)]
pub unsafe fn finish_last_strong<T: RcTarget>(ptr: *const RcBox<T>) {
    // SAFETY: decref_step returned Last (the caller's guarantee): this
    // thread moved the strong count from 1 to 0, so it alone runs the
    // release, once.
    unsafe { last_strong_released(ptr as *mut RcBox<T>) }
}

/// The error for a decref of a released object.
#[cold]
#[inline(never)]
pub fn dead_decref() -> crate::error::Error {
    crate::err!(
        DeadObject,
        "the object's strong count is already 0: decref of a released object"
    )
}

/// Adds a weak reference through a handle.
///
/// # Safety
/// `ptr` must point at a live block.
pub unsafe fn weak_incref_raw<T>(ptr: *const RcBox<T>) -> Result<()> {
    // SAFETY: a live block (the caller's guarantee) stays allocated for
    // the call; only its atomic weak count is touched.
    let weak = unsafe { &(*ptr).weak };
    let old = weak.fetch_add(1, Ordering::Relaxed);
    if old == 0 || old >= MAX_COUNT {
        weak.fetch_sub(1, Ordering::Relaxed);
        crate::bail!(
            DeadObject,
            "the object's weak count is {old}: expected a live weak handle"
        );
    }
    Ok(())
}

/// Drops a weak reference through a handle, freeing the block when it was
/// the last reference of any kind.
///
/// # Safety
/// `ptr` must point at a live block and the caller must own one weak
/// reference to it, which this call consumes.
pub unsafe fn weak_decref_raw<T: RcTarget>(ptr: *const RcBox<T>) -> Result<()> {
    // SAFETY: the caller's weak reference keeps the block allocated until
    // this decrement; only its atomic weak count is touched.
    let weak = unsafe { &(*ptr).weak };
    let old = weak.fetch_sub(1, Ordering::AcqRel);
    if old == 1 {
        // SAFETY: the weak count went from 1 to 0: no reference of any kind
        // remains; the block came from Box::leak in Ref::new.
        drop(unsafe { Box::from_raw(ptr as *mut RcBox<T>) });
    } else if old == 0 {
        weak.fetch_add(1, Ordering::Relaxed);
        crate::bail!(
            DeadObject,
            "the object's weak count is already 0: weak decref of a destroyed object"
        );
    }
    Ok(())
}

/// Adds a weak reference to a handle holding a strong one (downgrade).
///
/// # Safety
/// `ptr` must point at a live block with a non-zero strong count.
pub unsafe fn downgrade_raw<T>(ptr: *const RcBox<T>) -> Result<()> {
    // SAFETY: the caller guarantees a live block, counts_raw's only
    // requirement.
    let (strong, _) = unsafe { counts_raw(ptr) };
    crate::ensure!(
        strong != 0,
        DeadObject,
        "the object's strong count is 0 (already released): cannot downgrade"
    );
    // SAFETY: the same live block (the caller's guarantee), as
    // weak_incref_raw requires.
    unsafe { weak_incref_raw(ptr) }
}

/// Tries to add a strong reference through a weak handle: Ok(false) once
/// the object expired, Err(count) when the count is at the limit (the
/// caller reports it, as [`bad_incref`]).
///
/// # Safety
/// `ptr` must point at a live block.
#[inline(always)]
pub unsafe fn lock_raw<T: RcTarget>(ptr: *const RcBox<T>) -> std::result::Result<bool, usize> {
    // SAFETY: the caller's handle is a live block, allocated for the
    // call; only its atomic strong count is touched.
    lock_strong(unsafe { &(*ptr).strong })
}

/// Adds one to a strong count unless it is 0 (the object expired): c10's
/// weak lock, a compare-exchange loop. Err(count) at the limit, the count
/// left as it was.
#[inline(always)]
fn lock_strong(strong: &AtomicUsize) -> std::result::Result<bool, usize> {
    let mut n = strong.load(Ordering::Relaxed);
    loop {
        if n == 0 {
            return Ok(false);
        }
        if n >= MAX_COUNT {
            return Err(n);
        }
        match strong.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(true),
            Err(current) => n = current,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
