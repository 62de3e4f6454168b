//! A torch.distributed.checkpoint directory indexed by reads: its
//! `.metadata` read whole, each tensor chunk's torch.save archive
//! indexed inside its `.distcp` file (`zip_head` over a window of the
//! file), and each tensor a record of its own: the chunk's bytes as a
//! range of its file, or for a tensor in several chunks, the runs of
//! each chunk that are contiguous in the tensor's row-major bytes
//! gathered in that order (`RecordData::Pieces`: one run per chunk for
//! chunks along dim 0, one per row for chunks along dim 1). Anything
//! else (a chunk stored transposed, big-endian beside native ones, runs
//! shorter than [`MIN_RUN`] bytes on average, more than [`MAX_RUNS`] in a
//! tensor or [`MAX_TOTAL_RUNS`] in all, an archive this way cannot
//! parse) is left to the mapped load, which stitches or refuses it. The checks a load makes hold here too: every
//! item inside its file, no two items over one byte, each chunk one
//! compact tensor of the metadata's dtype and sizes.

use super::byte_source::{ByteSource, FileSource, Window};
use super::ckpt_index::{Entry, Index, RecordData, RecordSpec};
use super::ckpt_parts::Piece;
use super::dcp_items::{check_inside, files_of, METADATA};
use super::dcp_metadata::{self, Chunk, Item, Location};
use super::formats::Format;
use super::{shard_files, LoadFlags, SKIPPED_KEY};
use crate::dtype::DType;
use crate::error::Result;
use std::path::Path;
use std::sync::Arc;

/// The most runs a tensor is gathered from.
const MAX_RUNS: usize = 1 << 20;
/// The most runs of all tensors of an index (32 bytes each: 64 MiB).
const MAX_TOTAL_RUNS: usize = 1 << 21;
/// The fewest bytes a tensor's runs hold on average, where its chunks
/// are split in several runs and it is larger than [`SMALL`] (a read a
/// run: shorter runs are faster stitched from a mapping).
const MIN_RUN: u64 = 64;
/// Tensors of at most this many bytes are gathered from runs of any
/// length.
const SMALL: u64 = 64 << 10;

/// The index of the DCP checkpoint in `dir`, or None where this way does
/// not index it (module documentation).
pub(crate) fn index(dir: &Path, flags: LoadFlags) -> Result<Option<Index>> {
    let what = format!("the DCP checkpoint '{}'", dir.display());
    let roots = shard_files::roots(dir, &dir.join(METADATA))?;
    let (file, real) = crate::files::open_inside(dir, METADATA, &roots, &what)?;
    let meta_source = Arc::new(FileSource::new(file, &real)?);
    let open = |files: &[String], named_by: &str| -> Result<Vec<Arc<dyn ByteSource>>> {
        shard_files::open_files(dir, &roots, files, named_by)?
            .into_iter()
            .map(|(file, real)| Ok(Arc::new(FileSource::new(file, &real)?) as _))
            .collect()
    };
    index_with(&what, meta_source, open, flags)
}

/// [`index`] of the DCP checkpoint `what` whose `.metadata` is read
/// through `meta_source`, its data files opened by `open` (their names,
/// and how messages name what names them): files in a directory, or
/// objects under a URL prefix (`remote`).
pub(crate) fn index_with(
    what: &str,
    meta_source: Arc<dyn ByteSource>,
    open: impl FnOnce(&[String], &str) -> Result<Vec<Arc<dyn ByteSource>>>,
    flags: LoadFlags,
) -> Result<Option<Index>> {
    let mut bytes = vec![0u8; meta_source.len() as usize];
    meta_source.read_at(0, &mut bytes)?;
    let meta = dcp_metadata::parse(&bytes).map_err(|e| e.context(what))?;
    let files = files_of(&meta);
    let mut sources: Vec<Arc<dyn ByteSource>> = vec![meta_source];
    sources.extend(open(&files, &format!("{what}'s metadata"))?);
    let source_of = |at: &Location| 1 + files.iter().position(|f| *f == at.file).unwrap_or(0);
    for (name, item) in &meta.entries {
        let ats: Vec<&Location> = match item {
            Item::Bytes(at) => vec![at],
            Item::Tensor { chunks, .. } => chunks.iter().map(|c| &c.at).collect(),
        };
        for at in ats {
            check_inside(at, sources[source_of(at)].len(), name)?;
        }
    }
    dcp_metadata::check_bytes_disjoint(&meta.entries).map_err(|e| e.context(what))?;
    let mut records = Vec::new();
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    let mut total_runs = 0usize;
    for (name, item) in &meta.entries {
        let Item::Tensor {
            dtype,
            size,
            chunks,
        } = item
        else {
            skipped.push(name.clone());
            continue;
        };
        let mut pieces = Vec::with_capacity(chunks.len());
        let mut swap = None;
        for c in chunks {
            let source = source_of(&c.at);
            let Some((runs, width)) = chunk_runs(&sources[source], source, c, *dtype, size, flags)?
            else {
                return Ok(None);
            };
            total_runs += runs.len();
            let many = pieces.len() + runs.len() > MAX_RUNS || total_runs > MAX_TOTAL_RUNS;
            if *swap.get_or_insert(width) != width || many {
                return Ok(None);
            }
            pieces.extend(runs);
        }
        pieces.sort_by_key(|p| p.at);
        let len = contiguous_bytes(size, *dtype);
        let mut end = 0;
        for p in &pieces {
            if p.at != end {
                return Ok(None);
            }
            end += p.len;
        }
        let split = pieces.len() > chunks.len();
        let slow = split && end > SMALL && end < pieces.len() as u64 * MIN_RUN;
        if Some(end) != len || slow {
            return Ok(None);
        }
        let data = match pieces.as_slice() {
            [p] if p.at == 0 => RecordData::Range {
                source: p.source,
                offset: p.offset,
            },
            _ => RecordData::Pieces(pieces),
        };
        records.push(RecordSpec {
            data,
            len: end,
            swap: swap.unwrap_or(0),
            crc: None,
        });
        entries.push(Entry {
            name: name.clone(),
            record: records.len() - 1,
            offset: 0,
            sizes: size.clone(),
            strides: row_major(size),
            dtype: *dtype,
        });
    }
    let metadata = if skipped.is_empty() {
        Vec::new()
    } else {
        vec![(SKIPPED_KEY.to_owned(), skipped.join("\n"))]
    };
    Index::new(Format::Dcp, sources, records, entries, metadata).map(Some)
}

/// Chunk `c` of a tensor of `size` and `dtype`, in source `source` (its
/// number `i` in the index): the runs of the tensor's row-major bytes
/// its archive's one tensor holds, and that record's swap width; None
/// where the archive is not one compact row-major tensor of the chunk's
/// dtype and sizes, or its runs are more than [`MAX_RUNS`].
fn chunk_runs(
    source: &Arc<dyn ByteSource>,
    i: usize,
    c: &Chunk,
    dtype: DType,
    size: &[i64],
    flags: LoadFlags,
) -> Result<Option<(Vec<Piece>, usize)>> {
    let window = Arc::new(Window {
        inner: source.clone(),
        start: c.at.offset,
        len: c.at.length,
    });
    let flags = LoadFlags {
        skip_unknown: false,
        ..flags
    };
    let Some(chunk) = super::zip_head::index(window, Format::Torch, flags)? else {
        return Ok(None);
    };
    let [e] = chunk.entries.as_slice() else {
        return Ok(None);
    };
    let record = &chunk.records[e.record];
    let RecordData::Range { offset, .. } = record.data else {
        return Ok(None);
    };
    let compact = e.name == "tensor"
        && e.dtype == dtype
        && e.sizes == c.sizes
        && e.offset == 0
        && Some(record.len) == contiguous_bytes(&e.sizes, dtype)
        && same_strides(&e.sizes, &e.strides, &row_major(&e.sizes));
    if !compact {
        return Ok(None);
    }
    let item = dtype.itemsize() as u64;
    let from = c.at.offset + offset;
    Ok(runs(size, c).map(|runs| {
        let pieces = runs
            .into_iter()
            .map(|(at, src, len)| Piece {
                at: at * item,
                source: i,
                offset: from + src * item,
                len: len * item,
            })
            .collect();
        (pieces, record.swap)
    }))
}

/// The runs of chunk `c` that are contiguous in a row-major tensor of
/// `size`: (element in the tensor, element in the chunk, elements), in
/// the chunk's order; None for more than [`MAX_RUNS`] or a chunk whose
/// dims do not match the tensor's (the tiling check refuses it).
fn runs(size: &[i64], c: &Chunk) -> Option<Vec<(u64, u64, u64)>> {
    let n = size.len();
    if c.sizes.len() != n || c.offsets.len() != n {
        return None;
    }
    if n == 0 {
        return Some(vec![(0, 0, 1)]);
    }
    let u = |v: i64| u64::try_from(v).ok();
    // The dims from the last one the chunk splits are one run.
    let k = (0..n).rev().find(|&d| c.sizes[d] != size[d]).unwrap_or(0);
    let strides = row_major(size);
    let run = c.sizes[k..]
        .iter()
        .try_fold(1u64, |p, &s| p.checked_mul(u(s)?))?;
    let count = c.sizes[..k]
        .iter()
        .try_fold(1u64, |p, &s| p.checked_mul(u(s)?))?;
    if run == 0 || count == 0 {
        return Some(Vec::new());
    }
    if count > MAX_RUNS as u64 {
        return None;
    }
    let mut out = Vec::with_capacity(count as usize);
    let mut index = vec![0i64; k];
    for r in 0..count {
        let at = (0..n).try_fold(0u64, |p, d| {
            let i = if d < k { index[d] } else { 0 };
            p.checked_add(u(c.offsets[d].checked_add(i)?)?.checked_mul(u(strides[d])?)?)
        })?;
        out.push((at, r * run, run));
        for d in (0..k).rev() {
            index[d] += 1;
            if index[d] < c.sizes[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Some(out)
}

/// The row-major strides of `sizes`.
fn row_major(sizes: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(sizes[d + 1].max(1));
    }
    strides
}

/// Whether `strides` lay out `sizes` as `expected` does (dims of size 1
/// may have any stride).
fn same_strides(sizes: &[i64], strides: &[i64], expected: &[i64]) -> bool {
    strides.len() == sizes.len()
        && sizes
            .iter()
            .zip(strides.iter().zip(expected))
            .all(|(&n, (&s, &e))| n == 1 || s == e)
}

/// The bytes of a row-major tensor of `sizes` and `dtype`.
fn contiguous_bytes(sizes: &[i64], dtype: DType) -> Option<u64> {
    sizes.iter().try_fold(dtype.itemsize() as u64, |n, &s| {
        n.checked_mul(u64::try_from(s).ok()?)
    })
}
