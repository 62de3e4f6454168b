// A weak handle where a strong one is expected.
use tessera::ffi::handle;
use tessera::ffi::tensor::TsrWeakTensor;

fn main() {
    let w: *const TsrWeakTensor = std::ptr::null();
    // SAFETY: never runs; this file must not compile.
    let _ = unsafe { handle::view(w, "t") };
}
