//! torch.save's legacy format indexed by reads: its pickles from the
//! front of the file (read from 256 KiB, four times more each time they
//! run past what was read), then each storage's 8-byte element count,
//! storage after storage, into a sparse copy of the file
//! (`sparse_copy`); the legacy reader then runs over the copy with its
//! storages noted as ranges instead of read. The storages' bytes are never
//! read at open.
//!
//! A file this way cannot index (its pickles do not parse, a storage runs
//! past the end, the tar container of PyTorch before 0.1.10) is left to
//! the mapped index, whose reader gives the error the file deserves (the
//! tensors a truncated file loses named).

use super::byte_source::ByteSource;
use super::ckpt_index::Index;
use super::formats::Format;
use super::sparse_copy::Sparse;
use super::{torch_legacy, torch_tar, LoadFlags};
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Arc;

/// The first read of the pickles.
const FIRST: u64 = 256 << 10;
/// What a tar header's magic needs read.
const TAR_MAGIC: u64 = 262;

/// Whether a file whose first bytes are `first` may be a legacy torch
/// file: its magic pickle starts with PROTO, or with LONG1 (protocols 0
/// and 1); `index` tells.
pub(crate) fn may_be(first: &[u8]) -> bool {
    matches!(first.first(), Some(0x80 | 0x8a))
}

/// The index of the legacy torch file in `source`, or None where this
/// way does not index it (module documentation).
pub(crate) fn index(source: Arc<dyn ByteSource>, flags: LoadFlags) -> Result<Option<Index>> {
    let len = source.len();
    let Some(mut sparse) = Sparse::new(&*source) else {
        return Ok(None);
    };
    let mut want = len.min(FIRST);
    sparse.fill(0, want.max(TAR_MAGIC))?;
    let legacy = Format::TorchLegacy.handler();
    if torch_tar::is_tar(sparse.bytes()) || !legacy.is_some_and(|h| h.detect(sparse.bytes())) {
        return Ok(None);
    }
    let storages = loop {
        let front = &sparse.bytes()[..want as usize];
        let parsed = torch_legacy::prefix(front, len as usize, flags).and_then(|p| {
            let end = p.end as u64;
            let storages: Vec<u64> = p.storages()?.iter().map(|&(_, elem)| elem).collect();
            Ok((end, storages))
        });
        match parsed {
            Ok(found) => break found,
            Err(_) if want < len => {
                want = want.saturating_mul(4).min(len);
                sparse.fill(0, want)?;
            }
            Err(_) => return Ok(None),
        }
    };
    let (mut pos, elems) = storages;
    for elem in elems {
        if pos.saturating_add(8) > len {
            return Ok(None);
        }
        sparse.fill(pos, pos + 8)?;
        let at = pos as usize;
        let count = u64::from_le_bytes(sparse.bytes()[at..at + 8].try_into().expect("8 bytes"));
        let end = count
            .checked_mul(elem)
            .and_then(|n| n.checked_add(pos + 8))
            .filter(|&end| end <= len);
        let Some(end) = end else {
            return Ok(None);
        };
        pos = end;
    }
    sparse.index(source.clone(), Format::TorchLegacy, flags, &HashMap::new())
}
