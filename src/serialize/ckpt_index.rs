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
//! Two ways make one: safetensors reads its header through
//! the source (`header_index`), so an index costs only the header's
//! bytes; every other format is read by its reader over a read-only
//! mapping of the file (`from_mapped`), which touches only the pages the
//! reader looks at (the zip directory, the pickles), and each record
//! viewing that mapping becomes the file range it views.

use super::byte_source::{ByteSource, FileSource};
pub(crate) use super::ckpt_parts::{Entry, RecordCrc, RecordData, RecordSpec};
use super::dict::TensorDict;
use super::formats::Format;
use super::source::place_in;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Arc;

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

    /// Its sources, records, entries and metadata, for an index made of
    /// several (a shard index's).
    #[allow(clippy::type_complexity)]
    pub(crate) fn into_parts(
        self,
    ) -> (
        Vec<Arc<dyn ByteSource>>,
        Vec<RecordSpec>,
        Vec<Entry>,
        Vec<(String, String)>,
    ) {
        (self.sources, self.records, self.entries, self.metadata)
    }

    /// The entry named `name`.
    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The index of a dict a reader made while indexing (`Source::lazy`):
    /// each storage it noted becomes the range of `source` it stands for
    /// (with its swap width); any other (an entry it inflated) stays
    /// resident. `crcs`: per offset where an archive's entry has a record
    /// start, the record's length and the entry's CRC-32, given to a range
    /// record of that offset and length (checked when fetched whole).
    pub(crate) fn from_noted(
        format: Format,
        dict: &TensorDict,
        noted: &super::source::Noted,
        source: Arc<dyn ByteSource>,
        crcs: &HashMap<u64, (u64, RecordCrc)>,
    ) -> Result<Index> {
        let mut index = from_dict(format, dict, vec![source], |name, s, _| {
            Ok(match noted.get(s) {
                Some((offset, swap)) => (RecordData::Range { source: 0, offset }, swap),
                None if s.device().is_cpu() => (RecordData::Resident(s.clone()), 0),
                None => crate::bail!(
                    Internal,
                    "tensor '{name}': a storage on {} the index did not note",
                    s.device()
                ),
            })
        })?;
        for r in &mut index.records {
            if let RecordData::Range { offset, .. } = r.data {
                if let Some((_, crc)) = crcs.get(&offset).filter(|(len, _)| *len == r.len) {
                    r.crc = Some(crc.clone());
                }
            }
        }
        Ok(index)
    }

    /// The index of a dict a reader made over read-only mappings (a mapped
    /// load): each tensor's storage that views a mapped file becomes the
    /// range of that file it views, read again when fetched; any other
    /// storage (a copy the reader made) stays resident.
    pub(crate) fn from_mapped(format: Format, dict: &TensorDict) -> Result<Index> {
        let mut files: HashMap<usize, usize> = HashMap::new();
        from_dict(format, dict, Vec::new(), |_, s, sources| {
            let Some((file, path, offset)) = super::source::mapped_extent(s) else {
                return Ok((RecordData::Resident(s.clone()), 0));
            };
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
            Ok((RecordData::Range { source, offset }, 0))
        })
    }
}

/// The index of the dict a reader made: one record per storage its
/// tensors use (`record_of(name, storage, sources)` says where the
/// storage's bytes are and their swap width, adding sources as it needs),
/// one entry per tensor at its storage offset.
fn from_dict(
    format: Format,
    dict: &TensorDict,
    mut sources: Vec<Arc<dyn ByteSource>>,
    mut record_of: impl FnMut(
        &str,
        &crate::storage::Storage,
        &mut Vec<Arc<dyn ByteSource>>,
    ) -> Result<(RecordData, usize)>,
) -> Result<Index> {
    let mut records = Vec::new();
    let mut by_storage: HashMap<usize, usize> = HashMap::new();
    let mut entries = Vec::with_capacity(dict.len());
    for (name, t) in dict.iter() {
        let s = t.storage();
        let key = crate::refcount::Ref::as_ptr(&s.0) as usize;
        let record = match by_storage.get(&key) {
            Some(&r) => r,
            None => {
                let (data, swap) = record_of(name, s, &mut sources)?;
                records.push(RecordSpec {
                    data,
                    len: s.nbytes() as u64,
                    swap,
                    crc: None,
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
    // The values travel as the one metadata pair a load reads back as them.
    let metadata = dict.stored_metadata();
    Index::new(format, sources, records, entries, metadata)
}
