//! The caching allocator at the ABI: creation over any allocator, its
//! statistics, empty_cache and reset_peak.

use super::allocator::{allocator_handle, allocator_ref, TsrAllocator};
use super::call::{check_not_null, guard, guard_value, read_sized, write_out};
use super::types::*;
use crate::allocator::caching::{self, CachingAllocator, CachingOptions, PoolStats, Stat};
use crate::allocator::Allocator;
use crate::error::Result;
use std::ffi::{c_char, CStr};

/// Options of tsr_caching_allocator_new. Zero it, set `struct_size` to
/// sizeof(TsrCachingOptions), then the fields wanted: zero means "the
/// default" for every field. Fields are only ever added at the end, so a
/// host built against an older header keeps working.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TsrCachingOptions {
    /// sizeof(TsrCachingOptions) as compiled by the host.
    pub struct_size: u32,
    /// Large requests of this many bytes or more (after rounding up to
    /// 512) are oversize: each gets a segment of its own that is never
    /// split and is handed out whole; a cached oversize block is reused
    /// only for a request less than 20 MiB smaller. 0: no limit. Otherwise
    /// it must be more than 1 MiB (1048576).
    pub max_split_size: u64,
    /// The new allocator's name (copied); NULL: "caching(<inner name>)".
    pub name: *const c_char,
    /// Non-zero: `default_device` is the device tsr_allocator_allocate
    /// uses; zero: the inner allocator's default device.
    pub use_default_device: u8,
    /// See `use_default_device`.
    pub default_device: TsrDevice,
}

/// One statistic: its value now and the highest value since the allocator
/// was made or its peaks were last reset.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsrCachingStat {
    /// The value now.
    pub current: u64,
    /// The highest value since creation or the last reset_peak.
    pub peak: u64,
}

/// The statistics of one pool of a caching allocator, or of both pools
/// together (all devices summed).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsrCachingPoolStats {
    /// Segments obtained from the inner allocator and not returned.
    pub segments: TsrCachingStat,
    /// Bytes of those segments.
    pub reserved_bytes: TsrCachingStat,
    /// Blocks handed out and not yet freed.
    pub active_blocks: TsrCachingStat,
    /// Bytes of those blocks (requests rounded up to 512 bytes, or the
    /// whole block when it was not split).
    pub active_bytes: TsrCachingStat,
    /// Free blocks in segments that are partly in use.
    pub inactive_split_blocks: TsrCachingStat,
    /// Bytes of those blocks (cached memory empty_cache cannot return).
    pub inactive_split_bytes: TsrCachingStat,
    /// Bytes the callers asked for, for the active blocks.
    pub requested_bytes: TsrCachingStat,
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
    /// retried after returning every unused cached segment.
    pub retries: u64,
    /// Allocations that failed for lack of memory after that retry.
    pub ooms: u64,
}

/// The statistics of a caching allocator. The caller sets `struct_size`
/// to sizeof(TsrCachingStats) as it was compiled; tessera writes at most
/// that many bytes, and sets `struct_size` to the number it wrote (smaller
/// when the library is older than the host's header, in which case the
/// fields past it are left untouched). Fields are only ever added at the
/// end of this struct, never inside the pool structs.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TsrCachingStats {
    /// In: sizeof(TsrCachingStats) as compiled by the host. Out: the bytes
    /// written.
    pub struct_size: u32,
    /// Both pools together.
    pub all: TsrCachingPoolStats,
    /// The small pool: requests up to 1 MiB, carved from 2 MiB segments.
    pub small: TsrCachingPoolStats,
    /// The large pool: bigger requests, 20 MiB segments below 10 MiB,
    /// else a segment of the size rounded up to 2 MiB.
    pub large: TsrCachingPoolStats,
}

fn stat(s: Stat) -> TsrCachingStat {
    TsrCachingStat {
        current: s.current,
        peak: s.peak,
    }
}

fn pool_stats(p: &PoolStats) -> TsrCachingPoolStats {
    TsrCachingPoolStats {
        segments: stat(p.segments),
        reserved_bytes: stat(p.reserved_bytes),
        active_blocks: stat(p.active_blocks),
        active_bytes: stat(p.active_bytes),
        inactive_split_blocks: stat(p.inactive_split_blocks),
        inactive_split_bytes: stat(p.inactive_split_bytes),
        requested_bytes: stat(p.requested_bytes),
        num_allocs: p.num_allocs,
        num_frees: p.num_frees,
        cache_hits: p.cache_hits,
        segment_allocs: p.segment_allocs,
        segment_frees: p.segment_frees,
        retries: p.retries,
        ooms: p.ooms,
    }
}

const OPTIONS_MIN_SIZE: usize =
    std::mem::offset_of!(TsrCachingOptions, max_split_size) + std::mem::size_of::<u64>();

/// Reads the options (NULL: defaults).
///
/// # Safety
/// `p` NULL or readable for its struct_size; its name NULL or a
/// NUL-terminated string.
unsafe fn options_arg(p: *const TsrCachingOptions) -> Result<CachingOptions> {
    if p.is_null() {
        return Ok(CachingOptions::default());
    }
    // SAFETY: p is non-NULL (checked above) and, by this function's contract,
    // readable for its struct_size.
    let o = unsafe { read_sized(p, OPTIONS_MIN_SIZE, "TsrCachingOptions")? };
    let max_split_size = usize::try_from(o.max_split_size).map_err(|_| {
        crate::err!(
            InvalidArgument,
            "options->max_split_size {} does not fit this platform's size_t",
            o.max_split_size
        )
    })?;
    let name = if o.name.is_null() {
        None
    } else {
        // SAFETY: the caller passes a NUL-terminated name.
        Some(
            unsafe { CStr::from_ptr(o.name) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    let default_device = if o.use_default_device != 0 {
        Some(
            o.default_device
                .to_core()
                .map_err(|e| e.context("options->default_device"))?,
        )
    } else {
        None
    };
    Ok(CachingOptions {
        max_split_size,
        name,
        default_device,
        ..CachingOptions::default()
    })
}

/// Runs `f` on the caching backend behind a handle.
///
/// # Safety
/// `a` NULL or a live allocator handle.
unsafe fn with_caching<T>(
    a: *const TsrAllocator,
    f: impl FnOnce(&CachingAllocator) -> Result<T>,
) -> Result<T> {
    // SAFETY: `a` is NULL or a live TsrAllocator handle (the header's
    // contract, ffi/handle.rs); allocator_ref checks NULL and liveness.
    let alloc = unsafe { allocator_ref(a, "allocator")? };
    match caching::of(&alloc) {
        Some(c) => f(c),
        None => crate::bail!(
            InvalidArgument,
            "allocator '{}' is not a caching allocator: expected one made by \
             tsr_caching_allocator_new",
            alloc.name()
        ),
    }
}

/// Creates a caching allocator over `inner` (any allocator: the built-in
/// CPU one, a plugin, the CUDA one) and writes a new reference to `*out`.
/// The new allocator keeps a reference to `inner`; `inner` itself is only
/// borrowed by the call. Requests are rounded up to 512 bytes and served
/// from segments the caching allocator obtains from `inner` (2 MiB for
/// requests up to 1 MiB; 20 MiB below 10 MiB; else the size rounded up to
/// 2 MiB), split and merged as blocks come and go; freed memory stays
/// cached until tsr_caching_allocator_empty_cache, or until `inner` runs
/// out of memory (then every unused segment of the device goes back and
/// the allocation is retried once). Pools are kept per device. The result
/// is an ordinary allocator: tsr_allocator_allocate, tsr_set_allocator,
/// storages and tsr_allocator_stats all work with it, and copies go
/// through `inner`'s copy function. It outlives its last handle while any
/// of its blocks is in use. Raw allocation (tsr_allocator_raw_allocate) is
/// not supported.
///
/// Errors: TSR_ERR_NULL_POINTER (inner or out NULL); TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (options->struct_size too small or too large,
/// max_split_size neither 0 nor above 1 MiB, an invalid default device).
///
/// # Safety
/// `inner` NULL or a live handle; `options` NULL or readable for its
/// struct_size, with `name` NULL or a NUL-terminated string; `out` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_new(
    inner: *mut TsrAllocator,
    options: *const TsrCachingOptions,
    out: *mut *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_caching_allocator_new", || {
        check_not_null(out, "out")?;
        // SAFETY: `inner` is NULL or a live TsrAllocator handle (the header's
        // contract, ffi/handle.rs); allocator_ref checks NULL and liveness.
        let inner = unsafe { allocator_ref(inner, "inner")? };
        // SAFETY: the header requires options NULL or readable for its
        // struct_size, with a NULL or NUL-terminated name; options_arg checks
        // NULL.
        let options = unsafe { options_arg(options)? };
        let a = caching::new(inner, options)?;
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, allocator_handle(a)) };
        Ok(())
    })
}

/// Returns every fully unused cached segment of a caching allocator (all
/// devices) to its inner allocator. Segments partly in use stay.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator).
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_empty_cache(
    allocator: *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_caching_allocator_empty_cache", || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        unsafe { with_caching(allocator, |c| c.empty_cache()) }
    })
}

/// Writes a caching allocator's statistics to `*out`, whose `struct_size`
/// the caller sets first (see TsrCachingStats); on return `struct_size`
/// holds the number of bytes written. The counters of every allocator
/// (tsr_allocator_stats) exist too: for a caching allocator they count
/// requested bytes, like `requested_bytes` here.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator; out->struct_size
/// below 4 or above 65536). `*out` is untouched on failure.
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable for
/// out->struct_size bytes.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_stats(
    allocator: *const TsrAllocator,
    out: *mut TsrCachingStats,
) -> TsrStatus {
    guard("tsr_caching_allocator_stats", || {
        check_not_null(out, "out")?;
        // SAFETY: out is non-NULL and, per the contract, starts with the
        // u32 struct_size the caller set.
        let size = unsafe { (out as *const u32).read_unaligned() } as usize;
        crate::ensure!(
            (4..=65536).contains(&size),
            InvalidArgument,
            "out->struct_size is {size}: set it to sizeof(TsrCachingStats) before the call \
             ({} in this version)",
            std::mem::size_of::<TsrCachingStats>()
        );
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        let s = unsafe { with_caching(allocator, |c| c.stats())? };
        let n = size.min(std::mem::size_of::<TsrCachingStats>());
        let value = TsrCachingStats {
            struct_size: n as u32,
            all: pool_stats(&s.all),
            small: pool_stats(&s.small),
            large: pool_stats(&s.large),
        };
        // SAFETY: out is writable for struct_size >= n bytes; value is
        // readable for size_of >= n bytes; they do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &value as *const TsrCachingStats as *const u8,
                out as *mut u8,
                n,
            )
        };
        Ok(())
    })
}

/// Sets every peak of a caching allocator to its current value: those of
/// tsr_caching_allocator_stats and the `peak_bytes` of
/// tsr_allocator_stats.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator).
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_reset_peak(
    allocator: *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_caching_allocator_reset_peak", || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        unsafe { with_caching(allocator, |c| c.reset_peak()) }
    })
}

/// Writes a new reference to the allocator a caching allocator caches for
/// to `*out`.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator).
///
/// # Safety
/// `allocator` NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_inner(
    allocator: *const TsrAllocator,
    out: *mut *mut TsrAllocator,
) -> TsrStatus {
    guard("tsr_caching_allocator_inner", || {
        check_not_null(out, "out")?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        let inner: Allocator = unsafe { with_caching(allocator, |c| Ok(c.inner().clone()))? };
        // SAFETY: out checked non-NULL.
        unsafe { write_out(out, allocator_handle(inner)) };
        Ok(())
    })
}

/// Whether `allocator` is a caching allocator; false for NULL or a
/// released handle.
///
/// # Safety
/// `allocator` NULL or a handle whose memory is alive.
#[no_mangle]
pub unsafe extern "C" fn tsr_allocator_is_caching(allocator: *const TsrAllocator) -> bool {
    guard_value("tsr_allocator_is_caching", false, || {
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        unsafe { with_caching(allocator, |_| Ok(())) }.is_ok()
    })
}
