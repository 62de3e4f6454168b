//! A checkpoint indexed by reads through its byte sources, without
//! mapping it: a header at a file's front (safetensors, npy, GGUF), a zip
//! archive's directory and pickles (torch, TorchScript, npz), and a
//! Hugging Face shard index with each shard indexed so (the shards'
//! records ranges of their own sources, checked against the index by
//! `hf_shards::merge`, the checks of a load of the shards), torch's
//! legacy format (its pickles and storage counts, `legacy_index`). Any
//! other file (legacy torch's tar container, a DCP `.metadata`, a shard
//! index over such shards) is given back to the caller, which maps it
//! (`ckpt_index::Index::from_mapped`) or reads it whole.

use super::byte_source::{ByteSource, FileSource};
use super::ckpt_index::{Index, RecordData};
use super::formats::Format;
use super::hf_shards::{self, Shard};
use super::{shard_files, LoadFlags};
use crate::error::Result;
use std::path::Path;
use std::sync::Arc;

/// The index of the file in `source` (opened at `path`) read through it,
/// or the source back when this way does not index it (module
/// documentation).
pub(crate) fn index_by_reads(
    source: FileSource,
    path: &Path,
    format: Format,
    flags: LoadFlags,
) -> Result<std::result::Result<Index, FileSource>> {
    index_file(source, path, format, flags, true)
}

/// [`index_by_reads`]; a shard index only where `shards` (not for a
/// shard: an index naming indexes is not a checkpoint).
fn index_file(
    source: FileSource,
    path: &Path,
    format: Format,
    flags: LoadFlags,
    shards: bool,
) -> Result<std::result::Result<Index, FileSource>> {
    let first = source.first_bytes(16)?;
    if let Some((found, parts)) = header_parts(&source, first.clone(), format)? {
        return Index::new(
            found,
            vec![Arc::new(source)],
            parts.records,
            parts.entries,
            parts.metadata,
        )
        .map(Ok)
        .map_err(|e| crate::err!(Format, "{}: {}", found.name(), e.message()));
    }
    let zip_format = matches!(
        format,
        Format::Auto | Format::Torch | Format::TorchScript | Format::Npz
    );
    if super::zip_head::is_zip(&first) && zip_format {
        let source = Arc::new(source);
        if let Some(index) = super::zip_head::index(source.clone() as _, format, flags)? {
            return Ok(Ok(index));
        }
        return Arc::try_unwrap(source)
            .map(Err)
            .map_err(|_| crate::err!(Internal, "the zip index kept its source"));
    }
    let legacy_format = matches!(format, Format::Auto | Format::TorchLegacy);
    if legacy_format && super::legacy_index::may_be(&first) {
        let source = Arc::new(source);
        if let Some(index) = super::legacy_index::index(source.clone() as _, flags)? {
            return Ok(Ok(index));
        }
        return Arc::try_unwrap(source)
            .map(Err)
            .map_err(|_| crate::err!(Internal, "the legacy index kept its source"));
    }
    let index_format = matches!(format, Format::Auto | Format::Safetensors | Format::Torch);
    let json = first.iter().find(|b| !b" \t\r\n".contains(b)) == Some(&b'{');
    if shards && index_format && json && source.len() <= hf_shards::MAX_INDEX_BYTES as u64 {
        let mut bytes = vec![0u8; source.len() as usize];
        source.read_at(0, &mut bytes)?;
        if hf_shards::is_index(&bytes) {
            let source = Arc::new(source);
            if let Some(index) = shard_index(source.clone(), path, &bytes, format, flags)? {
                return Ok(Ok(index));
            }
            return Arc::try_unwrap(source)
                .map(Err)
                .map_err(|_| crate::err!(Internal, "the shard index kept its source"));
        }
    }
    Ok(Err(source))
}

/// The index of the shards the shard index at `path` (read through
/// `source`: its bytes `bytes`) names, each indexed by reads, in the
/// index's order; None when a shard cannot be indexed so. The index's
/// own source is the first (counted in the bytes read, no record in it).
fn shard_index(
    source: Arc<FileSource>,
    path: &Path,
    bytes: &[u8],
    format: Format,
    flags: LoadFlags,
) -> Result<Option<Index>> {
    let what = hf_shards::what(path);
    let parsed = hf_shards::parse_index(bytes, &what)?;
    let (dir, roots) = hf_shards::shard_dir(path)?;
    let opened = shard_files::open_files(dir, &roots, &parsed.files, &what)?;
    let mut sources: Vec<Arc<dyn ByteSource>> = vec![source];
    let mut records = Vec::new();
    let mut shards = Vec::with_capacity(opened.len());
    let mut first: Option<Format> = None;
    for (i, (file, real)) in opened.into_iter().enumerate() {
        let in_shard =
            |e: crate::error::Error| e.context(format!("shard '{}' of {what}", parsed.files[i]));
        let shard = FileSource::new(file, &real)?;
        let shard = match index_file(shard, &real, format, flags, false).map_err(in_shard)? {
            Ok(shard) => shard,
            Err(_) => return Ok(None),
        };
        first.get_or_insert(shard.format);
        let (base_source, base_record) = (sources.len(), records.len());
        let (shard_sources, shard_records, entries, metadata) = shard.into_parts();
        sources.extend(shard_sources);
        records.extend(shard_records.into_iter().map(|mut r| {
            if let RecordData::Range { source, .. } = &mut r.data {
                *source += base_source;
            }
            r
        }));
        let tensors = entries
            .into_iter()
            .map(|mut e| {
                e.record += base_record;
                (e.name.clone(), e.nbytes(), e)
            })
            .map(|(name, nbytes, e)| (name, e, nbytes))
            .collect();
        shards.push(Shard {
            file: i,
            tensors,
            metadata,
        });
    }
    let (tensors, metadata) = hf_shards::merge(&parsed, &what, shards)?;
    let entries = tensors.into_iter().map(|(_, e)| e).collect();
    let told = hf_shards::told(first, format);
    Index::new(told, sources, records, entries, metadata).map(Some)
}

/// The parts of a file whose header is at its front (safetensors, npy,
/// GGUF), read through `source` from its first bytes `first`, when the
/// file is one of them (and `format` allows it); None for any other.
fn header_parts(
    source: &FileSource,
    first: Vec<u8>,
    format: Format,
) -> Result<Option<(Format, super::ckpt_parts::Parts)>> {
    use super::header_index as h;
    let allows = |f: Format| format == Format::Auto || format == f;
    let is = |f: Format| f.handler().is_some_and(|h| h.detect(&first));
    Ok(
        if allows(Format::Safetensors) && h::is_safetensors(&first, source.len()) {
            Some((Format::Safetensors, h::safetensors(source, first)?))
        } else if allows(Format::Npy) && is(Format::Npy) {
            Some((Format::Npy, h::npy(source, first)?))
        } else if allows(Format::Gguf) && is(Format::Gguf) {
            Some((Format::Gguf, h::gguf(source, first)?))
        } else {
            None
        },
    )
}
