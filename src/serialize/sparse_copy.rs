//! A sparse copy of a file read through its byte source: anonymous memory
//! of the file's length, reserved without backing (pages exist only where
//! bytes were written), filled range by range with what a format's reader
//! will look at. The reader then runs over it with its records noted
//! (`Source::lazy`) instead of read, and the noted records become the
//! index's ranges. The zip-based formats (`zip_head`) and torch's legacy
//! format (`legacy_index`) are indexed so.

use super::byte_source::ByteSource;
use super::ckpt_index::{Index, RecordCrc};
use super::formats::Format;
use super::source::{Noted, Source};
use super::LoadFlags;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Arc;

/// The file's bytes where read, zeros elsewhere.
pub(crate) struct Sparse<'s> {
    source: &'s dyn ByteSource,
    map: memmap2::MmapMut,
    /// The ranges read, sorted, disjoint.
    read: Vec<(u64, u64)>,
}

impl<'s> Sparse<'s> {
    /// An empty copy of the file in `source`; None where its length does
    /// not fit the address space or cannot be reserved (the caller then
    /// indexes the file another way).
    pub(crate) fn new(source: &'s dyn ByteSource) -> Option<Self> {
        let len = usize::try_from(source.len()).ok()?;
        let map = memmap2::MmapOptions::new()
            .len(len)
            .no_reserve_swap()
            .map_anon()
            .ok()?;
        Some(Sparse {
            source,
            map,
            read: Vec::new(),
        })
    }

    /// The copy: the file's bytes where filled, zeros elsewhere.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Reads [a, b) (clamped to the file) where not read yet.
    pub(crate) fn fill(&mut self, a: u64, b: u64) -> Result<()> {
        let b = b.min(self.source.len());
        let mut at = a;
        let mut gaps = Vec::new();
        for &(x, y) in &self.read {
            if y <= at || x >= b {
                continue;
            }
            if x > at {
                gaps.push((at, x));
            }
            at = at.max(y);
        }
        if at < b {
            gaps.push((at, b));
        }
        for (x, y) in gaps {
            self.source
                .read_at(x, &mut self.map[x as usize..y as usize])?;
            self.read.push((x, y));
        }
        self.read.sort_unstable();
        Ok(())
    }

    /// The index of what the reader of `format` finds in the copy, the
    /// records it would load noted as ranges of `source` (the file this
    /// copy was read from), each given the CRC-32 `crcs` holds for its
    /// offset; None when the reader fails (the caller leaves the file to
    /// the mapped index, whose reader gives the error the file deserves).
    pub(crate) fn index(
        self,
        source: Arc<dyn ByteSource>,
        format: Format,
        flags: LoadFlags,
        crcs: &HashMap<u64, (u64, RecordCrc)>,
    ) -> Result<Option<Index>> {
        let noted = Noted::default();
        let lazy = Source {
            bytes: &self.map,
            backing: None,
            direct: false,
            lazy: Some(&noted),
        };
        let Ok((found, dict)) = super::load_source(&lazy, format, flags) else {
            return Ok(None);
        };
        drop(self);
        Index::from_noted(found, &dict, &noted, source, crcs).map(Some)
    }
}
