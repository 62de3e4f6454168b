//! Typed C handles: which Rust value each opaque handle type stands for,
//! how it is owned, and every pointer cast between the two. No other file
//! of the crate turns a handle pointer into a Rust pointer or back.
//!
//! A handle type (`TsrTensor`, `TsrIter`, ...) is an empty struct the C
//! side only ever sees through pointers. The traits below tie each one to
//! its Rust target and its ownership kind:
//!
//! - [`Strong`]: a refcounted handle; the pointer is the address of an
//!   [`RcBox`] of the target, and owning a handle is owning one strong
//!   count. Its [`Strong::Weak`] is the weak handle type of the same box.
//! - [`Weak`]: a weak handle to the same box; owning one is owning one
//!   weak count. [`Weak::Strong`] leads back.
//! - [`Boxed`]: a single-owner handle; the pointer comes from
//!   `Box::into_raw` of the target and goes back through `Box::from_raw`
//!   exactly once (the `_free` function).
//! - Borrowed: a pointer to a value tessera owns, handed by [`lend`] to a
//!   C callback for the length of the call (the sub-iterator of
//!   tsr_iter_for_each_32bit_piece). It is of a [`Boxed`] handle type so
//!   the same queries accept it, and C must not free it. No handle type is
//!   borrowed-only.
//!
//! The functions here take and return the handle type and infer the
//! target from it, so a handle cannot be read as another type's target,
//! nor a weak handle used where a strong one is expected: neither
//! compiles (tests/handle_pairing.rs).
//!
//! # The caller's contract, stated once
//!
//! Every `unsafe fn` here that takes a handle needs what the header asks
//! of the C caller for each handle argument: the pointer is NULL or a
//! handle of its declared C type, obtained from tessera, whose memory is
//! still allocated (for refcounted handles: a strong or weak count is
//! left; for boxed ones: not yet freed), and that stays so for the call.
//! The exported functions pass their arguments on under that contract;
//! tessera cannot check it (a pointer that is not a handle, or one used
//! after free, is the documented undetectable misuse). What *is* checked
//! here: NULL, and a strong count already at zero.

use super::error::check_not_null;
use super::types::{
    HostObject, TsrAllocator, TsrIter, TsrIterConfig, TsrObject, TsrStorage, TsrTensor,
    TsrTensorDict, TsrWeakAllocator, TsrWeakObject, TsrWeakStorage, TsrWeakTensor,
};
use crate::error::Result;
use crate::refcount::{self as rc, RcBox, RcTarget, Ref};
use std::mem::ManuallyDrop;

use crate::allocator::AllocatorImpl;
use crate::iterator::{IterConfig, TensorIterator};
use crate::serialize::TensorDict;
use crate::storage::StorageImpl;
use crate::tensor::{Tensor, TensorImpl};

/// An opaque C handle type and the Rust value its pointers stand for.
///
/// # Safety
/// Implement it only through the `handles!` table below: the pointer of a
/// handle of this type must be exactly what the ownership trait it also
/// implements says (an `RcBox<Target>` or a `Box<Target>`).
pub unsafe trait Handle: Sized + 'static {
    /// The Rust value behind the handle.
    type Target;
}

/// A handle whose pointer is the address of an `RcBox<Self::Target>`,
/// strong or weak.
///
/// # Safety
/// As [`Handle`].
pub unsafe trait Refcounted: Handle<Target: RcTarget> {}

/// A strong refcounted handle.
///
/// # Safety
/// As [`Handle`].
pub unsafe trait Strong: Refcounted {
    /// The weak handle type of the same object.
    type Weak: Weak<Strong = Self, Target = Self::Target>;
}

/// A weak refcounted handle.
///
/// # Safety
/// As [`Handle`].
pub unsafe trait Weak: Refcounted {
    /// The strong handle type of the same object.
    type Strong: Strong<Weak = Self, Target = Self::Target>;
}

/// A single-owner handle made by `Box::into_raw` of its target.
///
/// # Safety
/// As [`Handle`].
pub unsafe trait Boxed: Handle {}

/// The table of handle types: one line per handle, the only place that
/// says what a handle points at.
macro_rules! handles {
    (
        refcounted { $($strong:ty, $weak:ty => $target:ty;)* }
        boxed { $($boxed:ty => $btarget:ty;)* }
    ) => {
        $(
            // SAFETY: these handles come from Ref::into_raw of the target
            // (into_handle) and from casts of the same block (weak_of,
            // strong_of); nothing else makes them.
            unsafe impl Handle for $strong { type Target = $target; }
            // SAFETY: a weak handle is made only by weak_of (downgrade),
            // a cast of a strong handle of the same table line, so it too
            // is the address of an RcBox<$target>.
            unsafe impl Handle for $weak { type Target = $target; }
            // SAFETY: a strong handle is Ref::into_raw of a Ref<$target>
            // (into_handle): the address of its RcBox<$target>, owning one
            // strong count, or strong_of's cast of a weak handle after
            // lock took a strong count on that same box.
            unsafe impl Refcounted for $strong {}
            // SAFETY: a weak handle is weak_of's cast of a strong handle
            // after downgrade_raw took a weak count: the address of the
            // same RcBox<$target>, owning that weak count.
            unsafe impl Refcounted for $weak {}
            // SAFETY: $weak is the type weak_of casts a $strong to, so
            // both name the same RcBox<$target>; the table pairs them
            // on one line and nowhere else.
            unsafe impl Strong for $strong { type Weak = $weak; }
            // SAFETY: $strong is the type strong_of casts a $weak to, only
            // after lock_raw took a strong count on the same
            // RcBox<$target>.
            unsafe impl Weak for $weak { type Strong = $strong; }
        )*
        $(
            // SAFETY: these handles come from box_into (Box::into_raw of
            // the target) or lend; nothing else makes them.
            unsafe impl Handle for $boxed { type Target = $btarget; }
            // SAFETY: an owned $boxed is box_into's Box::into_raw of a
            // Box<$btarget>, taken back once by box_from in its _free
            // function; a lent one points at a $btarget tessera owns for
            // the callback, and C must not free it (the module's contract).
            unsafe impl Boxed for $boxed {}
        )*
    };
}

handles! {
    refcounted {
        TsrStorage, TsrWeakStorage => StorageImpl;
        TsrTensor, TsrWeakTensor => TensorImpl;
        TsrAllocator, TsrWeakAllocator => AllocatorImpl;
        TsrObject, TsrWeakObject => HostObject;
    }
    boxed {
        TsrIterConfig => IterConfig;
        TsrIter => TensorIterator;
        TsrTensorDict => TensorDict;
    }
}

/// The block behind a refcounted handle, strong or weak.
#[inline(always)]
pub(crate) fn block<H: Refcounted>(h: *const H) -> *const RcBox<H::Target> {
    h as *const RcBox<H::Target>
}

/// Borrows the value behind a strong handle after checking it is not NULL
/// and its strong count is not zero.
///
/// # Safety
/// `h` under the module's contract, alive for `'a`.
pub unsafe fn borrow<'a, H: Strong>(h: *const H, name: &str) -> Result<&'a H::Target> {
    // SAFETY: the module's contract, which is try_borrow's, holds for h.
    if let Some(r) = unsafe { try_borrow(h) } {
        return Ok(r);
    }
    check_not_null(h, name)?;
    crate::bail!(
        DeadObject,
        "argument '{name}' was already released (strong count 0): expected a live handle"
    )
}

/// The value behind a strong handle when it is non-NULL and live, else
/// None with no message: for a fast path that falls back to a checked one
/// (and for [`borrow`], which names what was wrong).
///
/// # Safety
/// `h` under the module's contract, alive for `'a`.
#[inline(always)]
pub unsafe fn try_borrow<'a, H: Strong>(h: *const H) -> Option<&'a H::Target> {
    if h.is_null() {
        return None;
    }
    // SAFETY: h is non-NULL and, by the module's contract, a live block.
    let (strong, _) = unsafe { rc::counts_raw(block(h)) };
    if strong == 0 {
        return None;
    }
    // SAFETY: the strong count is non-zero and the caller's reference
    // keeps it so for 'a.
    Some(unsafe { Ref::borrow_raw(block(h)) })
}

/// The value behind a strong handle as a `Ref` for the call, checked like
/// [`borrow`]; no count is taken and none is dropped (the caller's
/// reference keeps the object alive).
///
/// # Safety
/// As [`borrow`]; the result must not outlive the call.
pub unsafe fn view<H: Strong>(h: *const H, name: &str) -> Result<ManuallyDrop<Ref<H::Target>>> {
    // SAFETY: the module's contract, passed on.
    unsafe { borrow(h, name)? };
    // SAFETY: borrow checked the block live with a non-zero strong count;
    // ManuallyDrop keeps this Ref from dropping a count it did not take.
    Ok(ManuallyDrop::new(unsafe { Ref::from_raw(block(h)) }))
}

/// A new strong reference from a borrowed strong handle.
///
/// # Safety
/// `h` under the module's contract.
pub unsafe fn clone_ref<H: Strong>(h: *const H, name: &str) -> Result<Ref<H::Target>> {
    check_not_null(h, name)?;
    // SAFETY: h is non-NULL and a live block by the module's contract;
    // clone_from_raw itself refuses a zero strong count.
    unsafe { Ref::clone_from_raw(block(h)) }.map_err(|e| e.context(format!("argument '{name}'")))
}

/// Turns a strong reference into a handle the C caller owns.
#[inline(always)]
pub fn into_handle<H: Strong>(r: Ref<H::Target>) -> *mut H {
    Ref::into_raw(r) as *mut H
}

/// (strong, weak) counts of the block behind a strong or weak handle.
///
/// # Safety
/// `h` non-NULL, under the module's contract.
#[inline(always)]
pub unsafe fn counts<H: Refcounted>(h: *const H) -> (usize, usize) {
    // SAFETY: the module's contract, passed on; h is non-NULL.
    unsafe { rc::counts_raw(block(h)) }
}

/// The value behind a weak handle, whatever its strong count: after the
/// object expired it has run `release_resources` but is not dropped, so
/// only what that leaves intact may be read.
///
/// # Safety
/// `w` non-NULL, under the module's contract, alive for `'a`.
#[inline(always)]
pub unsafe fn borrow_weak<'a, W: Weak>(w: *const W) -> &'a W::Target {
    // SAFETY: the weak count the caller holds keeps the block and its
    // value (dropped only with the block) allocated for 'a.
    unsafe { Ref::borrow_raw(block(w)) }
}

/// The weak handle of the same block (downgrade, after the weak count
/// was taken).
#[inline(always)]
pub fn weak_of<H: Strong>(h: *const H) -> *mut H::Weak {
    h as *mut H::Weak
}

/// The strong handle of the same block (lock, after the strong count was
/// taken).
#[inline(always)]
pub fn strong_of<W: Weak>(w: *const W) -> *mut W::Strong {
    w as *mut W::Strong
}

/// Gives a boxed value to the C caller as a handle it owns.
#[inline(always)]
pub fn box_into<H: Boxed>(b: Box<H::Target>) -> *mut H {
    Box::into_raw(b) as *mut H
}

/// Takes back the box behind an owned handle (its `_free` function).
///
/// # Safety
/// `h` non-NULL, made by [`box_into`], not freed before nor used after.
#[inline(always)]
pub unsafe fn box_from<H: Boxed>(h: *mut H) -> Box<H::Target> {
    // SAFETY: h came from Box::into_raw of H::Target (box_into) and the
    // caller gives up the handle.
    unsafe { Box::from_raw(h as *mut H::Target) }
}

/// Borrows the value behind a boxed (or lent) handle after a NULL check.
///
/// # Safety
/// `h` under the module's contract, alive for `'a`.
pub unsafe fn box_ref<'a, H: Boxed>(h: *const H, name: &str) -> Result<&'a H::Target> {
    check_not_null(h, name)?;
    // SAFETY: h is non-NULL and, by the module's contract, points at a
    // live H::Target (box_into or lend).
    Ok(unsafe { &*(h as *const H::Target) })
}

/// Borrows the value behind an owned boxed handle mutably, after a NULL
/// check.
///
/// # Safety
/// As [`box_ref`], made by [`box_into`], and not used by anything else
/// for `'a` (single-owner handles are documented not thread-safe).
pub unsafe fn box_mut<'a, H: Boxed>(h: *mut H, name: &str) -> Result<&'a mut H::Target> {
    check_not_null(h, name)?;
    // SAFETY: h is non-NULL, owned by the caller and unaliased for 'a.
    Ok(unsafe { &mut *(h as *mut H::Target) })
}

/// Lends a value tessera owns to a C callback as a borrowed handle: valid
/// while `value` is, only for reading queries, never freed by C.
#[inline(always)]
pub fn lend<H: Boxed>(value: &H::Target) -> *mut H {
    value as *const H::Target as *mut H
}

// ---- Typed wrappers used by the shared bodies in ffi/call.rs. ----

/// The tensor behind a handle, borrowed for the call: checked like
/// [`tensor_ref`] but without taking a reference (the caller's keeps the
/// tensor alive). Clone it to keep it.
///
/// # Safety
/// `t` NULL or a live tensor handle; the result must not outlive the call.
pub(crate) unsafe fn tensor_view(
    t: *const TsrTensor,
    name: &str,
) -> Result<std::mem::ManuallyDrop<Tensor>> {
    // SAFETY: `t` is NULL or a live TsrTensor (the header's contract,
    // ffi/handle.rs); view checks NULL and liveness.
    let r = unsafe { view(t, name)? };
    Ok(std::mem::ManuallyDrop::new(Tensor::from_ref(
        std::mem::ManuallyDrop::into_inner(r),
    )))
}

/// Turns a tensor into a handle the caller owns.
pub(crate) fn tensor_handle(t: Tensor) -> *mut TsrTensor {
    into_handle(t.into_ref())
}

/// Gives an `Arc` to the C caller as a handle holding one count (a
/// handle several threads call at once, closed once: the checkpoint).
pub(crate) fn arc_into<H, T>(a: std::sync::Arc<T>) -> *mut H {
    std::sync::Arc::into_raw(a) as *mut H
}

/// A new count of the `Arc` behind a handle made by [`arc_into`], held
/// for the call, after a NULL check: a close on another thread while
/// the call runs leaves the value alive until the call returns.
///
/// # Safety
/// `h` NULL or made by [`arc_into`] with target `T`, and not closed
/// before the call began.
pub(crate) unsafe fn arc_clone<H, T>(h: *const H, name: &str) -> Result<std::sync::Arc<T>> {
    check_not_null(h, name)?;
    // SAFETY: h is Arc::into_raw of an Arc<T> whose handle count is still
    // held (not closed before the call): the count is at least 1.
    unsafe { std::sync::Arc::increment_strong_count(h as *const T) };
    // SAFETY: the count just taken is the one this Arc owns.
    Ok(unsafe { std::sync::Arc::from_raw(h as *const T) })
}

/// Borrows the value behind a handle made by [`arc_into`] for a getter
/// (no count taken: a getter must not race its handle's close).
///
/// # Safety
/// As [`arc_clone`], and the borrow ends before the handle is closed.
pub(crate) unsafe fn arc_ref<'a, H, T>(h: *const H, name: &str) -> Result<&'a T> {
    check_not_null(h, name)?;
    // SAFETY: h is Arc::into_raw of a live Arc<T> (the contract).
    Ok(unsafe { &*(h as *const T) })
}

/// Drops the handle's count of the `Arc` behind `h` (its close).
///
/// # Safety
/// `h` non-NULL, made by [`arc_into`] with target `T`, closed once.
pub(crate) unsafe fn arc_from<H, T>(h: *mut H) -> std::sync::Arc<T> {
    // SAFETY: h is Arc::into_raw of an Arc<T>, given back once.
    unsafe { std::sync::Arc::from_raw(h as *const T) }
}
