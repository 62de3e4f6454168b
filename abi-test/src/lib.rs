//! The ABI layout test of tessera lives in `tests/abi.rs`; its build script
//! (`build.rs`) generates it with ctest from the Rust definitions in
//! `../src/ffi` and the C header `../include/tessera.h`. This library is
//! empty.
