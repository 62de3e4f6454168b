//! Expandable segments (c10's expandable_segments): instead of a new
//! segment for each miss, each device, stream and pool kind has one
//! segment over a large range of reserved address space (as large as the
//! inner allocator's `VirtualMemory::reservation_size`: 1 1/8 of the
//! device's memory), of which only the pages in use are mapped. A
//! request no free block fits maps more pages, next to a free block where
//! one ends at unmapped space, so the free block grows instead of a second
//! segment being made; `empty_cache` and the out-of-memory retry unmap
//! every whole page of the free blocks, and release a segment left with
//! nothing mapped. Blocks of an expandable segment split whatever their
//! pool (c10's should_split), so with them nothing is oversize.
//!
//! The unmapped parts are blocks of the segment's chain too (`mapped`
//! false, never allocated, never in the free structures, never merged
//! with mapped blocks), kept by address in the segment's `unmapped` map;
//! two unmapped blocks are never neighbours. A segment's first block
//! (`head`) keeps its record for the segment's life: mapping keeps the
//! lower part in the unmapped block's record, merges keep the lower
//! record, and unmapping moves the head when it cuts a mapped part off
//! its start.
//!
//! Mapping and unmapping run under the allocator's lock (as in c10):
//! they are driver calls (mmap on the CPU, cuMemMap and friends on CUDA)
//! of a few microseconds, made only on a miss or a release.

use super::{NewBlock, State, Unused};
use crate::allocator::caching::block::BlockId;
use crate::allocator::caching::sizes::PoolKind;
use crate::allocator::{Reservation, VirtualMemory};
use crate::device::Device;
use crate::error::Result;
use std::collections::BTreeMap;

/// One expandable segment.
pub(in crate::allocator::caching) struct Expandable {
    res: Box<dyn Reservation>,
    /// The mapping granularity.
    page: usize,
    slot: usize,
    kind: PoolKind,
    /// The block at the reservation's start.
    head: BlockId,
    /// The unmapped blocks by address.
    unmapped: BTreeMap<usize, BlockId>,
}

impl Expandable {
    /// The segment's first block.
    pub(in crate::allocator::caching) fn head(&self) -> BlockId {
        self.head
    }
}

fn kind_index(kind: PoolKind) -> usize {
    match kind {
        PoolKind::Small => 0,
        PoolKind::Large => 1,
    }
}

impl State {
    fn seg(&mut self, idx: u32) -> &mut Expandable {
        self.expandable[idx as usize]
            .as_mut()
            .expect("a block's expandable segment is alive")
    }

    /// Grows an expandable segment of `slot`'s pools of `kind` so that a
    /// free block of at least `size` bytes exists, and returns it, taken
    /// out of the free structures (about to be handed out). Makes the
    /// segment when there is none, or none with room. Fails with
    /// OutOfMemory when pages cannot be mapped (the device is out of
    /// memory, or its limit would be passed); nothing stays taken then.
    pub(in crate::allocator::caching) fn expand(
        &mut self,
        vm: &dyn VirtualMemory,
        slot: usize,
        kind: PoolKind,
        size: usize,
    ) -> Result<BlockId> {
        let candidate = match self.find_room(slot, kind, size) {
            Some(c) => c,
            None => {
                let idx = self.new_expandable(vm, slot, kind)?;
                let head = self.seg(idx).head;
                let room = self.bs(head).size;
                crate::ensure!(
                    room >= size,
                    OutOfMemory,
                    "{size} bytes are more than an expandable segment's address space ({room} \
                     bytes) on {}",
                    self.devices[slot].device
                );
                head
            }
        };
        self.grow_into(candidate, size)
    }

    /// The block to grow from for `size` bytes: an unmapped block, or the
    /// free mapped block just before it, followed by enough free or
    /// unmapped space (c10's find_expandable_block).
    fn find_room(&mut self, slot: usize, kind: PoolKind, size: usize) -> Option<BlockId> {
        let segments = self.devices[slot].expandable[kind_index(kind)].clone();
        for idx in segments {
            let unmapped: Vec<BlockId> = self.seg(idx).unmapped.values().copied().collect();
            for u in unmapped {
                let mut c = u;
                if let Some(p) = self.bs(u).prev {
                    let ps = self.bs(p);
                    if !ps.allocated && ps.mapped {
                        c = p;
                    }
                }
                let mut bytes = 0;
                let mut cur = Some(c);
                while let Some(b) = cur {
                    let s = self.bs(b);
                    if bytes >= size || s.allocated {
                        break;
                    }
                    bytes += s.size;
                    cur = s.next;
                }
                if bytes >= size {
                    return Some(c);
                }
            }
        }
        None
    }

    /// Reserves a new expandable segment for `slot`'s pools of `kind`; its
    /// one block is unmapped.
    #[cold]
    fn new_expandable(
        &mut self,
        vm: &dyn VirtualMemory,
        slot: usize,
        kind: PoolKind,
    ) -> Result<u32> {
        let device = self.devices[slot].device;
        let page = vm.page_size(device)?;
        crate::ensure!(
            page > 0 && page.is_power_of_two(),
            Internal,
            "the page size of {device}'s address space is {page}: expected a power of two"
        );
        let size = vm.reservation_size(device)?.next_multiple_of(page);
        let res = vm.reserve(device, size)?;
        let (base, size, data_device) = (res.base(), res.size(), res.device());
        let idx = match self.expandable.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.expandable.push(None);
                self.expandable.len() - 1
            }
        } as u32;
        let head = self.new_block(NewBlock {
            addr: base,
            size,
            prev: None,
            next: None,
            device: data_device,
            slot,
            kind,
            oversize: false,
            mapped: false,
            expandable: Some(idx),
        });
        self.expandable[idx as usize] = Some(Expandable {
            res,
            page,
            slot,
            kind,
            head,
            unmapped: BTreeMap::from([(base, head)]),
        });
        self.devices[slot].expandable[kind_index(kind)].push(idx);
        let dev = self.dev(slot);
        self.stats.on(dev, |t| t.segment_added(kind, 0, false));
        Ok(idx)
    }

    /// Maps pages from candidate `c` on until it is a free mapped block of
    /// at least `size` bytes, taken out of the free structures.
    fn grow_into(&mut self, c: BlockId, size: usize) -> Result<BlockId> {
        let cur = if self.bs(c).mapped {
            self.remove_free(c);
            c
        } else {
            self.map_prefix(c, size)?
        };
        self.absorb_free_next(cur);
        while self.bs(cur).size < size {
            let need = size - self.bs(cur).size;
            let next = self.bs(cur).next.expect("room was checked");
            debug_assert!(
                !self.bs(next).mapped,
                "a maximal free block ends at unmapped space"
            );
            let mapped = match self.map_prefix(next, need) {
                Ok(m) => m,
                Err(e) => {
                    // What was mapped so far stays, free.
                    self.insert_free(cur);
                    return Err(e);
                }
            };
            self.absorb(cur, mapped);
            self.absorb_free_next(cur);
        }
        Ok(cur)
    }

    /// Merges block `n`, the next of `b`, into `b` (both out of every free
    /// structure and set).
    fn absorb(&mut self, b: BlockId, n: BlockId) {
        let ns = self.bs(n);
        let (size, next) = (ns.size, ns.next);
        let s = self.bs(b);
        s.size += size;
        s.next = next;
        if let Some(nn) = next {
            self.bs(nn).prev = Some(b);
        }
        self.recycle(n);
    }

    /// Merges the next block of `b` into it when it is free and mapped.
    fn absorb_free_next(&mut self, b: BlockId) {
        if let Some(n) = self.bs(b).next {
            let ns = self.bs(n);
            if !ns.allocated && ns.mapped {
                self.remove_free(n);
                self.absorb(b, n);
            }
        }
    }

    /// Maps the first pages of unmapped block `u`, enough for `need`
    /// bytes (or all of it); returns `u`, now mapped and free (not filed),
    /// the rest of it a new unmapped block.
    fn map_prefix(&mut self, u: BlockId, need: usize) -> Result<BlockId> {
        let s = self.bs(u);
        debug_assert!(!s.mapped && !s.allocated);
        let (addr, size, slot, kind) = (s.addr, s.size, s.slot, s.kind);
        let idx = s
            .expandable
            .expect("an unmapped block is in an expandable segment");
        let page = self.seg(idx).page;
        let len = need.next_multiple_of(page).min(size);
        let dev = self.dev(slot);
        if let Some(limit) = self.limits[dev] {
            let reserved = self.reserved_on(dev);
            crate::ensure!(
                reserved + len as u64 <= limit,
                OutOfMemory,
                "mapping {len} more bytes would pass the limit of {limit} bytes on {} ({reserved} \
                 reserved)",
                self.devices[slot].device
            );
        }
        let seg = self.seg(idx);
        let offset = addr - seg.res.base();
        seg.res.map(offset, len)?;
        seg.unmapped.remove(&addr);
        if len < size {
            let (next, device) = (self.bs(u).next, self.bs(u).device);
            let r = self.new_block(NewBlock {
                addr: addr + len,
                size: size - len,
                prev: Some(u),
                next,
                device,
                slot,
                kind,
                oversize: false,
                mapped: false,
                expandable: Some(idx),
            });
            if let Some(n) = next {
                self.bs(n).prev = Some(r);
            }
            self.bs(u).next = Some(r);
            self.seg(idx).unmapped.insert(addr + len, r);
        }
        let s = self.bs(u);
        s.size = len;
        s.mapped = true;
        self.stats.on(dev, |t| t.mapped(kind, len));
        Ok(u)
    }

    /// Unmaps every whole page of the free blocks of the expandable
    /// segments (of `device`, or of all), and releases the segments left
    /// with nothing mapped (into `unused`, given back after unlocking).
    pub(in crate::allocator::caching) fn unmap_free_pages(
        &mut self,
        device: Option<Device>,
        unused: &mut Unused,
    ) {
        for i in 0..self.expandable.len() {
            let idx = i as u32;
            let (slot, head) = match &self.expandable[i] {
                Some(seg) => (seg.slot, seg.head),
                None => continue,
            };
            if device.is_some_and(|d| d != self.devices[slot].device) {
                continue;
            }
            let mut free = Vec::new();
            let mut cur = Some(head);
            while let Some(b) = cur {
                let s = self.bs(b);
                if !s.allocated && s.mapped {
                    free.push(b);
                }
                cur = s.next;
            }
            for b in free {
                self.unmap_block(idx, b, unused);
            }
            let head = self.seg(idx).head;
            let hs = self.bs(head);
            if !hs.mapped && hs.next.is_none() {
                let seg = self.expandable[i].take().expect("checked above");
                let kind = seg.kind;
                self.devices[slot].expandable[kind_index(kind)].retain(|&j| j != idx);
                self.recycle(head);
                let dev = self.dev(slot);
                self.stats.on(dev, |t| t.segment_removed(kind, 0, false));
                unused.reservations.push(seg.res);
            }
        }
    }

    /// Unmaps the whole pages inside free block `b` of segment `idx`: the
    /// parts before and after them stay free and mapped, the pages become
    /// an unmapped block merged with unmapped neighbours.
    fn unmap_block(&mut self, idx: u32, b: BlockId, unused: &mut Unused) {
        let s = self.bs(b);
        let (addr, size, slot, kind, device) = (s.addr, s.size, s.slot, s.kind, s.device);
        let (base, page, head) = {
            let seg = self.seg(idx);
            (seg.res.base(), seg.page, seg.head)
        };
        let offset = addr - base;
        let start = offset.next_multiple_of(page);
        let end = (offset + size) / page * page;
        if end <= start || self.seg(idx).res.unmap(start, end - start).is_err() {
            // No whole page, or the driver refused: the block stays.
            return;
        }
        self.remove_free(b);
        let piece = |st: &mut State, addr: usize, size: usize, prev, next| {
            st.new_block(NewBlock {
                addr,
                size,
                prev,
                next,
                device,
                slot,
                kind,
                oversize: false,
                mapped: true,
                expandable: Some(idx),
            })
        };
        let mut filed = Vec::new();
        if start > offset {
            let prev = self.bs(b).prev;
            let h = piece(self, addr, start - offset, prev, Some(b));
            if let Some(p) = prev {
                self.bs(p).next = Some(h);
            }
            self.bs(b).prev = Some(h);
            if b == head {
                self.seg(idx).head = h;
            }
            filed.push(h);
        }
        if offset + size > end {
            let next = self.bs(b).next;
            let t = piece(self, base + end, offset + size - end, Some(b), next);
            if let Some(n) = next {
                self.bs(n).prev = Some(t);
            }
            self.bs(b).next = Some(t);
            filed.push(t);
        }
        let len = end - start;
        let s = self.bs(b);
        s.addr = base + start;
        s.size = len;
        s.mapped = false;
        let dev = self.dev(slot);
        self.stats.on(dev, |t| t.unmapped(kind, len));
        unused.unmapped_bytes += len;
        // Merge with unmapped neighbours: the lower record stays.
        let mut u = b;
        if let Some(p) = self.bs(u).prev {
            if !self.bs(p).mapped {
                self.absorb(p, u);
                u = p;
            }
        }
        if let Some(n) = self.bs(u).next {
            if !self.bs(n).mapped {
                let key = self.bs(n).addr;
                self.seg(idx).unmapped.remove(&key);
                self.absorb(u, n);
            }
        }
        let key = self.bs(u).addr;
        self.seg(idx).unmapped.insert(key, u);
        for f in filed {
            self.insert_free(f);
        }
    }

    /// The expandable segments' unmapped blocks, checked against their
    /// chains (tests): every unmapped block is in its segment's map and no
    /// two are neighbours. Returns the unmapped bytes and the reserved
    /// address space.
    #[cfg(test)]
    pub(in crate::allocator::caching) fn audit_expandable(&mut self) -> (u64, u64) {
        let (mut bytes, mut space) = (0, 0);
        for i in 0..self.expandable.len() {
            let Some(seg) = &self.expandable[i] else {
                continue;
            };
            let (head, base, total) = (seg.head, seg.res.base(), seg.res.size());
            let map: Vec<(usize, BlockId)> = seg.unmapped.iter().map(|(&a, &b)| (a, b)).collect();
            assert!(self.bs(head).prev.is_none(), "the head is first");
            assert_eq!(self.bs(head).addr, base, "the head starts the reservation");
            let mut seen = Vec::new();
            let mut cur = Some(head);
            let mut end = base;
            let mut prev_unmapped = false;
            while let Some(b) = cur {
                let s = self.bs(b);
                assert_eq!(s.addr, end, "blocks tile the reservation");
                assert_eq!(s.expandable, Some(i as u32));
                end += s.size;
                if !s.mapped {
                    assert!(!s.allocated && !prev_unmapped, "two unmapped neighbours");
                    seen.push((s.addr, b));
                    bytes += s.size as u64;
                }
                prev_unmapped = !s.mapped;
                cur = s.next;
            }
            assert_eq!(end, base + total, "blocks cover the reservation");
            assert_eq!(seen, map, "the unmapped map matches the chain");
            space += total as u64;
        }
        (bytes, space)
    }
}
