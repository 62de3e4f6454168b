//! The C ABI: every `extern "C"` function of tessera, each a thin
//! conversion over the safe core. Only this module deals with raw C
//! pointers, status codes and the thread-local last-error slot.
//!
//! Conventions (docs/ABI.md): fallible functions return
//! `TsrStatus` and write results through out-pointers, untouched on failure;
//! every function runs inside a panic guard; NULL handles are
//! `TSR_ERR_NULL_POINTER`; handles returned are new references.

pub mod allocator;
pub mod caching;
pub mod cuda;
pub mod data_ptr;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod error;
pub mod iter;
pub mod kernels;
pub mod library;
pub mod object;
pub(crate) mod refcount;
pub mod storage;
pub mod tensor;
pub mod types;
pub mod views;

pub use error::*;
pub use types::*;
