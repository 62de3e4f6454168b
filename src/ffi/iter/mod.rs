//! The iterator at the ABI, one file per job: the config builder (one
//! setter per c10 option) in config.rs, build and the c10 presets in
//! build.rs, queries of a built iterator in query.rs, and the loops that
//! call C callbacks in loops.rs. This file holds the handle and callback
//! types and what the four share; each of them imports it whole.

// In this order (not rustfmt's): cbindgen writes the header in the order
// it reads the files, which keeps the functions where they were.
pub mod config;

pub mod build;

pub mod query;

pub mod loops;

pub use build::*;
pub use config::*;
pub use loops::*;
pub use query::*;

use super::call::{
    check_not_null, dtype_arg, getter, guard, guard_value, i64_slice, null_arg, optional_tensor,
    preset, set_flag, write_out,
};
use super::handle::{box_from, box_into, box_mut, box_ref, lend};
use super::tensor::{tensor_handle, tensor_ref, tensor_view, TsrTensor};
use super::types::*;
pub use super::types::{TsrIter, TsrIterConfig};
use crate::error::Result;
use crate::iterator::{IterConfig, TensorIterator};
use crate::tensor::Tensor;
use std::ffi::{c_char, c_void};

/// A 2-D loop body. `data[arg]` is the first element of operand arg
/// (outputs first); `strides` holds the dim-0 byte strides of every
/// operand, then the dim-1 byte strides; the body handles
/// `data[arg] + i*strides[arg] + j*strides[ntensors+arg]` for i < size0,
/// j < size1. It may change its copy of `data`. tsr_iter_for_each calls it
/// from several threads at once; it must not unwind (C++ exceptions).
pub type TsrLoop2d = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        data: *mut *mut c_char,
        strides: *const i64,
        size0: i64,
        size1: i64,
    ),
>;

/// A 2-D loop body that is given the operand count: as TsrLoop2d, with
/// `ntensors` (outputs first, then inputs: tsr_iter_ntensors) before
/// `data`, so that one body serves iterators of any operand count
/// (`strides[ntensors + arg]` is operand arg's dim-1 stride).
/// tsr_iter_for_each_n and tsr_iter_serial_for_each_n call it.
pub type TsrLoop2dN = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        ntensors: i64,
        data: *mut *mut c_char,
        strides: *const i64,
        size0: i64,
        size1: i64,
    ),
>;

/// A reduction loop body: as TsrLoop2d with the calling chunk's accumulator.
pub type TsrReduceLoop = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        acc: *mut c_void,
        data: *mut *mut c_char,
        strides: *const i64,
        size0: i64,
        size1: i64,
    ),
>;

/// Combines accumulator `other` into `acc`.
pub type TsrReduceCombine =
    Option<unsafe extern "C" fn(user: *mut c_void, acc: *mut c_void, other: *const c_void)>;

/// Called with a sub-iterator (borrowed for the call only; do not free it).
pub type TsrSubIterFn = Option<unsafe extern "C" fn(user: *mut c_void, sub: *mut TsrIter)>;

/// The config behind the `config` argument.
///
/// # Safety
/// `c` under the contract of ffi/handle.rs, not used elsewhere during the
/// call (configs are single-owner and not thread-safe).
unsafe fn config_mut<'a>(c: *mut TsrIterConfig) -> Result<&'a mut IterConfig> {
    // SAFETY: the contract above, passed on.
    unsafe { box_mut(c, "config") }
}

/// The iterator behind the `it` argument (owned or lent).
///
/// # Safety
/// `it` under the contract of ffi/handle.rs.
unsafe fn iter_ref<'a>(it: *const TsrIter) -> Result<&'a TensorIterator> {
    // SAFETY: the contract above, passed on.
    unsafe { box_ref(it, "it") }
}

/// The iterator behind the `it` argument of a run call, after
/// [`TensorIterator::check_memory`]: its operands' memory has not moved or
/// shrunk since the build.
///
/// # Safety
/// As [`iter_ref`].
unsafe fn iter_to_run<'a>(it: *const TsrIter) -> Result<&'a TensorIterator> {
    // SAFETY: the contract above, passed on.
    let it = unsafe { iter_ref(it)? };
    it.check_memory()?;
    Ok(it)
}

fn arg_index(it: &TensorIterator, arg: i64) -> Result<usize> {
    crate::ensure!(
        arg >= 0 && (arg as usize) < it.ntensors(),
        InvalidArgument,
        "operand {arg} is out of range: the iterator has {} operands",
        it.ntensors()
    );
    Ok(arg as usize)
}
