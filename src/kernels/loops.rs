//! Inner loops over one run of elements (one row of the iterator's 2-D
//! loop): `n` elements per operand, each operand with a byte stride.
//!
//! Every loop has three shapes, picked per run: all operands contiguous
//! (processed in fixed chunks of loads, then computes, then stores, so the
//! compiler emits packed SIMD and an output that exactly aliases an input
//! is still correct), one input a broadcast scalar (stride 0), and a
//! general strided loop. Half types compute in f32 through stack buffers
//! filled with the `half` crate's vectorized slice conversions.
//!
//! Element accesses are unaligned reads and writes: tensors made from
//! foreign memory need not be aligned to their itemsize, and on x86 an
//! unaligned vector access costs nothing extra on aligned data.

use super::elem::Elem;
use super::simd;
use std::mem::size_of;

/// Elements per unrolled step of a contiguous loop.
const CHUNK: usize = 32;
/// Elements per op math buffer of the half-type loops.
pub(crate) const BUF: usize = 256;

/// Reads element `i` of a run.
///
/// # Safety
/// `p + i * stride` must address a readable `T`.
#[inline(always)]
pub(crate) unsafe fn ld<T: Copy>(p: *const u8, i: usize, stride: isize) -> T {
    // SAFETY: per the caller.
    unsafe { (p.offset(i as isize * stride) as *const T).read_unaligned() }
}

/// Writes element `i` of a run.
///
/// # Safety
/// `p + i * stride` must address a writable `T`.
#[inline(always)]
pub(crate) unsafe fn st<T: Copy>(p: *mut u8, i: usize, stride: isize, v: T) {
    // SAFETY: per the caller.
    unsafe { (p.offset(i as isize * stride) as *mut T).write_unaligned(v) }
}

/// Whether `T` computes in a wider type (half, bfloat16, ComplexHalf, BComplex32).
#[inline(always)]
pub(crate) const fn widens<T: Elem>() -> bool {
    size_of::<T::Op>() != size_of::<T>()
}

/// Where a contiguous output run may switch to streaming stores: the
/// first index whose address is 16-byte aligned, or None when streaming is
/// off or the run is not element-aligned.
#[inline(always)]
fn stream_start<D>(out: *mut u8, n: usize, stream: bool) -> Option<usize> {
    let size = size_of::<D>();
    if !stream || (out as usize) % size != 0 {
        return None;
    }
    let misaligned = (out as usize) % 16;
    Some(if misaligned == 0 {
        0
    } else {
        ((16 - misaligned) / size).min(n)
    })
}

/// Writes one chunk of results at element `i` of a contiguous run.
///
/// # Safety
/// Elements i..i+CHUNK of the run must be writable; with `stream`, their
/// address must be 16-byte aligned.
#[inline(always)]
unsafe fn store_chunk<D: Copy>(out: *mut u8, i: usize, r: &[D; CHUNK], stream: bool) {
    let sd = size_of::<D>() as isize;
    // SAFETY: per the caller.
    unsafe {
        if stream {
            simd::stream_store(out.offset(i as isize * sd), r);
        } else {
            for (k, v) in r.iter().enumerate() {
                st(out, i + k, sd, *v);
            }
        }
    }
}

/// `out[i] = f(x[i])` for i < n. `stream`: write a contiguous output with
/// non-temporal stores (for outputs larger than the cache).
///
/// # Safety
/// Both runs must address `n` valid elements, n >= 1 (element 0 of the
/// input is read before the loops); `out` may equal `x` (same stride) but
/// must not otherwise overlap it.
#[inline(always)]
pub(crate) unsafe fn map_run<S: Copy + Default, D: Copy + Default>(
    out: *mut u8,
    os: isize,
    x: *const u8,
    xs: isize,
    n: usize,
    stream: bool,
    f: impl Fn(S) -> D,
) {
    let (sd, ss) = (size_of::<D>() as isize, size_of::<S>() as isize);
    if os == sd && (xs == ss || xs == 0) {
        let scalar = xs == 0;
        // SAFETY: element 0 of the input (its one element when the stride
        // is 0, else the first of its run), which exists as n >= 1 (the
        // caller's contract; iterator runs and parallel_for ranges are
        // never empty).
        let x0 = f(unsafe { ld::<S>(x, 0, 0) });
        let value = |i: usize| {
            if scalar {
                x0
            } else {
                // SAFETY: `value` is only called with i < n (the loops
                // below), and the input is a contiguous run of n valid
                // elements (xs == ss).
                f(unsafe { ld(x, i, ss) })
            }
        };
        let start = stream_start::<D>(out, n, stream);
        let mut i = 0;
        if let Some(s) = start {
            while i < s {
                // SAFETY: i < s <= n (stream_start caps s at n), inside
                // the contiguous output run of n elements.
                unsafe { st(out, i, sd, value(i)) };
                i += 1;
            }
        }
        while i + CHUNK <= n {
            let mut v = [S::default(); CHUNK];
            if !scalar {
                for (k, e) in v.iter_mut().enumerate() {
                    // SAFETY: i + k < i + CHUNK <= n, inside the contiguous
                    // input run.
                    *e = unsafe { ld(x, i + k, ss) };
                }
            }
            let mut r = [x0; CHUNK];
            if !scalar {
                for (d, e) in r.iter_mut().zip(v) {
                    *d = f(e);
                }
            }
            // SAFETY: elements i..i + CHUNK <= n of the contiguous output
            // are writable. When streaming, i started at stream_start's
            // 16-byte aligned index and moves by CHUNK elements (a multiple
            // of 16 bytes), so out + i is 16-byte aligned.
            unsafe { store_chunk(out, i, &r, start.is_some()) };
            i += CHUNK;
        }
        for i in i..n {
            // SAFETY: i < n, inside the contiguous output run.
            unsafe { st(out, i, sd, value(i)) };
        }
        if start.is_some() {
            simd::sfence();
        }
    } else if xs == 0 {
        // SAFETY: a stride-0 input addresses one valid element, readable
        // as the run is not empty (n >= 1, the caller's contract).
        let v = f(unsafe { ld(x, 0, 0) });
        for i in 0..n {
            // SAFETY: i < n, inside the output run with its stride os.
            unsafe { st(out, i, os, v) };
        }
    } else {
        for i in 0..n {
            // SAFETY: i < n, inside both runs with their strides xs, os.
            unsafe { st(out, i, os, f(ld(x, i, xs))) };
        }
    }
}

/// `out[i] = f(a[i], b[i])` for i < n; `stream` as in [`map_run`].
///
/// # Safety
/// As [`map_run`], for both inputs (n >= 1 included).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn zip_run<A: Copy + Default, B: Copy + Default, D: Copy + Default>(
    out: *mut u8,
    os: isize,
    a: *const u8,
    as_: isize,
    b: *const u8,
    bs: isize,
    n: usize,
    stream: bool,
    f: impl Fn(A, B) -> D,
) {
    let (sd, sa, sb) = (
        size_of::<D>() as isize,
        size_of::<A>() as isize,
        size_of::<B>() as isize,
    );
    // One loop per case, so none tests a flag per element: both inputs
    // contiguous, or one of them a broadcast scalar; streaming or not.
    // SAFETY: each zip_contiguous arm is taken only when its flags hold:
    // the output is contiguous (os == sd), an input flagged scalar has
    // stride 0 (it reads its one element) and the other is contiguous, so
    // the caller's runs of n >= 1 valid elements, aliasing the output at
    // most exactly, are what zip_contiguous requires. The last arm reads
    // a[i], b[i] and writes out[i] for i < n with the caller's strides.
    unsafe {
        match (os == sd, as_ == sa, as_ == 0, bs == sb, bs == 0, stream) {
            (true, true, _, true, _, false) => {
                zip_contiguous::<A, B, D, false, false, false>(out, a, b, n, f)
            }
            (true, true, _, true, _, true) => {
                zip_contiguous::<A, B, D, false, false, true>(out, a, b, n, f)
            }
            (true, true, _, _, true, false) => {
                zip_contiguous::<A, B, D, false, true, false>(out, a, b, n, f)
            }
            (true, true, _, _, true, true) => {
                zip_contiguous::<A, B, D, false, true, true>(out, a, b, n, f)
            }
            (true, _, true, true, _, false) => {
                zip_contiguous::<A, B, D, true, false, false>(out, a, b, n, f)
            }
            (true, _, true, true, _, true) => {
                zip_contiguous::<A, B, D, true, false, true>(out, a, b, n, f)
            }
            _ => {
                for i in 0..n {
                    st(out, i, os, f(ld(a, i, as_), ld(b, i, bs)));
                }
            }
        }
    }
}

/// The contiguous loop of [`zip_run`]: `SA` / `SB` mark an input that is a
/// broadcast scalar, `STREAM` streaming stores.
///
/// # Safety
/// As [`zip_run`], with a contiguous output and inputs contiguous or
/// scalar as the flags say.
#[inline(always)]
unsafe fn zip_contiguous<
    A: Copy + Default,
    B: Copy + Default,
    D: Copy + Default,
    const SA: bool,
    const SB: bool,
    const STREAM: bool,
>(
    out: *mut u8,
    a: *const u8,
    b: *const u8,
    n: usize,
    f: impl Fn(A, B) -> D,
) {
    let (sd, sa, sb) = (
        size_of::<D>() as isize,
        size_of::<A>() as isize,
        size_of::<B>() as isize,
    );
    // SAFETY: element 0 of `a` (its one element when SA, else the first
    // of its contiguous run), which exists only for n >= 1, the caller's
    // contract (iterator runs are never empty; Flat::run skips empty
    // tensors, whose data pointer can be NULL).
    let x0: A = unsafe { ld(a, 0, 0) };
    // SAFETY: element 0 of `b` (its one element when SB, else the first
    // of its contiguous run): exists as n >= 1, as for `a` just before.
    let y0: B = unsafe { ld(b, 0, 0) };
    let value = |i: usize| {
        // SAFETY: `value` is only called with i < n (the loops below), and
        // `a` is a contiguous run of n valid elements when not SA.
        let x = if SA { x0 } else { unsafe { ld(a, i, sa) } };
        // SAFETY: i < n, and `b` is a contiguous run of n valid elements
        // when not SB.
        let y = if SB { y0 } else { unsafe { ld(b, i, sb) } };
        f(x, y)
    };
    let start = stream_start::<D>(out, n, STREAM);
    let mut i = 0;
    if let Some(s) = start {
        while i < s {
            // SAFETY: i < s <= n (stream_start caps s at n), inside the
            // contiguous output run of n elements.
            unsafe { st(out, i, sd, value(i)) };
            i += 1;
        }
    }
    let streaming = start.is_some();
    while i + CHUNK <= n {
        let mut va = [x0; CHUNK];
        let mut vb = [y0; CHUNK];
        if !SA {
            for (k, e) in va.iter_mut().enumerate() {
                // SAFETY: i + k < i + CHUNK <= n, inside a's contiguous run.
                *e = unsafe { ld(a, i + k, sa) };
            }
        }
        if !SB {
            for (k, e) in vb.iter_mut().enumerate() {
                // SAFETY: i + k < i + CHUNK <= n, inside b's contiguous run.
                *e = unsafe { ld(b, i + k, sb) };
            }
        }
        let mut r = [D::default(); CHUNK];
        for k in 0..CHUNK {
            r[k] = f(va[k], vb[k]);
        }
        // SAFETY: elements i..i + CHUNK <= n of the contiguous output are
        // writable. When streaming, i started at stream_start's 16-byte
        // aligned index and moves by CHUNK elements (a multiple of 16
        // bytes), so out + i is 16-byte aligned.
        unsafe { store_chunk(out, i, &r, STREAM && streaming) };
        i += CHUNK;
    }
    for i in i..n {
        // SAFETY: i < n, inside the contiguous output run.
        unsafe { st(out, i, sd, value(i)) };
    }
    if streaming {
        simd::sfence();
    }
}

/// Widens `dst.len()` elements of a run into op math.
///
/// # Safety
/// The run must address `dst.len()` readable elements.
#[inline(always)]
pub(crate) unsafe fn load_op<T: Elem>(dst: &mut [T::Op], p: *const u8, stride: isize) {
    let n = dst.len();
    if stride == size_of::<T>() as isize && (p as usize) % std::mem::align_of::<T>() == 0 {
        // SAFETY: a contiguous, aligned run of n elements.
        let src = unsafe { std::slice::from_raw_parts(p as *const T, n) };
        T::load_op(src, dst);
    } else if stride == 0 {
        // SAFETY: one readable element.
        dst.fill(unsafe { ld::<T>(p, 0, 0) }.to_op());
    } else {
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: i < n.
            *d = unsafe { ld::<T>(p, i, stride) }.to_op();
        }
    }
}

/// Narrows `src.len()` op math values into a run.
///
/// # Safety
/// The run must address `src.len()` writable elements that no live
/// reference covers.
#[inline(always)]
pub(crate) unsafe fn store_op<T: Elem>(src: &[T::Op], p: *mut u8, stride: isize) {
    let n = src.len();
    if stride == size_of::<T>() as isize && (p as usize) % std::mem::align_of::<T>() == 0 {
        // SAFETY: a contiguous, aligned, writable run of n elements.
        let dst = unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) };
        T::store_op(src, dst);
    } else {
        for (i, s) in src.iter().enumerate() {
            // SAFETY: i < n.
            unsafe { st::<T>(p, i, stride, T::from_op(*s)) };
        }
    }
}

/// `out[i] = f(x[i])` computed in op math (`stream` as in [`map_run`];
/// half types, which go through op math buffers, never stream).
///
/// # Safety
/// As [`map_run`].
#[inline(always)]
pub(crate) unsafe fn unary_op_run<T: Elem>(
    out: *mut u8,
    os: isize,
    x: *const u8,
    xs: isize,
    n: usize,
    stream: bool,
    f: impl Fn(T::Op) -> T::Op,
) {
    if !widens::<T>() {
        // SAFETY: this function's contract is map_run's, which the caller
        // upholds.
        return unsafe { map_run::<T, T>(out, os, x, xs, n, stream, |v| T::from_op(f(v.to_op()))) };
    }
    let mut bx = [T::Op::default(); BUF];
    let mut start = 0;
    while start < n {
        let m = BUF.min(n - start);
        let off = start as isize;
        // SAFETY: elements start..start+m of each run are valid; the input
        // is read into the buffer before the output is written.
        unsafe {
            load_op::<T>(&mut bx[..m], x.offset(off * xs), xs);
            for v in &mut bx[..m] {
                *v = f(*v);
            }
            store_op::<T>(&bx[..m], out.offset(off * os), os);
        }
        start += m;
    }
}

/// `out[i] = f(a[i], b[i])` computed in op math.
///
/// # Safety
/// As [`zip_run`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn binary_op_run<T: Elem>(
    out: *mut u8,
    os: isize,
    a: *const u8,
    as_: isize,
    b: *const u8,
    bs: isize,
    n: usize,
    stream: bool,
    f: impl Fn(T::Op, T::Op) -> T::Op,
) {
    if !widens::<T>() {
        // SAFETY: this function's contract is zip_run's, which the caller
        // upholds.
        return unsafe {
            zip_run::<T, T, T>(out, os, a, as_, b, bs, n, stream, |x, y| {
                T::from_op(f(x.to_op(), y.to_op()))
            })
        };
    }
    let mut ba = [T::Op::default(); BUF];
    let mut bb = [T::Op::default(); BUF];
    let mut start = 0;
    while start < n {
        let m = BUF.min(n - start);
        let off = start as isize;
        // SAFETY: elements start..start+m of each run are valid; inputs are
        // read into buffers before the output is written.
        unsafe {
            load_op::<T>(&mut ba[..m], a.offset(off * as_), as_);
            load_op::<T>(&mut bb[..m], b.offset(off * bs), bs);
            for (x, y) in ba[..m].iter_mut().zip(&bb[..m]) {
                *x = f(*x, *y);
            }
            store_op::<T>(&ba[..m], out.offset(off * os), os);
        }
        start += m;
    }
}

/// Evaluates `$body` inside a function compiled with AVX2 + F16C when
/// `simd::avx2_enabled()`, else as is: the `#[inline(always)]` loops the
/// body calls are then vectorized for the wider registers.
macro_rules! with_simd {
    ($body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if $crate::kernels::simd::avx2_enabled() {
                #[target_feature(enable = "avx2,f16c")]
                unsafe fn twin<R>(f: impl FnOnce() -> R) -> R {
                    f()
                }
                let body = || $body;
                // SAFETY: avx2_enabled() checked that the CPU has AVX2 and
                // F16C.
                unsafe { twin(body) }
            } else {
                $body
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $body
        }
    }};
}
pub(crate) use with_simd;
