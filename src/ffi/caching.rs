//! The caching allocator at the ABI: creation over any allocator, its
//! statistics, empty_cache and reset_peak.

use super::allocator::{allocator_handle, allocator_ref, TsrAllocator};
use super::call::{
    check_not_null, guard, guard_value, out_struct_size, read_sized, write_out, write_sized,
};
use super::types::*;
use crate::allocator::caching::{
    self, CachingAllocator, CachingOptions, PoolStats, RoundupDivisions, Stat,
};
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
    /// Non-zero: c10's expandable_segments. Each device, stream and pool
    /// (small, large) gets one segment over reserved address space that
    /// grows by mapping pages (2 MiB) instead of a new segment per miss;
    /// tsr_caching_allocator_empty_cache unmaps the free pages. `inner`
    /// must be able to reserve address space (the built-in CPU
    /// allocator, the CUDA device allocator). Zero:
    /// TESSERA_ALLOC_CONF's expandable_segments, which applies only where
    /// `inner` can.
    pub expandable_segments: u8,
    /// c10's roundup_power2_divisions: a request is rounded up to the next
    /// of this many equal steps between two powers of two (a power of
    /// two; 1 or 0: to 512 bytes only, or TESSERA_ALLOC_CONF's).
    pub roundup_power2_divisions: u32,
    /// c10's garbage_collection_threshold, a fraction in (0, 1): with a
    /// memory limit or fraction, a request that needs a new segment while
    /// the device's reserved bytes pass this fraction of the limit first
    /// returns the cached whole segments not used for longest. 0: off
    /// (or TESSERA_ALLOC_CONF's).
    pub garbage_collection_threshold: f64,
    /// c10's max_non_split_rounding_mb, in bytes: an oversize request
    /// reuses a cached oversize block less than this much larger. 0: 20 MiB
    /// (or TESSERA_ALLOC_CONF's); else more than 20 MiB.
    pub max_non_split_rounding: u64,
    /// The most bytes each device may reserve (0: no byte limit). Past it,
    /// a request first returns the device's unused segments, then fails
    /// with TSR_ERR_OUT_OF_MEMORY.
    pub memory_limit: u64,
    /// c10's per_process_memory_fraction: each device may reserve at most
    /// this fraction of its memory, in (0, 1] (0: none; the lower of it and
    /// `memory_limit` applies). `inner` must report its device's memory
    /// (the built-in CPU allocator, the CUDA device allocator).
    pub memory_fraction: f64,
    /// c10's list form of roundup_power2_divisions, e.g.
    /// "[256:1,512:2,>:8]" (sizes in MiB; copied); NULL: none. When set,
    /// it replaces `roundup_power2_divisions`.
    pub roundup_power2_divisions_list: *const c_char,
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

/// The end of c10's three settings: a host's struct_size below it is
/// an older header's (whose struct ended at `default_device`, its padding
/// included), and those fields are not read.
const OPTIONS_C10_END: usize =
    std::mem::offset_of!(TsrCachingOptions, garbage_collection_threshold) + 8;
/// The end of the limits and the rounding list.
const OPTIONS_LIMITS_END: usize = std::mem::size_of::<TsrCachingOptions>();

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
    let mut o = unsafe { read_sized(p, OPTIONS_MIN_SIZE, "TsrCachingOptions")? };
    // Fields an older host's struct does not reach are read as zero, also
    // when its size covers them only partly (its trailing padding).
    let size = o.struct_size as usize;
    if size < OPTIONS_C10_END {
        o.expandable_segments = 0;
        o.roundup_power2_divisions = 0;
        o.garbage_collection_threshold = 0.0;
    }
    if size < OPTIONS_LIMITS_END {
        o.max_non_split_rounding = 0;
        o.memory_limit = 0;
        o.memory_fraction = 0.0;
        o.roundup_power2_divisions_list = std::ptr::null();
    }
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
    let roundup_power2_divisions = if !o.roundup_power2_divisions_list.is_null() {
        // SAFETY: the caller passes a NUL-terminated string.
        let text = unsafe { CStr::from_ptr(o.roundup_power2_divisions_list) }.to_string_lossy();
        Some(RoundupDivisions::parse(&text).map_err(|e| {
            crate::err!(
                InvalidArgument,
                "options->roundup_power2_divisions_list: {e}"
            )
        })?)
    } else if o.roundup_power2_divisions != 0 {
        Some(
            RoundupDivisions::uniform(o.roundup_power2_divisions)
                .map_err(|e| crate::err!(InvalidArgument, "options->{e}"))?,
        )
    } else {
        None
    };
    let max_non_split_rounding = usize::try_from(o.max_non_split_rounding).map_err(|_| {
        crate::err!(
            InvalidArgument,
            "options->max_non_split_rounding {} does not fit this platform's size_t",
            o.max_non_split_rounding
        )
    })?;
    Ok(CachingOptions {
        max_split_size,
        name,
        default_device,
        expandable_segments: o.expandable_segments != 0,
        roundup_power2_divisions,
        garbage_collection_threshold: o.garbage_collection_threshold,
        max_non_split_rounding,
        memory_limit: o.memory_limit,
        memory_fraction: o.memory_fraction,
    })
}

/// Runs `f` on the caching backend behind a handle.
///
/// # Safety
/// `a` NULL or a live allocator handle.
pub(super) unsafe fn with_caching<T>(
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
/// The settings of c10's CUDA caching allocator are options too
/// (TsrCachingOptions; their semantics in docs/SEMANTICS.md): expandable
/// segments, roundup_power2_divisions, garbage_collection_threshold,
/// max_non_split_rounding, and a memory limit or fraction per device.
///
/// Errors: TSR_ERR_NULL_POINTER (inner or out NULL); TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (options->struct_size too small or too large,
/// max_split_size neither 0 nor above 1 MiB, an invalid default device,
/// roundup_power2_divisions not a power of two or a bad list,
/// garbage_collection_threshold outside (0, 1), max_non_split_rounding
/// neither 0 nor above 20 MiB, memory_fraction outside [0, 1],
/// expandable_segments or memory_fraction over an allocator that cannot
/// offer them).
///
/// # Safety
/// `inner` NULL or a live handle; `options` NULL or readable for its
/// struct_size, with `name` and `roundup_power2_divisions_list` NULL or
/// NUL-terminated strings; `out` NULL or writable.
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
        // SAFETY: out is non-NULL; its first u32 is the struct_size the
        // caller set (the contract).
        let n = unsafe { out_struct_size(out, "TsrCachingStats")? };
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        let s = unsafe { with_caching(allocator, |c| c.stats())? };
        let value = TsrCachingStats {
            struct_size: n as u32,
            all: pool_stats(&s.all),
            small: pool_stats(&s.small),
            large: pool_stats(&s.large),
        };
        // SAFETY: out is writable for its struct_size >= n bytes.
        unsafe { write_sized(out, &value, n) };
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

/// Limits the bytes `device` may reserve in a caching allocator to
/// `fraction` of the device's memory, as c10's
/// set_per_process_memory_fraction (a byte limit of its options still
/// applies where lower); 0 removes the fraction. Device index -1 is the
/// current device (CUDA). Memory already reserved stays; a later request
/// that would pass the limit first returns the device's unused segments,
/// then fails with TSR_ERR_OUT_OF_MEMORY.
///
/// Errors: TSR_ERR_NULL_POINTER; TSR_ERR_DEAD_OBJECT;
/// TSR_ERR_INVALID_ARGUMENT (not a caching allocator; `fraction` outside
/// [0, 1] or not a number; an invalid device); TSR_ERR_UNSUPPORTED (its
/// inner allocator cannot tell its device's memory); TSR_ERR_DEVICE.
///
/// # Safety
/// `allocator` NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn tsr_caching_allocator_set_memory_fraction(
    allocator: *mut TsrAllocator,
    device: TsrDevice,
    fraction: f64,
) -> TsrStatus {
    guard("tsr_caching_allocator_set_memory_fraction", || {
        let device = device.to_core().map_err(|e| e.context("device"))?;
        // SAFETY: `allocator` is NULL or a live TsrAllocator handle (the
        // header's contract, ffi/handle.rs); with_caching checks NULL and
        // liveness.
        unsafe { with_caching(allocator, |c| c.set_memory_fraction(device, fraction)) }
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
