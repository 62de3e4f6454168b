//! What a checkpoint's index is made of: records (where bytes lie) and
//! entries (the tensors over them), and a header's parts viewed over a
//! file's bytes in memory (how `tsr_load` reads a format indexed from its
//! header). Knows no format and no source: the index (`ckpt_index`) and
//! the header readers (`header_index`) build on it.

use super::dict::TensorDict;
use crate::dtype::DType;
use crate::error::Result;
use crate::storage::Storage;

/// Where a record's bytes are.
pub(crate) enum RecordData {
    /// At `offset` of source `source` of the index.
    Range { source: usize, offset: u64 },
    /// In this CPU storage (from its first byte).
    Resident(Storage),
    /// Gathered from ranges of the index's sources, in record order, each
    /// following the last (a tensor a DCP checkpoint keeps in chunks that
    /// are each a contiguous run of its row-major bytes).
    Pieces(Vec<Piece>),
}

/// `len` bytes of a record at byte `at` of it, from byte `offset` of
/// source `source`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    pub at: u64,
    pub source: usize,
    pub offset: u64,
    pub len: u64,
}

impl RecordData {
    /// The sources its bytes are read from.
    pub(crate) fn sources(&self) -> Vec<usize> {
        match self {
            RecordData::Range { source, .. } => vec![*source],
            RecordData::Resident(_) => Vec::new(),
            RecordData::Pieces(pieces) => pieces.iter().map(|p| p.source).collect(),
        }
    }
}

/// A record: `len` bytes tensors view.
pub(crate) struct RecordSpec {
    pub data: RecordData,
    pub len: u64,
    /// For a range stored big-endian: the width of the groups of bytes
    /// reversed once read (the item size; half of it for complex); 0 for
    /// bytes used as stored.
    pub swap: usize,
    /// The CRC-32 its archive gives it (a zip entry's), checked when the
    /// record is fetched whole (`fetch`); None where the format has none.
    pub crc: Option<RecordCrc>,
}

/// The CRC-32 a zip archive gives the entry a record lies in: the entry's
/// name (for messages), the CRC-32 of its bytes, and those of its bytes
/// before the record (an npz entry's npy header) already hashed.
#[derive(Clone)]
pub(crate) struct RecordCrc {
    pub entry: String,
    pub expected: u32,
    pub prefix: crc32fast::Hasher,
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
                made[e.record] = Some(if r.swap > 1 {
                    source.record_swapped(at, len, r.swap)?
                } else {
                    source.record(at, len, e.dtype.itemsize())?
                });
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
            dict.set_stored_metadata(k, v)?;
        }
        Ok(dict)
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
