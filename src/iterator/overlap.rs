//! Memory overlap decisions (c10's MemoryOverlap): whether a tensor writes
//! one memory location through two indices, and how two tensors overlap.

use crate::storage::Storage;
use crate::tensor::Tensor;

/// Whether a tensor refers to one memory location through several indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOverlap {
    /// No two indices share memory.
    No,
    /// Some do (a dim of size > 1 with stride 0).
    Yes,
    /// Cannot be decided cheaply.
    TooHard,
}

/// How two tensors' memory relates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemOverlapStatus {
    /// The same elements in the same order.
    Full,
    /// Some but not all memory is shared (or in another order).
    Partial,
    /// Disjoint.
    No,
    /// Cannot be decided cheaply.
    TooHard,
}

/// Internal overlap of `t`.
pub fn has_internal_overlap(t: &Tensor) -> MemOverlap {
    if t.is_non_overlapping_and_dense() {
        return MemOverlap::No;
    }
    if t.sizes()
        .iter()
        .zip(t.strides())
        .any(|(&size, &stride)| stride == 0 && size > 1)
    {
        return MemOverlap::Yes;
    }
    MemOverlap::TooHard
}

/// Byte range [begin, end) spanned by a dense tensor's elements.
fn dense_range(t: &Tensor) -> (usize, usize) {
    let begin = t.data_ptr() as usize;
    (begin, begin + t.numel() as usize * t.itemsize())
}

/// The overlap between `a` and `b`.
pub fn get_overlap_status(a: &Tensor, b: &Tensor) -> MemOverlapStatus {
    if Tensor::ptr_eq(a, b) {
        return MemOverlapStatus::Full;
    }
    if a.numel() == 0 || b.numel() == 0 {
        return MemOverlapStatus::No;
    }
    if !a.is_non_overlapping_and_dense() || !b.is_non_overlapping_and_dense() {
        return MemOverlapStatus::TooHard;
    }
    if Storage::ptr_eq(a.storage(), b.storage()) || a.storage().data() == b.storage().data() {
        let (a0, a1) = dense_range(a);
        let (b0, b1) = dense_range(b);
        if a0 == b0 && a1 == b1 {
            return if a.strides() == b.strides() {
                MemOverlapStatus::Full
            } else {
                MemOverlapStatus::Partial
            };
        }
        if a0 < b1 && b0 < a1 {
            return MemOverlapStatus::Partial;
        }
    }
    MemOverlapStatus::No
}

/// Whether two tensors may share memory without being the same view: used
/// by resolve_overlap_by_copy, which copies conservatively when the answer
/// is not a clear no.
pub(crate) fn may_partially_overlap(output: &Tensor, input: &Tensor) -> bool {
    match get_overlap_status(output, input) {
        MemOverlapStatus::Full | MemOverlapStatus::No => false,
        MemOverlapStatus::Partial => true,
        MemOverlapStatus::TooHard => {
            // Same memory block and intersecting address ranges.
            if output.numel() == 0 || input.numel() == 0 {
                return false;
            }
            let extent = |t: &Tensor| {
                let start = t.data_ptr() as usize;
                let last: i64 = t
                    .sizes()
                    .iter()
                    .zip(t.strides())
                    .map(|(s, st)| (s - 1) * st)
                    .sum();
                (start, start + (last as usize + 1) * t.itemsize())
            };
            let (a0, a1) = extent(output);
            let (b0, b1) = extent(input);
            a0 < b1 && b0 < a1
        }
    }
}
