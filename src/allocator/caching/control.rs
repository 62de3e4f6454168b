//! What a caller reads and sets on a caching allocator: its statistics
//! (all devices or one, as c10's memory_stats), peaks and accumulated
//! counts, the memory limit per device, and the return of unused memory.
//! Each first flushes the calling thread's front (thread_front.rs), so the
//! thread sees its own frees.

use super::{thread_front, CachingAllocator, CachingStats};
use crate::device::Device;
use crate::error::Result;

impl CachingAllocator {
    /// The calling thread's front flushed, if it holds blocks of this
    /// allocator (statistics read, cache emptied, allocator dropped).
    pub(super) fn flush_own_front(&self) {
        thread_front::flush_own(self.shared.as_ptr());
    }

    /// The statistics now, all devices summed.
    pub fn stats(&self) -> Result<CachingStats> {
        self.flush_own_front();
        Ok(self.shared().lock.lock()?.stats_now())
    }

    /// The statistics of one device now (c10's memory_stats(device); all
    /// zero for a device this allocator never served). Index -1 is
    /// resolved as allocations resolve it.
    pub fn device_stats(&self, device: Device) -> Result<CachingStats> {
        self.flush_own_front();
        let device = self.pool_device(device)?;
        Ok(self.shared().lock.lock()?.device_stats_now(device))
    }

    /// The devices this allocator has served, in order of first use.
    pub fn devices(&self) -> Result<Vec<Device>> {
        Ok(self.shared().lock.lock()?.stats.devices())
    }

    /// Zeroes every cumulative amount (each statistic's `allocated` and
    /// `freed`) and every count (allocations, frees, hits, segment
    /// allocations and frees, retries, out-of-memory failures), on every
    /// device (c10's reset_accumulated_memory_stats).
    pub fn reset_accumulated(&self) -> Result<()> {
        self.flush_own_front();
        let mut st = self.shared().lock.lock()?;
        st.flush_front(None);
        st.stats.reset_accumulated();
        Ok(())
    }

    /// Limits the bytes `device` may reserve to `fraction` of its memory
    /// (c10's set_per_process_memory_fraction; a byte limit of the options
    /// still applies if lower). 0 removes the fraction. Memory already
    /// reserved stays; later requests that would pass the limit first
    /// return the device's unused segments, then fail.
    pub fn set_memory_fraction(&self, device: Device, fraction: f64) -> Result<()> {
        crate::ensure!(
            (0.0..=1.0).contains(&fraction),
            InvalidArgument,
            "fraction {fraction} is invalid: expected a fraction of the device's memory in [0, 1]"
        );
        let policy = &self.shared().policy;
        crate::ensure!(
            fraction == 0.0 || policy.memory_info.is_some(),
            Unsupported,
            "allocator '{}' cannot tell its device's total memory, so a memory fraction \
             cannot apply; use a memory limit in bytes (TsrCachingOptions.memory_limit)",
            self.inner().name()
        );
        let device = self.pool_device(device)?;
        let limit = policy.limit_for(device, fraction);
        crate::ensure!(
            fraction == 0.0 || limit.is_some(),
            Device,
            "the total memory of {device} could not be read, so a fraction of it cannot apply"
        );
        let mut st = self.shared().lock.lock()?;
        let slot = st.device_slot(device, 0);
        let dev = st.dev(slot);
        st.limits[dev] = limit;
        Ok(())
    }

    /// The limit on the bytes `device` may reserve, if any.
    pub fn memory_limit(&self, device: Device) -> Result<Option<u64>> {
        let device = self.pool_device(device)?;
        let mut st = self.shared().lock.lock()?;
        let slot = st.device_slot(device, 0);
        let dev = st.dev(slot);
        Ok(st.limits[dev])
    }

    /// Sets every peak, those of [`CachingAllocator::stats`] and the
    /// owner's `peak_bytes`, to its current value.
    pub fn reset_peak(&self) -> Result<()> {
        self.flush_own_front();
        let mut st = self.shared().lock.lock()?;
        st.flush_front(None);
        st.stats.reset_peak();
        if !st.owner.is_null() {
            // SAFETY: non-NULL under the lock means the owner is alive (see
            // State::record_free).
            unsafe { &*st.owner }.stats().reset_peak();
        }
        Ok(())
    }

    /// Returns every fully free segment to the inner allocator (after
    /// waiting for the blocks freed while other streams used them).
    pub fn empty_cache(&self) -> Result<()> {
        self.flush_own_front();
        self.shared().settle_pending()?;
        let unused = self.shared().lock.lock()?.take_unused_segments(None);
        // Freed here, outside the lock.
        drop(unused);
        Ok(())
    }
}
