//! Statistics of a caching allocator: per pool (small, large) and for both
//! together, all devices summed. They are plain integers updated under the
//! allocator's lock, so every value, peaks included, is exact.
//!
//! Internally ([`Tally`]) each quantity keeps one current value and one
//! peak per pool plus the peak of the sum; the overall current value is
//! the sum of the pools'. That is a third fewer updates on the allocation
//! path than keeping a full copy for "all", and decrements touch one word.

use super::sizes::PoolKind;

/// A quantity with its current value and the highest value it reached
/// since the allocator was made or its peaks were last reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// The value now.
    pub current: u64,
    /// The highest value since creation or the last reset_peak.
    pub peak: u64,
}

/// The statistics of one pool, or of both together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Segments obtained from the inner allocator and not yet returned.
    pub segments: Stat,
    /// Bytes of those segments.
    pub reserved_bytes: Stat,
    /// Blocks handed out and not yet freed.
    pub active_blocks: Stat,
    /// Bytes of those blocks (request sizes rounded up to 512 bytes, or the
    /// whole block when it was not split).
    pub active_bytes: Stat,
    /// Free blocks inside segments that are partly in use (the memory that
    /// `empty_cache` cannot return).
    pub inactive_split_blocks: Stat,
    /// Bytes of those blocks.
    pub inactive_split_bytes: Stat,
    /// Bytes the callers asked for, for the active blocks.
    pub requested_bytes: Stat,
    /// Successful allocations.
    pub num_allocs: u64,
    /// Frees.
    pub num_frees: u64,
    /// Allocations served from cached memory, without the inner allocator.
    pub cache_hits: u64,
    /// Segments obtained from the inner allocator (cache misses).
    pub segment_allocs: u64,
    /// Segments returned to the inner allocator.
    pub segment_frees: u64,
    /// Times the inner allocator ran out of memory and the allocation was
    /// retried after returning the unused cached segments.
    pub retries: u64,
    /// Allocations that failed for lack of memory, after the retry.
    pub ooms: u64,
}

/// The statistics of a caching allocator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CachingStats {
    /// Both pools together.
    pub all: PoolStats,
    /// The small pool (requests up to 1 MiB, 2 MiB segments).
    pub small: PoolStats,
    /// The large pool.
    pub large: PoolStats,
}

/// One quantity: per-pool current values and peaks, and the peak of the
/// sum.
#[derive(Debug, Clone, Copy, Default)]
struct Gauge {
    current: [u64; 2],
    peak: [u64; 2],
    peak_all: u64,
}

impl Gauge {
    #[inline]
    fn add(&mut self, pool: usize, n: u64) {
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

    #[inline]
    fn sub(&mut self, pool: usize, n: u64) {
        debug_assert!(self.current[pool] >= n, "statistic underflow");
        self.current[pool] -= n;
    }

    fn reset_peak(&mut self) {
        self.peak = self.current;
        self.peak_all = self.current[0] + self.current[1];
    }

    fn pool(&self, pool: usize) -> Stat {
        Stat {
            current: self.current[pool],
            peak: self.peak[pool],
        }
    }

    fn all(&self) -> Stat {
        Stat {
            current: self.current[0] + self.current[1],
            peak: self.peak_all,
        }
    }
}

/// The running statistics, as kept under the lock.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Tally {
    segments: Gauge,
    reserved_bytes: Gauge,
    active_blocks: Gauge,
    active_bytes: Gauge,
    split_blocks: Gauge,
    split_bytes: Gauge,
    requested_bytes: Gauge,
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
    /// Sets every peak to its current value (front caches flushed).
    pub(super) fn reset_peak(&mut self) {
        debug_assert_eq!(self.parked_requested, [0, 0], "front caches not flushed");
        for g in [
            &mut self.segments,
            &mut self.reserved_bytes,
            &mut self.active_blocks,
            &mut self.active_bytes,
            &mut self.split_blocks,
            &mut self.split_bytes,
            &mut self.requested_bytes,
        ] {
            g.reset_peak();
        }
    }

    /// Blocks handed out now, both pools.
    #[inline]
    pub(super) fn active_blocks(&self) -> u64 {
        self.active_blocks.current[0] + self.active_blocks.current[1]
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
    ) {
        let i = idx(kind);
        self.active_blocks.add(i, 1);
        self.active_bytes.add(i, size as u64);
        self.requested_bytes.add(i, requested as u64);
        self.num_allocs[i] += 1;
        self.cache_hits[i] += u64::from(hit);
    }

    #[inline]
    pub(super) fn block_freed(&mut self, kind: PoolKind, size: usize, requested: usize) {
        let i = idx(kind);
        self.active_blocks.sub(i, 1);
        self.active_bytes.sub(i, size as u64);
        self.requested_bytes.sub(i, requested as u64);
        self.num_frees[i] += 1;
    }

    /// A block was parked in a front cache. Only the free's
    /// count is recorded now: the block stays counted as active (blocks,
    /// bytes, requested bytes) until it is either taken back by a request
    /// of its size ([`Tally::parked_taken`]), when those counts are right
    /// again as they stand, or flushed into the pool
    /// ([`Tally::parked_flushed`]). Every reader of a current value
    /// flushes the front caches first, and every allocation that is not a
    /// front-cache hit does too, so the only updates made while blocks are
    /// parked are frees (which lower current values) and front-cache hits.
    /// A hit restores exactly the active block and bytes it had, so those
    /// peaks cannot be passed; only requested bytes can change, and their
    /// peak is checked against the value with the parked blocks left out.
    #[inline]
    pub(super) fn block_parked(&mut self, kind: PoolKind, requested: usize) {
        let i = idx(kind);
        self.num_frees[i] += 1;
        self.parked_requested[i] += requested as u64;
    }

    /// A parked block freed with `old` requested bytes was handed out again
    /// for a request of `new` bytes.
    #[inline]
    pub(super) fn parked_taken(&mut self, kind: PoolKind, old: usize, new: usize) {
        let i = idx(kind);
        self.num_allocs[i] += 1;
        self.cache_hits[i] += 1;
        self.parked_requested[i] -= old as u64;
        let g = &mut self.requested_bytes;
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
    pub(super) fn parked_flushed(&mut self, kind: PoolKind, size: usize, requested: usize) {
        let i = idx(kind);
        self.parked_requested[i] -= requested as u64;
        self.active_blocks.sub(i, 1);
        self.active_bytes.sub(i, size as u64);
        self.requested_bytes.sub(i, requested as u64);
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

    pub(super) fn segment_added(&mut self, kind: PoolKind, size: usize) {
        let i = idx(kind);
        self.segments.add(i, 1);
        self.reserved_bytes.add(i, size as u64);
        self.segment_allocs[i] += 1;
    }

    pub(super) fn segment_removed(&mut self, kind: PoolKind, size: usize) {
        let i = idx(kind);
        self.segments.sub(i, 1);
        self.reserved_bytes.sub(i, size as u64);
        self.segment_frees[i] += 1;
    }

    pub(super) fn retried(&mut self, kind: PoolKind) {
        self.retries[idx(kind)] += 1;
    }

    pub(super) fn out_of_memory(&mut self, kind: PoolKind) {
        self.ooms[idx(kind)] += 1;
    }
}
