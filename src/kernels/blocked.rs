//! Cache-blocked copies for transpose-like layouts: when the source's
//! fastest-moving dim is not the destination's, an element-by-element
//! walk along the destination reads the source with a large stride and
//! uses one element of every cache line (and page) it touches. Instead,
//! the two dims (the destination's innermost, loop dim 0, and the
//! source's innermost) are cut into TILE x TILE tiles, and each tile is
//! copied while its source and destination lines stay in L1.

#[cfg(target_arch = "x86_64")]
use super::transpose::RowStream;
use crate::iterator::TensorIterator;
use crate::iterator::DEFAULT_GRAIN_SIZE as GRAIN;
use crate::parallel;

/// Without AVX2 kernels, rows are never left pending.
#[cfg(not(target_arch = "x86_64"))]
struct RowStream;
#[cfg(not(target_arch = "x86_64"))]
impl RowStream {
    const fn empty() -> RowStream {
        RowStream
    }
    unsafe fn finish(&mut self) {}
}

/// Tile height: elements along dim 0 (the destination's contiguous dim).
const TILE0: usize = 64;
/// Tile width in bytes along dim b (the source's contiguous dim): every
/// source row segment is 1 KiB, 16 whole cache lines read in order.
const TILE_B_BYTES: usize = 1024;
/// Bytes of a cache line, and a line of tile buffer.
const LINE: usize = 64;
#[repr(C, align(64))]
struct Line([u8; LINE]);

/// The loop dim to tile together with dim 0, when a copy iterator
/// (output 0, input 1) is transpose-like: the input's smallest non-zero
/// stride lies on another dim than the output's, and both dims are long
/// enough to tile.
pub(crate) fn transposed_dim(it: &TensorIterator) -> Option<usize> {
    if it.ndim() < 2 || it.ntensors() != 2 {
        return None;
    }
    let shape = it.shape();
    let (out, inp) = (it.strides(0), it.strides(1));
    let out_inner = (0..it.ndim())
        .filter(|&d| shape[d] > 1 && out[d] != 0)
        .min_by_key(|&d| out[d].unsigned_abs())?;
    let in_inner = (0..it.ndim())
        .filter(|&d| shape[d] > 1 && inp[d] != 0)
        .min_by_key(|&d| inp[d].unsigned_abs())?;
    if out_inner != 0 || in_inner == 0 {
        return None;
    }
    let wide = |d: usize| shape[d] >= 8;
    (wide(0) && wide(in_inner) && inp[in_inner].unsigned_abs() < inp[0].unsigned_abs())
        .then_some(in_inner)
}

/// Copies elements of type `T` (same dtype on both sides) over a
/// transpose-like iterator, tiling loop dims 0 and `b`, in parallel over
/// tiles.
///
/// Tiles are TILE0 (64) elements of dim 0 by 1 KiB of dim b (256 floats).
/// This shape ran faster than square 32 x 32 and 64 x 64 tiles (figures in
/// benches/PERF_RESULTS.md, "src/kernels/blocked.rs"): long source row
/// segments let the hardware prefetcher stream each row, and every
/// destination row segment (256 bytes) is written whole.
pub(crate) fn copy_tiled<T: Copy + Default>(it: &TensorIterator, b: usize) {
    let size = std::mem::size_of::<T>();
    let tile_b = (TILE_B_BYTES / size).max(8);
    let shape = it.shape();
    let (ds, ss) = (it.strides(0), it.strides(1));
    let (n0, nb) = (shape[0] as usize, shape[b] as usize);
    let (t0, tb) = (n0.div_ceil(TILE0), nb.div_ceil(tile_b));
    // The other dims, outermost last, walked as a flat index.
    let rest: Vec<usize> = (1..shape.len()).filter(|&d| d != b).collect();
    let rest_count: i64 = rest.iter().map(|&d| shape[d]).product();
    let tasks = rest_count * (t0 * tb) as i64;
    let (dst0, src0) = (it.data_ptr(0) as usize, it.data_ptr(1) as usize);
    let stream = super::simd::should_stream(it.numel() as usize * size);
    let grain = (GRAIN / (TILE0 * tile_b) as i64).max(1);
    let tile_lines = (TILE0 * tile_b * size).div_ceil(LINE);
    parallel::parallel_for(0, tasks, grain, |begin, end| {
        // Two tile buffers per task range, laid out as the destination, in
        // whole cache lines: a tile is transposed into one while the rows
        // of the previous tile stream out of the other.
        let mut bufs: Vec<std::mem::MaybeUninit<Line>> = Vec::with_capacity(2 * tile_lines);
        let base = bufs.as_mut_ptr() as *mut u8;
        let buf = [base, base.wrapping_add(tile_lines * LINE)];
        let mut cur = 0;
        let mut pending = RowStream::empty();
        for task in begin..end {
            // Task order: tile of dim 0 fastest, then tile of dim b, then
            // the other dims.
            let task = task as usize;
            let i0 = task % t0;
            let ib = (task / t0) % tb;
            let mut flat = (task / (t0 * tb)) as i64;
            let (mut doff, mut soff) = (0i64, 0i64);
            for &d in &rest {
                let idx = flat % shape[d];
                flat /= shape[d];
                doff += idx * ds[d];
                soff += idx * ss[d];
            }
            let (lo0, lob) = (i0 * TILE0, ib * tile_b);
            let (m0, mb) = ((n0 - lo0).min(TILE0), (nb - lob).min(tile_b));
            doff += lo0 as i64 * ds[0] + lob as i64 * ds[b];
            soff += lo0 as i64 * ss[0] + lob as i64 * ss[b];
            // SAFETY: the offsets address elements inside the iterator's
            // shape, which the iterator keeps inside both operands; the
            // operands do not overlap (the iterator copied an overlapping
            // input); each buffer holds TILE0 x tile_b elements, and the
            // pending rows lie in the other one.
            let parked = unsafe {
                tile::<T>(
                    (dst0 as *mut u8).offset(doff as isize),
                    (ds[0] as isize, ds[b] as isize),
                    (src0 as *const u8).offset(soff as isize),
                    (ss[0] as isize, ss[b] as isize),
                    (m0, mb),
                    buf[cur],
                    stream,
                    &mut pending,
                )
            };
            if parked {
                cur ^= 1;
            }
        }
        // SAFETY: the last tile's rows are still in their buffer; the
        // fence makes every streaming store of the range visible to other
        // threads.
        unsafe { pending.finish() };
        if stream {
            super::simd::sfence();
        }
    });
}

/// One tile: `dst[i*d.0 + j*d.1] = src[i*s.0 + j*s.1]` for i < m0, j < mb.
///
/// When the destination is contiguous along dim 0 (d.0 one element), the
/// tile is transposed into `buf` laid out as the destination (row j holds
/// m0 elements), then written out one destination row at a time, with
/// streaming stores when `stream`: whole lines are written back to back,
/// so no line is fetched only to be overwritten. The transposition uses
/// 8 x 8 (4 x 4 for 8-byte elements) register blocks with AVX2 when the
/// source is contiguous along dim b (s.1 one element), element moves
/// otherwise and on the edges.
///
/// With AVX2 and streaming, the rows are not written here: they are left
/// in `pending` (returns true; `buf` must then stay untouched until the
/// next tile has finished them), and the next tile streams them between
/// its own blocks. Any rows of the previous tile still pending are written
/// before this tile's rows take their place. The caller finishes the
/// last tile's rows and fences the streaming stores.
///
/// # Safety
/// Every addressed element must be valid; source and destination must not
/// overlap; `buf` must be writable for m0 * mb elements and apart from the
/// pending rows, which must be valid (see [`RowStream`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<T: Copy + Default>(
    dst: *mut u8,
    d: (isize, isize),
    src: *const u8,
    s: (isize, isize),
    (m0, mb): (usize, usize),
    buf: *mut u8,
    stream: bool,
    pending: &mut RowStream,
) -> bool {
    let size = std::mem::size_of::<T>();
    let read = |i: usize, j: usize| {
        // SAFETY: (i, j) lies inside the tile.
        unsafe { (src.offset(i as isize * s.0 + j as isize * s.1) as *const T).read_unaligned() }
    };
    if d.0 != size as isize {
        for j in 0..mb {
            for i in 0..m0 {
                // SAFETY: (i, j) lies inside the tile.
                unsafe {
                    (dst.offset(i as isize * d.0 + j as isize * d.1) as *mut T)
                        .write_unaligned(read(i, j))
                };
            }
        }
        return false;
    }
    let row_bytes = (m0 * size) as isize;
    let at = |i: usize, j: usize| {
        // SAFETY: i < m0, j < mb: inside the buffer.
        unsafe { buf.offset(j as isize * row_bytes + (i * size) as isize) as *mut T }
    };
    // Only the AVX2 kernel below moves the start of the scalar loops.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let (mut f0, mut fb) = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if s.1 == size as isize && super::simd::avx2_enabled() {
        // SAFETY: the CPU has AVX2; the tile's m0 x mb elements are valid
        // on the source side and inside the buffer on the other; the
        // pending rows are valid and apart from both (per the caller).
        (f0, fb) = unsafe {
            super::transpose::transpose_blocks(size, src, s.0, buf, row_bytes, (m0, mb), pending)
        };
    }
    // The rest: columns fb.. of rows ..f0, and rows f0.. entirely.
    if f0 < m0 || fb < mb {
        for j in 0..mb {
            let from = if j < fb { f0 } else { 0 };
            for i in from..m0 {
                // SAFETY: (i, j) inside the tile and the buffer.
                unsafe { at(i, j).write(read(i, j)) };
            }
        }
    }
    // SAFETY: the previous tile's rows are valid (per the caller).
    unsafe { pending.finish() };
    #[cfg(target_arch = "x86_64")]
    if stream {
        if let Some(rows) = RowStream::new(dst, d.1, buf, row_bytes as usize, mb) {
            *pending = rows;
            return true;
        }
    }
    for j in 0..mb {
        // SAFETY: destination row j holds m0 contiguous elements; buffer
        // row j was written whole above.
        unsafe {
            write_row(
                dst.offset(j as isize * d.1),
                at(0, j) as *const u8,
                m0 * size,
                stream,
            )
        };
    }
    false
}

/// Writes `bytes` contiguous bytes from `row` to `dst`, with streaming
/// stores when asked and both are 16-byte multiples / aligned.
///
/// # Safety
/// `row` readable and `dst` writable for `bytes`, not overlapping.
#[inline(always)]
unsafe fn write_row(dst: *mut u8, row: *const u8, bytes: usize, stream: bool) {
    // Streaming stores are x86_64's (SSE2); elsewhere plain copies.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = stream;
    #[cfg(target_arch = "x86_64")]
    if stream && (dst as usize) % 16 == 0 && bytes % 16 == 0 {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let src = row as *const __m128i;
        for k in 0..bytes / 16 {
            // SAFETY: SSE2 is part of x86-64; both sides hold `bytes`
            // bytes, dst is 16-byte aligned.
            unsafe { _mm_stream_si128((dst as *mut __m128i).add(k), _mm_loadu_si128(src.add(k))) };
        }
        return;
    }
    // SAFETY: per the caller.
    unsafe { std::ptr::copy_nonoverlapping(row, dst, bytes) };
}
