//! The loop nest of a reduction in the input's memory order, and its
//! split across threads.

use super::pairwise::*;
use super::reducer::Kind;
use super::tree::tree;
use crate::error::Result;
use crate::iterator::DEFAULT_GRAIN_SIZE as GRAIN;
use crate::kernels::loops::{ld, st, with_simd, zip_run};
use crate::parallel;
use crate::tensor::{Dims, Tensor};
use smallvec::SmallVec;
use std::mem::size_of;

/// Loop geometry of a reduction: dims innermost first, sorted by input
/// stride; output strides are 0 along reduced dims. Strides in bytes.
pub(super) struct Geometry {
    shape: Dims,
    out: Dims,
    inp: Dims,
}

impl Geometry {
    fn new(a: &Tensor, acc: &Tensor, reduced: &[bool]) -> Geometry {
        let (ia, io) = (a.itemsize() as i64, acc.itemsize() as i64);
        let mut dims: SmallVec<[(i64, i64, i64); 6]> = (0..a.ndim())
            .filter(|&d| a.sizes()[d] != 1)
            .map(|d| {
                let out = if reduced[d] { 0 } else { acc.strides()[d] * io };
                (a.sizes()[d], out, a.strides()[d] * ia)
            })
            .collect();
        // Innermost first: by input stride, then reduced dims first (so a
        // broadcast input dim that is reduced stays a run).
        dims.sort_by_key(|&(_, out, inp)| (inp, out != 0));
        let mut g = Geometry {
            shape: Dims::new(),
            out: Dims::new(),
            inp: Dims::new(),
        };
        for (size, out, inp) in dims {
            if let Some(last) = g.shape.len().checked_sub(1) {
                if g.shape[last] * g.out[last] == out && g.shape[last] * g.inp[last] == inp {
                    g.shape[last] *= size;
                    continue;
                }
            }
            g.shape.push(size);
            g.out.push(out);
            g.inp.push(inp);
        }
        if g.shape.is_empty() {
            g.shape.push(1);
            g.out.push(0);
            g.inp.push(0);
        }
        g
    }

    fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Calls `f(out_offset, in_offset, run_length)` for every run along
    /// dim 0 inside `ranges` (one [lo, hi) per dim), dim 1 fastest.
    fn walk(&self, ranges: &[(i64, i64)], mut f: impl FnMut(isize, isize, usize)) {
        let nd = self.ndim();
        if ranges.iter().any(|(lo, hi)| lo >= hi) {
            return;
        }
        let mut idx: Dims = ranges.iter().map(|r| r.0).collect();
        let (mut oo, mut io) = (0i64, 0i64);
        for d in 0..nd {
            oo += idx[d] * self.out[d];
            io += idx[d] * self.inp[d];
        }
        let run = (ranges[0].1 - ranges[0].0) as usize;
        loop {
            f(oo as isize, io as isize, run);
            let mut d = 1;
            loop {
                if d >= nd {
                    return;
                }
                idx[d] += 1;
                oo += self.out[d];
                io += self.inp[d];
                if idx[d] < ranges[d].1 {
                    break;
                }
                let back = idx[d] - ranges[d].0;
                oo -= back * self.out[d];
                io -= back * self.inp[d];
                idx[d] = ranges[d].0;
                d += 1;
            }
        }
    }
}

/// Reduces `a` into `acc` (keepdim shape, contiguous, dtype R::Acc),
/// which this fills with the result.
pub(super) fn reduce_into<R: Reducer>(a: &Tensor, acc: &Tensor, reduced: &[bool]) -> Result<()> {
    let numel_out = acc.numel() as usize;
    let acc0 = acc.data_in_storage()? as usize;
    let in0 = a.data_in_storage()? as usize;
    if numel_out == 0 {
        return Ok(());
    }
    for i in 0..numel_out {
        // SAFETY: acc is a contiguous tensor of numel_out elements.
        unsafe {
            st(
                acc0 as *mut u8,
                i,
                size_of::<R::Acc>() as isize,
                R::identity(),
            )
        };
    }
    if a.numel() == 0 {
        return Ok(());
    }
    let g = Geometry::new(a, acc, reduced);
    let full: SmallVec<[(i64, i64); 6]> = g.shape.iter().map(|&s| (0, s)).collect();
    let per_index = |d: usize| (a.numel() / g.shape[d]).max(1);

    if g.out.iter().all(|&s| s == 0) {
        // Every dim is reduced: ordered chunks along the outermost dim.
        let k = g.ndim() - 1;
        let chunks = parallel::chunks(0, g.shape[k], (GRAIN / per_index(k)).max(1));
        let partials = parallel::map_chunks(&chunks, |b, e| {
            let mut ranges = full.clone();
            ranges[k] = (b, e);
            with_simd!({
                let mut total = R::identity();
                g.walk(&ranges, |_, io, n| {
                    // SAFETY: the walk stays inside a's elements.
                    let part = unsafe {
                        R::reduce_run((in0 as *const u8).offset(io), g.inp[0] as isize, n)
                    };
                    total = R::combine(total, part);
                });
                total
            })
        });
        let total = partials.into_iter().fold(R::identity(), R::combine);
        // SAFETY: acc has one element.
        unsafe { st(acc0 as *mut u8, 0, 0, total) };
        return Ok(());
    }

    let outer = g.ndim() - 1;
    if g.out[outer] == 0 && numel_out * 16 <= a.numel() as usize {
        // The outermost input dim is reduced (a sum over dim 0 of a
        // matrix): tasks take its halves, so each reads one contiguous
        // part of the input (split along a kept inner dim instead, each
        // task would read every row in part, about twice as slow as one
        // thread here), into outputs of its own, combined in task order.
        let chunks = parallel::chunks(0, g.shape[outer], (GRAIN / per_index(outer)).max(1));
        if chunks.len() > 1 {
            let partials = parallel::map_chunks(&chunks, |b, e| {
                let mut part = vec![R::identity(); numel_out];
                let mut ranges = full.clone();
                ranges[outer] = (b, e);
                reduce_part::<R>(&g, &ranges, part.as_mut_ptr() as usize, in0);
                part
            });
            for i in 0..numel_out {
                let total = partials
                    .iter()
                    .fold(R::identity(), |t, p| R::combine(t, p[i]));
                // SAFETY: acc is a contiguous tensor of numel_out elements.
                unsafe { st(acc0 as *mut u8, i, size_of::<R::Acc>() as isize, total) };
            }
            return Ok(());
        }
    }
    // Split along the kept dim with the most elements: disjoint outputs.
    let k = (0..g.ndim())
        .filter(|&d| g.out[d] != 0)
        .max_by_key(|&d| g.shape[d])
        .expect("some dim is kept");
    parallel::parallel_for(0, g.shape[k], (GRAIN / per_index(k)).max(1), |b, e| {
        let mut ranges = full.clone();
        ranges[k] = (b, e);
        reduce_part::<R>(&g, &ranges, acc0, in0);
    });
    Ok(())
}

/// Reduces the part of `a` inside `ranges` (one [lo, hi) per geometry
/// dim) into the outputs at `acc0` (laid out as the geometry's output
/// strides say), which this part alone writes.
pub(super) fn reduce_part<R: Reducer>(
    g: &Geometry,
    ranges: &[(i64, i64)],
    acc0: usize,
    in0: usize,
) {
    let (os0, is0) = (g.out[0] as isize, g.inp[0] as isize);
    let run = g.shape[0] as usize;
    if matches!(R::KIND, Kind::Sum | Kind::SumSquares | Kind::Prod)
        && os0 == 0
        && is0 == size_of::<R::In>() as isize
        && run < STREAMS * BLOCK
    {
        // Contiguous runs reduced into single outputs (a sum or product along
        // the innermost dim), too short for pairwise's streams: four
        // runs at a time, so the reads still come from four places.
        let (b, e) = ranges[g.ndim() - 1];
        if g.ndim() == 2 && e - b >= 4 {
            // One row per output: the four runs come from the four
            // quarters of the task's rows (adjacent rows read together
            // are slower here than rows far apart).
            let q = (e - b) / 4;
            let (os1, is1) = (g.out[1] as isize, g.inp[1] as isize);
            with_simd!({
                for r in b..b + q {
                    let rows = [r, r + q, r + 2 * q, r + 3 * q];
                    let group = rows.map(|r| (r as isize * os1, r as isize * is1));
                    // SAFETY: rows b..e lie inside both tensors, and
                    // this part owns their outputs.
                    unsafe { sum_runs_x4::<R>(acc0, in0, &group, run) };
                }
                for r in b + 4 * q..e {
                    // SAFETY: r < e, so row r is inside both tensors: its
                    // run of `run` (>= 1) elements at in0 + r * is1 lies in
                    // `a`, and its one output at acc0 + r * os1 is this
                    // part's (dim 1 is the kept dim the parts split).
                    unsafe {
                        let out = (acc0 as *mut u8).offset(r as isize * os1);
                        let inp = (in0 as *const u8).offset(r as isize * is1);
                        st(
                            out,
                            0,
                            0,
                            R::combine(ld(out, 0, 0), R::reduce_run(inp, is0, run)),
                        );
                    }
                }
            });
            return;
        }
        let mut group = [(0isize, 0isize); 4];
        let mut len = 0;
        with_simd!({
            g.walk(ranges, |oo, io, _| {
                group[len] = (oo, io);
                len += 1;
                if len == group.len() {
                    // SAFETY: the walk's runs stay inside both tensors;
                    // this part owns its output elements.
                    unsafe { sum_runs_x4::<R>(acc0, in0, &group, run) };
                    len = 0;
                }
            });
            for &(oo, io) in &group[..len] {
                // SAFETY: each (oo, io) left in group[..len] came from the
                // walk above over this part's ranges: a run of `run`
                // elements inside `a` and an output element this part owns.
                unsafe {
                    let out = (acc0 as *mut u8).offset(oo);
                    let part = R::reduce_run((in0 as *const u8).offset(io), is0, run);
                    st(out, 0, 0, R::combine(ld(out, 0, 0), part));
                }
            }
        });
        return;
    }
    let picks = matches!(R::KIND, Kind::Max | Kind::Min);
    let (b1, e1) = ranges[g.ndim() - 1];
    if picks && g.ndim() == 2 && os0 == 0 && is0 == size_of::<R::In>() as isize && e1 - b1 >= 4 {
        // Contiguous rows each reduced to one output (amax over dim 1):
        // four rows a pass, one from each quarter of the part's rows, so
        // the reads come from four places, as the sums' rows above.
        let q = (e1 - b1) / 4;
        let (os1, is1) = (g.out[1] as isize, g.inp[1] as isize);
        let put = |r: i64, v: R::Acc| {
            // SAFETY: row r of this part's rows b1..e1: its output is
            // inside `acc` (or the part's own buffer) and this part's.
            unsafe {
                let out = (acc0 as *mut u8).offset(r as isize * os1);
                st(out, 0, 0, R::combine(ld(out, 0, 0), v));
            }
        };
        let row = |r: i64| (in0 as *const u8).wrapping_offset(r as isize * is1);
        with_simd!({
            for r in b1..b1 + q {
                let rows = [r, r + q, r + 2 * q, r + 3 * q];
                // SAFETY: each row is one of b1..e1, a run of `run`
                // contiguous elements inside `a`.
                let v = unsafe { R::reduce_runs_x4(rows.map(row), run) };
                for (r, v) in rows.into_iter().zip(v) {
                    put(r, v);
                }
            }
            for r in b1 + 4 * q..e1 {
                // SAFETY: as above, for one row.
                put(r, unsafe { R::reduce_run(row(r), is0, run) });
            }
        });
        return;
    }
    let (acc_item, in_item) = (size_of::<R::Acc>() as isize, size_of::<R::In>() as isize);
    if g.ndim() == 2 && g.out[1] == 0 && os0 == acc_item && is0 == in_item {
        let ((c0, c1), (b, e)) = (ranges[0], ranges[1]);
        if e - b >= 4 {
            // Contiguous rows reduced into one contiguous row of outputs (a
            // sum over dim 0 of a matrix): K rows, one from each K-th of
            // the part's rows, per pass, so the reads come from K places
            // (one row at a time reads about 1.4x slower than a
            // four-stream read of the same bytes here). Each pass adds the
            // K rows as a pairwise tree ((r0 + r1) + (r2 + r3), and for 8
            // the same of r4..r7 added to it) into the outputs; the rows
            // past the K parts follow one by one. K is 8 where the
            // accumulators are wider than the values (half and bfloat16
            // into float, integers into int64: four rows a pass updated
            // the accumulators as often as they read values, 1.2x-1.4x the
            // read loop), else 4.
            let is1 = g.inp[1] as isize;
            let n = (c1 - c0) as usize;
            // SAFETY: rows b..e and columns c0..c1 lie inside both tensors,
            // and this part owns those outputs.
            let out = unsafe { (acc0 as *mut u8).offset(c0 as isize * acc_item) } as usize;
            let row = |r: i64| in0 as isize + c0 as isize * in_item + r as isize * is1;
            let eight = size_of::<R::In>() < size_of::<R::Acc>() && e - b >= 8;
            with_simd!({
                // SAFETY: rows b..e of n contiguous elements (is0 ==
                // in_item) lie inside `a`; `out` is this part's n
                // contiguous outputs (os0 == acc_item), in `acc` or the
                // task's own `part`, both fresh buffers that overlap no row
                // of `a`: add_row_groups' requirements.
                let done = unsafe {
                    if eight {
                        add_row_groups::<R, 8>(out as *mut R::Acc, row, b, e, n)
                    } else {
                        add_row_groups::<R, 4>(out as *mut R::Acc, row, b, e, n)
                    }
                };
                for r in done..e {
                    // SAFETY: r < e: row(r) is n = c1 - c0 >= 1 contiguous
                    // elements inside `a`; `o` is this part's n contiguous
                    // outputs, passed as both output and first input, the
                    // exact aliasing zip_run allows.
                    unsafe {
                        let o = out as *mut u8;
                        zip_run::<R::Acc, R::In, R::Acc>(
                            o,
                            os0,
                            o,
                            os0,
                            row(r) as *const u8,
                            is0,
                            n,
                            false,
                            |a, x| R::combine(a, R::lift(x)),
                        );
                    }
                }
            });
            return;
        }
    }
    with_simd!(g.walk(ranges, |oo, io, n| {
        // SAFETY: the walk stays inside both tensors; this part owns
        // its output elements.
        unsafe {
            let out = (acc0 as *mut u8).offset(oo);
            let inp = (in0 as *const u8).offset(io);
            if os0 == 0 {
                let part = R::reduce_run(inp, is0, n);
                st(out, 0, 0, R::combine(ld(out, 0, 0), part));
            } else {
                zip_run::<R::Acc, R::In, R::Acc>(out, os0, out, os0, inp, is0, n, false, |a, x| {
                    R::combine(a, R::lift(x))
                });
            }
        }
    }))
}

/// Adds rows `b..e` (row `r` at byte address `row(r)`, `n` contiguous
/// elements) into the `n` outputs at `acc`, K rows a pass, one from each
/// of K equal parts ([`add_rows_xk`]); returns the first row not added
/// (the rows past the K parts).
///
/// # Safety
/// Every row `b..e` addresses `n` readable contiguous R::In elements;
/// `acc`, `n` readable and writable accumulators overlapping no row.
#[inline(always)]
unsafe fn add_row_groups<R: Reducer, const K: usize>(
    acc: *mut R::Acc,
    row: impl Fn(i64) -> isize,
    b: i64,
    e: i64,
    n: usize,
) -> i64 {
    let q = (e - b) / K as i64;
    for r in b..b + q {
        let rows: [*const R::In; K] =
            std::array::from_fn(|k| row(r + k as i64 * q) as *const R::In);
        // SAFETY: r + (K - 1) * q < b + K * q <= e: every row is one of
        // b..e (the caller's), and acc overlaps none.
        unsafe { add_rows_xk::<R, K>(acc, rows, n) };
    }
    b + K as i64 * q
}

/// `acc[i] = acc[i] + tree(r0[i], .., r(K-1)[i])` over `n` contiguous
/// elements ([`tree`]'s pairwise order), with the reducer's combine;
/// floating sums with AVX2 registers.
///
/// # Safety
/// `acc` and each row address `n` contiguous elements; `acc` overlaps no
/// row. K is a power of two.
#[inline(always)]
pub(super) unsafe fn add_rows_xk<R: Reducer, const K: usize>(
    acc: *mut R::Acc,
    rows: [*const R::In; K],
    n: usize,
) {
    // SAFETY: the caller's runs, add_rows_xk's requirement there too.
    #[cfg(target_arch = "x86_64")]
    if unsafe {
        super::avx2_sum::add_rows_xk::<R, K>(acc, rows, n)
            || super::avx2_pick::pick_rows_xk::<R, K>(acc, rows, n)
    } {
        return;
    }
    for i in 0..n {
        // SAFETY: i < n, inside every run (the caller's guarantee).
        unsafe {
            let v = tree(rows.map(|p| R::lift(p.add(i).read_unaligned())), R::combine);
            let a = acc.add(i);
            a.write_unaligned(R::combine(a.read_unaligned(), v));
        }
    }
}

/// Four contiguous runs of `n` (< STREAMS * BLOCK) elements, each summed
/// exactly as [`pairwise`] sums one such run (a cascade of blocks), read in
/// one pass; each result is added into its output element, in order (two
/// runs may share an output when several dims are reduced).
///
/// # Safety
/// Each `(out, in)` pair: byte offsets from `acc0` and `in0` of an output
/// element of R::Acc and of a run of n readable contiguous R::In elements.
#[inline(always)]
pub(super) unsafe fn sum_runs_x4<R: Reducer>(
    acc0: usize,
    in0: usize,
    runs: &[(isize, isize); 4],
    n: usize,
) {
    let fold = |a: R::Acc, b: R::Acc| R::combine(a, b);
    let item = size_of::<R::In>() as isize;
    if n <= BLOCK {
        // One block a run: its cascade would hold one value v and finish
        // as fold(v, identity). The same additions without the four
        // cascades' 320-byte stacks, zeroed and copied on every call: a
        // [64, 256] float sum over dim 1 took 18290 instructions, now
        // 10126 (benches/icount.c, sum_64x256f_dim1).
        // SAFETY: each run's n readable elements.
        let q = runs.map(|(_, io)| unsafe { (in0 as *const u8).offset(io) });
        // SAFETY: four contiguous blocks of n readable elements.
        let sums = unsafe { blocks_x4::<R>(q, n, fold) };
        for (v, &(oo, _)) in sums.into_iter().zip(runs) {
            // SAFETY: the caller's output element.
            unsafe {
                let out = (acc0 as *mut u8).offset(oo);
                st(out, 0, 0, R::combine(ld(out, 0, 0), fold(v, R::identity())));
            }
        }
        return;
    }
    let mut parts = [Cascade::new(R::identity()); 4];
    let mut start = 0;
    while start < n {
        let m = BLOCK.min(n - start);
        // SAFETY: block `start` of each run lies inside the run.
        let q =
            runs.map(|(_, io)| unsafe { (in0 as *const u8).offset(io + start as isize * item) });
        // SAFETY: four contiguous blocks of m readable elements.
        let sums = unsafe { blocks_x4::<R>(q, m, fold) };
        for (c, v) in parts.iter_mut().zip(sums) {
            c.push(v, fold);
        }
        start += m;
    }
    for (c, &(oo, _)) in parts.into_iter().zip(runs) {
        let part = c.finish(R::identity(), fold);
        // SAFETY: the caller's output element.
        unsafe {
            let out = (acc0 as *mut u8).offset(oo);
            st(out, 0, 0, R::combine(ld(out, 0, 0), part));
        }
    }
}
