//! What a device backend offers a caching layer built over it
//! ([`RawAllocator::device_hooks`](super::RawAllocator::device_hooks)):
//! how "the current device" resolves, and its streams ([`StreamOps`],
//! which the caching layer's stream-ordered reuse, `caching/streams.rs`,
//! drives).

use crate::device::Device;
use crate::error::Result;

/// A device backend's hooks for a caching layer built over it
/// ([`RawAllocator::device_hooks`](super::RawAllocator::device_hooks));
/// [`DeviceHooks::NONE`] (the default)
/// for backends with neither.
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
}

impl DeviceHooks {
    /// No hooks.
    pub const NONE: DeviceHooks = DeviceHooks {
        resolve_current: None,
        streams: None,
    };
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
