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
        self.fill_many(&[(a, b)])
    }

    /// Reads every range of `ranges` (clamped to the file) where not read
    /// yet; as many reads at once as the source fetches with (a remote
    /// object: its requests in flight, so that the local headers of a
    /// zip of hundreds of records cost a few round trips, not hundreds;
    /// a file: one after another).
    pub(crate) fn fill_many(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        let len = self.source.len();
        let mut want: Vec<(u64, u64)> = ranges
            .iter()
            .map(|&(a, b)| (a, b.min(len)))
            .filter(|(a, b)| a < b)
            .collect();
        want.sort_unstable();
        // Overlapping ranges merged: the gaps of each in what was read
        // are then disjoint from every other's.
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(want.len());
        for (a, b) in want {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        for (a, b) in merged {
            let mut at = a;
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
        }
        // (Sorted already: the merged ranges are, and each one's gaps.)
        let hints = self.source.fetch_hints();
        let gaps = join(gaps, hints.join_gap.unwrap_or(0), hints.chunk.unwrap_or(0));
        let threads = match hints.threads {
            Some(n) => n.clamp(1, gaps.len().max(1)),
            None => 1,
        };
        // Disjoint slices of the copy, dealt round-robin to the threads.
        let mut work: Vec<Vec<(u64, &mut [u8])>> = (0..threads).map(|_| Vec::new()).collect();
        let mut rest: &mut [u8] = &mut self.map;
        let mut base = 0u64;
        for (i, &(x, y)) in gaps.iter().enumerate() {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut((x - base) as usize);
            let (part, tail) = tail.split_at_mut((y - x) as usize);
            work[i % threads].push((x, part));
            rest = tail;
            base = y;
        }
        let source = self.source;
        let read_all = |list: Vec<(u64, &mut [u8])>| -> Result<()> {
            list.into_iter()
                .try_for_each(|(at, buf)| source.read_at(at, buf))
        };
        if threads == 1 {
            work.into_iter().try_for_each(read_all)?;
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = work
                    .into_iter()
                    .map(|list| s.spawn(move || read_all(list)))
                    .collect();
                handles.into_iter().try_for_each(|h| match h.join() {
                    Ok(r) => r,
                    Err(p) => std::panic::resume_unwind(p),
                })
            })?;
        }
        self.read.extend(gaps);
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

/// `ranges` (sorted, disjoint) with each one that starts less than `gap`
/// bytes after the last one's end joined to it, the joined span at most
/// `most` bytes: a source that asks for joins (a server) reads the bytes
/// between them rather than pay another round trip. A gap of 0 joins
/// nothing.
fn join(ranges: Vec<(u64, u64)>, gap: u64, most: u64) -> Vec<(u64, u64)> {
    if gap == 0 {
        return ranges;
    }
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a - last.1 < gap && b - last.0 <= most => last.1 = b,
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    /// A source of `bytes` that asks for `threads` reads at once, counts
    /// the bytes read and the most reads seen in flight together.
    struct Slow {
        bytes: Vec<u8>,
        threads: Option<usize>,
        gap: Option<u64>,
        read: AtomicU64,
        in_flight: AtomicUsize,
        most: AtomicUsize,
    }

    impl ByteSource for Slow {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            buf.copy_from_slice(&self.bytes[offset as usize..offset as usize + buf.len()]);
            self.read.fetch_add(buf.len() as u64, Ordering::SeqCst);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
        fn bytes_read(&self) -> u64 {
            self.read.load(Ordering::SeqCst)
        }
        fn name(&self) -> &str {
            "slow"
        }
        fn check_unchanged(&self) -> Result<()> {
            Ok(())
        }
        fn fetch_hints(&self) -> crate::serialize::byte_source::FetchHints {
            crate::serialize::byte_source::FetchHints {
                threads: self.threads,
                chunk: Some(4096),
                join_gap: self.gap,
            }
        }
    }

    #[test]
    fn many_ranges_are_read_once_each_several_at_once() {
        for threads in [None, Some(4)] {
            let source = Slow {
                bytes: (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect(),
                threads,
                gap: None,
                read: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                most: AtomicUsize::new(0),
            };
            let mut sparse = Sparse::new(&source).unwrap();
            sparse.fill(100, 200).unwrap();
            // Overlapping, touching what was read, past the end, empty.
            let ranges = [
                (150, 260),
                (250, 300),
                (1000, 1100),
                (2000, 2010),
                (3000, 3050),
                (9990, 20_000),
                (500, 500),
            ];
            sparse.fill_many(&ranges).unwrap();
            let covered = |i: u64| {
                (100..200).contains(&i)
                    || ranges.iter().any(|&(a, b)| (a..b.min(10_000)).contains(&i))
            };
            let expected: u64 = (0..10_000).filter(|&i| covered(i)).count() as u64;
            assert_eq!(source.bytes_read(), expected, "{threads:?}: each byte once");
            for (i, &b) in sparse.bytes().iter().enumerate() {
                let want = if covered(i as u64) {
                    source.bytes[i]
                } else {
                    0
                };
                assert_eq!(b, want, "{threads:?}: byte {i}");
            }
            let most = source.most.load(Ordering::SeqCst);
            match threads {
                None => assert_eq!(most, 1, "a file's reads one after another"),
                Some(_) => assert!(most > 1, "reads at once: {most}"),
            }
        }
    }

    #[test]
    fn ranges_closer_than_the_gap_are_joined_up_to_a_chunk() {
        let r = vec![(0, 10), (15, 20), (30, 40), (100, 110)];
        assert_eq!(join(r.clone(), 0, 1000), r);
        // Gaps 5, 10, 60: a gap of 10 joins the first two only (5 < 10).
        assert_eq!(join(r.clone(), 10, 1000), [(0, 20), (30, 40), (100, 110)]);
        assert_eq!(join(r.clone(), 11, 1000), [(0, 40), (100, 110)]);
        assert_eq!(join(r.clone(), 100, 1000), [(0, 110)]);
        // No span past `most`.
        assert_eq!(join(r, 100, 40), [(0, 40), (100, 110)]);
        // Through a source that asks for joins: one read of [1000, 3050)
        // for three ranges, the bytes between them copied too.
        let source = Slow {
            bytes: (0..10_000u32).map(|i| (i % 251) as u8 + 1).collect(),
            threads: Some(4),
            gap: Some(1024),
            read: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        };
        let mut sparse = Sparse::new(&source).unwrap();
        sparse
            .fill_many(&[(1000, 1100), (2000, 2010), (3000, 3050)])
            .unwrap();
        assert_eq!(source.bytes_read(), 2050);
        assert_eq!(&sparse.bytes()[1000..3050], &source.bytes[1000..3050]);
        assert_eq!(source.most.load(Ordering::SeqCst), 1);
    }
}
