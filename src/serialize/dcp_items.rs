//! Where a torch.distributed.checkpoint directory's items lie: the
//! metadata file's name, the files the items name, and each item's bytes
//! inside its file (shared by the load that stitches and the index made
//! by reads; that no two items share a byte is
//! `dcp_metadata::check_bytes_disjoint`).

use super::dcp_metadata::{Item, Location, Metadata};
use crate::error::Result;

/// The metadata file's name in the directory.
pub(crate) const METADATA: &str = ".metadata";

/// The files the items of `meta` lie in, each once, in the order first
/// named.
pub(crate) fn files_of(meta: &Metadata) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    let mut add = |at: &Location| {
        if !files.contains(&at.file) {
            files.push(at.file.clone());
        }
    };
    for (_, item) in &meta.entries {
        match item {
            Item::Bytes(at) => add(at),
            Item::Tensor { chunks, .. } => chunks.iter().for_each(|c| add(&c.at)),
        }
    }
    files
}

/// Refuses item `name`'s bytes at `at` unless they lie inside its file of
/// `len` bytes.
pub(crate) fn check_inside(at: &Location, len: u64, name: &str) -> Result<()> {
    crate::ensure!(
        at.offset.checked_add(at.length).is_some_and(|e| e <= len),
        Format,
        "the DCP checkpoint: '{name}': its bytes at {} (+{}) run past the end of '{}' ({len} \
         bytes)",
        at.offset,
        at.length,
        at.file
    );
    Ok(())
}
