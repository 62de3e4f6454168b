//! A checkpoint's index: where each tensor's bytes lie and how to read
//! them, without the bytes (docs/FORMATS.md, "Loading in parts").
//!
//! Records are byte ranges of a source, or bytes already in memory where
//! the format keeps them in a form a range cannot give (inflated npz
//! entries, byte-swapped big-endian data, DCP tensors stitched from
//! chunks). Entries are the tensors: a name, a record, and the geometry
//! the file gives over it, checked against the record's length when the
//! index is made. Several entries over one record share a storage when
//! loaded together.
//!
//! Two ways make one: safetensors, npy and GGUF read their header through
//! the source (`header_index`), so an index costs only the header's
//! bytes; every other format is read by its reader over a read-only
//! mapping of the file (`from_mapped`), which touches only the pages the
//! reader looks at (the zip directory, the pickles), and each record
//! viewing that mapping becomes the file range it views.

use super::byte_source::{ByteSource, FileSource};
use super::dict::TensorDict;
use super::formats::Format;
use super::source::place_in;
use crate::dtype::DType;
use crate::error::Result;
use crate::storage::Storage;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a record's bytes are.
pub(crate) enum RecordData {
    /// At `offset` of source `source` of the index.
    Range { source: usize, offset: u64 },
    /// In this CPU storage (from its first byte).
    Resident(Storage),
}

/// A record: `len` bytes tensors view.
pub(crate) struct RecordSpec {
    pub data: RecordData,
    pub len: u64,
}

/// A tensor of the index.
pub(crate) struct Entry {
    pub name: String,
    pub record: usize,
    /// The element offset of its first element from the record's first
    /// byte.
    pub offset: i64,
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
    pub dtype: DType,
}

impl Entry {
    /// Its elements' count (checked when the index was made).
    pub(crate) fn numel(&self) -> u64 {
        self.sizes.iter().map(|&s| s as u64).product()
    }

    /// The bytes its elements take in row-major order.
    pub(crate) fn nbytes(&self) -> u64 {
        self.numel() * self.dtype.itemsize() as u64
    }

    /// The byte range of its record that elements `[first, first +
    /// count)` of dim 0 span (the covering range for strided layouts):
    /// (start, len), start a multiple of the item size. The whole tensor
    /// is `covering(0, sizes[0])`; a 0-d tensor is `covering(0, 1)`.
    pub(crate) fn covering(&self, first: i64, count: i64) -> (u64, u64) {
        let item = self.dtype.itemsize() as u64;
        let (rest_sizes, rest_strides, row_stride) = match self.sizes.split_first() {
            Some((_, rest)) => (rest, &self.strides[1..], self.strides[0]),
            None => (&[][..], &[][..], 0),
        };
        let start = (self.offset + first * row_stride) as u64;
        let empty = count == 0 || rest_sizes.contains(&0);
        if empty {
            return (start * item, 0);
        }
        let extent = 1
            + (count - 1) * row_stride
            + rest_sizes
                .iter()
                .zip(rest_strides)
                .map(|(&s, &st)| (s - 1) * st)
                .sum::<i64>();
        (start * item, extent as u64 * item)
    }
}

/// What a reader finds in a file's header: its records (ranges of
/// source 0), tensors and metadata.
pub(crate) struct Parts {
    pub records: Vec<RecordSpec>,
    pub entries: Vec<Entry>,
    pub metadata: Vec<(String, String)>,
}

impl Parts {
    /// The dict of these parts over the bytes of `source` (a whole file
    /// in memory): each record a view of them where alignment allows (a
    /// copy otherwise), as every reader's load from bytes makes them.
    pub(crate) fn over_bytes(&self, source: &super::source::Source<'_>) -> Result<TensorDict> {
        let mut made: Vec<Option<super::source::Record>> =
            self.records.iter().map(|_| None).collect();
        let mut dict = TensorDict::new();
        for e in &self.entries {
            if made[e.record].is_none() {
                let r = &self.records[e.record];
                let RecordData::Range { offset, .. } = r.data else {
                    crate::bail!(Internal, "a header's record is not a range of its file");
                };
                let (at, len) = (offset as usize, r.len as usize);
                crate::ensure!(
                    at.checked_add(len)
                        .is_some_and(|end| end <= source.bytes.len()),
                    Format,
                    "tensor '{}': bytes [{at}, +{len}) past the {} bytes of the file",
                    e.name,
                    source.bytes.len()
                );
                made[e.record] = Some(source.record(at, len, e.dtype.itemsize())?);
            }
            let rec = made[e.record].as_ref().expect("made above");
            let offset = rec.place(&e.name, e.offset, &e.sizes, &e.strides, e.dtype)?;
            let t = crate::tensor::Tensor::from_storage(
                &rec.storage,
                offset,
                &e.sizes,
                Some(&e.strides),
                e.dtype,
            )?;
            dict.set(&e.name, t)?;
        }
        for (k, v) in &self.metadata {
            dict.set_metadata(k, v)?;
        }
        Ok(dict)
    }
}

/// The index of a checkpoint.
pub(crate) struct Index {
    pub format: Format,
    pub sources: Vec<Arc<dyn ByteSource>>,
    pub records: Vec<RecordSpec>,
    pub entries: Vec<Entry>,
    pub metadata: Vec<(String, String)>,
    by_name: HashMap<String, usize>,
}

impl Index {
    /// An index of `entries` over `records`, each entry's geometry checked
    /// against its record's length.
    pub(crate) fn new(
        format: Format,
        sources: Vec<Arc<dyn ByteSource>>,
        records: Vec<RecordSpec>,
        entries: Vec<Entry>,
        metadata: Vec<(String, String)>,
    ) -> Result<Index> {
        let mut by_name = HashMap::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let rec = records.get(e.record).ok_or_else(|| {
                crate::err!(
                    Internal,
                    "tensor '{}' names record {} of {}",
                    e.name,
                    e.record,
                    records.len()
                )
            })?;
            place_in(rec.len, 0, &e.name, e.offset, &e.sizes, &e.strides, e.dtype)?;
            crate::ensure!(
                by_name.insert(e.name.clone(), i).is_none(),
                Format,
                "the checkpoint names tensor '{}' twice: expected each name once",
                e.name
            );
        }
        Ok(Index {
            format,
            sources,
            records,
            entries,
            metadata,
            by_name,
        })
    }

    /// The entry named `name`.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The index of a dict a reader made over read-only mappings (a mapped
    /// load): each tensor's storage that views a mapped file becomes the
    /// range of that file it views, read again when fetched; any other
    /// storage (a copy the reader made) stays resident.
    pub(crate) fn from_mapped(format: Format, dict: &TensorDict) -> Result<Index> {
        let mut sources: Vec<Arc<dyn ByteSource>> = Vec::new();
        let mut files: HashMap<usize, usize> = HashMap::new();
        let mut records = Vec::new();
        let mut by_storage: HashMap<usize, usize> = HashMap::new();
        let mut entries = Vec::with_capacity(dict.len());
        for (name, t) in dict.iter() {
            let s = t.storage();
            let key = crate::refcount::Ref::as_ptr(&s.0) as usize;
            let record = match by_storage.get(&key) {
                Some(&r) => r,
                None => {
                    let data = match super::source::mapped_extent(s) {
                        Some((file, path, offset)) => {
                            let fkey = file as *const std::fs::File as usize;
                            let source = match files.get(&fkey) {
                                Some(&i) => i,
                                None => {
                                    let dup = file.try_clone().map_err(|e| {
                                        crate::err!(
                                            Io,
                                            "cannot reopen {}: {}",
                                            path.display(),
                                            crate::files::reason(&e)
                                        )
                                    })?;
                                    sources.push(Arc::new(FileSource::new(dup, &path)?));
                                    files.insert(fkey, sources.len() - 1);
                                    sources.len() - 1
                                }
                            };
                            RecordData::Range { source, offset }
                        }
                        None => RecordData::Resident(s.clone()),
                    };
                    records.push(RecordSpec {
                        data,
                        len: s.nbytes() as u64,
                    });
                    by_storage.insert(key, records.len() - 1);
                    records.len() - 1
                }
            };
            entries.push(Entry {
                name: name.to_owned(),
                record,
                offset: t.storage_offset(),
                sizes: t.sizes().to_vec(),
                strides: t.strides().to_vec(),
                dtype: t.dtype(),
            });
        }
        let metadata = dict
            .metadata_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Index::new(format, sources, records, entries, metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sizes: &[i64], strides: &[i64], offset: i64) -> Entry {
        Entry {
            name: "t".into(),
            record: 0,
            offset,
            sizes: sizes.to_vec(),
            strides: strides.to_vec(),
            dtype: DType::Float,
        }
    }

    #[test]
    fn covering_ranges_of_rows() {
        // A contiguous [4, 3] float tensor at element 2: rows 1..3 are
        // bytes (2 + 3) * 4 .. + 6 * 4.
        let e = entry(&[4, 3], &[3, 1], 2);
        assert_eq!(e.covering(1, 2), (20, 24));
        assert_eq!(e.covering(0, 4), (8, 48));
        assert_eq!(e.covering(2, 0), (32, 0));
        // Its transpose [3, 4] with strides [1, 3]: row 1 spans elements
        // 3 .. 3 + 1 + 3 * 3 of the record.
        let t = entry(&[3, 4], &[1, 3], 2);
        assert_eq!(t.covering(1, 1), (12, 40));
        // 0-d: one element.
        let s = entry(&[], &[], 5);
        assert_eq!(s.covering(0, 1), (20, 4));
        // An empty trailing dim: nothing.
        let z = entry(&[2, 0], &[1, 1], 0);
        assert_eq!(z.covering(0, 2).1, 0);
    }
}
