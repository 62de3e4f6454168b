// A single-owner iterator handle used as a refcounted one, and a
// refcounted tensor handle freed as a box.
use tessera::ffi::handle;
use tessera::ffi::iter::TsrIter;
use tessera::ffi::tensor::TsrTensor;

fn main() {
    let it: *const TsrIter = std::ptr::null();
    let t: *mut TsrTensor = std::ptr::null_mut();
    // SAFETY: never runs; this file must not compile.
    unsafe {
        let _ = handle::clone_ref(it, "it");
        let _ = handle::box_from(t);
    }
}
