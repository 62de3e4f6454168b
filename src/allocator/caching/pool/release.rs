//! Giving memory back: the fully free segments of a device (or of all)
//! for `empty_cache` and the out-of-memory retry, garbage collection
//! (c10's garbage_collect_cached_blocks), and the state's destruction.
//! Segments are taken out of the pools here, under the lock; the caller
//! frees them after unlocking (dropping [`Unused`]).

use super::super::block::BlockId;
use super::super::sizes::{PoolKind, SMALL_SEGMENT};
use super::small_bins::SmallBins;
use super::State;
use crate::allocator::Reservation;
use crate::data_ptr::DataPtr;
use crate::device::Device;

/// Memory taken out of the pools, given back to the inner allocator (or
/// the system) when dropped, after the lock is released.
#[derive(Default)]
pub(in crate::allocator::caching) struct Unused {
    /// Whole segments.
    pub(in crate::allocator::caching) segments: Vec<DataPtr>,
    /// Expandable segments left with nothing mapped.
    pub(in crate::allocator::caching) reservations: Vec<Box<dyn Reservation>>,
    /// Bytes unmapped from expandable segments (already given back).
    pub(in crate::allocator::caching) unmapped_bytes: usize,
}

impl Unused {
    /// How many segments and page ranges were given back.
    pub(in crate::allocator::caching) fn count(&self) -> usize {
        self.segments.len() + self.reservations.len()
    }
}

impl State {
    /// Takes every fully free segment (of one device's pools, every
    /// stream's, or of all) out of the pools, and unmaps every free page
    /// of their expandable segments (releasing those left with nothing
    /// mapped).
    pub(in crate::allocator::caching) fn take_unused_segments(
        &mut self,
        device: Option<Device>,
    ) -> Unused {
        self.flush_front(None);
        let mut whole = Vec::new();
        for slot in 0..self.devices.len() {
            if device.is_some_and(|d| d != self.devices[slot].device) {
                continue;
            }
            // A free block of the small pool's last class may be a whole
            // segment; large-pool ones are checked one by one.
            let top = SmallBins::class(SMALL_SEGMENT);
            let mut cur = self.devices[slot].small.heads[top];
            while let Some(b) = cur {
                cur = self.bs(b).link_next;
                whole.push(b);
            }
            let large = &self.devices[slot].large;
            whole.extend(
                large
                    .normal
                    .values()
                    .chain(large.oversize.values())
                    .copied()
                    .collect::<Vec<_>>(),
            );
        }
        whole.retain(|&b| {
            let s = self.bs(b);
            s.is_whole() && s.segment.is_some()
        });
        let mut unused = Unused {
            segments: self.remove_segments(whole),
            ..Unused::default()
        };
        self.unmap_free_pages(device, &mut unused);
        unused
    }

    /// Takes whole free segments out of the pools; returns their memory.
    fn remove_segments(&mut self, whole: Vec<BlockId>) -> Vec<DataPtr> {
        let mut segments = Vec::with_capacity(whole.len());
        for b in whole {
            self.remove_free(b);
            let s = self.bs(b);
            debug_assert!(s.is_whole() && !s.allocated);
            let (kind, size, slot, oversize) = (s.kind, s.size, s.slot, s.oversize);
            let mem = s.segment.take().expect("a whole segment's block owns it");
            let dev = self.dev(slot);
            self.stats
                .on(dev, |t| t.segment_removed(kind, size, oversize));
            self.recycle(b);
            segments.push(mem);
        }
        segments
    }

    /// The bytes device number `dev` has reserved, with those being
    /// obtained now.
    pub(in crate::allocator::caching) fn reserved_on(&self, dev: usize) -> u64 {
        self.stats.device(dev).reserved_bytes() + self.reserving[dev]
    }

    /// c10's garbage collection, when a device's reserved bytes pass the
    /// threshold's fraction of its limit: returns the whole free segments
    /// of its large pools (not split, not expandable) that have waited
    /// longest, until enough is reclaimed. Ages are the free-block lookups
    /// of the block's pools since it was freed; each round frees the
    /// blocks at least as old as the average of those left.
    pub(in crate::allocator::caching) fn collect_garbage(&mut self, dev: usize) -> Vec<DataPtr> {
        let Some(limit) = self.limits[dev] else {
            return Vec::new();
        };
        let threshold = (self.policy.gc_threshold * limit as f64) as u64;
        let reserved = self.reserved_on(dev);
        if reserved <= threshold {
            return Vec::new();
        }
        let target = reserved - threshold;
        let mut candidates: Vec<(BlockId, u64, usize)> = Vec::new();
        for slot in 0..self.devices.len() {
            if self.devices[slot].dev != dev {
                continue;
            }
            let lookups = self.devices[slot].lookups[PoolKind::Large as usize];
            let blocks: Vec<BlockId> = self.devices[slot]
                .large
                .normal
                .values()
                .chain(self.devices[slot].large.oversize.values())
                .copied()
                .collect();
            for b in blocks {
                let s = self.bs(b);
                if s.is_whole() && s.segment.is_some() {
                    candidates.push((b, lookups - s.gc_base, s.size));
                }
            }
        }
        let mut chosen = Vec::new();
        let mut reclaimed = 0usize;
        while reclaimed < target as usize && !candidates.is_empty() {
            let total_age: u64 = candidates.iter().map(|c| c.1).sum();
            let average = total_age as f64 / candidates.len() as f64;
            let before = chosen.len();
            candidates.retain(|&(b, age, size)| {
                if age as f64 >= average {
                    reclaimed += size;
                    chosen.push(b);
                    false
                } else {
                    true
                }
            });
            if chosen.len() == before {
                break;
            }
        }
        self.remove_segments(chosen)
    }
}

impl Drop for State {
    fn drop(&mut self) {
        self.flush_front(None);
        debug_assert_eq!(self.stats.all().active_blocks(), 0);
        // Every block is free now, so the segments are whole and the
        // expandable ones can be unmapped entirely; their memory goes as
        // `unused` drops (the lock is gone with the state, so this is
        // outside it).
        let unused = self.take_unused_segments(None);
        debug_assert!(self.expandable.iter().all(Option::is_none));
        drop(unused);
    }
}
