//! Running a built iterator with C callbacks: the 2-D loop adapters
//! (parallel and serial; TsrLoop2d and TsrLoop2dN, which is also given
//! the operand count), reductions with per-chunk accumulators, 32-bit
//! pieces, and the cast write-back.

use super::*;

/// Adapts a C loop and its user pointer into a core loop body.
#[derive(Clone, Copy)]
struct CLoop {
    f: unsafe extern "C" fn(*mut c_void, *mut *mut c_char, *const i64, i64, i64),
    user: *mut c_void,
}
// SAFETY: the TsrLoop2d contract says the body may be called from several
// threads at once with the same user pointer.
unsafe impl Sync for CLoop {}
// SAFETY: as Sync.
unsafe impl Send for CLoop {}

/// A C loop body of either signature, as the run calls need it.
trait LoopBody: Sync {
    fn call(&self, data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64);
}

/// The body of tsr_iter_for_each and tsr_iter_for_each_n: every element,
/// on the pool, then the cast outputs written back.
///
/// # Safety
/// `it` NULL or a live TsrIter handle (the header's contract,
/// ffi/handle.rs).
unsafe fn run_parallel(it: *mut TsrIter, body: &impl LoopBody, grain_size: i64) -> Result<()> {
    // SAFETY: the contract above, passed on; iter_to_run checks NULL.
    let it = unsafe { iter_to_run(it)? };
    it.for_each(
        &|d: &mut [*mut u8], s: &[i64], n0, n1| body.call(d, s, n0, n1),
        grain_size,
    );
    it.cast_outputs()
}

/// The body of tsr_iter_serial_for_each and tsr_iter_serial_for_each_n:
/// the elements [begin, end) on the calling thread.
///
/// # Safety
/// As [`run_parallel`].
unsafe fn run_serial(it: *mut TsrIter, body: &impl LoopBody, begin: i64, end: i64) -> Result<()> {
    // SAFETY: the contract above, passed on; iter_to_run checks NULL.
    let it = unsafe { iter_to_run(it)? };
    crate::ensure!(
        begin >= 0,
        InvalidArgument,
        "begin {begin} is negative: expected 0 <= begin <= end"
    );
    it.serial_for_each(
        &|d: &mut [*mut u8], s: &[i64], n0, n1| body.call(d, s, n0, n1),
        begin,
        end,
    );
    Ok(())
}

impl LoopBody for CLoop {
    fn call(&self, data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64) {
        // SAFETY: the iterator hands the body pointers and strides that stay
        // inside every operand for i < n0, j < n1; the body follows the
        // TsrLoop2d contract.
        unsafe {
            (self.f)(
                self.user,
                data.as_mut_ptr() as *mut *mut c_char,
                strides.as_ptr(),
                n0,
                n1,
            )
        }
    }
}

/// Adapts a C loop that is given the operand count.
#[derive(Clone, Copy)]
struct CLoopN {
    f: unsafe extern "C" fn(*mut c_void, i64, *mut *mut c_char, *const i64, i64, i64),
    user: *mut c_void,
}
// SAFETY: as CLoop (the TsrLoop2dN contract is TsrLoop2d's).
unsafe impl Sync for CLoopN {}
// SAFETY: as Sync.
unsafe impl Send for CLoopN {}

impl LoopBody for CLoopN {
    fn call(&self, data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64) {
        // SAFETY: as CLoop::call; `data` holds one pointer per operand, so
        // its length is the operand count the body is given.
        unsafe {
            (self.f)(
                self.user,
                data.len() as i64,
                data.as_mut_ptr() as *mut *mut c_char,
                strides.as_ptr(),
                n0,
                n1,
            )
        }
    }
}

/// Runs `loop` over every element, split across the thread pool
/// (tsr_set_num_threads) in chunks of at least `grain_size` elements (<= 0:
/// 32768; iterations below it run on the calling thread), then writes
/// outputs computed in cast temporaries back to the caller's tensors.
///
/// Errors: TSR_ERR_NULL_POINTER (it or loop); TSR_ERR_INVALID_ARGUMENT
/// (an operand's storage was resized or given other memory since the
/// build: every run call checks, so the loop never sees freed memory;
/// build the iterator again); TSR_ERR_SHAPE (an operand's storage shrank
/// below its tensor).
///
/// # Safety
/// `it` NULL or live; `loop` follows the TsrLoop2d contract.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_for_each(
    it: *mut TsrIter,
    loop_: TsrLoop2d,
    user: *mut c_void,
    grain_size: i64,
) -> TsrStatus {
    guard("tsr_iter_for_each", || {
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        // SAFETY: `it` is NULL or live (this function's contract).
        unsafe { run_parallel(it, &CLoop { f, user }, grain_size) }
    })
}

/// Runs `loop` over the flattened elements [begin, end) on the calling
/// thread (end is clamped to numel). Does not write cast temporaries back:
/// call tsr_iter_cast_outputs when every range is done.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_INVALID_ARGUMENT (begin < 0).
///
/// # Safety
/// As tsr_iter_for_each.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_serial_for_each(
    it: *mut TsrIter,
    loop_: TsrLoop2d,
    user: *mut c_void,
    begin: i64,
    end: i64,
) -> TsrStatus {
    guard("tsr_iter_serial_for_each", || {
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        // SAFETY: `it` is NULL or live (this function's contract).
        unsafe { run_serial(it, &CLoop { f, user }, begin, end) }
    })
}

/// tsr_iter_for_each with a loop that is given the operand count
/// (TsrLoop2dN): the same chunks, threads, checks and write-back of cast
/// outputs, and the same errors.
///
/// # Safety
/// `it` NULL or live; `loop` follows the TsrLoop2dN contract.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_for_each_n(
    it: *mut TsrIter,
    loop_: TsrLoop2dN,
    user: *mut c_void,
    grain_size: i64,
) -> TsrStatus {
    guard("tsr_iter_for_each_n", || {
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        // SAFETY: `it` is NULL or live (this function's contract).
        unsafe { run_parallel(it, &CLoopN { f, user }, grain_size) }
    })
}

/// tsr_iter_serial_for_each with a loop that is given the operand count
/// (TsrLoop2dN): the flattened elements [begin, end) on the calling
/// thread, cast outputs not written back, the same errors.
///
/// # Safety
/// As tsr_iter_for_each_n.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_serial_for_each_n(
    it: *mut TsrIter,
    loop_: TsrLoop2dN,
    user: *mut c_void,
    begin: i64,
    end: i64,
) -> TsrStatus {
    guard("tsr_iter_serial_for_each_n", || {
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        // SAFETY: `it` is NULL or live (this function's contract).
        unsafe { run_serial(it, &CLoopN { f, user }, begin, end) }
    })
}

/// Copies outputs that were computed in a temporary of the common dtype
/// into the caller's tensors (with conversion). tsr_iter_for_each does this
/// itself.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_cast_outputs(it: *mut TsrIter) -> TsrStatus {
    guard("tsr_iter_cast_outputs", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_to_run checks NULL.
        unsafe { iter_to_run(it)? }.cast_outputs()
    })
}

/// A parallel reduction with one accumulator per chunk: `*acc` (acc_size
/// bytes) holds the identity on entry; every chunk starts from a copy of
/// it (16-byte aligned, as max_align_t), runs `loop` with its own accumulator over its elements, and the
/// chunk accumulators are combined into `*acc` in chunk order (a fixed
/// thread count gives a reproducible result). Chunks hold at least
/// `grain_size` elements (<= 0: 32768).
///
/// Errors: TSR_ERR_NULL_POINTER (it, loop, combine, or acc with acc_size >
/// 0); TSR_ERR_INVALID_ARGUMENT (acc_size > 4096).
///
/// # Safety
/// `acc` readable and writable for acc_size bytes; callbacks follow the
/// TsrLoop2d contract.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_parallel_reduce(
    it: *mut TsrIter,
    loop_: TsrReduceLoop,
    combine: TsrReduceCombine,
    user: *mut c_void,
    acc: *mut c_void,
    acc_size: usize,
    grain_size: i64,
) -> TsrStatus {
    guard("tsr_iter_parallel_reduce", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_to_run checks NULL.
        let it = unsafe { iter_to_run(it)? };
        let Some(f) = loop_ else {
            return Err(null_arg("loop"));
        };
        let Some(comb) = combine else {
            return Err(null_arg("combine"));
        };
        crate::ensure!(
            acc_size <= 4096,
            InvalidArgument,
            "acc_size {acc_size} is too large: expected at most 4096 bytes"
        );
        if acc_size > 0 {
            check_not_null(acc, "acc")?;
        }
        let identity = AccBuf::from_raw(acc as *const u8, acc_size);
        let cb = CReduce { f, comb, user };
        let result = it.parallel_reduce(
            grain_size,
            || identity.clone(),
            |a: &mut AccBuf, d: &mut [*mut u8], s: &[i64], n0, n1| {
                cb.run(a.bytes_mut(), d, s, n0, n1)
            },
            |mut a, b| {
                cb.combine(a.bytes_mut(), b.bytes());
                a
            },
        );
        // parallel_reduce folded the chunks, in order, into a copy of the
        // identity.
        // SAFETY: acc writable for acc_size bytes.
        unsafe { std::ptr::copy_nonoverlapping(result.bytes().as_ptr(), acc as *mut u8, acc_size) };
        Ok(())
    })
}

/// An accumulator buffer aligned to 16 bytes (the alignment of
/// max_align_t on the platforms tessera supports).
#[derive(Clone)]
struct AccBuf {
    words: Vec<u128>,
    len: usize,
}

impl AccBuf {
    /// Copies `len` bytes from `p` (NULL allowed when len is 0).
    fn from_raw(p: *const u8, len: usize) -> AccBuf {
        let mut buf = AccBuf {
            words: vec![0u128; len.div_ceil(16)],
            len,
        };
        if len > 0 {
            // SAFETY: the caller of tsr_iter_parallel_reduce guarantees p is
            // readable for len bytes; the buffer holds at least len bytes.
            unsafe { std::ptr::copy_nonoverlapping(p, buf.words.as_mut_ptr() as *mut u8, len) };
        }
        buf
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the words hold at least len initialized bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const u8, self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as bytes(), exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr() as *mut u8, self.len) }
    }
}

#[derive(Clone, Copy)]
struct CReduce {
    f: unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_char, *const i64, i64, i64),
    comb: unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void),
    user: *mut c_void,
}
// SAFETY: the callbacks are documented as callable from several threads.
unsafe impl Sync for CReduce {}
// SAFETY: as Sync.
unsafe impl Send for CReduce {}

impl CReduce {
    fn run(&self, acc: &mut [u8], data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64) {
        // SAFETY: as CLoop::call; acc is this chunk's own buffer.
        unsafe {
            (self.f)(
                self.user,
                acc.as_mut_ptr() as *mut c_void,
                data.as_mut_ptr() as *mut *mut c_char,
                strides.as_ptr(),
                n0,
                n1,
            )
        }
    }

    fn combine(&self, acc: &mut [u8], other: &[u8]) {
        // SAFETY: both buffers hold acc_size bytes.
        unsafe {
            (self.comb)(
                self.user,
                acc.as_mut_ptr() as *mut c_void,
                other.as_ptr() as *const c_void,
            )
        }
    }
}

/// Calls `fn` once per group of elements that reduce into the same output
/// elements, with a sub-iterator whose non-reduced dims are fixed
/// (borrowed: valid during the call only, never freed by the callee); run
/// tsr_iter_serial_for_each on it. With `parallelize`, large reductions
/// split over threads, calling `fn` concurrently.
///
/// # Safety
/// `it` NULL or live; `fn` callable from several threads when parallelize.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_foreach_reduced_elt(
    it: *mut TsrIter,
    fn_: TsrSubIterFn,
    user: *mut c_void,
    parallelize: bool,
) -> TsrStatus {
    guard("tsr_iter_foreach_reduced_elt", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_to_run checks NULL.
        let it = unsafe { iter_to_run(it)? };
        let Some(f) = fn_ else {
            return Err(null_arg("fn"));
        };
        crate::ensure!(
            it.noutputs() >= 1,
            InvalidArgument,
            "the iterator has no output to reduce into"
        );
        let cb = CSub { f, user };
        it.foreach_reduced_elt(&|sub: &TensorIterator| cb.call(sub), parallelize);
        Ok(())
    })
}

/// Calls `fn` with each piece of the iteration that is addressable with
/// 32-bit offsets (halving the dim with the largest extent until every
/// piece fits), in order; a piece is borrowed for the call only.
///
/// # Safety
/// `it` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn tsr_iter_for_each_32bit_piece(
    it: *mut TsrIter,
    fn_: TsrSubIterFn,
    user: *mut c_void,
) -> TsrStatus {
    guard("tsr_iter_for_each_32bit_piece", || {
        // SAFETY: `it` is NULL or a live TsrIter handle (the header's
        // contract, ffi/handle.rs); iter_to_run checks NULL.
        let it = unsafe { iter_to_run(it)? };
        let Some(f) = fn_ else {
            return Err(null_arg("fn"));
        };
        let cb = CSub { f, user };
        it.for_each_32bit_piece(&mut |piece: &TensorIterator| cb.call(piece));
        Ok(())
    })
}

#[derive(Clone, Copy)]
struct CSub {
    f: unsafe extern "C" fn(*mut c_void, *mut TsrIter),
    user: *mut c_void,
}
// SAFETY: documented as callable from several threads when parallel.
unsafe impl Sync for CSub {}
// SAFETY: as Sync.
unsafe impl Send for CSub {}

impl CSub {
    fn call(&self, sub: &TensorIterator) {
        // SAFETY: the sub-iterator lives for the call; the callee only
        // reads it (queries, serial loops) and never frees it.
        unsafe { (self.f)(self.user, lend(sub)) }
    }
}
