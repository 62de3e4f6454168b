//! The shapes of an exported function's body, in one place: the panic
//! and error guards every export runs in, the shared bodies of families of
//! exports (views, element-wise kernels, reductions, iterator flags and
//! presets), and the readers and writers of plain arguments (NULL checks,
//! out-pointers, int64 arrays, sized structs, dtype / device / format
//! numbers). ffi/mod.rs says which to use when; the last-error slot,
//! status mapping and NULL-argument errors they use are in ffi/error.rs,
//! the handle casts in ffi/handle.rs. Above those two; below every area
//! file.

pub(crate) use super::error::{check_not_null, null_arg};
use super::error::{fail, fail_owned, record_panic};
use super::handle::{box_into, box_mut, tensor_handle, tensor_view};
use super::types::*;
use crate::device::DeviceType;
use crate::dtype::DType;
use crate::error::Result;
use crate::iterator::{IterConfig, TensorIterator};
use crate::tensor::{MemoryFormat, Tensor};
use smallvec::SmallVec;
use std::ffi::{c_char, CStr};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};

// ---- Guards: every exported function's body runs in exactly one. ----

/// Runs the body of a fallible exported function: maps its error to a
/// status and message, and a panic to TSR_ERR_INTERNAL. Inlined into each
/// exported function so the success path costs a compare; the error and
/// panic paths are out of line.
#[inline(always)]
pub(crate) fn guard(fname: &str, body: impl FnOnce() -> Result<()>) -> TsrStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => TSR_OK,
        Ok(Err(e)) => fail_owned(fname, e),
        Err(payload) => {
            record_panic(fname, payload);
            TSR_ERR_INTERNAL
        }
    }
}

/// Runs the body of an infallible exported function (a getter); a panic
/// returns `fallback` and records the message.
#[inline(always)]
pub(crate) fn guard_value<T>(fname: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            record_panic(fname, payload);
            fallback
        }
    }
}

/// Runs a getter body: errors record a message and give `fallback`.
pub(crate) fn getter<T>(fname: &str, fallback: T, body: impl FnOnce() -> Result<T>) -> T
where
    T: Copy,
{
    guard_value(fname, fallback, || match body() {
        Ok(v) => v,
        Err(e) => {
            fail(fname, &e);
            fallback
        }
    })
}

// ---- Shared bodies of families of exports. ----

/// Shared body of the boolean setters.
///
/// # Safety
/// `config` NULL or live.
pub(crate) unsafe fn set_flag(
    fname: &str,
    config: *mut TsrIterConfig,
    set: impl FnOnce(&mut IterConfig),
) -> TsrStatus {
    guard(fname, || {
        // SAFETY: `config` is NULL or a live TsrIterConfig (the header's
        // contract, ffi/handle.rs), unaliased during the call; box_mut checks
        // NULL.
        set(unsafe { box_mut(config, "config")? });
        Ok(())
    })
}

/// Shared body of the exports that make one value and write it to an
/// out-pointer (named `out_name` in errors): the NULL check first, then
/// `make`, then the write; on error `*out` is untouched.
///
/// # Safety
/// `out` NULL or writable.
pub(crate) unsafe fn produce<T>(
    fname: &str,
    out: *mut T,
    out_name: &str,
    make: impl FnOnce() -> Result<T>,
) -> TsrStatus {
    guard(fname, || {
        check_not_null(out, out_name)?;
        let value = make()?;
        // SAFETY: out checked non-NULL; the caller made it writable.
        unsafe { write_out(out, value) };
        Ok(())
    })
}

/// Shared body of the iterator presets: [`produce`] of a new TsrIter.
///
/// # Safety
/// `it` NULL or writable.
pub(crate) unsafe fn preset(
    fname: &str,
    it: *mut *mut TsrIter,
    make: impl FnOnce() -> Result<Box<TensorIterator>>,
) -> TsrStatus {
    // SAFETY: `it` is this function's own argument, NULL or writable.
    unsafe { produce(fname, it, "it", || make().map(box_into)) }
}

/// Shared body: NULL checks, the view, the write to `out`.
///
/// # Safety
/// `t` NULL or a live handle; `out` NULL or writable.
pub(crate) unsafe fn view_op(
    fname: &str,
    t: *const TsrTensor,
    out: *mut *mut TsrTensor,
    op: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> TsrStatus {
    guard(fname, || {
        check_not_null(out, "out")?;
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let input = unsafe { tensor_view(t, "t")? };
        let r = op(&input)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, r) };
        Ok(())
    })
}

/// Shared body of the element-wise kernels: reads the operands, runs
/// `op`, and writes a new reference to the output through `result`
/// (which may be NULL when an output was given).
///
/// # Safety
/// Handles NULL or live; `result` NULL or writable.
pub(crate) unsafe fn elementwise(
    fname: &str,
    out: *mut TsrTensor,
    inputs: &[(*const TsrTensor, &str)],
    result: *mut *mut TsrTensor,
    op: impl FnOnce(Option<&Tensor>, &[Tensor]) -> Result<Tensor>,
) -> TsrStatus {
    guard(fname, || {
        if out.is_null() {
            check_not_null(result, "result")?;
        }
        // SAFETY: `out` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); NULL means none; otherwise checked live.
        let out = unsafe { optional_tensor(out, "out")? };
        // The inputs are borrowed for the call (no reference counts taken).
        let mut args: SmallVec<[ManuallyDrop<Tensor>; 3]> = SmallVec::new();
        for &(t, name) in inputs {
            // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
            // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
            args.push(unsafe { tensor_view(t, name)? });
        }
        // SAFETY: ManuallyDrop<Tensor> has the layout of Tensor; the slice
        // only lends the views for the call.
        let args: &[Tensor] =
            unsafe { std::slice::from_raw_parts(args.as_ptr() as *const Tensor, args.len()) };
        let r = op(out.as_deref(), args)?;
        if !result.is_null() {
            // SAFETY: result checked non-NULL and writable per the caller.
            unsafe { put_tensor(result, r) };
        }
        Ok(())
    })
}

/// Shared body of the reductions.
///
/// # Safety
/// `a` NULL or live; `dims` NULL or readable for `ndims` values; `out`
/// NULL or writable.
pub(crate) unsafe fn reduction(
    fname: &str,
    a: *const TsrTensor,
    ndims: i64,
    dims: *const i64,
    keepdim: bool,
    out: *mut *mut TsrTensor,
    op: fn(&Tensor, &[i64], bool) -> Result<Tensor>,
) -> TsrStatus {
    guard(fname, || {
        check_not_null(out, "out")?;
        // SAFETY: `a` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        let a = unsafe { tensor_view(a, "a")? };
        // SAFETY: the header requires `dims` readable for `ndims` values when
        // non-NULL; i64_slice checks the length and NULL.
        let dims = unsafe { i64_slice(dims, ndims, "dims")? };
        let r = op(&a, dims, keepdim)?;
        // SAFETY: out checked non-NULL.
        unsafe { put_tensor(out, r) };
        Ok(())
    })
}

// ---- Plain arguments: checks, readers, writers. ----

/// Writes `value` through a checked out-pointer.
///
/// # Safety
/// `out` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T) {
    debug_assert!(!out.is_null());
    // SAFETY: out was checked non-NULL before the body, and the caller made it
    // writable for a T.
    unsafe { out.write(value) };
}

/// Writes a new tensor handle through a checked out-pointer.
///
/// # Safety
/// `out` non-NULL and writable.
pub(crate) unsafe fn put_tensor(out: *mut *mut TsrTensor, t: Tensor) {
    // SAFETY: out is non-NULL (checked by the caller) and writable.
    unsafe { write_out(out, tensor_handle(t)) }
}

/// Reads `n` int64 values from a C array; NULL is allowed when n == 0.
///
/// # Safety
/// `p` must be NULL or valid for `n` reads.
pub(crate) unsafe fn i64_slice<'a>(p: *const i64, n: i64, name: &str) -> Result<&'a [i64]> {
    crate::ensure!(
        n >= 0,
        InvalidArgument,
        "argument '{name}' has length {n}: expected a non-negative length"
    );
    crate::ensure!(
        n <= TSR_MAX_DIMS,
        Shape,
        "argument '{name}' has {n} entries: at most {TSR_MAX_DIMS} dims are supported"
    );
    if n == 0 {
        return Ok(&[]);
    }
    check_not_null(p, name)?;
    // SAFETY: p checked non-NULL above, n in 1..=TSR_MAX_DIMS, and the caller
    // made p valid for n reads.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// Reads a host-provided struct that starts with `struct_size`: copies the
/// bytes the host has and leaves later fields zero (NULL), so hosts built
/// against an older, shorter struct keep working.
///
/// # Safety
/// `p` must be valid for reads of `struct_size` bytes, `struct_size` being
/// its first u32.
pub(crate) unsafe fn read_sized<T: Copy>(p: *const T, min_size: usize, what: &str) -> Result<T> {
    // SAFETY: every struct read this way starts with a u32 struct_size.
    let size = unsafe { (p as *const u32).read_unaligned() } as usize;
    crate::ensure!(
        (min_size..=65536).contains(&size),
        InvalidArgument,
        "{what}.struct_size is {size}: expected sizeof({what}) as compiled ({} in this \
         version, at least {min_size})",
        std::mem::size_of::<T>()
    );
    let mut value = std::mem::MaybeUninit::<T>::zeroed();
    let n = size.min(std::mem::size_of::<T>());
    // SAFETY: p is valid for `size` >= n bytes; value has room for
    // size_of::<T>() >= n bytes; they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(p as *const u8, value.as_mut_ptr() as *mut u8, n) };
    // SAFETY: all structs read this way consist of integers, raw pointers
    // and Option<fn> fields, valid for any bytes copied from C and for
    // zeroes in the rest.
    Ok(unsafe { value.assume_init() })
}

/// The bytes of an out-struct that starts with `struct_size` (set by the
/// host to its sizeof) that this call fills: the host's size, or ours
/// when the host's struct is longer, so an older, shorter struct gets
/// only the fields it has. `what` names the struct in the message.
///
/// # Safety
/// `out` non-NULL and valid for reads of its first u32.
pub(crate) unsafe fn out_struct_size<T>(out: *mut T, what: &str) -> Result<usize> {
    // SAFETY: out is non-NULL and, per the contract, starts with the u32
    // struct_size the caller set.
    let size = unsafe { (out as *const u32).read_unaligned() } as usize;
    crate::ensure!(
        (4..=65536).contains(&size),
        InvalidArgument,
        "out->struct_size is {size}: set it to sizeof({what}) before the call ({} in this \
         version)",
        std::mem::size_of::<T>()
    );
    Ok(size.min(std::mem::size_of::<T>()))
}

/// Writes the first `n` bytes of `value` to `out` (n from
/// [`out_struct_size`]).
///
/// # Safety
/// `out` writable for `n` bytes, `n` <= size_of::<T>().
pub(crate) unsafe fn write_sized<T>(out: *mut T, value: &T, n: usize) {
    debug_assert!(n <= std::mem::size_of::<T>());
    // SAFETY: out is writable for n bytes (the contract); value is
    // readable for size_of::<T>() >= n bytes; they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(value as *const T as *const u8, out as *mut u8, n) };
}

/// The tensor behind a handle borrowed for the call (as tensor_view), or
/// None for NULL: for operands documented "may be NULL".
///
/// # Safety
/// `t` under the contract of ffi/handle.rs; the result must not outlive
/// the call.
pub(crate) unsafe fn optional_tensor(
    t: *const TsrTensor,
    name: &str,
) -> Result<Option<ManuallyDrop<Tensor>>> {
    if t.is_null() {
        Ok(None)
    } else {
        // SAFETY: `t` is NULL or a live TsrTensor handle (the header's
        // contract, ffi/handle.rs); tensor_view checks NULL and liveness.
        unsafe { tensor_view(t, name) }.map(Some)
    }
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` NULL or a NUL-terminated string.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> Result<&'a str> {
    check_not_null(p, name)?;
    // SAFETY: p is non-NULL and NUL-terminated (the caller's contract).
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(bytes).map_err(|e| {
        crate::err!(
            InvalidArgument,
            "argument '{name}' is not UTF-8 (byte {} of {:?}): expected a UTF-8 string",
            e.valid_up_to(),
            String::from_utf8_lossy(bytes)
        )
    })
}

/// Converts a C dtype number. The error names the bad number and the
/// accepted ones, not the argument (the messages are part of the
/// bad-input table).
pub(crate) fn dtype_arg(raw: TsrDType) -> Result<DType> {
    DType::from_raw(raw)
}

/// Converts a C device-type number.
pub(crate) fn device_type_arg(raw: TsrDeviceType) -> Result<DeviceType> {
    DeviceType::from_raw(raw)
}

/// Reads a memory format argument.
pub(crate) fn format_arg(format: TsrMemoryFormat) -> Result<MemoryFormat> {
    MemoryFormat::from_raw(format)
}
