//! The geometry of a DCP tensor's chunks: each inside the tensor, none
//! overlapping another, together covering all of it
//! ([`check_tiling`]).
//!
//! The check marks cells of the grid the chunks' boundaries cut the
//! tensor into (per dim, the distinct starts and ends of chunks): a
//! DTensor's chunks on an N-device mesh make N cells, so the work is the
//! number of chunks for every layout DCP writes; a hostile layout whose
//! grid passes [`MAX_CELLS`] is refused rather than checked slowly.

use crate::error::Result;

/// A chunk's place in its tensor: its offsets and sizes per dim.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extent<'a> {
    pub offsets: &'a [i64],
    pub sizes: &'a [i64],
}

/// The most grid cells a tensor's chunks may cut it into.
const MAX_CELLS: u64 = 1 << 22;

/// Checks that `chunks` tile tensor `name` of `size`: each has as many
/// dims as the tensor and lies inside it, no two overlap, and every
/// element is in one.
///
/// Errors: `Format`, naming the tensor, the chunk(s) and what is wrong.
pub(crate) fn check_tiling(name: &str, size: &[i64], chunks: &[Extent<'_>]) -> Result<()> {
    for (i, c) in chunks.iter().enumerate() {
        crate::ensure!(
            c.offsets.len() == size.len() && c.sizes.len() == size.len(),
            Format,
            "the DCP metadata: tensor '{name}' of size {size:?}: chunk {i} has offsets {:?} \
             and sizes {:?}: expected {} dims each",
            c.offsets,
            c.sizes,
            size.len()
        );
        for d in 0..size.len() {
            let end = c.offsets[d].checked_add(c.sizes[d]);
            crate::ensure!(
                end.is_some_and(|e| e <= size[d]),
                Format,
                "the DCP metadata: tensor '{name}' of size {size:?}: chunk {i} (offsets {:?}, \
                 sizes {:?}) reaches past the tensor in dim {d}",
                c.offsets,
                c.sizes
            );
        }
    }
    // The tensor's elements; a tensor of none needs no chunk.
    let numel = size.iter().try_fold(1u64, |n, &s| n.checked_mul(s as u64));
    if numel == Some(0) {
        return Ok(());
    }
    // Per dim, the sorted distinct boundaries of the non-empty chunks.
    let nonempty: Vec<(usize, &Extent<'_>)> = chunks
        .iter()
        .enumerate()
        .filter(|(_, c)| c.sizes.iter().all(|&s| s > 0))
        .collect();
    let mut cuts: Vec<Vec<i64>> = vec![Vec::new(); size.len()];
    for (d, cut) in cuts.iter_mut().enumerate() {
        cut.push(0);
        cut.push(size[d]);
        for (_, c) in &nonempty {
            cut.push(c.offsets[d]);
            cut.push(c.offsets[d] + c.sizes[d]);
        }
        cut.sort_unstable();
        cut.dedup();
    }
    let cells = cuts
        .iter()
        .try_fold(1u64, |n, c| n.checked_mul(c.len() as u64 - 1))
        .filter(|&n| n <= MAX_CELLS);
    let Some(cells) = cells else {
        crate::bail!(
            Format,
            "the DCP metadata: tensor '{name}' of size {size:?}: its {} chunks cut it into more \
             than {MAX_CELLS} pieces: refused as a layout DCP does not write",
            chunks.len()
        );
    };
    // owner[cell] = 1 + the chunk covering it, 0 for none.
    let mut owner = vec![0u32; cells as usize];
    let dims = size.len();
    for &(i, c) in &nonempty {
        // The chunk's cell ranges per dim.
        let ranges: Vec<(usize, usize)> = (0..dims)
            .map(|d| {
                let lo = cuts[d].binary_search(&c.offsets[d]).expect("a cut");
                let hi = cuts[d]
                    .binary_search(&(c.offsets[d] + c.sizes[d]))
                    .expect("a cut");
                (lo, hi)
            })
            .collect();
        let mut at: Vec<usize> = ranges.iter().map(|r| r.0).collect();
        'cells: loop {
            let mut cell = 0usize;
            for d in 0..dims {
                cell = cell * (cuts[d].len() - 1) + at[d];
            }
            match owner[cell] {
                0 => owner[cell] = i as u32 + 1,
                other => crate::bail!(
                    Format,
                    "the DCP metadata: tensor '{name}' of size {size:?}: chunks {} (offsets \
                     {:?}, sizes {:?}) and {i} (offsets {:?}, sizes {:?}) overlap",
                    other - 1,
                    chunks[other as usize - 1].offsets,
                    chunks[other as usize - 1].sizes,
                    c.offsets,
                    c.sizes
                ),
            }
            // The next cell of the chunk, the last dim fastest.
            let mut d = dims;
            loop {
                if d == 0 {
                    break 'cells;
                }
                d -= 1;
                at[d] += 1;
                if at[d] < ranges[d].1 {
                    continue 'cells;
                }
                at[d] = ranges[d].0;
            }
        }
    }
    if let Some(hole) = owner.iter().position(|&o| o == 0) {
        // The hole's first element, in the tensor's coordinates.
        let mut rest = hole;
        let mut at = vec![0i64; dims];
        for d in (0..dims).rev() {
            let n = cuts[d].len() - 1;
            at[d] = cuts[d][rest % n];
            rest /= n;
        }
        crate::bail!(
            Format,
            "the DCP metadata: tensor '{name}' of size {size:?} is not fully covered by its {} \
             chunks: the element at {at:?} is in none",
            chunks.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk<'a>(offsets: &'a [i64], sizes: &'a [i64]) -> Extent<'a> {
        Extent { offsets, sizes }
    }

    #[test]
    fn tilings_pass() {
        let rows = [chunk(&[0, 0], &[3, 4]), chunk(&[3, 0], &[2, 4])];
        check_tiling("t", &[5, 4], &rows).unwrap();
        let grid = [
            chunk(&[0, 0], &[2, 2]),
            chunk(&[0, 2], &[2, 3]),
            chunk(&[2, 0], &[1, 2]),
            chunk(&[2, 2], &[1, 3]),
        ];
        check_tiling("t", &[3, 5], &grid).unwrap();
        // An empty chunk past the rows (a rank with none), a scalar.
        let thin = [chunk(&[0, 0], &[1, 4]), chunk(&[1, 0], &[0, 4])];
        check_tiling("t", &[1, 4], &thin).unwrap();
        check_tiling("s", &[], &[chunk(&[], &[])]).unwrap();
        check_tiling("e", &[0, 3], &[]).unwrap();
    }

    #[test]
    fn overlaps_holes_and_overruns_are_named() {
        let err = |size: &[i64], chunks: &[Extent<'_>]| {
            check_tiling("w", size, chunks).unwrap_err().to_string()
        };
        let e = err(&[4, 4], &[chunk(&[0, 0], &[3, 4]), chunk(&[2, 0], &[2, 4])]);
        assert!(e.contains("chunks 0") && e.contains("overlap"), "{e}");
        let e = err(&[4, 4], &[chunk(&[0, 0], &[2, 4]), chunk(&[3, 0], &[1, 4])]);
        assert!(
            e.contains("not fully covered") && e.contains("[2, 0]"),
            "{e}"
        );
        let e = err(&[4, 4], &[chunk(&[0, 0], &[5, 4])]);
        assert!(e.contains("past the tensor in dim 0"), "{e}");
        let e = err(&[4, 4], &[chunk(&[0], &[4])]);
        assert!(e.contains("expected 2 dims"), "{e}");
        let e = err(&[4], &[chunk(&[i64::MAX], &[4])]);
        assert!(e.contains("past the tensor"), "{e}");
        let e = err(&[3], &[]);
        assert!(e.contains("not fully covered"), "{e}");
    }

    #[test]
    fn a_grid_too_fine_is_refused() {
        // 5000 chunks along one dim and 5000 along the other, staggered:
        // 25 million cells.
        let mut geometry = Vec::new();
        for i in 0..5000 {
            geometry.push(([i, 0], [1, 5000 - i]));
            geometry.push(([i, 5000 - i], [1, i]));
        }
        let chunks: Vec<Extent<'_>> = geometry.iter().map(|(o, s)| chunk(o, s)).collect();
        let e = check_tiling("g", &[5000, 5000], &chunks)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pieces"), "{e}");
    }
}
