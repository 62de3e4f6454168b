// A tensor reference handed out as a storage handle, and a tensor's weak
// handle taken as a storage's.
use tessera::ffi::handle;
use tessera::ffi::storage::{TsrStorage, TsrWeakStorage};
use tessera::ffi::tensor::TsrTensor;
use tessera::tensor::Tensor;

fn main() {
    let t = Tensor::empty(&[2], tessera::dtype::DType::Float, tessera::device::Device::CPU).unwrap();
    let _: *mut TsrStorage = handle::into_handle(t.into_ref());
    let h: *const TsrTensor = std::ptr::null();
    let _: *mut TsrWeakStorage = handle::weak_of(h);
}
