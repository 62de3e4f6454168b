//! Shared bodies of the per-handle refcount functions (tsr_X_incref, ...).
//! Each exported function in the handle's own file is a one-line call to
//! one of these, so cbindgen sees every function written out.

use super::error::{check_not_null, fail, guard, guard_value, null_arg};
use super::types::*;
use crate::error::Result;
use crate::refcount::{self as rc, RcBox, RcTarget, Ref};

fn raw<T, H>(h: *const H) -> *const RcBox<T> {
    h as *const RcBox<T>
}

/// Borrows the value behind a strong handle after checking it is not NULL
/// and its strong count is not zero.
///
/// # Safety
/// `h` must be NULL or a handle of type T whose memory is alive.
pub(crate) unsafe fn borrow<'a, T: RcTarget, H>(h: *const H, name: &str) -> Result<&'a T> {
    check_not_null(h, name)?;
    // SAFETY: forwarded from the caller: h points at a live block.
    let (strong, _) = unsafe { rc::counts_raw(raw::<T, H>(h)) };
    crate::ensure!(
        strong > 0,
        DeadObject,
        "argument '{name}' was already released (strong count 0): expected a live handle"
    );
    // SAFETY: the strong count is non-zero and the caller holds it for the
    // duration of the call.
    Ok(unsafe { Ref::borrow_raw(raw::<T, H>(h)) })
}

/// A view of the object behind a borrowed handle, valid for the call:
/// checked like [`borrow`], but no reference count is taken (the caller's
/// reference keeps the object alive) and none is dropped.
///
/// # Safety
/// As [`borrow`], and the result must not outlive the call.
pub(crate) unsafe fn view<T: RcTarget, H>(
    h: *const H,
    name: &str,
) -> Result<std::mem::ManuallyDrop<Ref<T>>> {
    // SAFETY: forwarded from the caller.
    unsafe { borrow::<T, H>(h, name)? };
    // SAFETY: the handle is live with a non-zero strong count; ManuallyDrop
    // keeps this Ref from decrementing a count it did not take.
    Ok(std::mem::ManuallyDrop::new(unsafe {
        Ref::from_raw(raw::<T, H>(h))
    }))
}

/// A new strong reference from a borrowed handle.
///
/// # Safety
/// As [`borrow`].
pub(crate) unsafe fn clone_ref<T: RcTarget, H>(h: *const H, name: &str) -> Result<Ref<T>> {
    check_not_null(h, name)?;
    // SAFETY: forwarded from the caller.
    unsafe { Ref::clone_from_raw(raw::<T, H>(h)) }
        .map_err(|e| e.context(format!("argument '{name}'")))
}

/// Turns a strong reference into a C handle the caller owns.
pub(crate) fn into_handle<T: RcTarget, H>(r: Ref<T>) -> *mut H {
    Ref::into_raw(r) as *mut H
}

/// Body of tsr_X_incref. The common case (a live handle) is one atomic
/// add and a compare, with no stack frame; NULL and dead handles take the
/// cold path that records the error.
///
/// # Safety
/// `h` must be NULL or a handle of type T whose memory is alive.
#[inline(always)]
pub(crate) unsafe fn incref<T: RcTarget, H>(fname: &str, h: *const H) -> TsrStatus {
    if h.is_null() {
        return null_handle(fname, "handle");
    }
    // SAFETY: forwarded from the caller. (Atomics cannot panic, so no
    // unwind guard is needed here.)
    match unsafe { rc::try_incref_raw(raw::<T, H>(h)) } {
        Ok(()) => TSR_OK,
        Err(old) => refused(fname, old),
    }
}

/// Body of tsr_X_decref; as [`incref`], the common case is one atomic.
///
/// # Safety
/// `h` must be NULL or a handle of type T whose memory is alive, and the
/// caller must own the strong reference it gives up.
#[inline(always)]
pub(crate) unsafe fn decref<T: RcTarget, H>(fname: &str, h: *const H) -> TsrStatus {
    if h.is_null() {
        return null_handle(fname, "handle");
    }
    let ptr = raw::<T, H>(h);
    // SAFETY: forwarded from the caller.
    match unsafe { rc::decref_step(ptr) } {
        rc::Decref::Alive => TSR_OK,
        // SAFETY: decref_step just moved the strong count from 1 to 0.
        rc::Decref::Last => unsafe { release_last(fname, ptr) },
        rc::Decref::Dead => dead(fname),
    }
}

/// The rare half of [`decref`]: release (and maybe destroy) the object.
///
/// # Safety
/// As [`rc::finish_last_strong`].
#[cold]
#[inline(never)]
unsafe fn release_last<T: RcTarget>(fname: &str, ptr: *const RcBox<T>) -> TsrStatus {
    guard(fname, || {
        // SAFETY: forwarded from the caller.
        unsafe { rc::finish_last_strong(ptr) };
        Ok(())
    })
}

/// Records the error for a decref of a released object.
#[cold]
#[inline(never)]
fn dead(fname: &str) -> TsrStatus {
    fail(fname, &rc::dead_decref())
}

/// Records a NULL-argument error for an exported function.
#[cold]
#[inline(never)]
fn null_handle(fname: &str, arg: &str) -> TsrStatus {
    fail(fname, &null_arg(arg))
}

/// Records the error for an increment refused at count `old`.
#[cold]
#[inline(never)]
fn refused(fname: &str, old: usize) -> TsrStatus {
    fail(fname, &rc::bad_incref(old))
}

/// Body of tsr_weak_X_incref.
///
/// # Safety
/// `h` must be NULL or a (weak) handle of type T whose memory is alive.
pub(crate) unsafe fn weak_incref<T: RcTarget, H>(fname: &str, h: *const H) -> TsrStatus {
    guard(fname, || {
        check_not_null(h, "weak")?;
        // SAFETY: forwarded from the caller.
        unsafe { rc::weak_incref_raw(raw::<T, H>(h)) }
    })
}

/// Body of tsr_weak_X_decref.
///
/// # Safety
/// As [`weak_incref`], and the caller must own the weak reference it gives up.
pub(crate) unsafe fn weak_decref<T: RcTarget, H>(fname: &str, h: *const H) -> TsrStatus {
    guard(fname, || {
        check_not_null(h, "weak")?;
        // SAFETY: forwarded from the caller.
        unsafe { rc::weak_decref_raw(raw::<T, H>(h)) }
    })
}

/// Body of the count getters: (strong, weak) of a handle, (0, 0) for NULL
/// (with a last-error message).
///
/// # Safety
/// `h` must be NULL or a handle of type T whose memory is alive.
pub(crate) unsafe fn counts<T: RcTarget, H>(fname: &str, h: *const H) -> (usize, usize) {
    guard_value(fname, (0, 0), || {
        if h.is_null() {
            fail(fname, &null_arg("handle"));
            return (0, 0);
        }
        // SAFETY: forwarded from the caller.
        unsafe { rc::counts_raw(raw::<T, H>(h)) }
    })
}

/// Body of tsr_X_downgrade: writes a new weak handle to `out`.
///
/// # Safety
/// `h` as [`borrow`]; `out` NULL or writable.
pub(crate) unsafe fn downgrade<T: RcTarget, H, W>(
    fname: &str,
    h: *const H,
    out: *mut *mut W,
) -> TsrStatus {
    guard(fname, || {
        check_not_null(h, "handle")?;
        check_not_null(out, "out")?;
        // SAFETY: forwarded from the caller.
        unsafe { rc::downgrade_raw(raw::<T, H>(h))? };
        // SAFETY: out checked non-NULL.
        unsafe { out.write(h as *mut W) };
        Ok(())
    })
}

/// Body of tsr_weak_X_lock: writes a new strong handle, or NULL once the
/// object expired. No unwind guard: the body is atomics and stores.
///
/// # Safety
/// `w` NULL or a weak handle of type T whose memory is alive; `out` NULL
/// or writable.
#[inline(always)]
pub(crate) unsafe fn lock<T: RcTarget, W, H>(
    fname: &str,
    w: *const W,
    out: *mut *mut H,
) -> TsrStatus {
    if w.is_null() {
        return null_handle(fname, "weak");
    }
    if out.is_null() {
        return null_handle(fname, "out");
    }
    // SAFETY: forwarded from the caller.
    let locked = unsafe { rc::lock_raw(raw::<T, W>(w)) };
    let result = if locked {
        w as *mut H
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: out checked non-NULL; the caller made it writable.
    unsafe { out.write(result) };
    TSR_OK
}

/// Body of tsr_weak_X_expired: true for NULL.
///
/// # Safety
/// `w` NULL or a weak handle of type T whose memory is alive.
pub(crate) unsafe fn expired<T: RcTarget, W>(fname: &str, w: *const W) -> bool {
    // SAFETY: forwarded from the caller.
    let (strong, _) = unsafe { counts::<T, W>(fname, w) };
    strong == 0
}
