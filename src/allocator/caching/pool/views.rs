//! Views of the pools: the segment lists of memory snapshots, the
//! statistics, the out-of-memory description, and the test audit.

use super::super::block::BlockId;
#[cfg(test)]
use super::small_bins::{SmallBins, BITMAP_WORDS, SMALL_CLASSES};
use super::{PoolKind, State};
use crate::device::Device;

impl State {
    /// Every segment with the blocks that tile it, in address order (memory
    /// snapshots). Parked blocks are flushed first, so they show as free.
    pub(in crate::allocator::caching) fn segments(&mut self) -> Vec<SegmentView> {
        self.flush_front(None);
        let heads: Vec<BlockId> = self
            .records
            .all()
            .into_iter()
            .filter(|&b| self.bs(b).segment.is_some())
            .collect();
        let mut out = Vec::with_capacity(heads.len());
        for head in heads {
            let (kind, oversize, device, slot) = {
                let s = self.bs(head);
                (s.kind, s.oversize, s.device, s.slot)
            };
            let stream = self.devices[slot].stream;
            let mut blocks = Vec::new();
            let mut cur = Some(head);
            while let Some(b) = cur {
                let s = self.bs(b);
                blocks.push(SegmentBlock {
                    addr: s.addr,
                    size: s.size,
                    allocated: s.allocated,
                    requested: s.allocated.then_some(s.requested),
                });
                cur = s.next;
            }
            let pool = match (kind, oversize) {
                (PoolKind::Small, _) => "small",
                (PoolKind::Large, false) => "large",
                (PoolKind::Large, true) => "oversize",
            };
            out.push(SegmentView {
                addr: blocks[0].addr,
                size: blocks.iter().map(|b| b.size).sum(),
                pool,
                device,
                stream,
                expandable: false,
                blocks,
            });
        }
        self.expandable_views(&mut out);
        out.sort_by_key(|s| s.addr);
        out
    }

    /// The mapped parts of the expandable segments, each run of mapped
    /// blocks a segment of its own (as c10's snapshots show them).
    fn expandable_views(&mut self, out: &mut Vec<SegmentView>) {
        let heads: Vec<BlockId> = self.expandable.iter().flatten().map(|e| e.head()).collect();
        for head in heads {
            let mut run: Vec<SegmentBlock> = Vec::new();
            let mut cur = Some(head);
            let (kind, device, slot) = {
                let s = self.bs(head);
                (s.kind, s.device, s.slot)
            };
            let stream = self.devices[slot].stream;
            loop {
                let next = cur.map(|b| {
                    let s = self.bs(b);
                    (s.mapped, s.addr, s.size, s.allocated, s.requested, s.next)
                });
                match next {
                    Some((true, addr, size, allocated, requested, next)) => {
                        run.push(SegmentBlock {
                            addr,
                            size,
                            allocated,
                            requested: allocated.then_some(requested),
                        });
                        cur = next;
                        continue;
                    }
                    Some((false, .., next)) => cur = next,
                    None => cur = None,
                }
                if !run.is_empty() {
                    let blocks = std::mem::take(&mut run);
                    out.push(SegmentView {
                        addr: blocks[0].addr,
                        size: blocks.iter().map(|b| b.size).sum(),
                        pool: match kind {
                            PoolKind::Small => "small",
                            PoolKind::Large => "large",
                        },
                        device,
                        stream,
                        expandable: true,
                        blocks,
                    });
                }
                if cur.is_none() {
                    break;
                }
            }
        }
    }

    /// The statistics now: the front caches are flushed first, so that
    /// parked blocks count as free.
    pub(in crate::allocator::caching) fn stats_now(&mut self) -> super::super::CachingStats {
        self.flush_front(None);
        self.stats.all().snapshot()
    }

    /// The statistics of one device now (zero for a device never served).
    pub(in crate::allocator::caching) fn device_stats_now(
        &mut self,
        device: crate::device::Device,
    ) -> super::super::CachingStats {
        self.flush_front(None);
        self.stats.snapshot_of(device)
    }

    /// A one-line account of the pools, for out-of-memory messages.
    pub(in crate::allocator::caching) fn describe(&mut self) -> String {
        let stats = self.stats_now();
        let (a, s, l) = (&stats.all, &stats.small, &stats.large);
        format!(
            "{} bytes reserved in {} segments (small pool {} in {}, large pool {} in {}), \
             {} bytes active in {} blocks, {} bytes cached free of which {} in split segments",
            a.reserved_bytes.current,
            a.segments.current,
            s.reserved_bytes.current,
            s.segments.current,
            l.reserved_bytes.current,
            l.segments.current,
            a.active_bytes.current,
            a.active_blocks.current,
            a.reserved_bytes.current - a.active_bytes.current,
            a.inactive_split_bytes.current,
        )
    }
}

/// What [`State::audit`] found.
#[cfg(test)]
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::allocator::caching) struct Audit {
    /// Free blocks, and their bytes.
    pub free_blocks: u64,
    pub free_bytes: u64,
    /// Free blocks that are not whole segments, and their bytes.
    pub split_blocks: u64,
    pub split_bytes: u64,
    /// Free blocks that are whole segments.
    pub whole_segments: u64,
    /// Bytes of the expandable segments' unmapped blocks.
    pub unmapped_bytes: u64,
    /// Address space the expandable segments reserve.
    pub address_space: u64,
}

#[cfg(test)]
impl State {
    /// Walks every free block, checks the structural invariants (no two
    /// free neighbours, links consistent, each block filed where its size
    /// says, bitmaps matching the lists) and sums what it saw.
    pub(in crate::allocator::caching) fn audit(&mut self) -> Audit {
        let mut free = Vec::new();
        for slot in 0..self.devices.len() {
            let small = &self.devices[slot].small;
            for class in 0..SMALL_CLASSES {
                let bit = small.words[class / 64] >> (class % 64) & 1 == 1;
                assert_eq!(bit, small.heads[class].is_some(), "bitmap of class {class}");
            }
            for w in 0..BITMAP_WORDS {
                assert_eq!(
                    small.summary >> w & 1 == 1,
                    small.words[w] != 0,
                    "summary bit {w}"
                );
            }
            let heads: Vec<(usize, BlockId)> = small
                .heads
                .iter()
                .enumerate()
                .filter_map(|(c, h)| h.map(|h| (c, h)))
                .collect();
            for (class, head) in heads {
                let mut prev = None;
                let mut cur = Some(head);
                while let Some(b) = cur {
                    let s = self.bs(b);
                    assert_eq!(s.link_prev, prev, "list links");
                    assert_eq!(SmallBins::class(s.size), class, "filed under its size");
                    assert_eq!((s.kind, s.slot), (PoolKind::Small, slot));
                    prev = Some(b);
                    cur = s.link_next;
                    free.push(b);
                }
            }
            let large = &self.devices[slot].large;
            let entries: Vec<((usize, usize), BlockId, bool)> = large
                .normal
                .iter()
                .map(|(k, b)| (*k, *b, false))
                .chain(large.oversize.iter().map(|(k, b)| (*k, *b, true)))
                .collect();
            for (key, b, oversize) in entries {
                let s = self.bs(b);
                assert_eq!(key, (s.size, s.addr), "large key");
                assert_eq!(
                    (s.kind, s.slot, s.oversize),
                    (PoolKind::Large, slot, oversize)
                );
                free.push(b);
            }
        }
        let (unmapped_bytes, address_space) = self.audit_expandable();
        let mut audit = Audit {
            unmapped_bytes,
            address_space,
            ..Audit::default()
        };
        for b in free {
            let s = self.bs(b);
            assert!(!s.allocated && s.mapped, "a filed block is free and mapped");
            let (size, addr, prev, next, whole) = (s.size, s.addr, s.prev, s.next, s.is_whole());
            if let Some(p) = prev {
                let ps = self.bs(p);
                assert!(ps.allocated || !ps.mapped, "two free neighbours");
                assert_eq!((ps.addr + ps.size, ps.next), (addr, Some(b)), "prev link");
            }
            if let Some(n) = next {
                let ns = self.bs(n);
                assert!(ns.allocated || !ns.mapped, "two free neighbours");
                assert_eq!((addr + size, ns.prev), (ns.addr, Some(b)), "next link");
            }
            audit.free_blocks += 1;
            audit.free_bytes += size as u64;
            if whole {
                audit.whole_segments += 1;
            } else {
                audit.split_blocks += 1;
                audit.split_bytes += size as u64;
            }
        }
        audit
    }
}

/// A block of a segment, for memory snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentBlock {
    /// Address.
    pub addr: usize,
    /// Size (rounded).
    pub size: usize,
    /// Handed out (else cached free).
    pub allocated: bool,
    /// What the caller asked for, while allocated.
    pub requested: Option<usize>,
}

/// A segment of a caching allocator, for memory snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentView {
    /// Address of its first block.
    pub addr: usize,
    /// Total size.
    pub size: usize,
    /// "small", "large" or "oversize".
    pub pool: &'static str,
    /// Where the memory is.
    pub device: Device,
    /// The stream its blocks serve (0: the default stream, or an
    /// allocator without streams).
    pub stream: usize,
    /// A run of mapped pages of an expandable segment (each such run is
    /// shown as a segment of its own, as in c10's snapshots).
    pub expandable: bool,
    /// Its blocks in address order.
    pub blocks: Vec<SegmentBlock>,
}
