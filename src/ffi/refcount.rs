//! Shared bodies of the per-handle refcount functions (tsr_X_incref, ...).
//! Each exported function in the handle's own file is a one-line call to
//! one of these, its types inferred from the handle argument, so cbindgen
//! sees every function written out. The casts are in ffi/handle.rs; every
//! `unsafe fn` here takes its handles under the contract stated there.

use super::call::{check_not_null, guard, guard_value, null_arg};
use super::error::fail;
use super::handle::{block, counts as block_counts, strong_of, weak_of, Refcounted, Strong, Weak};
use super::types::*;
use crate::refcount::{self as rc, RcBox, RcTarget};

/// Body of tsr_X_incref. The common case (a live handle) is one atomic
/// add and a compare, with no stack frame; NULL and dead handles take the
/// cold path that records the error.
///
/// # Safety
/// `h` under the contract of ffi/handle.rs.
#[inline(always)]
pub(crate) unsafe fn incref<H: Strong>(fname: &str, h: *const H) -> TsrStatus {
    if h.is_null() {
        return null_handle(fname, "handle");
    }
    // SAFETY: h is non-NULL and a live block (handle.rs contract).
    // (Atomics cannot panic, so no unwind guard is needed here.)
    match unsafe { rc::try_incref_raw(block(h)) } {
        Ok(()) => TSR_OK,
        Err(old) => refused(fname, old),
    }
}

/// Body of tsr_X_decref; as [`incref`], the common case is one atomic.
///
/// # Safety
/// `h` under the contract of ffi/handle.rs, and the caller owns the strong
/// reference it gives up.
#[inline(always)]
pub(crate) unsafe fn decref<H: Strong>(fname: &str, h: *const H) -> TsrStatus {
    if h.is_null() {
        return null_handle(fname, "handle");
    }
    let ptr = block(h);
    // SAFETY: h is non-NULL and a live block (handle.rs contract).
    match unsafe { rc::decref_step(ptr) } {
        rc::Decref::Alive => TSR_OK,
        // SAFETY: decref_step just moved the strong count from 1 to 0.
        rc::Decref::Last => unsafe { release_last(fname, ptr) },
        rc::Decref::Dead => dead(fname),
    }
}

// The cold halves below are `extern "C"` though only Rust calls them: such
// a function cannot unwind, so the exported function needs no landing pad
// around the call and makes it a tail call (`jmp`), and its common path no
// stack frame (dist build: tsr_storage_incref 8 instructions, was 13 with a
// push and pop; decref 10, was 12). A panic in one aborts, as it did before
// in the exported function's own landing pad. `&str` passes Rust to Rust,
// hence the lint's allow.

/// The rare half of [`decref`]: release (and maybe destroy) the object.
///
/// # Safety
/// As [`rc::finish_last_strong`].
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
unsafe extern "C" fn release_last<T: RcTarget>(fname: &str, ptr: *const RcBox<T>) -> TsrStatus {
    guard(fname, || {
        // SAFETY: the caller (decref) just moved the strong count to 0.
        unsafe { rc::finish_last_strong(ptr) };
        Ok(())
    })
}

/// Records the error for a decref of a released object.
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn dead(fname: &str) -> TsrStatus {
    fail(fname, &rc::dead_decref())
}

/// Records a NULL-argument error for an exported function.
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn null_handle(fname: &str, arg: &str) -> TsrStatus {
    fail(fname, &null_arg(arg))
}

/// Records the error for an increment refused at count `old`.
#[cold]
#[inline(never)]
#[allow(improper_ctypes_definitions)]
extern "C" fn refused(fname: &str, old: usize) -> TsrStatus {
    fail(fname, &rc::bad_incref(old))
}

/// Body of tsr_weak_X_incref.
///
/// # Safety
/// `w` under the contract of ffi/handle.rs.
pub(crate) unsafe fn weak_incref<W: Weak>(fname: &str, w: *const W) -> TsrStatus {
    guard(fname, || {
        check_not_null(w, "weak")?;
        // SAFETY: w is non-NULL and a live block (handle.rs contract).
        unsafe { rc::weak_incref_raw(block(w)) }
    })
}

/// Body of tsr_weak_X_decref.
///
/// # Safety
/// As [`weak_incref`], and the caller owns the weak reference it gives up.
pub(crate) unsafe fn weak_decref<W: Weak>(fname: &str, w: *const W) -> TsrStatus {
    guard(fname, || {
        check_not_null(w, "weak")?;
        // SAFETY: w is non-NULL and a live block whose weak count the
        // caller gives up (handle.rs contract).
        unsafe { rc::weak_decref_raw(block(w)) }
    })
}

/// Body of the count getters: (strong, weak) of a strong or weak handle,
/// (0, 0) for NULL (with a last-error message).
///
/// # Safety
/// `h` under the contract of ffi/handle.rs.
pub(crate) unsafe fn counts<H: Refcounted>(fname: &str, h: *const H) -> (usize, usize) {
    guard_value(fname, (0, 0), || {
        if h.is_null() {
            fail(fname, &null_arg("handle"));
            return (0, 0);
        }
        // SAFETY: h is non-NULL and a live block (handle.rs contract).
        unsafe { block_counts(h) }
    })
}

/// Body of tsr_X_downgrade: writes a new weak handle to `out`.
///
/// # Safety
/// `h` under the contract of ffi/handle.rs; `out` NULL or writable.
pub(crate) unsafe fn downgrade<H: Strong>(
    fname: &str,
    h: *const H,
    out: *mut *mut H::Weak,
) -> TsrStatus {
    guard(fname, || {
        check_not_null(h, "handle")?;
        check_not_null(out, "out")?;
        // SAFETY: h is non-NULL and a live block (handle.rs contract).
        unsafe { rc::downgrade_raw(block(h))? };
        // SAFETY: out checked non-NULL; the caller made it writable.
        unsafe { out.write(weak_of(h)) };
        Ok(())
    })
}

/// Body of tsr_weak_X_lock: writes a new strong handle, or NULL once the
/// object expired. No unwind guard: the body is atomics and stores.
///
/// # Safety
/// `w` under the contract of ffi/handle.rs; `out` NULL or writable.
#[inline(always)]
pub(crate) unsafe fn lock<W: Weak>(
    fname: &str,
    w: *const W,
    out: *mut *mut W::Strong,
) -> TsrStatus {
    if w.is_null() {
        return null_handle(fname, "weak");
    }
    if out.is_null() {
        return null_handle(fname, "out");
    }
    // SAFETY: w is non-NULL and a live block (handle.rs contract).
    let result = match unsafe { rc::lock_raw(block(w)) } {
        Ok(true) => strong_of(w),
        Ok(false) => std::ptr::null_mut(),
        Err(count) => return refused(fname, count),
    };
    // SAFETY: out checked non-NULL; the caller made it writable.
    unsafe { out.write(result) };
    TSR_OK
}

/// Body of tsr_weak_X_expired: true for NULL.
///
/// # Safety
/// `w` under the contract of ffi/handle.rs.
pub(crate) unsafe fn expired<W: Weak>(fname: &str, w: *const W) -> bool {
    // SAFETY: the handle.rs contract, passed on; counts checks NULL.
    let (strong, _) = unsafe { counts(fname, w) };
    strong == 0
}
