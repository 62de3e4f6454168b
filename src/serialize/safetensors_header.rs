//! A safetensors file's header, read in one pass.
//!
//! The `safetensors` crate's `read_metadata` reads the JSON through a
//! flattened map (serde buffers every value before it is typed) and keeps
//! the last of two entries with one name, so a load used to read the
//! header twice: once by the crate, once more to refuse a name given
//! twice. Here one pass types the entries (the crate's `TensorInfo` and
//! `Dtype`), refuses a name or metadata key given twice, and keeps the
//! header's order; the checks after it are the crate's, with its error
//! values (so messages are unchanged): the header length, UTF-8, the
//! tensors' bytes one after another from offset 0 (none overlapping, none
//! missing), sizes that match shape and dtype without overflow, and the
//! data ending where the file does. A loop of mapped read-only loads of
//! a 2 MiB file of 8 tensors: 23.1-23.4 us a load with the two reads,
//! 19.9-20.3 us with this one, the crate's map and `deserialize`
//! 20.1-21.4 us (docs/PERFORMANCE.md, "safetensors mmap").

use super::ckpt_parts::{Entry, Parts, RecordData, RecordSpec};
use super::dtypes;
use crate::error::{Error, Result};
use crate::tensor::layout;
use safetensors::tensor::TensorInfo;
use safetensors::SafeTensorError as E;
use serde::de::{DeserializeSeed, MapAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The crate's bound on a header's length (`MAX_HEADER_SIZE`).
const MAX_HEADER_BYTES: usize = 100_000_000;

/// A checked header.
pub(super) struct Header {
    /// The JSON's length: the tensors' bytes start at 8 + this.
    pub(super) len: usize,
    /// The tensors by their data offsets (ties in header order).
    pub(super) tensors: Vec<(String, TensorInfo)>,
    /// `__metadata__`'s pairs, in header order.
    pub(super) metadata: Option<Vec<(String, String)>>,
}

/// Reads and checks the header of the safetensors file `bytes`. Errors:
/// `how(crate error)` for what the crate refuses; a name or metadata key
/// given twice is a Format error naming it.
#[cfg(test)]
pub(super) fn read(bytes: &[u8], how: impl Fn(E) -> Error) -> Result<Header> {
    read_head(bytes, bytes.len() as u64, how)
}

/// [`read`] from the first bytes of a file of `file_len` bytes: `head`
/// holds at least the 8-byte length and the header where the file does.
pub(super) fn read_head(bytes: &[u8], file_len: u64, how: impl Fn(E) -> Error) -> Result<Header> {
    let Some(first) = bytes.get(..8) else {
        return Err(how(E::HeaderTooSmall));
    };
    let n = u64::from_le_bytes(first.try_into().expect("8 bytes"));
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_HEADER_BYTES)
        .ok_or_else(|| how(E::HeaderTooLarge))?;
    let json = bytes
        .get(8..8 + n)
        .ok_or_else(|| how(E::InvalidHeaderLength))?;
    let text = std::str::from_utf8(json).map_err(|e| how(E::InvalidHeader(e)))?;
    let mut twice = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let (mut tensors, metadata) = Entries { twice: &mut twice }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| match twice.take() {
            Some(what) => crate::err!(
                Format,
                "safetensors: the header names {what} twice: expected each name once (JSON \
                 readers differ on which one they keep)"
            ),
            None => how(E::InvalidHeaderDeserialization(e)),
        })?;
    // Stable: tensors of one offset (empty ones) keep the header's order.
    tensors.sort_by_key(|(_, info)| info.data_offsets);
    let end = check_offsets(&tensors).map_err(&how)?;
    if (end as u64).checked_add(8 + n as u64) != Some(file_len) {
        return Err(how(E::MetadataIncompleteBuffer));
    }
    Ok(Header {
        len: n,
        tensors,
        metadata,
    })
}

/// The crate's checks of tensors sorted by offset: each starts where the
/// one before ends (the first at 0), and holds shape x dtype bytes.
/// Returns where the last ends.
fn check_offsets(tensors: &[(String, TensorInfo)]) -> std::result::Result<usize, E> {
    let mut at = 0;
    for (name, info) in tensors {
        let (start, end) = info.data_offsets;
        if start != at || end < start {
            return Err(E::InvalidOffset(name.clone()));
        }
        at = end;
        let bits = info
            .shape
            .iter()
            .try_fold(1usize, |n, &s| n.checked_mul(s))
            .and_then(|n| n.checked_mul(info.dtype.bitsize()))
            .ok_or(E::ValidationOverflow)?;
        if bits % 8 != 0 {
            return Err(E::MisalignedSlice);
        }
        if end - start != bits / 8 {
            return Err(E::TensorInvalidInfo);
        }
    }
    Ok(at)
}

type Pairs = Vec<(String, String)>;

/// The header's object: tensors and `__metadata__`, names checked to be
/// unique (`twice` says which was not).
struct Entries<'a> {
    twice: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Entries<'_> {
    type Value = (Vec<(String, TensorInfo)>, Option<Pairs>);

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Entries<'_> {
    type Value = (Vec<(String, TensorInfo)>, Option<Pairs>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut tensors: Vec<(String, TensorInfo)> = Vec::new();
        let mut metadata = None;
        let mut metadata_seen = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "__metadata__" {
                if std::mem::replace(&mut metadata_seen, true) {
                    return Err(refuse(self.twice, format!("'{key}'")));
                }
                metadata = map.next_value_seed(Metadata {
                    twice: &mut *self.twice,
                })?;
                continue;
            }
            tensors.push((key, map.next_value::<TensorInfo>()?));
        }
        // A name given twice: neighbours once sorted (no hashing, no
        // copies of the names).
        let mut by_name: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
        by_name.sort_unstable();
        if let Some(w) = by_name.windows(2).find(|w| w[0] == w[1]) {
            return Err(refuse(self.twice, format!("tensor '{}'", w[0])));
        }
        Ok((tensors, metadata))
    }
}

/// The error for `what` given twice, recorded in `twice` so that `read`
/// can name it (the serde error alone would carry JSON's position).
fn refuse<Er: serde::de::Error>(twice: &mut Option<String>, what: String) -> Er {
    let e = Er::custom(&what);
    *twice = Some(what);
    e
}

/// `__metadata__`: null, or an object of strings whose keys are checked
/// to be unique.
struct Metadata<'a> {
    twice: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Metadata<'_> {
    type Value = Option<Pairs>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Metadata<'_> {
    type Value = Option<Pairs>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("null or a JSON object of strings")
    }

    fn visit_none<Er: serde::de::Error>(self) -> std::result::Result<Self::Value, Er> {
        Ok(None)
    }

    fn visit_unit<Er: serde::de::Error>(self) -> std::result::Result<Self::Value, Er> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut pairs = Vec::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(refuse(self.twice, format!("metadata key '{key}'")));
            }
            let value = map.next_value::<String>()?;
            pairs.push((key, value));
        }
        Ok(Some(pairs))
    }
}

pub(super) fn st_err(e: safetensors::SafeTensorError) -> Error {
    match e {
        safetensors::SafeTensorError::InvalidOffset(name) => crate::err!(
            Format,
            "safetensors: tensor '{name}': its data_offsets do not start where the tensor \
             before it (in offset order) ends: expected the tensors' bytes one after another, \
             none overlapping, none missing (as the safetensors package requires)"
        ),
        e => crate::err!(Format, "safetensors: {e}"),
    }
}

/// A header or length error of the crate in the file's terms: how long
/// the file is and how long its first bytes and header say it should be.
pub(super) fn length_err(bytes: &[u8], len: u64, e: safetensors::SafeTensorError) -> Error {
    use safetensors::SafeTensorError as E;
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    match (e, n) {
        (E::HeaderTooSmall, _) => crate::err!(
            Format,
            "safetensors: the file is truncated: it is {len} bytes, less than the 8 bytes that \
             give its header's length"
        ),
        (E::InvalidHeaderLength, Some(n)) if n.saturating_add(8) > len => crate::err!(
            Format,
            "safetensors: the file is truncated: its first 8 bytes say a header of {n} bytes \
             follows, and the file has {} bytes after them",
            len - 8
        ),
        (E::MetadataIncompleteBuffer, Some(n)) => {
            let header = bytes.get(8..8 + n as usize).unwrap_or_default();
            let data = serde_json::from_slice::<serde_json::Value>(header)
                .ok()
                .and_then(|v| {
                    v.as_object()?
                        .values()
                        .filter_map(|t| t.get("data_offsets")?.get(1)?.as_u64())
                        .max()
                })
                .unwrap_or(0);
            let want = 8 + n + data;
            if len < want {
                crate::err!(
                    Format,
                    "safetensors: the file is truncated: its header places {data} bytes of \
                     tensor data after the {}-byte header, so it should be {want} bytes; it is \
                     {len}",
                    8 + n
                )
            } else {
                crate::err!(
                    Format,
                    "safetensors: {} bytes follow the tensor data the header describes (the \
                     file should be {want} bytes; it is {len}): expected nothing after them",
                    len - want
                )
            }
        }
        (e, _) => st_err(e),
    }
}

/// The records, tensors and metadata of a safetensors file of `len`
/// bytes from its first bytes `head` (the 8-byte length and the header,
/// where the file has them): records are ranges of source 0.
pub(crate) fn parts(head: &[u8], len: u64) -> Result<Parts> {
    let header = read_head(head, len, |e| length_err(head, len, e))?;
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
            swap: 0,
            crc: None,
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
