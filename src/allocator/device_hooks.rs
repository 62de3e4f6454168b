//! What a device backend offers a caching layer built over it
//! ([`RawAllocator::device_hooks`](super::RawAllocator::device_hooks)):
//! how "the current device" resolves, its streams ([`StreamOps`], which
//! the caching layer's stream-ordered reuse, `caching/streams.rs`,
//! drives), the device's free and total memory, and address space it can
//! reserve and map memory into ([`VirtualMemory`], for expandable
//! segments, `caching/pool/expandable.rs`).

use crate::device::Device;
use crate::error::Result;

/// A device backend's hooks for a caching layer built over it
/// ([`RawAllocator::device_hooks`](super::RawAllocator::device_hooks));
/// [`DeviceHooks::NONE`] (the default)
/// for backends with none.
#[derive(Clone, Copy, Default)]
pub struct DeviceHooks {
    /// How device index -1 ("the current device") resolves to a concrete
    /// index (the caching layer's pools are per device); None when -1
    /// needs no resolving. The CUDA device allocator answers with the
    /// driver's current device.
    pub resolve_current: Option<fn(Device) -> Result<Device>>,
    /// The backend's streams: a caching layer's pools are then per stream
    /// too, and blocks recorded as used by other streams wait for their
    /// work before reuse. The CUDA device allocator has them.
    pub streams: Option<&'static dyn StreamOps>,
    /// The device's free and total memory in bytes (cuMemGetInfo; the
    /// host's free and physical memory for the CPU allocator): what a
    /// memory fraction is a fraction of, and what out-of-memory observers
    /// are told.
    pub memory_info: Option<fn(Device) -> Result<MemoryInfo>>,
    /// Address space the backend can reserve and map memory into: a
    /// caching layer over it can then use expandable segments.
    pub virtual_memory: Option<&'static dyn VirtualMemory>,
}

impl DeviceHooks {
    /// No hooks.
    pub const NONE: DeviceHooks = DeviceHooks {
        resolve_current: None,
        streams: None,
        memory_info: None,
        virtual_memory: None,
    };
}

/// A device's memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Free now.
    pub free: u64,
    /// In all.
    pub total: u64,
}

/// What the caching layer needs of an allocator with streams. Stream and
/// event handles are opaque words; stream 0 is the default stream.
pub trait StreamOps: Sync {
    /// The calling thread's current stream on `device`.
    fn current(&self, device: Device) -> usize;
    /// Records an event on `stream` of `device`: it completes when the work
    /// queued there now is done.
    fn record(&self, device: Device, stream: usize) -> Result<usize>;
    /// Whether the event has completed.
    fn query(&self, device: Device, event: usize) -> Result<bool>;
    /// Waits until the event has completed.
    fn synchronize(&self, device: Device, event: usize) -> Result<()>;
    /// Destroys an event.
    fn destroy(&self, device: Device, event: usize);
}

/// Address space a backend reserves and maps memory into, in pages of
/// [`VirtualMemory::page_size`] bytes (expandable segments: c10's
/// cuMemAddressReserve / cuMemCreate / cuMemMap; the CPU allocator's
/// mmap with PROT_NONE and mprotect).
pub trait VirtualMemory: Sync {
    /// The mapping granularity on `device`: every offset and length given
    /// to a [`Reservation`] is a multiple of it.
    fn page_size(&self, device: Device) -> Result<usize>;
    /// How many bytes of address space one segment on `device` reserves
    /// (the most it can grow to).
    fn reservation_size(&self, device: Device) -> Result<usize>;
    /// Reserves `size` bytes (a multiple of the page size) of address
    /// space on `device`, nothing mapped.
    fn reserve(&self, device: Device, size: usize) -> Result<Box<dyn Reservation>>;
}

/// A range of reserved address space; dropping it unmaps what is mapped
/// and gives the range back.
pub trait Reservation: Send {
    /// Its first address.
    fn base(&self) -> usize;
    /// Its size in bytes.
    fn size(&self) -> usize;
    /// The device its memory is on, as allocations report it.
    fn device(&self) -> Device;
    /// Maps memory at `offset .. offset + len` (page multiples, inside the
    /// reservation, not mapped now), readable and writable. An OutOfMemory
    /// error when the device has no memory for it (nothing is left mapped
    /// then).
    fn map(&mut self, offset: usize, len: usize) -> Result<()>;
    /// Unmaps `offset .. offset + len` (page multiples, mapped now), giving
    /// the memory back.
    fn unmap(&mut self, offset: usize, len: usize) -> Result<()>;
}
