//! The size-class lists of a small pool: one list per 512-byte class up
//! to 2 MiB and a two-level bitmap of the non-empty classes.

use super::super::block::BlockId;
use super::super::sizes::{MIN_BLOCK, SMALL_SEGMENT};

pub(in crate::allocator::caching) const SMALL_CLASSES: usize = SMALL_SEGMENT / MIN_BLOCK;
pub(super) const BITMAP_WORDS: usize = SMALL_CLASSES / 64;

/// The size-class lists of one device's small pool.
pub(super) struct SmallBins {
    pub(super) heads: Box<[Option<BlockId>; SMALL_CLASSES]>,
    /// Bit c of word c / 64: class c is non-empty.
    pub(super) words: [u64; BITMAP_WORDS],
    /// Bit w: words[w] != 0.
    pub(super) summary: u64,
}

impl SmallBins {
    pub(super) fn new() -> SmallBins {
        SmallBins {
            heads: Box::new([None; SMALL_CLASSES]),
            words: [0; BITMAP_WORDS],
            summary: 0,
        }
    }

    /// The class of a small-pool block size (a multiple of 512 from 512
    /// on). Blocks of ordinary segments are at most 2 MiB; free blocks of
    /// an expandable segment may be larger and share the last class
    /// (every block there fits any small request).
    #[inline]
    pub(in crate::allocator::caching) fn class(size: usize) -> usize {
        debug_assert!(size >= MIN_BLOCK && size % MIN_BLOCK == 0);
        (size / MIN_BLOCK - 1).min(SMALL_CLASSES - 1)
    }

    /// Sets the head of a class that was empty.
    #[inline]
    pub(super) fn fill(&mut self, class: usize, head: BlockId) {
        self.heads[class] = Some(head);
        let w = class / 64;
        self.words[w] |= 1 << (class % 64);
        self.summary |= 1 << w;
    }

    /// Empties a class.
    #[inline]
    pub(super) fn clear(&mut self, class: usize) {
        self.heads[class] = None;
        let w = class / 64;
        self.words[w] &= !(1 << (class % 64));
        if self.words[w] == 0 {
            self.summary &= !(1 << w);
        }
    }

    /// The first non-empty class at or above `class`.
    #[inline]
    pub(super) fn first_at_least(&self, class: usize) -> Option<usize> {
        let w = class / 64;
        let here = self.words[w] & (!0u64 << (class % 64));
        if here != 0 {
            return Some(w * 64 + here.trailing_zeros() as usize);
        }
        let above = self.summary & (!0u64).checked_shl(w as u32 + 1).unwrap_or(0);
        if above == 0 {
            return None;
        }
        let w = above.trailing_zeros() as usize;
        Some(w * 64 + self.words[w].trailing_zeros() as usize)
    }
}
