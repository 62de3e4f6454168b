//! Shared memory on Windows: refused. tessera's segments are reached by a
//! POSIX descriptor (`share_fd` / `from_fd`) or a POSIX name whose last
//! user removes it under `flock`; Windows has neither descriptors of
//! section objects nor a name that outlives its handles, so the model
//! does not carry over as is (named file mappings through
//! CreateFileMappingW are the way in: docs/PLATFORMS.md). Every call
//! returns Unsupported naming the platform; no segment is ever made, so
//! [`Segment`] has no value.

use crate::error::Result;
use std::convert::Infallible;
use std::ffi::CStr;

/// A descriptor number, as the C API spells it.
pub type RawFd = std::ffi::c_int;

/// An owned descriptor: none exists on Windows.
#[derive(Debug)]
pub struct OwnedFd(Infallible);

/// A shared-memory segment: none exists on Windows.
pub(crate) struct Segment(Infallible);

fn refused<T>(what: &str) -> Result<T> {
    crate::bail!(
        Unsupported,
        "{what} is not supported on {}: shared-memory storages need POSIX shared memory \
         (docs/PLATFORMS.md)",
        crate::platform::OS_NAME
    )
}

impl Segment {
    /// The start of the mapping.
    pub(crate) fn base(&self) -> *mut u8 {
        match self.0 {}
    }

    /// The name of a named segment.
    pub(crate) fn name(&self) -> Option<&CStr> {
        match self.0 {}
    }

    /// A new descriptor of the object.
    pub(crate) fn dup_fd(&self) -> Result<OwnedFd> {
        match self.0 {}
    }
}

/// Refused: no anonymous shared memory by descriptor.
pub(crate) fn anonymous_copy(_src: *const u8, _nbytes: usize) -> Result<Segment> {
    refused("share_memory")
}

/// Refused: no descriptors.
pub(crate) fn from_fd(_fd: RawFd, _nbytes: usize) -> Result<(Segment, usize, bool)> {
    refused("mapping a descriptor (from_fd)")
}

/// The descriptor's number (none exists).
pub(crate) fn into_raw(fd: OwnedFd) -> RawFd {
    match fd.0 {}
}

/// Named segments: refused.
pub(crate) mod named {
    use super::{refused, Segment};
    use crate::error::Result;
    use std::ffi::CStr;

    /// Refused.
    pub(crate) fn create(_src: *const u8, _nbytes: usize) -> Result<Segment> {
        refused("share_name")
    }

    /// Refused.
    pub(crate) fn open(_name: &CStr) -> Result<(Segment, usize)> {
        refused("open_shared")
    }
}
