// A tensor handle borrowed as a storage: the target is fixed by the handle.
use tessera::ffi::handle;
use tessera::ffi::tensor::TsrTensor;
use tessera::storage::StorageImpl;

fn main() {
    let t: *const TsrTensor = std::ptr::null();
    // SAFETY: never runs; this file must not compile.
    let _: Result<&StorageImpl, _> = unsafe { handle::borrow(t, "t") };
}
