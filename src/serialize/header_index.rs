//! Indexes read through a byte source for the formats whose header is
//! at the front of the file: a safetensors file costs its 8-byte length
//! and its JSON header, an npy file its header, a GGUF file its header
//! and tensor infos (read in growing steps from 256 KiB), nothing of the
//! tensors' bytes. Each header is parsed by the same code a whole-file
//! load uses (`safetensors_header`, `npy::array_parts`, `gguf::parts`),
//! so both refuse the same files with the same messages.

use super::byte_source::ByteSource;
use super::ckpt_parts::Parts;
use super::safetensors_header;
use crate::error::Result;

/// The safetensors crate's bound on a header's length.
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Whether the first bytes `first` of a source of `len` bytes start a
/// safetensors file: an 8-byte header length that fits, then `{`.
pub(crate) fn is_safetensors(first: &[u8], len: u64) -> bool {
    first.len() >= 9
        && first[8] == b'{'
        && u64::from_le_bytes(first[..8].try_into().expect("8 bytes")) <= len.saturating_sub(8)
}

/// `first` grown to the first `want` bytes of `source` (reading only
/// what it lacks).
fn grow(source: &dyn ByteSource, mut first: Vec<u8>, want: u64) -> Result<Vec<u8>> {
    let have = first.len();
    if (have as u64) < want {
        first.resize(want as usize, 0);
        source.read_at(have as u64, &mut first[have..])?;
    }
    Ok(first)
}

/// The parts of the npy file in `source`, whose first bytes are `first`
/// (up to 16): reads the rest of its header.
pub(crate) fn npy(source: &dyn ByteSource, first: Vec<u8>) -> Result<Parts> {
    let len = source.len();
    let want = (super::npy::header_len(&first) as u64).min(len);
    let head = grow(source, first, want)?;
    let (record, entry) =
        super::npy::array_parts(&head, len, super::npy::ARRAY_NAME).map_err(|e| {
            match e.message() {
                m if m.contains("cut short") => {
                    crate::err!(Format, "npy: the file is truncated: {}", &m[5..])
                }
                _ => e,
            }
        })?;
    Ok(Parts {
        records: vec![record],
        entries: vec![entry],
        metadata: Vec::new(),
    })
}

/// The parts of the GGUF file in `source`, whose first bytes are `first`:
/// reads its header from 256 KiB, four times more each time it runs past
/// what was read (a header is read once, never again from its start).
pub(crate) fn gguf(source: &dyn ByteSource, first: Vec<u8>) -> Result<Parts> {
    let len = source.len();
    let mut want = len.min(256 << 10);
    let mut head = first;
    loop {
        head = grow(source, head, want)?;
        if let Some(parts) = super::gguf::parts(&head, len)? {
            return Ok(parts);
        }
        crate::ensure!(
            want < len,
            Internal,
            "gguf: the header runs past the whole file of {len} bytes"
        );
        want = want.saturating_mul(4).min(len);
    }
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
    let mut head = grow(source, first, head_len)?;
    head.truncate(head_len as usize);
    safetensors_header::parts(&head, len)
}
