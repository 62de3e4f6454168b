//! Cache-blocked copies for transpose-like layouts: when the source's
//! fastest-moving dim is not the destination's, an element-by-element
//! walk along the destination reads the source with a large stride and
//! uses one element of every cache line (and page) it touches. Instead,
//! the two dims (the destination's innermost, loop dim 0, and the
//! source's innermost) are cut into TILE x TILE tiles, and each tile is
//! copied while its source and destination lines stay in L1.

use super::elem::Elem;
use crate::iterator::TensorIterator;
use crate::parallel;

/// Tile edge in elements: a 32 x 32 tile of 8-byte elements is 8 KiB per
/// side, well inside L1 with both sides.
const TILE: i64 = 32;

/// Tiles per parallel task at least (about 32K elements, the default grain).
const TILES_PER_GRAIN: i64 = 32;

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

/// Copies (with conversion S -> D) over a transpose-like iterator, tiling
/// loop dims 0 and `b`, in parallel over tiles.
pub(crate) fn copy_tiled<S: Elem, D: Elem>(it: &TensorIterator, b: usize) {
    let shape = it.shape();
    let (ds, ss) = (it.strides(0), it.strides(1));
    let (n0, nb) = (shape[0], shape[b]);
    let (t0, tb) = ((n0 + TILE - 1) / TILE, (nb + TILE - 1) / TILE);
    // The other dims, outermost last, walked as a flat index.
    let rest: Vec<usize> = (1..shape.len()).filter(|&d| d != b).collect();
    let rest_count: i64 = rest.iter().map(|&d| shape[d]).product();
    let tasks = rest_count * t0 * tb;
    let (dst0, src0) = (it.data_ptr(0) as usize, it.data_ptr(1) as usize);
    parallel::parallel_for(0, tasks, TILES_PER_GRAIN, |begin, end| {
        for task in begin..end {
            // Task order: tile of dim 0 fastest, then tile of dim b, then
            // the other dims, so consecutive tasks share source lines.
            let i0 = task % t0;
            let ib = (task / t0) % tb;
            let mut flat = task / (t0 * tb);
            let (mut doff, mut soff) = (0i64, 0i64);
            for &d in &rest {
                let idx = flat % shape[d];
                flat /= shape[d];
                doff += idx * ds[d];
                soff += idx * ss[d];
            }
            let (lo0, lob) = (i0 * TILE, ib * TILE);
            let (m0, mb) = ((n0 - lo0).min(TILE), (nb - lob).min(TILE));
            doff += lo0 * ds[0] + lob * ds[b];
            soff += lo0 * ss[0] + lob * ss[b];
            // SAFETY: the offsets address elements inside the iterator's
            // shape, which the iterator keeps inside both operands.
            unsafe {
                tile::<S, D>(
                    (dst0 as *mut u8).offset(doff as isize),
                    (ds[0] as isize, ds[b] as isize),
                    (src0 as *const u8).offset(soff as isize),
                    (ss[0] as isize, ss[b] as isize),
                    m0 as usize,
                    mb as usize,
                );
            }
        }
    });
}

/// One tile: `dst[i*d.0 + j*d.1] = src[i*s.0 + j*s.1]` for i < m0, j < mb.
/// Rows of j (contiguous in the source) are read into a tile buffer, then
/// the buffer is written out along i (contiguous in the destination).
///
/// # Safety
/// Every addressed element must be valid; source and destination must not
/// overlap.
#[inline(always)]
unsafe fn tile<S: Elem, D: Elem>(
    dst: *mut u8,
    d: (isize, isize),
    src: *const u8,
    s: (isize, isize),
    m0: usize,
    mb: usize,
) {
    const T: usize = TILE as usize;
    let mut buf = [[D::default(); T]; T];
    for (i, row) in buf.iter_mut().enumerate().take(m0) {
        // SAFETY: i < m0.
        let p = unsafe { src.offset(i as isize * s.0) };
        for (j, e) in row.iter_mut().enumerate().take(mb) {
            // SAFETY: j < mb; per the caller.
            *e = unsafe { (p.offset(j as isize * s.1) as *const S).read_unaligned() }.cast::<D>();
        }
    }
    for j in 0..mb {
        // SAFETY: j < mb.
        let p = unsafe { dst.offset(j as isize * d.1) };
        for (i, row) in buf.iter().enumerate().take(m0) {
            // SAFETY: i < m0; per the caller.
            unsafe { (p.offset(i as isize * d.0) as *mut D).write_unaligned(row[j]) };
        }
    }
}
