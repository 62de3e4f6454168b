// Each handle used with its own target and kind: compiles and runs.
use tessera::ffi::allocator::TsrAllocator;
use tessera::ffi::handle;
use tessera::ffi::iter::{TsrIter, TsrIterConfig};
use tessera::ffi::object::{HostObject, TsrObject, TsrWeakObject};
use tessera::ffi::storage::{TsrStorage, TsrWeakStorage};
use tessera::ffi::tensor::{TsrTensor, TsrWeakTensor};
use tessera::iterator::{IterConfig, TensorIterator};
use tessera::storage::StorageImpl;
use tessera::tensor::TensorImpl;

fn main() {
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
