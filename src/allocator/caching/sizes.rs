//! The size policy of the caching allocator, shared by its pools, block
//! records, front cache and statistics: the block granularity, the small /
//! large pool split and segment sizes ([`PoolKind`], [`round_size`],
//! [`segment_size`]). A leaf of caching/: it uses none of its siblings.

/// Every block size is a multiple of this.
pub(super) const MIN_BLOCK: usize = 512;
/// Requests up to this size (rounded) use the small pool.
pub(super) const SMALL_MAX: usize = 1 << 20;
/// Segment size of the small pool.
pub(super) const SMALL_SEGMENT: usize = 2 << 20;
/// Segment size of the large pool for requests below [`LARGE_DIRECT`].
pub(super) const LARGE_SEGMENT: usize = 20 << 20;
/// Large requests from this size on get a segment of their own size,
/// rounded up to [`SEGMENT_ROUNDING`].
pub(super) const LARGE_DIRECT: usize = 10 << 20;
/// Rounding of segments made to measure.
pub(super) const SEGMENT_ROUNDING: usize = 2 << 20;
/// A large-pool block is split only when more than this would remain.
pub(super) const LARGE_SPLIT_REMAINDER: usize = 1 << 20;

/// Which pool a request or block belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PoolKind {
    Small = 0,
    Large = 1,
}

impl PoolKind {
    /// The pool for a rounded request size.
    #[inline]
    pub(super) fn for_size(size: usize) -> PoolKind {
        if size <= SMALL_MAX {
            PoolKind::Small
        } else {
            PoolKind::Large
        }
    }
}

/// `nbytes` rounded up to [`MIN_BLOCK`], or None if that overflows what an
/// allocation can be.
#[inline]
pub(super) fn round_size(nbytes: usize) -> Option<usize> {
    // The largest multiple of MIN_BLOCK up to isize::MAX is that minus
    // MIN_BLOCK - 1, so this neither overflows nor passes isize::MAX.
    if nbytes <= isize::MAX as usize - (MIN_BLOCK - 1) {
        Some((nbytes + MIN_BLOCK - 1) & !(MIN_BLOCK - 1))
    } else {
        None
    }
}

/// The size of the segment to obtain for a rounded request.
pub(super) fn segment_size(kind: PoolKind, size: usize, oversize: bool) -> Option<usize> {
    match kind {
        PoolKind::Small => Some(SMALL_SEGMENT),
        PoolKind::Large if size < LARGE_DIRECT && !oversize => Some(LARGE_SEGMENT),
        PoolKind::Large => size
            .checked_next_multiple_of(SEGMENT_ROUNDING)
            .filter(|&s| s <= isize::MAX as usize),
    }
}
