//! Shape arithmetic: dim wrapping, -1 inference, the stride rule of
//! `view`, broadcasting and expand geometry.

use crate::error::Result;
use smallvec::SmallVec;

/// Small vectors of sizes or strides (inline up to 6 dims).
pub type Dims = SmallVec<[i64; 6]>;

/// Wraps a possibly negative dim into [0, ndim). A 0-dim tensor accepts
/// dims -1 and 0 (as c10's wrap_scalar).
pub fn wrap_dim(dim: i64, ndim: usize) -> Result<usize> {
    let n = (ndim as i64).max(1);
    crate::ensure!(
        (-n..n).contains(&dim),
        Shape,
        "dim {dim} is out of range: expected a dim in [{}, {}]",
        -n,
        n - 1
    );
    Ok(if dim < 0 {
        (dim + n) as usize
    } else {
        dim as usize
    })
}

/// Resolves a requested shape with at most one -1 against `numel`
/// elements.
pub fn infer_size(shape: &[i64], numel: i64) -> Result<Dims> {
    let mut out: Dims = Dims::from_slice(shape);
    let mut infer_at = None;
    let mut known = 1i64;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            crate::ensure!(
                infer_at.is_none(),
                Shape,
                "shape {shape:?} has more than one -1: only one dim can be inferred"
            );
            infer_at = Some(i);
        } else {
            crate::ensure!(
                s >= 0,
                Shape,
                "invalid size {s} at dim {i} of shape {shape:?}: expected sizes >= 0 or one -1"
            );
            known = known.saturating_mul(s);
        }
    }
    let invalid = || {
        crate::err!(
            Shape,
            "shape {shape:?} is invalid for input of size {numel}"
        )
    };
    match infer_at {
        None => {
            if known != numel {
                return Err(invalid());
            }
        }
        Some(i) => {
            // -1 with other sizes multiplying to 0 is ambiguous.
            if known == 0 || numel % known != 0 {
                return Err(if known == 0 {
                    crate::err!(
                        Shape,
                        "shape {shape:?} cannot infer the -1 dim: the other sizes multiply to 0"
                    )
                } else {
                    invalid()
                });
            }
            out[i] = numel / known;
        }
    }
    Ok(out)
}

/// The strides that let a tensor of `old_sizes` / `old_strides` be viewed
/// as `new_sizes` without copying, or None if some new dim would span two
/// chunks of memory that are not evenly strided (the rule of c10's view).
///
/// The old dims are split into chunks of dims that are contiguous with
/// each other; each chunk must be exactly covered by a run of new dims.
pub fn view_strides(old_sizes: &[i64], old_strides: &[i64], new_sizes: &[i64]) -> Option<Dims> {
    if old_sizes.is_empty() {
        return Some(SmallVec::from_elem(1, new_sizes.len()));
    }
    let numel: i64 = old_sizes.iter().product();
    if numel == 0 {
        if old_sizes == new_sizes {
            return Some(Dims::from_slice(old_strides));
        }
        // Any strides work for an empty tensor: use contiguous ones
        // (saturating at i64::MAX, as for any empty tensor made without
        // strides; the view ops check their offsets against overflow).
        return Some(super::layout::contiguous_strides(new_sizes));
    }

    let mut new_strides: Dims = SmallVec::from_elem(0, new_sizes.len());
    // Next new dim to assign, counting down from the innermost.
    let mut next_new = new_sizes.len() as isize - 1;
    let mut chunk_stride = *old_strides.last()?;
    let mut chunk_numel = 1i64;
    let mut covered = 1i64;
    for d in (0..old_sizes.len()).rev() {
        chunk_numel *= old_sizes[d];
        // The chunk ends at d when the dim before it does not continue it.
        let chunk_ends =
            d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != chunk_numel * chunk_stride);
        if !chunk_ends {
            continue;
        }
        while next_new >= 0 && (covered < chunk_numel || new_sizes[next_new as usize] == 1) {
            new_strides[next_new as usize] = covered * chunk_stride;
            covered *= new_sizes[next_new as usize];
            next_new -= 1;
        }
        if covered != chunk_numel {
            return None;
        }
        if d > 0 {
            chunk_stride = old_strides[d - 1];
            chunk_numel = 1;
            covered = 1;
        }
    }
    (next_new == -1).then_some(new_strides)
}

/// The broadcast of two shapes (numpy rules), or an error naming both
/// sizes and the dim.
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> Result<Dims> {
    let n = a.len().max(b.len());
    let mut out: Dims = SmallVec::from_elem(1, n);
    for i in 0..n {
        let da = (i + a.len()).checked_sub(n).map(|j| a[j]).unwrap_or(1);
        let db = (i + b.len()).checked_sub(n).map(|j| b[j]).unwrap_or(1);
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            crate::bail!(
                Shape,
                "the size of tensor a ({da}) must match the size of tensor b ({db}) at \
                 non-singleton dimension {i}"
            );
        };
    }
    Ok(out)
}

/// As [`broadcast_shapes`] of `shape` and `other`, written over `shape`
/// (no new vector; `shape` is unspecified after an error).
pub fn broadcast_into(shape: &mut Dims, other: &[i64]) -> Result<()> {
    if shape.len() < other.len() {
        shape.insert_many(0, std::iter::repeat_n(1, other.len() - shape.len()));
    }
    broadcast_in_place(shape, other)
}

/// As [`broadcast_into`], for a `shape` that already has at least as
/// many dims as `other` (the caller put leading ones before it).
pub fn broadcast_in_place(shape: &mut [i64], other: &[i64]) -> Result<()> {
    let n = shape.len();
    debug_assert!(n >= other.len());
    for (i, out) in shape.iter_mut().enumerate() {
        let da = *out;
        let db = (i + other.len())
            .checked_sub(n)
            .map(|j| other[j])
            .unwrap_or(1);
        if da == db || db == 1 {
            continue;
        }
        crate::ensure!(
            da == 1,
            Shape,
            "the size of tensor a ({da}) must match the size of tensor b ({db}) at \
             non-singleton dimension {i}"
        );
        *out = db;
    }
    Ok(())
}

/// Sizes and strides of `sizes`/`strides` expanded to `target` (-1 keeps a
/// size; size-1 dims and new leading dims get stride 0).
pub fn expand_geometry(sizes: &[i64], strides: &[i64], target: &[i64]) -> Result<(Dims, Dims)> {
    let ndim = target.len();
    let tdim = sizes.len();
    crate::ensure!(
        ndim >= tdim,
        Shape,
        "expand to {target:?}: the number of sizes ({ndim}) must be at least the tensor's \
         number of dims ({tdim})"
    );
    let mut out_sizes: Dims = SmallVec::from_elem(0, ndim);
    let mut out_strides: Dims = SmallVec::from_elem(0, ndim);
    for i in (0..ndim).rev() {
        let existing = (i + tdim).checked_sub(ndim);
        let (mut size, mut stride) = match existing {
            Some(d) => (sizes[d], strides[d]),
            None if i + 1 == ndim => (1, 1),
            None => (1, out_sizes[i + 1] * out_strides[i + 1]),
        };
        let mut want = target[i];
        if want == -1 {
            crate::ensure!(
                existing.is_some(),
                Shape,
                "expand to {target:?}: -1 is not allowed in the new leading dim {i}"
            );
            want = size;
        }
        crate::ensure!(
            want >= 0,
            Shape,
            "expand to {target:?}: invalid size {want} at dim {i}"
        );
        if size != want {
            crate::ensure!(
                size == 1,
                Shape,
                "the expanded size of the tensor ({want}) must match the existing size ({size}) \
                 at non-singleton dimension {i}: target sizes {target:?}, tensor sizes {sizes:?}"
            );
            size = want;
            stride = 0;
        }
        out_sizes[i] = size;
        out_strides[i] = stride;
    }
    Ok((out_sizes, out_strides))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping() {
        assert_eq!(wrap_dim(-1, 3).unwrap(), 2);
        assert_eq!(wrap_dim(0, 0).unwrap(), 0);
        assert_eq!(wrap_dim(-1, 0).unwrap(), 0);
        let e = wrap_dim(3, 3).unwrap_err();
        assert!(
            e.message().contains("dim 3") && e.message().contains("[-3, 2]"),
            "{e}"
        );
    }

    #[test]
    fn infer() {
        assert_eq!(&infer_size(&[3, -1], 12).unwrap()[..], &[3, 4]);
        let e = infer_size(&[3, 5], 16).unwrap_err();
        assert_eq!(e.message(), "shape [3, 5] is invalid for input of size 16");
        assert!(infer_size(&[-1, -1], 4).is_err());
        assert!(infer_size(&[0, -1], 0).is_err());
        assert_eq!(&infer_size(&[0, 5], 0).unwrap()[..], &[0, 5]);
    }

    #[test]
    fn view_rule() {
        // contiguous: any reshape
        assert_eq!(
            &view_strides(&[2, 3, 4], &[12, 4, 1], &[6, 4]).unwrap()[..],
            &[4, 1]
        );
        // transposed: cannot flatten
        assert!(view_strides(&[3, 2], &[1, 3], &[6]).is_none());
        // but can split a dim
        assert_eq!(
            &view_strides(&[4, 3], &[1, 4], &[2, 2, 3]).unwrap()[..],
            &[2, 1, 4]
        );
        // size-1 dims are free
        assert_eq!(
            &view_strides(&[3, 2], &[2, 1], &[3, 2, 1]).unwrap()[..],
            &[2, 1, 1]
        );
    }

    #[test]
    fn broadcasting() {
        assert_eq!(
            &broadcast_shapes(&[64, 1, 128], &[32, 128]).unwrap()[..],
            &[64, 32, 128]
        );
        let e = broadcast_shapes(&[3, 2], &[3]).unwrap_err();
        assert!(
            e.message().contains("(2)")
                && e.message().contains("(3)")
                && e.message().contains("dimension 1")
        );
    }

    #[test]
    fn broadcasting_in_place_matches() {
        let cases: [(&[i64], &[i64]); 5] = [
            (&[64, 1, 128], &[32, 128]),
            (&[32, 128], &[64, 1, 128]),
            (&[], &[4, 1]),
            (&[5, 1], &[]),
            (&[1, 0], &[3, 1]),
        ];
        for (a, b) in cases {
            let mut shape = Dims::from_slice(a);
            broadcast_into(&mut shape, b).unwrap();
            assert_eq!(shape, broadcast_shapes(a, b).unwrap(), "{a:?} with {b:?}");
        }
        let mut shape = Dims::from_slice(&[3, 2]);
        let e = broadcast_into(&mut shape, &[3]).unwrap_err();
        assert_eq!(
            e.message(),
            broadcast_shapes(&[3, 2], &[3]).unwrap_err().message()
        );
    }

    #[test]
    fn expanding() {
        let (s, st) = expand_geometry(&[3, 1], &[1, 1], &[2, 3, 4]).unwrap();
        assert_eq!((&s[..], &st[..]), (&[2, 3, 4][..], &[0, 1, 0][..]));
        let (s, st) = expand_geometry(&[3, 1], &[1, 1], &[-1, 5]).unwrap();
        assert_eq!((&s[..], &st[..]), (&[3, 5][..], &[1, 0][..]));
        assert!(expand_geometry(&[3], &[1], &[4]).is_err());
        assert!(expand_geometry(&[3], &[1], &[-1, 3]).is_err());
        assert!(expand_geometry(&[3, 2], &[2, 1], &[2]).is_err());
    }
}
