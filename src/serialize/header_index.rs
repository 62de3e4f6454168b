//! Indexes read through a byte source for the formats whose header is
//! at the front of the file: a safetensors file costs its 8-byte length
//! and its JSON header, nothing of the tensors' bytes. The header is
//! checked by the same code a whole-file load uses
//! (`safetensors_header`), so both refuse the same files with the same
//! messages.

use super::byte_source::ByteSource;
use super::ckpt_parts::{Entry, Parts, RecordData, RecordSpec};
use super::dtypes;
use super::safetensors_header;
use super::safetensors_header::length_err;
use crate::error::Result;
use crate::tensor::layout;

/// The safetensors crate's bound on a header's length.
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Whether the first bytes `first` of a source of `len` bytes start a
/// safetensors file: an 8-byte header length that fits, then `{`.
pub(crate) fn is_safetensors(first: &[u8], len: u64) -> bool {
    first.len() >= 9
        && first[8] == b'{'
        && u64::from_le_bytes(first[..8].try_into().expect("8 bytes")) <= len.saturating_sub(8)
}

/// The parts of the safetensors file in `source`, whose first bytes
/// `first` (up to 16) the caller read to detect it: reads the rest of the
/// 8-byte length and the header, nothing else.
pub(crate) fn safetensors(source: &dyn ByteSource, first: Vec<u8>) -> Result<Parts> {
    let len = source.len();
    let n = match first.get(..8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => 0,
    };
    // Past the bound, or past the file: the header check refuses it with
    // the whole-file load's message (from the first bytes alone).
    let head_len = if n <= MAX_HEADER_BYTES && n.saturating_add(8) <= len {
        8 + n
    } else {
        first.len() as u64
    };
    let mut head = first;
    let have = head.len();
    if (have as u64) < head_len {
        head.resize(head_len as usize, 0);
        source.read_at(have as u64, &mut head[have..])?;
    } else {
        head.truncate(head_len as usize);
    }
    safetensors_parts(&head, len)
}

/// The records, tensors and metadata of a safetensors file of `len`
/// bytes from its first bytes `head` (the 8-byte length and the header,
/// where the file has them): records are ranges of source 0.
pub(crate) fn safetensors_parts(head: &[u8], len: u64) -> Result<Parts> {
    let header = safetensors_header::read_head(head, len, |e| length_err(head, len, e))?;
    let data_start = 8 + header.len as u64;
    let mut records = Vec::with_capacity(header.tensors.len());
    let mut entries = Vec::with_capacity(header.tensors.len());
    for (name, info) in &header.tensors {
        let dtype = dtypes::dtype_of_safetensors(info.dtype).ok_or_else(|| {
            crate::err!(
                Format,
                "safetensors: tensor '{name}' has dtype {:?}, which tessera cannot hold",
                info.dtype
            )
        })?;
        let sizes: Vec<i64> = info
            .shape
            .iter()
            .map(|&s| i64::try_from(s))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                crate::err!(Format, "safetensors: tensor '{name}' has a size past int64")
            })?;
        let (start, end) = info.data_offsets;
        records.push(RecordSpec {
            data: RecordData::Range {
                source: 0,
                offset: data_start + start as u64,
            },
            len: (end - start) as u64,
        });
        entries.push(Entry {
            name: name.clone(),
            record: records.len() - 1,
            offset: 0,
            strides: layout::contiguous_strides(&sizes).to_vec(),
            sizes,
            dtype,
        });
    }
    let mut metadata = header.metadata.unwrap_or_default();
    metadata.sort();
    Ok(Parts {
        records,
        entries,
        metadata,
    })
}
