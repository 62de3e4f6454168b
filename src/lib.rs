//! tessera: a tensor memory core with a C ABI.
//!
//! The safe Rust core — devices, dtypes, intrusive refcounts, data
//! pointers, allocators, storages, tensors, the iterator and its kernels —
//! is usable directly from Rust. The `ffi` module exports it to C as
//! `tsr_*` functions declared in the generated header `include/tessera.h`;
//! only that module deals with raw C pointers, status codes and the
//! last-error slot.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod error;
mod files;

pub mod allocator;
pub mod data_ptr;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod pickle;
pub mod refcount;
pub mod serialize;
pub mod storage;
pub mod tensor;

pub mod ffi;
mod fork;
pub mod iterator;
pub mod kernels;
pub mod parallel;
mod platform;

pub use allocator::Allocator;
pub use data_ptr::DataPtr;
pub use device::{Device, DeviceType};
pub use dtype::{DType, Scalar};
pub use error::{Error, ErrorKind, Result};
pub use refcount::{RcTarget, Ref, WeakRef};
pub use storage::{Storage, WeakStorage};
pub use tensor::{MemoryFormat, Tensor, WeakTensor};

/// The library version, "MAJOR.MINOR.PATCH".
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
