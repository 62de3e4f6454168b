//! The typed handles of src/ffi/handle.rs at compile time: a handle
//! borrowed as another handle type's target, a weak handle where a strong
//! one is expected, a boxed handle used as a refcounted one, and a
//! reference handed out as the wrong handle type must not compile (each
//! file under tests/handle_pairing/fail with the compiler's error in its
//! .stderr). The right pairings compile and run in `right_pairings`
//! below, an ordinary test of this file, so the failures come from the
//! pairing and not from the set-up.

use tessera::ffi::allocator::TsrAllocator;
use tessera::ffi::handle;
use tessera::ffi::iter::{TsrIter, TsrIterConfig};
use tessera::ffi::object::{HostObject, TsrObject, TsrWeakObject};
use tessera::ffi::storage::{TsrStorage, TsrWeakStorage};
use tessera::ffi::tensor::{TsrTensor, TsrWeakTensor};
use tessera::iterator::{IterConfig, TensorIterator};
use tessera::storage::StorageImpl;
use tessera::tensor::TensorImpl;

/// Each handle used with its own target and kind: compiles, and a NULL
/// handle is refused before any read.
#[test]
fn right_pairings() {
    let t: *const TsrTensor = std::ptr::null();
    let s: *const TsrStorage = std::ptr::null();
    let a: *const TsrAllocator = std::ptr::null();
    let o: *const TsrObject = std::ptr::null();
    let c: *mut TsrIterConfig = std::ptr::null_mut();
    let it: *const TsrIter = std::ptr::null();
    // SAFETY: NULL handles are refused before any read.
    unsafe {
        let r: Result<&TensorImpl, _> = handle::borrow(t, "t");
        assert!(r.is_err());
        let r: Result<&StorageImpl, _> = handle::borrow(s, "s");
        assert!(r.is_err());
        assert!(handle::clone_ref(a, "a").is_err());
        let r: Result<&HostObject, _> = handle::borrow(o, "o");
        assert!(r.is_err());
        let r: Result<&mut IterConfig, _> = handle::box_mut(c, "config");
        assert!(r.is_err());
        let r: Result<&TensorIterator, _> = handle::box_ref(it, "it");
        assert!(r.is_err());
    }
    let _: *mut TsrWeakTensor = handle::weak_of(t);
    let _: *mut TsrWeakStorage = handle::weak_of(s);
    let w: *const TsrWeakObject = std::ptr::null();
    let _: *mut TsrObject = handle::strong_of(w);
}

/// Ignored under a plain `cargo test`: trybuild checks the crate and its
/// dependencies a third time. With compile-fail cases only, it runs
/// `cargo check` (no code generated; a pass case would make it `cargo
/// build` them all: 180 s of CI's two cores against 64-72 s). CI runs it as
/// a stage of its own: `cargo test --test handle_pairing -- --ignored`.
#[test]
#[ignore = "checks the crate again: cargo test --test handle_pairing -- --ignored"]
fn wrong_pairings_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/handle_pairing/fail/*.rs");
}
