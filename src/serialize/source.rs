//! The bytes a file is loaded from, and how a record of them becomes a
//! storage: a copy into fresh memory from the CPU allocator, or a view of
//! the storage that holds the bytes (a mapping of the file, or a storage
//! the host passed in).

use crate::data_ptr::DataPtr;
use crate::device::Device;
use crate::dtype::DType;
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
    /// Set while a checkpoint's index is read from a sparse copy of the
    /// file: records are noted (a Meta storage of their length each), not
    /// made, and `bytes` holds only what the readers look at besides them.
    pub lazy: Option<&'a Noted>,
}

/// The records a reader asked for while indexing ([`Source::lazy`]): per
/// Meta storage standing for one, where its bytes lie and the width of
/// the groups a big-endian record reverses (0: none).
#[derive(Default)]
pub(crate) struct Noted(std::sync::Mutex<std::collections::HashMap<usize, (u64, usize)>>);

impl Noted {
    fn note(&self, offset: usize, len: usize, swap: usize) -> Result<Record> {
        let meta = Device::new(crate::device::DeviceType::Meta, -1)?;
        let storage = Storage::new(len, meta, false)?;
        let key = crate::refcount::Ref::as_ptr(&storage.0) as usize;
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, (offset as u64, swap));
        Ok(Record {
            storage,
            base: 0,
            len,
        })
    }

    /// Where the record `storage` stands for lies, and its swap width.
    pub(crate) fn get(&self, storage: &Storage) -> Option<(u64, usize)> {
        let key = crate::refcount::Ref::as_ptr(&storage.0) as usize;
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied()
    }
}

/// A loaded record: the storage tensors use, and the element offset of
/// the record's first byte in it (0 unless the source is direct).
pub(crate) struct Record {
    pub storage: Storage,
    pub base: i64,
    pub len: usize,
}

impl Record {
    /// Checks the geometry a file gives tensor `name` of `dtype` over this
    /// record, the same for every format and load path: as many sizes as
    /// strides (at most 64), sizes, strides and `offset` >= 0 (strides
    /// even when the tensor is empty), and `(offset + extent) * itemsize`
    /// within the record's bytes, all with checked arithmetic (extent: 0
    /// when empty, else 1 + sum((size - 1) * stride)). Returns the
    /// tensor's storage offset: the record's base plus `offset`, added
    /// only after those checks.
    ///
    /// Errors: `Format`, naming the tensor, the bad value and what was
    /// expected.
    pub fn place(
        &self,
        name: &str,
        offset: i64,
        sizes: &[i64],
        strides: &[i64],
        dtype: DType,
    ) -> Result<i64> {
        place_in(
            self.len as u64,
            self.base,
            name,
            offset,
            sizes,
            strides,
            dtype,
        )
    }
}

/// [`Record::place`] for a record of `len` bytes whose first byte is
/// element `base` of its storage: what a checkpoint's index checks before
/// any byte is fetched.
pub(crate) fn place_in(
    len: u64,
    base: i64,
    name: &str,
    offset: i64,
    sizes: &[i64],
    strides: &[i64],
    dtype: DType,
) -> Result<i64> {
    crate::ensure!(
        sizes.len() == strides.len() && sizes.len() <= 64,
        Format,
        "tensor '{name}': {} sizes and {} strides: expected the same number, at most 64",
        sizes.len(),
        strides.len()
    );
    if let Some(s) = sizes.iter().find(|&&s| s < 0) {
        crate::bail!(
            Format,
            "tensor '{name}': negative size {s} in {sizes:?}: expected sizes >= 0"
        );
    }
    if let Some(s) = strides.iter().find(|&&s| s < 0) {
        crate::bail!(
            Format,
            "tensor '{name}': negative stride {s} in {strides:?}: expected strides >= 0 \
                 (also for an empty tensor)"
        );
    }
    crate::ensure!(
        offset >= 0,
        Format,
        "tensor '{name}': storage offset {offset} is negative: expected >= 0"
    );
    let overflow = || {
        crate::err!(
            Format,
            "tensor '{name}': the number of elements of sizes {sizes:?} or the extent of \
                 strides {strides:?} at offset {offset} overflows"
        )
    };
    let numel = sizes
        .iter()
        .try_fold(1i64, |n, &s| n.checked_mul(s))
        .ok_or_else(overflow)?;
    let extent = if numel == 0 {
        0
    } else {
        sizes
            .iter()
            .zip(strides)
            .try_fold(1i64, |e, (&size, &stride)| {
                (size - 1).checked_mul(stride)?.checked_add(e)
            })
            .ok_or_else(overflow)?
    };
    let end = offset
        .checked_add(extent)
        .and_then(|e| u64::try_from(e).ok())
        .and_then(|e| e.checked_mul(dtype.itemsize() as u64))
        .ok_or_else(overflow)?;
    crate::ensure!(
        end <= len,
        Format,
        "tensor '{name}': offset {offset}, sizes {sizes:?} and strides {strides:?} of {} \
             reach byte {end}, past its storage record of {} bytes",
        dtype.name(),
        len
    );
    base.checked_add(offset).ok_or_else(|| {
        crate::err!(
            Format,
            "tensor '{name}': offset {offset} past the record's base {base}: overflows"
        )
    })
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
    /// `bytes`) stored big-endian in groups of `width` bytes: a copy with
    /// each whole group reversed (noted as such while indexing).
    pub fn record_swapped(&self, offset: usize, len: usize, width: usize) -> Result<Record> {
        let used = len - len % width.max(1);
        if let Some(noted) = self.lazy {
            return noted.note(offset, used, width);
        }
        Ok(Record {
            storage: swapped(&self.bytes[offset..offset + used], width)?,
            base: 0,
            len: used,
        })
    }

    /// The `len` bytes at `offset` (checked by the caller to lie within
    /// `bytes`) for tensors of `itemsize`-byte elements: a view of the
    /// backing storage when there is one and the address is aligned to the
    /// element, else a copy.
    pub fn record(&self, offset: usize, len: usize, itemsize: usize) -> Result<Record> {
        if let Some(noted) = self.lazy {
            return noted.note(offset, len, 0);
        }
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

/// Where the `len` bytes at byte `start` of `storage` lie in a file that
/// holds them unchanged: the storage is a read-only mapping of the file
/// (`Storage::from_file`, READ_ONLY) or a loaded record viewing one
/// (a load with `mmap` and `read_only`): the file, the path it was mapped
/// from and the offset. A save reads such bytes from the file, never
/// from the mapping (`kernel_copy`: the file may have shrunk). None for
/// any other storage, and for a range past the storage's bytes.
pub(crate) fn file_extent<'s>(
    storage: &'s Storage,
    start: usize,
    len: usize,
) -> Option<(&'s std::fs::File, &'s std::ffi::CStr, u64)> {
    if start.checked_add(len)? > storage.nbytes() || storage.data().is_null() {
        return None;
    }
    let ptr = (storage.data() as *const u8).wrapping_add(start);
    let extent = |m: &'s crate::storage::file::FileMapping| {
        m.read_only_extent(ptr, len)
            .map(|(file, offset)| (file, m.path(), offset))
    };
    if let Some(m) = storage.file_mapping() {
        return extent(m);
    }
    let ctx = storage.data_ptr().cast_context(drop_parent)?;
    // SAFETY: a context whose deleter is drop_parent is the parent's
    // Box<Storage> leaked by `Source::record`, owned by this storage's
    // DataPtr, which outlives the borrow of `storage`.
    let parent = unsafe { &*(ctx as *const Storage) };
    extent(parent.file_mapping()?)
}

/// A fresh CPU storage holding `bytes` with every `width`-byte group
/// reversed (big-endian data made native).
pub(crate) fn swapped(bytes: &[u8], width: usize) -> Result<Storage> {
    let s = Storage::new(bytes.len(), Device::CPU, true)?;
    if !bytes.is_empty() {
        // SAFETY: s is a fresh, unshared CPU storage of bytes.len() bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(s.data() as *mut u8, bytes.len()) };
        for (o, i) in out.chunks_exact_mut(width).zip(bytes.chunks_exact(width)) {
            o.copy_from_slice(i);
            o.reverse();
        }
    }
    Ok(s)
}

/// Where the whole of `storage` lies in a file it is a read-only mapping
/// of (or a loaded record viewing one): the open file, its path and the
/// byte offset. None for any other storage.
pub(crate) fn mapped_extent(
    storage: &Storage,
) -> Option<(&std::fs::File, std::path::PathBuf, u64)> {
    if storage.data().is_null() || storage.nbytes() == 0 {
        return None;
    }
    let ptr = storage.data() as *const u8;
    let mapping = match storage.file_mapping() {
        Some(m) => m,
        None => {
            let ctx = storage.data_ptr().cast_context(drop_parent)?;
            // SAFETY: as in `file_extent`: a context whose deleter is
            // drop_parent is the parent's Box<Storage>, owned by this
            // storage's DataPtr, which outlives the borrow of `storage`.
            let parent = unsafe { &*(ctx as *const Storage) };
            parent.file_mapping()?
        }
    };
    let (file, offset) = mapping.read_only_extent(ptr, storage.nbytes())?;
    // For messages only: reads go through the open file.
    let path = std::path::PathBuf::from(mapping.path().to_string_lossy().into_owned());
    Some((file, path, offset))
}
