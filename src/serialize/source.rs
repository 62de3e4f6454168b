//! The bytes a file is loaded from, and how a record of them becomes a
//! storage: a copy into fresh memory from the CPU allocator, or a view of
//! the storage that holds the bytes (a mapping of the file, or a storage
//! the host passed in).

use crate::data_ptr::DataPtr;
use crate::device::Device;
use crate::error::Result;
use crate::storage::Storage;
use std::ffi::c_void;

/// Bytes to load from, and the storage holding them when records may
/// view it instead of being copied.
pub(crate) struct Source<'a> {
    pub bytes: &'a [u8],
    pub backing: Option<&'a Storage>,
    /// True when the backing storage is the caller's: tensors then view
    /// that storage itself (at the record's offset), so that whatever the
    /// caller does to it later (resize, set_data_ptr, share_memory) they
    /// follow, as c10's views do. False for a storage only the loader
    /// holds (a file read or mapped): each record gets a storage of its
    /// own viewing it, so tensors keep the offsets they were saved with.
    pub direct: bool,
}

/// A loaded record: the storage tensors use, and the element offset of
/// the record's first byte in it (0 unless the source is direct).
pub(crate) struct Record {
    pub storage: Storage,
    pub base: i64,
    pub len: usize,
}

/// Deleter of a record storage that views its parent: drops the
/// parent's reference kept in the context.
unsafe extern "C" fn drop_parent(ctx: *mut c_void) {
    // SAFETY: ctx is the Box<Storage> leaked by `view` for this DataPtr,
    // and the DataPtr calls its deleter once.
    drop(unsafe { Box::from_raw(ctx as *mut Storage) });
}

impl Source<'_> {
    /// The `len` bytes at `offset` (checked by the caller to lie within
    /// `bytes`) for tensors of `itemsize`-byte elements: a view of the
    /// backing storage when there is one and the address is aligned to the
    /// element, else a copy.
    pub fn record(&self, offset: usize, len: usize, itemsize: usize) -> Result<Record> {
        let bytes = &self.bytes[offset..offset + len];
        let align = itemsize.clamp(1, 16);
        if let Some(parent) = self.backing {
            let ptr = bytes.as_ptr();
            let aligned = (ptr as usize) % align == 0 && offset % itemsize.max(1) == 0;
            if self.direct && aligned {
                return Ok(Record {
                    storage: parent.clone(),
                    base: (offset / itemsize.max(1)) as i64,
                    len,
                });
            }
            if !self.direct && len > 0 && aligned {
                let ctx = Box::into_raw(Box::new(parent.clone())) as *mut c_void;
                // SAFETY: the bytes lie in `parent`'s data (the caller made
                // `bytes` from it), which stays valid while the reference
                // in ctx lives: only the loader holds `parent` (a file read
                // or mapped), so nothing resizes or replaces its data;
                // drop_parent releases it once.
                let data_ptr = unsafe {
                    DataPtr::from_raw_parts(ptr as *mut c_void, ctx, Some(drop_parent), Device::CPU)
                };
                let s = Storage::from_data_ptr(data_ptr, len);
                if parent.is_read_only() {
                    s.make_read_only();
                }
                return Ok(Record {
                    storage: s,
                    base: 0,
                    len,
                });
            }
        }
        let s = Storage::new(len, Device::CPU, true)?;
        if len > 0 {
            // SAFETY: s is a fresh CPU storage of len bytes, not shared;
            // bytes is len bytes of another allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, len);
            }
        }
        Ok(Record {
            storage: s,
            base: 0,
            len,
        })
    }
}
