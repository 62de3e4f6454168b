//! Layout facts about sizes and strides: contiguity for each memory
//! format, non-overlapping-and-dense, the strides of a fresh tensor, and
//! the storage bytes a view needs.

use crate::error::Result;

/// A memory format (c10's MemoryFormat numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryFormat {
    /// Row-major contiguous.
    Contiguous = 0,
    /// Keep the layout of the input (copies only).
    Preserve = 1,
    /// NHWC, for 4-d tensors.
    ChannelsLast = 2,
    /// NDHWC, for 5-d tensors.
    ChannelsLast3d = 3,
}

impl MemoryFormat {
    /// The memory format with c10's number `raw`.
    pub fn from_raw(raw: i32) -> Result<MemoryFormat> {
        Ok(match raw {
            0 => MemoryFormat::Contiguous,
            1 => MemoryFormat::Preserve,
            2 => MemoryFormat::ChannelsLast,
            3 => MemoryFormat::ChannelsLast3d,
            _ => crate::bail!(
                InvalidArgument,
                "unknown memory format {raw}: expected 0 (contiguous), 1 (preserve), 2 \
                 (channels last) or 3 (channels last 3d)"
            ),
        })
    }
}

/// Cached layout flags of a tensor, recomputed on every metadata change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayoutFlags {
    /// Row-major contiguous.
    pub contiguous: bool,
    /// NHWC contiguous (4-d).
    pub channels_last: bool,
    /// NDHWC contiguous (5-d).
    pub channels_last_3d: bool,
    /// Some permutation of the dims is contiguous.
    pub non_overlapping_and_dense: bool,
}

impl LayoutFlags {
    /// Computes every flag.
    pub fn compute(sizes: &[i64], strides: &[i64], numel: i64) -> LayoutFlags {
        let contiguous = is_contiguous(sizes, strides, numel);
        let channels_last = sizes.len() == 4 && dims_dense_in_order(sizes, strides, &[1, 3, 2, 0]);
        let channels_last_3d =
            sizes.len() == 5 && dims_dense_in_order(sizes, strides, &[1, 4, 3, 2, 0]);
        LayoutFlags {
            contiguous,
            channels_last,
            channels_last_3d,
            non_overlapping_and_dense: contiguous
                || channels_last
                || channels_last_3d
                || is_non_overlapping_and_dense(sizes, strides),
        }
    }
}

/// Row-major contiguity: walking dims from last to first and skipping
/// size-1 dims, each stride equals the product of the sizes after it.
/// Empty tensors are contiguous.
pub fn is_contiguous(sizes: &[i64], strides: &[i64], numel: i64) -> bool {
    if numel == 0 {
        return true;
    }
    let mut expected = 1i64;
    for (&size, &stride) in sizes.iter().zip(strides).rev() {
        if size == 1 {
            continue;
        }
        if stride != expected {
            return false;
        }
        expected *= size;
    }
    true
}

/// Whether the dims, visited innermost first in `order`, are densely
/// packed (size-1 dims skipped): the channels-last checks.
fn dims_dense_in_order(sizes: &[i64], strides: &[i64], order: &[usize]) -> bool {
    let mut expected = 1i64;
    for &d in order {
        let size = sizes[d];
        if size == 1 {
            continue;
        }
        if strides[d] != expected {
            return false;
        }
        expected *= size;
    }
    true
}

/// Whether some permutation of the dims is contiguous: sort dims by
/// stride (dims of size < 2 last) and require each stride to equal the
/// product of the sizes before it.
pub fn is_non_overlapping_and_dense(sizes: &[i64], strides: &[i64]) -> bool {
    let n = sizes.len();
    if n == 1 {
        return sizes[0] < 2 || strides[0] == 1;
    }
    let mut perm: smallvec::SmallVec<[usize; 8]> = (0..n).collect();
    perm.sort_by_key(|&d| (sizes[d] < 2, strides[d]));
    let mut expected = 1i64;
    for &d in &perm {
        if sizes[d] < 2 {
            return true;
        }
        if strides[d] != expected {
            return false;
        }
        expected *= sizes[d];
    }
    true
}

/// Row-major strides for `sizes` (size-0 dims count as 1, as c10).
pub fn contiguous_strides(sizes: &[i64]) -> smallvec::SmallVec<[i64; 6]> {
    let mut strides = smallvec::SmallVec::from_elem(1i64, sizes.len());
    let mut acc = 1i64;
    for (i, &s) in sizes.iter().enumerate().rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(s.max(1));
    }
    strides
}

/// Strides that lay the dims out in `order` (innermost first), each the
/// product of the sizes inside it: with size-0 dims counted as 1 when
/// `empty_as_one` (row-major, c10's contiguous strides), else as they are
/// (c10's `get_channels_last_strides_2d` / `_3d`, so the dims outside a
/// size-0 dim get stride 0; both are channels-last contiguous by
/// `dims_dense_in_order`, only these are c10's). None when a stride
/// overflows i64 (the outermost dim's size is never multiplied).
fn strides_in_order(
    sizes: &[i64],
    order: impl Iterator<Item = usize>,
    empty_as_one: bool,
) -> Option<smallvec::SmallVec<[i64; 6]>> {
    let mut strides = smallvec::SmallVec::from_elem(1i64, sizes.len());
    let mut acc = Some(1i64);
    for d in order {
        strides[d] = acc?;
        let size = if empty_as_one {
            sizes[d].max(1)
        } else {
            sizes[d]
        };
        acc = acc.and_then(|a| a.checked_mul(size));
    }
    Some(strides)
}

/// Dense strides that keep the dim order of `strides` (what a copy with
/// preserve format gets when the input is not dense): dims sorted by
/// stride with the iterator's comparison (stride-0 dims stay put, equal
/// strides put the smaller size inner).
pub fn infer_dense_strides(sizes: &[i64], strides: &[i64]) -> smallvec::SmallVec<[i64; 6]> {
    let n = sizes.len();
    if n <= 1 {
        return smallvec::SmallVec::from_elem(1, n);
    }
    // perm[0] is the innermost dim; start from the reversed dim order.
    let mut perm: smallvec::SmallVec<[usize; 8]> = (0..n).rev().collect();
    let after = |d0: usize, d1: usize| -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let (s0, s1) = (strides[d0], strides[d1]);
        if s0 == 0 || s1 == 0 {
            return Equal;
        }
        match s0.cmp(&s1) {
            Equal if sizes[d0] > sizes[d1] => Greater,
            Equal => Equal,
            other => other,
        }
    };
    for i in 1..n {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            match after(perm[dim0], perm[dim1]) {
                std::cmp::Ordering::Greater => {
                    perm.swap(dim0, dim1);
                    dim1 = dim0;
                }
                std::cmp::Ordering::Less => break,
                std::cmp::Ordering::Equal => {}
            }
        }
    }
    let mut out = smallvec::SmallVec::from_elem(0i64, n);
    let mut acc = 1i64;
    for &d in &perm {
        out[d] = acc;
        if sizes[d] > 1 {
            acc *= sizes[d];
        }
    }
    out
}

/// Strides of a fresh tensor of `sizes` in `format` (c10's
/// `empty_tensor_restride`). Errors: a channels-last format for other than
/// 4 dims, channels-last-3d for other than 5 (Shape); a stride past i64,
/// possible when a size is 0 (OutOfMemory, as c10 refuses it: "Stride
/// calculation overflowed").
pub fn strides_for_format(
    sizes: &[i64],
    format: MemoryFormat,
) -> Result<smallvec::SmallVec<[i64; 6]>> {
    let strides = match format {
        MemoryFormat::Contiguous | MemoryFormat::Preserve => {
            strides_in_order(sizes, (0..sizes.len()).rev(), true)
        }
        MemoryFormat::ChannelsLast => {
            crate::ensure!(
                sizes.len() == 4,
                Shape,
                "channels last format requires 4 dims, got {} (sizes {sizes:?})",
                sizes.len()
            );
            strides_in_order(sizes, [1, 3, 2, 0].into_iter(), false)
        }
        MemoryFormat::ChannelsLast3d => {
            crate::ensure!(
                sizes.len() == 5,
                Shape,
                "channels last 3d format requires 5 dims, got {} (sizes {sizes:?})",
                sizes.len()
            );
            strides_in_order(sizes, [1, 4, 3, 2, 0].into_iter(), false)
        }
    };
    strides.ok_or_else(|| {
        crate::err!(
            OutOfMemory,
            "the {format:?} strides of sizes {sizes:?} overflow int64 (expected sizes whose \
             products fit, size-0 dims counted as 1)"
        )
    })
}

/// The number of elements, checking that sizes are non-negative and that
/// the product fits in i64.
pub fn checked_numel(sizes: &[i64]) -> Result<i64> {
    let mut n = 1i64;
    for &s in sizes {
        crate::ensure!(
            s >= 0,
            Shape,
            "negative dimension {s} in sizes {sizes:?}: expected sizes >= 0"
        );
        n = n.checked_mul(s).ok_or_else(|| {
            crate::err!(
                OutOfMemory,
                "the number of elements of sizes {sizes:?} overflows int64"
            )
        })?;
    }
    Ok(n)
}

/// Bytes of storage a view needs: itemsize * (offset + 1 + sum((size-1) *
/// stride)), 0 when any size is 0. Errors on negative strides or offsets
/// (also when a size is 0) and on overflow (when a size is 0: of the
/// offset's byte position).
pub fn storage_nbytes_needed(
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    itemsize: usize,
) -> Result<usize> {
    crate::ensure!(
        offset >= 0,
        InvalidArgument,
        "storage offset {offset} is negative: expected >= 0"
    );
    if let Some(stride) = strides.iter().find(|&&s| s < 0) {
        crate::bail!(
            InvalidArgument,
            "negative stride {stride} in strides {strides:?}: negative strides are not supported \
             (also for an empty tensor)"
        );
    }
    if sizes.contains(&0) {
        // As c10, an empty view needs no bytes whatever its offset; the
        // offset's byte position must still be an address offset.
        crate::ensure!(
            offset
                .checked_mul(itemsize as i64)
                .is_some_and(|b| b <= isize::MAX as i64),
            OutOfMemory,
            "storage offset {offset} of {itemsize}-byte elements overflows the address space"
        );
        return Ok(0);
    }
    let overflow = || {
        crate::err!(
            OutOfMemory,
            "the storage size needed by sizes {sizes:?}, strides {strides:?} and offset {offset} \
             overflows"
        )
    };
    let mut last = 0i64;
    for (&size, &stride) in sizes.iter().zip(strides) {
        last = (size - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(last))
            .ok_or_else(overflow)?;
    }
    let elems = last
        .checked_add(offset)
        .and_then(|x| x.checked_add(1))
        .ok_or_else(overflow)?;
    (elems as u64)
        .checked_mul(itemsize as u64)
        .filter(|b| *b <= isize::MAX as u64)
        .map(|b| b as usize)
        .ok_or_else(overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity_cases() {
        assert!(is_contiguous(&[2, 3], &[3, 1], 6));
        assert!(!is_contiguous(&[2, 3], &[1, 2], 6));
        assert!(
            is_contiguous(&[2, 1, 3], &[3, 100, 1], 6),
            "size-1 strides are ignored"
        );
        assert!(is_contiguous(&[0, 3], &[7, 9], 0), "empty is contiguous");
        // NC11: contiguous and channels last at once
        let f = LayoutFlags::compute(&[2, 3, 1, 1], &[3, 1, 1, 1], 6);
        assert!(f.contiguous && f.channels_last);
        let f = LayoutFlags::compute(&[2, 3, 4, 5], &[60, 1, 15, 3], 120);
        assert!(!f.contiguous && f.channels_last && f.non_overlapping_and_dense);
        let f = LayoutFlags::compute(&[2, 3], &[1, 2], 6);
        assert!(!f.contiguous && f.non_overlapping_and_dense);
        let f = LayoutFlags::compute(&[2, 3], &[0, 1], 6);
        assert!(!f.non_overlapping_and_dense);
        assert!(!is_non_overlapping_and_dense(&[4], &[2]));
    }

    #[test]
    fn fresh_strides() {
        assert_eq!(&contiguous_strides(&[2, 3, 4])[..], &[12, 4, 1]);
        assert_eq!(&contiguous_strides(&[2, 0, 4])[..], &[4, 4, 1]);
        let s = strides_for_format(&[2, 3, 4, 5], MemoryFormat::ChannelsLast).unwrap();
        assert_eq!(&s[..], &[60, 1, 15, 3]);
        let s = strides_for_format(&[2, 3, 4, 5, 6], MemoryFormat::ChannelsLast3d).unwrap();
        assert_eq!(&s[..], &[360, 1, 90, 18, 3]);
        // c10's channels-last strides multiply size-0 dims as 0.
        let s = strides_for_format(&[5, 1, 0, 4, 5], MemoryFormat::ChannelsLast3d).unwrap();
        assert_eq!(&s[..], &[0, 1, 20, 5, 1]);
        let s = strides_for_format(&[2, 0, 4, 5], MemoryFormat::ChannelsLast).unwrap();
        assert_eq!(&s[..], &[0, 1, 0, 0]);
        assert!(LayoutFlags::compute(&[2, 0, 4, 5], &s, 0).channels_last);
        // A stride past int64 is refused, even with no element (c10 too);
        // the outermost size is never multiplied.
        let huge = [0, 1 << 40, 1 << 40];
        let e = strides_for_format(&huge, MemoryFormat::Contiguous).unwrap_err();
        assert!(e.message().contains("overflow"), "{e}");
        let s = strides_for_format(&[i64::MAX, 2], MemoryFormat::Contiguous).unwrap();
        assert_eq!(&s[..], &[2, 1]);
        assert!(strides_for_format(&[2, 3], MemoryFormat::ChannelsLast).is_err());
    }

    #[test]
    fn dense_strides_keep_the_order() {
        assert_eq!(
            &infer_dense_strides(&[3, 2, 4], &[5, 1, 15])[..],
            &[2, 1, 6]
        );
        assert_eq!(
            &infer_dense_strides(&[2, 1, 3, 5], &[5, 1, 25, 1])[..],
            &[5, 1, 10, 1]
        );
        assert_eq!(&infer_dense_strides(&[4], &[3])[..], &[1]);
    }

    #[test]
    fn storage_needed() {
        assert_eq!(storage_nbytes_needed(&[2, 3], &[3, 1], 0, 4).unwrap(), 24);
        assert_eq!(storage_nbytes_needed(&[2, 3], &[3, 1], 2, 4).unwrap(), 32);
        assert_eq!(storage_nbytes_needed(&[2, 0], &[3, 1], 100, 4).unwrap(), 0);
        assert_eq!(storage_nbytes_needed(&[], &[], 0, 8).unwrap(), 8);
        assert!(storage_nbytes_needed(&[2], &[-1], 0, 4).is_err());
        assert!(storage_nbytes_needed(&[0, 2], &[1, -1], 0, 4).is_err());
        assert!(storage_nbytes_needed(&[0], &[1], i64::MAX / 2, 4).is_err());
        assert!(storage_nbytes_needed(&[i64::MAX], &[2], 0, 4).is_err());
        assert!(checked_numel(&[-1, 3])
            .unwrap_err()
            .message()
            .contains("-1"));
        assert!(checked_numel(&[i64::MAX, 3]).is_err());
    }
}
