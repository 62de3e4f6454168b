//! The C ABI: every `extern "C"` function of tessera, each a thin
//! conversion over the safe core. Only this module deals with raw C
//! pointers, status codes and the thread-local last-error slot.
//!
//! Conventions (docs/ABI.md): fallible functions return
//! `TsrStatus` and write results through out-pointers, untouched on failure;
//! every function runs inside a panic guard; NULL handles are
//! `TSR_ERR_NULL_POINTER`; handles returned are new references.
//!
//! Where things are, and which helper to use when writing an export:
//!
//! Layers, bottom to top (docs/ARCHITECTURE.md): `types` (plain C types
//! and every opaque handle type), `error`, `handle`, `call`, then the
//! area files; no file names one above it.
//!
//! - Types (`types`): the plain C types and constants, and every opaque
//!   handle type (`TsrTensor`, `TsrIter`, ...; each area file re-exports
//!   its own) with the host object's target `HostObject`.
//! - Handles (`handle`): each opaque handle type's Rust target and
//!   ownership (refcounted strong / weak, boxed, lent) and every cast of a
//!   handle pointer. Read a strong handle with `handle::borrow` (a `&T`
//!   for the call), `handle::view` (a `Ref` for the call, no count taken:
//!   to call methods of the owning wrapper) or `handle::clone_ref` (a new
//!   reference to keep); hand one out with `handle::into_handle`. Boxed
//!   handles (TsrIterConfig, TsrIter) go through `box_into` / `box_ref` /
//!   `box_mut` / `box_from`. The typed wrappers in each file fix the
//!   Rust wrapper type; prefer them. Their names say what they take, as
//!   `handle`'s do: `X_impl` borrows (`&XImpl` for the call, like
//!   `handle::borrow`), `X_view` borrows the owning wrapper (like
//!   `handle::view`), `X_ref` takes a new reference the caller keeps or
//!   drops (like `handle::clone_ref`), `X_handle` hands one out
//!   (`tensor_ref` / `tensor_impl`, `storage_ref` / `storage_impl`,
//!   `allocator_ref` / `allocator_impl` / `allocator_view`; `tensor_view`
//!   and `tensor_handle` are in `handle`, for `call`, and re-exported by
//!   `tensor`). An `_arg` function reads a plain value (`dtype_arg`,
//!   `format_arg`, ...), never a handle. Never cast a handle pointer
//!   elsewhere.
//! - Refcount exports (`refcount`): tsr_X_incref / decref / use_count /
//!   weak_use_count / downgrade and the tsr_weak_X_* functions are each a
//!   one-line call to the body of the same name, types inferred.
//! - Bodies (`call`): every export runs in exactly one guard:
//!   `guard` for a function returning TsrStatus (errors become status +
//!   message, a panic TSR_ERR_INTERNAL); `getter` for a function returning
//!   a value with a fallback (NULL, -1, false) and an error message;
//!   `guard_value` for one that cannot fail except by panicking. Families
//!   share a body: `produce` (make one value, write it to an
//!   out-pointer), `view_op` (tensor -> new view in `*out`), `elementwise`
//!   and `reduction` (kernels), `set_flag` (iterator config booleans),
//!   `preset` (iterator presets); `hand_out` (allocator getters) is in
//!   `allocator`. Plain arguments: `check_not_null` then `write_out`
//!   (`put_tensor` for a new tensor handle) for out-pointers,
//!   `i64_slice` for (ndim, int64 array) pairs, `read_sized` for host
//!   structs that start with struct_size, `optional_tensor` for a tensor
//!   that may be NULL, `dtype_arg` / `device_type_arg` / `format_arg`
//!   for enum numbers.
//! - Errors (`error`): the status codes of core errors, the thread's
//!   last-error message (`fail` records one), `call_host` around calls
//!   into C plugins, and the NULL-argument errors (`null_arg`,
//!   `check_not_null`; `call` re-exports them); `last_error` holds the
//!   exports that read and set the message (`tsr_last_error_message`,
//!   `tsr_status_name`, ...).
//!
//! Safety comments: the C caller's contract for a handle argument is
//! stated once in `handle`; each `// SAFETY:` at a call says which
//! argument it covers and what the callee checks itself.

pub mod allocator;
pub mod allocator_cpu;
pub mod allocator_plugin;
pub mod caching;
pub mod caching_stats;
pub(crate) mod call;
pub mod checkpoint;
pub mod cuda;
pub mod data_ptr;
pub mod device;
pub mod dlpack;
pub mod dtype;
pub mod error;
#[doc(hidden)]
pub mod handle;
pub mod iter;
pub mod kernels;
pub mod last_error;
pub mod library;
pub mod memory;
pub mod object;
pub(crate) mod refcount;
pub mod refcount_exports;
pub mod serialize;
pub mod storage;
pub mod storage_data;
pub mod storage_file;
pub mod storage_shm;
pub mod tensor;
pub mod tensor_resize;
pub mod torch_cuda;
pub mod types;
pub mod views;

pub use last_error::*;
// The refcount exports, at the path of every other shared name (they are
// generated into one file, not into their handle types' area files).
pub use refcount_exports::*;
pub use types::*;
