//! The settings a caching allocator runs with, resolved once when it is
//! made: each option as given, else TESSERA_ALLOC_CONF's value, else
//! c10's default (docs/SEMANTICS.md, "Caching allocators: c10's
//! settings").

use super::sizes::{LARGE_SEGMENT, SMALL_MAX};
use super::CachingOptions;
use crate::allocator::alloc_conf::{self, MIN_NON_SPLIT_ROUNDING_MB};
use crate::allocator::roundup::RoundupDivisions;
use crate::allocator::{DeviceHooks, MemoryInfo, VirtualMemory};
use crate::device::Device;
use crate::error::Result;

/// c10's default max_non_split_rounding (its kLargeBuffer).
pub(super) const DEFAULT_NON_SPLIT_ROUNDING: usize = LARGE_SEGMENT;

/// The resolved settings.
#[derive(Clone, Copy)]
pub(super) struct Policy {
    /// Large requests of this size or more are oversize (0: none).
    pub(super) max_split_size: usize,
    /// Requests of this size or more are oversize (usize::MAX: none).
    pub(super) oversize_from: usize,
    /// An oversize request takes a cached oversize block less than this
    /// much larger than itself.
    pub(super) max_non_split_rounding: usize,
    /// How requests are rounded (None: to 512 bytes).
    pub(super) roundup: Option<RoundupDivisions>,
    /// The inner allocator's address space, when segments are expandable.
    pub(super) expandable: Option<&'static dyn VirtualMemory>,
    /// Garbage collection starts when a device's reserved bytes pass this
    /// fraction of its limit (0: never).
    pub(super) gc_threshold: f64,
    /// Bytes each device may reserve (0: no byte limit).
    pub(super) memory_limit: u64,
    /// The fraction of each device's memory it may reserve (0: none).
    pub(super) memory_fraction: f64,
    /// The device's free and total memory, from the inner allocator.
    pub(super) memory_info: Option<fn(Device) -> Result<MemoryInfo>>,
}

/// Resolves `options` over an inner allocator named `inner` with `hooks`.
pub(super) fn resolve(
    options: &CachingOptions,
    hooks: &DeviceHooks,
    inner: &str,
) -> Result<Policy> {
    let conf = alloc_conf::get();
    let max_split_size = match options.max_split_size {
        // TESSERA_ALLOC_CONF's max_split_size_mb is the default.
        0 => conf.max_split_size.unwrap_or(0),
        n => n,
    };
    crate::ensure!(
        max_split_size == 0 || max_split_size > SMALL_MAX,
        InvalidArgument,
        "max_split_size {max_split_size} is invalid: expected 0 (no limit) or more than \
         {SMALL_MAX} bytes (requests up to 1 MiB always use the small pool)"
    );
    let max_non_split_rounding = match options.max_non_split_rounding {
        0 => conf
            .max_non_split_rounding
            .unwrap_or(DEFAULT_NON_SPLIT_ROUNDING),
        n => n,
    };
    crate::ensure!(
        max_non_split_rounding == DEFAULT_NON_SPLIT_ROUNDING
            || max_non_split_rounding > MIN_NON_SPLIT_ROUNDING_MB << 20,
        InvalidArgument,
        "max_non_split_rounding {max_non_split_rounding} is invalid: expected 0 (c10's default, \
         20 MiB) or more than {} bytes (c10's max_non_split_rounding_mb must be more than 20)",
        MIN_NON_SPLIT_ROUNDING_MB << 20
    );
    let roundup = options
        .roundup_power2_divisions
        .or(conf.roundup_power2_divisions)
        .filter(|d| !d.is_off());
    let gc_threshold = match options.garbage_collection_threshold {
        0.0 => conf.garbage_collection_threshold.unwrap_or(0.0),
        x => x,
    };
    crate::ensure!(
        gc_threshold == 0.0 || (gc_threshold > 0.0 && gc_threshold < 1.0),
        InvalidArgument,
        "garbage_collection_threshold {gc_threshold} is invalid: expected 0 (off) or a fraction \
         between 0 and 1 (both excluded)"
    );
    let fraction = options.memory_fraction;
    crate::ensure!(
        (0.0..=1.0).contains(&fraction),
        InvalidArgument,
        "memory_fraction {fraction} is invalid: expected 0 (no limit) or a fraction of the \
         device's memory in (0, 1]"
    );
    crate::ensure!(
        fraction == 0.0 || hooks.memory_info.is_some(),
        InvalidArgument,
        "memory_fraction {fraction}: allocator '{inner}' cannot tell its device's total memory; \
         set memory_limit (bytes) instead"
    );
    let expandable = if options.expandable_segments {
        match hooks.virtual_memory {
            Some(vm) => Some(vm),
            None => crate::bail!(
                InvalidArgument,
                "expandable_segments: allocator '{inner}' cannot reserve address space and map \
                 memory into it (the built-in CPU allocator and the CUDA device allocator can)"
            ),
        }
    } else if conf.expandable_segments == Some(true) {
        // From the environment: applied where the inner allocator can.
        hooks.virtual_memory
    } else {
        None
    };
    // With expandable segments every block may be split (c10's
    // should_split), so nothing is oversize.
    let oversize_from = if max_split_size == 0 || expandable.is_some() {
        usize::MAX
    } else {
        max_split_size
    };
    Ok(Policy {
        max_split_size,
        oversize_from,
        max_non_split_rounding,
        roundup,
        expandable,
        gc_threshold,
        memory_limit: options.memory_limit,
        memory_fraction: fraction,
        memory_info: hooks.memory_info,
    })
}

impl Policy {
    /// The limit of a device, in bytes: the byte limit, or the fraction of
    /// its total memory, whichever is lower; None without either (or when
    /// the total cannot be read).
    pub(super) fn limit_for(&self, device: Device, fraction: f64) -> Option<u64> {
        let by_fraction = if fraction > 0.0 {
            self.memory_info
                .and_then(|f| f(device).ok())
                .map(|m| (fraction * m.total as f64) as u64)
        } else {
            None
        };
        let by_bytes = (self.memory_limit > 0).then_some(self.memory_limit);
        match (by_fraction, by_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
