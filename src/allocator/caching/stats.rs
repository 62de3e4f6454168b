//! Statistics of a caching allocator, as c10's memory_stats has them: per
//! pool (small, large) and for both together, for each device and for all
//! devices summed. They are plain integers updated under the allocator's
//! lock, so every value, peaks included, is exact.
//!
//! Internally ([`Tally`]) each quantity keeps one current value, one peak
//! and the cumulative amounts added and taken away per pool, plus the
//! peak of the sum; the overall values are the sums of the pools'. That is
//! a third fewer updates on the allocation path than keeping a full copy
//! for "all". [`Tallies`] keeps one tally for every device and one for
//! all of them (whose peaks are the peaks of the sums).

use super::sizes::PoolKind;
use crate::device::Device;

/// A quantity with its current value, the highest value it reached
/// since the allocator was made or its peaks were last reset, and the
/// amounts added and taken away since it was made or its accumulated
/// counters were last reset (c10's current / peak / allocated / freed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// The value now.
    pub current: u64,
    /// The highest value since creation or the last reset_peak.
    pub peak: u64,
    /// The sum of every increase since creation or the last
    /// reset_accumulated.
    pub allocated: u64,
    /// The sum of every decrease since creation or the last
    /// reset_accumulated.
    pub freed: u64,
}

/// The statistics of one pool, or of both together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Segments obtained from the inner allocator and not yet returned
    /// (an expandable segment counts as one while it exists).
    pub segments: Stat,
    /// Bytes of those segments (of an expandable segment: its mapped
    /// bytes).
    pub reserved_bytes: Stat,
    /// Blocks handed out and not yet freed.
    pub active_blocks: Stat,
    /// Bytes of those blocks (request sizes rounded, or the whole block
    /// when it was not split).
    pub active_bytes: Stat,
    /// Free blocks inside segments that are partly in use (the memory that
    /// `empty_cache` cannot return).
    pub inactive_split_blocks: Stat,
    /// Bytes of those blocks.
    pub inactive_split_bytes: Stat,
    /// Bytes the callers asked for, for the active blocks.
    pub requested_bytes: Stat,
    /// Active blocks of oversize segments (at least max_split_size).
    pub oversize_allocations: Stat,
    /// Oversize segments.
    pub oversize_segments: Stat,
    /// Successful allocations.
    pub num_allocs: u64,
    /// Frees.
    pub num_frees: u64,
    /// Allocations served from cached memory, without the inner allocator.
    pub cache_hits: u64,
    /// Segments obtained from the inner allocator (cache misses), and
    /// page ranges mapped into expandable segments.
    pub segment_allocs: u64,
    /// Segments returned to the inner allocator, and page ranges
    /// unmapped from expandable segments.
    pub segment_frees: u64,
    /// Times the inner allocator ran out of memory and the allocation was
    /// retried after returning the unused cached segments.
    pub retries: u64,
    /// Allocations that failed for lack of memory, after the retry.
    pub ooms: u64,
}

/// The statistics of a caching allocator (of one device, or of all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CachingStats {
    /// Both pools together.
    pub all: PoolStats,
    /// The small pool (requests up to 1 MiB, 2 MiB segments).
    pub small: PoolStats,
    /// The large pool.
    pub large: PoolStats,
}

/// One quantity: per-pool current values, peaks and cumulative amounts,
/// and the peak of the sum.
#[derive(Debug, Clone, Copy, Default)]
struct Gauge {
    current: [u64; 2],
    peak: [u64; 2],
    peak_all: u64,
    allocated: [u64; 2],
    freed: [u64; 2],
}

impl Gauge {
    /// Raises the current value (and the peaks), counting the increase.
    #[inline]
    fn add(&mut self, pool: usize, n: u64) {
        self.allocated[pool] += n;
        self.raise(pool, n);
    }

    /// Raises the current value and the peaks without counting (the
    /// increase was counted before).
    #[inline]
    fn raise(&mut self, pool: usize, n: u64) {
        let now = self.current[pool] + n;
        self.current[pool] = now;
        if now > self.peak[pool] {
            self.peak[pool] = now;
        }
        let all = now + self.current[pool ^ 1];
        if all > self.peak_all {
            self.peak_all = all;
        }
    }

    /// Lowers the current value, counting the decrease.
    #[inline]
    fn sub(&mut self, pool: usize, n: u64) {
        self.freed[pool] += n;
        self.lower(pool, n);
    }

    /// Lowers the current value without counting (the decrease was
    /// counted before: a parked block flushed).
    #[inline]
    fn lower(&mut self, pool: usize, n: u64) {
        debug_assert!(self.current[pool] >= n, "statistic underflow");
        self.current[pool] -= n;
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
        self.peak_all = self.current[0] + self.current[1];
    }

    fn reset_accumulated(&mut self) {
        self.allocated = [0; 2];
        self.freed = [0; 2];
    }

    fn pool(&self, pool: usize) -> Stat {
        Stat {
            current: self.current[pool],
            peak: self.peak[pool],
            allocated: self.allocated[pool],
            freed: self.freed[pool],
        }
    }

    fn all(&self) -> Stat {
        Stat {
            current: self.current[0] + self.current[1],
            peak: self.peak_all,
            allocated: self.allocated[0] + self.allocated[1],
            freed: self.freed[0] + self.freed[1],
        }
    }
}

/// The running statistics of one device (or of all), as kept under the
/// lock.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tally {
    segments: Gauge,
    reserved_bytes: Gauge,
    active_blocks: Gauge,
    active_bytes: Gauge,
    split_blocks: Gauge,
    split_bytes: Gauge,
    requested_bytes: Gauge,
    oversize_allocations: Gauge,
    oversize_segments: Gauge,
    num_allocs: [u64; 2],
    num_frees: [u64; 2],
    cache_hits: [u64; 2],
    segment_allocs: [u64; 2],
    segment_frees: [u64; 2],
    retries: [u64; 2],
    ooms: [u64; 2],
    /// The requested bytes of the blocks parked in the front caches, still
    /// counted in `requested_bytes` (see [`Tally::block_parked`]).
    parked_requested: [u64; 2],
}

#[inline]
fn idx(kind: PoolKind) -> usize {
    match kind {
        PoolKind::Small => 0,
        PoolKind::Large => 1,
    }
}

impl Tally {
    fn gauges(&mut self) -> [&mut Gauge; 9] {
        [
            &mut self.segments,
            &mut self.reserved_bytes,
            &mut self.active_blocks,
            &mut self.active_bytes,
            &mut self.split_blocks,
            &mut self.split_bytes,
            &mut self.requested_bytes,
            &mut self.oversize_allocations,
            &mut self.oversize_segments,
        ]
    }

    /// Sets every peak to its current value (front caches flushed).
    fn reset_peak(&mut self) {
        debug_assert_eq!(self.parked_requested, [0, 0], "front caches not flushed");
        for g in self.gauges() {
            g.reset_peak();
        }
    }

    /// Zeroes every cumulative amount and count (c10's
    /// reset_accumulated_memory_stats).
    fn reset_accumulated(&mut self) {
        for g in self.gauges() {
            g.reset_accumulated();
        }
        for c in [
            &mut self.num_allocs,
            &mut self.num_frees,
            &mut self.cache_hits,
            &mut self.segment_allocs,
            &mut self.segment_frees,
            &mut self.retries,
            &mut self.ooms,
        ] {
            *c = [0; 2];
        }
    }

    /// Blocks handed out now, both pools.
    #[inline]
    pub(super) fn active_blocks(&self) -> u64 {
        self.active_blocks.current[0] + self.active_blocks.current[1]
    }

    /// Bytes reserved now, both pools.
    #[inline]
    pub(super) fn reserved_bytes(&self) -> u64 {
        self.reserved_bytes.current[0] + self.reserved_bytes.current[1]
    }

    /// The public view (with the front caches flushed: parked blocks
    /// still count as active until then).
    pub(super) fn snapshot(&self) -> CachingStats {
        debug_assert_eq!(self.parked_requested, [0, 0], "front caches not flushed");
        let pool = |i: usize| PoolStats {
            segments: self.segments.pool(i),
            reserved_bytes: self.reserved_bytes.pool(i),
            active_blocks: self.active_blocks.pool(i),
            active_bytes: self.active_bytes.pool(i),
            inactive_split_blocks: self.split_blocks.pool(i),
            inactive_split_bytes: self.split_bytes.pool(i),
            requested_bytes: self.requested_bytes.pool(i),
            oversize_allocations: self.oversize_allocations.pool(i),
            oversize_segments: self.oversize_segments.pool(i),
            num_allocs: self.num_allocs[i],
            num_frees: self.num_frees[i],
            cache_hits: self.cache_hits[i],
            segment_allocs: self.segment_allocs[i],
            segment_frees: self.segment_frees[i],
            retries: self.retries[i],
            ooms: self.ooms[i],
        };
        let sum = |a: [u64; 2]| a[0] + a[1];
        CachingStats {
            all: PoolStats {
                segments: self.segments.all(),
                reserved_bytes: self.reserved_bytes.all(),
                active_blocks: self.active_blocks.all(),
                active_bytes: self.active_bytes.all(),
                inactive_split_blocks: self.split_blocks.all(),
                inactive_split_bytes: self.split_bytes.all(),
                requested_bytes: self.requested_bytes.all(),
                oversize_allocations: self.oversize_allocations.all(),
                oversize_segments: self.oversize_segments.all(),
                num_allocs: sum(self.num_allocs),
                num_frees: sum(self.num_frees),
                cache_hits: sum(self.cache_hits),
                segment_allocs: sum(self.segment_allocs),
                segment_frees: sum(self.segment_frees),
                retries: sum(self.retries),
                ooms: sum(self.ooms),
            },
            small: pool(0),
            large: pool(1),
        }
    }

    #[inline]
    pub(super) fn block_allocated(
        &mut self,
        kind: PoolKind,
        size: usize,
        requested: usize,
        hit: bool,
        oversize: bool,
    ) {
        let i = idx(kind);
        self.active_blocks.add(i, 1);
        self.active_bytes.add(i, size as u64);
        self.requested_bytes.add(i, requested as u64);
        if oversize {
            self.oversize_allocations.add(i, 1);
        }
        self.num_allocs[i] += 1;
        self.cache_hits[i] += u64::from(hit);
    }

    #[inline]
    pub(super) fn block_freed(
        &mut self,
        kind: PoolKind,
        size: usize,
        requested: usize,
        oversize: bool,
    ) {
        let i = idx(kind);
        self.active_blocks.sub(i, 1);
        self.active_bytes.sub(i, size as u64);
        self.requested_bytes.sub(i, requested as u64);
        if oversize {
            self.oversize_allocations.sub(i, 1);
        }
        self.num_frees[i] += 1;
    }

    /// A block was parked in a front cache. Only the free's count and
    /// cumulative amounts are recorded now: the block stays counted as
    /// active (blocks, bytes, requested bytes) until it is either taken
    /// back by a request of its size ([`Tally::parked_taken`]), when those
    /// counts are right again as they stand, or flushed into the pool
    /// ([`Tally::parked_flushed`]). Every reader of a current value
    /// flushes the front caches first, and every allocation that is not a
    /// front-cache hit does too, so the only updates made while blocks are
    /// parked are frees (which lower current values) and front-cache hits.
    /// A hit restores exactly the active block and bytes it had, so those
    /// peaks cannot be passed; only requested bytes can change, and their
    /// peak is checked against the value with the parked blocks left out.
    #[inline]
    pub(super) fn block_parked(
        &mut self,
        kind: PoolKind,
        size: usize,
        requested: usize,
        oversize: bool,
    ) {
        let i = idx(kind);
        self.num_frees[i] += 1;
        self.parked_requested[i] += requested as u64;
        self.active_blocks.freed[i] += 1;
        self.active_bytes.freed[i] += size as u64;
        self.requested_bytes.freed[i] += requested as u64;
        if oversize {
            self.oversize_allocations.freed[i] += 1;
        }
    }

    /// A parked block of `size` bytes freed with `old` requested bytes was
    /// handed out again for a request of `new` bytes.
    #[inline]
    pub(super) fn parked_taken(
        &mut self,
        kind: PoolKind,
        size: usize,
        old: usize,
        new: usize,
        oversize: bool,
    ) {
        let i = idx(kind);
        self.num_allocs[i] += 1;
        self.cache_hits[i] += 1;
        self.active_blocks.allocated[i] += 1;
        self.active_bytes.allocated[i] += size as u64;
        if oversize {
            self.oversize_allocations.allocated[i] += 1;
        }
        self.parked_requested[i] -= old as u64;
        let g = &mut self.requested_bytes;
        g.allocated[i] += new as u64;
        g.current[i] = g.current[i] - old as u64 + new as u64;
        // The real values leave out the requests of blocks still parked.
        let now = g.current[i] - self.parked_requested[i];
        if now > g.peak[i] {
            g.peak[i] = now;
        }
        let other = 1 - i;
        let all = now + g.current[other] - self.parked_requested[other];
        if all > g.peak_all {
            g.peak_all = all;
        }
    }

    /// A parked block of `size` bytes, freed with `requested` bytes, went
    /// back into the pool: its free is applied to the current values.
    #[inline]
    pub(super) fn parked_flushed(
        &mut self,
        kind: PoolKind,
        size: usize,
        requested: usize,
        oversize: bool,
    ) {
        let i = idx(kind);
        self.parked_requested[i] -= requested as u64;
        self.active_blocks.lower(i, 1);
        self.active_bytes.lower(i, size as u64);
        self.requested_bytes.lower(i, requested as u64);
        if oversize {
            self.oversize_allocations.lower(i, 1);
        }
    }

    /// `trips` round trips through a thread front (thread_front.rs) of
    /// blocks of `bytes` bytes in all, requested for `requested`: each an
    /// allocation served from the cache and a free, with no current value
    /// changed.
    pub(super) fn round_trips(&mut self, kind: PoolKind, trips: u64, bytes: u64, requested: u64) {
        let i = idx(kind);
        self.num_allocs[i] += trips;
        self.num_frees[i] += trips;
        self.cache_hits[i] += trips;
        for (g, n) in [
            (&mut self.active_blocks, trips),
            (&mut self.active_bytes, bytes),
            (&mut self.requested_bytes, requested),
        ] {
            g.allocated[i] += n;
            g.freed[i] += n;
        }
    }

    #[inline]
    pub(super) fn split_free_added(&mut self, kind: PoolKind, size: usize) {
        let i = idx(kind);
        self.split_blocks.add(i, 1);
        self.split_bytes.add(i, size as u64);
    }

    #[inline]
    pub(super) fn split_free_removed(&mut self, kind: PoolKind, size: usize) {
        let i = idx(kind);
        self.split_blocks.sub(i, 1);
        self.split_bytes.sub(i, size as u64);
    }

    /// A segment of `size` bytes (0: an expandable segment's reservation,
    /// whose bytes count as they are mapped) joined the pool.
    pub(super) fn segment_added(&mut self, kind: PoolKind, size: usize, oversize: bool) {
        let i = idx(kind);
        self.segments.add(i, 1);
        if oversize {
            self.oversize_segments.add(i, 1);
        }
        if size > 0 {
            self.reserved_bytes.add(i, size as u64);
            self.segment_allocs[i] += 1;
        }
    }

    pub(super) fn segment_removed(&mut self, kind: PoolKind, size: usize, oversize: bool) {
        let i = idx(kind);
        self.segments.sub(i, 1);
        if oversize {
            self.oversize_segments.sub(i, 1);
        }
        if size > 0 {
            self.reserved_bytes.sub(i, size as u64);
            self.segment_frees[i] += 1;
        }
    }

    /// `len` bytes were mapped into an expandable segment.
    pub(super) fn mapped(&mut self, kind: PoolKind, len: usize) {
        let i = idx(kind);
        self.reserved_bytes.add(i, len as u64);
        self.segment_allocs[i] += 1;
    }

    /// `len` bytes were unmapped from an expandable segment.
    pub(super) fn unmapped(&mut self, kind: PoolKind, len: usize) {
        let i = idx(kind);
        self.reserved_bytes.sub(i, len as u64);
        self.segment_frees[i] += 1;
    }

    pub(super) fn retried(&mut self, kind: PoolKind) {
        self.retries[idx(kind)] += 1;
    }

    pub(super) fn out_of_memory(&mut self, kind: PoolKind) {
        self.ooms[idx(kind)] += 1;
    }
}

/// The tallies of every device the allocator has served, and of all of
/// them. Every update goes to both the device's and the overall one.
#[derive(Debug, Default)]
pub(super) struct Tallies {
    all: Tally,
    devices: Vec<(Device, Tally)>,
}

impl Tallies {
    /// Applies an update to device `dev`'s tally and to the overall one.
    #[inline(always)]
    pub(super) fn on(&mut self, dev: usize, f: impl Fn(&mut Tally)) {
        f(&mut self.all);
        f(&mut self.devices[dev].1);
    }

    /// The number of `device`'s tally, made on first use.
    pub(super) fn device_number(&mut self, device: Device) -> usize {
        match self.devices.iter().position(|d| d.0 == device) {
            Some(i) => i,
            None => {
                self.devices.push((device, Tally::default()));
                self.devices.len() - 1
            }
        }
    }

    /// The overall tally.
    #[inline]
    pub(super) fn all(&self) -> &Tally {
        &self.all
    }

    /// The tally of device number `dev`.
    #[inline]
    pub(super) fn device(&self, dev: usize) -> &Tally {
        &self.devices[dev].1
    }

    /// `device`'s statistics (all zero for a device never served).
    pub(super) fn snapshot_of(&self, device: Device) -> CachingStats {
        self.devices
            .iter()
            .find(|d| d.0 == device)
            .map_or_else(CachingStats::default, |d| d.1.snapshot())
    }

    /// The devices served so far, in order of first use.
    pub(super) fn devices(&self) -> Vec<Device> {
        self.devices.iter().map(|d| d.0).collect()
    }

    pub(super) fn reset_peak(&mut self) {
        self.all.reset_peak();
        for d in &mut self.devices {
            d.1.reset_peak();
        }
    }

    pub(super) fn reset_accumulated(&mut self) {
        self.all.reset_accumulated();
        for d in &mut self.devices {
            d.1.reset_accumulated();
        }
    }
}
