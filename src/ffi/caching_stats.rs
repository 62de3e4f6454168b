//! The caching allocator's statistics as c10's memory_stats has them, at
//! the ABI: per device or all devices summed, each quantity with its
//! current value, peak, and cumulative amounts allocated and freed; and
//! the reset of the cumulative amounts.

use super::allocator::TsrAllocator;
use super::caching::with_caching;
use super::call::{check_not_null, guard, out_struct_size, write_sized};
use super::types::*;
use crate::allocator::caching::{CachingStats, PoolStats, Stat};

/// One quantity as c10 counts it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsrMemoryStat {
    /// The value now.
    pub current: u64,
    /// The highest value since the allocator was made or its peaks were
    /// last reset (tsr_caching_allocator_reset_peak).
    pub peak: u64,
    /// The sum of every increase since the allocator was made or its
    /// accumulated statistics were last reset
    /// (tsr_caching_allocator_reset_accumulated).
    pub allocated: u64,
    /// The sum of every decrease, over the same time.
    pub freed: u64,
}

/// The statistics of one pool (small, large) or of both, as c10's
/// memory_stats: `allocated` / `freed` of each quantity and the counts
/// are the accumulated part.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsrCachingMemoryPool {
    /// Segments obtained from the inner allocator and not returned (an
    /// expandable segment counts once while it exists).
    pub segments: TsrMemoryStat,
    /// Bytes of those segments (of expandable segments: bytes mapped).
    pub reserved_bytes: TsrMemoryStat,
    /// Blocks handed out and not yet freed.
    pub active_blocks: TsrMemoryStat,
    /// Bytes of those blocks (rounded sizes).
    pub active_bytes: TsrMemoryStat,
    /// Free blocks in segments partly in use.
    pub inactive_split_blocks: TsrMemoryStat,
    /// Bytes of those blocks.
    pub inactive_split_bytes: TsrMemoryStat,
    /// Bytes the callers asked for, for the active blocks.
    pub requested_bytes: TsrMemoryStat,
    /// Active blocks of oversize segments (max_split_size or more).
    pub oversize_allocations: TsrMemoryStat,
    /// Oversize segments.
    pub oversize_segments: TsrMemoryStat,
    /// Successful allocations.
    pub num_allocs: u64,
    /// Frees.
    pub num_frees: u64,
    /// Allocations served from cached memory.
    pub cache_hits: u64,
    /// Segments obtained from the inner allocator, and page ranges mapped
    /// into expandable segments (c10's num_device_alloc).
    pub segment_allocs: u64,
    /// Segments returned, and page ranges unmapped (c10's
    /// num_device_free).
    pub segment_frees: u64,
    /// Retries after returning unused memory (c10's num_alloc_retries).
    pub retries: u64,
    /// Allocations that failed for lack of memory (c10's num_ooms).
    pub ooms: u64,
}

/// A caching allocator's statistics on one device, or on all. The caller
/// sets `struct_size` to sizeof(TsrCachingMemoryStats) as it was compiled;
/// tessera writes at most that many bytes and sets `struct_size` to the
/// number written. Fields are only ever added at the end.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsrCachingMemoryStats {
    /// In: sizeof(TsrCachingMemoryStats) as compiled by the host. Out: the
    /// bytes written.
    pub struct_size: u32,
    /// Both pools together.
    pub all: TsrCachingMemoryPool,
    /// The small pool (requests up to 1 MiB).
    pub small: TsrCachingMemoryPool,
    /// The large pool.
    pub large: TsrCachingMemoryPool,
    /// The oversize threshold (c10's max_split_size; 0: none).
    pub max_split_size: u64,
    /// The device's limit on reserved bytes (0: none, and for all devices).
    pub memory_limit: u64,
}

fn stat(s: Stat) -> TsrMemoryStat {
    TsrMemoryStat {
        current: s.current,
        peak: s.peak,
        allocated: s.allocated,
        freed: s.freed,
    }
}

fn pool(p: &PoolStats) -> TsrCachingMemoryPool {
    TsrCachingMemoryPool {
        segments: stat(p.segments),
        reserved_bytes: stat(p.reserved_bytes),
        active_blocks: stat(p.active_blocks),
        active_bytes: stat(p.active_bytes),
        inactive_split_blocks: stat(p.inactive_split_blocks),
        inactive_split_bytes: stat(p.inactive_split_bytes),
        requested_bytes: stat(p.requested_bytes),
        oversize_allocations: stat(p.oversize_allocations),
        oversize_segments: stat(p.oversize_segments),
        num_allocs: p.num_allocs,
        num_frees: p.num_frees,
        cache_hits: p.cache_hits,
        segment_allocs: p.segment_allocs,
        segment_frees: p.segment_frees,
        retries: p.retries,
        ooms: p.ooms,
    }
}

/// Writes a caching allocator's statistics on `*device` (NULL: all devices
/// summed, whose peaks are the peaks of the sums) to `*out`, whose
/// `struct_size` the caller sets first; on return `struct_size` holds the
/// number of bytes written. As c10's memory_stats(device): a device the
/// allocator never served reads all zero. Device index -1 is the current
/// device (CUDA).
///
/// Errors: TSR_ERR_NULL_POINTER (allocator or out); TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator; an invalid device;
/// out->struct_size below 4 or above 65536); TSR_ERR_DEVICE. `*out` is
/// untouched on failure.
///
/// # Safety
/// `allocator` NULL or a live handle; `device` NULL or readable; `out`
/// NULL or writable for out->struct_size bytes.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_memory_stats(
    allocator: *const TsrAllocator,
    device: *const TsrDevice,
    out: *mut TsrCachingMemoryStats,
) -> TsrStatus {
    guard("tsr_caching_allocator_memory_stats", || {
        check_not_null(out, "out")?;
        // SAFETY: out is non-NULL; its first u32 is the struct_size the
        // caller set (the contract).
        let n = unsafe { out_struct_size(out, "TsrCachingMemoryStats")? };
        let device = if device.is_null() {
            None
        } else {
            // SAFETY: non-NULL and readable (the contract).
            let d = unsafe { device.read_unaligned() };
            Some(d.to_core().map_err(|e| e.context("device"))?)
        };
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        let (s, max_split, limit): (CachingStats, usize, Option<u64>) = unsafe {
            with_caching(allocator, |c| match device {
                None => Ok((c.stats()?, c.max_split_size(), None)),
                Some(d) => Ok((c.device_stats(d)?, c.max_split_size(), c.memory_limit(d)?)),
            })?
        };
        let value = TsrCachingMemoryStats {
            struct_size: n as u32,
            all: pool(&s.all),
            small: pool(&s.small),
            large: pool(&s.large),
            max_split_size: max_split as u64,
            memory_limit: limit.unwrap_or(0),
        };
        // SAFETY: out is writable for its struct_size >= n bytes.
        unsafe { write_sized(out, &value, n) };
        Ok(())
    })
}

/// Zeroes a caching allocator's accumulated statistics on every device:
/// each quantity's `allocated` and `freed`, and the counts (allocations,
/// frees, hits, segment allocations and frees, retries, out-of-memory
/// failures), as c10's reset_accumulated_memory_stats. Current values and
/// peaks stay.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator).
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_reset_accumulated(
    allocator: *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_caching_allocator_reset_accumulated", || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        unsafe { with_caching(allocator, |c| c.reset_accumulated()) }
    })
}
