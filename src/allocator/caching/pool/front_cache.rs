//! The front cache of a device's pools: blocks freed recently, kept
//! whole (not merged with their free neighbours) and keyed by size, so
//! that the next request of exactly that rounded size takes one back
//! without the best-fit search, the split and the merge. Small-pool
//! blocks are kept in stacks per size class; large-pool blocks (whose
//! best-fit map and merges cost most) in a short list searched by size.
//!
//! A parked block is not in the pool's free structures and not an
//! inactive split block either: it is "cached in front", and still counted
//! as active until it is flushed or taken back (`Tally::block_parked` says
//! why the statistics stay exact). Whenever the pool has to decide
//! anything from its free blocks (a request that is not an exact front
//! hit, `empty_cache`, running out of memory, reading the statistics,
//! destruction), the front cache is emptied first: its blocks are freed
//! into the pool and merged, leaving the free blocks exactly as if they
//! had never been parked, so best fit and every statistic read follow
//! c10's rules. Bounded: [`SLOTS`] blocks per small size and
//! [`MAX_BYTES`] of them in all; [`LARGE_SLOTS`] large blocks (no byte
//! bound: a parked block is cached memory either way, and any request
//! that misses returns them to the pool first).
//!
//! The front cache lives under the allocator's lock like the pools (see
//! mod.rs, "Front cache", for why it is not per thread).

use super::State;
use crate::allocator::caching::block::BlockId;
use crate::allocator::caching::sizes::{MIN_BLOCK, SMALL_MAX};
use crate::device::Device;
use std::ffi::c_void;

/// Blocks kept per size.
pub(in crate::allocator::caching) const SLOTS: usize = 4;
/// Bytes of small blocks kept per device.
pub(in crate::allocator::caching) const MAX_BYTES: usize = 8 << 20;
/// Large blocks kept per device.
pub(in crate::allocator::caching) const LARGE_SLOTS: usize = 4;
const CLASSES: usize = SMALL_MAX / MIN_BLOCK;
const WORDS: usize = CLASSES / 64;

/// One size's parked blocks (a small stack).
#[derive(Clone, Copy)]
struct Stack {
    blocks: [Option<BlockId>; SLOTS],
    len: u8,
}

/// The parked blocks of one device's pools.
pub(in crate::allocator::caching) struct Front {
    /// Made on the first park.
    stacks: Option<Box<[Stack; CLASSES]>>,
    /// Bit c of word c / 64: size class c has parked blocks.
    words: [u64; WORDS],
    /// Bytes of the small blocks parked.
    bytes: usize,
    /// Parked large blocks (size, block), the first `large_len` entries.
    large: [(usize, Option<BlockId>); LARGE_SLOTS],
    large_len: usize,
}

impl Front {
    pub(in crate::allocator::caching) fn new() -> Front {
        Front {
            stacks: None,
            words: [0; WORDS],
            bytes: 0,
            large: [(0, None); LARGE_SLOTS],
            large_len: 0,
        }
    }

    /// The class of a small-pool block size (512..=1 MiB, multiple of 512).
    #[inline]
    fn class(size: usize) -> usize {
        debug_assert!((MIN_BLOCK..=SMALL_MAX).contains(&size) && size % MIN_BLOCK == 0);
        (size / MIN_BLOCK - 1) & (CLASSES - 1)
    }

    /// Bytes parked.
    #[cfg(test)]
    pub(in crate::allocator::caching) fn bytes(&self) -> usize {
        self.bytes
            + self.large[..self.large_len]
                .iter()
                .map(|e| e.0)
                .sum::<usize>()
    }

    /// Whether nothing is parked.
    #[inline]
    pub(in crate::allocator::caching) fn is_empty(&self) -> bool {
        self.bytes == 0 && self.large_len == 0
    }

    /// Takes a parked block of exactly `size` bytes.
    #[inline]
    pub(in crate::allocator::caching) fn take(&mut self, size: usize) -> Option<BlockId> {
        if size > SMALL_MAX {
            return self.take_large(size);
        }
        // None until the first park.
        let stacks = self.stacks.as_mut()?;
        let c = Self::class(size);
        let stack = &mut stacks[c];
        let len = stack.len.checked_sub(1)?;
        stack.len = len;
        if len == 0 {
            self.words[c / 64] &= !(1 << (c % 64));
        }
        self.bytes -= size;
        stack.blocks[len as usize]
    }

    /// Parks block `b` of `size` bytes; false when it does not fit (too
    /// large, its size's stack full, or the byte budget spent).
    #[inline]
    pub(in crate::allocator::caching) fn put(&mut self, size: usize, b: BlockId) -> bool {
        if size > SMALL_MAX {
            return self.put_large(size, b);
        }
        if self.bytes + size > MAX_BYTES {
            return false;
        }
        let c = Self::class(size);
        let stacks = match self.stacks {
            Some(ref mut s) => s,
            None => self.stacks.insert(new_stacks()),
        };
        let stack = &mut stacks[c];
        let len = stack.len as usize;
        if len >= SLOTS {
            return false;
        }
        stack.blocks[len] = Some(b);
        stack.len += 1;
        if len == 0 {
            self.words[c / 64] |= 1 << (c % 64);
        }
        self.bytes += size;
        true
    }

    /// Takes the most recently parked large block of exactly `size` bytes.
    #[inline]
    fn take_large(&mut self, size: usize) -> Option<BlockId> {
        let i = self.large[..self.large_len]
            .iter()
            .rposition(|e| e.0 == size)?;
        let (_, b) = self.large[i];
        self.large_len -= 1;
        self.large[i] = self.large[self.large_len];
        b
    }

    /// Parks a large block; false when the list is full.
    #[inline]
    fn put_large(&mut self, size: usize, b: BlockId) -> bool {
        if self.large_len == LARGE_SLOTS {
            return false;
        }
        self.large[self.large_len] = (size, Some(b));
        self.large_len += 1;
        true
    }

    /// Takes every parked block out.
    pub(in crate::allocator::caching) fn drain(&mut self) -> Vec<BlockId> {
        let mut out: Vec<BlockId> = self.large[..self.large_len]
            .iter()
            .filter_map(|e| e.1)
            .collect();
        self.large_len = 0;
        let Some(stacks) = self.stacks.as_mut() else {
            return out;
        };
        for (w, word) in self.words.iter_mut().enumerate() {
            while *word != 0 {
                let c = w * 64 + word.trailing_zeros() as usize;
                *word &= *word - 1;
                let stack = &mut stacks[c];
                out.extend(stack.blocks[..stack.len as usize].iter().flatten());
                stack.len = 0;
            }
        }
        self.bytes = 0;
        out
    }
}

#[cold]
fn new_stacks() -> Box<[Stack; CLASSES]> {
    let empty = Stack {
        blocks: [None; SLOTS],
        len: 0,
    };
    vec![empty; CLASSES]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("the vector has CLASSES stacks"))
}

/// The front caches as the pools use them (under the allocator's lock).
impl State {
    /// Takes back a handed-out block into its device's front cache, kept
    /// whole with its free only partly counted (see `Tally::block_parked`);
    /// false when the front cache does not take it (the caller releases
    /// it). An orphaned state parks nothing: its last free must see every
    /// block back in the pools.
    #[inline]
    pub(in crate::allocator::caching) fn park(&mut self, b: BlockId) -> bool {
        let s = self.bs(b);
        debug_assert!(s.allocated);
        let (kind, size, requested, slot, oversize) =
            (s.kind, s.size, s.requested, s.slot, s.oversize);
        if self.orphaned || !self.devices[slot].front.put(size, b) {
            return false;
        }
        // The record keeps `requested` (the request it was freed with)
        // until it is taken back or flushed.
        let dev = self.dev(slot);
        self.stats
            .on(dev, |t| t.block_parked(kind, size, requested, oversize));
        true
    }

    /// Takes a parked block of exactly `size` bytes from the front cache
    /// of `slot`.
    #[inline]
    pub(in crate::allocator::caching) fn front_take(
        &mut self,
        slot: usize,
        size: usize,
    ) -> Option<BlockId> {
        self.devices[slot].front.take(size)
    }

    /// Hands out a block taken from the front cache for a request of
    /// `requested` bytes. Returns the data address and device.
    #[inline]
    pub(in crate::allocator::caching) fn hand_out_parked(
        &mut self,
        b: BlockId,
        requested: usize,
    ) -> (*mut c_void, Device) {
        let s = self.bs(b);
        let old = std::mem::replace(&mut s.requested, requested);
        let (addr, device, kind, size, slot, oversize) =
            (s.addr, s.device, s.kind, s.size, s.slot, s.oversize);
        self.file_front(b, kind, requested, slot, device, addr, size);
        let dev = self.dev(slot);
        self.stats.on(dev, |t| {
            t.parked_taken(kind, size, old, requested, oversize)
        });
        (addr as *mut c_void, device)
    }

    /// Empties the front cache of one device (or of all) into the pools:
    /// each block is merged and filed as if freed now.
    pub(in crate::allocator::caching) fn flush_front(&mut self, slot: Option<usize>) {
        let slots = match slot {
            Some(s) => s..s + 1,
            None => 0..self.devices.len(),
        };
        for slot in slots {
            if self.devices[slot].front.is_empty() {
                continue;
            }
            let dev = self.dev(slot);
            for b in self.devices[slot].front.drain() {
                let s = self.bs(b);
                let (kind, size, oversize) = (s.kind, s.size, s.oversize);
                let requested = std::mem::take(&mut s.requested);
                self.stats
                    .on(dev, |t| t.parked_flushed(kind, size, requested, oversize));
                self.merge_and_file(b);
            }
        }
    }

    /// Bytes parked in the front caches (tests).
    #[cfg(test)]
    pub(in crate::allocator::caching) fn front_bytes(&self) -> usize {
        self.devices.iter().map(|d| d.front.bytes()).sum()
    }
}
